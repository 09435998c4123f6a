"""What a plan's background copies cost torch's step: torch all in DRAM twice (A and A′,
the noise floor), torch under the plan, and torch under the same plan with every
background copy's memcpy left out (its emulated wait still slept, every move still
waited for where the plan waits), and under the plan with each background copy's bytes
memcpy'd over two 16 MiB buffers instead, as the profile's interference calibration
copies (they stay in a large last-level cache), interleaved in rounds in one process.
The last two contenders' numbers are wrong by design (copies are not made), so their
losses are not compared. The plan's step against the first of them is what the copies
take from torch's kernels, which the solver predicts as "slowed by copies beside them";
the second says how much of that a copy that takes no DRAM bandwidth costs.

Run through scripts/torch/pybench.sh, which prints the host's FMA peak; DIR is a
`side_by_side.py --rounds 0 --work DIR` directory:

    scripts/torch/pybench.sh copies.py --work DIR --model resnet50 --batch 32 DIR/async25.json
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import time
from pathlib import Path
from unittest import mock

import torch

from placer_torch import _core
from placer_torch import moves as _MOVES
from side_by_side import Contender, floor, given_plans, in_order, med_mad


def _no_memcpy(dst, src, extra_ns):
    _core.sleep_wait(extra_ns)


#: two buffers of the profile's interference calibration's size (16 MiB each)
_CACHED = (torch.ones(16 << 20, dtype=torch.uint8), torch.zeros(16 << 20, dtype=torch.uint8))


def _cached_memcpy(dst, src, extra_ns):
    """As many bytes as the copy, memcpy'd over `_CACHED` the way the calibration copies
    (its buffers stay in a large last-level cache), then the same sleep."""
    start = time.perf_counter_ns()
    left, (a, b) = src.numel() * src.element_size(), _CACHED
    while left > 0:
        n = min(left, a.numel())
        ctypes.memmove(b.data_ptr(), a.data_ptr(), n)
        left -= n
    _core.sleep_wait(extra_ns - (time.perf_counter_ns() - start))


def main() -> None:
    a, mpath, model, data, loss_fn = given_plans()
    plain = floor(model, data, loss_fn)
    planned = Contender("the plan", model, data, loss_fn, Path(a.plan), mpath)
    bare = Contender("the plan, background copies without their memcpy", model, data, loss_fn, Path(a.plan), mpath)
    cached = Contender("the plan, background memcpys over two 16 MiB buffers", model, data, loss_fn, Path(a.plan),
                       mpath)
    # The same two in the arrangement the profile calibrates in and placer's executor
    # runs: the step's thread pinned to its core, the copy thread kept off it.
    pinned = Contender("the plan, pinned", model, data, loss_fn, Path(a.plan), mpath, pin=True)
    pinned_bare = Contender("the plan, pinned, background copies without their memcpy", model, data, loss_fn,
                            Path(a.plan), mpath, pin=True)
    cs = plain + [planned, bare, cached, pinned, pinned_bare]
    copy_of = {bare: _no_memcpy, cached: _cached_memcpy, pinned_bare: _no_memcpy}
    for r in range(a.rounds):
        for c in in_order(cs, r):
            patch = mock.patch.object(_MOVES, "_copy_beside", copy_of[c]) if c in copy_of else contextlib.nullcontext()
            with patch:
                c.round(a.steps)
    base = med_mad([t * 1e3 for t in cs[0].times])[0]
    doc = json.loads(Path(a.plan).read_text())
    predicted = doc["predicted"]
    print(f"\n{a.model} b{a.batch}, {Path(a.plan).name}: {a.rounds} rounds of {a.steps} steps (the first of each "
          f"round not timed); predicted step {predicted['step_ns'] / 1e6:.1f} ms, of it "
          f"{predicted['interference_ns'] / 1e6:.1f} ms by which copies slow the kernels beside them")
    print("| contender | step ms (median ± MAD) | vs A | copies waited ms | moves in line ms |")
    print("|---|---|---|---|---|")
    for c in cs:
        m, d = med_mad([t * 1e3 for t in c.times])
        waited = inline = "-"
        if c.placed is not None:
            r = c.placed.records[-1]
            waited, inline = f"{r.copy_wait_ns / 1e6:.1f}", f"{r.in_line_ns / 1e6:.1f}"
        print(f"| {c.label} | {m:.1f} ± {d:.1f} | {m / base:.3f}× | {waited} | {inline} |")
    mp, mb = med_mad([t * 1e3 for t in planned.times])[0], med_mad([t * 1e3 for t in bare.times])[0]
    mc = med_mad([t * 1e3 for t in cached.times])[0]
    pp, pb = (med_mad([t * 1e3 for t in c.times])[0] for c in (pinned, pinned_bare))
    print(f"\nthe copies' memcpy cost the step {mp - mb:.1f} ms (the plan against the plan without it); "
          f"as many bytes over cached buffers cost it {mc - mb:.1f} ms; "
          f"pinned, the memcpy cost it {pp - pb:.1f} ms; "
          f"A against A′: {med_mad([t * 1e3 for t in cs[1].times])[0] - base:+.1f} ms")
    print(f"losses of A, A′ and the plan identical, every step of every round: "
          f"{all(c.losses == cs[0].losses for c in cs[:3])}")


if __name__ == "__main__":
    main()
