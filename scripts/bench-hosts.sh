#!/usr/bin/env bash
# Memory pools on this host, three tables:
#  1. allocation backends (benches/pools.rs) as ratios to the plain heap, same run;
#  2. `placer topo --probe`: bandwidth and latency per pool and per pair of pools;
#  3. the emulated tier's accuracy: `placer run` with every activation in DRAM, then in
#     the emulated pmem pool, interleaved; the step's excess against the waits the
#     executor injected (what the emulation formula (docs/background.md) predicts).
# Needs a quiet machine: run nothing else meanwhile.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
cargo bench --bench pools -- --noplot >&2
python3 - <<'PY'
import json, pathlib
root = pathlib.Path("target/criterion")
def median_ms(group, name):
    est = json.loads((root / group / name / "new" / "estimates.json").read_text())
    return est["median"]["point_estimate"] / 1e6
print("1. allocation backends, 64 MiB (allocate, bind, touch, verify placement, free)")
print(f"{'backend':<16} {'median ms':>10} {'GB/s':>8} {'x heap':>8}")
base = median_ms("allocate_64MiB", "heap")
for name in ["heap", "numa", "memkind"]:
    if (root / "allocate_64MiB" / name).exists():
        ms = median_ms("allocate_64MiB", name)
        print(f"{name:<16} {ms:>10.2f} {64 * 2**20 / ms / 1e6:>8.1f} {ms / base:>8.2f}")
print()
print("   moves between pools, 64 MiB (allocate there, copy, free here)")
base = median_ms("move_64MiB", "heap_to_heap")
for name in ["heap_to_heap", "heap_to_numa", "numa_to_heap"]:
    ms = median_ms("move_64MiB", name)
    print(f"{name:<16} {ms:>10.2f} {64 * 2**20 / ms / 1e6:>8.1f} {ms / base:>8.2f}")
PY
echo
echo "2. placer topo --probe"
cache=$(mktemp -d)
target/release/placer topo --probe --cache-dir "$cache" | sed -n '/^measured per pool/,/^EMULATED/p' | grep -v '^EMULATED'
echo
echo "3. emulated tier: measured slowdown against the injected waits"
PLACER_CACHE_DIR="$cache" python3 - <<'PY'
import json, statistics, subprocess, tempfile, os
def run(model, extra):
    out = subprocess.run(["target/release/placer", "run", model, "-n", "7", "--warmup", "2", "--json", *extra],
                         check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    return j["step_ms"]["median"], j["emulated_wait_ms"]["median"]
tmp = tempfile.mkdtemp()
models = [("lenet-mnist", 256), ("resnet18", 8), ("bert-tiny", 8)]
print(f"{'model':<16} {'dram ms':>9} {'emulated ms':>12} {'waits ms':>9} {'excess ms':>10} {'excess/waits':>13}")
for name, batch in models:
    path = os.path.join(tmp, f"{name}.json")
    subprocess.run(["target/release/placer", "zoo", name, "--batch", str(batch), "-o", path], check=True, capture_output=True)
    dram, emul, waits = [], [], []
    for _ in range(3):
        d, _ = run(path, [])
        e, w = run(path, ["--place", "activation=pmem"])
        dram.append(d); emul.append(e); waits.append(w)
    d, e, w = statistics.median(dram), statistics.median(emul), statistics.median(waits)
    print(f"{name + '-b' + str(batch):<16} {d:>9.2f} {e:>12.2f} {w:>9.2f} {e - d:>10.2f} {(e - d) / w:>13.3f}")
PY
rm -rf "$cache"
