//! Shape rules: which operand shapes and element types fit each op (the windows'
//! output shapes: `window`).

use super::params::{axis, clip_bounds, dropout_ratio, hard_sigmoid, matmul_dims};
use super::window::{conv_output_shape, pooling_output_shape};
use super::{AttrReader, Op, Operand};
use crate::types::{Attrs, DType, shape_str};

/// Checks that an op's operands fit it. Operand counts and attribute kinds have already
/// been checked against [`Op::signature`]. The error names the first misfit.
pub fn check_shapes(
    op: Op,
    attrs: &Attrs,
    inputs: &[Operand<'_>],
    updates: &[Operand<'_>],
    outputs: &[Operand<'_>],
) -> Result<(), String> {
    let a = AttrReader(attrs);
    match op {
        Op::MatMul => {
            let shape = matmul_dims(a.0, inputs[0].shape, inputs[1].shape)?.output_shape(inputs[0].shape);
            same_dtype(&[inputs[0], inputs[1], outputs[0]])?;
            expect_float(inputs[0])?;
            expect_shape("output", outputs[0], &shape)
        }
        Op::BiasAdd => {
            let axis = axis(a.0, inputs[0].shape)?;
            expect_shape("bias", inputs[1], &[inputs[0].shape[axis]])?;
            expect_float(inputs[0])?;
            same_dtype(&[inputs[0], inputs[1], outputs[0]])?;
            expect_shape("output", outputs[0], inputs[0].shape)
        }
        Op::BiasGrad => {
            let axis = axis(a.0, inputs[0].shape)?;
            same_dtype(&[inputs[0], outputs[0]])?;
            expect_shape("bias gradient", outputs[0], &[inputs[0].shape[axis]])
        }
        Op::Conv2d => {
            let y = conv_output_shape(a.0, inputs[0].shape, inputs[1].shape)?;
            same_dtype(&[inputs[0], inputs[1], outputs[0]])?;
            expect_float(inputs[0])?;
            expect_shape("output", outputs[0], &y)
        }
        Op::Conv2dBackwardData => {
            // dy, w -> dx: dx is whatever input the forward conv maps onto dy.
            let (dy, w, dx) = (inputs[0], inputs[1], outputs[0]);
            same_dtype(&[dy, w, dx])?;
            let y = conv_output_shape(a.0, dx.shape, w.shape)
                .map_err(|e| format!("input gradient {} does not fit: {e}", shape_str(dx.shape)))?;
            expect_shape("output gradient (input 0)", dy, &y)
        }
        Op::Conv2dBackwardFilter => {
            // x, dy -> dw
            let (x, dy, dw) = (inputs[0], inputs[1], outputs[0]);
            same_dtype(&[x, dy, dw])?;
            let y = conv_output_shape(a.0, x.shape, dw.shape)
                .map_err(|e| format!("filter gradient {} does not fit: {e}", shape_str(dw.shape)))?;
            expect_shape("output gradient (input 1)", dy, &y)
        }
        Op::MaxPool2d | Op::AvgPool2d => {
            let y = pooling_output_shape(a.0, inputs[0].shape)?;
            expect_float(inputs[0])?;
            same_dtype(&[inputs[0], outputs[0]])?;
            expect_shape("output", outputs[0], &y)?;
            if op == Op::MaxPool2d {
                expect_index(outputs[1])?;
                expect_shape("indices", outputs[1], &y)?;
            }
            Ok(())
        }
        Op::MaxPool2dBackward | Op::AvgPool2dBackward => {
            let (dy, dx) = (inputs[0], outputs[0]);
            expect_float(dy)?;
            same_dtype(&[dy, dx])?;
            let y = pooling_output_shape(a.0, dx.shape)
                .map_err(|e| format!("input gradient {} does not fit: {e}", shape_str(dx.shape)))?;
            expect_shape("output gradient", dy, &y)?;
            if op == Op::MaxPool2dBackward {
                expect_index(inputs[1])?;
                expect_shape("indices", inputs[1], &y)?;
            }
            Ok(())
        }
        Op::GlobalAvgPool => {
            let x = inputs[0];
            expect_rank("input", x, 4)?;
            same_dtype(&[x, outputs[0]])?;
            expect_shape("output", outputs[0], &x.shape[..2])
        }
        Op::GlobalAvgPoolBackward => {
            let (dy, dx) = (inputs[0], outputs[0]);
            expect_rank("input gradient", dx, 4)?;
            same_dtype(&[dy, dx])?;
            expect_shape("output gradient", dy, &dx.shape[..2])
        }
        Op::BatchNorm | Op::LayerNorm => {
            let x = inputs[0];
            let (param, stat) = norm_shapes(op, x)?;
            expect_float(x)?;
            same_dtype(&[x, inputs[1], inputs[2], outputs[0], outputs[1], outputs[2]])?;
            expect_shape("scale", inputs[1], &param)?;
            expect_shape("shift", inputs[2], &param)?;
            expect_shape("output", outputs[0], x.shape)?;
            expect_shape("saved mean", outputs[1], &stat)?;
            expect_shape("saved inverse std", outputs[2], &stat)
        }
        Op::BatchNormBackward | Op::LayerNormBackward => {
            // dy, x, scale, saved mean, saved inverse std -> dx, dscale, dshift
            let x = inputs[1];
            let (param, stat) = norm_shapes(op, x)?;
            same_dtype(&[inputs[0], x, inputs[2], inputs[3], inputs[4]])?;
            same_dtype(&[x, outputs[0], outputs[1], outputs[2]])?;
            expect_shape("output gradient", inputs[0], x.shape)?;
            expect_shape("scale", inputs[2], &param)?;
            expect_shape("saved mean", inputs[3], &stat)?;
            expect_shape("saved inverse std", inputs[4], &stat)?;
            expect_shape("input gradient", outputs[0], x.shape)?;
            expect_shape("scale gradient", outputs[1], &param)?;
            expect_shape("shift gradient", outputs[2], &param)
        }
        Op::RmsNorm => {
            // x, scale -> y, saved inverse RMS
            let x = inputs[0];
            let (param, stat) = norm_shapes(op, x)?;
            expect_float(x)?;
            same_dtype(&[x, inputs[1], outputs[0], outputs[1]])?;
            expect_shape("scale", inputs[1], &param)?;
            expect_shape("output", outputs[0], x.shape)?;
            expect_shape("saved inverse RMS", outputs[1], &stat)
        }
        Op::RmsNormBackward => {
            // dy, x, scale, saved inverse RMS -> dx, dscale
            let x = inputs[1];
            let (param, stat) = norm_shapes(op, x)?;
            same_dtype(&[inputs[0], x, inputs[2], inputs[3]])?;
            same_dtype(&[x, outputs[0], outputs[1]])?;
            expect_shape("output gradient", inputs[0], x.shape)?;
            expect_shape("scale", inputs[2], &param)?;
            expect_shape("saved inverse RMS", inputs[3], &stat)?;
            expect_shape("input gradient", outputs[0], x.shape)?;
            expect_shape("scale gradient", outputs[1], &param)
        }
        Op::Relu | Op::Gelu | Op::Erf | Op::Tanh | Op::Sigmoid | Op::HardSwish => {
            expect_float(inputs[0])?;
            same_dtype(&[inputs[0], outputs[0]])?;
            expect_shape("output", outputs[0], inputs[0].shape)
        }
        Op::Clip | Op::HardSigmoid => {
            if op == Op::Clip {
                clip_bounds(a.0)?;
            } else {
                hard_sigmoid(a.0)?;
            }
            expect_float(inputs[0])?;
            same_dtype(&[inputs[0], outputs[0]])?;
            expect_shape("output", outputs[0], inputs[0].shape)
        }
        Op::Dropout => {
            dropout_ratio(a.0)?;
            let x = inputs[0];
            expect_float(x)?;
            same_dtype(&[x, outputs[0]])?;
            expect_shape("output", outputs[0], x.shape)?;
            expect_mask(outputs[1], x)
        }
        Op::DropoutBackward => {
            dropout_ratio(a.0)?;
            let (dy, mask, dx) = (inputs[0], inputs[1], outputs[0]);
            expect_float(dy)?;
            same_dtype(&[dy, dx])?;
            expect_mask(mask, dy)?;
            expect_shape("output", dx, dy.shape)
        }
        Op::Add | Op::Mul => {
            let (lhs, rhs) = (inputs[0], inputs[1]);
            expect_float(lhs)?;
            same_dtype(&[lhs, rhs, outputs[0]])?;
            broadcasts(rhs.shape, lhs.shape)
                .map_err(|e| format!("second input {} does not broadcast to the first: {e}", shape_str(rhs.shape)))?;
            expect_shape("output", outputs[0], lhs.shape)
        }
        Op::SumTo => {
            let (dy, y) = (inputs[0], outputs[0]);
            expect_float(dy)?;
            same_dtype(&[dy, y])?;
            broadcasts(y.shape, dy.shape)
                .map_err(|e| format!("output {} does not broadcast to the input: {e}", shape_str(y.shape)))
        }
        Op::Softmax => {
            expect_float(inputs[0])?;
            expect_rank_at_least("input", inputs[0], 1)?;
            same_dtype(&[inputs[0], outputs[0]])?;
            expect_shape("output", outputs[0], inputs[0].shape)
        }
        Op::ReluBackward
        | Op::GeluBackward
        | Op::ErfBackward
        | Op::TanhBackward
        | Op::SigmoidBackward
        | Op::ClipBackward
        | Op::HardSigmoidBackward
        | Op::HardSwishBackward
        | Op::SoftmaxBackward => {
            if op == Op::ClipBackward {
                clip_bounds(a.0)?;
            }
            if op == Op::HardSigmoidBackward {
                hard_sigmoid(a.0)?;
            }
            expect_float(inputs[0])?;
            same_dtype(&[inputs[0], inputs[1], outputs[0]])?;
            expect_shape("second input", inputs[1], inputs[0].shape)?;
            expect_shape("output", outputs[0], inputs[0].shape)
        }
        Op::Concat => concat_check(a, inputs, outputs[0]),
        Op::Split => split_check(a, inputs[0], outputs),
        Op::Reshape => {
            same_dtype(&[inputs[0], outputs[0]])?;
            if inputs[0].numel() != outputs[0].numel() {
                return Err(format!(
                    "cannot reshape {} ({} elements) into {} ({} elements)",
                    shape_str(inputs[0].shape),
                    inputs[0].numel(),
                    shape_str(outputs[0].shape),
                    outputs[0].numel()
                ));
            }
            Ok(())
        }
        Op::Transpose => {
            let x = inputs[0];
            let perm = a.ints("perm").unwrap_or(&[]);
            let mut seen = vec![false; x.shape.len()];
            let ok = perm.len() == x.shape.len()
                && perm.iter().all(|&p| {
                    usize::try_from(p).ok().and_then(|p| seen.get_mut(p)).is_some_and(|s| !std::mem::replace(s, true))
                });
            if !ok {
                return Err(format!("perm {perm:?} is not a permutation of the {} axes of the input", x.shape.len()));
            }
            let shape: Vec<u64> = perm.iter().map(|&p| x.shape[p as usize]).collect();
            same_dtype(&[x, outputs[0]])?;
            expect_shape("output", outputs[0], &shape)
        }
        Op::SoftmaxCrossEntropy => {
            let (logits, labels) = (inputs[0], inputs[1]);
            expect_rank("logits", logits, 2)?;
            expect_float(logits)?;
            expect_index(labels)?;
            expect_shape("labels", labels, &logits.shape[..1])?;
            same_dtype(&[logits, outputs[0], outputs[1]])?;
            expect_shape("loss", outputs[0], &[])?;
            expect_shape("probabilities", outputs[1], logits.shape)
        }
        Op::SoftmaxCrossEntropyBackward => {
            let (probs, labels) = (inputs[0], inputs[1]);
            expect_rank("probabilities", probs, 2)?;
            expect_index(labels)?;
            expect_shape("labels", labels, &probs.shape[..1])?;
            same_dtype(&[probs, outputs[0]])?;
            expect_shape("logits gradient", outputs[0], probs.shape)
        }
        Op::Embedding => {
            let (ids, table) = (inputs[0], inputs[1]);
            expect_index(ids)?;
            expect_rank("table", table, 2)?;
            same_dtype(&[table, outputs[0]])?;
            let mut shape = ids.shape.to_vec();
            shape.push(table.shape[1]);
            expect_shape("output", outputs[0], &shape)
        }
        Op::EmbeddingBackward => {
            let (dy, ids, dtable) = (inputs[0], inputs[1], outputs[0]);
            expect_index(ids)?;
            expect_rank("table gradient", dtable, 2)?;
            same_dtype(&[dy, dtable])?;
            let mut shape = ids.shape.to_vec();
            shape.push(dtable.shape[1]);
            expect_shape("output gradient", dy, &shape)
        }
        Op::Sgd | Op::SgdMomentum => {
            let grad = inputs[0];
            expect_float(grad)?;
            for (i, state) in updates.iter().enumerate() {
                let what = if i == 0 { "weight" } else { "velocity" };
                same_dtype(&[grad, *state])?;
                expect_shape(what, *state, grad.shape)?;
            }
            Ok(())
        }
    }
}

/// Whether `from` broadcasts to `to` under numpy's rules restricted to one side: aligned
/// from the right, `from` has at most `to`'s rank and each of its dimensions equals
/// `to`'s or is 1. Identical shapes broadcast trivially.
pub fn broadcasts(from: &[u64], to: &[u64]) -> Result<(), String> {
    if from.len() > to.len() {
        return Err(format!("it has {} dimensions and {} has {}", from.len(), shape_str(to), to.len()));
    }
    let offset = to.len() - from.len();
    for (i, &d) in from.iter().enumerate() {
        let target = to[offset + i];
        if d != target && d != 1 {
            return Err(format!(
                "dimension {i} is {d}, but must be 1 or {target} (dimension {} of {}, aligned from the right)",
                offset + i,
                shape_str(to)
            ));
        }
    }
    Ok(())
}

/// Parameter and saved-statistics shapes of a normalisation over `x`.
fn norm_shapes(op: Op, x: Operand<'_>) -> Result<(Vec<u64>, Vec<u64>), String> {
    if matches!(op, Op::BatchNorm | Op::BatchNormBackward) {
        expect_rank_at_least("input", x, 2)?;
        Ok((vec![x.shape[1]], vec![x.shape[1]]))
    } else {
        expect_rank_at_least("input", x, 1)?;
        let (last, rows) = x.shape.split_last().unwrap_or((&1, &[]));
        Ok((vec![*last], rows.to_vec()))
    }
}

fn concat_check(a: AttrReader<'_>, inputs: &[Operand<'_>], out: Operand<'_>) -> Result<(), String> {
    let first = inputs[0];
    let axis = axis(a.0, first.shape)?;
    let mut total = 0u64;
    for (i, x) in inputs.iter().enumerate() {
        same_dtype(&[first, *x])?;
        let fits = x.shape.len() == first.shape.len()
            && x.shape.iter().zip(first.shape).enumerate().all(|(d, (p, q))| d == axis || p == q);
        if !fits {
            return Err(format!(
                "input {i} {} does not match input 0 {} outside axis {axis}",
                shape_str(x.shape),
                shape_str(first.shape)
            ));
        }
        total = total
            .checked_add(x.shape[axis])
            .ok_or_else(|| format!("inputs add up to more than 2^64 elements along axis {axis}"))?;
    }
    let mut shape = first.shape.to_vec();
    shape[axis] = total;
    same_dtype(&[first, out])?;
    expect_shape("output", out, &shape)
}

fn split_check(a: AttrReader<'_>, x: Operand<'_>, outputs: &[Operand<'_>]) -> Result<(), String> {
    let axis = axis(a.0, x.shape)?;
    let sizes = a.ints("sizes").unwrap_or(&[]);
    if sizes.len() != outputs.len() {
        return Err(format!("{} sizes given for {} outputs", sizes.len(), outputs.len()));
    }
    // Checked: the sizes come from the file and may add up past 2^64.
    let total = sizes
        .iter()
        .try_fold(0u64, |acc, &s| u64::try_from(s).ok().filter(|&s| s > 0).and_then(|s| acc.checked_add(s)));
    if total != Some(x.shape[axis]) {
        return Err(format!(
            "sizes {sizes:?} must be positive and add up to {} (axis {axis} of {})",
            x.shape[axis],
            shape_str(x.shape)
        ));
    }
    for (out, &size) in outputs.iter().zip(sizes) {
        let mut shape = x.shape.to_vec();
        shape[axis] = size as u64;
        same_dtype(&[x, *out])?;
        expect_shape("output", *out, &shape)?;
    }
    Ok(())
}

fn expect_shape(what: &str, operand: Operand<'_>, shape: &[u64]) -> Result<(), String> {
    if operand.shape == shape {
        Ok(())
    } else {
        Err(format!("{what} has shape {} but the op needs {}", shape_str(operand.shape), shape_str(shape)))
    }
}

fn expect_rank(what: &str, operand: Operand<'_>, rank: usize) -> Result<(), String> {
    if operand.shape.len() == rank {
        Ok(())
    } else {
        Err(format!("{what} must have {rank} dimensions, got {}", shape_str(operand.shape)))
    }
}

fn expect_rank_at_least(what: &str, operand: Operand<'_>, rank: usize) -> Result<(), String> {
    if operand.shape.len() >= rank {
        Ok(())
    } else {
        Err(format!("{what} must have at least {rank} dimension(s), got {}", shape_str(operand.shape)))
    }
}

/// A dropout mask: one byte an element (onnxruntime's), or the data's own dtype (eager
/// torch keeps its noise as the data's floats), shaped like the data.
fn expect_mask(mask: Operand<'_>, data: Operand<'_>) -> Result<(), String> {
    if mask.dtype != DType::U8 && mask.dtype != data.dtype {
        return Err(format!("mask must be u8 or {} (the data's), got {}", data.dtype, mask.dtype));
    }
    expect_shape("mask", mask, data.shape)
}

fn expect_float(operand: Operand<'_>) -> Result<(), String> {
    if operand.dtype.is_float() {
        Ok(())
    } else {
        Err(format!("expected a floating-point tensor, got {}", operand.dtype))
    }
}

fn expect_index(operand: Operand<'_>) -> Result<(), String> {
    if operand.dtype.is_index() {
        Ok(())
    } else {
        Err(format!("expected an i32 or i64 index tensor, got {}", operand.dtype))
    }
}

fn same_dtype(operands: &[Operand<'_>]) -> Result<(), String> {
    match operands.iter().find(|o| o.dtype != operands[0].dtype) {
        None => Ok(()),
        Some(other) => Err(format!("element types differ: {} and {}", operands[0].dtype, other.dtype)),
    }
}

#[cfg(test)]
mod tests;
