#!/usr/bin/env bash
# A real test against a real Slurm: starts a single-node cluster from Debian's
# slurm-wlm and munge (cluster.sh) in a temporary directory, then
#   1. submits a sharded profile of LeNet (batch 8, every configuration, one round) as
#      an array of 3 shards, a merge, a finish and a solve job (submit.sh);
#   2. waits for them, bounded in time;
#   3. checks that the merged profile holds exactly the keys of an unsharded profile of
#      the same plan, each measured once;
#   4. checks that solve took the merged profile;
#   5. submits again (LeNet batch 64, slower passes), SIGKILLs shard 2's task mid-run,
#      shows that merge refuses the incomplete shard, resubmits the task, and checks
#      the merge then succeeds with nothing lost and nothing measured twice;
#   6. stops every daemon it started, by process id, and removes its directory.
#
#   scripts/slurm/test.sh [--placer PATH]    (default: target/release/placer, built if missing)
#
# Prints PASS/FAIL lines and, last, "slurm-test: all checks passed" or exits non-zero.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
placer=""
if [ "${1:-}" = --placer ]; then placer=$2; fi
if [ -z "$placer" ]; then
    placer=$repo/target/release/placer
    [ -x "$placer" ] || (cd "$repo" && cargo build --release --bin placer >&2)
fi
placer=$(realpath "$placer")
"$repo/scripts/slurm/install.sh"

work=$(mktemp -d /tmp/placer-slurm.XXXXXX)
cleanup() {
    "$repo/scripts/slurm/cluster.sh" stop "$work/slurm" || true
    rm -rf "$work"
}
trap cleanup EXIT
export PLACER_CACHE_DIR=$work/cache
started=$(date +%s)
"$repo/scripts/slurm/cluster.sh" start "$work/slurm"
export SLURM_CONF=$work/slurm/slurm.conf

