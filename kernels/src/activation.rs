//! Activations and their backward passes: ReLU, GELU, erf, tanh, sigmoid, clip, hard
//! sigmoid, hard swish (elementwise) and softmax (over the last axis). Each backward takes
//! the forward tensor the zoo saves (docs/ops.md): ReLU, tanh, sigmoid and softmax the
//! forward **output** `y`, GELU, erf, clip, hard sigmoid and hard swish the forward
//! **input** `x`.

use crate::fastmath::{exp, fmadd, normal_cdf};
use crate::tensor_ops::{Rows, for_row_groups, map_binary, map_binary_chunks, map_unary, map_unary_chunks, sum_f64};
use multiversion::multiversion;
use multiversion::target::target_cfg_f;

/// 1/sqrt(2π).
const FRAC_1_SQRT_2PI: f32 = 0.398_942_3;

/// `y = erf(x) = 2·Φ(x·√2) − 1`, with Φ the [`normal_cdf`] GELU uses: within a few 1e-7
/// of the exact value.
pub fn erf(x: &[f32], y: &mut [f32]) {
    map_unary(x, y, |v| 2.0 * normal_cdf::<false>(v * std::f32::consts::SQRT_2) - 1.0);
}

/// `dx = dy · 2/√π · e^(−x²)`, from the forward **input** `x`.
pub fn erf_backward(dy: &[f32], x: &[f32], dx: &mut [f32]) {
    map_binary(dy, x, dx, |g, v| g * std::f32::consts::FRAC_2_SQRT_PI * exp::<false>(-v * v));
}

/// `y = max(x, 0)`. A NaN input gives NaN (it is not hidden as 0).
pub fn relu(x: &[f32], y: &mut [f32]) {
    map_unary(x, y, |v| if v < 0.0 { 0.0 } else { v });
}

/// `dx = dy` where the forward output `y > 0`, else 0 (the subgradient at 0 is 0).
pub fn relu_backward(dy: &[f32], y: &[f32], dx: &mut [f32]) {
    map_binary(dy, y, dx, |g, y| if y > 0.0 { g } else { 0.0 });
}

/// GELU in its **exact** form, `y = x · Φ(x) = x/2 · (1 + erf(x/√2))`, as BERT and
/// PyTorch's default use (not the tanh approximation). Φ is [`normal_cdf`]: within a few
/// 1e-7 relative of the exact value.
pub fn gelu(x: &[f32], y: &mut [f32]) {
    map_unary_chunks(x, y, gelu_loop);
}

/// [`gelu`] on the calling thread, compiled for AVX-512 and AVX2 (with fused
/// multiply-adds, see [`crate::fastmath`]) as well as the baseline, and picked at run
/// time. [`normal_cdf`] is branch-free and always inlined, so the loop runs 16 (or 8)
/// elements at a time: ~10× faster than the scalar loop it replaces.
#[multiversion(targets("x86_64+avx512f+avx512vl+fma", "x86_64+avx2+fma"))]
fn gelu_loop(x: &[f32], y: &mut [f32]) {
    #[inline(always)]
    fn body<const FMA: bool>(x: &[f32], y: &mut [f32]) {
        for (y, &v) in y.iter_mut().zip(x) {
            *y = v * normal_cdf::<FMA>(v);
        }
    }
    if target_cfg_f!(target_feature = "fma") { body::<true>(x, y) } else { body::<false>(x, y) }
}

/// The backward of the exact [`gelu`], from the forward **input** `x`:
/// `dx = dy · (Φ(x) + x · φ(x))` with φ the standard normal density.
pub fn gelu_backward(dy: &[f32], x: &[f32], dx: &mut [f32]) {
    map_binary_chunks(dy, x, dx, gelu_backward_loop);
}

/// [`gelu_backward`] on the calling thread; multiversioned like [`gelu_loop`].
#[multiversion(targets("x86_64+avx512f+avx512vl+fma", "x86_64+avx2+fma"))]
fn gelu_backward_loop(dy: &[f32], x: &[f32], dx: &mut [f32]) {
    #[inline(always)]
    fn body<const FMA: bool>(dy: &[f32], x: &[f32], dx: &mut [f32]) {
        for ((dx, &g), &v) in dx.iter_mut().zip(dy).zip(x) {
            let pdf = FRAC_1_SQRT_2PI * exp::<FMA>(-0.5 * v * v);
            *dx = g * fmadd::<FMA>(v, pdf, normal_cdf::<FMA>(v));
        }
    }
    if target_cfg_f!(target_feature = "fma") { body::<true>(dy, x, dx) } else { body::<false>(dy, x, dx) }
}

/// `y = tanh(x)`.
pub fn tanh(x: &[f32], y: &mut [f32]) {
    map_unary(x, y, f32::tanh);
}

