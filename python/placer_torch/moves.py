"""The plan's moves in a torch step, run as placer's executor runs them.

A `Mover` holds one plan's moves, (tensor, from, to, bytes, background, before step)
each, sorted by the step they are due at. `apply.py`'s hook calls `until` once the
kernel before a due move is done: a background move starts on the copy thread beside
the kernel it overlaps, and any move is finished (waited for, or run in line) before the
kernel it is due at. A move whose tensor autograd holds (`saved.py`) carries the
holder's tensor into the destination pool's memory; any other copies the planned bytes
between scratch buffers, so that the step pays the same copy either way.

The state of one step (what has started, what waits for its tensor to be saved, what
backward finished early) is reset by `begin`; `end` undoes the step's pin.
"""

from __future__ import annotations

import ctypes
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from . import _core, team

#: No move is due before this step (the hook's threshold when none is left).
_NEVER = 1 << 30


class Mover:
    """One plan's moves for the steps of one `Placed` (its `owner`), which keeps the
    saved tensors' holders, the pool memory and the hook the moves' copies land in."""

    def __init__(self, owner, moves, pin: bool):
        self.owner = owner
        self.moves = sorted(moves, key=lambda m: m[5])
        biggest = max((m[3] for m in self.moves), default=0)
        self._src = torch.empty(biggest, dtype=torch.uint8)
        self._dst = torch.empty(biggest, dtype=torch.uint8)
        self.copier = ThreadPoolExecutor(1, thread_name_prefix="placer-copy") if self.moves else None
        #: whether a step with background moves pins its thread (`_pin_for_copies`)
        self.pin_step = pin
        self._threads_started, self.pin = False, None
        self._reset()

    def begin(self) -> None:
        """A new step: nothing started or done yet; pinned, with `pin_step`."""
        self._reset()
        self._pin_for_copies()

    def _reset(self) -> None:
        self.done, self.next = 0, 0
        self.copy_wait_ns = self.in_line_ns = 0.0
        self.started: dict = {}
        #: background moves due to start before the kernel that saves their tensor: started
        #: when it is saved (by name, and the moves' indices)
        self.awaiting: dict = {}
        #: moves done ahead of their turn, when backward unpacked their tensor
        self.done_early: set = set()

    def end(self) -> None:
        """The step is over: its thread's mask comes back."""
        if self.pin is not None:
            self.pin.release()
            self.pin = None

    def _pin_for_copies(self) -> None:
        """With `pin_step` and background moves, the step's thread is pinned to its core
        for the step and the copy thread keeps off that core, as placer's executor runs a
        plan (`_core.pin_here`), so that a copy thread woken on the step's core cannot
        stall the ops torch dispatches from it. Off by default: on this project's VM the
        pinned step ran 9.3% slower, its copies at half the speed, sharing a core with an
        intra-op thread (docs/BENCHMARKS.md, "torch's background copies timed move by
        move"). torch's intra-op threads and the copy thread are started first,
        with the whole mask (`team.py`)."""
        self.pin = None
        if self.copier is None or not self.pin_step:
            return
        if not self._threads_started:
            with self.owner._own_ops():
                team.start()
            # The copy thread too: it would take the pinned mask of the thread starting
            # it, and `keep_off` keeps the cores a thread first had.
            self.copier.submit(_core.keep_off, None).result()
            self._threads_started = True
        self.pin = _core.pin_here()

    def threshold(self) -> int:
        """The first step at which `until` has work: a background move starts a step
        before its own, any move is finished at its step."""
        due = _NEVER
        for i in range(self.next, len(self.moves)):
            before, background = self.moves[i][5], self.moves[i][4]
            if before - 1 >= due:
                break
            if i in self.done_early:
                continue
            due = min(due, before - 1 if background and not self._begun(i) else before)
        return due

    def until(self, step: int) -> None:
        """Before kernel `step`: starts on the copy thread the background moves that
        overlap it, then finishes every move due before it (waiting for a background one,
        running a blocking one in line)."""
        for i in range(self.next, len(self.moves)):
            before, background = self.moves[i][5], self.moves[i][4]
            if before > step + 1:
                break
            if background and before == step + 1 and not self._begun(i) and i not in self.done_early:
                self._start(i)
        while self.next < len(self.moves) and self.moves[self.next][5] <= step:
            self._finish(self.next)
            self.next += 1

    def saved(self, name: str) -> None:
        """Autograd has just saved `name`: a background move that waited for its holder
        starts now."""
        waiting = self.awaiting.pop(name, None)
        if waiting is not None:
            self._start(waiting)

    def ahead(self, name: str, use: int) -> None:
        """Backward reads `name` now: its moves due by its next use (`use`) are done
        first, and not again at their turn."""
        for i in range(self.next, len(self.moves)):
            if self.moves[i][5] > use:
                break
            if self.moves[i][0] == name and i not in self.done_early:
                self._finish(i)
                self.done_early.add(i)

    def _begun(self, i: int) -> bool:
        """Whether background move `i` has started, or waits for its tensor's holder."""
        return i in self.started or i in self.awaiting.values()

    def _start(self, i: int) -> None:
        tensor = self.moves[i][0]
        if tensor not in self.owner.saved and tensor in self.owner.ever_saved:
            # The kernel beside the copy saves the tensor (autograd's hook runs as the op
            # ends): the copy starts from its holder then, rather than as scratch bytes.
            self.awaiting[tensor] = i
            return
        job, holder = self._move_job(i, beside=True)
        # Unpinned, the copy thread is left where the scheduler puts it.
        fut = self.copier.submit(job) if self.pin is None else self.copier.submit(_off_core, self.pin.cpu, job)
        self.started[i] = (fut, holder)
        if holder is not None:
            holder.pending = fut

    def _finish(self, i: int) -> None:
        """Move `i` done: waited for when started, else run here; a holder's tensor is the
        copy from then on."""
        if i in self.done_early:
            return
        if self.awaiting.get(self.moves[i][0]) == i:
            del self.awaiting[self.moves[i][0]]  # never saved after all: run here
        t0 = time.perf_counter_ns()
        if i in self.started:
            fut, holder = self.started.pop(i)
            new = fut.result()
            self.copy_wait_ns += time.perf_counter_ns() - t0
        else:
            job, holder = self._move_job(i, beside=False)
            new = job()
            self.in_line_ns += time.perf_counter_ns() - t0
        if holder is not None:
            self.owner._land(holder, new, self.moves[i][2])
        self.done += 1

    def _move_job(self, i: int, beside: bool):
        """The copy of move `i`: the saved tensor itself, into the destination pool's
        memory, when a holder has it in the move's source pool; else the move's bytes
        between scratch buffers (a tensor that is not saved, or a view of one). Either
        then waits what the emulated pools charge beyond the memcpy: `beside` the step's
        kernels, on the copy thread, as `_copy_beside` does, else in line."""
        tensor, src, dst, nbytes, _, _ = self.moves[i]
        owner = self.owner
        extra = owner.placement.copy_extra_ns(src, dst, nbytes)
        copy_into = _copy_beside if beside else _copy_in_line
        holder = owner.saved.get(tensor)
        if holder is None or holder.pool != src or holder.pending is not None:
            def scratch():
                copy_into(self._dst[:nbytes], self._src[:nbytes], extra)

            return scratch, None
        t = holder.t

        def copy():
            # Into DRAM through torch's allocator: pool memory kept for reuse would hold
            # DRAM between steps.
            into_pool = dst in owner.bound and dst != owner.dram
            new = owner.memory.tensor(dst, t) if into_pool else torch.empty_like(t)
            copy_into(new, t, extra)
            return new

        return copy, holder


