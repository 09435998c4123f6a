"""What apply itself costs a torch step, with every tensor in DRAM: torch alone (twice:
the noise floor), torch under a Python `TorchDispatchMode` that only calls the op (what
any per-op Python costs), torch with an op observer that asks for every op's inputs and
outputs as apply's C++ hook does and does nothing (what torch's observer path alone
costs), and apply with a plan that pins every tensor to DRAM, with and without
re-homing. Interleaved step by step in one process, each contender on its own copy of
the model. scripts/torch/apply-cost.sh runs it with the host's FMA peak before and after.

    $(scripts/torch/venv.sh) python/bench/apply_cost.py --placer target/release/placer \
        [--model resnet18] [--batch 8] [--steps 20]
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
from torch.utils._python_dispatch import TorchDispatchMode

import placer_torch
from placer_torch import hook

sys.path.insert(0, str(Path(__file__).parent))
from side_by_side import captured  # noqa: E402  (the bench's models)

ROLES = ("input", "weight", "optimizer_state", "activation", "workspace", "gradient", "weight_gradient")


class CallOnly(TorchDispatchMode):
    """A dispatch mode that does nothing but call the op: the floor of any such mode."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--placer", required=True)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp())
    mpath = work / "model.json"
    model, batch, loss_fn, _ = captured(a.model, a.batch, mpath)
    plan = work / "all-dram.json"
    pins = [x for r in ROLES for x in ("--pin", f"role={r}:dram")]
    subprocess.run([a.placer, "solve", str(mpath), "--budget", "16GiB", "-o", str(plan), *pins], check=True,
                   capture_output=True)

    def contender(kind: str):
        m = copy.deepcopy(model)
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        placed = None
        if kind.startswith("apply"):
            placed = placer_torch.apply(m, opt, mpath, plan, rehome="no re-homing" not in kind)

        def step():
            opt.zero_grad()
            loss_fn(m(*batch[:-1]), batch[-1]).backward()
            opt.step()

        def run():
            if kind == "call-only mode":
                with CallOnly():
                    step()
            elif kind == "observer only":
                floor.begin()
                try:
                    step()
                finally:
                    floor.end()
            elif placed is None:
                step()
            else:
                with placed:
                    step()
        return run

    floor = hook.load().Floor()
    kinds = ["torch (A)", "torch (A′)", "call-only mode", "observer only", "apply", "apply, no re-homing"]
    runs = [contender(k) for k in kinds]
    for r in runs:  # two untimed steps each: pages, caches, the optimizer's state
        r()
        r()
    times = [[] for _ in runs]
    for _ in range(a.steps):
        for r, t in zip(runs, times):
            t0 = time.perf_counter()
            r()
            t.append(time.perf_counter() - t0)
    base = statistics.median(times[0])
    print(f"{a.model} b{a.batch}, every tensor in DRAM, {a.steps} interleaved steps each")
    print("| contender | step ms (median ± MAD) | vs torch (A) |")
    print("|---|---|---|")
    for k, t in zip(kinds, times):
        m = statistics.median(t)
        mad = statistics.median(abs(x - m) for x in t)
        print(f"| {k} | {m * 1e3:.1f} ± {mad * 1e3:.1f} | {m / base:.3f}× |")


if __name__ == "__main__":
    main()
