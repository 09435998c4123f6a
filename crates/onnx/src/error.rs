use std::path::PathBuf;

/// Everything that can stop an import. Each variant says what and where.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} is not an ONNX model: {reason}")]
    NotOnnx { path: PathBuf, reason: String },
    #[error("{path} uses opset {version} of domain '{domain}'; placer imports {supported}")]
    Opset { path: PathBuf, domain: String, version: i64, supported: String },
    #[error("the graph has a cycle through {nodes}")]
    Cycle { nodes: String },
    #[error("the graph is malformed: {0}")]
    Malformed(String),
    #[error("{count} node(s) cannot be imported: {list}")]
    Unsupported { count: usize, list: String },
    #[error("node '{node}' ({op}): {reason}")]
    Node { node: String, op: String, reason: String },
    #[error("{0}")]
    Input(String),
    #[error("the imported graph failed validation (a bug in the importer): {0}")]
    Invalid(String),
}
