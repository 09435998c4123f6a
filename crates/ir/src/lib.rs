//! placer's graph IR: the model.json format, its validation, the op set with shape
//! rules, and the analyses every later stage reads (schedule, liveness, conflicts).
//!
//! The IR knows nothing about memory pools beyond "a configuration assigns each operand
//! to one of N pools"; it never assumes there are exactly two.

pub mod analysis;
mod decode;
mod diag;
mod json;
mod model;
pub mod ops;
pub mod summary;
mod types;
mod validate;
mod write;

pub use analysis::{Liveness, MemoryProfile};
pub use diag::{Diagnostic, DiagnosticKind, Diagnostics, Location, Subject};
pub use model::{FORMAT_NAME, FORMAT_VERSION, Model, ModelDecl, Node, NodeDecl, Phase, Tensor, TensorDecl};
pub use ops::Op;
pub use summary::Summary;
pub use types::{AttrValue, Attrs, DType, NodeId, Role, TensorId, shape_str};
pub use validate::{MAX_RANK, MAX_TENSOR_BYTES, validate};
pub use write::decl_to_json;

use std::path::{Path, PathBuf};

/// The IR's error type.
#[derive(Debug, thiserror::Error)]
pub enum IrError {
    /// The OS error is the source, not part of the message: `{:#}` prints each cause once.
    #[error("cannot read model {path}")]
    Read { path: PathBuf, source: std::io::Error },
    /// The model has problems; `diagnostics` lists every one, each with its location.
    #[error("{path}: {} problem(s) found; first: {}", diagnostics.len(), diagnostics.0.first().map(ToString::to_string).unwrap_or_default())]
    Invalid { path: PathBuf, diagnostics: Diagnostics },
    #[error("cannot write model {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

/// Parses and validates model.json text, reporting every problem found.
pub fn parse_model(src: &str) -> Result<Model, Diagnostics> {
    let mut diags = Diagnostics::default();
    match decode::decode(src, &mut diags) {
        Some(d) => validate::validate_with(d.decl, Some(&d.spans), &d.damaged, diags),
        None => {
            diags.sort();
            Err(diags)
        }
    }
}

/// Reads, parses and validates a model file.
pub fn load_model(path: &Path) -> Result<Model, IrError> {
    let src = std::fs::read_to_string(path).map_err(|source| IrError::Read { path: path.to_path_buf(), source })?;
    parse_model(&src).map_err(|diagnostics| IrError::Invalid { path: path.to_path_buf(), diagnostics })
}

/// Writes a model atomically ([`placer_files::write_atomic`]), so an interrupted write
/// never leaves a truncated model behind.
pub fn save_model(model: &Model, path: &Path) -> Result<(), IrError> {
    placer_files::write_atomic(path, model.to_json())
        .map_err(|e| IrError::Write { path: path.to_path_buf(), source: e.io })
}
