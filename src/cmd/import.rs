//! `placer import MODEL.onnx [-o model.json] [--batch N] [--dim NAME=N]...`

use anyhow::Context as _;
use placer_onnx::{GraphKind, ImportOptions};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The ONNX file: a forward graph (opsets 9-20) or an onnxruntime-training graph.
    model: PathBuf,
    /// Write model.json here instead of to standard output.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Batch size: the first dimension of every graph input.
    #[arg(long, short)]
    batch: Option<u64>,
    /// Size of a named symbolic dimension, e.g. --dim sequence=128 (repeatable).
    #[arg(long = "dim", value_name = "NAME=N", value_parser = parse_dim)]
    dims: Vec<(String, u64)>,
    /// Name of the model in model.json (default: the file's stem and the batch).
    #[arg(long)]
    name: Option<String>,
    /// The graph output that takes the loss, for forward graphs (default: the first).
    #[arg(long)]
    loss_on: Option<String>,
    /// Leave out this graph input and what is computed from it alone; an addition or
    /// product of its values into an activation passes the activation on. For attention
    /// masks: placer cannot broadcast, so the import is then unmasked attention.
    #[arg(long = "drop-input", value_name = "NAME")]
    drop_inputs: Vec<String>,
}

fn parse_dim(s: &str) -> Result<(String, u64), String> {
    let (name, size) = s.split_once('=').ok_or_else(|| format!("'{s}' is not NAME=N"))?;
    let size: u64 = size.trim().parse().map_err(|_| format!("'{size}' in '{s}' is not a positive integer"))?;
    if name.trim().is_empty() || size == 0 {
        return Err(format!("'{s}' needs a name and a size of at least 1"));
    }
    Ok((name.trim().to_string(), size))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let opts = ImportOptions {
        batch: args.batch,
        dims: args.dims.into_iter().collect::<BTreeMap<_, _>>(),
        name: args.name,
        output: args.loss_on,
        drop_inputs: args.drop_inputs,
    };
    let imported =
        placer_onnx::import(&args.model, &opts).with_context(|| format!("cannot import {}", args.model.display()))?;
    let model = &imported.model;
    let kind = match imported.kind {
        GraphKind::Forward => "forward graph; backward pass and SGD-momentum updates derived",
        GraphKind::Training => "training graph; imported as it is",
    };
    errln!("{}: opset {}, {} ONNX nodes ({kind})", args.model.display(), imported.opset, imported.onnx_nodes);
    for (what, n) in &imported.notes {
        errln!("  note: {what}{}", if *n > 1 { format!(" (×{n})") } else { String::new() });
    }
    let summary = placer_ir::Summary::new(model, 1, 0);
    errln!(
        "  {} nodes, {} tensors; {} parameters ({:.1} MiB); forward {:.2} GMACs; peak live {:.1} MiB",
        summary.nodes,
        summary.tensors,
        summary.parameters,
        summary.parameter_bytes as f64 / (1u64 << 20) as f64,
        summary.forward_macs as f64 / 1e9,
        summary.peak_live_bytes as f64 / (1u64 << 20) as f64
    );
    match args.output {
        Some(path) => {
            placer_ir::save_model(model, &path)?;
            errln!("wrote {} to {}", model.name(), path.display());
        }
        None => out!("{}", model.to_json())?,
    }
    Ok(())
}
