#!/usr/bin/env bash
# Coverage-guided fuzzing of placer's parsers (cargo-fuzz, libFuzzer, nightly).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# SECONDS_PER_TARGET defaults to 600; the targets default to all of fuzz/fuzz_targets/:
# model_json, onnx_import, checkpoint, plan_json, hwloc_xml. Each target's corpus is
# seeded from this repository's own files (zoo models, the ONNX corpus, a checkpoint
# and plans made here by a short profile and solve of a tiny zoo model, the hwloc XML
# topologies), then the target runs alone, one job, one worker, for the given seconds.
# Prints a table (target, seconds, executions, corpus, crashes) and exits non-zero when
# any target found a crash, an OOM, a leak or a timeout: its input is kept in
# fuzz/artifacts/TARGET/. Corpora grow in fuzz/corpus/TARGET/ and are kept between runs
# (both gitignored); FUZZ_FRESH=1 starts every corpus from the seeds alone.
#
# Limits per target: -rss_limit_mb=2048, -timeout=$FUZZ_TIMEOUT (default 30 s per input).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
secs=${1:-600}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(model_json onnx_import checkpoint plan_json hwloc_xml)
fi
timeout_s=${FUZZ_TIMEOUT:-30}

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "fuzz.sh: needs the nightly toolchain (rustup toolchain install nightly)" >&2
    exit 2
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

echo "== building the fuzz targets (nightly, address sanitizer)" >&2
(cd fuzz && cargo +nightly fuzz build -O >&2)
bin_dir=$root/fuzz/target/x86_64-unknown-linux-gnu/release
for t in "${targets[@]}"; do
    [ -x "$bin_dir/$t" ] || { echo "fuzz.sh: no fuzz target '$t' built in $bin_dir" >&2; exit 2; }
done

echo "== making seeds" >&2
cargo build --release --bin placer >&2
placer=$root/target/release/placer
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
seeds=$work/seeds
mkdir -p "$seeds"/{model_json,onnx_import,checkpoint,plan_json,hwloc_xml}

# model.json: tiny zoo models, the committed JSON models and the IR's test models.
for m in mlp lenet-mnist autotm-mnist bert-tiny; do
    "$placer" zoo "$m" -b 2 -o "$seeds/model_json/$m-b2.json" >/dev/null
done
cp configs/models/*.json crates/ir/tests/data/*.json "$seeds/model_json/" 2>/dev/null || true
# ONNX: the committed corpus of real exports.
cp tests/data/onnx-corpus/*.onnx "$seeds/onnx_import/"
find crates/onnx/tests -name '*.onnx' -exec cp {} "$seeds/onnx_import/" \; 2>/dev/null || true
# Checkpoints and plans: a short profile and solves of tiny models, in the temporary
# directory (its own host cache too). plan_json checks plans against mlp at batch 2.
(
    cd "$work"
    export PLACER_CACHE_DIR=$work/cache
    for m in mlp lenet-mnist; do
        "$placer" zoo "$m" -b 2 -o "$m.json" >/dev/null
        "$placer" profile "$m.json" --rounds 1 --reps 1 --max-reps 1 --warmup 0 \
            --checkpoint-dir ck >/dev/null 2>&1
    done
    cp ck/*.ckpt "$seeds/checkpoint/"
    ckpt=$(ls ck/mlp-b2-*.ckpt | head -n 1)
    for f in static sync async; do
        "$placer" solve mlp.json --profile "$ckpt" --budget 50% --formulation "$f" --time-limit 30 \
            --no-probe -o "$seeds/plan_json/mlp-b2-$f.plan.json" >/dev/null 2>&1
    done
    "$placer" solve mlp.json --budget 25% --time-limit 30 --no-probe \
        -o "$seeds/plan_json/mlp-b2-cost-model.plan.json" >/dev/null 2>&1
)
# hwloc XML: the committed topologies.
cp configs/topologies/*.xml "$seeds/hwloc_xml/"
find crates/host/tests -name '*.xml' -exec cp {} "$seeds/hwloc_xml/" \; 2>/dev/null || true

mkdir -p fuzz/artifacts fuzz/corpus fuzz/logs
status=0
rows=()
for t in "${targets[@]}"; do
    corpus=$root/fuzz/corpus/$t
    artifacts=$root/fuzz/artifacts/$t
    logs=$root/fuzz/logs/$t
    [ "${FUZZ_FRESH:-0}" = 1 ] && rm -rf "$corpus"
    mkdir -p "$corpus" "$artifacts" "$logs"
    before=$(find "$artifacts" -type f | sort)
    echo "== $t: $secs s ($(ls "$seeds/$t" | wc -l) seeds, $(ls "$corpus" | wc -l) in the corpus)" >&2
    start=$(date +%s)
    # detect_odr_violation=0: HiGHS's C++ (linked into plan_json) trips ASan's ODR check
    # on compiler-made switch tables (CSWTCH.*) before any input runs.
    asan=detect_odr_violation=0
    extra=()
    if [ "$t" = hwloc_xml ]; then
        # hwloc 2.9's XML importer leaks a few objects on some bad inputs (shown with
        # hwloc alone by scripts/fuzz-hwloc/leaks.sh; docs/BENCHMARKS.md). Leaks are not looked
        # for there, neither per input nor at exit; crashes, timeouts and OOMs still are.
        asan=$asan:detect_leaks=0
        extra=(-detect_leaks=0)
    fi
    # -jobs=1 -workers=1: one fuzzing process, its output in $logs/fuzz-0.log.
    rc=0
    (cd "$logs" && rm -f fuzz-0.log && ASAN_OPTIONS=$asan "$bin_dir/$t" \
        -jobs=1 -workers=1 -max_total_time="$secs" -rss_limit_mb=2048 -timeout="$timeout_s" \
        -print_final_stats=1 -artifact_prefix="$artifacts/" "${extra[@]}" "$corpus" "$seeds/$t") \
        >/dev/null 2>&1 || rc=$?
    elapsed=$(( $(date +%s) - start ))
    log=$logs/fuzz-0.log
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" 2>/dev/null | grep -o '[0-9]*$' | tail -n 1 || true)
    if [ -z "$execs" ]; then
        # Stopped early (a crash): the last status line's count.
        execs=$(grep -o '^#[0-9]*' "$log" 2>/dev/null | tail -n 1 | tr -d '#' || true)
    fi
    after=$(find "$artifacts" -type f | sort)
    new=$(comm -13 <(echo "$before") <(echo "$after") | grep -c . || true)
    if [ "$new" -gt 0 ] || [ "$rc" -ne 0 ] || [ -z "$execs" ]; then
        status=1
        echo "   $t: FOUND $new (exit $rc): $(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')(log: $log)" >&2
        grep -m 3 'panicked at\|ERROR: ' "$log" >&2 || true
    fi
    rows+=("$(printf '| %-12s | %7s | %12s | %7s | %7s |' "$t" "$elapsed" "${execs:-?}" "$(ls "$corpus" | wc -l)" "$new")")
done

echo
printf '| %-12s | %7s | %12s | %7s | %7s |\n' target seconds executions corpus crashes
printf '|%s|%s|%s|%s|%s|\n' -------------- --------- -------------- --------- ---------
printf '%s\n' "${rows[@]}"
exit $status
