#!/usr/bin/env bash
# Solver scale (issue 6): every formulation on the zoo's large training graphs at budgets of
# 10%, 25% and 50% of peak live memory, kernel times from the cost model (no profile), DRAM
# plus the emulated pmem pool of this host. Prints one table row per solve, read from the
# plan each writes: model size, solve time, time to the first feasible plan, the proven gap
# (of the step time, and of what the placement adds), and the predicted step time against
# all-DRAM and against the best baseline.
#   scripts/bench-solve.sh [MODELS...]   (default: resnet50 densenet121 resnet200 densenet264)
# Environment: FORMULATIONS (default "static sync async"), BUDGETS (default "10% 25% 50%"),
# BATCH (default 32), TIME_LIMIT (default 300). Async solves can take their whole time limit,
# so all of it takes about an hour on the 2-core VM. Run on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
models=${*:-resnet50 densenet121 resnet200 densenet264}
formulations=${FORMULATIONS:-static sync async}
budgets=${BUDGETS:-10% 25% 50%}
batch=${BATCH:-32}
limit=${TIME_LIMIT:-300}
cargo build --release -q
# How fast the host was (issue 22): the FMA peak, measured before the table and after it.
fma_peak() { scripts/fma-peak.sh; }
echo "host FMA peak before: $(fma_peak) GFLOP/s"
placer=target/release/placer
work=$(mktemp -d)
echo "| model | kernels | formulation | budget | variables | binaries | constraints | solve s (all stages) | first feasible s | status | gap of step | gap of placement cost | step / all-DRAM | best baseline / plan |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for m in $models; do
  "$placer" zoo "$m" --batch "$batch" -o "$work/$m.json" >/dev/null 2>&1
  for f in $formulations; do
    for b in $budgets; do
      out="$work/$m-$f-${b%\%}.json"
      log="$work/$m-$f-${b%\%}.log"
      if ! "$placer" solve "$work/$m.json" --budget "$b" --formulation "$f" --time-limit "$limit" --baselines -o "$out" >"$log" 2>&1; then
        echo "| $m b$batch | | $f | $b | failed: $(tail -1 "$log") |"
        continue
      fi
      python3 - "$out" "$m b$batch" "$f" "$b" "$log" <<'PY'
import json, re, sys
plan = json.load(open(sys.argv[1]))
log = open(sys.argv[5]).read()
s = plan.get("solver") or {}
size = s.get("size", {})
all_dram = re.search(r"= ([0-9.]+)× all-DRAM", log)
best = re.search(r"best baseline +.+? [0-9.]+ ms \(([0-9.]+)× the plan\)", log)
ff = s.get("first_feasible_seconds")
def pct(v, digits):
    return "-" if v is None else f"{100 * v:.{digits}f}%"
print("| {} | {} | {} | {} | {:,} | {:,} | {:,} | {:.1f} | {} | {} | {} | {} | {} | {} |".format(
    sys.argv[2], len(plan["kernels"]), sys.argv[3], sys.argv[4],
    size.get("variables", 0), size.get("binaries", 0), size.get("constraints", 0),
    s.get("total_seconds") or s.get("solve_seconds") or 0.0, "-" if ff is None else f"{ff:.1f}",
    s.get("status", plan["strategy"]), pct(s.get("gap_of_step"), 3), pct(s.get("gap"), 1),
    all_dram.group(1) if all_dram else "-", best.group(1) if best else "-"))
PY
    done
  done
done
echo "host FMA peak after: $(fma_peak) GFLOP/s"
