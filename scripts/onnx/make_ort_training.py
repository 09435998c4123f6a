#!/usr/bin/env python3
"""Generate an onnxruntime-training artifact set for the light ResNet-50.

Usage: make_ort_training.py DIR

Writes DIR/ort_training/{training_model.onnx, eval_model.onnx,
optimizer_model.onnx, checkpoint} (and DIR/ort_training/forward_model.onnx,
the ordinary forward model the artifacts were generated from).

The forward model is onnx's `light_resnet50.onnx` (backend test data shipped in
the onnx wheel, opset 9, converted from caffe2).  That file stores most weights
as `ConstantOfShape` nodes fed by shape initializers and keeps every
initializer listed as a graph input (IR v3 style).  We turn it into an ordinary
model first:

  * every ConstantOfShape whose shape input is a constant becomes a float32
    initializer of that shape with small random (He-initialised) values, so
    that ORT sees it as a parameter;
  * initializers are no longer graph inputs, unused initializers are dropped;
  * the final Softmax is dropped: the output is `logits` [1, 1000];
  * the residual `Sum`s become `Add`s (ORT training has no gradient for Sum);
  * the opset is upgraded 9 -> 17 with onnx.version_converter, IR version 8.

Then `onnxruntime.training.artifacts.generate_artifacts` builds the training
graph with CrossEntropyLoss and AdamW: conv/gemm weights and BN scale/bias
require grad, BN running mean/var are frozen.

Finally the script runs one training step with onnxruntime.training.api as a
sanity check and prints a summary of training_model.onnx to stderr.

Importing `onnxruntime.training` pulls in torch through its __init__
(optim/_modifier.py), but `artifacts`, `onnxblock` and `api` do not need it,
so we register the package without running its __init__.
"""

import collections
import contextlib
import os
import re
import sys
import tempfile
import types

import numpy as np
import onnx
from onnx import helper, numpy_helper, version_converter

SEED = 20240917
TARGET_OPSET = 17
IR_VERSION = 8


def log(msg=""):
    print(msg, file=sys.stderr)


def import_ort_training():
    """Import onnxruntime.training.{artifacts,api} without its torch-needing __init__."""
    import onnxruntime

    name = "onnxruntime.training"
    if name not in sys.modules:
        pkg = types.ModuleType(name)
        pkg.__path__ = [os.path.join(os.path.dirname(onnxruntime.__file__), "training")]
        pkg.__package__ = name
        sys.modules[name] = pkg
        onnxruntime.training = pkg
    from onnxruntime.training import api, artifacts  # noqa: E402

    return artifacts, api


