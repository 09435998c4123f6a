"""torch's own training step on three C heaps, each in a fresh process, interleaved in
rounds: glibc as found; glibc's two thresholds fixed (mmap threshold 32 MiB, never
trim: what `heap.steady()` did before 2026-12-02); and `heap.steady()` as it is (every
block from the heap). Per step: wall time, minor page faults and system CPU time
(getrusage), so what the heap costs a step is read beside what the kernel did for it.
scripts/torch/heap.sh runs it with the host's FMA peak before and after.

    $(scripts/torch/venv.sh) python/bench/heap.py [--model resnet50] [--batch 32] [--steps 6] [--rounds 2]

Each process runs `--steps` steps of the unmodified loop (cross-entropy, SGD with
momentum, the bench's models) and nothing else: no profile, no plan. A table row is a
step index; its figures are the median over the rounds.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HEAPS = ("as found", "thresholds only", "steady")


def child(model_name: str, batch: int, steps: int, heap_kind: str) -> None:
    from placer_torch import heap

    if heap_kind != "as found":
        ok, why = heap.set_mallopt(heap.THRESHOLDS_ONLY if heap_kind == "thresholds only" else heap.STEADY)
        if not ok:
            sys.exit(f"heap.py: {why}")
    import torch

    sys.path.insert(0, str(Path(__file__).parent))
    from side_by_side import build

    model, data = build(model_name, batch)
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rows = []
    for _ in range(steps):
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        opt.zero_grad()
        loss_fn(model(*data[:-1]), data[-1]).backward()
        opt.step()
        t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        rows.append({"ms": 1e3 * (t1 - t0), "faults": r1.ru_minflt - r0.ru_minflt,
                     "sys_ms": 1e3 * (r1.ru_stime - r0.ru_stime)})
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"steps": rows, "max_rss_kib": rss}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--placer", help="unused (pybench.sh passes it to every bench)")
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child", choices=HEAPS, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.model, a.batch, a.steps, a.child)
        return
    runs: dict = {h: [] for h in HEAPS}
    for r in range(a.rounds):
        for h in HEAPS:
            out = subprocess.run([sys.executable, __file__, "--model", a.model, "--batch", str(a.batch), "--steps",
                                  str(a.steps), "--child", h], capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"heap.py: the '{h}' process failed:\n{out.stderr.strip()}")
            runs[h].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1}, {h}: done", file=sys.stderr, flush=True)
    print(f"{a.model} b{a.batch}: torch's step, {a.steps} steps per process, median over {a.rounds} rounds")
    print("| step | " + " | ".join(f"{h}: ms, faults, sys ms" for h in HEAPS) + " |")
    print("|---|" + "---|" * len(HEAPS))
    med = statistics.median
    for s in range(a.steps):
        cells = []
        for h in HEAPS:
            at = [run["steps"][s] for run in runs[h]]
            cells.append(f"{med(x['ms'] for x in at):,.0f}, {med(x['faults'] for x in at):,.0f}, "
                         f"{med(x['sys_ms'] for x in at):,.0f}")
        print(f"| {s + 1} | " + " | ".join(cells) + " |")
    for h in HEAPS:
        later = [x["ms"] for run in runs[h] for x in run["steps"][1:]]
        rss = max(run["max_rss_kib"] for run in runs[h]) / 2**20
        print(f"{h}: steps 2..{a.steps} median {med(later):,.0f} ms (range {min(later):,.0f}-{max(later):,.0f}); "
              f"max RSS {rss:.2f} GiB")


if __name__ == "__main__":
    main()
