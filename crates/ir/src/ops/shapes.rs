//! Shape rules: which operand shapes and element types fit each op, and the output
//! shapes of convolution and pooling windows.

use super::{AttrReader, Op, Operand};
use crate::types::{Attrs, DType, shape_str};

/// 2-D window geometry shared by convolution and pooling.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub kernel: [u64; 2],
    pub stride: [u64; 2],
    pub padding: [u64; 2],
    pub dilation: [u64; 2],
}

impl Window {
    fn conv(attrs: AttrReader<'_>, kernel: [u64; 2]) -> Result<Window, String> {
        Window {
            kernel,
            stride: attrs.pair("stride", [1, 1])?,
            padding: attrs.pair("padding", [0, 0])?,
            dilation: attrs.pair("dilation", [1, 1])?,
        }
        .checked()
    }

    fn pooling(attrs: AttrReader<'_>) -> Result<Window, String> {
        let kernel = attrs.pair("kernel", [1, 1])?;
        let w = Window {
            kernel,
            stride: attrs.pair("stride", kernel)?,
            padding: attrs.pair("padding", [0, 0])?,
            dilation: [1, 1],
        }
        .checked()?;
        if w.padding[0] * 2 > w.kernel[0] || w.padding[1] * 2 > w.kernel[1] {
            return Err(format!("padding {:?} is more than half the pooling window {:?}", w.padding, w.kernel));
        }
        Ok(w)
    }

    fn checked(self) -> Result<Window, String> {
        if self.kernel.contains(&0) || self.stride.contains(&0) || self.dilation.contains(&0) {
            return Err(format!(
                "kernel {:?}, stride {:?} and dilation {:?} must all be positive",
                self.kernel, self.stride, self.dilation
            ));
        }
        Ok(self)
    }

