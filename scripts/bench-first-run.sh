#!/usr/bin/env bash
# The README's first command as a new user runs it: `placer pipeline` on a fresh host cache
# and a fresh checkpoint directory, so the DRAM baseline, the profile, the copy probe and
# the run all happen in one process for the first time. Several placer binaries
# alternate (A, B, A, B, ...), so the host's drift falls on each alike. Prints, per run,
# all-DRAM's prediction error and the mean |error| of the other rows, raw and with
# all-DRAM's error in ms added to each prediction (the drift correction placer showed
# until it stopped making errors smaller; docs/running.md).
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
drift = dram["measured_ms"] - dram["predicted_ms"]
fixed = [abs(r["measured_ms"] / (r["predicted_ms"] + drift) - 1) for r in plans]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {100*dram['error']:+.1f}% | {100*sum(raw)/len(raw):.1f}% | "
      f"{100*sum(fixed)/len(fixed):.1f}% | {100*max(raw):.1f}% | {sum(e <= 0.05 for e in raw)}/{len(raw)} |")
PY
  done
done
rm -rf "$tmp"
