#!/usr/bin/env python3
"""Export the corpus's forward graphs with torch, from torchvision and transformers.

Usage: export_torch.py OUT [NAME...]

For each model it writes OUT/raw/NAME.onnx (weights inside or beside it, as the
exporter wrote them) and OUT/raw/NAME.json: the framework's own parameter count and
how to import the file.  Models are built from their code with random weights
(`weights=None`, or a transformers config): nothing is downloaded from a model hub.

Four exporters:
  ts       torch.onnx.export(dynamo=False), the TorchScript exporter, opset 17
  dynamo   torch.onnx.export(dynamo=True), opset 18
  static   the TorchScript exporter with no dynamic axes (every shape is the example's)
  noopt    the dynamo exporter at torch's default opset with optimize=False: the graph
           as it is translated, before onnxscript's optimiser folds it (CastLike,
           SplitToSequence and SequenceAt, an RMSNorm's axes behind a Reshape)
  default  torch.onnx.export(m, args, path) with input and output names only, as a user
           who passes nothing else gets it: torch 2.15's dynamo exporter at opset 20,
           its indices stored beside the weights (ConvNeXt's `as_strided`)

The NAME_sdpa models are exported by every exporter at torch's default opset (20 in
torch 2.15), as a user who passes no opset gets them; their training graphs then carry
opset 20's Gelu, which onnxruntime differentiates with its own GeluGrad, and its fused
FastGelu (GPT-2) and QuickGelu (Llama's SiLU).
  train    the TorchScript exporter in training mode (dropout and batch norm as in
           training, no constant folding): the input of make_training.py, which turns
           it into an onnxruntime training graph.

Transformers are small configurations of the real architectures (2 layers, width
128) with their real vocabularies: the graph's ops and structure are those of the
full model; its size is a parameter of the import, not of the file.
"""

import json
import os
import sys
import time
import warnings

import torch

warnings.filterwarnings("ignore")
torch.manual_seed(0)

BATCH = 2
SEQ = 16
CNNS = {
    # name: (torchvision builder, image side)
    "resnet50": ("resnet50", 224),
    "resnext50": ("resnext50_32x4d", 224),
    "densenet121": ("densenet121", 224),
    "vgg16": ("vgg16", 224),
    "inception_v3": ("inception_v3", 299),
    "mobilenet_v2": ("mobilenet_v2", 224),
    "mobilenet_v3_small": ("mobilenet_v3_small", 224),
    "efficientnet_b0": ("efficientnet_b0", 224),
    "regnet_y_400mf": ("regnet_y_400mf", 224),
    "convnext_tiny": ("convnext_tiny", 224),
    "shufflenet_v2": ("shufflenet_v2_x1_0", 224),
    "squeezenet": ("squeezenet1_1", 224),
    "vit_b_16": ("vit_b_16", 224),
}
TRANSFORMERS = ["bert", "distilbert", "roberta", "gpt2", "t5_encoder", "llama"]
# A small network of its own with a bare torch.erf outside a GELU (and BERT's own erf
# GELU, and two slices of one activation): the Erf that no GELU pattern absorbs, and
# the Exp that onnxruntime writes into its gradient.
OWN = ["erf_mlp"]
# The same transformers with the attention users get by default (transformers 5:
# PyTorch's scaled_dot_product_attention), exported as it is decomposed: a NaN guard
# after the softmax (IsNaN, Where), masks computed in the graph. Named NAME_sdpa.
SDPA = ["bert", "distilbert", "roberta", "gpt2", "llama"]
# (model, exporter) pairs that make the corpus.  Names: MODEL.EXPORTER.
PLAN = (
    [(m, "ts") for m in CNNS]
    + [(m, "ts") for m in TRANSFORMERS]
    + [(m, "dynamo") for m in ["resnet50", "mobilenet_v2", "bert", "gpt2", "llama", "vit_b_16"]]
    # Every model as a training graph too, where onnxruntime-training can make one.
    + [(m, "train") for m in list(CNNS) + TRANSFORMERS]
    + [(f"{m}_sdpa", e) for m in SDPA for e in ("ts", "dynamo", "train")]
    # A static export (no dynamic axes), whose shape constants carry its batch.
    + [("roberta_sdpa", "static")]
    + [("convnext_tiny", "default")]
    + [(m, e) for m in OWN for e in ("ts", "train")]
    + [(m, "noopt") for m in ["llama", "gpt2_sdpa", "bert_sdpa"]]
)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def transformer(name):
    """A small configuration of a real architecture; returns (model, sequence classifier?)."""
    import transformers as tf

    small = dict(num_hidden_layers=2, hidden_size=128, num_attention_heads=2, intermediate_size=512)
    if name == "bert":
        return tf.BertForSequenceClassification(tf.BertConfig(**small, num_labels=2))
    if name == "roberta":
        return tf.RobertaForSequenceClassification(tf.RobertaConfig(**small, num_labels=2))
    if name == "distilbert":
        cfg = tf.DistilBertConfig(n_layers=2, dim=128, n_heads=2, hidden_dim=512, num_labels=2)
        return tf.DistilBertForSequenceClassification(cfg)
    if name == "gpt2":
        return tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=2, n_embd=128, n_head=2))
    if name == "t5_encoder":
        return tf.T5EncoderModel(tf.T5Config(num_layers=2, d_model=128, num_heads=2, d_kv=64, d_ff=512))
    if name == "llama":
        cfg = tf.LlamaConfig(
            num_hidden_layers=2, hidden_size=128, num_attention_heads=4, num_key_value_heads=4,
            intermediate_size=344, vocab_size=32000,
        )
        return tf.LlamaForCausalLM(cfg)
    raise SystemExit(f"unknown transformer {name}")


