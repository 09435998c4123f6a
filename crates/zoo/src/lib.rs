//! The training-graph zoo: forward, backward and SGD-momentum update of well-known
//! networks, generated with correct shapes at any batch size.
//!
//! Model definitions describe only the forward pass with a [`GraphBuilder`]; the
//! backward pass and the updates are derived from it (see `builder`).

pub mod builder;
mod layers;
mod models;

pub use builder::{Conv, GraphBuilder, Optimizer, Pooling, T};
use std::collections::BTreeMap;

#[derive(Debug, thiserror::Error)]
pub enum ZooError {
    #[error("unknown model '{name}'; available: {available}")]
    UnknownModel { name: String, available: String },
    #[error("batch size must be between 1 and {max}, got {batch}")]
    BadBatch { batch: u64, max: u64 },
    #[error("model does not fit its input: {0}")]
    Shape(String),
    #[error("generated model failed validation (a bug in the zoo): {0}")]
    Invalid(String),
}

/// Batch sizes above this are refused: they only produce absurd tensors.
pub const MAX_BATCH: u64 = 1 << 20;

/// One network the zoo can generate.
#[derive(Debug, Clone, Copy)]
pub struct ZooEntry {
    pub name: &'static str,
    pub description: &'static str,
    build: fn(&mut GraphBuilder, u64) -> Result<T, ZooError>,
}

/// Every network in the zoo, in the order `placer zoo --list` shows them.
pub fn entries() -> &'static [ZooEntry] {
    models::ENTRIES
}

/// Builds the training graph of `name` at batch size `batch`.
pub fn build(name: &str, batch: u64) -> Result<placer_ir::Model, ZooError> {
    let entry = entries().iter().find(|e| e.name == name).ok_or_else(|| ZooError::UnknownModel {
        name: name.to_string(),
        available: entries().iter().map(|e| e.name).collect::<Vec<_>>().join(", "),
    })?;
    if !(1..=MAX_BATCH).contains(&batch) {
        return Err(ZooError::BadBatch { batch, max: MAX_BATCH });
    }
    let mut g = GraphBuilder::new();
    let loss = (entry.build)(&mut g, batch)?;
    let meta = BTreeMap::from([
        ("generator".to_string(), format!("placer zoo {name} --batch {batch}")),
        ("batch".to_string(), batch.to_string()),
    ]);
    g.finish(&format!("{name}-b{batch}"), meta, loss, Optimizer::default())
}
