//! The op set: every operation a model may use, how many operands it takes, which
//! attributes it reads, what shapes fit it, and how much arithmetic it does.
//!
//! The set is deliberately closed. Each op here is one the kernels implement (forward,
//! backward and update), so a model that validates is a model that can run. docs/ops.md
//! describes each op for people; this module is the authority.
//!
//! `signature` says how many operands and which attributes each op takes, `shapes` which
//! shapes fit it, `cost` how much arithmetic it does and `traffic` how many bytes it moves
//! per operand. The last three are counts derived from the op and its operand shapes, so
//! they live with the op, as tract keeps an op's costs with the op.

mod cost;
mod params;
mod shapes;
mod signature;
mod traffic;
mod window;

pub use cost::{Cost, cost};
pub use params::{MatMulDims, axis, clip_bounds, dropout_ratio, hard_sigmoid, matmul_dims};
pub use shapes::{broadcasts, check_shapes};
pub use signature::{Arity, AttrKind, AttrSpec, Signature};
pub use traffic::{Traffic, node_traffic};
pub use window::{Window, conv_output_shape, pooling_output_shape};

use crate::types::{AttrValue, Attrs, DType, named_enum};
use std::fmt;

named_enum! {
    /// An operation kind. The name in model.json is the text on the right.
    Op {
        MatMul = "matmul",
        BiasAdd = "bias_add",
        BiasGrad = "bias_grad",
        Conv2d = "conv2d",
        Conv2dBackwardData = "conv2d_backward_data",
        Conv2dBackwardFilter = "conv2d_backward_filter",
        MaxPool2d = "max_pool2d",
        MaxPool2dBackward = "max_pool2d_backward",
        AvgPool2d = "avg_pool2d",
        AvgPool2dBackward = "avg_pool2d_backward",
        GlobalAvgPool = "global_avg_pool",
        GlobalAvgPoolBackward = "global_avg_pool_backward",
        BatchNorm = "batch_norm",
        BatchNormBackward = "batch_norm_backward",
        LayerNorm = "layer_norm",
        LayerNormBackward = "layer_norm_backward",
        RmsNorm = "rms_norm",
        RmsNormBackward = "rms_norm_backward",
        Relu = "relu",
        ReluBackward = "relu_backward",
        Gelu = "gelu",
        GeluBackward = "gelu_backward",
        Erf = "erf",
        ErfBackward = "erf_backward",
        Tanh = "tanh",
        TanhBackward = "tanh_backward",
        Sigmoid = "sigmoid",
        SigmoidBackward = "sigmoid_backward",
        Clip = "clip",
        ClipBackward = "clip_backward",
        HardSigmoid = "hard_sigmoid",
        HardSigmoidBackward = "hard_sigmoid_backward",
        HardSwish = "hard_swish",
        HardSwishBackward = "hard_swish_backward",
        Dropout = "dropout",
        DropoutBackward = "dropout_backward",
        Add = "add",
        Mul = "mul",
        SumTo = "sum_to",
        Concat = "concat",
        Split = "split",
        Reshape = "reshape",
        Transpose = "transpose",
        Softmax = "softmax",
        SoftmaxBackward = "softmax_backward",
        SoftmaxCrossEntropy = "softmax_cross_entropy",
        SoftmaxCrossEntropyBackward = "softmax_cross_entropy_backward",
        Embedding = "embedding",
        EmbeddingBackward = "embedding_backward",
        Sgd = "sgd",
        SgdMomentum = "sgd_momentum",
    }
}

/// The shape and element type of one operand.
#[derive(Debug, Clone, Copy)]
pub struct Operand<'a> {
    pub shape: &'a [u64],
    pub dtype: DType,
}

impl Operand<'_> {
    pub fn numel(&self) -> u64 {
        self.shape.iter().product()
    }
}

/// Reads attributes that were already checked against the op's [`Signature`].
#[derive(Debug, Clone, Copy)]
pub struct AttrReader<'a>(pub &'a Attrs);

impl AttrReader<'_> {
    pub fn int(&self, name: &str, default: i64) -> i64 {
        match self.0.get(name) {
            Some(AttrValue::Int(v)) => *v,
            _ => default,
        }
    }

    pub fn float(&self, name: &str, default: f64) -> f64 {
        match self.0.get(name) {
            Some(AttrValue::Float(v)) => *v,
            Some(AttrValue::Int(v)) => *v as f64,
            _ => default,
        }
    }

    pub fn bool(&self, name: &str, default: bool) -> bool {
        match self.0.get(name) {
            Some(AttrValue::Bool(v)) => *v,
            _ => default,
        }
    }

    pub fn ints(&self, name: &str) -> Option<&[i64]> {
        match self.0.get(name) {
            Some(AttrValue::Ints(v)) => Some(v),
            _ => None,
        }
    }

    /// A pair attribute as unsigned values; negative entries are reported by the shape
    /// check rather than silently clamped.
    fn pair(&self, name: &str, default: [u64; 2]) -> Result<[u64; 2], String> {
        match self.ints(name) {
            Some(&[a, b]) if a >= 0 && b >= 0 => Ok([a as u64, b as u64]),
            Some(v) => Err(format!("attribute '{name}' must be two non-negative integers, got {v:?}")),
            None => Ok(default),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_has_a_distinct_name() {
        let mut names: Vec<_> = Op::ALL.iter().map(|o| o.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Op::ALL.len());
        for op in Op::ALL {
            assert_eq!(Op::parse(op.as_str()), Some(*op));
        }
    }
}
