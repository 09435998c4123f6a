#!/usr/bin/env bash
# The large async solves against their goal (issue 49): each model at 10/25/50% of peak
# live memory, `--formulation async`, with a time limit of 20 s and of 120 s, kernel times
# from the cost model. One row per solve: wall time, that time scaled to a host with an
# FMA peak of 558 GFLOP/s (the fastest seen on this machine kind: seconds × peak / 558,
# so hosts of different speed compare), where the time went by stage (read from the
# plan's `solver.stages`), and the proven gap as a share of the step.
#   scripts/bench-solve-progress.sh [MODELS...]   (default: resnet200 densenet264)
# Environment: BUDGETS (default "10% 25% 50%"), LIMITS (default "20 120"), BATCH (32),
# SOLVE_ARGS (more `placer solve` arguments, e.g. "--no-sync-first" or "--window-workers 1"),
# NEIGHBOURS (busy loops beside the solves, to stand for a slower host; default 0).
# About 15 minutes for the defaults. Run on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
models=${*:-resnet200 densenet264}
budgets=${BUDGETS:-10% 25% 50%}
limits=${LIMITS:-20 120}
batch=${BATCH:-32}
cargo build --release -q
placer=target/release/placer
work=$(mktemp -d)
# NEIGHBOURS=n busy loops run beside the solves and the FMA measurements: a slower,
# shared host, as the FMA peak printed with them shows. Started here, stopped by
# process id on exit.
neighbours=()
stop() {
  for p in "${neighbours[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap stop EXIT
for _ in $(seq 1 "${NEIGHBOURS:-0}"); do
  (while :; do :; done) &
  neighbours+=($!)
done
[ "${NEIGHBOURS:-0}" -gt 0 ] && echo "with $NEIGHBOURS busy-loop neighbour(s) beside every solve (pids ${neighbours[*]})"
peak=$(scripts/fma-peak.sh)
echo "host FMA peak before: $peak GFLOP/s"
echo "| model | budget | limit s | wall s | wall × peak/558 | all-DRAM laid out; baselines: placed, laid out, checked s | sync: built, solved s | async: built, bound, priced plan, windows, HiGHS s | windows: improved of solved (dropped), at once | plan: laid out, checked s | proven gap of step | step / all-DRAM |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for m in $models; do
  "$placer" zoo "$m" --batch "$batch" -o "$work/$m.json" >/dev/null 2>&1
  for b in $budgets; do
    for limit in $limits; do
      out="$work/$m-${b%\%}-$limit.json"
      log="$work/$m-${b%\%}-$limit.log"
      t0=$(date +%s.%N)
      if ! "$placer" solve "$work/$m.json" --budget "$b" --formulation async --time-limit "$limit" ${SOLVE_ARGS:-} -o "$out" >"$log" 2>&1; then
        echo "| $m b$batch | $b | $limit | failed: $(tail -1 "$log") |"
        continue
      fi
      t1=$(date +%s.%N)
      python3 - "$out" "$m b$batch" "$b" "$limit" "$t0" "$t1" "$peak" "$log" <<'PY'
import json, re, sys
plan = json.load(open(sys.argv[1]))
name, budget, limit, t0, t1, peak, log = sys.argv[2:9]
wall = float(t1) - float(t0)
s = plan.get("solver") or {}
stages = s.get("stages", [])
def total(stage, of=None, baseline=False):
    return sum(x["seconds"] for x in stages if x["stage"] == stage
               and (of is None or x["of"] == of)
               and (not baseline or x["of"] not in ("sync", "async", "static", "plan", "all-dram")))
base = "{:.1f}; {:.1f}, {:.1f}, {:.1f}".format(total("lay-out", "all-dram"), total("place", "baselines"),
                                             total("lay-out", baseline=True), total("check", baseline=True))
sync = "{:.1f}, {:.1f}".format(total("build", "sync"), total("highs", "sync") + total("windows", "sync"))
asyn = "{:.1f}, {:.1f}, {:.1f}, {:.1f}, {:.1f}".format(total("build", "async"), total("bound", "async"),
                                                       total("priced", "async"), total("windows", "async"),
                                                       total("highs", "async"))
w = s.get("windows")
wins = "-" if not w else "{} of {} ({}), {}".format(w["improved"], w["windows"], w.get("conflicts", 0), w.get("workers", 1))
planned = "{:.1f}, {:.1f}".format(total("lay-out", "plan"), total("check", "plan"))
ratio = re.search(r"= ([0-9.]+)× all-DRAM", open(log).read())
gap = s.get("gap_of_step")
print("| {} | {} | {} | {:.1f} | {:.1f} | {} | {} | {} | {} | {} | {} | {} |".format(
    name, budget, limit, wall, wall * float(peak) / 558.0, base, sync, asyn, wins, planned,
    "-" if gap is None else f"{100 * gap:.2f}%", ratio.group(1) if ratio else "-"))
PY
    done
  done
done
echo "host FMA peak after: $(scripts/fma-peak.sh) GFLOP/s"
