//! Activations and their backward passes: ReLU, GELU, tanh (elementwise) and softmax
//! (over the last axis). Each backward takes the forward tensor the zoo saves
//! (docs/ops.md): ReLU, tanh and softmax the forward **output** `y`, GELU the forward
//! **input** `x`.

use crate::tensor_ops::{Rows, for_row_groups, map_binary, map_unary, sum_f64};
use std::f32::consts::FRAC_1_SQRT_2;

/// 1/sqrt(2π).
const FRAC_1_SQRT_2PI: f32 = 0.398_942_3;

/// `e^x` without branches or calls, so loops over it vectorise (libm's `expf` does not).
/// Cephes' `expf` polynomial after range reduction by ln 2, rounding done with the
/// 1.5·2^23 trick and 2^n built from bits: within 2 ulp of the true value for normal
/// results. Results below the smallest normal f32 (x < −87.34) are 0, x > 88.72 gives
/// +∞ (as does x between 88 and 88.72, where the exact value is still finite), NaN
/// stays NaN.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LO: f32 = -87.336_55;
    const HI: f32 = 88.0;
    const MAGIC: f32 = 12_582_912.0; // 1.5 · 2^23: adding it rounds to an integer
    let xc = x.clamp(LO, HI);
    let t = xc * std::f32::consts::LOG2_E + MAGIC;
    let n = t - MAGIC;
    // r = x − n · ln 2, with ln 2 split in two for accuracy.
    let r = xc - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    p = p * r * r + r + 1.0;
    // t's low mantissa bits hold n (two's complement): 2^n = (n + 127) << 23.
    let scale = f32::from_bits(t.to_bits().wrapping_sub(0x4B40_0000 - 127) << 23);
    let y = p * scale;
    if x < LO {
        0.0
    } else if x > HI {
        f32::INFINITY
    } else if x.is_nan() {
        x
    } else {
        y
    }
}

/// `y = max(x, 0)`. A NaN input gives NaN (it is not hidden as 0).
pub fn relu(x: &[f32], y: &mut [f32]) {
    map_unary(x, y, |v| if v < 0.0 { 0.0 } else { v });
}

/// `dx = dy` where the forward output `y > 0`, else 0 (the subgradient at 0 is 0).
pub fn relu_backward(dy: &[f32], y: &[f32], dx: &mut [f32]) {
    map_binary(dy, y, dx, |g, y| if y > 0.0 { g } else { 0.0 });
}

/// Φ(x), the standard normal CDF, without branches or calls (vectorisable), as
/// `erfc(|x|/√2)/2` mirrored for x ≥ 0. erfc is the Chebyshev fit of Numerical Recipes
/// (`erfcc`, fractional error below 1.2e-7 everywhere) evaluated with [`exp`]: Φ keeps
/// its relative accuracy far into the left tail, where `(1 + erf(x/√2))/2` would
/// cancel.
#[inline(always)]
pub(crate) fn normal_cdf(x: f32) -> f32 {
    let z = x.abs() * FRAC_1_SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * z);
    // The degree-9 polynomial by Estrin's scheme (a shorter dependency chain than
    // Horner's, so neighbouring elements overlap better).
    let (t2, t4) = (t * t, t * t * (t * t));
    let t8 = t4 * t4;
    let p01 = -1.265_512_2 + 1.000_023_7 * t;
    let p23 = 0.374_091_96 + 0.096_784_18 * t;
    let p45 = -0.186_288_06 + 0.278_868_07 * t;
    let p67 = -1.135_204 + 1.488_515_9 * t;
    let p89 = -0.822_152_23 + 0.170_872_77 * t;
    let p = (p01 + p23 * t2) + (p45 + p67 * t2) * t4 + p89 * t8;
    let half_erfc = 0.5 * t * exp(p - z * z); // Φ(−|x|)
    if x < 0.0 { half_erfc } else { 1.0 - half_erfc }
}

/// GELU in its **exact** form, `y = x · Φ(x) = x/2 · (1 + erf(x/√2))`, as BERT and
/// PyTorch's default use (not the tanh approximation). Φ is [`normal_cdf`]: within a few
/// 1e-7 relative of the exact value.
pub fn gelu(x: &[f32], y: &mut [f32]) {
    map_unary(x, y, |v| v * normal_cdf(v));
}

/// The backward of the exact [`gelu`], from the forward **input** `x`:
/// `dx = dy · (Φ(x) + x · φ(x))` with φ the standard normal density.
pub fn gelu_backward(dy: &[f32], x: &[f32], dx: &mut [f32]) {
    map_binary(dy, x, dx, |g, v| {
        let pdf = FRAC_1_SQRT_2PI * exp(-0.5 * v * v);
        g * (normal_cdf(v) + v * pdf)
    });
}

