"""capture(): one training step of a torch model, as a placer model.

The step is taken from torch's own graph: AOTAutograd's joint graph
(`aot_export_module(..., trace_joint=True)`) holds the forward and the backward as the
aten ops torch runs, with each parameter's qualified name and the node that computes its
gradient. The optimizer's update is added from the optimizer object, per parameter.

Names: a parameter keeps its qualified name (`layer1.0.conv1.weight`), its gradient is
`<name>.grad`, optimizer state is `optimizer.state[<name>].<key>` (torch's
`optimizer.state[p][key]`), the batch is `batch[i]`, and every other tensor is named
after the graph node that computes it (`relu_3`, `getitem_7`), so the activations saved
for the backward pass carry the names torch's graph gives them.
"""

from __future__ import annotations

import datetime
import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import _core
from .builder import CaptureError, Val, call, meta_dtype, meta_shape, ref
from .lower import Lowering

# aot_export_module is torch's documented export of the joint graph; it lives under
# torch._functorch in every 2.x release.
from torch._functorch.aot_autograd import aot_export_module


@dataclass
class Capture:
    """What capture() wrote, and how placer's tensors map back to torch's objects."""

    path: Path | None
    summary: dict
    #: parameter qualified name -> its number of elements (every parameter, used or not)
    parameters: dict
    #: torch name -> placer tensor, for the gradients and the optimizer state
    gradients: dict
    optimizer_state: dict
    #: one-element inputs carrying numbers torch folds into ops, and zero fillers
    constants: dict
    #: state torch updates in the step that placer's op set does not hold: (name, bytes)
    outside: list = field(default_factory=list)
    #: the aten ops that became placer nodes, in graph order (what apply matches)
    kernels: list = field(default_factory=list)
    #: per placer node, the aten calls torch runs for it (what profile() replays)
    calls: dict = field(default_factory=dict)
    #: placer nodes whose work torch does inside another node's calls
    folded: list = field(default_factory=list)

    @property
    def outside_bytes(self) -> int:
        return sum(b for _, b in self.outside)

    def to_json(self) -> str:
        doc = {"format": "placer-torch-capture", "version": VERSION, "model": str(self.path) if self.path else None,
               "content_hash": self.summary["content_hash"], "parameters": self.parameters,
               "gradients": self.gradients, "optimizer_state": self.optimizer_state, "constants": self.constants,
               "outside": self.outside, "kernels": self.kernels,
               "calls": self.calls, "folded": self.folded}
        return json.dumps(doc, indent=1)

    @classmethod
    def load(cls, model_path) -> "Capture":
        """The capture written beside `model_path` (NAME.torch.json beside NAME.json)."""
        model_path = Path(model_path)
        side = sidecar_path(model_path)
        try:
            doc = json.loads(side.read_text())
        except FileNotFoundError:
            raise CaptureError(f"{side}: no capture beside {model_path.name}; capture() writes it") from None
        except (OSError, ValueError) as e:
            raise CaptureError(f"{side}: cannot read the capture: {e}") from None
        if doc.get("format") != "placer-torch-capture":
            raise CaptureError(f"{side}: not a placer_torch capture")
        if doc.get("version") != VERSION:
            raise CaptureError(f"{side}: a capture of version {doc.get('version')}; this placer_torch reads "
                               f"version {VERSION}: capture the step again")
        summary = dict(_core.check_model(model_path.read_text()))
        try:
            if summary["content_hash"] != doc["content_hash"]:
                raise CaptureError(f"{side}: captured for another model than {model_path} (content hash differs)")
            return cls(model_path, summary, doc["parameters"], doc["gradients"], doc["optimizer_state"],
                       doc["constants"], [tuple(o) for o in doc["outside"]], doc["kernels"], doc["calls"],
                       doc["folded"])
        except (KeyError, TypeError) as e:
            raise CaptureError(f"{side}: malformed capture (missing or wrong field {e})") from None


#: The sidecar's version. 2: the aten calls of every placer node, for profile().
VERSION = 2


def sidecar_path(model_path) -> Path:
    p = Path(model_path)
    return p.with_name(p.name[: -len(".json")] + ".torch.json" if p.name.endswith(".json") else p.name + ".torch.json")


