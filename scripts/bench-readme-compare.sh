#!/usr/bin/env bash
# The README's comparison, as a new user runs it, with defaults: on LeNet b256, a
# single-config profile (A) and a simultaneous one (B), then a repeat of each (A′, B′),
# in that order so each pair is as far apart in time, then the README's `compare A B
# --repeat A′` and, for the record, with `--repeat-b B′` too (the floor from both
# profiles' noise). Prints the host's FMA peak before and after, each
# profile's wall time, and compare's verdicts and exit codes.
#   scripts/bench-readme-compare.sh [PLACER_BINARY]   (default: the release build)
# At scale, the same four profiles of another model, e.g. a sample of its
# configurations (the same sample in every profile: --sample-seed is fixed):
#   MODEL=resnet50.json PROFILE_ARGS="--sample 150" scripts/bench-readme-compare.sh
# WORK=DIR keeps the checkpoints there (default: a new temporary directory).
set -uo pipefail
cd "$(dirname "$0")/.."
placer=${1:-target/release/placer}
[ $# -ge 1 ] || cargo build --release -q
model=${MODEL:-configs/models/lenet-mnist-b256.json}
read -r -a extra <<< "${PROFILE_ARGS:-}"
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
echo "FMA peak before: $(scripts/fma-peak.sh) GFLOP/s"
for run in A B A2 B2; do
  flags=(--design full --checkpoint-dir "$work/$run" "${extra[@]}")
  case $run in A*) flags+=(--max-simultaneous 1) ;; esac
  start=$(date +%s.%N)
  "$placer" profile "$model" "${flags[@]}" > "$work/$run.log" 2>&1 || { echo "profile $run failed: see $work/$run.log"; exit 1; }
  echo "$run: $(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s"
done
"$placer" compare "$work"/A/*.ckpt "$work"/B/*.ckpt --repeat "$work"/A2/*.ckpt
echo "compare exit $?"
echo "--- with both repeats (--repeat-b B2):"
"$placer" compare "$work"/A/*.ckpt "$work"/B/*.ckpt --repeat "$work"/A2/*.ckpt --repeat-b "$work"/B2/*.ckpt 2>&1 |
  grep -E "^  (≥|A vs|B vs|noise)|^profiles|^error"
echo "compare (both repeats) exit ${PIPESTATUS[0]}"
echo "FMA peak after: $(scripts/fma-peak.sh) GFLOP/s"
echo "checkpoints in $work"
