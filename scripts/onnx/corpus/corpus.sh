#!/usr/bin/env bash
# Regenerate the corpus of real exports in tests/data/onnx-corpus (committed).
#
# Usage: scripts/onnx/corpus/corpus.sh [WORKDIR] [NAME.EXPORTER ...]
#
# With NAME.EXPORTER arguments (e.g. bert_sdpa.ts vit_b_16.dynamo; NAME.train also makes
# NAME.ort), only those are exported and stripped, and the manifest keeps every other
# entry as it was: the committed files of the others stay byte for byte.
#
# Not part of the build or the tests: the tests read the committed, stripped files.
# This script is how they were made, with the real tools from PyPI:
#   - torch, torchvision, transformers, onnx and onnxscript (a ~6 GB venv with CUDA
#     wheels), in $PLACER_CORPUS_VENV (default ~/.cache/placer/corpus/venv);
#   - onnx 1.17 and onnxruntime-training 1.19.2 for the training graphs, in
#     $PLACER_ORT_VENV (default ~/.cache/placer/corpus/ort-venv).
# WORKDIR (default: a temporary directory, removed afterwards) holds the full exports.
# Exports are deterministic up to the exporters' own naming; the manifest records each
# stripped file's sha256, which the tests check.
set -Eeuo pipefail
PROG=corpus.sh
die() { echo "$PROG: error: $*" >&2; exit 1; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
DEST=$REPO/tests/data/onnx-corpus

TORCH_PINS=(torch==2.15.0 torchvision==0.29.2 transformers==5.24.0 onnx==1.23.2 onnxscript==0.7.2 numpy==2.4.6)
ORT_PINS=(onnx==1.17.0 onnxruntime-training==1.19.2 numpy==2.4.6 protobuf==5.29.6 cerberus==1.3.8
          flatbuffers==25.12.19 h5py==3.16.0 packaging==26.3 sympy==1.14.0 mpmath==1.3.0)
TORCH_VENV=${PLACER_CORPUS_VENV:-$HOME/.cache/placer/corpus/venv}
ORT_VENV=${PLACER_ORT_VENV:-$HOME/.cache/placer/corpus/ort-venv}

command -v python3 >/dev/null || die "python3 not found"

# venv DIR PINS...: create or update DIR with exactly these pins.
venv() {
    local dir=$1
    shift
    local stamp="$(python3 --version 2>&1); $*"
    if [ -f "$dir/.placer-stamp" ] && [ "$(cat "$dir/.placer-stamp")" = "$stamp" ]; then
        return
    fi
    echo "$PROG: installing $* into $dir" >&2
    python3 -m venv "$dir" || die "cannot create a venv at $dir (Debian: apt-get install python3-venv)"
    PIP_NO_INPUT=1 "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$@" \
        || die "pip install into $dir failed"
    printf '%s\n' "$stamp" >"$dir/.placer-stamp"
}
venv "$TORCH_VENV" "${TORCH_PINS[@]}"
venv "$ORT_VENV" "${ORT_PINS[@]}"

if [ $# -ge 1 ] && [[ $1 != *.* || -d $1 ]]; then
    WORK=$1
    shift
    mkdir -p "$WORK"
else
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
fi
rm -rf "$WORK/raw"
"$TORCH_VENV/bin/python" "$HERE/export_torch.py" "$WORK" "$@" 2> >(grep -v '^\[torch.onnx\]' >&2)
"$ORT_VENV/bin/python" "$HERE/make_training.py" "$WORK" 2> >(grep -vE '^\S+ \S+ \[I:onnxruntime' >&2)
if [ $# -ge 1 ]; then
    # Only these: stripped into the committed corpus, merged into its manifest.
    "$TORCH_VENV/bin/python" "$HERE/strip.py" "$WORK" "$DEST" --merge
else
    rm -rf "$DEST.new"
    "$TORCH_VENV/bin/python" "$HERE/strip.py" "$WORK" "$DEST.new"
    rm -rf "$DEST"
    mv "$DEST.new" "$DEST"
fi
echo "$PROG: wrote $(ls "$DEST" | wc -l) files to $DEST" >&2