    /// Output height and width for an input of `hw`, or why the window does not fit.
    pub fn output_hw(&self, hw: [u64; 2]) -> Result<[u64; 2], String> {
        let mut out = [0; 2];
        for i in 0..2 {
            // Attributes come from the file, so the arithmetic must not overflow.
            let span =
                (self.kernel[i] - 1).checked_mul(self.dilation[i]).and_then(|s| s.checked_add(1)).ok_or_else(|| {
                    format!(
                        "kernel {} with dilation {} spans more than 2^64 elements",
                        self.kernel[i], self.dilation[i]
                    )
                })?;
            let padded = self.padding[i]
                .checked_mul(2)
                .and_then(|p| p.checked_add(hw[i]))
                .ok_or_else(|| format!("padding {} is too large", self.padding[i]))?;
            if span > padded {
                return Err(format!(
                    "window of {span} does not fit an input of {} with padding {}",
                    hw[i], self.padding[i]
                ));
            }
            out[i] = (padded - span) / self.stride[i] + 1;
        }
        Ok(out)
    }
}

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
            let shape = matmul_shape(a, inputs[0].shape, inputs[1].shape)?;
            same_dtype(&[inputs[0], inputs[1], outputs[0]])?;
            expect_float(inputs[0])?;
            expect_shape("output", outputs[0], &shape)
        }
        Op::BiasAdd => {
            let axis = axis_of(a, inputs[0].shape)?;
            expect_shape("bias", inputs[1], &[inputs[0].shape[axis]])?;
            expect_float(inputs[0])?;
            same_dtype(&[inputs[0], inputs[1], outputs[0]])?;
            expect_shape("output", outputs[0], inputs[0].shape)
        }
        Op::BiasGrad => {
            let axis = axis_of(a, inputs[0].shape)?;
            same_dtype(&[inputs[0], outputs[0]])?;
            expect_shape("bias gradient", outputs[0], &[inputs[0].shape[axis]])
        }
        Op::Conv2d => {
            let y = conv_shape(a, inputs[0].shape, inputs[1].shape)?;
            same_dtype(&[inputs[0], inputs[1], outputs[0]])?;
            expect_float(inputs[0])?;
            expect_shape("output", outputs[0], &y)
        }
        Op::Conv2dBackwardData => {
            // dy, w -> dx: dx is whatever input the forward conv maps onto dy.
            let (dy, w, dx) = (inputs[0], inputs[1], outputs[0]);
            same_dtype(&[dy, w, dx])?;
            let y = conv_shape(a, dx.shape, w.shape)
                .map_err(|e| format!("input gradient {} does not fit: {e}", shape_str(dx.shape)))?;
            expect_shape("output gradient (input 0)", dy, &y)
        }
        Op::Conv2dBackwardFilter => {
            // x, dy -> dw
            let (x, dy, dw) = (inputs[0], inputs[1], outputs[0]);
            same_dtype(&[x, dy, dw])?;
            let y = conv_shape(a, x.shape, dw.shape)
                .map_err(|e| format!("filter gradient {} does not fit: {e}", shape_str(dw.shape)))?;
            expect_shape("output gradient (input 1)", dy, &y)
        }
        Op::MaxPool2d | Op::AvgPool2d => {
            let y = pooling_shape(a, inputs[0].shape)?;
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
            let y = pooling_shape(a, dx.shape)
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
        Op::Relu | Op::Gelu | Op::Tanh | Op::Sigmoid | Op::HardSwish => {
            expect_float(inputs[0])?;
            same_dtype(&[inputs[0], outputs[0]])?;
            expect_shape("output", outputs[0], inputs[0].shape)
        }
        Op::Clip | Op::HardSigmoid => {
            if op == Op::Clip {
                clip_bounds(a)?;
            } else {
                hard_sigmoid_params(a)?;
            }
            expect_float(inputs[0])?;
            same_dtype(&[inputs[0], outputs[0]])?;
            expect_shape("output", outputs[0], inputs[0].shape)
        }
        Op::Dropout => {
            dropout_ratio(a)?;
            let x = inputs[0];
            expect_float(x)?;
            same_dtype(&[x, outputs[0]])?;
            expect_shape("output", outputs[0], x.shape)?;
            expect_dtype("mask", outputs[1], DType::U8)?;
            expect_shape("mask", outputs[1], x.shape)
        }
        Op::DropoutBackward => {
            dropout_ratio(a)?;
            let (dy, mask, dx) = (inputs[0], inputs[1], outputs[0]);
            expect_float(dy)?;
            same_dtype(&[dy, dx])?;
            expect_dtype("mask", mask, DType::U8)?;
            expect_shape("mask", mask, dy.shape)?;
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
        | Op::TanhBackward
        | Op::SigmoidBackward
        | Op::ClipBackward
        | Op::HardSigmoidBackward
        | Op::HardSwishBackward
        | Op::SoftmaxBackward => {
            if op == Op::ClipBackward {
                clip_bounds(a)?;
            }
            if op == Op::HardSigmoidBackward {
                hard_sigmoid_params(a)?;
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

fn matmul_shape(a: AttrReader<'_>, lhs: &[u64], rhs: &[u64]) -> Result<Vec<u64>, String> {
    let rank = lhs.len();
    if rank < 2 || rhs.len() != rank {
        return Err(format!(
            "matmul needs two operands of the same rank (at least 2), got {} and {}",
            shape_str(lhs),
            shape_str(rhs)
        ));
    }
    if lhs[..rank - 2] != rhs[..rank - 2] {
        return Err(format!("batch dimensions differ: {} and {}", shape_str(lhs), shape_str(rhs)));
    }
    let (m, k) =
        if a.bool("transpose_a", false) { (lhs[rank - 1], lhs[rank - 2]) } else { (lhs[rank - 2], lhs[rank - 1]) };
    let (k2, n) =
        if a.bool("transpose_b", false) { (rhs[rank - 1], rhs[rank - 2]) } else { (rhs[rank - 2], rhs[rank - 1]) };
    if k != k2 {
        return Err(format!("inner dimensions differ ({k} and {k2}) for {} x {}", shape_str(lhs), shape_str(rhs)));
    }
    let mut out = lhs[..rank - 2].to_vec();
    out.extend([m, n]);
    Ok(out)
}

/// The output shape of a forward convolution of `x` with filter `w`.
pub fn conv_output_shape(attrs: &Attrs, x: &[u64], w: &[u64]) -> Result<Vec<u64>, String> {
    conv_shape(AttrReader(attrs), x, w)
}

fn conv_shape(a: AttrReader<'_>, x: &[u64], w: &[u64]) -> Result<Vec<u64>, String> {
    if x.len() != 4 || w.len() != 4 {
        return Err(format!(
            "convolution needs a 4-D input [N, C, H, W] and a 4-D filter [K, C/groups, R, S], got {} and {}",
            shape_str(x),
            shape_str(w)
        ));
    }
    let groups = a.int("groups", 1);
    if groups < 1 {
        return Err(format!("groups must be at least 1, got {groups}"));
    }
    let g = groups as u64;
    if !x[1].is_multiple_of(g) || !w[0].is_multiple_of(g) || x[1] / g != w[1] {
        return Err(format!(
            "input {} and filter {} do not agree on channels with {g} group(s)",
            shape_str(x),
            shape_str(w)
        ));
    }
    let window = Window::conv(a, [w[2], w[3]])?;
    let [p, q] = window.output_hw([x[2], x[3]])?;
    Ok(vec![x[0], w[0], p, q])
}

/// The output shape of a pooling op over `x`.
pub fn pooling_output_shape(attrs: &Attrs, x: &[u64]) -> Result<Vec<u64>, String> {
    pooling_shape(AttrReader(attrs), x)
}

fn pooling_shape(a: AttrReader<'_>, x: &[u64]) -> Result<Vec<u64>, String> {
    if x.len() != 4 {
        return Err(format!("pooling needs a 4-D input [N, C, H, W], got {}", shape_str(x)));
    }
    let [p, q] = Window::pooling(a)?.output_hw([x[2], x[3]])?;
    Ok(vec![x[0], x[1], p, q])
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

/// `clip`'s `min` and `max`, checked: `min ≤ max`.
fn clip_bounds(a: AttrReader<'_>) -> Result<(f64, f64), String> {
    let (min, max) = (a.float("min", f64::NEG_INFINITY), a.float("max", f64::INFINITY));
    // A NaN bound (possible from a builder, not from JSON) is refused too.
    if min > max || min.is_nan() || max.is_nan() {
        return Err(format!("min {min} is greater than max {max}"));
    }
    Ok((min, max))
}

/// `hard_sigmoid`'s `alpha` and `beta`, checked: both finite (a file cannot hold an
/// infinity or a NaN, but a builder can).
fn hard_sigmoid_params(a: AttrReader<'_>) -> Result<(f64, f64), String> {
    let (alpha, beta) = (a.float("alpha", f64::NAN), a.float("beta", f64::NAN));
    if !alpha.is_finite() || !beta.is_finite() {
        return Err(format!("alpha {alpha} and beta {beta} must both be finite"));
    }
    Ok((alpha, beta))
}

/// `dropout`'s `ratio`, checked: in `[0, 1)`.
fn dropout_ratio(a: AttrReader<'_>) -> Result<f64, String> {
    let ratio = a.float("ratio", 0.0);
    if !(0.0..1.0).contains(&ratio) {
        return Err(format!("ratio {ratio} must be in [0, 1)"));
    }
    Ok(ratio)
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

fn axis_of(a: AttrReader<'_>, shape: &[u64]) -> Result<usize, String> {
    let axis = a.int("axis", 0);
    let rank = shape.len() as i64;
    let normalised = if axis < 0 { axis + rank } else { axis };
    if (0..rank).contains(&normalised) {
        Ok(normalised as usize)
    } else {
        Err(format!("axis {axis} is out of range for {}", shape_str(shape)))
    }
}

fn concat_check(a: AttrReader<'_>, inputs: &[Operand<'_>], out: Operand<'_>) -> Result<(), String> {
    let first = inputs[0];
    let axis = axis_of(a, first.shape)?;
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
    let axis = axis_of(a, x.shape)?;
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

fn expect_dtype(what: &str, operand: Operand<'_>, dtype: DType) -> Result<(), String> {
    if operand.dtype == dtype { Ok(()) } else { Err(format!("{what} must be {dtype}, got {}", operand.dtype)) }
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
mod tests {
    use super::*;
    use crate::ops::{Arity, AttrKind, Cost, cost};
    use crate::types::AttrValue;

    fn op(shape: &[u64]) -> Operand<'_> {
        Operand { shape, dtype: DType::F32 }
    }

    fn attrs(pairs: &[(&str, AttrValue)]) -> Attrs {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    #[test]
    fn conv_shapes_follow_stride_padding_and_groups() {
        let a = attrs(&[("stride", AttrValue::Ints(vec![2, 2])), ("padding", AttrValue::Ints(vec![3, 3]))]);
        assert_eq!(conv_output_shape(&a, &[8, 3, 224, 224], &[64, 3, 7, 7]), Ok(vec![8, 64, 112, 112]));
        let grouped = attrs(&[("groups", AttrValue::Int(4))]);
        assert_eq!(conv_output_shape(&grouped, &[1, 8, 5, 5], &[12, 2, 3, 3]), Ok(vec![1, 12, 3, 3]));
        assert!(conv_output_shape(&grouped, &[1, 8, 5, 5], &[12, 8, 3, 3]).is_err());
        assert!(conv_output_shape(&Attrs::new(), &[1, 3, 2, 2], &[4, 3, 3, 3]).is_err());
    }

    #[test]
    fn conv_backward_checks_against_the_forward_shape() {
        let a = attrs(&[("stride", AttrValue::Ints(vec![2, 2]))]);
        let (dy, w, dx) = ([2, 4, 3, 3], [4, 3, 3, 3], [2, 3, 7, 7]);
        assert!(check_shapes(Op::Conv2dBackwardData, &a, &[op(&dy), op(&w)], &[], &[op(&dx)]).is_ok());
        let wrong = [2, 3, 9, 9];
        let err =
            check_shapes(Op::Conv2dBackwardData, &a, &[op(&dy), op(&w)], &[], &[op(&wrong)]).expect_err("mismatch");
        assert!(err.contains("needs [2, 4, 4, 4]"), "{err}");
    }

    #[test]
    fn matmul_respects_transposes_and_batch_dims() {
        let tb = attrs(&[("transpose_b", AttrValue::Bool(true))]);
        let (x, w, y) = ([2, 5, 8], [2, 7, 8], [2, 5, 7]);
        assert!(check_shapes(Op::MatMul, &tb, &[op(&x), op(&w)], &[], &[op(&y)]).is_ok());
        let err =
            check_shapes(Op::MatMul, &Attrs::new(), &[op(&x), op(&w)], &[], &[op(&y)]).expect_err("inner mismatch");
        assert!(err.contains("inner dimensions"), "{err}");
        let cost = cost(Op::MatMul, &tb, &[op(&x), op(&w)], &[op(&y)]);
        assert_eq!(cost.macs, 2 * 5 * 7 * 8);
    }

    #[test]
    fn transpose_rejects_non_permutations() {
        let x = [2, 3, 4];
        for perm in [vec![0, 0, 1], vec![0, 1], vec![0, 1, 3], vec![-1, 0, 1]] {
            let a = attrs(&[("perm", AttrValue::Ints(perm))]);
            assert!(check_shapes(Op::Transpose, &a, &[op(&x)], &[], &[op(&x)]).is_err());
        }
        let a = attrs(&[("perm", AttrValue::Ints(vec![2, 0, 1]))]);
        assert!(check_shapes(Op::Transpose, &a, &[op(&x)], &[], &[op(&[4, 2, 3])]).is_ok());
    }

    fn shape_err(op: Op, attrs: &Attrs, inputs: &[Operand<'_>], outputs: &[Operand<'_>]) -> String {
        check_shapes(op, attrs, inputs, &[], outputs).expect_err("refused")
    }

    #[test]
    fn add_and_mul_broadcast_their_second_operand_from_the_right() {
        let a = [2, 3, 4];
        for b in [&[2, 3, 4][..], &[4], &[3, 4], &[1, 4], &[3, 1], &[1, 1, 1], &[2, 1, 4], &[1], &[]] {
            for o in [Op::Add, Op::Mul] {
                let ok = check_shapes(o, &Attrs::new(), &[op(&a), op(b)], &[], &[op(&a)]);
                assert_eq!(ok, Ok(()), "{o} of {b:?}");
                // The operands' costs count the output's elements, however small b is.
                assert_eq!(cost(o, &Attrs::new(), &[op(&a), op(b)], &[op(&a)]).flops, 24);
            }
        }
    }

    #[test]
    fn add_and_mul_refuse_what_does_not_broadcast() {
        let a = [2, 3, 4];
        let err = shape_err(Op::Add, &Attrs::new(), &[op(&a), op(&[3, 5])], &[op(&a)]);
        assert_eq!(
            err,
            "second input [3, 5] does not broadcast to the first: dimension 1 is 5, but must be 1 or 4 \
             (dimension 2 of [2, 3, 4], aligned from the right)"
        );
        let err = shape_err(Op::Mul, &Attrs::new(), &[op(&a), op(&[1, 2, 3, 4])], &[op(&a)]);
        assert_eq!(
            err,
            "second input [1, 2, 3, 4] does not broadcast to the first: it has 4 dimensions and [2, 3, 4] has 3"
        );
        // Broadcasting is one way: the first operand never stretches to the second.
        let err = shape_err(Op::Add, &Attrs::new(), &[op(&[4]), op(&a)], &[op(&a)]);
        assert!(err.starts_with("second input [2, 3, 4] does not broadcast to the first"), "{err}");
        let err = shape_err(Op::Add, &Attrs::new(), &[op(&[1, 4]), op(&[3, 4])], &[op(&[3, 4])]);
        assert!(err.contains("dimension 0 is 3, but must be 1 or 1"), "{err}");
        // The output has the first operand's shape.
        let err = shape_err(Op::Mul, &Attrs::new(), &[op(&a), op(&[4])], &[op(&[4])]);
        assert_eq!(err, "output has shape [4] but the op needs [2, 3, 4]");
        // Dtypes still agree.
        let i = Operand { shape: &[4], dtype: DType::I32 };
        let err = shape_err(Op::Add, &Attrs::new(), &[op(&a), i], &[op(&a)]);
        assert_eq!(err, "element types differ: f32 and i32");
    }

    #[test]
    fn sum_to_reduces_to_a_shape_that_broadcasts_back() {
        let dy = [2, 3, 4];
        for y in [&[4][..], &[3, 1], &[1, 3, 4], &[2, 3, 4], &[]] {
            assert_eq!(check_shapes(Op::SumTo, &Attrs::new(), &[op(&dy)], &[], &[op(y)]), Ok(()), "{y:?}");
        }
        assert_eq!(cost(Op::SumTo, &Attrs::new(), &[op(&dy)], &[op(&[4])]).flops, 24);
        let err = shape_err(Op::SumTo, &Attrs::new(), &[op(&dy)], &[op(&[2, 4])]);
        assert_eq!(
            err,
            "output [2, 4] does not broadcast to the input: dimension 0 is 2, but must be 1 or 3 \
             (dimension 1 of [2, 3, 4], aligned from the right)"
        );
        let err = shape_err(Op::SumTo, &Attrs::new(), &[op(&[4])], &[op(&[2, 4])]);
        assert_eq!(err, "output [2, 4] does not broadcast to the input: it has 2 dimensions and [4] has 1");
    }

    #[test]
    fn clip_needs_ordered_bounds_and_dropout_a_ratio_below_one_and_a_byte_mask() {
        let x = [3, 5];
        let bounds = |min: f64, max: f64| attrs(&[("min", AttrValue::Float(min)), ("max", AttrValue::Float(max))]);
        assert!(check_shapes(Op::Clip, &bounds(0.0, 6.0), &[op(&x)], &[], &[op(&x)]).is_ok());
        assert!(check_shapes(Op::Clip, &bounds(1.0, 1.0), &[op(&x)], &[], &[op(&x)]).is_ok());
        assert_eq!(shape_err(Op::Clip, &bounds(6.0, 0.0), &[op(&x)], &[op(&x)]), "min 6 is greater than max 0");
        let err = shape_err(Op::ClipBackward, &bounds(6.0, 0.0), &[op(&x), op(&x)], &[op(&x)]);
        assert_eq!(err, "min 6 is greater than max 0");

        let mask = Operand { shape: &x, dtype: DType::U8 };
        let ratio = |r: f64| attrs(&[("ratio", AttrValue::Float(r)), ("seed", AttrValue::Int(7))]);
        assert!(check_shapes(Op::Dropout, &ratio(0.0), &[op(&x)], &[], &[op(&x), mask]).is_ok());
        assert!(check_shapes(Op::DropoutBackward, &ratio(0.5), &[op(&x), mask], &[], &[op(&x)]).is_ok());
        assert_eq!(shape_err(Op::Dropout, &ratio(1.0), &[op(&x)], &[op(&x), mask]), "ratio 1 must be in [0, 1)");
        assert_eq!(
            shape_err(Op::DropoutBackward, &ratio(-0.1), &[op(&x), mask], &[op(&x)]),
            "ratio -0.1 must be in [0, 1)"
        );
        assert_eq!(shape_err(Op::Dropout, &ratio(0.1), &[op(&x)], &[op(&x), op(&x)]), "mask must be u8, got f32");
        let small = Operand { shape: &[3], dtype: DType::U8 };
        assert_eq!(
            shape_err(Op::DropoutBackward, &ratio(0.1), &[op(&x), small], &[op(&x)]),
            "mask has shape [3] but the op needs [3, 5]"
        );
    }

    #[test]
    fn hard_sigmoid_needs_finite_parameters_and_hard_swish_none() {
        let x = [3, 5];
        let params =
            |alpha: f64, beta: f64| attrs(&[("alpha", AttrValue::Float(alpha)), ("beta", AttrValue::Float(beta))]);
        let torch = params(1.0 / 6.0, 0.5);
        assert!(check_shapes(Op::HardSigmoid, &torch, &[op(&x)], &[], &[op(&x)]).is_ok());
        assert!(check_shapes(Op::HardSigmoidBackward, &torch, &[op(&x), op(&x)], &[], &[op(&x)]).is_ok());
        // Any finite slope, zero and negative ones included.
        assert!(check_shapes(Op::HardSigmoid, &params(0.0, 2.0), &[op(&x)], &[], &[op(&x)]).is_ok());
        assert!(check_shapes(Op::HardSigmoid, &params(-0.2, 0.5), &[op(&x)], &[], &[op(&x)]).is_ok());
        assert_eq!(
            shape_err(Op::HardSigmoid, &params(f64::INFINITY, 0.5), &[op(&x)], &[op(&x)]),
            "alpha inf and beta 0.5 must both be finite"
        );
        assert_eq!(
            shape_err(Op::HardSigmoidBackward, &params(0.2, f64::NAN), &[op(&x), op(&x)], &[op(&x)]),
            "alpha 0.2 and beta NaN must both be finite"
        );
        assert_eq!(
            shape_err(Op::HardSigmoid, &torch, &[op(&x)], &[op(&[5, 3])]),
            "output has shape [5, 3] but the op needs [3, 5]"
        );
        assert!(check_shapes(Op::HardSwish, &Attrs::new(), &[op(&x)], &[], &[op(&x)]).is_ok());
        assert!(check_shapes(Op::HardSwishBackward, &Attrs::new(), &[op(&x), op(&x)], &[], &[op(&x)]).is_ok());
        assert_eq!(
            shape_err(Op::HardSwishBackward, &Attrs::new(), &[op(&x), op(&[15])], &[op(&x)]),
            "second input has shape [15] but the op needs [3, 5]"
        );
        let i = Operand { shape: &x, dtype: DType::I32 };
        assert_eq!(shape_err(Op::HardSwish, &Attrs::new(), &[i], &[i]), "expected a floating-point tensor, got i32");
        // Nominal costs: 3 per element for hard sigmoid, 4 for hard swish, backward alike.
        for (o, a, k) in [
            (Op::HardSigmoid, &torch, 3),
            (Op::HardSigmoidBackward, &torch, 3),
            (Op::HardSwish, &Attrs::new(), 4),
            (Op::HardSwishBackward, &Attrs::new(), 4),
        ] {
            let inputs: &[Operand<'_>] =
                if o.signature().inputs == Arity::Exactly(1) { &[op(&x)] } else { &[op(&x), op(&x)] };
            assert_eq!(cost(o, a, inputs, &[op(&x)]), Cost { macs: 0, flops: 15 * k }, "{o}");
        }
        assert!(Op::HardSigmoid.signature().attrs.iter().all(|s| s.required && s.kind == AttrKind::Float));
        assert!(Op::HardSwish.signature().attrs.is_empty() && Op::HardSwishBackward.signature().attrs.is_empty());
    }

    #[test]
    fn rms_norm_saves_one_statistic_per_row() {
        let (x, d, rows) = ([2, 3, 8], [8], [2, 3]);
        let eps = attrs(&[("epsilon", AttrValue::Float(1e-6))]);
        assert!(check_shapes(Op::RmsNorm, &eps, &[op(&x), op(&d)], &[], &[op(&x), op(&rows)]).is_ok());
        let inputs = [op(&x), op(&x), op(&d), op(&rows)];
        assert!(check_shapes(Op::RmsNormBackward, &eps, &inputs, &[], &[op(&x), op(&d)]).is_ok());
        assert_eq!(
            shape_err(Op::RmsNorm, &eps, &[op(&x), op(&d)], &[op(&x), op(&[2, 3, 1])]),
            "saved inverse RMS has shape [2, 3, 1] but the op needs [2, 3]"
        );
        assert_eq!(
            shape_err(Op::RmsNormBackward, &eps, &inputs, &[op(&x), op(&[3])]),
            "scale gradient has shape [3] but the op needs [8]"
        );
        assert!(check_shapes(Op::RmsNorm, &eps, &[op(&[8]), op(&d)], &[], &[op(&[8]), op(&[])]).is_ok());
    }

    #[test]
    fn pooling_rejects_excess_padding() {
        let a = attrs(&[("kernel", AttrValue::Ints(vec![2, 2])), ("padding", AttrValue::Ints(vec![2, 2]))]);
        assert!(pooling_output_shape(&a, &[1, 1, 8, 8]).is_err());
    }
}
