//! From an IR node (op, attributes, operand shapes) to the kernel that runs it.
//!
//! The executor hands over each operand as a shape plus a typed slice of a buffer it
//! owns. Dispatch derives every kernel parameter from the shapes and attributes, and
//! checks that each slice is as long as its shape says and of the element type the op
//! needs, so the kernels' own length assertions can never fire on a validated model.

use crate::conv::{self, Conv2d};
use crate::error::KernelError;
use crate::gemm::{self, MatMul};
use crate::pooling::{self, Pooling2d};
use crate::tensor_ops::{self, Broadcast, ChannelView, Rows};
use crate::{activation, dropout, loss, norm, optim};
use placer_ir::ops::{self, AttrReader, Window};
use placer_ir::{Attrs, Op};

mod args;

pub use args::{Arg, In, Out};
use args::{Ids, Result, bad, dims, exactly, f32_in, f32_out, i32_out, ids_in, numel, u8_in, u8_out};

/// A pair of window figures as the kernels index them.
fn usize2(v: [u64; 2]) -> [usize; 2] {
    [v[0] as usize, v[1] as usize]
}

/// The axis the op works along, as the IR's rule reads it.
fn axis(op: Op, attrs: &Attrs, shape: &[u64]) -> Result<usize> {
    ops::axis(attrs, shape).map_err(|e| bad(op, e))
}

/// Convolution geometry from the input (or input-gradient) shape `x` and filter shape `w`.
fn conv_geometry(op: Op, attrs: &Attrs, x: &[u64], w: &[u64], y: &[u64]) -> Result<Conv2d> {
    let a = AttrReader(attrs);
    let (x, w) = (dims(x), dims(w));
    if x.len() != 4 || w.len() != 4 {
        return Err(bad(op, format!("convolution shapes {x:?} and {w:?} are not 4-D")));
    }
    let groups = usize::try_from(a.int("groups", 1)).unwrap_or(0);
    // The window as the IR reads and checks it: one rule for its attributes.
    let window = Window::conv(attrs, [w[2] as u64, w[3] as u64]).map_err(|e| bad(op, e))?;
    let geometry = Conv2d::new(
        [x[0], x[1], x[2], x[3]],
        [w[0], w[2], w[3]],
        usize2(window.stride),
        usize2(window.padding),
        usize2(window.dilation),
        groups,
    )
    .filter(|g| [g.n, g.k, g.p, g.q] == dims(y)[..] && groups > 0 && g.c % groups == 0 && g.c / groups == w[1]);
    geometry.ok_or_else(|| bad(op, format!("input {x:?}, filter {w:?} and output {y:?} do not form a convolution")))
}

fn pooling_geometry(op: Op, attrs: &Attrs, x: &[u64], y: &[u64]) -> Result<Pooling2d> {
    let window = Window::pooling(attrs).map_err(|e| bad(op, e))?;
    let x = dims(x);
    let geometry = match x[..] {
        [n, c, h, w] => Pooling2d::new(
            [n, c, h, w],
            usize2(window.kernel),
            usize2(window.stride),
            usize2(window.padding),
            AttrReader(attrs).bool("count_include_pad", true),
        ),
        _ => None,
    };
    geometry
        .filter(|g| [g.n, g.c, g.p, g.q] == dims(y)[..])
        .ok_or_else(|| bad(op, format!("input {x:?} and output {y:?} do not form this pooling window")))
}

fn matmul_geometry(op: Op, attrs: &Attrs, a_shape: &[u64], b_shape: &[u64], c_shape: &[u64]) -> Result<MatMul> {
    let d = ops::matmul_dims(attrs, a_shape, b_shape).map_err(|e| bad(op, e))?;
    if d.output_shape(a_shape) != c_shape {
        return Err(bad(op, format!("output {c_shape:?} is not the product of {a_shape:?} and {b_shape:?}")));
    }
    Ok(MatMul {
        batch: d.batch as usize,
        m: d.m as usize,
        n: d.n as usize,
        k: d.k as usize,
        transpose_a: d.transpose_a,
        transpose_b: d.transpose_b,
        alpha: d.alpha as f32,
    })
}

fn clip_params(op: Op, attrs: &Attrs) -> Result<activation::Clip> {
    let (min, max) = ops::clip_bounds(attrs).map_err(|e| bad(op, e))?;
    Ok(activation::Clip { min: min as f32, max: max as f32 })
}

fn hard_sigmoid_params(op: Op, attrs: &Attrs) -> Result<activation::HardSigmoid> {
    let (alpha, beta) = ops::hard_sigmoid(attrs).map_err(|e| bad(op, e))?;
    Ok(activation::HardSigmoid { alpha: alpha as f32, beta: beta as f32 })
}

