//! Arithmetic per node: multiply-accumulates and nominal FLOPs, from an op's attributes
//! and operand shapes.

use super::{AttrReader, Op, Operand};
use crate::types::Attrs;

/// Arithmetic done by one execution of a node. Counts saturate at `u64::MAX` rather
/// than overflow: attributes come from files, and absurd ones must not panic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    /// Multiply-accumulates of GEMM-like ops (convolutions, matmuls); zero elsewhere.
    /// Published model "FLOPs" (ResNet-50: 4.1 G) count these.
    pub macs: u64,
    /// Floating-point operations: 2 per MAC, plus a nominal count per element for
    /// everything else (docs/ops.md lists them).
    pub flops: u64,
}

/// The cost of a node whose operands already passed [`check_shapes`](super::check_shapes).
pub fn cost(op: Op, attrs: &Attrs, inputs: &[Operand<'_>], outputs: &[Operand<'_>]) -> Cost {
    let a = AttrReader(attrs);
    let gemm = |macs: u64| Cost { macs, flops: macs.saturating_mul(2) };
    let per_element = |n: u64, k: u64| Cost { macs: 0, flops: n.saturating_mul(k) };
    match op {
        Op::MatMul => {
            let k = if a.bool("transpose_a", false) {
                inputs[0].shape[inputs[0].shape.len() - 2]
            } else {
                inputs[0].shape[inputs[0].shape.len() - 1]
            };
            gemm(outputs[0].numel().saturating_mul(k))
        }
        Op::Conv2d | Op::Conv2dBackwardData | Op::Conv2dBackwardFilter => {
            // Every variant performs the forward conv's MACs: one per (output element,
            // filter tap within a group).
            let (y, w) = match op {
                Op::Conv2d => (outputs[0], inputs[1]),
                Op::Conv2dBackwardData => (inputs[0], inputs[1]),
                _ => (inputs[1], outputs[0]),
            };
            gemm(w.shape[1..].iter().fold(y.numel(), |acc, &d| acc.saturating_mul(d)))
        }
        Op::MaxPool2d | Op::AvgPool2d => {
            let k = a.ints("kernel").map_or(1, |k| k.iter().fold(1u64, |acc, &d| acc.saturating_mul(d.unsigned_abs())));
            per_element(outputs[0].numel(), k)
        }
        Op::MaxPool2dBackward | Op::AvgPool2dBackward | Op::GlobalAvgPoolBackward => per_element(outputs[0].numel(), 1),
        Op::GlobalAvgPool | Op::BiasGrad | Op::Relu | Op::ReluBackward | Op::SumTo => per_element(inputs[0].numel(), 1),
        Op::Clip | Op::ClipBackward => per_element(inputs[0].numel(), 1),
        Op::HardSigmoid | Op::HardSigmoidBackward => per_element(inputs[0].numel(), 3),
        Op::HardSwish | Op::HardSwishBackward => per_element(inputs[0].numel(), 4),
        // A broadcast second operand is read more than once: count the output's elements.
        Op::Add | Op::Mul => per_element(outputs[0].numel(), 1),
        Op::Dropout => per_element(inputs[0].numel(), 3),
        Op::DropoutBackward => per_element(inputs[0].numel(), 2),
        Op::BiasAdd => per_element(outputs[0].numel(), 1),
        Op::BatchNorm | Op::LayerNorm => per_element(inputs[0].numel(), 5),
        Op::BatchNormBackward | Op::LayerNormBackward => per_element(inputs[1].numel(), 9),
        Op::RmsNorm => per_element(inputs[0].numel(), 4),
        Op::RmsNormBackward => per_element(inputs[1].numel(), 7),
        Op::Gelu | Op::GeluBackward | Op::Erf | Op::ErfBackward => per_element(inputs[0].numel(), 10),
        Op::Tanh | Op::TanhBackward | Op::Sigmoid | Op::SigmoidBackward => per_element(inputs[0].numel(), 4),
        Op::Softmax | Op::SoftmaxBackward => per_element(inputs[0].numel(), 5),
        Op::SoftmaxCrossEntropy | Op::SoftmaxCrossEntropyBackward => per_element(inputs[0].numel(), 5),
        Op::Sgd => per_element(inputs[0].numel(), 3),
        Op::SgdMomentum => per_element(inputs[0].numel(), 5),
        Op::EmbeddingBackward => per_element(inputs[0].numel(), 1),
        Op::Concat | Op::Split | Op::Reshape | Op::Transpose | Op::Embedding => Cost::default(),
    }
}
