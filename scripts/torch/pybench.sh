#!/usr/bin/env bash
# Runs one of python/bench's scripts against this checkout's release build, in the torch
# venv, with the host's FMA peak printed before and after (timings are read beside it).
#
# Usage: scripts/torch/pybench.sh SCRIPT.py [ARGS...]   (SCRIPT.py: a file of python/bench)
set -Eeuo pipefail
trap 'echo "pybench.sh: error: \"$BASH_COMMAND\" failed (exit $?) at line $LINENO" >&2' ERR
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
[ $# -ge 1 ] && [ -f "python/bench/$1" ] || { echo "pybench.sh: usage: pybench.sh SCRIPT.py [ARGS...] (a file of python/bench)" >&2; exit 2; }
script=$1
shift
cargo build --release -q
PY=$(PLACER_TORCH_PROFILE=release scripts/torch/venv.sh)
echo "host FMA peak before: $(scripts/fma-peak.sh) GFLOP/s"
"$PY" "python/bench/$script" --placer target/release/placer "$@"
echo "host FMA peak after: $(scripts/fma-peak.sh) GFLOP/s"
