//! ONNX import: `placer import model.onnx` turns an ONNX graph into a placer training
//! graph (model.json), from shapes alone.
//!
//! - **Forward graphs** (`torch.onnx.export`, tf2onnx, Caffe2 exports; opsets 9–20)
//!   are lowered onto placer's op set through the zoo's [`placer_zoo::GraphBuilder`],
//!   which derives the backward pass and the SGD-momentum updates exactly as for the
//!   zoo's own models. A softmax cross-entropy loss is attached to the first output.
//! - **Training graphs** (onnxruntime-training artifacts, with `com.microsoft`
//!   gradient ops) are imported as they are: forward and backward nodes map one to one,
//!   and the shapes the file leaves out are derived.
//!
//! Weights are never read: constants are known by shape, and only small index and
//! scalar tensors (shape arithmetic, GELU's √2) and integer indices are decoded; of
//! external data files only those indices are read. What placer cannot run is reported
//! in one error, with counts.

mod error;
mod graph;
mod load;
mod lower;
mod values;

pub mod proto {
    //! Types generated from the vendored `proto/onnx.proto` (ONNX 1.23) by build.rs.
    #![allow(clippy::all, clippy::pedantic, missing_debug_implementations, unused_qualifications, rust_2018_idioms)]
    include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
}

pub use error::OnnxError;
pub use load::OPSETS;

use lower::Lowerer;
use std::collections::BTreeMap;
use std::path::Path;

/// Sizes for what the file leaves open.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// The batch size: the first dimension of every graph input, symbolic or not.
    pub batch: Option<u64>,
    /// Sizes of named symbolic dimensions (`sequence` → 128).
    pub dims: BTreeMap<String, u64>,
    /// The model's name in model.json; by default the file's stem and the batch.
    pub name: Option<String>,
    /// The graph output that takes the loss (forward graphs); by default the first.
    pub output: Option<String>,
    /// Graph inputs to leave out, with everything computed only from them; adding or
    /// multiplying their values into an activation leaves the activation unchanged.
    /// For attention masks, which placer cannot broadcast: the import then describes
    /// unmasked attention (every token attends to every token).
    pub drop_inputs: Vec<String>,
}

/// Which kind of ONNX graph was imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphKind {
    /// A forward graph; the backward pass and updates were derived.
    Forward,
    /// A training graph with its own backward pass.
    Training,
}

/// An imported model and what the import changed on purpose.
#[derive(Debug)]
pub struct Imported {
    pub model: placer_ir::Model,
    pub kind: GraphKind,
    pub opset: i64,
    /// Nodes in the ONNX graph.
    pub onnx_nodes: usize,
    /// "what was done" → how many times.
    pub notes: BTreeMap<String, usize>,
}

/// Imports the ONNX model at `path`.
pub fn import(path: &Path, opts: &ImportOptions) -> Result<Imported, OnnxError> {
    let loaded = load::load(path)?;
    import_loaded(path, loaded, opts)
}

/// Imports an ONNX model already in memory (`path` names it in messages).
pub fn import_bytes(path: &Path, bytes: Vec<u8>, opts: &ImportOptions) -> Result<Imported, OnnxError> {
    let loaded = load::decode(path, bytes.into())?;
    import_loaded(path, loaded, opts)
}

fn import_loaded(path: &Path, loaded: load::Loaded, opts: &ImportOptions) -> Result<Imported, OnnxError> {
    if opts.batch == Some(0) || opts.dims.values().any(|&d| d == 0) {
        return Err(OnnxError::Input("sizes must be at least 1".into()));
    }
    let Some(graph) = loaded.model.graph.as_ref() else {
        return Err(OnnxError::Malformed("no graph".into()));
    };
    let topo = graph::topology(graph)?;
    let kind = if lower::training::is_training_graph(graph) { GraphKind::Training } else { GraphKind::Forward };
    let mut l = Lowerer::new(graph, topo, loaded.opset);
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "onnx".into());
    let model = match kind {
        GraphKind::Forward => {
            l.declare_inputs(opts, &|_| false)?;
            let loss = forward_with_loss(&mut l, opts)?;
            let (name, meta) = naming(path, &stem, opts, &l, loaded.opset);
            l.g.finish(&name, meta, loss, placer_zoo::Optimizer::default())
                .map_err(|e| OnnxError::Invalid(e.to_string()))?
        }
        GraphKind::Training => {
            lower::training::lower(&mut l, opts)?;
            let (name, meta) = naming(path, &stem, opts, &l, loaded.opset);
            std::mem::take(&mut l.g).finish_as_is(&name, meta).map_err(|e| OnnxError::Invalid(e.to_string()))?
        }
    };
    Ok(Imported { model, kind, opset: loaded.opset, onnx_nodes: graph.node.len(), notes: l.notes })
}

