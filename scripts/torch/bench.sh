#!/usr/bin/env bash
# torch's own training step under placer's plan, beside unmodified torch, the baselines
# and placer's executor (python/bench/side_by_side.py), with the host's FMA peak printed
# before and after. Arguments go to side_by_side.py: --model resnet18|resnet50|bert-tiny|
# bert-base|small-cnn, --batch N, --budget 25%, --steps 5, --rounds 3.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=$(PLACER_TORCH_PROFILE=release scripts/torch/venv.sh)
cargo build --release -q
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A private copy: others build in the same target dir, and the binary must not change.
cp target/release/placer "$work/placer"
echo "host FMA peak before: $(scripts/fma-peak.sh) GFLOP/s"
"$py" python/bench/side_by_side.py --placer "$work/placer" --work "$work" "$@"
echo "host FMA peak after: $(scripts/fma-peak.sh) GFLOP/s"
