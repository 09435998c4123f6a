#!/usr/bin/env bash
# Results born in their planned pool against results born in torch's memory, under one
# plan, in one process (python/bench/births.py), with the host's FMA peak before and
# after: step time against torch alone (twice: the noise floor), the DRAM peak apply
# tracked and how much of it the plan did not place.
#
# Usage: scripts/torch/births.sh [--model resnet18|resnet50|bert-tiny|...] [--batch N] [--budget B] [--steps N] [--release]
set -Eeuo pipefail
trap 'echo "births.sh: error: \"$BASH_COMMAND\" failed (exit $?) at line $LINENO" >&2' ERR
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
cargo build --release -q
PY=$(PLACER_TORCH_PROFILE=release scripts/torch/venv.sh)
echo "host FMA peak before: $(scripts/fma-peak.sh) GFLOP/s"
"$PY" python/bench/births.py --placer target/release/placer "$@"
echo "host FMA peak after: $(scripts/fma-peak.sh) GFLOP/s"
