"""From AOTAutograd's joint graph (aten ops, forward and backward) to placer's op set.

Each handler reads one aten node and emits the placer nodes that do its work. A node
placer has no op for raises `Unsupported`; the caller collects every such op and refuses
the capture in one line that lists them all.
"""

from __future__ import annotations

import operator

import torch
import torch.fx

from .builder import DTYPES, Builder, CaptureError, Unsupported, Val, compose, meta_dtype, meta_shape
from .builder import flat as _flat
from .handlers import TABLE as HANDLERS


class Lowering:
    def __init__(self, gm: torch.fx.GraphModule, names: dict, forward: set, const: set):
        self.gm = gm
        #: placeholder name -> the torch name of what it holds (parameter, buffer, batch[i])
        self.names = names
        self.forward = forward
        self.const = const
        self.b = Builder()
        self.vals: dict = {}
        self.getitems: dict = {}
        self.pending: dict = {}
        #: alias nodes of values that exist only once a later node resolves them
        self.aliases: dict = {}
        #: Per aten node that became placer nodes, in graph order: what apply matches
        #: torch's eager ops against (target, output shapes, placer outputs and nodes).
        self.kernels: list = []
        #: torch state the step updates that placer's op set does not hold, with bytes.
        self.outside: list = []
        self.unsupported: dict = {}
        self.poisoned: set = set()
        #: Per placer node, the aten calls that do its work in torch, in order (what the
        #: torch-kernel profile replays), and the nodes whose work torch does inside
        #: another node's calls (layout copies placer needs and torch's ops do themselves).
        self.calls: dict = {}
        #: FX node -> the calls eager torch runs in its place, where they are not the
        #: graph's own (dropout: the graph's `native_dropout` is eager's noise and `mul`)
        self.replay_as: dict = {}
        self.folded: set = set()
        self.replayed: set = set()
        for n in gm.graph.nodes:
            if n.op == "call_function" and n.target is operator.getitem:
                self.getitems.setdefault(n.args[0].name, {})[n.args[1]] = n

    # -- values ------------------------------------------------------------------------

    def val(self, a) -> Val:
        if not isinstance(a, torch.fx.Node):
            raise Unsupported(f"a number where placer needs a tensor ({a!r})")
        if a.name not in self.vals and a.name in self.const:
            # Computed from buffers alone (position ids): an input of the step to placer.
            self.vals[a.name] = self.b.tensor(self.names.get(a.name, a.name), meta_shape(a), meta_dtype(a), "input")
        v = self.vals.get(a.name)
        if v is None and a.name in self.aliases:
            return self.val(self.aliases[a.name])
        if not isinstance(v, Val):
            raise CaptureError(f"internal: '{a.name}' has no placer tensor")
        return v

    def dense(self, a, name: str | None = None) -> Val:
        """The value of `a` laid out as torch's shape says, materialised if need be."""
        v = self.val(a)
        return self.b.torch_shaped(v, name or a.name)

    def out_name(self, n, i: int) -> str:
        g = self.getitems.get(n.name, {}).get(i)
        return g.name if g is not None else f"{n.name}.{i}"

    def out_meta(self, n, i: int):
        return n.meta["val"][i]

    # -- the walk ----------------------------------------------------------------------

    def run(self) -> None:
        for n in self.gm.graph.nodes:
            if n.op != "call_function" or n.name in self.const:
                continue
            self.b.backward = n.name not in self.forward
            if n.target is operator.getitem:
                parent = self.vals.get(n.args[0].name)
                if n.args[0].name in self.poisoned:
                    self.poisoned.add(n.name)
                elif isinstance(parent, list):
                    self.vals[n.name] = parent[n.args[1]]
                continue
            key = str(n.target)
            handler = HANDLERS.get(key)
            if handler is None:
                self.refuse(n, key)
                continue
            if any(isinstance(a, torch.fx.Node) and a.name in self.poisoned for a in n.all_input_nodes):
                self.poisoned.add(n.name)
                continue
            first = len(self.b.nodes)
            try:
                out = handler(self, n)
            except Unsupported as e:
                self.refuse(n, str(e))
                continue
            if out is not None:
                self.vals[n.name] = out
            emitted = [x["name"] for x in self.b.nodes[first:]]
            if emitted:
                self.kernel(n, key, out, emitted)
        if self.unsupported:
            parts = [f"{op} ({len(ns)}x, first '{ns[0]}')" for op, ns in sorted(self.unsupported.items())]
            raise CaptureError(
                f"{len(self.unsupported)} torch op(s) in the training step have no placer op: " + "; ".join(parts)
            )

    def kernel(self, n, target: str, out, nodes: list) -> None:
        vals = out if isinstance(out, list) else [out]
        outputs = [v.name if isinstance(v, Val) else None for v in vals]
        val = n.meta.get("val")
        metas = val if isinstance(val, (list, tuple)) else [val]
        shapes = [list(m.shape) if isinstance(m, torch.Tensor) else None for m in metas]
        inputs = []
        for a in _flat(n.args):
            if isinstance(a, torch.fx.Node):
                v = self.vals.get(a.name)
                inputs.append(v.name if isinstance(v, Val) else None)
        self.kernels.append({"fx": n.name, "target": target, "shapes": shapes, "inputs": inputs,
                             "outputs": outputs, "nodes": nodes})
        # torch runs this aten op (and any op of no placer node of its own it reads) as
        # one call; its time goes to the last placer node, whose result it is.
        chain = self.calls.setdefault(nodes[-1], [])
        self.folded.update(x for x in nodes[:-1] if x not in self.calls)
        if n.name in self.replay_as:
            self.replayed.add(n.name)
            chain.extend(self.replay_as.pop(n.name))
        else:
            self.record_call(n, outputs, chain, {c["fx"] for c in chain})

    # -- replay --------------------------------------------------------------------------

    def record_call(self, n, outputs: list, chain: list, seen: set) -> None:
        """Appends aten node `n` to `chain` as a call torch can replay on placer's
        buffers, after the calls of the placer-less nodes it reads (a pending
        log-softmax, the loss's seed)."""
        self.replayed.add(n.name)
        args = self.encode(n.args, chain, seen)
        kwargs = {k: self.encode(v, chain, seen) for k, v in n.kwargs.items()}
        chain.append({"fx": n.name, "target": str(n.target), "args": args, "kwargs": kwargs, "outputs": outputs})
        seen.add(n.name)

    def encode(self, a, chain: list, seen: set):
        """An argument as JSON: a placer tensor seen through torch's view of it, an earlier
        call's result, a fresh tensor for torch state placer does not hold, or a value."""
        if isinstance(a, (list, tuple)):
            return [self.encode(x, chain, seen) for x in a]
        if isinstance(a, torch.fx.Node):
            if a.name in seen:
                return {"fx": a.name}
            # A node another chain replays is not run twice: what it made that placer
            # does not hold (batch norm's saved statistics) is read from scratch tensors.
            if a.target is operator.getitem and not isinstance(self.vals.get(a.name), Val):
                parent = a.args[0]
                if (parent.name not in seen and parent.name not in self.replayed and parent.op == "call_function"
                        and parent.name not in self.const):
                    self.record_call(parent, [None], chain, seen)
                if parent.name in seen:
                    return {"fx": parent.name, "index": a.args[1]}
            meta = a.meta.get("val")
            dtype = str(meta.dtype).removeprefix("torch.") if isinstance(meta, torch.Tensor) else None
            v = self.vals.get(a.name)
            if isinstance(v, Val):
                return {"t": v.name, "base": list(v.base_shape), "shape": list(v.shape),
                        "perm": list(v.perm) if v.perm else None, "dtype": dtype}
            if (a.op == "call_function" and a.target is not operator.getitem and a.name not in self.const
                    and a.name not in self.replayed):
                self.record_call(a, [None], chain, seen)
                return {"fx": a.name}
            if dtype is None:
                raise CaptureError(f"internal: '{a.name}' is neither a tensor nor a call")
            return {"fresh": list(meta.shape), "dtype": dtype}
        if isinstance(a, torch.dtype):
            return {"dtype": str(a).removeprefix("torch.")}
        if isinstance(a, (torch.device, torch.layout, torch.memory_format)):
            return {"torch": str(a).removeprefix("torch.")}
        if a is None or isinstance(a, (bool, int, float, str)):
            return a
        raise CaptureError(f"internal: an argument of {type(a).__name__} cannot be recorded")

    def renamed_kernels(self) -> list:
        """The kernels with the tensor names as the model finally has them."""
        r = self.b.renames
        for k in self.kernels:
            k["inputs"] = [r.get(x, x) for x in k["inputs"]]
            k["outputs"] = [r.get(x, x) for x in k["outputs"]]
        for chain in self.calls.values():
            for c in chain:
                c["outputs"] = [r.get(x, x) for x in c["outputs"]]
                _rename_refs(c["args"], r)
                for v in c["kwargs"].values():
                    _rename_refs(v, r)
        return self.kernels

    def refuse(self, n, what: str) -> None:
        self.unsupported.setdefault(what, []).append(n.name)
        self.poisoned.add(n.name)

    # -- emission helpers --------------------------------------------------------------

    def unary(self, n, op: str, attrs=None) -> Val:
        x = self.dense(n.args[0])
        return self.b.emit(n.name, op, [x], [(n.name, x.shape, x.dtype)], attrs)[0]

    def grad_of(self, n, op: str, attrs=None) -> Val:
        """A backward op reading (dy, saved): `dx` has dy's shape."""
        dy, saved = self.dense(n.args[0]), self.dense(n.args[1])
        return self.b.emit(n.name, op, [dy, saved], [(n.name, dy.shape, dy.dtype)], attrs)[0]

    def multi(self, n, op: str, inputs: list, shapes: list, roles: list, attrs=None) -> list:
        """A node of several results, each named after the getitem that reads it."""
        outs = []
        for i, (shape, role) in enumerate(zip(shapes, roles)):
            # A mask has the data's dtype: eager torch keeps its dropout noise as floats,
            # so a plan must make room for those bytes, not for the graph's bool mask.
            dt = DTYPES[self.out_meta(n, 0 if role == "mask" else i).dtype]
            spec = (self.out_name(n, i), shape, dt) + (("workspace",) if role in ("workspace", "mask") else ())
            outs.append(spec)
        vals = self.b.emit(n.name, op, inputs, outs, attrs)
        for i, v in enumerate(vals):
            v.shape = tuple(int(d) for d in self.out_meta(n, i).shape)
        return vals

    def matmul_operand(self, a, rank: int, name: str):
        """A matmul operand and whether it is read transposed (a pending swap of the last
        two axes is a transpose flag, not a copy)."""
        v = self.val(a)
        swap = tuple(range(rank - 2)) + (rank - 1, rank - 2)
        if v.perm == swap and len(v.base_shape) == rank:
            return Val(v.name, v.base_shape, v.dtype, v.base_shape), True
        return self.b.torch_shaped(v, name), False

    def matmul(self, n, a, b, name: str) -> Val:
        rank = len(meta_shape(n))
        av, ta = self.matmul_operand(a, rank, a.name)
        bv, tb = self.matmul_operand(b, rank, b.name)
        attrs = {"transpose_a": True} if ta else {}
        if tb:
            attrs["transpose_b"] = True
        return self.b.emit(name, "matmul", [av, bv], [(name, meta_shape(n), meta_dtype(n))], attrs)[0]

    def view(self, n, x: Val) -> Val:
        shape = meta_shape(n)
        if shape == x.shape:
            return Val(x.name, x.base_shape, x.dtype, shape, x.perm)
        return self.b.shaped(x, shape, n.name)

    def permuted(self, n, sigma) -> Val:
        x = self.val(n.args[0])
        return Val(x.name, x.base_shape, x.dtype, meta_shape(n), compose(x.perm, tuple(sigma)))

    def scaled(self, n, factor: float) -> Val:
        """x times a number torch folded into the op; the layout of x is kept."""
        x = self.val(n.args[0])
        s = self.b.scalar(f"{n.name}.scalar", factor, x.dtype)
        base = Val(x.name, x.base_shape, x.dtype, x.base_shape)
        (y,) = self.b.emit(n.name, "mul", [base, s], [(n.name, x.base_shape, x.dtype)])
        return Val(y.name, y.base_shape, y.dtype, x.shape, x.perm)

    def narrowed(self, n, dim: int, start: int, length: int) -> Val:
        """Elements start..start+length of axis `dim`, as a part of a split."""
        x = self.dense(n.args[0])
        size = x.shape[dim]
        sizes = [s for s in (start, length, size - start - length) if s > 0]
        names = []
        for i, s in enumerate((start, length, size - start - length)):
            if s > 0:
                names.append(n.name if i == 1 else f"{n.name}.rest{i}")
        outs = [(nm, x.shape[:dim] + (s,) + x.shape[dim + 1 :], x.dtype) for nm, s in zip(names, sizes)]
        vals = self.b.emit(n.name, "split", [x], outs, {"axis": dim, "sizes": sizes})
        part = vals[names.index(n.name)]
        part.shape = meta_shape(n)
        return part

    def widened(self, n, sizes, dim: int, start: int, length: int) -> Val:
        """The gradient of a narrowing: zeros around `dy` along `dim`."""
        dy = self.val(n.args[0])
        full = tuple(int(s) for s in sizes)
        dim %= len(full)
        part = self.b.shaped(dy, full[:dim] + (length,) + full[dim + 1 :], f"{n.name}.part")
        parts = []
        for tag, s in (("before", start), (None, length), ("after", full[dim] - start - length)):
            if tag is None:
                parts.append(part)
            elif s > 0:
                z = f"{n.name}.zeros_{tag}"
                parts.append(self.b.tensor(z, full[:dim] + (s,) + full[dim + 1 :], dy.dtype, "input"))
                self.b.constants[z] = 0.0
        return self.b.emit(n.name, "concat", parts, [(n.name, full, dy.dtype)], {"axis": dim})[0]


def _rename_refs(a, renames: dict) -> None:
    """Renames the placer tensors an encoded argument refers to, in place."""
    if isinstance(a, list):
        for x in a:
            _rename_refs(x, renames)
    elif isinstance(a, dict):
        if "t" in a:
            a["t"] = renames.get(a["t"], a["t"])
        else:
            for x in a.values():
                _rename_refs(x, renames)
