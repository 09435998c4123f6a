#!/usr/bin/env python3
"""Turn the training-mode exports into onnxruntime-training graphs.

Usage: make_training.py OUT

For every OUT/raw/NAME.train.onnx that export_torch.py wrote, runs
`onnxruntime.training.artifacts.generate_artifacts` (cross-entropy loss, AdamW) with
the module's parameters as requires_grad and batch-norm running statistics frozen,
and keeps its training_model.onnx as OUT/raw/NAME.ort.onnx (plus NAME.ort.json).
The optimizer and eval graphs are not kept: placer imports the training graph only.

Runs in a venv with onnx 1.17 and onnxruntime-training 1.19.2 (see corpus.sh).
"""

import json
import os
import shutil
import sys
import tempfile

import onnx


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def import_artifacts():
    """onnxruntime.training.artifacts without the package __init__, which imports torch
    (the same way as the test data's generator, whose helper this reuses)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from make_ort_training import import_ort_training

    artifacts, _api = import_ort_training()
    return artifacts


def with_saved_outputs(model):
    """Name the optional outputs that onnxruntime's gradient builders read.

    The TorchScript exporter writes LayerNormalization and Dropout with their first
    output only; their gradients need the saved mean and inverse deviation, and the
    mask.  onnxruntime's own exporter (ORTModule) names them; so do we.
    """
    wanted = {"LayerNormalization": ["mean", "inv_std_dev"], "Dropout": ["mask"]}
    for node in model.graph.node:
        extra = wanted.get(node.op_type, [])
        while len(node.output) < 1 + len(extra):
            node.output.append(f"{node.output[0]}.{extra[len(node.output) - 1]}")
    return model


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: make_training.py OUT")
    raw = os.path.join(sys.argv[1], "raw")
    artifacts = import_artifacts()
    for f in sorted(os.listdir(raw)):
        if not f.endswith(".train.onnx"):
            continue
        stem = f[: -len(".train.onnx")]
        meta = json.load(open(os.path.join(raw, f"{stem}.train.json")))
        model = with_saved_outputs(onnx.load(os.path.join(raw, f)))
        inits = {t.name for t in model.graph.initializer}
        requires_grad = [n for n in meta["requires_grad"] if n in inits]
        frozen = [n for n in meta["frozen"] if n in inits]
        missing = [n for n in meta["requires_grad"] if n not in inits]
        if missing:
            raise SystemExit(f"{f}: parameters that are not initializers: {missing[:5]}")
        with tempfile.TemporaryDirectory() as tmp:
            try:
                artifacts.generate_artifacts(
                    model,
                    requires_grad=requires_grad,
                    frozen_params=frozen,
                    loss=artifacts.LossType.CrossEntropyLoss,
                    optimizer=artifacts.OptimType.AdamW,
                    artifact_directory=tmp,
                )
            except Exception as e:  # the tool's own limits: recorded, not fatal
                # onnxruntime's C++ messages end with the reason after the signature.
                text = str(e).strip()
                reason = text.split(" was false. ")[-1] if " was false. " in text else text.splitlines()[-1]
                log(f"{stem}.ort: onnxruntime-training cannot make a training graph: {reason}")
                with open(os.path.join(raw, "ort-failures.txt"), "a") as fh:
                    fh.write(f"{stem}: {reason}\n")
                continue
            shutil.copy(os.path.join(tmp, "training_model.onnx"), os.path.join(raw, f"{stem}.ort.onnx"))
        meta.update(name=f"{stem}.ort", exporter="ort", requires_grad=None, frozen=None)
        json.dump(meta, open(os.path.join(raw, f"{stem}.ort.json"), "w"), indent=1)
        log(f"{stem}.ort: training graph with {len(requires_grad)} trainable tensors, {len(frozen)} frozen")


if __name__ == "__main__":
    main()