fn dropout_ratio(op: Op, attrs: &Attrs) -> Result<f64> {
    ops::dropout_ratio(attrs).map_err(|e| bad(op, e))
}

/// Floats of scratch space `op` needs for these input and output shapes.
pub fn scratch_len(op: Op, attrs: &Attrs, inputs: &[&[u64]], outputs: &[&[u64]]) -> usize {
    let geometry = match (op, inputs, outputs) {
        (Op::Conv2d, [x, w], [y]) => conv_geometry(op, attrs, x, w, y),
        (Op::Conv2dBackwardData, [dy, w], [dx]) => conv_geometry(op, attrs, dx, w, dy),
        (Op::Conv2dBackwardFilter, [x, dy], [dw]) => conv_geometry(op, attrs, x, dw, dy),
        _ => return 0,
    };
    geometry.map_or(0, |g| conv::conv2d_scratch_len(&g))
}

/// Runs `op` on its operands. Inputs are read; updates are read and written in place;
/// outputs are overwritten.
pub fn run(
    op: Op,
    attrs: &Attrs,
    inputs: &[Arg<'_, In<'_>>],
    updates: &mut [Arg<'_, Out<'_>>],
    outputs: &mut [Arg<'_, Out<'_>>],
    scratch: &mut [f32],
) -> Result<()> {
    let a = AttrReader(attrs);
    let x0 = || inputs.first().ok_or_else(|| bad(op, "no inputs".into()));
    let x1 = || inputs.get(1).ok_or_else(|| bad(op, "fewer than 2 inputs".into()));
    let input = |i: usize| inputs.get(i).ok_or_else(|| bad(op, format!("missing input {i}")));
    let scratch_for = |g: &Conv2d, scratch: &mut [f32]| -> Result<()> {
        let needed = conv::conv2d_scratch_len(g);
        if scratch.len() < needed {
            return Err(KernelError::ScratchTooSmall { needed, given: scratch.len() });
        }
        Ok(())
    };
    match op {
        Op::MatMul => {
            let [c] = exactly(op, "outputs", outputs)?;
            let p = matmul_geometry(op, attrs, x0()?.shape, x1()?.shape, c.shape)?;
            let (lhs, rhs) = (f32_in(op, x0()?)?, f32_in(op, x1()?)?);
            if lhs.len() != p.a_len() || rhs.len() != p.b_len() {
                return Err(bad(op, format!("operands do not fit {p:?}")));
            }
            gemm::matmul(&p, lhs, rhs, f32_out(op, c)?);
        }
        Op::Conv2d => {
            let [y] = exactly(op, "outputs", outputs)?;
            let g = conv_geometry(op, attrs, x0()?.shape, x1()?.shape, y.shape)?;
            scratch_for(&g, scratch)?;
            conv::conv2d_forward(&g, f32_in(op, x0()?)?, f32_in(op, x1()?)?, f32_out(op, y)?, scratch);
        }
        Op::Conv2dBackwardData => {
            let [dx] = exactly(op, "outputs", outputs)?;
            let g = conv_geometry(op, attrs, dx.shape, x1()?.shape, x0()?.shape)?;
            scratch_for(&g, scratch)?;
            conv::conv2d_backward_data(&g, f32_in(op, x0()?)?, f32_in(op, x1()?)?, f32_out(op, dx)?, scratch);
        }
        Op::Conv2dBackwardFilter => {
            let [dw] = exactly(op, "outputs", outputs)?;
            let g = conv_geometry(op, attrs, x0()?.shape, dw.shape, x1()?.shape)?;
            scratch_for(&g, scratch)?;
            conv::conv2d_backward_filter(&g, f32_in(op, x0()?)?, f32_in(op, x1()?)?, f32_out(op, dw)?, scratch);
        }
        Op::MaxPool2d => {
            let [y, indices] = exactly(op, "outputs", outputs)?;
            let g = pooling_geometry(op, attrs, x0()?.shape, y.shape)?;
            if matches!(indices.data, Out::I64(_)) {
                // The kernel writes i32 positions; torch keeps i64 ones: widen after.
                args::out_check(op, indices, "i64")?;
                let mut narrow = vec![0i32; numel(indices.shape)];
                pooling::max_pool2d_forward(&g, f32_in(op, x0()?)?, f32_out(op, y)?, &mut narrow);
                if let Out::I64(wide) = &mut indices.data {
                    wide.iter_mut().zip(&narrow).for_each(|(w, &n)| *w = i64::from(n));
                }
            } else {
                pooling::max_pool2d_forward(&g, f32_in(op, x0()?)?, f32_out(op, y)?, i32_out(op, indices)?);
            }
        }
        Op::MaxPool2dBackward => {
            let [dx] = exactly(op, "outputs", outputs)?;
            let g = pooling_geometry(op, attrs, dx.shape, x0()?.shape)?;
            match ids_in(op, x1()?)? {
                Ids::I32(idx) => pooling::max_pool2d_backward(&g, f32_in(op, x0()?)?, idx, f32_out(op, dx)?)?,
                Ids::I64(idx) => pooling::max_pool2d_backward(&g, f32_in(op, x0()?)?, idx, f32_out(op, dx)?)?,
            }
        }
        Op::AvgPool2d => {
            let [y] = exactly(op, "outputs", outputs)?;
            let g = pooling_geometry(op, attrs, x0()?.shape, y.shape)?;
            pooling::avg_pool2d_forward(&g, f32_in(op, x0()?)?, f32_out(op, y)?);
        }
        Op::AvgPool2dBackward => {
            let [dx] = exactly(op, "outputs", outputs)?;
            let g = pooling_geometry(op, attrs, dx.shape, x0()?.shape)?;
            pooling::avg_pool2d_backward(&g, f32_in(op, x0()?)?, f32_out(op, dx)?);
        }
        Op::GlobalAvgPool | Op::GlobalAvgPoolBackward => {
            let [out] = exactly(op, "outputs", outputs)?;
            let full = if op == Op::GlobalAvgPool { x0()?.shape } else { out.shape };
            let [n, c, h, w] = dims(full)[..] else { return Err(bad(op, format!("{full:?} is not 4-D"))) };
            let (x, y) = (f32_in(op, x0()?)?, f32_out(op, out)?);
            if op == Op::GlobalAvgPool {
                pooling::global_avg_pool_forward(n, c, h * w, x, y);
            } else {
                pooling::global_avg_pool_backward(n, c, h * w, x, y);
            }
        }
        Op::BiasAdd | Op::BiasGrad => {
            let [out] = exactly(op, "outputs", outputs)?;
            let shape = dims(x0()?.shape);
            let view = ChannelView::of(&shape, axis(op, attrs, x0()?.shape)?);
            if op == Op::BiasAdd {
                tensor_ops::bias_add(view, f32_in(op, x0()?)?, f32_in(op, x1()?)?, f32_out(op, out)?);
            } else {
                tensor_ops::bias_grad(view, f32_in(op, x0()?)?, f32_out(op, out)?);
            }
        }
        Op::BatchNorm | Op::LayerNorm => {
            let [y, mean, inv_std] = exactly(op, "outputs", outputs)?;
            let eps = a.float("epsilon", 1e-5) as f32;
            let shape = dims(x0()?.shape);
            let (x, scale, shift) = (f32_in(op, x0()?)?, f32_in(op, x1()?)?, f32_in(op, input(2)?)?);
            let (y, mean, inv_std) = (f32_out(op, y)?, f32_out(op, mean)?, f32_out(op, inv_std)?);
            if op == Op::BatchNorm {
                norm::batch_norm(ChannelView::of(&shape, 1), eps, x, scale, shift, y, mean, inv_std);
            } else {
                norm::layer_norm(Rows::of_last_axis(&shape), eps, x, scale, shift, y, mean, inv_std);
            }
        }
        Op::BatchNormBackward | Op::LayerNormBackward => {
            let [dx, dscale, dshift] = exactly(op, "outputs", outputs)?;
            let shape = dims(x1()?.shape);
            let (dy, x, scale) = (f32_in(op, x0()?)?, f32_in(op, x1()?)?, f32_in(op, input(2)?)?);
            let (mean, inv_std) = (f32_in(op, input(3)?)?, f32_in(op, input(4)?)?);
            let (dx, dscale, dshift) = (f32_out(op, dx)?, f32_out(op, dscale)?, f32_out(op, dshift)?);
            if op == Op::BatchNormBackward {
                let view = ChannelView::of(&shape, 1);
                norm::batch_norm_backward(view, dy, x, scale, mean, inv_std, dx, dscale, dshift);
            } else {
                let rows = Rows::of_last_axis(&shape);
                norm::layer_norm_backward(rows, dy, x, scale, mean, inv_std, dx, dscale, dshift);
            }
        }
        Op::RmsNorm => {
            let [y, inv_rms] = exactly(op, "outputs", outputs)?;
            let eps = a.float("epsilon", 1e-5) as f32;
            let rows = Rows::of_last_axis(&dims(x0()?.shape));
            let (x, scale) = (f32_in(op, x0()?)?, f32_in(op, x1()?)?);
            norm::rms_norm(rows, eps, x, scale, f32_out(op, y)?, f32_out(op, inv_rms)?);
        }
        Op::RmsNormBackward => {
            let [dx, dscale] = exactly(op, "outputs", outputs)?;
            let rows = Rows::of_last_axis(&dims(x1()?.shape));
            let (dy, x, scale) = (f32_in(op, x0()?)?, f32_in(op, x1()?)?, f32_in(op, input(2)?)?);
            let inv_rms = f32_in(op, input(3)?)?;
            norm::rms_norm_backward(rows, dy, x, scale, inv_rms, f32_out(op, dx)?, f32_out(op, dscale)?);
        }
        Op::Relu | Op::Gelu | Op::Erf | Op::Tanh | Op::Sigmoid | Op::Clip | Op::HardSigmoid | Op::HardSwish => {
            let [y] = exactly(op, "outputs", outputs)?;
            let (x, y) = (f32_in(op, x0()?)?, f32_out(op, y)?);
            match op {
                Op::Relu => activation::relu(x, y),
                Op::Gelu => activation::gelu(x, y),
                Op::Erf => activation::erf(x, y),
                Op::Tanh => activation::tanh(x, y),
                Op::Sigmoid => activation::sigmoid(x, y),
                Op::HardSigmoid => activation::hard_sigmoid(hard_sigmoid_params(op, attrs)?, x, y),
                Op::HardSwish => activation::hard_swish(x, y),
                _ => activation::clip(clip_params(op, attrs)?, x, y),
            }
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
            let [out] = exactly(op, "outputs", outputs)?;
            let (p, q) = (f32_in(op, x0()?)?, f32_in(op, x1()?)?);
            if p.len() != q.len() {
                return Err(bad(op, "inputs differ in length".into()));
            }
            let rows = Rows::of_last_axis(&dims(x0()?.shape));
            let out = f32_out(op, out)?;
            match op {
                Op::ReluBackward => activation::relu_backward(p, q, out),
                Op::GeluBackward => activation::gelu_backward(p, q, out),
                Op::ErfBackward => activation::erf_backward(p, q, out),
                Op::TanhBackward => activation::tanh_backward(p, q, out),
                Op::SigmoidBackward => activation::sigmoid_backward(p, q, out),
                Op::ClipBackward => activation::clip_backward(clip_params(op, attrs)?, p, q, out),
                Op::HardSigmoidBackward => {
                    activation::hard_sigmoid_backward(hard_sigmoid_params(op, attrs)?, p, q, out)
                }
                Op::HardSwishBackward => activation::hard_swish_backward(p, q, out),
                _ => activation::softmax_backward(rows, p, q, out),
            }
        }
        Op::Dropout => {
            let [y, mask] = exactly(op, "outputs", outputs)?;
            let x = f32_in(op, x0()?)?;
            if numel(y.shape) != x.len() || numel(mask.shape) != x.len() {
                return Err(bad(op, "output or mask differs from the input in length".into()));
            }
            let params = dropout::Dropout { ratio: dropout_ratio(op, attrs)?, seed: a.int("seed", 0) as u64 };
            let y = f32_out(op, y)?;
            // The mask as onnxruntime keeps it (a byte) or as eager torch does (an f32).
            if matches!(mask.data, Out::F32(_)) {
                dropout::dropout(params, x, y, f32_out(op, mask)?);
            } else {
                dropout::dropout(params, x, y, u8_out(op, mask)?);
            }
        }
        Op::DropoutBackward => {
            let [dx] = exactly(op, "outputs", outputs)?;
            let dy = f32_in(op, x0()?)?;
            let mask = x1()?;
            if numel(mask.shape) != dy.len() || numel(dx.shape) != dy.len() {
                return Err(bad(op, "mask or output differs from the input in length".into()));
            }
            let params = dropout::Dropout { ratio: dropout_ratio(op, attrs)?, seed: 0 };
            let dx = f32_out(op, dx)?;
            if matches!(mask.data, In::F32(_)) {
                dropout::dropout_backward(params, dy, f32_in(op, mask)?, dx);
            } else {
                dropout::dropout_backward(params, dy, u8_in(op, mask)?, dx);
            }
        }
        Op::Add | Op::Mul => {
            let [out] = exactly(op, "outputs", outputs)?;
            let (sa, sb) = (x0()?.shape, x1()?.shape);
            let (p, q) = (f32_in(op, x0()?)?, f32_in(op, x1()?)?);
            if out.shape != sa {
                return Err(bad(op, format!("output {:?} is not shaped like the first input {sa:?}", out.shape)));
            }
            let out = f32_out(op, out)?;
            if sa == sb {
                if op == Op::Add { tensor_ops::add(p, q, out) } else { tensor_ops::mul(p, q, out) }
            } else {
                let bc = Broadcast::new(&dims(sa), &dims(sb))
                    .ok_or_else(|| bad(op, format!("{sb:?} does not broadcast to {sa:?}")))?;
                if op == Op::Add {
                    tensor_ops::add_broadcast(&bc, p, q, out);
                } else {
                    tensor_ops::mul_broadcast(&bc, p, q, out);
                }
            }
        }
        Op::SumTo => {
            let [y] = exactly(op, "outputs", outputs)?;
            let sx = x0()?.shape;
            let bc = Broadcast::new(&dims(sx), &dims(y.shape))
                .ok_or_else(|| bad(op, format!("{:?} does not broadcast to {sx:?}", y.shape)))?;
            tensor_ops::sum_to(&bc, f32_in(op, x0()?)?, f32_out(op, y)?);
        }
        Op::Softmax => {
            let [y] = exactly(op, "outputs", outputs)?;
            let rows = Rows::of_last_axis(&dims(x0()?.shape));
            activation::softmax(rows, f32_in(op, x0()?)?, f32_out(op, y)?);
        }
        Op::SoftmaxCrossEntropy => {
            let [loss_out, probs] = exactly(op, "outputs", outputs)?;
            let rows = Rows::of_last_axis(&dims(x0()?.shape));
            let logits = f32_in(op, x0()?)?;
            let (loss_out, probs) = (f32_out(op, loss_out)?, f32_out(op, probs)?);
            match ids_in(op, x1()?)? {
                Ids::I32(labels) => loss::softmax_cross_entropy(rows, logits, labels, loss_out, probs)?,
                Ids::I64(labels) => loss::softmax_cross_entropy(rows, logits, labels, loss_out, probs)?,
            }
        }
        Op::SoftmaxCrossEntropyBackward => {
            let [dlogits] = exactly(op, "outputs", outputs)?;
            let rows = Rows::of_last_axis(&dims(x0()?.shape));
            let (probs, dlogits) = (f32_in(op, x0()?)?, f32_out(op, dlogits)?);
            match ids_in(op, x1()?)? {
                Ids::I32(labels) => loss::softmax_cross_entropy_backward(rows, probs, labels, dlogits)?,
                Ids::I64(labels) => loss::softmax_cross_entropy_backward(rows, probs, labels, dlogits)?,
            }
        }
        Op::Embedding => {
            let [y] = exactly(op, "outputs", outputs)?;
            let table = Rows::of_last_axis(&dims(x1()?.shape));
            let (weights, y) = (f32_in(op, x1()?)?, f32_out(op, y)?);
            match ids_in(op, x0()?)? {
                Ids::I32(ids) => tensor_ops::embedding(table, ids, weights, y)?,
                Ids::I64(ids) => tensor_ops::embedding(table, ids, weights, y)?,
            }
        }
        Op::EmbeddingBackward => {
            let [dtable] = exactly(op, "outputs", outputs)?;
            let table = Rows::of_last_axis(&dims(dtable.shape));
            let (dy, dtable) = (f32_in(op, x0()?)?, f32_out(op, dtable)?);
            match ids_in(op, x1()?)? {
                Ids::I32(ids) => tensor_ops::embedding_backward(table, dy, ids, dtable)?,
                Ids::I64(ids) => tensor_ops::embedding_backward(table, dy, ids, dtable)?,
            }
        }
        Op::Reshape => {
            let [y] = exactly(op, "outputs", outputs)?;
            match (&x0()?.data, &mut y.data) {
                (In::F32(x), Out::F32(y)) if x.len() == y.len() => tensor_ops::reshape(x, y),
                (In::I32(x), Out::I32(y)) if x.len() == y.len() => tensor_ops::reshape(x, y),
                (In::I64(x), Out::I64(y)) if x.len() == y.len() => tensor_ops::reshape(x, y),
                (In::U8(x), Out::U8(y)) if x.len() == y.len() => tensor_ops::reshape(x, y),
                _ => return Err(bad(op, "input and output differ in type or length".into())),
            }
        }
        Op::Transpose => {
            let [y] = exactly(op, "outputs", outputs)?;
            let shape = dims(x0()?.shape);
            let perm: Vec<usize> = a.ints("perm").unwrap_or(&[]).iter().map(|&p| p as usize).collect();
            match (&x0()?.data, &mut y.data) {
                (In::F32(x), Out::F32(y)) if x.len() == y.len() => tensor_ops::transpose(&shape, &perm, x, y),
                (In::I32(x), Out::I32(y)) if x.len() == y.len() => tensor_ops::transpose(&shape, &perm, x, y),
                (In::I64(x), Out::I64(y)) if x.len() == y.len() => tensor_ops::transpose(&shape, &perm, x, y),
                (In::U8(x), Out::U8(y)) if x.len() == y.len() => tensor_ops::transpose(&shape, &perm, x, y),
                _ => return Err(bad(op, "input and output differ in type or length".into())),
            }
        }
        Op::Concat => {
            let [y] = exactly(op, "outputs", outputs)?;
            let outer = numel(&y.shape[..axis(op, attrs, y.shape)?]);
            let parts = inputs.iter().map(|x| f32_in(op, x)).collect::<Result<Vec<_>>>()?;
            tensor_ops::concat(outer, &parts, f32_out(op, y)?);
        }
        Op::Split => {
            let shape = x0()?.shape;
            let outer = numel(&shape[..axis(op, attrs, shape)?]);
            let mut parts = Vec::with_capacity(outputs.len());
            for out in outputs.iter_mut() {
                parts.push(f32_out(op, out)?);
            }
            tensor_ops::split(outer, f32_in(op, x0()?)?, &mut parts);
        }
        Op::Sgd => {
            let [w] = exactly(op, "updates", updates)?;
            let params =
                optim::Sgd { lr: a.float("lr", 0.0) as f32, weight_decay: a.float("weight_decay", 0.0) as f32 };
            optim::sgd(params, f32_in(op, x0()?)?, f32_out(op, w)?);
        }
        Op::SgdMomentum => {
            let [w, v] = exactly(op, "updates", updates)?;
            let params = optim::SgdMomentum {
                lr: a.float("lr", 0.0) as f32,
                momentum: a.float("momentum", 0.0) as f32,
                weight_decay: a.float("weight_decay", 0.0) as f32,
            };
            optim::sgd_momentum(params, f32_in(op, x0()?)?, f32_out(op, w)?, f32_out(op, v)?);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_ir::AttrValue;

    fn attrs(pairs: &[(&str, AttrValue)]) -> Attrs {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    /// torch keeps indices as i64: every index op gives the same results with them as
    /// with i32, and a float where indices belong is an error naming both widths.
    #[test]
    fn i64_indices_give_the_same_results_as_i32() {
        let pool = attrs(&[("kernel", AttrValue::Ints(vec![2, 2]))]);
        let (xs, ys) = ([2u64, 3, 4, 4], [2u64, 3, 2, 2]);
        let x: Vec<f32> = (0..96).map(|i| ((i * 37) % 23) as f32).collect();
        let inputs = [Arg { shape: &xs, data: In::F32(&x) }];
        let (mut y32, mut i32s, mut y64, mut i64s) = (vec![0.0; 24], vec![0i32; 24], vec![0.0; 24], vec![0i64; 24]);
        let mut out = [Arg { shape: &ys, data: Out::F32(&mut y32) }, Arg { shape: &ys, data: Out::I32(&mut i32s) }];
        run(Op::MaxPool2d, &pool, &inputs, &mut [], &mut out, &mut []).expect("i32");
        let mut out = [Arg { shape: &ys, data: Out::F32(&mut y64) }, Arg { shape: &ys, data: Out::I64(&mut i64s) }];
        run(Op::MaxPool2d, &pool, &inputs, &mut [], &mut out, &mut []).expect("i64");
        assert_eq!((&y32, i32s.iter().map(|&i| i64::from(i)).collect::<Vec<_>>()), (&y64, i64s.clone()));
        let (mut dx32, mut dx64) = (vec![0.0f32; 96], vec![0.0f32; 96]);
        for (idx, dx) in [(In::I32(&i32s), &mut dx32), (In::I64(&i64s), &mut dx64)] {
            let inputs = [Arg { shape: &ys, data: In::F32(&y32) }, Arg { shape: &ys, data: idx }];
            let mut out = [Arg { shape: &xs, data: Out::F32(dx) }];
            run(Op::MaxPool2dBackward, &pool, &inputs, &mut [], &mut out, &mut []).expect("backward");
        }
        assert_eq!(dx32, dx64);

        let (ids32, ids64) = ([3i32, 0, 2, 3], [3i64, 0, 2, 3]);
        let table: Vec<f32> = (0..8).map(|i| i as f32).collect();
        let (ts, is, es) = ([4u64, 2], [4u64], [4u64, 2]);
        let (mut e32, mut e64) = (vec![0.0f32; 8], vec![0.0f32; 8]);
        for (ids, e) in [(In::I32(&ids32), &mut e32), (In::I64(&ids64), &mut e64)] {
            let inputs = [Arg { shape: &is, data: ids }, Arg { shape: &ts, data: In::F32(&table) }];
            run(Op::Embedding, &Attrs::new(), &inputs, &mut [], &mut [Arg { shape: &es, data: Out::F32(e) }], &mut [])
                .expect("embedding");
        }
        assert_eq!(e32, e64);
        assert_eq!(e64, [6.0, 7.0, 0.0, 1.0, 4.0, 5.0, 6.0, 7.0]);
        let (logits, labels) = ([2u64, 4], [2u64]);
        let (mut l32, mut p32, mut l64, mut p64) = ([0.0f32], vec![0.0f32; 8], [0.0f32], vec![0.0f32; 8]);
        for (ids, l, p) in [(In::I32(&ids32[..2]), &mut l32, &mut p32), (In::I64(&ids64[..2]), &mut l64, &mut p64)] {
            let inputs = [Arg { shape: &logits, data: In::F32(&table) }, Arg { shape: &labels, data: ids }];
            let mut out = [Arg { shape: &[], data: Out::F32(l) }, Arg { shape: &logits, data: Out::F32(p) }];
            run(Op::SoftmaxCrossEntropy, &Attrs::new(), &inputs, &mut [], &mut out, &mut []).expect("loss");
        }
        assert_eq!((l32, &p32), (l64, &p64));
        let wrong = [0.0f32; 4];
        let inputs = [Arg { shape: &is, data: In::F32(&wrong) }, Arg { shape: &ts, data: In::F32(&table) }];
        let err = run(
            Op::Embedding,
            &Attrs::new(),
            &inputs,
            &mut [],
            &mut [Arg { shape: &es, data: Out::F32(&mut e32) }],
            &mut [],
        )
        .expect_err("float ids");
        assert_eq!(err.to_string(), "embedding: expected an index (i32 or i64) input of shape [4], got f32");
    }

    #[test]
    fn dropout_writes_a_byte_mask_that_its_backward_reads() {
        let a = attrs(&[("ratio", AttrValue::Float(0.5)), ("seed", AttrValue::Int(11))]);
        let x: Vec<f32> = (0..64).map(|i| i as f32).collect();
        let (mut y, mut mask) = (vec![0.0f32; 64], vec![9u8; 64]);
        let shape = [8u64, 8];
        let inputs = [Arg { shape: &shape, data: In::F32(&x) }];
        let mut outputs =
            [Arg { shape: &shape, data: Out::F32(&mut y) }, Arg { shape: &shape, data: Out::U8(&mut mask) }];
        run(Op::Dropout, &a, &inputs, &mut [], &mut outputs, &mut []).expect("runs");
        assert!(mask.iter().all(|&m| m <= 1) && mask.contains(&0) && mask.contains(&1), "{mask:?}");
        let mut dx = vec![0.0f32; 64];
        let inputs = [Arg { shape: &shape, data: In::F32(&x) }, Arg { shape: &shape, data: In::U8(&mask) }];
        let mut outputs = [Arg { shape: &shape, data: Out::F32(&mut dx) }];
        run(Op::DropoutBackward, &a, &inputs, &mut [], &mut outputs, &mut []).expect("runs");
        assert_eq!(dx, y);
        // An f32 mask (eager torch's) reads the same.
        let wide: Vec<f32> = mask.iter().map(|&m| f32::from(m)).collect();
        let mut dx32 = vec![0.0f32; 64];
        let inputs = [Arg { shape: &shape, data: In::F32(&x) }, Arg { shape: &shape, data: In::F32(&wide) }];
        let mut outputs = [Arg { shape: &shape, data: Out::F32(&mut dx32) }];
        run(Op::DropoutBackward, &a, &inputs, &mut [], &mut outputs, &mut []).expect("runs");
        assert_eq!(dx32, y);
        // A mask of another type is an error, not a panic.
        let wrong = vec![0i32; 64];
        let inputs = [Arg { shape: &shape, data: In::F32(&x) }, Arg { shape: &shape, data: In::I32(&wrong) }];
        let mut outputs = [Arg { shape: &shape, data: Out::F32(&mut dx) }];
        let err = run(Op::DropoutBackward, &a, &inputs, &mut [], &mut outputs, &mut []).expect_err("i32 mask");
        assert_eq!(err.to_string(), "dropout_backward: expected a u8 input of shape [8, 8], got i32");
    }

    #[test]
    fn add_and_mul_broadcast_and_sum_to_reduces() {
        let (sa, sb) = ([2u64, 3], [3u64]);
        let (a, b) = ([1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [10.0f32, 20.0, 30.0]);
        let mut c = [0.0f32; 6];
        for (op, want) in
            [(Op::Add, [11.0, 22.0, 33.0, 14.0, 25.0, 36.0]), (Op::Mul, [10.0, 40.0, 90.0, 40.0, 100.0, 180.0])]
        {
            let inputs = [Arg { shape: &sa, data: In::F32(&a) }, Arg { shape: &sb, data: In::F32(&b) }];
            let mut outputs = [Arg { shape: &sa, data: Out::F32(&mut c) }];
            run(op, &Attrs::new(), &inputs, &mut [], &mut outputs, &mut []).expect("runs");
            assert_eq!(c, want);
        }
        let mut y = [0.0f32; 3];
        let inputs = [Arg { shape: &sa, data: In::F32(&a) }];
        let mut outputs = [Arg { shape: &sb, data: Out::F32(&mut y) }];
        run(Op::SumTo, &Attrs::new(), &inputs, &mut [], &mut outputs, &mut []).expect("runs");
        assert_eq!(y, [5.0, 7.0, 9.0]);
        let bad_b = [1.0f32, 2.0];
        let inputs = [Arg { shape: &sa, data: In::F32(&a) }, Arg { shape: &[2], data: In::F32(&bad_b) }];
        let mut outputs = [Arg { shape: &sa, data: Out::F32(&mut c) }];
        let err = run(Op::Add, &Attrs::new(), &inputs, &mut [], &mut outputs, &mut []).expect_err("no broadcast");
        assert_eq!(err.to_string(), "add: [2] does not broadcast to [2, 3]");
    }

    #[test]
    fn hard_sigmoid_reads_its_parameters_and_hard_swish_needs_none() {
        let a = attrs(&[("alpha", AttrValue::Float(0.25)), ("beta", AttrValue::Int(1))]);
        let (x, dy) = ([-8.0f32, -1.5, 0.0, 4.0], [1.0f32; 4]);
        let shape = [2u64, 2];
        let mut y = [9.0f32; 4];
        let mut outputs = [Arg { shape: &shape, data: Out::F32(&mut y) }];
        run(Op::HardSigmoid, &a, &[Arg { shape: &shape, data: In::F32(&x) }], &mut [], &mut outputs, &mut [])
            .expect("runs");
        assert_eq!(y, [0.0, 0.625, 1.0, 1.0]);
        let inputs = [Arg { shape: &shape, data: In::F32(&dy) }, Arg { shape: &shape, data: In::F32(&x) }];
        let mut outputs = [Arg { shape: &shape, data: Out::F32(&mut y) }];
        run(Op::HardSigmoidBackward, &a, &inputs, &mut [], &mut outputs, &mut []).expect("runs");
        assert_eq!(y, [0.0, 0.25, 0.0, 0.0]);
        let mut outputs = [Arg { shape: &shape, data: Out::F32(&mut y) }];
        run(Op::HardSwish, &Attrs::new(), &[Arg { shape: &shape, data: In::F32(&x) }], &mut [], &mut outputs, &mut [])
            .expect("runs");
        assert_eq!(y, [0.0, -0.375, 0.0, 4.0]);
        let mut outputs = [Arg { shape: &shape, data: Out::F32(&mut y) }];
        run(Op::HardSwishBackward, &Attrs::new(), &inputs, &mut [], &mut outputs, &mut []).expect("runs");
        assert_eq!(y, [0.0, 0.0, 0.5, 1.0]);
    }

    #[test]
    fn u8_tensors_can_be_reshaped_and_transposed() {
        let x = [1u8, 2, 3, 4, 5, 6];
        let mut y = [0u8; 6];
        let perm = attrs(&[("perm", AttrValue::Ints(vec![1, 0]))]);
        let inputs = [Arg { shape: &[2, 3], data: In::U8(&x) }];
        let mut outputs = [Arg { shape: &[3, 2], data: Out::U8(&mut y) }];
        run(Op::Transpose, &perm, &inputs, &mut [], &mut outputs, &mut []).expect("runs");
        assert_eq!(y, [1, 4, 2, 5, 3, 6]);
        let mut outputs = [Arg { shape: &[6], data: Out::U8(&mut y) }];
        run(Op::Reshape, &Attrs::new(), &inputs, &mut [], &mut outputs, &mut []).expect("runs");
        assert_eq!(y, x);
    }
}
