#!/usr/bin/env bash
# Shards of one profile on this one host, one at a time, as a cluster of identical hosts
# would run them at once; then merge and finish, each timed. Prints what every shard
# costs beyond its measuring (process start-up, loading the model, planning the whole
# profile), the merge's time, the finish (a screening design's second stage and the
# interference calibration, on one host), and, on paper, the wall time on 1, 2, 4, 8,
# 16 and 32 identical hosts from the measured per-pass times (scripts/shard-wall.py).
#
#   scripts/bench-shards.sh MODEL SHARDS [PROFILE OPTIONS...]
#
# e.g. scripts/bench-shards.sh resnet50-b32.json 4. PLACER overrides the binary
# (default target/release/placer); the work happens in a temporary directory, removed
# at the end unless KEEP=1 (then its path is printed: shard-wall.py can be rerun on it).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
model=$(realpath "${1:?usage: bench-shards.sh MODEL SHARDS [PROFILE OPTIONS...]}")
shards=${2:?usage: bench-shards.sh MODEL SHARDS [PROFILE OPTIONS...]}
shift 2
placer=${PLACER:-$repo/target/release/placer}
work=$(mktemp -d)
if [ "${KEEP:-0}" = 1 ]; then echo "bench-shards: work in $work" >&2; else trap 'rm -rf "$work"' EXIT; fi
export PLACER_CACHE_DIR=$work/cache
ck=$work/ck
now() { date +%s.%N; }

# A fresh host cache: the first command measures this host's DRAM baseline, which every
# new host pays once (emulated pools charge from it).
t=$(now)
"$placer" profile "$model" --checkpoint-dir "$ck" --shard "1/$shards" --plan-only "$@" >/dev/null
first_use=$(awk "BEGIN { print $(now) - $t }")
: > "$work/shards.txt"
for i in $(seq 1 "$shards"); do
    t=$(now)
    "$placer" profile "$model" --checkpoint-dir "$ck" --shard "$i/$shards" "$@" > "$work/shard$i.log" 2>&1
    elapsed=$(awk "BEGIN { print $(now) - $t }")
    "$placer" profile "$model" --checkpoint-dir "$ck" --shard "$i/$shards" --export json "$@" \
        > "$work/shard$i.json" 2>/dev/null
    echo "$i $elapsed $work/shard$i.json" >> "$work/shards.txt"
done
# Planning alone, on the host's cache.
t=$(now)
"$placer" profile "$model" --checkpoint-dir "$ck" --shard "1/$shards" --plan-only "$@" >/dev/null
plan_only=$(awk "BEGIN { print $(now) - $t }")
t=$(now)
"$placer" profile merge "$ck"/*-shard*of"$shards".ckpt > "$work/merge.log"
merge=$(awk "BEGIN { print $(now) - $t }")
t=$(now)
"$placer" profile "$model" --checkpoint-dir "$ck" "$@" > "$work/finish.log" 2>&1
finish=$(awk "BEGIN { print $(now) - $t }")
"$placer" profile "$model" --checkpoint-dir "$ck" --export json "$@" > "$work/merged.json" 2>/dev/null
grep -E 'merged|warning' "$work/merge.log" || true
python3 "$repo/scripts/shard-wall.py" --first-use "$first_use" --plan-only "$plan_only" --merge "$merge" --finish "$finish" \
    --shards "$work/shards.txt" --merged "$work/merged.json"
