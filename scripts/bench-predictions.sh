#!/usr/bin/env bash
# Prediction error per strategy, side by side for several placer binaries: each runs
# `placer pipeline MODEL ARGS...` on a fresh checkpoint directory (its own profile,
# calibration, solve and run), the binaries alternating (A, B, A, B, ...) so the host's
# drift falls on each alike. Prints one row per run: every strategy's raw error, the
# worst |error|, the worst |error| once every prediction carries the anchor's shift
# (all-DRAM's second copy, A′, against its prediction) and A against A′ (the run's
# noise floor), the ILP plan's time between kernels ("rest": step median minus its
# kernels, copy waits and blocking copies) against the median rest of the baselines,
# and the ILP plan against the best baseline (> 1: the plan is faster; "level" when the
# medians differ by less than their MADs together, as the pipeline's summary says).
#   scripts/bench-predictions.sh ROUNDS MODEL.json "PIPELINE ARGS" PLACER [PLACER ...]
set -euo pipefail
rounds=$1 model=$2 args=$3
shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
first=1
for r in $(seq 1 "$rounds"); do
  for bin in "$@"; do
    dir="$tmp/$r-$(basename "$bin")"
    # shellcheck disable=SC2086 # ARGS is a list of options
    "$bin" pipeline "$model" $args -o "$dir/report" --checkpoint-dir "$dir/ck" >"$dir.log" 2>&1 ||
      { echo "run $r, $bin: failed; its log:" >&2; tail -5 "$dir.log" >&2; exit 1; }
    python3 - "$dir/report" "$r" "$bin" "$first" <<'PY'
import json, statistics, sys
d, run, binary, first = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
comparison = json.load(open(f"{d}/comparison.json"))
rows = comparison["rows"]
measured = {m["name"]: m for m in json.load(open(f"{d}/measured.json"))}
def rest(name):
    m = measured[name]
    return (m["step_ns"]["median"] - sum(m["kernel_ns"]) - sum(m["copy_wait_ns"]) - m["blocking_ns"]) / 1e6
ilp = next(r for r in rows if r["name"].startswith("ilp"))
baselines = [r for r in rows if r is not ilp and r["name"] != "all-dram"]
best = min(baselines, key=lambda r: r["measured_ms"])
if first:
    print("| run | binary | " + " | ".join(r["name"] for r in rows) +
          " | worst | worst anchored | A vs A′ | ILP rest ms (baselines') | ILP vs best baseline |")
    print("|---|---|" + "---:|" * (len(rows) + 5))
anchored = [abs(r["anchored_error"]) for r in rows if r.get("anchored_error") is not None and r["name"] != "all-dram"]
floor = (comparison.get("anchor") or {}).get("noise_floor")
print(f"| {run} | {binary} | " + " | ".join(f"{100*r['error']:+.1f}%" for r in rows) +
      f" | {100*max(abs(r['error']) for r in rows):.1f}%"
      f" | {f'{100*max(anchored):.1f}%' if anchored else '–'}"
      f" | {f'{100*floor:+.1f}%' if floor is not None else '–'}"
      f" | {rest(ilp['name']):.1f} ({statistics.median(rest(b['name']) for b in baselines):.1f})"
      f" | {best['measured_ms']/ilp['measured_ms']:.3f}× {best['name']}"
      f"{' (level: within the MADs)' if abs(best['measured_ms'] - ilp['measured_ms']) < best['mad_ms'] + ilp['mad_ms'] else ''} |")
PY
    first=0
  done
done
