#!/usr/bin/env python3
"""Build a BERT-tiny-like encoder the way torch.onnx.export(opset_version=17) writes HF BERT.

Usage: make_bert_like.py DIR

Writes
  DIR/bert_like.onnx          model, weights in external data
  DIR/bert_like.onnx.data     the external data (all tensors > 1 KiB, one file)
  DIR/bert_like_nodata.onnx   the same model, referencing bert_like_nodata.onnx.data,
                              which deliberately does not exist

The graph follows what the TorchScript-based exporter emits for
`BertForTokenClassification` (without attention mask, dropout or pooler):
  * inputs input_ids, token_type_ids, position_ids: int64 [batch, sequence];
  * embeddings: Gather(table, ids) x3 (no axis attribute, as torch emits it),
    Add, Add_1, LayerNormalization(axis=-1, epsilon=1e-12);
  * 2 layers, hidden 128, 2 heads of 64, FFN 512;
  * every Linear is MatMul(x, W[in,out]) + Add with the bias first
    (query, value, intermediate, classifier) or second (key, attention output,
    output dense), weights named onnx::MatMul_N like torch's transposed weights,
    biases/LayerNorm/embeddings named like HF parameters;
  * head split: Shape -> Gather(Constant scalar 0 / 1, axis=0) -> Unsqueeze(axes
    Constant [0]) -> Concat(axis 0, with Constant [2], [64]) -> Reshape ->
    Transpose([0,2,1,3]) for q and v, Transpose([0,2,3,1]) for k (torch fuses
    permute(0,2,1,3) and transpose(-1,-2));
  * MatMul(q, kT), Div(Constant 8.0), Softmax(axis=-1), MatMul(p, v),
    Transpose([0,2,1,3]), Reshape back to [batch, sequence, 128] (dynamic shape
    again, Constant [128]), output dense, residual Add, LayerNormalization;
  * FFN: dense, erf GELU (Div sqrt2, Erf, Add 1, Mul x, Mul 0.5), dense,
    residual Add, LayerNormalization;
  * classifier dense to 2 labels: output logits float [batch, sequence, 2].
Node and value names follow torch (`/encoder/layer.0/attention/self/query/MatMul`,
`..._output_0`).  Intermediate shapes are stored as value_info (torch does too),
obtained with onnx shape inference with data propagation.
"""

import collections
import copy
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 1234
VOCAB, MAX_POS, TYPES = 30522, 512, 2
HIDDEN, HEADS, FFN, LAYERS, LABELS = 128, 2, 512, 2, 2
HEAD_DIM = HIDDEN // HEADS
OPSET, IR_VERSION = 17, 8


def log(msg=""):
    print(msg, file=sys.stderr)


