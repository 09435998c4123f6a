#!/usr/bin/env bash
# Submits a sharded profile of MODEL to Slurm, as it runs on a real cluster:
#
#   scripts/slurm/submit.sh [--shards N] [--checkpoint-dir DIR] [--placer PATH]
#       [--mixed-hosts] [--budget B] [--sbatch "OPTIONS"] MODEL [-- PROFILE OPTIONS...]
#
# 1. an array of N tasks, one per shard (placer profile MODEL --shard I/N), each on a
#    whole node (--exclusive), so no two profiles share a host;
# 2. a merge job that starts when every task succeeded (--dependency=afterok:ARRAY):
#    placer profile merge DIR/*-shard*ofN.ckpt, written beside them under the whole
#    profile's name;
# 3. a finish job after it: placer profile MODEL on the merged checkpoint (a screening
#    design's second stage and the interference calibration, on one node);
# 4. with --budget, a solve job after that: placer solve --budget B on the most recent
#    checkpoint in DIR (the finished merge), writing DIR/plan.json.
#
# DIR (default checkpoints/slurm-MODELNAME) and PATH (default: placer on the PATH, else
# this checkout's target/release/placer) must be on a filesystem every node sees; keep
# one model and one setting per DIR, since the merge job takes every shard in it.
# PROFILE OPTIONS go to every profile command (--design, --reps, --emulate ...).
# --mixed-hosts goes to merge and finish: a host's fingerprint includes its name, so
# shards from several nodes need it, and merge then compares the hosts' speeds on the
# reference kernels. --sbatch adds options to every job (a partition, --constraint for
# identical nodes, a time limit). Job output goes to DIR/slurm-logs/. Prints one line:
# array=ID merge=ID finish=ID [solve=ID].
#
# A failed or cancelled task leaves the merge job pending forever (its dependency can
# no longer be met). Resubmit that one shard, with the same options, and point the merge
# job at it; the shard resumes its checkpoint, losing at most the pass it was in:
#
#   scripts/slurm/submit.sh --resume-shard I --merge-job MERGE_ID [options] MODEL [-- ...]
#
# prints shard=ID.
set -euo pipefail
shards=4 ckpt="" placer="" mixed="" budget="" extra="" resume="" merge_job=""
while [ $# -gt 0 ]; do
    case $1 in
        --resume-shard) resume=$2; shift 2 ;;
        --merge-job) merge_job=$2; shift 2 ;;
        --shards) shards=$2; shift 2 ;;
        --checkpoint-dir) ckpt=$2; shift 2 ;;
        --placer) placer=$2; shift 2 ;;
        --mixed-hosts) mixed=--mixed-hosts; shift ;;
        --budget) budget=$2; shift 2 ;;
        --sbatch) extra=$2; shift 2 ;;
        --) break ;;
        -*) echo "submit.sh: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
model=${1:?usage: submit.sh [options] MODEL [-- PROFILE OPTIONS...]}
shift
[ "${1:-}" = -- ] && shift
profile_args=("$@")
[ -f "$model" ] || { echo "submit.sh: no model file $model" >&2; exit 2; }
[[ $shards =~ ^[0-9]+$ ]] && [ "$shards" -ge 2 ] || { echo "submit.sh: --shards takes 2 or more, got $shards" >&2; exit 2; }
if [ -z "$placer" ]; then
    placer=$(command -v placer || echo "$(cd "$(dirname "$0")/../.." && pwd)/target/release/placer")
fi
[ -x "$placer" ] || { echo "submit.sh: no placer binary at $placer (build it, or pass --placer)" >&2; exit 2; }
model=$(realpath "$model")
placer=$(realpath "$placer")
[ -n "$ckpt" ] || ckpt=checkpoints/slurm-$(basename "$model" .json)
mkdir -p "$ckpt/slurm-logs"
ckpt=$(realpath "$ckpt")
logs=$ckpt/slurm-logs

q() { printf '%q ' "$@"; }
tasks="1-$shards"
if [ -n "$resume" ]; then
    [ -n "$merge_job" ] || { echo "submit.sh: --resume-shard needs --merge-job" >&2; exit 2; }
    tasks=$resume
fi
# shellcheck disable=SC2086 # $extra is a list of sbatch options
array=$(sbatch --parsable --array="$tasks" --exclusive --job-name=placer-shard $extra \
    -o "$logs/shard-%a.out" \
    --wrap "exec $(q "$placer" profile "$model" --checkpoint-dir "$ckpt" "${profile_args[@]}") --shard \$SLURM_ARRAY_TASK_ID/$shards")
if [ -n "$resume" ]; then
    # The other tasks succeeded already: the merge now waits for this one alone.
    scontrol update jobid="$merge_job" dependency="afterok:$array"
    echo "shard=$array"
    exit 0
fi
# shellcheck disable=SC2086
merge=$(sbatch --parsable --dependency="afterok:$array" --kill-on-invalid-dep=no --exclusive \
    --job-name=placer-merge $extra -o "$logs/merge.out" \
    --wrap "exec $(q "$placer" profile merge) $(printf '%q' "$ckpt")/*-shard*of$shards.ckpt $mixed")
# shellcheck disable=SC2086
finish=$(sbatch --parsable --dependency="afterok:$merge" --exclusive --job-name=placer-finish $extra \
    -o "$logs/finish.out" \
    --wrap "exec $(q "$placer" profile "$model" --checkpoint-dir "$ckpt" "${profile_args[@]}") $mixed")
line="array=$array merge=$merge finish=$finish"
if [ -n "$budget" ]; then
    # shellcheck disable=SC2086
    solve=$(sbatch --parsable --dependency="afterok:$finish" --job-name=placer-solve $extra -o "$logs/solve.out" \
        --wrap "exec $(q "$placer" solve --budget "$budget" --checkpoint-dir "$ckpt" -o "$ckpt/plan.json")")
    line="$line solve=$solve"
fi
echo "$line"
