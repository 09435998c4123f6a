#!/usr/bin/env bash
# What apply itself costs a torch step (python/bench/apply_cost.py), with the host's FMA
# peak before and after: every tensor in DRAM, torch against torch (the noise floor),
# a Python dispatch mode that only calls the op, and apply's C++ op hook.
#
# Usage: scripts/torch/apply-cost.sh [--model resnet18|bert-tiny|...] [--batch N] [--steps N]
set -Eeuo pipefail
trap 'echo "apply-cost.sh: error: \"$BASH_COMMAND\" failed (exit $?) at line $LINENO" >&2' ERR
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
cargo build --release -q
PY=$(PLACER_TORCH_PROFILE=release scripts/torch/venv.sh)
echo "host FMA peak before: $(scripts/fma-peak.sh) GFLOP/s"
"$PY" python/bench/apply_cost.py --placer target/release/placer "$@"
echo "host FMA peak after: $(scripts/fma-peak.sh) GFLOP/s"
