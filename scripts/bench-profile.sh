#!/usr/bin/env bash
# Profiling goals (issue 5), on DRAM plus the emulated pmem pool. Sections (default all):
#  lenet        lenet-mnist b256: two full single-config profiles (the second is the noise
#               floor: single against itself) and a full simultaneous one, compared.
#  resnet50     resnet50 b1: a full simultaneous profile against a single-config sample of
#               200 configurations (1 round).
#  densenet121  the same for densenet121 b1.
#  checkpoint   loading, saving and merging a checkpoint of 1M measurements (Criterion).
# Run on a quiet machine; all of it takes about 40 minutes on the 2-core VM.
set -euo pipefail
cd "$(dirname "$0")/.."
sections=${*:-lenet resnet50 densenet121 checkpoint}
cargo build --release -q
placer=target/release/placer
work=$(mktemp -d)
export PLACER_CACHE_DIR="$work/cache"
summary() { "$placer" compare "$@" | grep -E '^\s+(mode|passes|wall time)|≥ |< .*tiny' || true; }
quick="--reps 3 --max-reps 9 --warmup 1 --design full --round-noise 0"

for section in $sections; do
  case $section in
  lenet)
    echo "== lenet-mnist b256: full profiles (3 rounds of 3-9 steps per pass)"
    "$placer" zoo lenet-mnist --batch 256 -o "$work/lenet.json" 2>/dev/null
    for run in single-a single-b; do
      "$placer" profile "$work/lenet.json" --checkpoint-dir "$work/$run" --max-simultaneous 1 $quick | grep -E 'passes|wall'
    done
    "$placer" profile "$work/lenet.json" --checkpoint-dir "$work/sim" $quick | grep -E 'passes|wall'
    echo "-- simultaneous (B) against single (A), with single's repeat as the noise floor"
    for us in 50 200; do
      summary "$work"/single-a/*.ckpt "$work"/sim/*.ckpt --repeat "$work"/single-b/*.ckpt --min-us $us
    done
    summary "$work"/single-b/*.ckpt "$work"/sim/*.ckpt
    ;;
  resnet50 | densenet121)
    echo "== $section b1: simultaneous profile against a 200-configuration single sample (1 round)"
    "$placer" zoo "$section" --batch 1 -o "$work/$section.json" 2>/dev/null
    "$placer" profile "$work/$section.json" --checkpoint-dir "$work/$section-sim" --rounds 1 $quick | grep -E 'configurations|grouped|passes|wall'
    "$placer" profile "$work/$section.json" --plan-only --max-simultaneous 1 | grep -E 'passes'
    "$placer" profile "$work/$section.json" --checkpoint-dir "$work/$section-single" --max-simultaneous 1 --sample 200 --rounds 1 $quick | grep -E 'wall'
    summary "$work/$section"-single/*.ckpt "$work/$section"-sim/*.ckpt
    ;;
  checkpoint)
    echo "== checkpoint of 1M measurements"
    cargo bench -q -p placer-profile --bench checkpoint -- --noplot 2>&1 | grep -E 'MB|time:' | sed 's/^ *//'
    ;;
  *) echo "unknown section '$section'" >&2; exit 2 ;;
  esac
done
echo "checkpoints in $work"