def _off_core(cpu: int, job):
    """On the copy thread: `job` run off core `cpu` (the step's thread's)."""
    _core.keep_off(cpu)
    return job()


def _copy_in_line(dst: torch.Tensor, src: torch.Tensor, extra_ns: float) -> None:
    """A move the step waits for: every intra-op thread copies, then the emulated wait
    is spun, as placer's executor runs a blocking move."""
    dst.copy_(src)
    _core.busy_wait(extra_ns)


def _copy_beside(dst: torch.Tensor, src: torch.Tensor, extra_ns: float) -> tuple:
    """A move beside the step's kernels, as placer's executor's copy thread runs one: one
    thread's memcpy, then the emulated wait slept until `extra_ns` after the copy began.
    The solver charges a background copy's kernels for a single memcpy's CPU time
    (measured by the profile); torch's `copy_` here would start a second team of
    intra-op threads beside the step's, and a spun wait would take a core for the
    device's whole time. Both tensors are contiguous, of the same bytes. Returns when
    the memcpy began and ended (`perf_counter_ns`), for python/bench/move_trace.py."""
    start = time.perf_counter_ns()
    ctypes.memmove(dst.data_ptr(), src.data_ptr(), src.numel() * src.element_size())
    copied = time.perf_counter_ns()
    _core.sleep_wait(extra_ns - (copied - start))
    return start, copied
