#!/usr/bin/env bash
# ONNX import cost at batch 32, as a ratio to building the same network in the zoo
# (measured side by side in one run). The ONNX files come from scripts/onnx/testdata.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -p placer-onnx --bench import -- --noplot "$@" >&2
python3 - <<'PY'
import json, pathlib
root = pathlib.Path("target/criterion/import_b32")
def ms(name):
    return json.loads((root / name / "new" / "estimates.json").read_text())["median"]["point_estimate"] / 1e6
print(f"{'batch 32':<34} {'median ms':>10} {'x zoo build':>12}")
for onnx, zoo in [("onnx_resnet50", "zoo_resnet50"), ("onnx_densenet121", "zoo_densenet121"),
                  ("onnx_ort_training_resnet50", "zoo_resnet50")]:
    print(f"{zoo:<34} {ms(zoo):>10.2f} {1.0:>12.2f}")
    print(f"{onnx:<34} {ms(onnx):>10.2f} {ms(onnx) / ms(zoo):>12.2f}")
PY
