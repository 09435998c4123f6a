"""apply(): the user's own torch training step, run under a placer plan.

    placed = placer_torch.apply(model, optimizer, "model.json", "plan.json")
    for images, labels in loader:
        with placed:                      # one step: forward, backward, optimizer.step()
            ...the loop's body, unchanged...
    print(placed.report())

Inside `with placed:` an op hook below torch's dispatcher (`_hook.cpp`, compiled once by
`hook.py`) sees every aten op torch runs, in C++. Each op is matched, in order, against
the captured graph's ops (the same target and result shape), which names its results:
from then on torch's storage of each result is the placer tensor the plan places. Every
op then pays what the plan's pools charge for its operands, computed by placer's own Rust
code (`ExecPlan::kernel_wait_ns`, the function placer's executor charges by, called
directly from C++), and the plan's moves run at their steps, blocking ones in line and
background ones on a copy thread (`moves.py`, called from the hook when one is due).

Parameters, optimizer state and the gradients kept outside DRAM are re-homed: where the
pool the plan starts them in is bound to NUMA nodes, their data moves into that pool's memory,
allocated by placer's own pools (pages bound to the pool's nodes, and checked where they
landed; `pages()` asks the kernel again). A gradient moves there as backward finishes
it (one copy a step, into memory kept from step to step). Activations saved for
backward that the plan moves go through autograd's saved-tensor hooks to a holder, and
each of the plan's moves copies the holder's tensor into the destination pool's memory
at its step (background moves on the copy thread); backward reads whatever the holder
has by then (`saved.py`). Results are placed at birth: while an op runs, the hook's CPU
allocator gives an allocation of the size of a result the plan has outside DRAM at
that op that pool's memory. The step's other temporaries are torch's allocator's.

What this host can and cannot show: its slow pools are EMULATED (data stays in DRAM and
each op waits what the device model charges), so apply here changes timing, never data.
A move of a tensor no holder has copies the planned bytes between scratch buffers. In the
QEMU guest (scripts/vm) the re-homed tensors' pages are on the kmem-DAX node.
"""

from __future__ import annotations

import bisect
import contextlib
import statistics
import time
import weakref
from dataclasses import dataclass

import torch

from . import _core, heap, hook
from .capture import Capture
from .moves import Mover
from .saved import PoolMemory, Saved, routable

#: Eager ops that are the captured graph's op under another name (AOTAutograd
#: functionalises batch norm; eager autograd calls the plain op).
_SAME = {
    "aten.native_batch_norm.default": "aten._native_batch_norm_legit_functional.default",
    "aten._native_batch_norm_legit.default": "aten._native_batch_norm_legit_functional.default",
    "aten._batch_norm_with_update.default": "aten._native_batch_norm_legit_functional.default",
    "aten._softmax.default": "aten._safe_softmax.default",
}
#: Graph ops that eager torch runs as other ops. On a CPU, eager dropout is
#: `empty_like`, `bernoulli_`, `div_` (the noise) and then `mul(x, noise)`, and its
#: backward `mul(dy, noise)`, where AOTAutograd records `native_dropout`: the `mul`
#: does the dropout's work, and the noise is the mask.
_ALSO = {
    "aten.native_dropout.default": "aten.mul.Tensor",
    "aten.native_dropout_backward.default": "aten.mul.Tensor",
}


@dataclass
class StepRecord:
    seconds: float
    matched: int
    unmatched: int
    wait_ns: float
    #: of `wait_ns`, what ops not in the captured graph waited (no profile times them)
    wait_unmatched_ns: float
    moves: int
    dram_peak: int
    unplaced_peak: int
    polls: int
    routed: int
    unrouted: int
    saved_placed: int
    #: results born in the memory of the pool the plan has them in, and their bytes
    born: int
    born_bytes: int
    #: blocks born in pool memory that were not such a result (counted where they are)
    stray: int
    #: at the not-placed peak: bytes of storages the plan has no name for, by the op that made them
    unplaced_by: list
    #: the plan's tensors seen in torch's memory (DRAM) at a scan where the plan kept them elsewhere
    misplaced: list
    #: the plan's tensors torch still held in DRAM at a scan after the plan's last use of them
    outlived: list
    #: ns the step waited for background copies still running when their kernel came,
    #: and ns it spent in blocking moves (and background ones run in line)
    copy_wait_ns: float
    in_line_ns: float


