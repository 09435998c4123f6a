"""Where a plan's background copies spend their time in torch: every move of the plan's
steps timed on both sides (when the hook issued it, when the copy thread began it, its
memcpy, its emulated wait, when its kernel needed it and how long the step waited), with
a memcpy of the same bytes between two held buffers on an idle process for scale. The
plan runs twice, interleaved in rounds with torch all in DRAM: as apply runs it by
default (the step's thread and the copy thread unpinned), and with `apply(..., pin=True)`
(the step's thread pinned to its core, the copy thread kept off it).

Run through scripts/torch/pybench.sh, which prints the host's FMA peak; DIR is a
`side_by_side.py --rounds 0 --work DIR` directory:

    scripts/torch/pybench.sh move_trace.py --work DIR --model resnet50 --batch 32 DIR/plan-25-torch-kernels.json
"""

from __future__ import annotations

import ctypes
import json
import statistics
import threading
import time
from pathlib import Path

import torch
from placer_torch import moves as _MOVES

from side_by_side import Contender, given_plans, in_order, med_mad



class Traced:
    """A contender whose every move is timed (see the module's comment)."""

    def __init__(self, contender, pinned: bool):
        self.c, self.per_step = contender, []
        placed = contender.placed
        placed.mover.pin_step = pinned  # as `apply(..., pin=pinned)`
        now = time.perf_counter_ns
        self.trace: dict = {}
        trace, local = self.trace, threading.local()
        mover = placed.mover
        real_start, real_finish, real_job = mover._start, mover._finish, mover._move_job
        real_beside = _MOVES._copy_beside

        def beside_(dst, src, extra_ns):
            t0, t1 = real_beside(dst, src, extra_ns)
            local.times = (t0, t1, now(), extra_ns)

        def start(i):
            trace.setdefault(i, {})["issued"] = (now(), placed.step)
            real_start(i)

        def job(i, beside):
            j, holder = real_job(i, beside=beside)

            def traced():
                r = j()
                if beside:
                    trace.setdefault(i, {})["copy"] = local.times
                return r

            return traced, holder

        def finish(i):
            t0 = now()
            real_finish(i)
            trace.setdefault(i, {})["needed"] = (t0, now(), placed.step)

        self.beside = beside_
        mover._start, mover._finish, mover._move_job = start, finish, job

    def round(self, steps: int) -> None:
        c = self.c
        c.model.load_state_dict(c.start[0])
        c.opt.load_state_dict(c.start[1])
        real = _MOVES._copy_beside
        _MOVES._copy_beside = self.beside
        try:
            losses = []
            for s in range(steps):
                self.trace.clear()
                torch.manual_seed(1000 + s)
                t0 = time.perf_counter()
                with c.placed:
                    losses.append(c.step())
                if s > 0:
                    c.times.append(time.perf_counter() - t0)
                    self.per_step.append(dict(self.trace))
            c.losses.append(losses)
        finally:
            _MOVES._copy_beside = real
        c.placed.release()


def main() -> None:
    a, mpath, model, data, loss_fn = given_plans()
    plain = Contender("torch, all in DRAM (A)", model, data, loss_fn)
    runs = [Traced(Contender(f"the plan, {how}", model, data, loss_fn, Path(a.plan), mpath), how == "pinned")
            for how in ("unpinned", "pinned")]
    for r in range(a.rounds):
        for x in in_order([plain] + runs, r):
            x.round(a.steps)
    doc = json.loads(Path(a.plan).read_text())
    placed = runs[0].c.placed
    # A memcpy of the same bytes between two held buffers, this thread, nothing beside it.
    biggest = max(m[3] for m in placed.mover.moves)
    src, dst = torch.ones(biggest, dtype=torch.uint8), torch.zeros(biggest, dtype=torch.uint8)
    ctypes.memmove(dst.data_ptr(), src.data_ptr(), biggest)
    idle = []
    for _ in range(3):
        t0 = time.perf_counter_ns()
        ctypes.memmove(dst.data_ptr(), src.data_ptr(), biggest)
        idle.append(biggest / (time.perf_counter_ns() - t0))
    base = med_mad([t * 1e3 for t in plain.times])[0]
    print(f"\n{a.model} b{a.batch}, {Path(a.plan).name}: {a.rounds} rounds of {a.steps} steps (the first of each "
          f"not timed); predicted step {doc['predicted']['step_ns'] / 1e6:.1f} ms, exposed copies "
          f"{doc['predicted']['exposed_copy_ns'] / 1e6:.1f} ms, blocking moves "
          f"{doc['predicted']['sync_move_ns'] / 1e6:.1f} ms")
    print(f"torch all in DRAM (A): {base:.1f} ms; idle memcpy of {biggest / 2**20:.1f} MiB between held buffers: "
          f"{statistics.median(idle):.2f} GB/s")
    for x in runs:
        m, d = med_mad([t * 1e3 for t in x.c.times])
        print(f"\n{x.c.label}: {m:.1f} ± {d:.1f} ms ({m / base:.3f}× A)")
        print("| step | background moves | GB | memcpy ms (GB/s) | emulated sleep ms | queued ms | waited ms "
              "(moves waited > 50 µs) |")
        print("|---|---|---|---|---|---|---|")
        worst = []
        for k, tr in enumerate(x.per_step):
            bg = {i: t for i, t in tr.items() if "copy" in t}
            nbytes = sum(placed.mover.moves[i][3] for i in bg)
            memcpy = sum(t["copy"][1] - t["copy"][0] for t in bg.values())
            sleep = sum(t["copy"][2] - t["copy"][1] for t in bg.values())
            queued = sum(t["copy"][0] - t["issued"][0] for t in bg.values() if "issued" in t)
            waits = {i: t["needed"][1] - t["needed"][0] for i, t in bg.items() if "needed" in t}
            print(f"| {k} | {len(bg)} | {nbytes / 1e9:.2f} | {memcpy / 1e6:.1f} ({nbytes / max(memcpy, 1):.2f}) | "
                  f"{sleep / 1e6:.1f} | {queued / 1e6:.1f} | {sum(waits.values()) / 1e6:.1f} "
                  f"({sum(1 for w in waits.values() if w > 50_000)}) |")
            worst += [(w, k, i, bg[i]) for i, w in waits.items()]
        worst.sort(key=lambda w: -w[0])
        print("\nthe longest waits: | wait ms | step | move | tensor | MiB | before step | issued at step | "
              "queued ms | memcpy ms (GB/s) | sleep ms (emulated charge ms) |")
        for w, k, i, t in worst[:10]:
            mv = placed.mover.moves[i]
            issued = t.get("issued", (t["copy"][0], -1))
            mc = t["copy"][1] - t["copy"][0]
            print(f"| {w / 1e6:.1f} | {k} | {i} | {mv[0]} | {mv[3] / 2**20:.1f} | {mv[5]} | {issued[1]} | "
                  f"{(t['copy'][0] - issued[0]) / 1e6:.1f} | {mc / 1e6:.1f} ({mv[3] / max(mc, 1):.2f}) | "
                  f"{(t['copy'][2] - t['copy'][1]) / 1e6:.1f} ({t['copy'][3] / 1e6:.1f}) |")
    print(f"\nlosses of A and both plans identical: {all(x.c.losses == plain.losses for x in runs)}")
    print(f"\n{runs[1].c.label}:\n{runs[1].c.placed.report()}")


if __name__ == "__main__":
    main()