class Logits(torch.nn.Module):
    """A transformer as (input_ids, attention_mask) -> logits, flattened to rows for
    training graphs (onnxruntime's cross-entropy takes [N, C])."""

    def __init__(self, inner, flatten):
        super().__init__()
        self.inner = inner
        self.flatten = flatten

    def forward(self, input_ids, attention_mask):
        out = self.inner(input_ids=input_ids, attention_mask=attention_mask)
        y = out[0] if isinstance(out, (tuple, list)) else (out.logits if hasattr(out, "logits") else out.last_hidden_state)
        return y.reshape(-1, y.shape[-1]) if self.flatten else y


class ErfMlp(torch.nn.Module):
    """Linear → erf GELU (as BERT's own code writes it) → h·erf(h) → two slices → two
    Linears, summed."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(32, 64)
        self.b = torch.nn.Linear(32, 10)
        self.c = torch.nn.Linear(32, 10)

    def forward(self, x):
        import math

        h = self.a(x)
        h = h * 0.5 * (1.0 + torch.erf(h / math.sqrt(2.0)))
        h = h * torch.erf(h)
        return self.b(h[:, :32]) + self.c(h[:, 32:])


def build(name, exporter):
    """(module, example inputs, input names, dynamic axes, import arguments)."""
    train = exporter == "train"
    if name == "erf_mlp":
        return ErfMlp(), (torch.randn(BATCH, 32),), ["input"], {"input": {0: "batch"}}, {"batch": BATCH}
    if name in CNNS:
        import torchvision

        fn, side = CNNS[name]
        kwargs = {"aux_logits": False, "init_weights": False} if fn == "inception_v3" else {}
        m = getattr(torchvision.models, fn)(weights=None, **kwargs)
        x = torch.randn(BATCH, 3, side, side)
        return m, (x,), ["input"], {"input": {0: "batch"}}, {"batch": BATCH}
    sdpa = name.endswith("_sdpa")
    name = name.removesuffix("_sdpa")
    inner = transformer(name)
    inner.config.use_cache = False
    try:
        inner.set_attn_implementation("sdpa" if sdpa else "eager")
    except Exception:  # older transformers: the config attribute
        inner.config._attn_implementation = "sdpa" if sdpa else "eager"
    # onnxruntime's cross-entropy takes [N, C]: token-level heads are flattened to rows.
    m = Logits(inner, flatten=train and name in ("gpt2", "llama", "t5_encoder"))
    ids = torch.randint(0, inner.config.vocab_size, (BATCH, SEQ))
    mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    mask[1, SEQ // 2:] = 0  # the second sample is padded: the mask matters
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
    return m, (ids, mask), ["input_ids", "attention_mask"], axes, {"batch": BATCH, "dims": {"sequence": SEQ}}


def randomise(m):
    """Weights like a trained model's: no two tensors equal.  Freshly initialised
    layers share values (zero biases, unit batch-norm scales), and the TorchScript
    exporter merges equal initializers into one, which a trained model would not see."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, t in list(m.named_parameters()) + list(m.named_buffers()):
            if t.is_floating_point():
                r = torch.randn(t.shape, generator=g) * 0.02
                t.copy_(r.abs() + 0.5 if name.endswith("running_var") else r)


def export(name, exporter, out):
    m, args, names, axes, how = build(name, exporter)
    # CNNs are exported as they train: in eval mode the exporter folds each batch norm
    # into the convolution before it, which makes a different network with fewer
    # parameters.  Transformers are exported in eval mode, as users export them
    # (dropout leaves the graph); their training graphs keep it.
    train = exporter == "train" or name in CNNS
    randomise(m)
    m.train(train)
    params = sum(p.numel() for p in m.parameters())
    path = os.path.join(out, f"{name}.{exporter}.onnx")
    t = time.time()
    # torch's default opset for the default-attention models, as users export them.
    opset = {} if name.endswith("_sdpa") else {"opset_version": 18 if exporter == "dynamo" else 17}
    if exporter == "default":
        torch.onnx.export(m, args, path, input_names=names, output_names=["logits"])
    elif exporter == "noopt":
        torch.onnx.export(m, args, path, dynamo=True, optimize=False, input_names=names, output_names=["logits"])
    elif exporter == "dynamo":
        # Static shapes: the dynamo exporter's symbolic sizes are not named dims.
        torch.onnx.export(m, args, path, dynamo=True, input_names=names, output_names=["logits"], verbose=False,
                          **opset)
    else:
        torch.onnx.export(
            m, args, path, dynamo=False, input_names=names, output_names=["logits"], **opset,
            dynamic_axes=None if exporter in ("train", "static") else axes,
            training=torch.onnx.TrainingMode.TRAINING if train else torch.onnx.TrainingMode.EVAL,
            do_constant_folding=not train,
        )
    meta = {
        "name": f"{name}.{exporter}",
        "model": name,
        "exporter": exporter,
        "framework_params": params,
        "import": how,
        "requires_grad": [n for n, p in m.named_parameters()] if train else None,
        "frozen": [n for n, _ in m.named_buffers() if "running" in n] if train else None,
    }
    with open(os.path.join(out, f"{name}.{exporter}.json"), "w") as f:
        json.dump(meta, f, indent=1)
    log(f"{name}.{exporter}: {params:,} parameters, exported in {time.time() - t:.1f} s")


def main():
    if len(sys.argv) < 2:
        raise SystemExit("usage: export_torch.py OUT [NAME.EXPORTER...]")
    out = os.path.join(sys.argv[1], "raw")
    os.makedirs(out, exist_ok=True)
    wanted = set(sys.argv[2:])
    for name, exporter in PLAN:
        if wanted and f"{name}.{exporter}" not in wanted:
            continue
        export(name, exporter, out)


if __name__ == "__main__":
    main()
