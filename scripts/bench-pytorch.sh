#!/usr/bin/env bash
# Compares one training step of placer with PyTorch (CPU) on resnet18 b8, mlp b64 and
# lenet-mnist b256, alternating the two in rounds on the same machine, and prints a table
# with the ratio. Arguments go to scripts/bench_pytorch.py (-n, --warmup, --rounds,
# --threads, --models).
#
# PyTorch comes from PyPI, into the venv at $PLACER_TORCH_VENV (default target/torch-venv,
# relative to the repository root); the first run installs torch there (~5 GB with CUDA).
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "bench-pytorch: $*" >&2; exit 1; }

venv=${PLACER_TORCH_VENV:-target/torch-venv}
if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv" || die "could not create a venv at $venv (on Debian: apt-get install python3-venv)"
fi
# 2>/dev/null: torch warns on import when numpy is missing, which does not matter here.
if ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
    echo "bench-pytorch: installing torch from PyPI into $venv" >&2
    "$venv/bin/python" -m pip install torch >&2 || die "pip install torch into $venv failed"
fi

cargo build --release >&2 || die "cargo build --release failed"
bin=${CARGO_TARGET_DIR:-target}/release/placer
[[ -x $bin ]] || die "no placer binary at $bin after the build"
# Others build in the same target dir: run a private copy so the binary cannot change
# between rounds.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$bin" "$tmp/placer"

"$venv/bin/python" scripts/bench_pytorch.py --placer "$tmp/placer" "$@" || die "benchmark failed"