@contextlib.contextmanager
def quiet_ort_info_logs():
    """Drop ORT's native INFO lines from fd 2 (the gradient graph builder logs one per
    graph transformer whatever the session's log severity); keep everything else."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            for line in tmp.read().decode("utf-8", "replace").splitlines():
                if not re.match(r"^\S+ \S+ \[I:onnxruntime:", line):
                    log(line)


def light_model_path(name):
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", f"light_{name}.onnx")


def he_init(rng, name, shape):
    """Plausible values for a caffe2 ResNet parameter given its name and shape."""
    shape = tuple(int(d) for d in shape)
    base = name.rsplit("/", 1)[-1]
    if "_bn_riv" in base:  # running variance (frozen)
        return (1.0 + 0.1 * rng.random(shape)).astype(np.float32)
    if "_bn_rm" in base:  # running mean (frozen)
        return (0.01 * rng.standard_normal(shape)).astype(np.float32)
    if "_bn_s" in base:  # BN scale
        return (1.0 + 0.01 * rng.standard_normal(shape)).astype(np.float32)
    if "_bn_b" in base or base.endswith("_b_0"):  # BN bias, gemm bias
        return np.zeros(shape, np.float32)
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return (rng.standard_normal(shape) * np.sqrt(2.0 / max(fan_in, 1))).astype(np.float32)


def make_forward_model():
    src = light_model_path("resnet50")
    model = onnx.load(src)
    g = model.graph
    rng = np.random.default_rng(SEED)
    inits = {t.name: t for t in g.initializer}

    # 1. ConstantOfShape(const shape) -> initializer.
    new_nodes, replaced = [], 0
    for node in g.node:
        if node.op_type == "ConstantOfShape" and node.input and node.input[0] in inits:
            shape = numpy_helper.to_array(inits[node.input[0]])
            value = [a for a in node.attribute if a.name == "value"]
            dtype = numpy_helper.to_array(value[0].t).dtype if value else np.float32
            if dtype != np.float32:
                raise SystemExit(f"unexpected ConstantOfShape dtype {dtype} for {node.output[0]}")
            g.initializer.append(numpy_helper.from_array(he_init(rng, node.output[0], shape), node.output[0]))
            replaced += 1
        else:
            new_nodes.append(node)
    del g.node[:]
    g.node.extend(new_nodes)

    # 2. Drop the final Softmax; its input becomes the graph output `logits`.
    last = g.node[-1]
    if last.op_type != "Softmax" or g.output[0].name != last.output[0]:
        raise SystemExit("light_resnet50: expected a trailing Softmax producing the graph output")
    logits_src = last.input[0]
    del g.node[-1]
    for node in g.node:
        for i, x in enumerate(node.output):
            if x == logits_src:
                node.output[i] = "logits"
        for i, x in enumerate(node.input):
            if x == logits_src:
                node.input[i] = "logits"
    out_shape = [d.dim_value for d in g.output[0].type.tensor_type.shape.dim]
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, out_shape))

    # 3. ORT training has no gradient for Sum (caffe2's residual add): use Add
    # like a torch export would.
    for node in g.node:
        if node.op_type == "Sum":
            if len(node.input) != 2:
                raise SystemExit(f"light_resnet50: Sum {node.name} has {len(node.input)} inputs, expected 2")
            node.op_type = "Add"

    # 4. Initializers are not graph inputs; drop unused initializers (the __SHAPE tensors, ...).
    used = {x for n in g.node for x in n.input}
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    init_names = {t.name for t in keep}
    data_inputs = [i for i in g.input if i.name not in init_names and i.name in used]
    del g.input[:]
    g.input.extend(data_inputs)
    del g.value_info[:]

    # 5. Upgrade the opset; pin the IR version to one ORT 1.19 reads.  (The
    # converter only accepts initializers that are not graph inputs at IR >= 4.)
    model.ir_version = IR_VERSION
    model = version_converter.convert_version(model, TARGET_OPSET)
    model.ir_version = IR_VERSION
    model.producer_name = "placer scripts/onnx/make_ort_training.py"
    model.producer_version = "1"
    onnx.checker.check_model(model, full_check=True)
    log(f"forward model: {replaced} ConstantOfShape -> initializers, "
        f"{len(model.graph.initializer)} initializers, {len(model.graph.node)} nodes, opset {TARGET_OPSET}")
    return model


def param_names(model):
    """(requires_grad, frozen): conv/gemm weights+biases and BN scale/bias vs BN running stats."""
    g = model.graph
    inits = {t.name for t in g.initializer}
    requires_grad, frozen = [], []
    for node in g.node:
        if node.op_type in ("Conv", "Gemm"):
            requires_grad += [x for x in node.input[1:] if x in inits]
        elif node.op_type == "BatchNormalization":
            requires_grad += [x for x in node.input[1:3] if x in inits]
            frozen += [x for x in node.input[3:5] if x in inits]
    dedup = lambda xs: list(dict.fromkeys(xs))  # noqa: E731
    return dedup(requires_grad), dedup(frozen)


def dims(vi):
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    return [d.dim_param if d.HasField("dim_param") else (d.dim_value if d.HasField("dim_value") else "?") for d in t.shape.dim]


def attr_str(a):
    v = helper.get_attribute_value(a)
    return v.decode() if isinstance(v, bytes) else v


def summarize(path, requires_grad, frozen):
    m = onnx.load(path)
    g = m.graph
    opsets = ", ".join(f"{o.domain or 'ai.onnx'}:{o.version}" for o in m.opset_import)
    log(f"== {os.path.basename(path)}: ir_version {m.ir_version}, opsets {opsets}")
    hist = collections.Counter((n.domain or "ai.onnx", n.op_type) for n in g.node)
    log(f"  {len(g.node)} nodes, op histogram:")
    for (dom, op), c in sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])):
        log(f"    {c:5d}  {dom}::{op}")
    inits = {t.name for t in g.initializer}
    trainable, frozen = set(requires_grad), set(frozen)
    params = [i for i in g.input if i.name in trainable]
    fparams = [i for i in g.input if i.name in frozen]
    bufs = [i for i in g.input if i.name.endswith(".accumulation.buffer")]
    other = [i for i in g.input if i.name not in trainable | frozen and not i.name.endswith(".accumulation.buffer")]
    log(f"  graph inputs {len(g.input)}: {len(other)} data/control "
        f"({', '.join(f'{i.name}{dims(i)}' for i in other)}), {len(params)} trainable params, "
        f"{len(fparams)} frozen params, {len(bufs)} grad accumulation buffers")
    params += fparams
    log(f"  params are graph inputs (with shapes in the input type): "
        f"{sum(dims(i) is not None for i in params)}/{len(params)}; params that are also initializers: "
        f"{sum(i.name in inits for i in params)}")
    log(f"  initializers {len(g.initializer)}: {', '.join(f'{t.name}{list(t.dims)}' for t in g.initializer[:8])}"
        f"{' ...' if len(g.initializer) > 8 else ''}")
    log(f"  graph outputs {len(g.output)}: {', '.join(o.name for o in g.output[:4])} ...")
    known = {i.name for i in g.input} | {o.name for o in g.output} | inits | {v.name for v in g.value_info}
    produced = [x for n in g.node for x in n.output if x]
    missing = [x for x in produced if x not in known]
    log(f"  value_info {len(g.value_info)}; node outputs without any shape info: {len(missing)}/{len(produced)}"
        f"{' e.g. ' + ', '.join(missing[:6]) if missing else ''}")
    seen = set()
    for n in g.node:
        if n.domain == "com.microsoft" and n.op_type not in seen:
            seen.add(n.op_type)
            attrs = ", ".join(f"{a.name}={attr_str(a)}" for a in n.attribute)
            log(f"  e.g. com.microsoft::{n.op_type} {n.name}: ({', '.join(n.input)}) -> ({', '.join(n.output)})"
                f"{' [' + attrs + ']' if attrs else ''}")


def sanity_step(api, out):
    """One forward/backward/optimizer step with the ORT training API."""
    state = api.CheckpointState.load_checkpoint(os.path.join(out, "checkpoint"))
    module = api.Module(os.path.join(out, "training_model.onnx"), state, os.path.join(out, "eval_model.onnx"))
    optimizer = api.Optimizer(os.path.join(out, "optimizer_model.onnx"), module)
    module.train()
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    labels = np.array([7], dtype=np.int64)
    loss = module(x, labels)
    optimizer.step()
    module.lazy_reset_grad()
    loss = float(np.asarray(loss if not isinstance(loss, (list, tuple)) else loss[0]))
    if not np.isfinite(loss):
        raise SystemExit(f"sanity training step produced a non-finite loss {loss}")
    log(f"sanity: one ORT training step ok, loss {loss:.4f}")


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: make_ort_training.py DIR")
    out = os.path.join(sys.argv[1], "ort_training")
    os.makedirs(out, exist_ok=True)
    artifacts, api = import_ort_training()

    model = make_forward_model()
    onnx.save(model, os.path.join(out, "forward_model.onnx"))
    requires_grad, frozen = param_names(model)
    log(f"requires_grad {len(requires_grad)} tensors, frozen {len(frozen)} tensors")

    with quiet_ort_info_logs():
        artifacts.generate_artifacts(
            model,
            requires_grad=requires_grad,
            frozen_params=frozen,
            loss=artifacts.LossType.CrossEntropyLoss,
            optimizer=artifacts.OptimType.AdamW,
            artifact_directory=out,
        )
    for f in ("training_model.onnx", "eval_model.onnx", "optimizer_model.onnx", "checkpoint"):
        if not os.path.exists(os.path.join(out, f)):
            raise SystemExit(f"generate_artifacts did not produce {f}")
    summarize(os.path.join(out, "training_model.onnx"), requires_grad, frozen)
    sanity_step(api, out)


if __name__ == "__main__":
    main()
