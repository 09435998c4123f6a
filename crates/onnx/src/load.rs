//! Reading and checking the ONNX protobuf.

use crate::OnnxError;
use crate::proto::tensor_proto::{self, DataLocation};
use crate::proto::{ModelProto, TensorProto};
use crate::values::MAX_READ_INDEX_ELEMENTS;
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
/// never interpreted); of external data, only integer initializers small enough to be
/// read as indices are read ([`inline_indices`]).
pub fn load(path: &Path) -> Result<Loaded, OnnxError> {
    let bytes = std::fs::read(path).map_err(|source| OnnxError::Io { path: path.to_path_buf(), source })?;
    let mut loaded = decode(path, Bytes::from(bytes))?;
    if let (Some(graph), Some(dir)) = (loaded.model.graph.as_mut(), path.parent()) {
        inline_indices(&mut graph.initializer, dir);
    }
    Ok(loaded)
}

/// Reads, into the file's own payload, the external data of integer initializers of at
/// most [`MAX_READ_INDEX_ELEMENTS`] elements: indices, which the dynamo exporter stores
/// beside the weights in `NAME.onnx.data`. Weights (floats) stay unread. A payload that
/// cannot be read (a missing file, a location outside the model's directory, a short
/// read) leaves its tensor known by shape, as every weight is.
fn inline_indices(initializers: &mut [TensorProto], dir: &Path) {
    for t in initializers.iter_mut() {
        let width = match tensor_proto::DataType::try_from(t.data_type.unwrap_or(0)) {
            Ok(tensor_proto::DataType::Int64) => 8,
            Ok(tensor_proto::DataType::Int32) => 4,
            _ => continue,
        };
        // Dims come from the file: a product past i64 is no index worth reading.
        let numel = t.dims.iter().try_fold(1i64, |n, &d| n.checked_mul(d));
        let Some(numel) = numel.filter(|n| (0..=MAX_READ_INDEX_ELEMENTS as i64).contains(n)) else { continue };
        if t.data_location != Some(DataLocation::External as i32) {
            continue;
        }
        if let Some(payload) = external_payload(t, dir, numel as u64 * width) {
            t.raw_data = Some(Bytes::from(payload));
            t.data_location = Some(DataLocation::Default as i32);
        }
    }
}

fn external_payload(t: &TensorProto, dir: &Path, len: u64) -> Option<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let entry =
        |key: &str| t.external_data.iter().find(|e| e.key.as_deref() == Some(key)).and_then(|e| e.value.as_deref());
    let location = Path::new(entry("location")?);
    // The ONNX rule: a location is relative to the model's directory, and stays in it.
    if !location.components().all(|c| matches!(c, std::path::Component::Normal(_))) {
        return None;
    }
    let offset: u64 = entry("offset").map_or(Some(0), |o| o.parse().ok())?;
    if entry("length").is_some_and(|l| l.parse::<u64>().ok() != Some(len)) {
        return None;
    }
    let mut file = std::fs::File::open(dir.join(location)).ok()?;
    file.seek(SeekFrom::Start(offset)).ok()?;
    let mut payload = vec![0; usize::try_from(len).ok()?];
    file.read_exact(&mut payload).ok()?;
    Some(payload)
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
