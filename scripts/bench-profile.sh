#!/usr/bin/env bash
# Profiling goals (issue 5), on DRAM plus the emulated pmem pool:
#  1. lenet-mnist b256: a full single-config profile, a second one (the noise floor:
#     single against itself), and a full simultaneous one; `placer compare` on each pair.
#  2. resnet50 at a small batch: a full simultaneous profile against a single-config
#     sample of 200 configurations.
# Prints each comparison's summary and wall times. Run on a quiet machine; takes about
# 15 minutes on the 2-core VM. Checkpoints go to a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
placer=target/release/placer
work=$(mktemp -d)
export PLACER_CACHE_DIR="$work/cache"
summary() { "$placer" compare "$1" "$2" ${3:-} | grep -E '^\s+(mode|passes|wall time)|≥ 50 µs|< 50 µs|^  kernels' || true; }

echo "== lenet-mnist b256: full profiles (3 rounds of 3-9 steps per pass)"
"$placer" zoo lenet-mnist --batch 256 -o "$work/lenet.json" 2>/dev/null
for run in single-a single-b; do
  "$placer" profile "$work/lenet.json" --checkpoint-dir "$work/$run" --max-simultaneous 1 --reps 3 --max-reps 9 --warmup 1 | grep -E 'passes|wall'
done
"$placer" profile "$work/lenet.json" --checkpoint-dir "$work/sim" --reps 3 --max-reps 9 --warmup 1 | grep -E 'passes|wall'
echo "-- noise floor: single against a repeat of itself"
summary "$work"/single-a/*.ckpt "$work"/single-b/*.ckpt
echo "-- simultaneous against single (A = single)"
summary "$work"/single-a/*.ckpt "$work"/sim/*.ckpt
summary "$work"/single-b/*.ckpt "$work"/sim/*.ckpt

echo
echo "== resnet50 b1: simultaneous profile against a 200-configuration single sample (1 round of 3-5 steps)"
"$placer" zoo resnet50 --batch 1 -o "$work/resnet50.json" 2>/dev/null
"$placer" profile "$work/resnet50.json" --checkpoint-dir "$work/r50-sim" --rounds 1 --reps 3 --max-reps 5 --warmup 1 | grep -E 'configurations|passes|wall'
"$placer" profile "$work/resnet50.json" --checkpoint-dir "$work/r50-single" --max-simultaneous 1 --sample 200 --rounds 1 --reps 3 --max-reps 5 --warmup 1 | grep -E 'passes|wall'
summary "$work"/r50-single/*.ckpt "$work"/r50-sim/*.ckpt
"$placer" compare "$work"/r50-single/*.ckpt "$work"/r50-sim/*.ckpt --svg "$work/r50.svg" > /dev/null 2>&1 || true
echo "checkpoints and plots in $work"
