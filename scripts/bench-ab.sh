#!/usr/bin/env bash
# Two placer binaries side by side on whole training steps: `placer run MODEL -n N
# --warmup 1` for each, in ABBA order (A B, B A, A B, B A), one line per run with its
# step median in ms, and the host's FMA peak before and after. For a change's effect on
# step time: build the old commit's binary, copy it aside, build the new one.
#   scripts/bench-ab.sh OLD_BINARY NEW_BINARY MODEL.json...   (N=steps, default 5)
# Run on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { echo "usage: scripts/bench-ab.sh OLD_BINARY NEW_BINARY MODEL.json..." >&2; exit 2; }
old=$1
new=$2
shift 2
steps=${N:-5}
echo "FMA peak before: $(scripts/fma-peak.sh) GFLOP/s"
for model in "$@"; do
  for order in "old new" "new old" "old new" "new old"; do
    for which in $order; do
      if [ "$which" = old ]; then bin=$old; else bin=$new; fi
      ms=$("$bin" run "$model" -n "$steps" --warmup 1 --json |
        python3 -c "import json, sys; print(f\"{json.load(sys.stdin)['step_ms']['median']:.1f}\")")
      echo "$model $which $ms"
    done
  done
done
echo "FMA peak after: $(scripts/fma-peak.sh) GFLOP/s"
