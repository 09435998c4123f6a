#!/usr/bin/env bash
# Plans executed for real (issue 7): `placer pipeline` on each model at budgets of 10%, 25%
# and 50% of peak live memory, DRAM plus this host's EMULATED Optane pool. Each run profiles
# (resuming the model's checkpoint after the first budget), solves (async), then runs the
# ILP plan, every baseline and all-DRAM interleaved in one process. Prints one row per
# budget from the report's comparison.json: the ILP's measured and predicted step, the
# prediction error, all-DRAM's own error in the same run (what host drift and cache context
# did to the plan with no placement), the
# ILP against all-DRAM, and first-touch against the ILP.
#   scripts/bench-pipeline.sh [NAME:BATCH:ROUNDS:ITERATIONS ...]
#   default: lenet-mnist:256:3:30 resnet50:2:1:10 bert-tiny:32:3:30
# Environment: BUDGETS (default "10% 25% 50%"), TIME_LIMIT (solver, default 300), OUT
# (default reports/bench). About an hour on the 2-core VM, most of it profiling ResNet-50.
# Run on a quiet machine: a build beside it skews every figure.
set -euo pipefail
cd "$(dirname "$0")/.."
specs=${*:-lenet-mnist:256:3:30 resnet50:2:1:10 bert-tiny:32:3:30}
budgets=${BUDGETS:-10% 25% 50%}
limit=${TIME_LIMIT:-300}
out=${OUT:-reports/bench}
cargo build --release -q
placer=target/release/placer
mkdir -p "$out"
echo "| model | budget | ILP measured ms | ILP predicted ms | error | all-DRAM's error | ILP / all-DRAM | first-touch / ILP | best baseline / ILP | moves (blocking + background) | DRAM peak / budget |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for spec in $specs; do
  IFS=: read -r name batch rounds iterations <<<"$spec"
  model="$out/$name-b$batch.json"
  if [[ $name == lenet-mnist && $batch == 256 ]]; then
    model=configs/models/lenet-mnist-b256.json
  else
    "$placer" zoo "$name" --batch "$batch" -o "$model" >/dev/null
  fi
  for b in $budgets; do
    dir="$out/$name-b$batch-${b%\%}"
    log="$dir.log"
    if ! "$placer" pipeline "$model" --budget "$b" --rounds "$rounds" -n "$iterations" --time-limit "$limit" -o "$dir" >"$log" 2>&1; then
      echo "| $name b$batch | $b | failed: $(tail -1 "$log") |"
      continue
    fi
    python3 - "$dir/comparison.json" "$name b$batch" "$b" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
ilp = rows[0]
by = {r["name"]: r for r in rows}
ft = by.get("first-touch")
dram = by.get("all-dram")
baselines = [r for r in rows[1:] if r["name"] != "all-dram"]
best = min(baselines, key=lambda r: r["measured_ms"]) if baselines else None
pct = lambda x: "–" if x is None else f"{100 * x:+.1f}%"
ratio = lambda a, b: "–" if a is None or b is None else f"{a / b:.2f}×"
print(f"| {sys.argv[2]} | {sys.argv[3]} | {ilp['measured_ms']:.3f} ± {ilp['mad_ms']:.3f} | {ilp['predicted_ms']:.3f} "
      f"| {pct(ilp['error'])} | {pct(dram and dram['error'])} "
      f"| {ratio(ilp['measured_ms'], dram and dram['measured_ms'])} | {ratio(ft and ft['measured_ms'], ilp['measured_ms'])} "
      f"| {ratio(best and best['measured_ms'], ilp['measured_ms'])} ({best['name'] if best else '–'}) "
      f"| {ilp['blocking_moves']} + {ilp['background_moves']} | {ilp['dram_peak_bytes'] / 2**20:.2f} / {ilp['budget_bytes'] / 2**20:.2f} MiB |")
PY
  done
done
