#!/usr/bin/env bash
# Runs the Criterion benches and prints a table of medians, with each front-end step
# as a ratio to bare JSON parsing of the same file (measured in the same run, so the
# ratio survives a noisy shared machine better than the absolute times do).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --bench ir -- --noplot "$@" >&2
python3 - <<'PY'
import json, pathlib
root = pathlib.Path("target/criterion/densenet264_b32")
def median_ms(name):
    est = json.loads((root / name / "new" / "estimates.json").read_text())
    return est["median"]["point_estimate"] / 1e6
base = median_ms("serde_json_value")
print("DenseNet-264, batch 32 (6,279 nodes, 11,494 tensors, 3.1 MB JSON)")
print(f"{'step':<20} {'median ms':>10} {'x serde_json::Value parse':>26}")
for name in ["serde_json_value", "load", "zoo_build", "to_json", "liveness_and_peak", "conflict_graph", "content_hash"]:
    ms = median_ms(name)
    print(f"{name:<20} {ms:>10.2f} {ms / base:>26.2f}")
PY
