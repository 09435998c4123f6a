//! An op's signature: how many inputs, in-place updates and outputs it takes, and which
//! attributes it reads, with their kinds.

use super::Op;
use std::fmt;

/// How many operands of one kind an op takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    Exactly(usize),
    AtLeast(usize),
}

impl Arity {
    pub fn accepts(self, n: usize) -> bool {
        match self {
            Arity::Exactly(k) => n == k,
            Arity::AtLeast(k) => n >= k,
        }
    }
}

impl fmt::Display for Arity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arity::Exactly(k) => write!(f, "{k}"),
            Arity::AtLeast(k) => write!(f, "at least {k}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttrKind {
    Int,
    Float,
    Bool,
    /// A list of integers of exactly this length (`None`: any length).
    Ints(Option<usize>),
}

#[derive(Debug, Clone, Copy)]
pub struct AttrSpec {
    pub name: &'static str,
    pub kind: AttrKind,
    pub required: bool,
}

/// The operand counts and attributes of an op.
#[derive(Debug, Clone, Copy)]
pub struct Signature {
    pub inputs: Arity,
    /// Tensors read and written in place (weights in an update, accumulators).
    pub updates: usize,
    pub outputs: Arity,
    pub attrs: &'static [AttrSpec],
}

const fn attr(name: &'static str, kind: AttrKind, required: bool) -> AttrSpec {
    AttrSpec { name, kind, required }
}

const PAIR: AttrKind = AttrKind::Ints(Some(2));
const CONV_ATTRS: &[AttrSpec] = &[
    attr("stride", PAIR, false),
    attr("padding", PAIR, false),
    attr("dilation", PAIR, false),
    attr("groups", AttrKind::Int, false),
];
const POOLING_ATTRS: &[AttrSpec] =
    &[attr("kernel", PAIR, true), attr("stride", PAIR, false), attr("padding", PAIR, false)];
const AVG_POOL_ATTRS: &[AttrSpec] = &[
    attr("kernel", PAIR, true),
    attr("stride", PAIR, false),
    attr("padding", PAIR, false),
    attr("count_include_pad", AttrKind::Bool, false),
];
const MATMUL_ATTRS: &[AttrSpec] = &[
    attr("transpose_a", AttrKind::Bool, false),
    attr("transpose_b", AttrKind::Bool, false),
    attr("alpha", AttrKind::Float, false),
];
const AXIS: &[AttrSpec] = &[attr("axis", AttrKind::Int, true)];
const SPLIT_ATTRS: &[AttrSpec] = &[attr("axis", AttrKind::Int, true), attr("sizes", AttrKind::Ints(None), true)];
const TRANSPOSE_ATTRS: &[AttrSpec] = &[attr("perm", AttrKind::Ints(None), true)];
const EPSILON: &[AttrSpec] = &[attr("epsilon", AttrKind::Float, false)];
const CLIP_ATTRS: &[AttrSpec] = &[attr("min", AttrKind::Float, true), attr("max", AttrKind::Float, true)];
const HARD_SIGMOID_ATTRS: &[AttrSpec] = &[attr("alpha", AttrKind::Float, true), attr("beta", AttrKind::Float, true)];
const DROPOUT_ATTRS: &[AttrSpec] = &[attr("ratio", AttrKind::Float, true), attr("seed", AttrKind::Int, false)];
const RATIO: &[AttrSpec] = &[attr("ratio", AttrKind::Float, true)];
const SGD_ATTRS: &[AttrSpec] = &[attr("lr", AttrKind::Float, true), attr("weight_decay", AttrKind::Float, false)];
const SGD_MOMENTUM_ATTRS: &[AttrSpec] = &[
    attr("lr", AttrKind::Float, true),
    attr("momentum", AttrKind::Float, true),
    attr("weight_decay", AttrKind::Float, false),
];

impl Op {
    pub fn signature(self) -> Signature {
        use Arity::{AtLeast, Exactly};
        let sig = |inputs, outputs, attrs| Signature {
            inputs: Exactly(inputs),
            updates: 0,
            outputs: Exactly(outputs),
            attrs,
        };
        match self {
            Op::MatMul => sig(2, 1, MATMUL_ATTRS),
            Op::BiasAdd => sig(2, 1, AXIS),
            Op::BiasGrad => sig(1, 1, AXIS),
            Op::Conv2d | Op::Conv2dBackwardData | Op::Conv2dBackwardFilter => sig(2, 1, CONV_ATTRS),
            Op::MaxPool2d => sig(1, 2, POOLING_ATTRS),
            Op::MaxPool2dBackward => sig(2, 1, POOLING_ATTRS),
            Op::AvgPool2d | Op::AvgPool2dBackward => sig(1, 1, AVG_POOL_ATTRS),
            Op::GlobalAvgPool | Op::GlobalAvgPoolBackward => sig(1, 1, &[]),
            Op::BatchNorm | Op::LayerNorm => sig(3, 3, EPSILON),
            Op::BatchNormBackward | Op::LayerNormBackward => sig(5, 3, EPSILON),
            Op::RmsNorm => sig(2, 2, EPSILON),
            Op::RmsNormBackward => sig(4, 2, EPSILON),
            Op::Relu
            | Op::Gelu
            | Op::Erf
            | Op::Tanh
            | Op::Sigmoid
            | Op::HardSwish
            | Op::Softmax
            | Op::Reshape
            | Op::SumTo => sig(1, 1, &[]),
            Op::ReluBackward
            | Op::GeluBackward
            | Op::ErfBackward
            | Op::TanhBackward
            | Op::SigmoidBackward
            | Op::HardSwishBackward
            | Op::SoftmaxBackward
            | Op::Add
            | Op::Mul => sig(2, 1, &[]),
            Op::Clip => sig(1, 1, CLIP_ATTRS),
            Op::ClipBackward => sig(2, 1, CLIP_ATTRS),
            Op::HardSigmoid => sig(1, 1, HARD_SIGMOID_ATTRS),
            Op::HardSigmoidBackward => sig(2, 1, HARD_SIGMOID_ATTRS),
            Op::Dropout => sig(1, 2, DROPOUT_ATTRS),
            Op::DropoutBackward => sig(2, 1, RATIO),
            Op::Concat => Signature { inputs: AtLeast(1), updates: 0, outputs: Exactly(1), attrs: AXIS },
            Op::Split => Signature { inputs: Exactly(1), updates: 0, outputs: AtLeast(1), attrs: SPLIT_ATTRS },
            Op::Transpose => sig(1, 1, TRANSPOSE_ATTRS),
            Op::SoftmaxCrossEntropy => sig(2, 2, &[]),
            Op::SoftmaxCrossEntropyBackward | Op::Embedding | Op::EmbeddingBackward => sig(2, 1, &[]),
            Op::Sgd => Signature { inputs: Exactly(1), updates: 1, outputs: Exactly(0), attrs: SGD_ATTRS },
            Op::SgdMomentum => {
                Signature { inputs: Exactly(1), updates: 2, outputs: Exactly(0), attrs: SGD_MOMENTUM_ATTRS }
            }
        }
    }
}
