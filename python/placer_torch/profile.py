"""profile(): placer's profiler, timing torch's own kernels.

The passes, the screening design, the checkpoints and the round checks are placer's
(the Rust core runs `placer profile`'s own code); only the kernel differs. For every
placer node the executor hands this runner the bytes of its operands, in the pools the
pass configures, and the runner replays the aten calls the captured graph made for that
node on torch tensors laid over those bytes, timing them itself. An emulated pool then
adds its wait for the node's operands, as for placer's kernels.

What each placer node is timed as:
- the aten calls recorded for it at capture (most nodes: one op, such as
  `aten.convolution.default`; the loss: `_log_softmax` then `nll_loss_forward`; an SGD
  update: the in-place ops torch's single-tensor SGD makes);
- nothing (0 ns plus its wait) for a node *folded* into another's calls: a layout copy
  placer needs that torch's op does itself;
- placer's own kernel where torch has no call for the node (a gradient copied to its
  own tensor): listed, and recorded in the checkpoint.

An aten call that reads a tensor that is not an operand of its node (the other half of a
folded pair) reads a scratch tensor of the runner's, in DRAM; its pool is charged to the
node that has it as an operand.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time

import torch

from . import _core, heap
from .capture import Capture, CaptureError

ProfileError = _core.ProfileError


def profile(model_path, checkpoint_dir=None, *, rounds: int = 3, fresh: bool = False, full_design: bool = False,
            skip_calibrations: bool = False, progress: bool = True, step=None) -> dict:
    """Profiles the captured model at `model_path` with torch's kernels, as `placer
    profile MODEL` profiles it with placer's, into `checkpoint_dir` (by default
    PLACER_CHECKPOINT_DIR or `checkpoints`, as the CLI's). The checkpoint's name ends in
    `-torch.ckpt`; `placer solve MODEL --profile CKPT` plans with it and `placer compare`
    sets it against placer's own profile. Resumes what an interrupted run left unless
    `fresh`. Returns the checkpoint's path and counts.

    `step`, a callable that runs one training step of the user's own loop unmodified
    (forward, backward, optimizer step), lets the profile measure what torch spends
    beyond its kernels: whole steps of it alternate with steps of the replayed kernels,
    and the difference of their medians is the step overhead every prediction adds (as
    `placer profile` measures its executor's). Without it the profile has none, and its
    predictions leave out torch's time between kernels. The step trains: give it a copy
    of the model if its weights matter."""
    cap = Capture.load(model_path)
    runner = TorchKernels(model_path, cap)
    if checkpoint_dir is None:
        checkpoint_dir = os.environ.get("PLACER_CHECKPOINT_DIR", "checkpoints")

    def on_pass(done, total):
        if progress:
            print(f"\rprofile (torch kernels): pass {done} of {total}", end="", file=sys.stderr, flush=True)

    try:
        out = _core.profile(str(model_path), str(checkpoint_dir), runner, runner.label, "torch",
                            runner.placer_nodes, runner.folded_nodes, rounds=rounds, fresh=fresh,
                            full_design=full_design, skip_calibrations=skip_calibrations, on_pass=on_pass,
                            step=step)
    finally:
        if progress:
            print(file=sys.stderr)
    out = dict(out)
    out["label"] = runner.label
    out["placer_nodes"] = list(runner.placer_nodes)
    out["folded_nodes"] = list(runner.folded_nodes)
    return out


class TorchKernels:
    """The kernel runner: called by placer's executor as `runner(node, inputs, written)`
    with each operand as (address, bytes), valid during the call only."""

    def __init__(self, model_path, cap: Capture):
        self.nodes = _core.node_operands(str(model_path))
        folded = set(cap.folded)
        self.chains = []
        self.placer_nodes, self.folded_nodes = [], []
        for name, _, _ in self.nodes:
            chain = cap.calls.get(name)
            if chain is None:
                (self.folded_nodes if name in folded else self.placer_nodes).append(name)
                self.chains.append(None)
            else:
                self.chains.append([(c, _op(c["target"])) for c in chain])
        self.is_folded = [name in folded for name, _, _ in self.nodes]
        # The label is recorded in the checkpoint: ops timed on a steady heap and on one
        # left as found are different measurements (heap.py).
        held = "steady C heap" if heap.steady() else "C heap as found"
        self.label = f"torch {torch.__version__} (aten ops, eager, CPU, {torch.get_num_threads()} threads, {held})"
        #: (address, bytes, dtype) -> a flat tensor over those bytes (see `_over`)
        self.views: dict = {}
        #: (tensor name, dtype) -> a scratch tensor for a non-operand
        self.scratch: dict = {}

    def __call__(self, n: int, inputs: list, written: list):
        chain = self.chains[n]
        if chain is None:
            return 0.0 if self.is_folded[n] else None
        name, ins, outs = self.nodes[n]
        env = dict(zip(ins, inputs))
        out_env = dict(zip(outs, written))
        env.update(out_env)
        prepared = [(c, op, self.arg(c["args"], env), self.arg(c["kwargs"], env)) for c, op in chain]
        results: dict = {}
        start = time.perf_counter_ns()
        for c, op, args, kwargs in prepared:
            try:
                results[c["fx"]] = op(*_sub(args, results), **_sub(kwargs, results))
            except Exception as e:  # the profile stops with the node, the op and torch's line
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise RuntimeError(f"{c['target']} (graph node {c['fx']}): {first}") from None
        elapsed = time.perf_counter_ns() - start
        # The results go where placer's kernel would have written them, untimed, so the
        # kernels after this one read what torch computed.
        for c, _, _, _ in prepared:
            res = results[c["fx"]]
            items = res if isinstance(res, (tuple, list)) else [res]
            for t, r in zip(c["outputs"], items):
                if t is not None and t in out_env and isinstance(r, torch.Tensor):
                    addr, size = out_env[t]
                    if r.numel() * r.element_size() == size:
                        self._over(addr, size, r.dtype).copy_(r.reshape(-1))
        return float(elapsed)

    def arg(self, a, env: dict):
        """An encoded argument as torch values; earlier results stay `_Result`s."""
        if isinstance(a, list):
            return [self.arg(x, env) for x in a]
        if isinstance(a, dict):
            if "t" in a:
                return self.tensor(a, env)
            if "fx" in a:
                return _Result(a["fx"], a.get("index"))
            if "fresh" in a:
                return self.fresh(a)
            if "dtype" in a:
                return getattr(torch, a["dtype"])
            if "torch" in a:
                return getattr(torch, a["torch"])
            return {k: self.arg(v, env) for k, v in a.items()}
        return a

    def tensor(self, ref: dict, env: dict) -> torch.Tensor:
        dtype = getattr(torch, ref["dtype"])
        if ref["t"] in env:
            flat = self._over(*env[ref["t"]], dtype)
        else:
            flat = self._scratch(ref["t"], dtype, _numel(ref["base"]))
        base = flat.view(ref["base"])
        return base.permute(ref["perm"]) if ref["perm"] else base.view(ref["shape"])

    def fresh(self, a: dict) -> torch.Tensor:
        """torch state placer does not hold (batch norm's running statistics)."""
        return self._scratch(("fresh", tuple(a["fresh"])), getattr(torch, a["dtype"]), _numel(a["fresh"])).view(
            a["fresh"])

    def _over(self, addr: int, size: int, dtype) -> torch.Tensor:
        """A flat tensor over `size` bytes at `addr`. Kept by (address, bytes, dtype):
        one is used again only for the operand the executor passes at that address, so
        it always views memory the executor owns at the time."""
        key = (addr, size, dtype)
        t = self.views.get(key)
        if t is None:
            if len(self.views) > 100_000:
                self.views.clear()
            t = torch.frombuffer((ctypes.c_ubyte * size).from_address(addr), dtype=dtype)
            self.views[key] = t
        return t

    def _scratch(self, key, dtype, numel: int) -> torch.Tensor:
        t = self.scratch.get((key, dtype))
        if t is None:
            g = torch.Generator().manual_seed(len(self.scratch))
            if dtype.is_floating_point:
                t = torch.rand(numel, generator=g).to(dtype) + 0.5
            elif dtype == torch.bool:
                t = torch.ones(numel, dtype=dtype)
            else:
                t = torch.zeros(numel, dtype=dtype)
            self.scratch[(key, dtype)] = t
        return t


class _Result:
    __slots__ = ("fx", "index")

    def __init__(self, fx: str, index):
        self.fx, self.index = fx, index


def _sub(a, results: dict):
    if isinstance(a, _Result):
        r = results[a.fx]
        return r if a.index is None else r[a.index]
    if isinstance(a, list):
        return [_sub(x, results) for x in a]
    if isinstance(a, dict):
        return {k: _sub(v, results) for k, v in a.items()}
    return a


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _op(target: str):
    """`aten.convolution.default` as torch's op overload."""
    parts = target.split(".")
    if len(parts) != 3 or parts[0] != "aten":
        raise CaptureError(f"the capture records a call to '{target}', which is not an aten op")
    try:
        return getattr(getattr(torch.ops.aten, parts[1]), parts[2])
    except AttributeError:
        raise CaptureError(f"this torch ({torch.__version__}) has no op '{target}'") from None
