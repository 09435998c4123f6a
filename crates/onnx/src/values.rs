//! What the importer knows about each ONNX value: a placer tensor (with the shape ONNX
//! gives it, which may be a reshaped view of the tensor), or a constant known by shape
//! and, for small index or scalar tensors, by value.

use crate::proto::{AttributeProto, NodeProto, TensorProto, tensor_proto::DataLocation};
use placer_ir::DType;
use placer_zoo::T;

/// Constants larger than this are known by shape only: their payload is never read.
pub const MAX_READ_ELEMENTS: u64 = 1024;

/// Integer constants are indices, never weights: up to this size they are read, so that
/// an index the exporter wrote out in full (the dynamo exporter's `as_strided`, a Gather
/// by every position in order) can be recognised.
pub const MAX_READ_INDEX_ELEMENTS: u64 = 1 << 16;

/// Values the importer computes from known constants (a rotary cos/sin cache, a causal
/// mask's buckets) keep their elements up to this size, so that "known by shape only"
/// keeps meaning "a stored tensor or something computed from one": a weight.
pub const MAX_COMPUTED_ELEMENTS: u64 = 1 << 16;

/// The value of a placer tensor `t` that ONNX sees in `shape` (its own, or a view).
pub fn tensor(t: T, shape: Vec<u64>) -> Value {
    Value::Tensor(Tensor { t, shape })
}

/// An ONNX element type as the importer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem {
    Float(DType),
    Int(DType),
    Bool,
    Other(i32),
}

impl Elem {
    pub fn from_onnx(code: i32) -> Elem {
        match code {
            1 => Elem::Float(DType::F32),
            10 => Elem::Float(DType::F16),
            16 => Elem::Float(DType::Bf16),
            6 => Elem::Int(DType::I32),
            7 => Elem::Int(DType::I64),
            9 => Elem::Bool,
            other => Elem::Other(other),
        }
    }

    /// The placer dtype of a tensor of this element type, if placer has one.
    pub fn dtype(self) -> Option<DType> {
        match self {
            Elem::Float(d) | Elem::Int(d) => Some(d),
            _ => None,
        }
    }
}

/// A value known without running the graph.
#[derive(Debug, Clone)]
pub struct Constant {
    pub shape: Vec<u64>,
    pub elem: Elem,
    /// The elements, when the constant is small and its payload is in the file.
    pub data: Option<Vec<f64>>,
    /// The ONNX value a weight made from this constant is named after.
    pub origin: String,
}

impl Constant {
    /// Elements, saturating: dims come from the file.
    pub fn numel(&self) -> u64 {
        self.shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d)).unwrap_or(u64::MAX)
    }

    pub fn ints(&self) -> Option<Vec<i64>> {
        self.data.as_ref().map(|d| d.iter().map(|&x| x as i64).collect())
    }

    /// The single element of a one-element constant.
    pub fn scalar(&self) -> Option<f64> {
        match self.data.as_deref() {
            Some([x]) => Some(*x),
            _ => None,
        }
    }
}

/// A placer tensor and the shape ONNX gives the value (same element count; they differ
/// where the importer kept a view instead of emitting a reshape).
#[derive(Debug, Clone)]
pub struct Tensor {
    pub t: T,
    pub shape: Vec<u64>,
}

#[derive(Debug, Clone)]
pub enum Value {
    Tensor(Tensor),
    Const(Constant),
    /// Computed from data inputs (ids, attention masks) and constants only: nothing to
    /// differentiate, known by shape. Where an activation or an embedding reads it,
    /// it becomes a placer input that the step is fed (`Lowerer::feed`).
    Data(Constant),
    /// Produced by a node that could not be imported: readers are skipped, not reported.
    Poisoned,
    /// Computed only from an input the user dropped (`--drop-input`, an attention mask).
    Dropped,
}

/// Reads a TensorProto's header and, for small tensors stored in the file, its elements.
pub fn constant_of(t: &TensorProto, origin: &str) -> Constant {
    let shape: Vec<u64> = t.dims.iter().map(|&d| d.max(0) as u64).collect();
    let elem = Elem::from_onnx(t.data_type.unwrap_or(0));
    let mut constant = Constant { shape, elem, data: None, origin: origin.to_string() };
    // Dims come from the file: a product past u64 saturates, and is never read.
    let numel = constant.numel();
    let external = t.data_location == Some(DataLocation::External as i32);
    let limit = if matches!(elem, Elem::Int(_)) { MAX_READ_INDEX_ELEMENTS } else { MAX_READ_ELEMENTS };
    if numel <= limit && !external {
        constant.data = read_elements(t, elem, numel as usize);
    }
    constant
}

fn read_elements(t: &TensorProto, elem: Elem, numel: usize) -> Option<Vec<f64>> {
    let typed: Vec<f64> = match elem {
        Elem::Float(DType::F32) => t.float_data.iter().map(|&x| f64::from(x)).collect(),
        Elem::Int(DType::I64) => t.int64_data.iter().map(|&x| x as f64).collect(),
        Elem::Int(DType::I32) | Elem::Bool => t.int32_data.iter().map(|&x| f64::from(x)).collect(),
        _ => Vec::new(),
    };
    if typed.len() == numel {
        return Some(typed);
    }
    let raw = t.raw_data.as_deref()?;
    let width = match elem {
        Elem::Float(DType::F32) | Elem::Int(DType::I32) => 4,
        Elem::Int(DType::I64) => 8,
        Elem::Bool => 1,
        _ => return None,
    };
    if raw.len() != numel * width {
        return None;
    }
    let values = raw
        .chunks_exact(width)
        .map(|c| match (elem, c) {
            (Elem::Float(_), &[a, b, c, d]) => f64::from(f32::from_le_bytes([a, b, c, d])),
            (_, &[a, b, c, d]) => f64::from(i32::from_le_bytes([a, b, c, d])),
            (_, &[a, b, c, d, e, f, g, h]) => i64::from_le_bytes([a, b, c, d, e, f, g, h]) as f64,
            (_, &[a]) => f64::from(a),
            _ => 0.0,
        })
        .collect();
    Some(values)
}

/// Typed access to a node's attributes.
#[derive(Debug, Clone, Copy)]
pub struct Attrs<'n>(pub &'n NodeProto);

impl Attrs<'_> {
    fn get(&self, name: &str) -> Option<&AttributeProto> {
        self.0.attribute.iter().find(|a| a.name.as_deref() == Some(name))
    }

    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    pub fn int(&self, name: &str, default: i64) -> i64 {
        self.get(name).and_then(|a| a.i).unwrap_or(default)
    }

    pub fn float(&self, name: &str, default: f64) -> f64 {
        self.get(name).and_then(|a| a.f).map(f64::from).unwrap_or(default)
    }

    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.get(name).map(|a| a.ints.clone())
    }

    pub fn string(&self, name: &str) -> Option<String> {
        self.get(name).and_then(|a| a.s.as_ref()).map(|s| String::from_utf8_lossy(s).into_owned())
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorProto> {
        self.get(name).and_then(|a| a.t.as_ref())
    }
}
