//! The optimizer updates: plain SGD and SGD with momentum (PyTorch's formulation:
//! weight decay is added to the gradient, the velocity accumulates without dampening,
//! no Nesterov). Both update their state in place and have no outputs. Arguments are
//! in the IR's operand order: the input `grad`, then the updated tensors.

use crate::tensor_ops::PAR_CHUNK;
use rayon::prelude::*;

/// Attributes of `sgd`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sgd {
    pub lr: f32,
    /// 0 when the attribute is absent.
    pub weight_decay: f32,
}

/// Attributes of `sgd_momentum`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SgdMomentum {
    pub lr: f32,
    pub momentum: f32,
    /// 0 when the attribute is absent.
    pub weight_decay: f32,
}

/// `weight -= lr · (grad + weight_decay · weight)`.
pub fn sgd(params: Sgd, grad: &[f32], weight: &mut [f32]) {
    assert_eq!(grad.len(), weight.len(), "grad and weight lengths differ");
    let Sgd { lr, weight_decay: wd } = params;
    let run = |g: &[f32], w: &mut [f32]| {
        for (w, &g) in w.iter_mut().zip(g) {
            *w -= lr * (g + wd * *w);
        }
    };
    if weight.len() <= PAR_CHUNK {
        run(grad, weight);
    } else {
        weight.par_chunks_mut(PAR_CHUNK).zip(grad.par_chunks(PAR_CHUNK)).for_each(|(w, g)| run(g, w));
    }
}

/// `velocity = momentum · velocity + (grad + weight_decay · weight)`, then
/// `weight -= lr · velocity`.
pub fn sgd_momentum(params: SgdMomentum, grad: &[f32], weight: &mut [f32], velocity: &mut [f32]) {
    assert_eq!(grad.len(), weight.len(), "grad and weight lengths differ");
    assert_eq!(grad.len(), velocity.len(), "grad and velocity lengths differ");
    let SgdMomentum { lr, momentum, weight_decay: wd } = params;
    let run = |g: &[f32], w: &mut [f32], v: &mut [f32]| {
        for ((w, v), &g) in w.iter_mut().zip(v.iter_mut()).zip(g) {
            *v = momentum * *v + (g + wd * *w);
            *w -= lr * *v;
        }
    };
    if weight.len() <= PAR_CHUNK {
        run(grad, weight, velocity);
    } else {
        weight
            .par_chunks_mut(PAR_CHUNK)
            .zip(velocity.par_chunks_mut(PAR_CHUNK))
            .zip(grad.par_chunks(PAR_CHUNK))
            .for_each(|((w, v), g)| run(g, w, v));
    }
}