fn naming(
    path: &Path,
    stem: &str,
    opts: &ImportOptions,
    l: &Lowerer<'_>,
    opset: i64,
) -> (String, BTreeMap<String, String>) {
    let batch = l.batch();
    let name = opts.name.clone().unwrap_or_else(|| format!("{stem}-b{batch}"));
    let file = path.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let mut generator = format!("placer import {file} --batch {batch}");
    for (k, v) in &opts.dims {
        generator.push_str(&format!(" --dim {k}={v}"));
    }
    if let Some(o) = &opts.output {
        generator.push_str(&format!(" --loss-on {o}"));
    }
    for d in &opts.drop_inputs {
        generator.push_str(&format!(" --drop-input {d}"));
    }
    let meta = BTreeMap::from([
        ("generator".to_string(), generator),
        ("batch".to_string(), batch.to_string()),
        ("onnx_opset".to_string(), opset.to_string()),
    ]);
    (name, meta)
}

/// Lowers a forward graph and attaches the loss to its first output (or `--loss-on`): softmax
/// cross-entropy against integer labels, over the last dimension. A final Softmax is
/// folded into the loss, which computes it.
fn forward_with_loss(l: &mut Lowerer<'_>, opts: &ImportOptions) -> Result<placer_zoo::T, OnnxError> {
    let graph = l.graph;
    let names: Vec<String> = graph.output.iter().filter_map(|o| o.name.clone()).collect();
    let output = match &opts.output {
        Some(o) if names.contains(o) => o.clone(),
        Some(o) => {
            return Err(OnnxError::Input(format!("the graph has no output '{o}'; its outputs: {}", names.join(", "))));
        }
        None => names.first().cloned().ok_or_else(|| OnnxError::Malformed("the graph has no output".into()))?,
    };
    let mut logits_name = output.clone();
    if let Some(&i) = l.topo.producer.get(&output) {
        let node = &graph.node[i];
        if node.op_type() == "Softmax" && l.topo.readers_of(&output).is_empty() {
            l.skip(i);
            logits_name = node.input[0].clone();
            l.note("final Softmax folded into the softmax cross-entropy loss");
        }
    }
    l.run(std::slice::from_ref(&logits_name), &lower::forward)?;
    let logits = match l.value(&logits_name) {
        Some(values::Value::Tensor(t)) => t.clone(),
        Some(values::Value::Data(_)) => {
            return Err(OnnxError::Input(format!(
                "output '{output}' is data (ids or a mask), not floating point, so it cannot take a loss; choose another with --loss-on (outputs: {})",
                names.join(", ")
            )));
        }
        _ => {
            return Err(OnnxError::Input(format!(
                "output '{output}' is not computed from the inputs, so it cannot take a loss"
            )));
        }
    };
    if !l.dtype_of(logits.t).is_float() {
        return Err(OnnxError::Input(format!(
            "output '{output}' is not floating point, so it cannot take a loss; choose another with --loss-on (outputs: {})",
            names.join(", ")
        )));
    }
    // [N, C, 1, 1] (a 1x1 convolution head) has its classes before the trailing ones.
    let mut dims = logits.shape.clone();
    while dims.len() > 2 && dims.last() == Some(&1) {
        dims.pop();
    }
    let classes = *dims.last().unwrap_or(&1);
    let rows = logits.shape.iter().product::<u64>() / classes.max(1);
    let lt = l.shaped(logits.t, &[rows, classes]);
    let labels_name = l.g.unique_name("labels");
    let labels = l.g.input(&labels_name, &[rows], placer_ir::DType::I32);
    let loss_name = l.g.unique_name("loss");
    l.note(format!("loss attached: softmax cross-entropy of '{output}' over its last dimension ({classes} classes)"));
    Ok(l.g.softmax_cross_entropy(&loss_name, lt, labels))
}
