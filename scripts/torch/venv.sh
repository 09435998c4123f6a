#!/usr/bin/env bash
# Provides the Python environment of placer's torch package (python/) and prints its
# python's path: torch, torchvision and transformers from PyPI, pinned (with ninja, which
# builds the op hook), and placer_torch built from this checkout (maturin, PyO3) into it.
#
# Usage: scripts/torch/venv.sh        (prints the venv's python on stdout; logs on stderr)
#
# PLACER_TORCH_PROFILE picks the cargo profile of the package's Rust core: `dev` (the
# default: the test build's, so after `cargo test` only the core itself compiles) or
# `release` (scripts/torch/bench.sh, and what `pip install ./python` builds).
#
# The venv lives in $PLACER_TORCH_VENV (default ~/.cache/placer/torch/venv), outside the
# repository: PyPI's torch needs its CUDA libraries even to import on a CPU, ~5.7 GB.
# Installed once per pin set (a stamp file records it); placer_torch is rebuilt on every
# call, which cargo makes incremental. Safe to run concurrently (flock).
set -Eeuo pipefail
PROG=venv.sh
die() { echo "$PROG: error: $*" >&2; exit 1; }
trap 'echo "$PROG: error: \"$BASH_COMMAND\" failed (exit $?) at line $LINENO" >&2' ERR
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV=${PLACER_TORCH_VENV:-$HOME/.cache/placer/torch/venv}

PINS=(torch==2.15.0 torchvision==0.29.2 transformers==5.24.0 numpy==2.4.6 maturin==1.9.6 ninja==1.13.2)
command -v python3 >/dev/null || die "python3 not found (scripts/install-deps.sh installs it)"
STAMP="$(python3 --version 2>&1); ${PINS[*]}"

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9
if [ ! -f "$VENV/.placer-stamp" ] || [ "$(cat "$VENV/.placer-stamp")" != "$STAMP" ]; then
    echo "$PROG: installing ${PINS[*]} into $VENV (once; torch is a ~5.7 GB download)" >&2
    rm -rf "$VENV"
    python3 -m venv "$VENV" || die "cannot create a venv at $VENV (Debian: apt-get install python3-venv)"
    "$VENV/bin/python" -m pip install -q --upgrade pip >&2
    "$VENV/bin/python" -m pip install -q "${PINS[@]}" >&2 || die "pip install ${PINS[*]} failed"
    echo "$STAMP" > "$VENV/.placer-stamp"
fi
# --no-build-isolation: build with the pinned maturin above instead of fetching one
# (the backend runs `maturin` from PATH).
export PATH="$VENV/bin:$PATH"
PROFILE=${PLACER_TORCH_PROFILE:-dev}
case $PROFILE in dev|release) ;; *) die "PLACER_TORCH_PROFILE must be dev or release, not '$PROFILE'" ;; esac
export MATURIN_PEP517_ARGS="--profile $PROFILE"
"$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation --force-reinstall "$REPO/python" >&2 \
    || die "building placer_torch (pip install ./python) failed"
echo "$VENV/bin/python"
