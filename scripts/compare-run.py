#!/usr/bin/env python3
"""Step time of two placer binaries on the same models, interleaved (4 rounds of
`placer run -n 9 --warmup 2`), as a ratio: how a change to the executor or kernels
moved things on this noisy machine. Usage: scripts/compare-run.py OLD_PLACER NEW_PLACER"""
import json, os, statistics, subprocess, sys, tempfile

old, new = sys.argv[1], sys.argv[2]
models = [("lenet-mnist", 256), ("resnet18", 8), ("bert-tiny", 8), ("mlp", 64)]
tmp = tempfile.mkdtemp()

def step_ms(binary, model):
    out = subprocess.run([binary, "run", model, "-n", "9", "--warmup", "2", "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["step_ms"]["median"]

print(f"{'model':<18} {'old ms':>9} {'new ms':>9} {'new/old':>8}")
for name, batch in models:
    path = os.path.join(tmp, f"{name}.json")
    subprocess.run([new, "zoo", name, "--batch", str(batch), "-o", path], check=True, capture_output=True)
    o, n = [], []
    for _ in range(4):
        o.append(step_ms(old, path))
        n.append(step_ms(new, path))
    o, n = statistics.median(o), statistics.median(n)
    print(f"{name + '-b' + str(batch):<18} {o:>9.2f} {n:>9.2f} {n / o:>8.3f}")
