#!/usr/bin/env python3
"""Strip the weights from the corpus's graphs, keeping every shape, and write the manifest.

Usage: strip.py OUT DEST [--merge]

For each OUT/raw/NAME.onnx with its NAME.json, writes DEST/NAME.onnx: the same graph
in which every tensor of more than 1,024 elements (initializers and Constant
attributes; integer tensors, which are indices, above 65,536) is marked as external
data in a file that does not exist, `NAME.weights-stripped`.  placer never reads such
payloads (it knows a weight by its shape, and reads only constants of at most 1,024
elements, indices of at most 65,536), so the import is the same as from the full file.
Indices that the exporter stored as external data are written into the file.  DEST/manifest.json lists each graph with its exporter,
the framework's parameter count, its import arguments, and the stripped file's
sha256. With --merge, DEST already holds a corpus: the files of OUT are added to it (or
replace theirs), and its manifest keeps every other entry.
"""

import hashlib
import json
import os
import sys

import onnx
from onnx import TensorProto

KEEP = 1024  # elements; placer reads constants up to this size (values.rs)
KEEP_INDEX = 1 << 16  # elements of an integer tensor (MAX_READ_INDEX_ELEMENTS)
INDEX_TYPES = (TensorProto.INT64, TensorProto.INT32)


def tensors(graph):
    """Every TensorProto of a graph: initializers and Constant-node attributes, recursively."""
    yield from graph.initializer
    for node in graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            if a.HasField("g"):
                yield from tensors(a.g)
            for g in a.graphs:
                yield from tensors(g)


def strip(path, dest, stem):
    # External data (the dynamo exporter's NAME.onnx.data) is loaded: its indices stay.
    m = onnx.load(path)
    stripped, offset = 0, 0
    for t in tensors(m.graph):
        numel = 1
        for d in t.dims:
            numel *= d
        if numel <= (KEEP_INDEX if t.data_type in INDEX_TYPES else KEEP):
            continue
        width = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data"):
            t.ClearField(field)
        del t.external_data[:]
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", f"{stem}.weights-stripped"), ("offset", str(offset)), ("length", str(numel * width))):
            e = t.external_data.add()
            e.key, e.value = k, v
        offset += numel * width
        stripped += 1
    onnx.save(m, dest)
    return stripped, offset


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[3:] not in ([], ["--merge"]):
        raise SystemExit("usage: strip.py OUT DEST [--merge]")
    raw, dest, merge = os.path.join(sys.argv[1], "raw"), sys.argv[2], sys.argv[3:] == ["--merge"]
    os.makedirs(dest, exist_ok=True)
    manifest = []
    for f in sorted(os.listdir(raw)):
        if not f.endswith(".onnx") or f.endswith(".train.onnx"):
            continue
        stem = f[: -len(".onnx")]
        meta = json.load(open(os.path.join(raw, f"{stem}.json")))
        out = os.path.join(dest, f)
        n, nbytes = strip(os.path.join(raw, f), out, stem)
        m = onnx.load(out, load_external_data=False)
        manifest.append({
            "file": f,
            "model": meta["model"],
            "exporter": meta["exporter"],
            "framework_params": meta["framework_params"],
            "import": meta["import"],
            "opset": max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")),
            "nodes": len(m.graph.node),
            "stripped_tensors": n,
            "stripped_bytes": nbytes,
            "sha256": hashlib.sha256(open(out, "rb").read()).hexdigest(),
        })
        print(f"{f}: {len(m.graph.node)} nodes, {n} tensors ({nbytes:,} bytes) stripped, "
              f"{os.path.getsize(out):,} bytes left", file=sys.stderr)
    if merge:
        made = {e["file"] for e in manifest}
        kept = [e for e in json.load(open(os.path.join(dest, "manifest.json"))) if e["file"] not in made]
        manifest = sorted(kept + manifest, key=lambda e: e["file"])
    failures = os.path.join(raw, "ort-failures.txt")
    if os.path.exists(failures) and not merge:
        # Models onnxruntime-training could not make a training graph of, and why.
        with open(failures) as src, open(os.path.join(dest, "ort-failures.txt"), "w") as out:
            out.write(src.read())
    with open(os.path.join(dest, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
