#!/usr/bin/env bash
# The README's first command as a new user runs it: `placer pipeline` on a fresh host cache
# and a fresh checkpoint directory, so the DRAM baseline, the profile, the copy probe and
# the run all happen in one process for the first time. Several placer binaries
# alternate (A, B, A, B, ...), so the host's drift falls on each alike. Prints, per run,
# every strategy's raw prediction error and all-DRAM's, and the mean |error| of the
# plan rows raw and drift-corrected (all-DRAM's ms added).
#   scripts/bench-first-run.sh ROUNDS PLACER [PLACER ...]
set -euo pipefail
rounds=$1
shift
tmp=$(mktemp -d)
echo "| run | binary | all-DRAM error | plan rows: mean \\|error\\| raw | drift-corrected | worst raw | within ±5% raw |"
echo "|---|---|---:|---:|---:|---:|---:|"
for r in $(seq 1 "$rounds"); do
  for bin in "$@"; do
    dir="$tmp/$r-$(basename "$bin")"
    mkdir -p "$dir/cache"
    PLACER_CACHE_DIR="$dir/cache" "$bin" pipeline -o "$dir/report" --checkpoint-dir "$dir/ck" >"$dir/log" 2>&1
    python3 - "$dir/report/comparison.json" "$r" "$bin" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
plans = [r for r in rows if r["name"] != "all-dram"]
dram = next(r for r in rows if r["name"] == "all-dram")
raw = [abs(r["error"]) for r in plans]
fixed = [abs(r["drift_corrected_error"]) for r in plans if r.get("drift_corrected_error") is not None]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {100*dram['error']:+.1f}% | {100*sum(raw)/len(raw):.1f}% | "
      f"{100*sum(fixed)/len(fixed):.1f}% | {100*max(raw):.1f}% | {sum(e <= 0.05 for e in raw)}/{len(raw)} |")
PY
  done
done
rm -rf "$tmp"