/// `dx = dy · (1 − y²)`, from the forward **output** `y`.
pub fn tanh_backward(dy: &[f32], y: &[f32], dx: &mut [f32]) {
    map_binary(dy, y, dx, |g, y| g * (1.0 - y * y));
}

/// `y = 1 / (1 + e^−x)`, with [`exp`] (so the loop vectorises): within a few 1e-7
/// relative of the exact value; 0 below x ≈ −88 (where e^−x overflows), and 1 where
/// `1 + e^−x` rounds to 1.
pub fn sigmoid(x: &[f32], y: &mut [f32]) {
    map_unary_chunks(x, y, sigmoid_loop);
}

/// [`sigmoid`] on the calling thread; multiversioned like [`gelu_loop`].
#[multiversion(targets("x86_64+avx512f+avx512vl+fma", "x86_64+avx2+fma"))]
fn sigmoid_loop(x: &[f32], y: &mut [f32]) {
    #[inline(always)]
    fn body<const FMA: bool>(x: &[f32], y: &mut [f32]) {
        for (y, &v) in y.iter_mut().zip(x) {
            *y = 1.0 / (1.0 + exp::<FMA>(-v));
        }
    }
    if target_cfg_f!(target_feature = "fma") { body::<true>(x, y) } else { body::<false>(x, y) }
}

/// `dx = dy · y · (1 − y)`, from the forward **output** `y`.
pub fn sigmoid_backward(dy: &[f32], y: &[f32], dx: &mut [f32]) {
    map_binary(dy, y, dx, |g, y| g * y * (1.0 - y));
}

/// The bounds of [`clip`] (the op's `min` and `max` attributes; `min ≤ max`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clip {
    pub min: f32,
    pub max: f32,
}

/// `y = min(max(x, min), max)`. A NaN input gives NaN. ReLU6 is `Clip { min: 0, max: 6 }`.
pub fn clip(p: Clip, x: &[f32], y: &mut [f32]) {
    let Clip { min, max } = p;
    map_unary(x, y, |v| {
        if v < min {
            min
        } else if v > max {
            max
        } else {
            v
        }
    });
}

/// `dx = dy` where `min ≤ x ≤ max` (bounds included, as onnxruntime's Clip gradient
/// has it), else 0; from the forward **input** `x`.
pub fn clip_backward(p: Clip, dy: &[f32], x: &[f32], dx: &mut [f32]) {
    let Clip { min, max } = p;
    map_binary(dy, x, dx, |g, v| if v >= min && v <= max { g } else { 0.0 });
}

/// The slope and offset of [`hard_sigmoid`] (the op's `alpha` and `beta` attributes).
/// ONNX's defaults are `alpha` 0.2, `beta` 0.5; PyTorch's `hardsigmoid` is 1/6 and 0.5.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HardSigmoid {
    pub alpha: f32,
    pub beta: f32,
}

/// `y = max(0, min(1, alpha · x + beta))`. A NaN input gives NaN.
pub fn hard_sigmoid(p: HardSigmoid, x: &[f32], y: &mut [f32]) {
    let HardSigmoid { alpha, beta } = p;
    map_unary(x, y, |v| (alpha * v + beta).clamp(0.0, 1.0));
}

/// `dx = dy · alpha` where `0 < alpha · x + beta < 1` (both ends open: the gradient is
/// 0 at the kinks, as PyTorch's `hardsigmoid_backward` has it), else 0; from the forward
/// **input** `x`. A NaN `x` gives 0.
pub fn hard_sigmoid_backward(p: HardSigmoid, dy: &[f32], x: &[f32], dx: &mut [f32]) {
    let HardSigmoid { alpha, beta } = p;
    map_binary(dy, x, dx, |g, v| {
        let t = alpha * v + beta;
        if t > 0.0 && t < 1.0 { g * alpha } else { 0.0 }
    });
}

/// `y = x · max(0, min(1, x/6 + 1/2))` (ONNX's HardSwish, PyTorch's `hardswish`: 0 for
/// x ≤ −3, x for x ≥ 3). A NaN input gives NaN.
pub fn hard_swish(x: &[f32], y: &mut [f32]) {
    map_unary(x, y, |v| v * (v * (1.0 / 6.0) + 0.5).clamp(0.0, 1.0));
}

/// The backward of [`hard_swish`], from the forward **input** `x`, with the boundary
/// conventions of PyTorch's `hardswish_backward` since 2.7 (the torch that made the
/// corpus): `dx = 0` for `x ≤ −3`, `dx = dy · (2x + 3)/6` for `−3 < x < 3`, `dx = dy`
/// for `x ≥ 3` (the outer pieces at the kinks). A NaN `x` gives `dy`.
pub fn hard_swish_backward(dy: &[f32], x: &[f32], dx: &mut [f32]) {
    map_binary(dy, x, dx, |g, v| {
        if v <= -3.0 {
            0.0
        } else if v < 3.0 {
            g * (v * (1.0 / 3.0) + 0.5)
        } else {
            g
        }
    });
}

