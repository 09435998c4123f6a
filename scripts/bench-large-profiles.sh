#!/usr/bin/env bash
# Issue 48, item 5: DenseNet-264 b32 and ResNet-200 b32 profiled from an empty checkpoint
# directory with defaults (goal: 30 min each on the 2-core host), then the 25% plan each
# profile feeds, run beside all-DRAM (goal: within ±5% of its prediction).
#
#   scripts/bench-large-profiles.sh [densenet264] [resnet200]     # default: both
#
# Prints the host's FMA peak before and after each profile, the profile's own summary
# lines (wall time, stages, calibrations), `time`'s wall clock and peak RSS, the solve's
# prediction and the run's side-by-side table. KEEP=DIR keeps the work there. About
# 30 + 15 minutes of profiling and 15 of solving and running; run it on a quiet host
# and compile nothing beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
nets=${*:-densenet264 resnet200}
cargo build --release -q
placer=$PWD/target/release/placer
work=${KEEP:-$(mktemp -d)}
mkdir -p "$work"
echo "work in $work; commit $(git rev-parse --short HEAD)"

for net in $nets; do
  dir=$work/$net
  rm -rf "$dir" && mkdir -p "$dir"
  "$placer" zoo "$net" --batch 32 -o "$dir/model.json" >/dev/null
  echo "== $net b32: placer profile, empty checkpoint directory, defaults"
  echo "FMA peak before: $(scripts/fma-peak.sh) GFLOP/s"
  /usr/bin/time -v "$placer" profile "$dir/model.json" --checkpoint-dir "$dir/ckpt" >"$dir/profile.log" 2>"$dir/profile.err"
  echo "FMA peak after: $(scripts/fma-peak.sh) GFLOP/s"
  grep -E '^\s+(passes|round check|wall time|stages|calibrations|validation|predicted) ' "$dir/profile.log"
  grep -E 'Elapsed|Maximum resident' "$dir/profile.err"
  grep -E '^warning' "$dir/profile.err" || true
  echo "-- its 25% plan"
  "$placer" solve "$dir/model.json" --budget 25% --profile "$dir"/ckpt/*.ckpt -o "$dir/plan.json" >"$dir/solve.log" 2>&1
  grep -E '^\s+(solver|predicted) ' "$dir/solve.log"
  "$placer" run "$dir/model.json" --plan "$dir/plan.json" -n 3 --warmup 1 --in-situ "$dir/insitu.json" >"$dir/run.log" 2>&1
  sed -n '/^side by side/,/^$/p' "$dir/run.log"
done
