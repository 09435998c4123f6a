"""Results born in their pool, against results born in torch's memory, under one plan:
torch alone (twice: the noise floor), then apply with births (`born=True`, the default)
and without (`born=False`, every result torch's until a holder copies it out), each on
its own copy of the model, interleaved step by step in one process. Per contender: the
step time, the DRAM peak apply tracked, how much of it the plan did not place, the
results born in their pool and the strays, and whether the losses equal torch's.
scripts/torch/births.sh runs it with the host's FMA peak before and after.

    $(scripts/torch/venv.sh) python/bench/births.py --placer target/release/placer \
        [--model resnet18] [--batch 8] [--budget 25%] [--steps 10] [--release]

The plan is solved from the cost model alone (no profile): what is compared is where
the bytes are and what placing them costs, not the plan's quality.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

import placer_torch

sys.path.insert(0, str(Path(__file__).parent))
from side_by_side import captured  # noqa: E402  (the bench's models)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--placer", required=True)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--budget", default="25%")
    ap.add_argument("--steps", type=int, default=10)
    # ResNet-50 b32's four contenders, each apply one keeping its pool memory for its next
    # step, did not fit in 24 GiB. Released after every step, that memory faults in
    # again inside the next step's timing, which slows the apply contenders alone.
    ap.add_argument("--release", action="store_true", help="free apply's kept pool memory after every step")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp())
    mpath = work / "model.json"
    model, batch, loss_fn, _ = captured(a.model, a.batch, mpath)
    plan = work / "plan.json"
    subprocess.run([a.placer, "solve", str(mpath), "--budget", a.budget, "--checkpoint-dir", str(work / "none"),
                    "-o", str(plan)], check=True, capture_output=True)

    kinds = ["torch (A)", "torch (A′)", "apply, born in their pool", "apply, born in torch's memory"]
    contenders = []
    for kind in kinds:
        m = copy.deepcopy(model)
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        placed = None if kind.startswith("torch") else placer_torch.apply(m, opt, mpath, plan,
                                                                          born="their pool" in kind)
        contenders.append((m, opt, placed, [], []))

    def step(c) -> float:
        m, opt, placed, times, losses = c
        torch.manual_seed(1000 + len(losses))  # dropout draws the same masks in every contender
        t0 = time.perf_counter()
        if placed is not None:
            placed.__enter__()
        try:
            opt.zero_grad()
            loss = loss_fn(m(*batch[:-1]), batch[-1])
            loss.backward()
            opt.step()
        finally:
            if placed is not None:
                placed.__exit__(None, None, None)
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
        if a.release and placed is not None:
            placed.release()

    for c in contenders:  # two untimed steps each: pages, caches, the optimizer's state
        step(c)
        step(c)
    for c in contenders:
        c[3].clear()
    for _ in range(a.steps):
        for c in contenders:
            step(c)
    base = statistics.median(contenders[0][3])
    budget = contenders[2][2].placement.budget_bytes
    print(f"{a.model} b{a.batch}, plan at {a.budget} ({budget / 2**20:.1f} MiB of DRAM; cost model), "
          f"{a.steps} interleaved steps each")
    print("| contender | step ms (median ± MAD) | vs torch (A) | DRAM peak tracked MiB | of it not placed MiB "
          "| plan tensors left in DRAM | born (MiB) | strays | losses = torch's |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, (_, _, placed, times, losses) in zip(kinds, contenders):
        med = statistics.median(times)
        mad = statistics.median(abs(x - med) for x in times)
        same = "yes" if losses == contenders[0][4] else "NO"
        row = f"| {kind} | {med * 1e3:.1f} ± {mad * 1e3:.1f} | {med / base:.3f}× |"
        if placed is None:
            print(row + f" - | - | - | - | - | {same} |")
            continue
        r = placed.records[-1]
        print(row + f" {r.dram_peak / 2**20:.1f} | {r.unplaced_peak / 2**20:.1f} | {len(r.misplaced)} "
                    f"| {r.born} ({r.born_bytes / 2**20:.1f}) | {r.stray} | {same} |")
    for kind, (_, _, placed, _, _) in zip(kinds, contenders):
        if placed is not None:
            print(f"\n{kind}:\n{placed.report()}")


if __name__ == "__main__":
    main()
