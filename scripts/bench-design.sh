#!/usr/bin/env bash
# Screening designs at the batch sizes people train at (issue 16), on DRAM plus the
# emulated pmem pool. Sections (default: volume agreement):
#  volume       ResNet-50 b32, BERT-base b8 (seq 128), DenseNet-121 b32: what a screening
#               design's first stage measures against the full set, its passes per round
#               and their lower bound, next to the full design's. Seconds.
#  agreement    LeNet b256: a screened profile against two full ones (the second full
#               one is the noise floor, full against itself); its predictions against
#               the full measurements. About 5 minutes.
#  profile:NAME:BATCH
#               a screened profile of `placer zoo NAME --batch BATCH` from scratch, with
#               its summary: passes, wall time per stage, validation beside the noise
#               floor, fallbacks. ResNet-50 b32 takes about 30 minutes here.
#  steps:NAME:BATCH[:PASSES]
#               whole steps against picked steps (the default), side by side: PASSES
#               (default 4) first-stage passes each timed twice with whole steps, then
#               twice per round with picked steps in 3 rounds; agreement beside the
#               whole-against-whole floor. ResNet-50 b32 with 4 passes: about 12 minutes.
#  pipeline:NAME:BATCH
#               `placer pipeline` at 10%, 25% and 50% of peak live memory, each resuming
#               the profile of profile:NAME:BATCH (run that first, or this profiles
#               too): solve, then the plan, the baselines and all-DRAM interleaved, 5
#               timed steps each. ResNet-50 b32: about 7 minutes a budget.
# Run on a quiet machine: profiles are timings.
set -euo pipefail
cd "$(dirname "$0")/.."
sections=${*:-volume agreement}
cargo build --release -q
cargo build --release -q -p placer-profile --example steps
placer=target/release/placer
work=${PLACER_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$work"
export PLACER_CACHE_DIR="${PLACER_CACHE_DIR:-$work/cache}"

model() { # NAME BATCH -> path of the zoo model, made once
  local path="$work/$1-b$2.json"
  [ -f "$path" ] || "$placer" zoo "$1" --batch "$2" -o "$path" >/dev/null 2>&1
  echo "$path"
}

# The plan table's numbers: measurements per round, passes per round, lower bound.
plan_numbers() { # MODEL DESIGN
  "$placer" profile "$1" --plan-only --design "$2" --checkpoint-dir "$work/plan" |
    sed -nE 's/.*passes +([0-9,]+) per round .*lower bound ([0-9,]+):.*; ([0-9,]+) measurements per round.*/\3 \1 \2/p'
}

for section in $sections; do
  case $section in
  volume)
    echo "== volume: first stage of a screening design against the full set (measurements and passes per round)"
    printf '%-16s %10s %10s %8s %14s %12s %10s\n' model full screen share "passes full" "passes scr" "bound scr"
    for spec in resnet50:32 bert-base:8 densenet121:32; do
      m=$(model "${spec%:*}" "${spec#*:}")
      read -r fm fp fb <<<"$(plan_numbers "$m" full)"
      read -r sm sp sb <<<"$(plan_numbers "$m" screen)"
      share=$(awk -v s="${sm//,/}" -v f="${fm//,/}" 'BEGIN { printf "%.1f%%", 100 * s / f }')
      printf '%-16s %10s %10s %8s %10s/%-4s %12s %10s\n' "${spec/:/ b}" "$fm" "$sm" "$share" "$fp" "$fb" "$sp" "$sb"
    done
    ;;
  agreement)
    m=$(model lenet-mnist 256)
    echo "== agreement: lenet-mnist b256, screened against full (A: screened, B: full; floor: full against full)"
    for run in full-a full-b; do
      "$placer" profile "$m" --design full --checkpoint-dir "$work/$run" | grep -E '^\s+(passes|wall time)'
    done
    "$placer" profile "$m" --checkpoint-dir "$work/screen" | grep -E '^\s+(passes|wall time|validation|measured in full|predicted|stages)'
    "$placer" compare "$work"/screen/*.ckpt "$work"/full-a/*.ckpt --repeat "$work"/full-b/*.ckpt |
      grep -E 'wall time|≥ |< .*tiny|predicted by a design|noise floor|profiles (agree|disagree)' || true
    ;;
  profile:*)
    IFS=: read -r _ name batch <<<"$section"
    m=$(model "$name" "$batch")
    echo "== $name b$batch: screened profile from scratch"
    start=$(date +%s)
    "$placer" profile "$m" --checkpoint-dir "$work/$name-b$batch" --fresh
    echo "$(($(date +%s) - start)) s wall, model generation and host probe included"
    ;;
  pipeline:*)
    IFS=: read -r _ name batch <<<"$section"
    m=$(model "$name" "$batch")
    for budget in 10% 25% 50%; do
      echo "== $name b$batch: pipeline at $budget"
      "$placer" pipeline "$m" --budget "$budget" -n 5 --warmup 1 \
        --checkpoint-dir "$work/$name-b$batch" -o "$work/report-$name-b$batch-$budget"
    done
    ;;
  steps:*)
    IFS=: read -r _ name batch passes <<<"$section"
    echo "== $name b$batch: whole steps against picked steps"
    target/release/examples/steps "$(model "$name" "$batch")" "${passes:-4}" 3
    ;;
  *)
    echo "unknown section '$section' (volume, agreement, profile:NAME:BATCH, pipeline:NAME:BATCH, steps:NAME:BATCH[:PASSES])" >&2
    exit 2
    ;;
  esac
done