@dataclass
class _Kernel:
    target: str
    shape: tuple | None
    inputs: list
    outputs: list
    step: int


class Placed:
    """A plan applied to a torch training step; enter it around each step."""

    def __init__(self, model, optimizer, model_path, plan_path, capture: Capture | None = None, rehome: bool = True,
                 born: bool = True, pin: bool = False):
        # The heap the profile timed torch's ops on (heap.py), so that the step runs as
        # predicted.
        self.heap = heap.describe()
        self.cap = capture or Capture.load(model_path)
        self.placement = _core.Placement(str(model_path), str(plan_path))
        self.homes = _core.Homes(self.placement) if rehome else None
        self.memory = PoolMemory(self.homes) if rehome else None
        #: pool -> the NUMA nodes its memory is bound to, for the pools that are bound
        self.bound = {pool: nodes for pool, nodes in self.homes.nodes() if nodes} if self.homes else {}
        #: placer tensor name -> (pool, bytes) of every tensor re-homed into pool memory
        self.homed: dict = {}
        #: the plan's tensors autograd has saved in any step so far (a move of one waits for its holder)
        self.ever_saved: set = set()
        schedule = self.placement.schedule()
        step_of = {name: i for i, name in enumerate(schedule)}
        self.steps = len(schedule)
        # What the emulated pools charge the plan's kernels a step for placer's operands,
        # as placer's executor waits, where the hook charges torch's ops for torch's: for
        # the kernels torch runs an op of the captured graph for, and for the rest (the
        # optimizer's updates, which eager torch runs as ops outside the graph).
        #: step -> the captured graph's torch op that runs that step's kernel (several
        #: steps may share one op: a convolution with a bias is two of placer's kernels)
        self.graph_op_at = {step_of[n]: k["target"] for k in self.cap.kernels for n in k["nodes"]}
        planned = self.placement.planned_waits_ns()
        #: (the graph's kernels, the rest) ns
        self.planned_waits_ns = (sum(w for s, w in enumerate(planned) if s in self.graph_op_at),
                                 sum(w for s, w in enumerate(planned) if s not in self.graph_op_at))
        self.kernels = []
        for k in self.cap.kernels:
            shape = tuple(k["shapes"][0]) if k["shapes"] and k["shapes"][0] is not None else None
            # Both sides are named through _SAME, so a pair matches whichever name the
            # graph recorded (`_softmax` or `_safe_softmax`).
            self.kernels.append(_Kernel(_SAME.get(k["target"], k["target"]), shape, k["inputs"], k["outputs"],
                                        max(step_of[n] for n in k["nodes"])))
        self.spans = {name: ([s for s, _ in sp], [p for _, p in sp]) for name, sp in self.placement.spans().items()}
        pools = self.placement.pools()
        self.pool_labels = dict(pools)
        # Pool 0 is DRAM, the pool the budget is for, whatever the host names it.
        self.dram = pools[0][0]
        self.emulated = any(self.pool_labels.values())
        # Updates run at the end of the schedule: optimizer ops find their step by tensor.
        self.update_step = {}
        for name, i in step_of.items():
            for suffix in (".sgd_momentum", ".sgd"):
                if name.endswith(suffix):
                    q = name[: -len(suffix)]
                    self.update_step[q] = i
                    self.update_step[f"{q}.grad"] = i
                    self.update_step[f"optimizer.state[{q}].momentum_buffer"] = i
        #: the steps of the graph's kernels, in order: a kernel that runs several of the
        #: schedule's nodes (a folded one) has the step of its last
        self.kernel_steps = sorted({k.step for k in self.kernels})
        self.mover = Mover(self, self.placement.moves(), pin)
        self.moved = self._moved()
        #: tensor name -> the steps of the graph's kernels that read it, in order
        self.uses: dict = {}
        for k in self.kernels:
            for name in k.inputs:
                if name is not None:
                    self.uses.setdefault(name, []).append(k.step)
        for steps in self.uses.values():
            steps.sort()
        #: tensor name -> the last step the plan holds it for (its last reader, else its
        #: writer); tensors no kernel writes (parameters, inputs, state) last all step
        made = {n: k.step for k in self.kernels for n in k.outputs if n is not None}
        self.ends = {n: max(s, self.uses.get(n, [s])[-1]) for n, s in made.items()}
        self.names = self.placement.names()
        self.ids = {n: i for i, n in enumerate(self.names)}
        self.routes_saved = bool(self.bound) and any(p != self.dram for p in self.bound)
        self.tracker = self._tracker(pools, born)
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self.model, self.optimizer = model, optimizer
        #: inside `with placed:`; `_internal` while apply itself runs ops (not the step's)
        self.active = self._internal = False
        #: parameter name -> its gradient's memory in its pool (see `_grad_hook`)
        self.grad_homes: dict = {}
        for q, p in model.named_parameters():
            span = self.spans.get(f"{q}.grad")
            # Outside DRAM only: memory kept from step to step would hold DRAM all step,
            # where the plan has a gradient from backward on (torch's allocator, DRAM,
            # gives it back when the optimizer is done).
            if p.requires_grad and span is not None and span[1][0] in self.bound and span[1][0] != self.dram:
                p.register_post_accumulate_grad_hook(self._grad_hook(q, span[1][0]))
        self.records: list = []

    def _tracker(self, pools, born: bool):
        """The op hook, given the graph's kernels, every tensor's spans, last steps,
        update steps and sizes by id, the Rust core's wait and spin functions, and (with
        `born`) the pool memory results are born in."""
        ext = hook.load()
        targets: dict = {}
        ids = self.ids

        def target(name):
            return targets.setdefault(name, len(targets)) if name is not None else -1

        kernels = [ext.Kernel(target(k.target), target(_ALSO.get(k.target)), list(k.shape) if k.shape is not None else None,
                              [ids[n] if n is not None else -1 for n in k.inputs],
                              [ids[n] if n is not None else -1 for n in k.outputs], k.step,
                              k.target == "aten.native_dropout.default")
                   for k in self.kernels]
        self.pool_ids = {name: i for i, (name, _) in enumerate(pools)}
        self.pool_names = [name for name, _ in pools]
        spans = [ext.Span(self.spans[n][0], [self.pool_ids[p] for p in self.spans[n][1]]) for n in self.names]
        ends = [self.ends.get(n, self.steps) for n in self.names]
        update = [self.update_step.get(n, -1) for n in self.names]
        wait, spin, take, give = _core.entry_points()
        # Results are born in the memory of a NUMA-bound pool other than DRAM.
        bornable = [name in self.bound and name != self.dram for name, _ in pools]
        homes = self.homes if self.routes_saved and born else None
        return ext.Tracker(kernels, spans, ends, update, targets, _SAME, self.steps, self.emulated, wait, spin,
                           self.placement, self._on_step, self.placement.sizes(), bornable, homes, take, give)

    @property
    def unmatched_ops(self) -> dict:
        """Ops of the last step that no kernel of the captured graph matched, and how often."""
        return dict(self.tracker.unmatched_ops())

    # -- the step ----------------------------------------------------------------------

    def __enter__(self):
        #: the holders of saved tensors, by name, while autograd keeps them: held here,
        #: a holder (and the DRAM a prefetch brought its tensor into) would outlive the
        #: backward node that frees it until the step ends (1.7 GB at ResNet-50 b32's
        #: async 25% plan)
        self.saved = weakref.WeakValueDictionary()
        self.routed, self.unrouted, self.saved_placed = 0, set(), 0
        self._rehome()
        self.mover.begin()
        self.tracker.begin(self._hook_step(self.mover.threshold()))
        for q, p in self.model.named_parameters():
            self._see(p, q, home=self._home_of(q))
            if p.grad is not None:
                self._see(p.grad, f"{q}.grad", home=self._home_of(f"{q}.grad"))
            buf = self.optimizer.state.get(p, {}).get("momentum_buffer")
            if buf is not None:
                state = f"optimizer.state[{q}].momentum_buffer"
                self._see(buf, state, home=self._home_of(state))
        self.t0 = time.perf_counter()
        self.active = True
        if self.routes_saved:
            self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        if self.routes_saved:
            self._hooks.__exit__(*exc)
        try:
            self.tracker.end()  # raises what an op met under the hook
        finally:
            self.active = False
            self.mover.end()
        mover = self.mover
        mover.until(self.steps)
        self.tracker.poll()
        c = self.tracker.counters()
        self.records.append(StepRecord(time.perf_counter() - self.t0, c["matched"], c["unmatched"], c["wait_ns"],
                                       c["wait_unmatched_ns"], mover.done, c["dram_peak"], c["unplaced_peak"],
                                       c["polls"],
                                       self.routed - self.saved_placed, len(self.unrouted), self.saved_placed,
                                       c["born"], c["born_bytes"], c["stray"], c["unplaced_by"],
                                       [self.names[i] for i in self.tracker.misplaced()],
                                       [self.names[i] for i in self.tracker.outlived()], mover.copy_wait_ns,
                                       mover.in_line_ns))
        self.saved = weakref.WeakValueDictionary()
        return False

    def _see(self, t: torch.Tensor, name: str | None, result: bool = False, home: str | None = None) -> None:
        """Tells the hook that `t`'s storage is the plan's tensor `name`, in the memory of
        pool `home` when apply put it there (else torch's, in DRAM). A name the model does
        not have (a parameter the capture left out) is not placed."""
        self.tracker.see(t, self.ids.get(name, -1) if name is not None else -1, result,
                         self.pool_ids[home] if home is not None else -1)

    @property
    def step(self) -> int:
        """The step of the graph's kernel the hook matched last."""
        return self.tracker.step

    def _home_of(self, name: str) -> str | None:
        """The pool whose memory apply re-homed `name` into, if it did."""
        homed = self.homed.get(name)
        return homed[0] if homed is not None else None

    def _on_step(self, step: int) -> int:
        """From the hook, once the kernel before `step` is done (and has paid its wait),
        when a move is due: runs the moves due by the next kernel, and answers the hook's
        step at which the next are."""
        self.mover.until(self._kernel_at(step))
        return self._hook_step(self.mover.threshold())

    def _kernel_at(self, step: int) -> int:
        """The step of the graph's kernel that runs schedule step `step`."""
        i = bisect.bisect_left(self.kernel_steps, step)
        return self.kernel_steps[i] if i < len(self.kernel_steps) else step

    def _hook_step(self, step: int) -> int:
        """The step the hook passes `_on_step` as the kernel before the one that runs
        `step` ends (that kernel's step + 1): a folded kernel's first nodes are not
        kernels of their own, and the moves due at them are due before it."""
        i = bisect.bisect_left(self.kernel_steps, step)
        return self.kernel_steps[i - 1] + 1 if 0 < i < len(self.kernel_steps) else step

    # -- moves and memory --------------------------------------------------------------

    def _set_moves(self, moves) -> None:
        """The moves to run, (tensor, from, to, bytes, background, before step) each."""
        self.mover = Mover(self, moves, self.mover.pin_step)
        self.moved = self._moved()

    def _moved(self) -> set:
        """Tensors the plan moves: their saved copies go through `Saved` holders, as do
        those it keeps outside DRAM when they are saved."""
        return {m[0] for m in self.mover.moves} if self.bound else set()

    def _rehome(self) -> None:
        """Parameters, and optimizer state once the optimizer has made it (after the first
        step), into the memory of the pool the plan starts them in, where that pool is
        bound to NUMA nodes."""
        if not self.bound:
            return
        with torch.no_grad():
            for q, p in self.model.named_parameters():
                new = self._home(p, q)
                if new is not None:
                    p.data = new
                state = self.optimizer.state.get(p)
                if state and state.get("momentum_buffer") is not None:
                    new = self._home(state["momentum_buffer"], f"optimizer.state[{q}].momentum_buffer")
                    if new is not None:
                        state["momentum_buffer"] = new

    def _home(self, t: torch.Tensor, name: str):
        if name in self.homed or name not in self.spans:
            return None
        pool = self.spans[name][1][0]
        if pool not in self.bound:
            return None
        new = self.memory.tensor(pool, t)
        new.copy_(t)
        self.homed[name] = (pool, new.numel() * new.element_size())
        return new

    def _grad_hook(self, q: str, pool: str):
        """After backward has accumulated parameter `q`'s gradient: the gradient moves
        into its own pool memory, allocated on the first step and used again by every
        later one (as torch's own `zero_grad(set_to_none=False)` keeps one gradient). A
        gradient accumulated into that memory already (not set to None) stays put."""
        name = f"{q}.grad"

        def hook(p):
            g = p.grad
            if not self.active or g is None:
                return
            home = self.grad_homes.get(q)
            if home is not None and home.data_ptr() == g.data_ptr():
                return
            if home is None or home.shape != g.shape or home.dtype != g.dtype:
                home = self.grad_homes[q] = self.memory.tensor(pool, g)
                self.homed[name] = (pool, home.numel() * home.element_size())
            with self._own_ops():
                home.copy_(g)
                p.grad = home
            self._see(home, name, result=True, home=pool)

        return hook

    @contextlib.contextmanager
    def _own_ops(self):
        """apply's own ops (its copies), which the hook lets through unmatched and
        uncharged, and autograd's hooks ignore."""
        self._internal = True
        self.tracker.set_internal(True)
        try:
            yield
        finally:
            self._internal = False
            self.tracker.set_internal(False)

    def release(self) -> int:
        """Frees the pool memory the last steps' saved activations used, which apply keeps
        for the next step's (a step then faults its pages in again). For a process that
        holds several plans at once; returns the bytes freed."""
        return self.memory.release() if self.memory is not None else 0

    def pages(self) -> list:
        """Per pool holding re-homed tensors, asked of the kernel now: (pool, tensors,
        bytes, pages asked about, on the pool's nodes, elsewhere, not placed, per node)."""
        return self.homes.pages() if self.homes is not None else []

    def _land(self, holder: Saved, new: torch.Tensor, pool: str) -> None:
        # torch's own copy, while forward still holds it: not placed
        self.tracker.forget(holder.t, self.ids[holder.name])
        holder.t, holder.pool, holder.pending = new, pool, None
        # In pool memory when the pool is bound and not DRAM; into DRAM through torch's.
        self._see(new, holder.name, result=True, home=pool if pool in self.bound and pool != self.dram else None)
        self.routed += 1

    # -- saved tensors -----------------------------------------------------------------

    def _pack(self, t: torch.Tensor):
        """Autograd saves `t`: a tensor the plan moves goes to a holder, which the
        plan's moves carry between pools."""
        if self._internal or not self.active:
            return t
        seen = self.tracker.names(t)
        name = self.names[seen[0]] if seen is not None and seen[0] >= 0 else None
        span = self.spans.get(name) if name is not None and name not in self.homed else None
        if span is None:
            return t
        pool = _pool_at(span, self.step)
        if name not in self.moved and (pool == self.dram or pool not in self.bound):
            return t
        born = self._born_in(t)
        if born == pool and name not in self.moved:
            return t  # born where the plan keeps it, and it stays there
        if not routable(t):
            self.unrouted.add(name)
            return t
        holder = self.saved.get(name)
        if holder is None and born == pool:
            holder = self.saved[name] = Saved(t, name, pool)  # its moves start from where it was born
        elif holder is None:
            holder = self.saved[name] = Saved(t, name, self.dram)
            if pool != self.dram and pool in self.bound:
                # Kept outside DRAM now: its saved copy goes into that pool's memory.
                with self._own_ops():
                    new = self.memory.tensor(pool, t)
                    new.copy_(t)
                self._land(holder, new, pool)
                self.saved_placed += 1
        self.ever_saved.add(name)
        self.mover.saved(name)
        return holder

    def _born_in(self, t: torch.Tensor) -> str | None:
        """The pool whose memory `t`'s storage was born in (the hook's CPU allocator), if any."""
        pool = hook.load().born_pool(t)
        return self.pool_names[pool] if pool >= 0 else None

    def _unpack(self, packed):
        """Backward needs the tensor now: the moves of it due by its next use are done
        first (waited for, or run here), and the holder's tensor is what it reads."""
        if not isinstance(packed, Saved):
            return packed
        uses = self.uses.get(packed.name, [])
        at = bisect.bisect_right(uses, self.step)
        use = uses[at] if at < len(uses) else self.steps
        self.mover.ahead(packed.name, use)
        return packed.t

    # -- the report --------------------------------------------------------------------

    def report(self, skip: int = 1) -> str:
        recs = self.records[skip:] or self.records
        if not recs:
            return "placer_torch: no step ran under the plan"
        times = [r.seconds * 1e3 for r in recs]
        med = statistics.median(times)
        mad = statistics.median(abs(t - med) for t in times)
        last = recs[-1]
        lines = [
            f"plan       {self.placement.strategy}, budget {self.placement.budget_bytes} B of DRAM",
            f"step       median {med:.3f} ms, MAD {mad:.3f} ms over {len(recs)} step(s); "
            f"predicted {self.placement.predicted_step_ns / 1e6:.3f} ms",
            f"ops        {last.matched} matched to the plan's kernels, {last.unmatched} not in the captured graph "
            f"(charged by their operands' places)",
            f"waits      {last.wait_ns / 1e6:.3f} ms per step charged by the emulated pools: the graph's ops "
            f"{(last.wait_ns - last.wait_unmatched_ns) / 1e6:.3f} ms (the plan charges its kernels "
            f"{self.planned_waits_ns[0] / 1e6:.3f} ms), ops not in the captured graph "
            f"{last.wait_unmatched_ns / 1e6:.3f} ms (the plan charges its kernels torch runs no graph op for "
            f"{self.planned_waits_ns[1] / 1e6:.3f} ms: the optimizer's updates among them)",
            f"moves      {last.moves} per step: {last.routed} carried a saved activation into its pool's memory, "
            f"{last.moves - last.routed} copied as many scratch bytes (a tensor not saved for backward, a view, or "
            f"memory not bound; {last.unrouted} saved view(s) left in torch's storage)",
            f"copies     the step waited {last.copy_wait_ns / 1e6:.3f} ms for background copies still running at "
            f"their kernel, and spent {last.in_line_ns / 1e6:.3f} ms in moves run in line",
            f"saved      {last.saved_placed} activation(s) saved for backward copied into the memory of the pool the "
            f"plan keeps them in",
            f"born       {last.born} result(s) born in the memory of the pool the plan has them in, {last.born_bytes} B; "
            f"{last.stray} other block(s) of those sizes born there (counted where they are)",
            f"DRAM peak  {last.dram_peak} B tracked (budget {self.placement.budget_bytes} B), of which "
            f"{last.unplaced_peak} B not placed by the plan (live storages scanned {last.polls} times in the step)",
            f"not placed {len(last.misplaced)} of the plan's tensors stayed in torch's memory (DRAM) while the plan kept "
            f"them elsewhere{_first(last.misplaced)}",
            f"outlived   {len(last.outlived)} of the plan's tensors still held by torch (DRAM, not placed) after the "
            f"plan's last use of them{_first(last.outlived)}",
            f"not named  at the not-placed peak, storages the plan has no name for, by the op that made them (the "
            f"largest five): {', '.join(f'{op} {b} B' for op, b in last.unplaced_by) or '-'}",
        ]
        for pool, n, nbytes, asked, on, elsewhere, unknown, per_node in self.pages():
            nodes = ",".join(str(x) for x in self.bound.get(pool, []))
            lines.append(f"pages      pool '{pool}' (bound to node {nodes}): {n} buffer(s) of pool memory (re-homed, "
                         f"saved or born; kept for reuse among them), {nbytes} B; {on} of {asked} pages checked are "
                         f"on its nodes, {elsewhere} elsewhere, {unknown} not placed (per node {per_node or '-'})")
        lines.append(f"heap       {self.heap}")
        if self.homed:
            lines.append("not homed  temporaries, and results the plan has in DRAM: torch's allocator places them")
        for name, label in self.pool_labels.items():
            if label:
                lines.append(f"EMULATED   pool '{name}' as {label}: data stays in DRAM; ops wait what the model charges")
        return "\n".join(lines)


