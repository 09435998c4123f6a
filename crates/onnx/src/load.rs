//! Reading and checking the ONNX protobuf.

use crate::OnnxError;
use crate::proto::ModelProto;
use bytes::Bytes;
use prost::Message;
use std::path::Path;

/// Opsets of the default domain (`ai.onnx`) whose operator semantics the importer knows.
pub const OPSETS: std::ops::RangeInclusive<i64> = 9..=20;
/// ONNX IR versions the protobuf layout is read for (3 is ONNX 1.0 era, 11 is ONNX 1.18+).
const IR_VERSIONS: std::ops::RangeInclusive<i64> = 3..=12;
/// The `com.microsoft` opset of onnxruntime's contrib and training ops.
const MS_OPSETS: std::ops::RangeInclusive<i64> = 1..=1;

/// A decoded model whose header passed the checks.
#[derive(Debug)]
pub struct Loaded {
    pub model: ModelProto,
    /// The default domain's opset.
    pub opset: i64,
}

/// Decodes `path`. Tensor payloads stay undecoded slices of the file's bytes (weights are
/// never interpreted), and external data files are never opened.
pub fn load(path: &Path) -> Result<Loaded, OnnxError> {
    let bytes = std::fs::read(path).map_err(|source| OnnxError::Io { path: path.to_path_buf(), source })?;
    decode(path, Bytes::from(bytes))
}

pub fn decode(path: &Path, bytes: Bytes) -> Result<Loaded, OnnxError> {
    let not_onnx = |reason: String| OnnxError::NotOnnx { path: path.to_path_buf(), reason };
    if bytes.is_empty() {
        return Err(not_onnx("the file is empty".into()));
    }
    // A model starts with field 1 (ir_version, varint) or, rarely, another small field
    // number; text such as JSON or a zip header cannot start a protobuf message this way.
    let tag = bytes[0];
    if tag >> 3 == 0 || tag & 7 > 5 || tag & 7 == 3 || tag & 7 == 4 {
        return Err(not_onnx(format!("it starts with byte 0x{tag:02x}, which no protobuf message starts with")));
    }
    let model = ModelProto::decode(bytes).map_err(|e| not_onnx(format!("protobuf decoding failed ({e})")))?;
    let ir = model.ir_version.ok_or_else(|| not_onnx("it has no ir_version".into()))?;
    if !IR_VERSIONS.contains(&ir) {
        return Err(not_onnx(format!("ir_version {ir} is outside {}..={}", IR_VERSIONS.start(), IR_VERSIONS.end())));
    }
    if model.graph.is_none() {
        return Err(not_onnx("it has no graph".into()));
    }
    let mut opset = None;
    for set in &model.opset_import {
        let domain = set.domain.clone().unwrap_or_default();
        let version = set.version.unwrap_or(0);
        let bad = |supported: &str| OnnxError::Opset {
            path: path.to_path_buf(),
            domain: domain.clone(),
            version,
            supported: supported.to_string(),
        };
        match domain.as_str() {
            "" | "ai.onnx" => {
                if !OPSETS.contains(&version) {
                    return Err(bad(&format!("opsets {} to {}", OPSETS.start(), OPSETS.end())));
                }
                opset = Some(version);
            }
            "com.microsoft" if !MS_OPSETS.contains(&version) => return Err(bad("com.microsoft opset 1")),
            // Other domains are checked per node: only nodes that use them can fail.
            _ => {}
        }
    }
    let opset = opset.ok_or_else(|| not_onnx("it imports no opset of the default domain".into()))?;
    Ok(Loaded { model, opset })
}
