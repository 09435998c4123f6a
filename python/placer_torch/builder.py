"""The placer model under construction: tensors, nodes, and what each torch value is.

torch's views (view, t, transpose, expand) share storage and cost nothing; placer's IR
has no aliasing, so a view becomes one of three things here:

- nothing, when the placer tensor already has the shape the view gives (an alias);
- a pending permutation (`Val.perm`), folded into a matmul's transpose flags, carried
  through elementwise ops, and written out as a `transpose` node only where a consumer
  needs the data in the new order (as torch's `clone` does);
- a `reshape` node (cost 0) where the shape really changes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch


class CaptureError(ValueError):
    """A training step placer cannot capture; the message is one line."""


class Unsupported(Exception):
    """This aten node (or this form of it) has no placer op; the text says which."""


#: Stands for the ones_like(loss) that seeds the backward pass: placer's loss backward
#: takes the loss's gradient as 1 and has no operand for it.
SEED = object()


def meta_shape(n: torch.fx.Node) -> tuple:
    return tuple(int(d) for d in n.meta["val"].shape)


def meta_dtype(n: torch.fx.Node) -> str:
    dt = n.meta["val"].dtype
    if dt not in DTYPES:
        raise Unsupported(f"{n.target} ({dt})")
    return DTYPES[dt]


def pair(v) -> list:
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return v * 2 if len(v) == 1 else v


def flat(args):
    """The items of nested lists and tuples (an op's arguments), in order."""
    for a in args:
        if isinstance(a, (list, tuple)):
            yield from flat(a)
        else:
            yield a


def name_seed(name: str) -> int:
    """A dropout node's seed: FNV-1a of its name, as a non-negative i64."""
    h = 0xCBF29CE484222325
    for byte in name.encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h >> 1


def compose(p, sigma) -> tuple | None:
    """The permutation of a view of a view: `sigma` applied after `p`."""
    base = p if p is not None else tuple(range(len(sigma)))
    q = tuple(base[s] for s in sigma)
    return None if q == tuple(range(len(q))) else q


DTYPES = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.bool: "u8",
    torch.uint8: "u8",
}


@dataclass
class Val:
    """A torch value as placer sees it: `perm` applied to the placer tensor `name`
    (shape `base_shape`) gives a tensor of torch's shape `shape`."""

    name: str
    base_shape: tuple
    dtype: str
    shape: tuple
    perm: tuple | None = None


def ref(v: Val) -> dict:
    """A recorded call's argument for the placer tensor of `v`, as `Lowering.encode`
    writes one (the torch dtype of the first torch type placer maps to `v.dtype`)."""
    dtype = next(str(t).removeprefix("torch.") for t, d in DTYPES.items() if d == v.dtype)
    return {"t": v.name, "base": list(v.base_shape), "shape": list(v.shape), "perm": list(v.perm) if v.perm else None,
            "dtype": dtype}


def call(fx: str, target: str, args: list, kwargs: dict | None = None, output: str | None = None) -> dict:
    """A call recorded for the profile to replay, writing placer tensor `output` if it
    names one; later calls of its chain read its result as `{"fx": fx}`."""
    return {"fx": fx, "target": target, "args": args, "kwargs": kwargs or {}, "outputs": [output]}


@dataclass
class Builder:
    tensors: dict = field(default_factory=dict)
    nodes: list = field(default_factory=list)
    #: The phase of the nodes being emitted: their results are activations in the
    #: forward pass and gradients in the backward pass, unless said otherwise.
    backward: bool = False
    #: Numbers torch folds into ops, by the one-element input tensor that carries them.
    constants: dict = field(default_factory=dict)
    #: old name -> new name, for tensors renamed after the fact
    renames: dict = field(default_factory=dict)
    #: (tensor, permutation or shape) -> the tensor holding that layout, made once
    layouts: dict = field(default_factory=dict)

    def tensor(self, name: str, shape, dtype: str, role: str) -> Val:
        if name in self.tensors:
            raise CaptureError(f"two tensors would be named '{name}'")
        shape = tuple(int(d) for d in shape)
        if any(d < 1 for d in shape):
            raise CaptureError(f"tensor '{name}' has an empty dimension {list(shape)}; placer's tensors have none")
        self.tensors[name] = {"name": name, "shape": list(shape), "dtype": dtype, "role": role}
        return Val(name, shape, dtype, shape)

    def node(self, name: str, op: str, inputs: list, outputs: list, attrs=None, updates=None) -> None:
        node = {"name": name, "op": op, "inputs": [v.name for v in inputs], "outputs": [v.name for v in outputs]}
        if attrs:
            node["attrs"] = attrs
        if updates:
            node["updates"] = [v.name for v in updates]
        self.nodes.append(node)

    def emit(self, name: str, op: str, inputs: list, outs: list, attrs=None) -> list:
        """One node; `outs` are (tensor name, shape, dtype[, role]) of its results, the
        role by default the phase's."""
        vals = [self.tensor(*o) if len(o) == 4 else self.tensor(*o, self.result_role()) for o in outs]
        self.node(name, op, inputs, vals, attrs)
        return vals

    def fresh(self, name: str, shape) -> str:
        """`name`, or a variant of it no tensor has yet (a layout of a named value)."""
        if name not in self.tensors:
            return name
        return f"{name}.as" + "x".join(str(d) for d in shape)

    def dense(self, v: Val, name: str) -> Val:
        """`v` laid out in torch's order: a pending permutation becomes a transpose."""
        if v.perm is None:
            return v
        key = (v.name, v.perm)
        if key not in self.layouts:
            name = self.fresh(name, v.shape)
            (out,) = self.emit(name, "transpose", [Val(v.name, v.base_shape, v.dtype, v.base_shape)],
                               [(name, v.shape, v.dtype)], {"perm": list(v.perm)})
            self.layouts[key] = out
        return self.layouts[key]

    def shaped(self, v: Val, shape, name: str) -> Val:
        """`v` as a dense tensor of `shape` (same elements): an alias or a reshape."""
        shape = tuple(int(d) for d in shape)
        v = self.dense(v, name)
        if v.base_shape == shape:
            return Val(v.name, v.base_shape, v.dtype, shape)
        if math.prod(shape) != math.prod(v.base_shape):
            raise CaptureError(f"'{name}' reshapes {list(v.base_shape)} to {list(shape)}, which differ in size")
        key = (v.name, shape)
        if key not in self.layouts:
            name = self.fresh(name, shape)
            self.layouts[key] = self.emit(name, "reshape", [v], [(name, shape, v.dtype)])[0]
        return self.layouts[key]

    def torch_shaped(self, v: Val, name: str) -> Val:
        return self.shaped(v, v.shape, name)

    def result_role(self) -> str:
        return "gradient" if self.backward else "activation"

    def scalar(self, name: str, value: float, dtype: str) -> Val:
        """A number torch folds into an op (`mul.Scalar`), as a one-element input."""
        self.constants[name] = value
        return self.tensor(name, (), dtype, "input")

    def rename(self, old: str, new: str) -> None:
        """Gives tensor `old` the name torch's user knows it by (a parameter's `.grad`)."""
        if new in self.tensors:
            raise CaptureError(f"two tensors would be named '{new}'")
        t = self.tensors.pop(old)
        t["name"] = new
        self.tensors[new] = t
        for n in self.nodes:
            for key in ("inputs", "outputs", "updates"):
                if key in n:
                    n[key] = [new if x == old else x for x in n[key]]
        self.renames[old] = new

    def producers(self) -> dict:
        return {o: n for n in self.nodes for o in n["outputs"]}