def apply(model, optimizer, model_path, plan_path, capture: Capture | None = None, rehome: bool = True,
          born: bool = True, pin: bool = False) -> Placed:
    """The plan at `plan_path` (for the model captured at `model_path`) applied to
    `model` and `optimizer`: enter the result around each training step. With `rehome`,
    parameters and optimizer state move into their planned pool's memory where it is
    bound to NUMA nodes, and so do the saved activations the plan keeps there; with
    `born` too, every result the plan has outside DRAM is born in that pool's memory.
    With `pin`, a step with background moves runs pinned to its core, its copies off it.
    A plan for another model, or a missing or malformed capture, raises `ModelError` or
    `CaptureError` in one line."""
    return Placed(model, optimizer, model_path, plan_path, capture, rehome, born, pin)


def _first(names: list, n: int = 5) -> str:
    """': a, b, c and N more', or nothing for no names."""
    if not names:
        return ""
    more = f" and {len(names) - n} more" if len(names) > n else ""
    return ": " + ", ".join(sorted(names)[:n]) + more


def _pool_at(span, step: int) -> str:
    """The pool a tensor with `span` ([first steps], [pools]) is in at `step`; before its
    first span, that span's."""
    froms, pools = span
    return pools[0] if len(pools) == 1 else pools[max(0, bisect.bisect_right(froms, step) - 1)]
