#!/usr/bin/env bash
# Prints this host's FMA peak in GFLOP/s (benches/machine.rs: independent FMA chains on
# every core, as the kernels are measured), for benchmarks to print beside their timings.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -q --bench machine -- --noplot fma_peak >/dev/null 2>&1
python3 - <<'PY'
import glob, json
d = sorted(glob.glob("target/criterion/machine/fma_peak*/new"))[0]
meta, est = json.load(open(d + "/benchmark.json")), json.load(open(d + "/estimates.json"))
(_, flops), = meta["throughput"].items()
print(f"{flops / (est['median']['point_estimate'] / 1e9) / 1e9:.1f}")
PY