class Builder:
    def __init__(self, seed, opset):
        self.opset = opset
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.initializers = []
        self.counts = collections.Counter()
        self.next_matmul_id = 1521  # torch numbers the transposed Linear weights onnx::MatMul_N

    def node(self, scope, op, inputs, **attrs):
        k = self.counts[(scope, op)]
        self.counts[(scope, op)] += 1
        name = f"{scope}/{op}" + (f"_{k}" if k else "")
        out = f"{name}_output_0"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def const(self, scope, value, dtype):
        return self.node(scope, "Constant", [], value=numpy_helper.from_array(np.array(value, dtype=dtype)))

    def init(self, name, array):
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array, dtype=np.float32), name))
        return name

    def randn(self, *shape, std=0.02):
        return self.rng.standard_normal(shape) * std

    def linear(self, scope, x, n_in, n_out, bias_first):
        param = scope.strip("/").replace("/", ".")
        w = self.init(f"onnx::MatMul_{self.next_matmul_id}", self.randn(n_in, n_out))
        self.next_matmul_id += 1
        b = self.init(f"{param}.bias", self.randn(n_out))
        mm = self.node(scope, "MatMul", [x, w])
        return self.node(scope, "Add", [b, mm] if bias_first else [mm, b])

    def layer_norm(self, scope, x):
        param = scope.strip("/").replace("/", ".")
        w = self.init(f"{param}.weight", 1.0 + self.randn(HIDDEN))
        b = self.init(f"{param}.bias", self.randn(HIDDEN))
        if self.opset >= 17:
            return self.node(f"{scope}", "LayerNormalization", [x, w, b], axis=-1, epsilon=1e-12)
        # Before opset 17 torch writes LayerNorm out: mean, centre, variance, normalise.
        mean = self.node(scope, "ReduceMean", [x], axes=[-1], keepdims=1)
        centred = self.node(scope, "Sub", [x, mean])
        sq = self.node(scope, "Pow", [centred, self.const(scope, 2.0, np.float32)])
        var = self.node(scope, "ReduceMean", [sq], axes=[-1], keepdims=1)
        eps = self.node(scope, "Add", [var, self.const(scope, 1e-12, np.float32)])
        norm = self.node(scope, "Div", [centred, self.node(scope, "Sqrt", [eps])])
        return self.node(scope, "Add", [self.node(scope, "Mul", [norm, w]), b])

    def dynamic_shape(self, scope, x, tail):
        """Concat(Unsqueeze(Gather(Shape(x), 0)), Unsqueeze(Gather(Shape(x), 1)), *tail) like torch."""
        dims = []
        for i in (0, 1):
            shape = self.node(scope, "Shape", [x])
            idx = self.const(scope, i, np.int64)  # scalar
            dims.append(self.node(scope, "Gather", [shape, idx], axis=0))
        unsq = [self.node(scope, "Unsqueeze", [d, self.const(scope, [0], np.int64)]) for d in dims]
        tails = [self.const(scope, [t], np.int64) for t in tail]
        return self.node(scope, "Concat", unsq + tails, axis=0)

    def split_heads(self, scope, x, perm):
        shape = self.dynamic_shape(scope, x, [HEADS, HEAD_DIM])
        r = self.node(scope, "Reshape", [x, shape])
        return self.node(scope, "Transpose", [r], perm=perm)


def build_model(opset=OPSET):
    b = Builder(SEED, opset)
    # Embeddings.
    e = "/embeddings"
    word = b.init("embeddings.word_embeddings.weight", b.randn(VOCAB, HIDDEN))
    pos = b.init("embeddings.position_embeddings.weight", b.randn(MAX_POS, HIDDEN))
    tt = b.init("embeddings.token_type_embeddings.weight", b.randn(TYPES, HIDDEN))
    x = b.node(f"{e}/word_embeddings", "Gather", [word, "input_ids"])
    t = b.node(f"{e}/token_type_embeddings", "Gather", [tt, "token_type_ids"])
    x = b.node(e, "Add", [x, t])
    p = b.node(f"{e}/position_embeddings", "Gather", [pos, "position_ids"])
    x = b.node(e, "Add", [x, p])
    h = b.layer_norm(f"{e}/LayerNorm", x)

    for layer in range(LAYERS):
        L = f"/encoder/layer.{layer}"
        s = f"{L}/attention/self"
        q = b.linear(f"{s}/query", h, HIDDEN, HIDDEN, bias_first=True)
        k = b.linear(f"{s}/key", h, HIDDEN, HIDDEN, bias_first=False)
        k = b.split_heads(s, k, [0, 2, 3, 1])  # k^T: permute(0,2,1,3) then transpose(-1,-2), fused
        v = b.linear(f"{s}/value", h, HIDDEN, HIDDEN, bias_first=True)
        v = b.split_heads(s, v, [0, 2, 1, 3])
        q = b.split_heads(s, q, [0, 2, 1, 3])
        scores = b.node(s, "MatMul", [q, k])
        scores = b.node(s, "Div", [scores, b.const(s, 8.0, np.float32)])  # sqrt(head_dim)
        probs = b.node(s, "Softmax", [scores], axis=-1)
        ctx = b.node(s, "MatMul", [probs, v])
        ctx = b.node(s, "Transpose", [ctx], perm=[0, 2, 1, 3])
        ctx = b.node(s, "Reshape", [ctx, b.dynamic_shape(s, ctx, [HIDDEN])])

        o = f"{L}/attention/output"
        a = b.linear(f"{o}/dense", ctx, HIDDEN, HIDDEN, bias_first=False)
        a = b.node(o, "Add", [a, h])
        a = b.layer_norm(f"{o}/LayerNorm", a)

        i = f"{L}/intermediate"
        f = b.linear(f"{i}/dense", a, HIDDEN, FFN, bias_first=True)
        g = f"{i}/intermediate_act_fn"
        d = b.node(g, "Div", [f, b.const(g, 1.4142135381698608, np.float32)])
        d = b.node(g, "Erf", [d])
        d = b.node(g, "Add", [d, b.const(g, 1.0, np.float32)])
        d = b.node(g, "Mul", [f, d])
        f = b.node(g, "Mul", [d, b.const(g, 0.5, np.float32)])

        o = f"{L}/output"
        f = b.linear(f"{o}/dense", f, FFN, HIDDEN, bias_first=False)
        f = b.node(o, "Add", [f, a])
        h = b.layer_norm(f"{o}/LayerNorm", f)

    logits = b.linear("/classifier", h, HIDDEN, LABELS, bias_first=True)
    # torch names the graph output after the output name given to export.
    b.nodes[-1].output[0] = "logits"

    ids = ["batch", "sequence"]
    graph = helper.make_graph(
        b.nodes,
        "main_graph",
        [helper.make_tensor_value_info(n, TensorProto.INT64, ids) for n in ("input_ids", "token_type_ids", "position_ids")],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ids + [LABELS])],
        b.initializers,
    )
    assert logits == "/classifier/Add_output_0"
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset)],
        producer_name=f"placer scripts/onnx/make_bert_like.py (torch.onnx.export opset {opset} style)",
        producer_version="1",
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    # torch stores intermediate shapes as value_info; do the same.
    model = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    return model