/// Softmax over the last axis of `shape`, numerically stable (the row maximum is
/// subtracted before `exp`; the sum is accumulated in f64). A row of D = 1 gives 1.
pub fn softmax(shape: Rows, x: &[f32], y: &mut [f32]) {
    let d = shape.cols;
    assert_eq!(x.len(), shape.numel(), "x does not match the shape");
    assert_eq!(y.len(), shape.numel(), "y does not match the shape");
    for_row_groups(y, d, |row0, ys| softmax_rows(&x[row0 * d..][..ys.len()], ys, d));
}

/// Rows of `d` of softmax on the calling thread, compiled for AVX-512 and AVX2 too (see
/// [`crate::tensor_ops`]'s `unary_loop`): one dispatch per group of rows, not per row.
#[multiversion(targets("x86_64+avx512f+avx512vl+fma", "x86_64+avx2+fma"))]
fn softmax_rows(x: &[f32], y: &mut [f32], d: usize) {
    for (yr, xr) in y.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
        if target_cfg_f!(target_feature = "fma") {
            softmax_row_body::<true>(xr, yr);
        } else {
            softmax_row_body::<false>(xr, yr);
        }
    }
}

/// One row of softmax for the cross-entropy loss; returns `(max, Σ exp(x − max))`. The
/// same body and the same choice of clone as [`softmax`], so the two give bit-identical
/// probabilities.
#[multiversion(targets("x86_64+avx512f+avx512vl+fma", "x86_64+avx2+fma"))]
pub(crate) fn softmax_row(x: &[f32], y: &mut [f32]) -> (f32, f64) {
    if target_cfg_f!(target_feature = "fma") { softmax_row_body::<true>(x, y) } else { softmax_row_body::<false>(x, y) }
}

#[inline(always)]
fn softmax_row_body<const FMA: bool>(x: &[f32], y: &mut [f32]) -> (f32, f64) {
    // Sixteen lanes (one AVX-512 register) so the loops vectorise. A NaN is skipped by
    // the maximum but still reaches the output through exp(NaN − max), so the row
    // becomes NaN.
    let mut lanes = [f32::NEG_INFINITY; 16];
    let chunks = x.chunks_exact(16);
    let tail = chunks.remainder();
    for c in chunks {
        for i in 0..16 {
            lanes[i] = if c[i] > lanes[i] { c[i] } else { lanes[i] };
        }
    }
    let max = lanes.iter().chain(tail).fold(f32::NEG_INFINITY, |a, &b| if b > a { b } else { a });
    for (y, &v) in y.iter_mut().zip(x) {
        *y = exp::<FMA>(v - max);
    }
    let sum = sum_f64(y);
    let inv = (1.0 / sum) as f32;
    for y in y.iter_mut() {
        *y *= inv;
    }
    (max, sum)
}

/// The backward of [`softmax`], from the forward **output** `y`: per row,
/// `dx = y · (dy − Σ dy · y)`.
pub fn softmax_backward(shape: Rows, dy: &[f32], y: &[f32], dx: &mut [f32]) {
    let d = shape.cols;
    for (what, len) in [("dy", dy.len()), ("y", y.len()), ("dx", dx.len())] {
        assert_eq!(len, shape.numel(), "{what} does not match the shape");
    }
    for_row_groups(dx, d, |row0, out| {
        let at = row0 * d;
        softmax_backward_rows(&dy[at..][..out.len()], &y[at..][..out.len()], out, d);
    });
}

/// Rows of `d` of [`softmax_backward`] on the calling thread; multiversioned like
/// [`softmax_rows`].
#[multiversion(targets("x86_64+avx512f+avx512vl+fma", "x86_64+avx2+fma"))]
fn softmax_backward_rows(dy: &[f32], y: &[f32], dx: &mut [f32], d: usize) {
    for ((o, g), p) in dx.chunks_exact_mut(d).zip(dy.chunks_exact(d)).zip(y.chunks_exact(d)) {
        // Eight f64 lanes: one AVX-512 register, and an order fixed by the code.
        let mut acc = [0.0f64; 8];
        let (gc, pc) = (g.chunks_exact(8), p.chunks_exact(8));
        let (gt, pt) = (gc.remainder(), pc.remainder());
        for (g8, p8) in gc.zip(pc) {
            for i in 0..8 {
                acc[i] += f64::from(g8[i]) * f64::from(p8[i]);
            }
        }
        let mut dot: f64 = acc.iter().sum();
        for (&g, &p) in gt.iter().zip(pt) {
            dot += f64::from(g) * f64::from(p);
        }
        let dot = dot as f32;
        for ((o, &g), &p) in o.iter_mut().zip(g).zip(p) {
            *o = p * (g - dot);
        }
    }
}
