#!/usr/bin/env bash
# The README's comparison, as a new user runs it, with defaults: on LeNet b256, two
# single-config profiles (A and its repeat A′, the noise floor) and a simultaneous one
# (B), then `compare A B --repeat A′`. Prints the host's FMA peak before and after, each
# profile's wall time, and compare's verdict and exit code.
#   scripts/bench-readme-compare.sh [PLACER_BINARY]   (default: the release build)
set -uo pipefail
cd "$(dirname "$0")/.."
placer=${1:-target/release/placer}
[ $# -ge 1 ] || cargo build --release -q
model=configs/models/lenet-mnist-b256.json
work=$(mktemp -d)
echo "FMA peak before: $(scripts/fma-peak.sh) GFLOP/s"
for run in A A2 B; do
  flags=(--design full --checkpoint-dir "$work/$run")
  [ "$run" = B ] || flags+=(--max-simultaneous 1)
  start=$(date +%s.%N)
  "$placer" profile "$model" "${flags[@]}" > "$work/$run.log" 2>&1 || { echo "profile $run failed: see $work/$run.log"; exit 1; }
  echo "$run: $(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s"
done
"$placer" compare "$work"/A/*.ckpt "$work"/B/*.ckpt --repeat "$work"/A2/*.ckpt
echo "compare exit $?"
echo "FMA peak after: $(scripts/fma-peak.sh) GFLOP/s"
echo "checkpoints in $work"