class _Step(torch.nn.Module):
    """The user's forward and loss as one module, so torch traces them together."""

    def __init__(self, model, loss_fn):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, *batch):
        return (self.loss_fn(self.model(*batch[:-1]), batch[-1]),)


def _strip(name: str) -> str:
    return name[len("model.") :] if name.startswith("model.") else name


def capture(model: torch.nn.Module, example_batch, loss_fn, optimizer, path=None, *, name=None) -> Capture:
    """Captures one training step and writes it to `path` as placer's model.json.

    `example_batch` is a tuple: the model's inputs, then the target; the step computes
    `loss_fn(model(*inputs), target)`, its gradients, and `optimizer`'s update. Raises
    `CaptureError` (one line) for a step placer cannot represent, naming every op it
    lacks, and `ModelError` if the result is not a valid placer model.
    """
    if not isinstance(example_batch, (tuple, list)) or len(example_batch) < 2:
        raise CaptureError("example_batch must be a tuple: the model's inputs, then the target")
    if not all(isinstance(t, torch.Tensor) for t in example_batch):
        raise CaptureError("every item of example_batch must be a tensor")
    qualified = {id(p): q for q, p in model.named_parameters()}
    updates = _updates(optimizer, qualified)
    step = _Step(model, loss_fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            gm, sig = aot_export_module(step, list(example_batch), trace_joint=True, output_loss_index=0)
        except Exception as e:  # torch raises many kinds; the user needs the first line
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise CaptureError(f"torch could not trace the training step: {first}") from e

    names = {ph: _strip(q) for ph, q in sig.inputs_to_parameters.items()}
    names.update({ph: _strip(q) for ph, q in sig.inputs_to_buffers.items()})
    names.update({ph: f"batch[{i}]" for i, ph in enumerate(sig.user_inputs)})
    nodes = {n.name: n for n in gm.graph.nodes}
    loss = nodes[sig.user_outputs[0]]
    forward = _ancestors(loss)
    const = _constants(gm, set(sig.inputs_to_buffers))

    low = Lowering(gm, names, forward, const)
    for ph in list(sig.inputs_to_parameters) + list(sig.user_inputs):
        n = nodes[ph]
        role = "weight" if ph in sig.inputs_to_parameters else "input"
        low.vals[ph] = low.b.tensor(names[ph], meta_shape(n), meta_dtype(n), role)
    low.run()
    b = low.b

    gradients = {}
    grads = sig.backward_signature.gradients_to_parameters if sig.backward_signature else {}
    produced = b.producers()
    for node_name, q in grads.items():
        q = _strip(q)
        v = low.vals.get(node_name)
        if v is None:
            continue
        shape = tuple(b.tensors[q]["shape"])
        g = b.shaped(v, shape, f"{q}.grad")
        if g.name != f"{q}.grad":
            if g.name not in produced or g.name in gradients.values():
                # A gradient that is an input or another's: give it a copy of its own.
                (g,) = b.emit(f"{q}.grad", "reshape", [g], [(f"{q}.grad", shape, g.dtype)])
            else:
                b.rename(g.name, f"{q}.grad")
        b.tensors[f"{q}.grad"]["role"] = "weight_gradient"
        gradients[q] = f"{q}.grad"

    state = _emit_updates(b, updates, gradients, low.calls)
    title = name or type(model).__name__
    meta = {"generator": "placer_torch.capture", "torch": torch.__version__,
            "batch": int(example_batch[0].shape[0]) if example_batch[0].dim() else 1,
            "captured": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    text = json.dumps({"format": "placer-model", "version": _core.FORMAT_VERSION, "name": title, "meta": meta,
                       "tensors": list(b.tensors.values()), "nodes": b.nodes})
    summary = _core.save_model(text, str(path)) if path is not None else _core.check_model(text)
    params = {q: p.numel() for q, p in model.named_parameters()}
    cap = Capture(Path(path) if path is not None else None, dict(summary), params, gradients, state,
                  dict(b.constants), list(low.outside), low.renamed_kernels(), low.calls,
                  sorted(low.folded - set(low.calls)))
    if path is not None:
        side = sidecar_path(path)
        try:
            tmp = side.with_name(side.name + ".tmp")
            tmp.write_text(cap.to_json())
            os.replace(tmp, side)  # never a half-written capture
        except OSError as e:
            raise CaptureError(f"cannot write {side}: {e}") from None
    return cap


def _ancestors(out) -> set:
    seen, todo = set(), [out]
    while todo:
        n = todo.pop()
        if n.name not in seen:
            seen.add(n.name)
            todo.extend(n.all_input_nodes)
    return seen


def _constants(gm, buffers: set) -> set:
    """Nodes computed from buffers and constants alone (position ids, token types, a
    mask of ones): inputs to placer. A node with no tensor inputs (`ones`, `arange`)
    makes a constant."""
    const = set()
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            if n.name in buffers:
                const.add(n.name)
        elif n.op == "call_function" and all(a.name in const for a in n.all_input_nodes):
            const.add(n.name)
    return const


def _updates(optimizer, qualified: dict) -> list:
    """(parameter name, placer op, attributes) for every parameter the optimizer updates."""
    if not isinstance(optimizer, torch.optim.SGD):
        raise CaptureError(
            f"optimizer {type(optimizer).__name__} cannot be captured: placer's op set updates weights "
            "with SGD only (torch.optim.SGD, with or without momentum)"
        )
    out = []
    for group in optimizer.param_groups:
        if group.get("nesterov") or group.get("dampening", 0) != 0 or group.get("maximize"):
            raise CaptureError("torch.optim.SGD with nesterov, dampening or maximize has no placer op")
        lr = group["lr"]
        lr = float(lr.item() if isinstance(lr, torch.Tensor) else lr)
        for p in group["params"]:
            if id(p) not in qualified:
                raise CaptureError("the optimizer updates a tensor that is not a parameter of the model")
            attrs = {"lr": lr}
            if group.get("weight_decay", 0):
                attrs["weight_decay"] = float(group["weight_decay"])
            if group.get("momentum", 0):
                attrs["momentum"] = float(group["momentum"])
            out.append((qualified[id(p)], "sgd_momentum" if "momentum" in attrs else "sgd", attrs))
    return out


def _emit_updates(b, updates: list, gradients: dict, calls: dict) -> dict:
    """The optimizer's step, after the backward pass as `optimizer.step()` runs it, and
    per update node the aten calls torch's single-tensor SGD makes for it on a CPU."""
    b.backward = False
    state = {}
    for q, op, attrs in updates:
        if q not in gradients:
            continue  # a parameter the loss does not reach gets no gradient and no update
        t = b.tensors[q]
        w = Val(q, tuple(t["shape"]), t["dtype"], tuple(t["shape"]))
        g = Val(gradients[q], w.shape, w.dtype, w.shape)
        ups = [w]
        if op == "sgd_momentum":
            key = f"optimizer.state[{q}].momentum_buffer"
            ups.append(b.tensor(key, w.shape, w.dtype, "optimizer_state"))
            state[key] = key
        b.node(f"{q}.{op}", op, [g], [], attrs, ups)
        calls[f"{q}.{op}"] = _sgd_calls([ref(v) for v in ups], ref(g), attrs)
    return state


def _sgd_calls(ups: list, g: dict, attrs: dict) -> list:
    """torch.optim.SGD's update of one parameter (its `_single_tensor_sgd`, what a CPU
    tensor gets): decay into the gradient, the momentum buffer, the step."""
    calls = []

    def record(name, target, args, kwargs=None):
        calls.append(call(name, target, args, kwargs))
        return {"fx": name}

    if attrs.get("weight_decay"):
        g = record("decayed", "aten.add.Tensor", [g, ups[0]], {"alpha": attrs["weight_decay"]})
    step = g
    if len(ups) > 1:
        scaled = record("momentum", "aten.mul_.Scalar", [ups[1], attrs["momentum"]])
        step = record("buffer", "aten.add_.Tensor", [scaled, g])
    record("step", "aten.add_.Tensor", [ups[0], step], {"alpha": -attrs["lr"]})
    return calls