def save_external(model, path):
    onnx.save_model(
        copy.deepcopy(model),  # save_model strips raw data from the proto it is given
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=os.path.basename(path) + ".data",
        size_threshold=1024,
    )


def check_saved(path, model):
    onnx.checker.check_model(path, full_check=True)
    vi = {v.name: v for v in model.graph.value_info}
    want = {
        "/encoder/layer.0/attention/self/Reshape_output_0": ["batch", "sequence", HEADS, HEAD_DIM],
        "/encoder/layer.0/attention/self/Transpose_output_0": ["batch", HEADS, HEAD_DIM, "sequence"],
        "/encoder/layer.1/attention/self/Reshape_3_output_0": ["batch", "sequence", HIDDEN],
    }
    for name, shape in want.items():
        got = [d.dim_param or d.dim_value for d in vi[name].type.tensor_type.shape.dim]
        if got != shape:
            raise SystemExit(f"shape inference: {name} has shape {got}, expected {shape}")
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    batch, seq = 2, 7
    rng = np.random.default_rng(0)
    feeds = {
        "input_ids": rng.integers(0, VOCAB, (batch, seq), dtype=np.int64),
        "token_type_ids": rng.integers(0, TYPES, (batch, seq), dtype=np.int64),
        "position_ids": np.tile(np.arange(seq, dtype=np.int64), (batch, 1)),
    }
    (logits,) = sess.run(["logits"], feeds)
    if logits.shape != (batch, seq, LABELS) or not np.all(np.isfinite(logits)):
        raise SystemExit(f"onnxruntime: bad logits shape {logits.shape} or non-finite values")


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: make_bert_like.py DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    model = build_model()

    path = os.path.join(out, "bert_like.onnx")
    save_external(model, path)
    check_saved(path, model)

    nodata = os.path.join(out, "bert_like_nodata.onnx")
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        save_external(model, os.path.join(tmp, "bert_like_nodata.onnx"))
        shutil.copyfile(os.path.join(tmp, "bert_like_nodata.onnx"), nodata)
    if os.path.exists(nodata + ".data"):
        raise SystemExit(f"{nodata}.data must not exist")
    try:
        onnx.load(nodata)
    except (FileNotFoundError, OSError, onnx.checker.ValidationError):
        pass
    else:
        raise SystemExit(f"{nodata} unexpectedly loads with its external data")

    # The same encoder as torch writes it at opset 14, LayerNorm spelled out.
    opset14 = os.path.join(out, "bert_like_opset14.onnx")
    model14 = build_model(14)
    save_external(model14, opset14)
    check_saved(opset14, model14)

    hist = collections.Counter(n.op_type for n in model.graph.node)
    n_params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    log(f"bert_like: {len(model.graph.node)} nodes, {len(model.graph.initializer)} initializers "
        f"({n_params} params), {len(model.graph.value_info)} value_info; ops: "
        + ", ".join(f"{op} {c}" for op, c in sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))))


if __name__ == "__main__":
    main()