fails=0
check() { # check NAME COMMAND...
    local name=$1
    shift
    if "$@"; then echo "PASS $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}

# Waits (at most $1 s) until none of the job ids that follow is queued or running.
wait_jobs() {
    local limit=$1 i
    shift
    for ((i = 0; i < limit * 2; i++)); do
        [ -z "$(squeue -h -j "$(IFS=,; echo "$*")" 2>/dev/null)" ] && return 0
        sleep 0.5
    done
    echo "slurm-test: jobs $* still queued after ${limit} s:" >&2
    squeue >&2 || true
    return 1
}

# Every task of job $1 ended COMPLETED with exit 0.
completed() {
    local states
    states=$(scontrol show job "$1" | grep -o 'JobState=[A-Z_]*' | sort -u)
    [ "$states" = "JobState=COMPLETED" ] || { echo "job $1: $states" >&2; return 1; }
}

# The (signature, configuration) keys of the finished checkpoint of $1 in dir $2, one
# line each, sorted; and the number of measurements.
keys() { "$placer" profile "$1" --checkpoint-dir "$2" "${@:3}" --export csv | tail -n +2 | cut -d, -f1,4 | sort; }

# 1-4: a whole sharded run.
"$placer" zoo lenet-mnist -b 8 -o "$work/lenet8.json" >/dev/null
fast=(--design full --rounds 1 --reps 3 --max-reps 3 --warmup 1)
"$placer" profile "$work/lenet8.json" --checkpoint-dir "$work/whole" "${fast[@]}" >/dev/null 2>&1
keys "$work/lenet8.json" "$work/whole" "${fast[@]}" > "$work/whole.keys"
t0=$(date +%s)
read -r array merge finish solve < <("$repo/scripts/slurm/submit.sh" --shards 3 --checkpoint-dir "$work/ck" \
    --placer "$placer" --budget 50% "$work/lenet8.json" -- "${fast[@]}" | sed 's/[a-z]*=//g')
echo "submitted array $array, merge $merge, finish $finish, solve $solve"
check "the array, merge, finish and solve jobs ended within 300 s" wait_jobs 300 "$array" "$merge" "$finish" "$solve"
echo "jobs done in $(($(date +%s) - t0)) s"
for j in "$array" "$merge" "$finish" "$solve"; do check "job $j completed" completed "$j"; done
check "every shard wrote its checkpoint" test "$(ls "$work"/ck/*-shard*of3.ckpt | wc -l)" -eq 3
keys "$work/lenet8.json" "$work/ck" "${fast[@]}" > "$work/merged.keys"
check "the merged profile has exactly the unsharded profile's keys ($(wc -l < "$work/whole.keys"))" \
    cmp -s "$work/whole.keys" "$work/merged.keys"
check "each key measured once" test -z "$(uniq -d "$work/merged.keys")"
check "merge compared the three shards' hosts" grep -q 'from 3 shards into' "$work/ck/slurm-logs/merge.out"
check "solve took the merged profile and wrote a plan" test -s "$work/ck/plan.json"
check "solve's header names the merged checkpoint" grep -q 'sim64.ckpt' "$work/ck/slurm-logs/solve.out"
sed -n '1,6p' "$work/ck/slurm-logs/merge.out"

# 5: a shard killed mid-run, then resubmitted.
"$placer" zoo lenet-mnist -b 64 -o "$work/lenet64.json" >/dev/null
slow=(--design full --rounds 1 --reps 100 --max-reps 100 --warmup 1)
read -r array merge finish < <("$repo/scripts/slurm/submit.sh" --shards 3 --checkpoint-dir "$work/ck2" \
    --placer "$placer" "$work/lenet64.json" -- "${slow[@]}" | sed 's/[a-z]*=//g')
echo "submitted array $array, merge $merge, finish $finish"
# Shard 2's checkpoint appears after its reference pass; kill it a moment later, mid-run.
for ((i = 0; i < 600; i++)); do
    compgen -G "$work/ck2/*-shard2of3.ckpt" >/dev/null && break
    sleep 0.1
done
sleep 1.5
scancel --signal=KILL --full "${array}_2"
check "the killed task left the array" wait_jobs 60 "${array}_2"
killed=$(scontrol show job "${array}_2" | grep -o 'JobState=[A-Z_]*')
echo "shard 2's task after the kill: $killed"
check "the killed task did not complete" test "$killed" != JobState=COMPLETED
wait_jobs 300 "${array}_1" "${array}_3" || true
set +e
refusal=$("$placer" profile merge "$work"/ck2/*-shard*of3.ckpt -o "$work/early.ckpt" 2>&1 >/dev/null)
code=$?
set -e
echo "merge before the resubmission: exit $code: $refusal"
check "merge refuses the killed shard as incomplete, in one line, exit 2" \
    test "$code" -eq 2 -a "$(echo "$refusal" | wc -l)" -eq 1
check "the refusal names shard 2/3 and its passes" grep -q 'shard 2/3 .* is incomplete ([0-9]* of [0-9]* passes)' <<<"$refusal"
check "nothing was written" test ! -e "$work/early.ckpt"
check "the merge job waits, not run" test -n "$(squeue -h -j "$merge")"
read -r again < <("$repo/scripts/slurm/submit.sh" --resume-shard 2 --merge-job "$merge" --shards 3 \
    --checkpoint-dir "$work/ck2" --placer "$placer" "$work/lenet64.json" -- "${slow[@]}" | sed 's/[a-z]*=//g')
echo "resubmitted shard 2 as job $again"
check "the resubmitted shard, merge and finish ended within 300 s" wait_jobs 300 "$again" "$merge" "$finish"
for j in "$again" "$merge" "$finish"; do check "job $j completed" completed "$j"; done
grep -h 'wall time' "$work/ck2/slurm-logs/shard-2.out" || true
check "the resubmitted shard resumed its checkpoint" grep -q 'resumed after' "$work/ck2/slurm-logs/shard-2.out"
keys "$work/lenet64.json" "$work/ck2" "${slow[@]}" > "$work/merged2.keys"
# The same plan's keys, from a quick unsharded profile of the same model (keys do not
# depend on the repetitions).
quick=(--design full --rounds 1 --reps 1 --max-reps 1 --warmup 0)
"$placer" profile "$work/lenet64.json" --checkpoint-dir "$work/whole64" "${quick[@]}" >/dev/null 2>&1
keys "$work/lenet64.json" "$work/whole64" "${quick[@]}" > "$work/whole2.keys"
check "after the kill and resubmission: exactly the unsharded keys ($(wc -l < "$work/whole2.keys")), nothing lost" \
    cmp -s "$work/whole2.keys" "$work/merged2.keys"
check "after the kill and resubmission: nothing measured twice" test -z "$(uniq -d "$work/merged2.keys")"

echo "slurm-test: $(($(date +%s) - started)) s with the cluster's start"
if [ "$fails" -gt 0 ]; then
    echo "slurm-test: $fails check(s) failed" >&2
    exit 1
fi
echo "slurm-test: all checks passed"
