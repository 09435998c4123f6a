#!/usr/bin/env bash
# Kernel speed against this machine's measured ceilings, in one run:
#   compute-bound kernels (Criterion throughput in FLOPs)  vs  the FMA peak (benches/machine.rs)
#   memory-bound kernels  (Criterion throughput in bytes)  vs  the triad bandwidth
# Ceilings are measured first and last; the table uses their mean, and prints both so
# drift on the shared machine is visible.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_QUIET=true
run_machine() { cargo bench --bench machine -- --noplot >&2; cp -r target/criterion/machine "target/criterion/machine-$1"; }
run_machine before
cargo bench -p placer-kernels --bench gemm_conv --bench elementwise -- --noplot >&2
run_machine after
python3 - <<'PY'
import json, pathlib
root = pathlib.Path("target/criterion")

def results(group_dir):
    for bench in sorted(group_dir.rglob("new/benchmark.json")):
        meta = json.loads(bench.read_text())
        est = json.loads((bench.parent / "estimates.json").read_text())
        median_s = est["median"]["point_estimate"] / 1e9
        (kind, amount), = meta["throughput"].items()
        yield meta["full_id"], kind, amount, median_s

def ceiling(name):
    rates = []
    for tag in ("before", "after"):
        for full_id, kind, amount, secs in results(root / f"machine-{tag}"):
            if name in full_id:
                rates.append(amount / secs)
    return rates

peaks, triads = ceiling("fma_peak"), ceiling("triad")
peak, triad = sum(peaks) / len(peaks), sum(triads) / len(triads)
print(f"FMA peak (all cores): {peaks[0]/1e9:.1f} GFLOP/s before, {peaks[1]/1e9:.1f} after")
print(f"triad bandwidth:      {triads[0]/1e9:.1f} GB/s before, {triads[1]/1e9:.1f} GB/s after\n")
print(f"| kernel | median ms | achieved | of ceiling |")
print(f"|---|---:|---:|---:|")
groups = [d for d in sorted(root.iterdir()) if d.is_dir() and not d.name.startswith("machine") and d.name not in ("densenet264_b32", "report")]
for group in groups:
    for full_id, kind, amount, secs in results(group):
        rate = amount / secs
        if kind == "Bytes":
            print(f"| {full_id} | {secs*1e3:.2f} | {rate/1e9:.1f} GB/s | {100*rate/triad:.0f}% of triad |")
        else:
            print(f"| {full_id} | {secs*1e3:.2f} | {rate/1e9:.1f} GFLOP/s | {100*rate/peak:.0f}% of FMA peak |")
PY