/// `y = tanh(x)`.
pub fn tanh(x: &[f32], y: &mut [f32]) {
    map_unary(x, y, f32::tanh);
}

/// `dx = dy · (1 − y²)`, from the forward **output** `y`.
pub fn tanh_backward(dy: &[f32], y: &[f32], dx: &mut [f32]) {
    map_binary(dy, y, dx, |g, y| g * (1.0 - y * y));
}

/// Softmax over the last axis of `shape`, numerically stable (the row maximum is
/// subtracted before `exp`; the sum is accumulated in f64). A row of D = 1 gives 1.
pub fn softmax(shape: Rows, x: &[f32], y: &mut [f32]) {
    let d = shape.cols;
    assert_eq!(x.len(), shape.numel(), "x does not match the shape");
    assert_eq!(y.len(), shape.numel(), "y does not match the shape");
    for_row_groups(y, d, |row0, ys| {
        let xs = &x[row0 * d..][..ys.len()];
        for (yr, xr) in ys.chunks_exact_mut(d).zip(xs.chunks_exact(d)) {
            softmax_row(xr, yr);
        }
    });
}

/// One row of softmax; also used by the cross-entropy loss. Returns
/// `(max, Σ exp(x − max))`.
pub(crate) fn softmax_row(x: &[f32], y: &mut [f32]) -> (f32, f64) {
    // Eight lanes everywhere so the loops vectorise. A NaN is skipped by the maximum
    // but still reaches the output through exp(NaN − max), so the row becomes NaN.
    let mut lanes = [f32::NEG_INFINITY; 8];
    let chunks = x.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for i in 0..8 {
            lanes[i] = if c[i] > lanes[i] { c[i] } else { lanes[i] };
        }
    }
    let max = lanes.iter().chain(tail).fold(f32::NEG_INFINITY, |a, &b| if b > a { b } else { a });
    for (y, &v) in y.iter_mut().zip(x) {
        *y = exp(v - max);
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
        for (r, o) in out.chunks_exact_mut(d).enumerate() {
            let (g, p) = (&dy[at + r * d..][..d], &y[at + r * d..][..d]);
            let mut acc = [0.0f64; 4];
            let (gc, pc) = (g.chunks_exact(4), p.chunks_exact(4));
            let (gt, pt) = (gc.remainder(), pc.remainder());
            for (g4, p4) in gc.zip(pc) {
                for i in 0..4 {
                    acc[i] += f64::from(g4[i]) * f64::from(p4[i]);
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
    });
}

#[cfg(test)]
mod tests {
    use super::{exp, normal_cdf};

    #[test]
    fn normal_cdf_is_accurate_in_both_tails() {
        // Relative error of Φ, against the error that rounding x to f32 alone causes
        // (Φ's condition number is |x · φ(x) / Φ(x)|, about x² in the left tail).
        let mut worst = (0.0f64, 0.0f32);
        let mut x = -13.0f32;
        while x < 8.0 {
            let xd = f64::from(x);
            let want = 0.5 * libm::erfc(-xd / std::f64::consts::SQRT_2);
            let pdf = (-0.5 * xd * xd).exp() / (2.0 * std::f64::consts::PI).sqrt();
            let cond = 1.0 + (xd * pdf / want).abs();
            let err = (f64::from(normal_cdf(x)) - want).abs() / want / cond;
            if err > worst.0 {
                worst = (err, x);
            }
            x += 0.0093;
        }
        assert!(worst.0 < 4e-7, "relative error / condition {} at {}", worst.0, worst.1);
        assert_eq!(normal_cdf(0.0), 0.5);
        assert_eq!(normal_cdf(f32::INFINITY), 1.0);
        assert_eq!(normal_cdf(f32::NEG_INFINITY), 0.0);
        assert!(normal_cdf(f32::NAN).is_nan());
    }

    #[test]
    fn fast_exp_is_within_two_ulp_and_handles_the_ends() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let want = f64::from(x).exp();
            let rel = (f64::from(exp(x)) - want).abs() / want;
            worst = worst.max(rel);
            x += 0.0137;
        }
        for x in [-1e-7f32, 0.0, 1e-7, -0.5, 0.5, -std::f32::consts::LN_2 / 2.0] {
            let want = f64::from(x).exp();
            worst = worst.max((f64::from(exp(x)) - want).abs() / want);
        }
        assert!(worst < 2.5e-7, "relative error {worst}");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(-100.0), 0.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
    }
}
