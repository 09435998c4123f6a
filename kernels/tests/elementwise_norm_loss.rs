//! The elementwise (broadcast included), dropout, normalisation, loss, data-movement and
//! optimizer kernels against plain reference implementations (naive loops over
//! multi-indices, f64; a sequential SplitMix64 for dropout's mask), gradient checks of
//! every backward kernel by central finite differences, the error paths of
//! index-reading kernels, and degenerate sizes.
//!
//! Shapes are tiny so the file runs in a few seconds in a debug build; a few fixed
//! tests use tensors just above the parallel threshold (`PAR_CHUNK`) so the rayon paths
//! and their chunk boundaries are exercised too.

#![allow(clippy::unwrap_used)]

mod common;

use common::noise;
use placer_kernels::KernelError;
use placer_kernels::activation::{
    Clip, HardSigmoid, clip, clip_backward, erf, erf_backward, gelu, gelu_backward, hard_sigmoid,
    hard_sigmoid_backward, hard_swish, hard_swish_backward, relu, relu_backward, sigmoid, sigmoid_backward, softmax,
    softmax_backward, tanh, tanh_backward,
};
use placer_kernels::dropout::{Dropout, dropout, dropout_backward};
use placer_kernels::loss::{softmax_cross_entropy, softmax_cross_entropy_backward};
use placer_kernels::norm::{
    batch_norm, batch_norm_backward, layer_norm, layer_norm_backward, rms_norm, rms_norm_backward,
};
use placer_kernels::optim::{Sgd, SgdMomentum, sgd, sgd_momentum};
use placer_kernels::tensor_ops::{
    Broadcast, ChannelView, PAR_CHUNK, Rows, add, add_broadcast, bias_add, bias_grad, concat, embedding,
    embedding_backward, mul, mul_broadcast, reshape, split, sum_to, transpose,
};
use proptest::collection::vec;
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------
// Helpers.

const EPS: f32 = 1e-5;

/// Asserts `got ≈ want` elementwise: `|got − want| ≤ tol · (1 + |want|)`.
fn assert_close(what: &str, got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let g = f64::from(g);
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}[{i}]: got {g}, want {w}");
    }
}

fn to_f64(x: &[f32]) -> Vec<f64> {
    x.iter().map(|&v| f64::from(v)).collect()
}

/// `Σ a · b` in f64.
fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum()
}

/// Central differences of `f` at `x`, one coordinate at a time, in f64. The step is the
/// one actually taken in f32.
fn numeric_grad(x: &[f32], h: f32, f: impl Fn(&[f32]) -> f64) -> Vec<f64> {
    let mut xp = x.to_vec();
    (0..x.len())
        .map(|i| {
            let orig = xp[i];
            let (up, down) = (orig + h, orig - h);
            xp[i] = up;
            let fp = f(&xp);
            xp[i] = down;
            let fm = f(&xp);
            xp[i] = orig;
            (fp - fm) / (f64::from(up) - f64::from(down))
        })
        .collect()
}

/// A gradient check: `‖analytic − numeric‖ ≤ 3 % of the larger norm`, plus a small
/// absolute floor for the rounding noise of f32 forward passes (and for gradients that
/// are exactly 0).
fn assert_grad(what: &str, analytic: &[f32], numeric: &[f64]) {
    assert_eq!(analytic.len(), numeric.len(), "{what}: lengths differ");
    let norm = |v: &mut dyn Iterator<Item = f64>| v.map(|x| x * x).sum::<f64>().sqrt();
    let err = norm(&mut analytic.iter().zip(numeric).map(|(&a, &n)| f64::from(a) - n));
    let scale = norm(&mut analytic.iter().map(|&a| f64::from(a))).max(norm(&mut numeric.iter().copied()));
    let floor = 2e-3 * (analytic.len() as f64).sqrt();
    assert!(
        err <= 0.03 * scale + floor,
        "{what}: gradient error {err} against norm {scale}\nanalytic {analytic:?}\nnumeric  {numeric:?}"
    );
}

const H: f32 = 1e-2;

fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &n)| acc * n + i)
}

/// Values in a channel (or row) of a norm spread by at least ~0.2: position k within the
/// channel gets an offset of 0.8 · (k mod 4) on top of a noise in [−0.3, 0.3], so the
/// variance is never tiny (which would make 1/std, and finite differences, explode).
fn spread(noise: &[f32], position: impl Fn(usize) -> usize) -> Vec<f32> {
    noise.iter().enumerate().map(|(k, &r)| r + 0.8 * (position(k) % 4) as f32 - 1.2).collect()
}

fn view_strategy() -> impl Strategy<Value = ChannelView> {
    (1usize..4, 1usize..5, 1usize..6).prop_map(|(outer, channels, inner)| ChannelView { outer, channels, inner })
}

fn rows_strategy() -> impl Strategy<Value = Rows> {
    (1usize..5, 1usize..8).prop_map(|(rows, cols)| Rows { rows, cols })
}

/// Rows of at least 3 columns (with 2, x̂ is ±1 whatever x is, and the x gradient is
/// nearly 0), for a gradient check of layer norm where it is not.
fn rows_strategy_3() -> impl Strategy<Value = Rows> {
    (1usize..4, 3usize..8).prop_map(|(rows, cols)| Rows { rows, cols })
}

/// A view with `k` vectors of its numel in [−0.3, 0.3] and 3 of its channels.
#[allow(clippy::type_complexity)]
fn view_case(k: usize) -> impl Strategy<Value = (ChannelView, Vec<Vec<f32>>, Vec<Vec<f32>>)> {
    view_strategy()
        .prop_flat_map(move |v| (Just(v), vec(vec(-0.3f32..0.3, v.numel()), k), vec(vec(-1.5f32..1.5, v.channels), 3)))
}

/// Rows with `k` vectors of its numel in [−0.3, 0.3] and 3 of its columns.
#[allow(clippy::type_complexity)]
fn rows_case(
    shape: impl Strategy<Value = Rows>,
    k: usize,
) -> impl Strategy<Value = (Rows, Vec<Vec<f32>>, Vec<Vec<f32>>)> {
    shape.prop_flat_map(move |s| (Just(s), vec(vec(-0.3f32..0.3, s.numel()), k), vec(vec(-1.5f32..1.5, s.cols), 3)))
}

fn bn_x(view: ChannelView, noise: &[f32]) -> Vec<f32> {
    let ChannelView { channels, inner, .. } = view;
    // Position within the channel: o · inner + i.
    spread(noise, |k| (k / (channels * inner)) * inner + k % inner)
}

fn ln_x(shape: Rows, noise: &[f32]) -> Vec<f32> {
    spread(noise, |k| k % shape.cols)
}

// ---------------------------------------------------------------------------------------
// References.

/// Batch norm in f64: (y, mean, inv_std).
fn ref_batch_norm(v: ChannelView, eps: f64, x: &[f32], scale: &[f32], shift: &[f32]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let ChannelView { outer, channels, inner } = v;
    let at = |o: usize, c: usize, i: usize| (o * channels + c) * inner + i;
    let m = (outer * inner) as f64;
    let mut y = vec![0.0; x.len()];
    let (mut means, mut istds) = (vec![], vec![]);
    for c in 0..channels {
        let mut sum = 0.0;
        for o in 0..outer {
            for i in 0..inner {
                sum += f64::from(x[at(o, c, i)]);
            }
        }
        let mean = sum / m;
        let mut var = 0.0;
        for o in 0..outer {
            for i in 0..inner {
                var += (f64::from(x[at(o, c, i)]) - mean).powi(2);
            }
        }
        let istd = 1.0 / (var / m + eps).sqrt();
        for o in 0..outer {
            for i in 0..inner {
                let k = at(o, c, i);
                y[k] = (f64::from(x[k]) - mean) * istd * f64::from(scale[c]) + f64::from(shift[c]);
            }
        }
        means.push(mean);
        istds.push(istd);
    }
    (y, means, istds)
}

/// Batch norm backward in f64 from the saved statistics: (dx, dscale, dshift).
fn ref_batch_norm_backward(
    v: ChannelView,
    dy: &[f32],
    x: &[f32],
    scale: &[f32],
    mean: &[f32],
    istd: &[f32],
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let ChannelView { outer, channels, inner } = v;
    let at = |o: usize, c: usize, i: usize| (o * channels + c) * inner + i;
    let m = (outer * inner) as f64;
    let mut dx = vec![0.0; x.len()];
    let (mut dscale, mut dshift) = (vec![0.0; channels], vec![0.0; channels]);
    for c in 0..channels {
        let (mu, is) = (f64::from(mean[c]), f64::from(istd[c]));
        let xhat = |k: usize| (f64::from(x[k]) - mu) * is;
        for o in 0..outer {
            for i in 0..inner {
                let k = at(o, c, i);
                dshift[c] += f64::from(dy[k]);
                dscale[c] += f64::from(dy[k]) * xhat(k);
            }
        }
        for o in 0..outer {
            for i in 0..inner {
                let k = at(o, c, i);
                dx[k] = f64::from(scale[c]) * is / m * (m * f64::from(dy[k]) - dshift[c] - xhat(k) * dscale[c]);
            }
        }
    }
    (dx, dscale, dshift)
}

/// Layer norm in f64: (y, mean, inv_std).
fn ref_layer_norm(s: Rows, eps: f64, x: &[f32], scale: &[f32], shift: &[f32]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let d = s.cols;
    let mut y = vec![0.0; x.len()];
    let (mut means, mut istds) = (vec![], vec![]);
    for r in 0..s.rows {
        let row = &x[r * d..(r + 1) * d];
        let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / d as f64;
        let var = row.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / d as f64;
        let istd = 1.0 / (var + eps).sqrt();
        for k in 0..d {
            y[r * d + k] = (f64::from(row[k]) - mean) * istd * f64::from(scale[k]) + f64::from(shift[k]);
        }
        means.push(mean);
        istds.push(istd);
    }
    (y, means, istds)
}

/// Layer norm backward in f64: (dx, dscale, dshift).
fn ref_layer_norm_backward(
    s: Rows,
    dy: &[f32],
    x: &[f32],
    scale: &[f32],
    mean: &[f32],
    istd: &[f32],
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let d = s.cols;
    let n = d as f64;
    let mut dx = vec![0.0; x.len()];
    let (mut dscale, mut dshift) = (vec![0.0; d], vec![0.0; d]);
    for r in 0..s.rows {
        let (mu, is) = (f64::from(mean[r]), f64::from(istd[r]));
        let xhat = |k: usize| (f64::from(x[r * d + k]) - mu) * is;
        let g = |k: usize| f64::from(dy[r * d + k]) * f64::from(scale[k]);
        let mean_g = (0..d).map(g).sum::<f64>() / n;
        let mean_gx = (0..d).map(|k| g(k) * xhat(k)).sum::<f64>() / n;
        for k in 0..d {
            dx[r * d + k] = is * (g(k) - mean_g - xhat(k) * mean_gx);
            dscale[k] += f64::from(dy[r * d + k]) * xhat(k);
            dshift[k] += f64::from(dy[r * d + k]);
        }
    }
    (dx, dscale, dshift)
}

/// erf by its Maclaurin series, in f64 (exact to ~1e-9 for |x| ≤ 4): independent of libm.
fn erf_series(x: f64) -> f64 {
    let mut term = x; // (−1)^n x^(2n+1) / n!
    let mut sum = x;
    for n in 1..120 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

fn ref_gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + erf_series(x / std::f64::consts::SQRT_2))
}

fn ref_gelu_grad(x: f64) -> f64 {
    let pdf = (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
    0.5 * (1.0 + erf_series(x / std::f64::consts::SQRT_2)) + x * pdf
}

fn ref_softmax(s: Rows, x: &[f32]) -> Vec<f64> {
    let d = s.cols;
    let mut y = vec![0.0; x.len()];
    for r in 0..s.rows {
        let row = &x[r * d..(r + 1) * d];
        let max = row.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(f64::from(b)));
        let sum: f64 = row.iter().map(|&v| (f64::from(v) - max).exp()).sum();
        for k in 0..d {
            y[r * d + k] = (f64::from(row[k]) - max).exp() / sum;
        }
    }
    y
}

/// Concat along `axis` of full shapes, by multi-index.
fn ref_concat(shapes: &[Vec<usize>], axis: usize, inputs: &[Vec<f32>]) -> Vec<f32> {
    let mut out_shape = shapes[0].clone();
    out_shape[axis] = shapes.iter().map(|s| s[axis]).sum();
    let numel: usize = out_shape.iter().product();
    (0..numel)
        .map(|i| {
            let mut idx = unravel(i, &out_shape);
            let mut k = 0;
            while idx[axis] >= shapes[k][axis] {
                idx[axis] -= shapes[k][axis];
                k += 1;
            }
            inputs[k][ravel(&idx, &shapes[k])]
        })
        .collect()
}

fn ref_transpose(shape: &[usize], perm: &[usize], x: &[f32]) -> Vec<f32> {
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let numel: usize = shape.iter().product();
    (0..numel)
        .map(|i| {
            let out_idx = unravel(i, &out_shape);
            let mut in_idx = vec![0; shape.len()];
            for (d, &p) in perm.iter().enumerate() {
                in_idx[p] = out_idx[d];
            }
            x[ravel(&in_idx, shape)]
        })
        .collect()
}

fn inverse(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    inv
}

// ---------------------------------------------------------------------------------------
// Strategies for data movement.

/// (shapes of the inputs, axis, input values): 1–4 inputs of rank 1–4 agreeing outside
/// `axis`.
fn concat_case() -> impl Strategy<Value = (Vec<Vec<usize>>, usize, Vec<Vec<f32>>)> {
    (vec(1usize..4, 1..5), vec(1usize..4, 1..5))
        .prop_flat_map(|(base, sizes)| (Just(base.clone()), 0..base.len(), Just(sizes)))
        .prop_flat_map(|(base, axis, sizes)| {
            let shapes: Vec<Vec<usize>> = sizes
                .iter()
                .map(|&s| {
                    let mut sh = base.clone();
                    sh[axis] = s;
                    sh
                })
                .collect();
            let values: Vec<_> = shapes.iter().map(|s| vec(-2.0f32..2.0, s.iter().product::<usize>())).collect();
            (Just(shapes), Just(axis), values)
        })
}

/// (shape, perm, values): rank 1 to `max_rank`, dims 1–3.
fn transpose_case(max_rank: usize) -> impl Strategy<Value = (Vec<usize>, Vec<usize>, Vec<f32>)> {
    vec(1usize..4, 1..=max_rank).prop_flat_map(|shape| {
        let n: usize = shape.iter().product();
        let perm = Just((0..shape.len()).collect::<Vec<_>>()).prop_shuffle();
        (Just(shape), perm, vec(-2.0f32..2.0, n))
    })
}

/// Values in [−2, −0.1] ∪ [0.1, 2]: away from ReLU's kink.
fn away_from_zero(n: usize) -> impl Strategy<Value = Vec<f32>> {
    vec((0.1f32..2.0, any::<bool>()).prop_map(|(m, neg)| if neg { -m } else { m }), n)
}

// ---------------------------------------------------------------------------------------
// Property tests: kernels against the references.

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn batch_norm_matches_reference((view, noise, params) in view_case(2)) {
        let x = bn_x(view, &noise[0]);
        let (scale, shift) = (&params[0], &params[1]);
        let (mut y, mut mean, mut istd) = (vec![0.0; x.len()], vec![0.0; view.channels], vec![0.0; view.channels]);
        batch_norm(view, EPS, &x, scale, shift, &mut y, &mut mean, &mut istd);
        let (ry, rmean, ristd) = ref_batch_norm(view, f64::from(EPS), &x, scale, shift);
        assert_close("y", &y, &ry, 1e-4);
        assert_close("mean", &mean, &rmean, 1e-5);
        assert_close("inv_std", &istd, &ristd, 1e-5);

        let dy = &noise[1];
        let (mut dx, mut dscale, mut dshift) = (vec![0.0; x.len()], vec![0.0; view.channels], vec![0.0; view.channels]);
        batch_norm_backward(view, dy, &x, scale, &mean, &istd, &mut dx, &mut dscale, &mut dshift);
        let (rdx, rdscale, rdshift) = ref_batch_norm_backward(view, dy, &x, scale, &mean, &istd);
        assert_close("dx", &dx, &rdx, 1e-4);
        assert_close("dscale", &dscale, &rdscale, 1e-4);
        assert_close("dshift", &dshift, &rdshift, 1e-5);
    }

    #[test]
    fn layer_norm_matches_reference((shape, noise, params) in rows_case(rows_strategy(), 2)) {
        let x = ln_x(shape, &noise[0]);
        let (scale, shift) = (&params[0], &params[1]);
        let (mut y, mut mean, mut istd) = (vec![0.0; x.len()], vec![0.0; shape.rows], vec![0.0; shape.rows]);
        layer_norm(shape, EPS, &x, scale, shift, &mut y, &mut mean, &mut istd);
        let (ry, rmean, ristd) = ref_layer_norm(shape, f64::from(EPS), &x, scale, shift);
        assert_close("y", &y, &ry, 1e-4);
        assert_close("mean", &mean, &rmean, 1e-5);
        assert_close("inv_std", &istd, &ristd, 1e-5);

        let dy = &noise[1];
        let (mut dx, mut dscale, mut dshift) = (vec![0.0; x.len()], vec![0.0; shape.cols], vec![0.0; shape.cols]);
        layer_norm_backward(shape, dy, &x, scale, &mean, &istd, &mut dx, &mut dscale, &mut dshift);
        let (rdx, rdscale, rdshift) = ref_layer_norm_backward(shape, dy, &x, scale, &mean, &istd);
        assert_close("dx", &dx, &rdx, 1e-4);
        assert_close("dscale", &dscale, &rdscale, 1e-4);
        assert_close("dshift", &dshift, &rdshift, 1e-5);
    }

    #[test]
    fn elementwise_activations_match_reference(x in vec(-4.0f32..4.0, 0..40), seed in vec(-1.0f32..1.0, 40)) {
        let n = x.len();
        let dy = &seed[..n];
        let mut y = vec![0.0; n];
        let mut dx = vec![0.0; n];

        relu(&x, &mut y);
        assert_close("relu", &y, &x.iter().map(|&v| f64::from(v).max(0.0)).collect::<Vec<_>>(), 0.0);
        relu_backward(dy, &y, &mut dx);
        let want: Vec<f64> = x.iter().zip(dy).map(|(&v, &g)| if v > 0.0 { f64::from(g) } else { 0.0 }).collect();
        assert_close("relu_backward", &dx, &want, 0.0);

        gelu(&x, &mut y);
        assert_close("gelu", &y, &x.iter().map(|&v| ref_gelu(f64::from(v))).collect::<Vec<_>>(), 1e-6);
        gelu_backward(dy, &x, &mut dx);
        let want: Vec<f64> = x.iter().zip(dy).map(|(&v, &g)| f64::from(g) * ref_gelu_grad(f64::from(v))).collect();
        assert_close("gelu_backward", &dx, &want, 1e-6);

        erf(&x, &mut y);
        assert_close("erf", &y, &x.iter().map(|&v| erf_series(f64::from(v))).collect::<Vec<_>>(), 1e-6);
        erf_backward(dy, &x, &mut dx);
        let two_over_sqrt_pi = std::f64::consts::FRAC_2_SQRT_PI;
        let want: Vec<f64> =
            x.iter().zip(dy).map(|(&v, &g)| f64::from(g) * two_over_sqrt_pi * (-f64::from(v).powi(2)).exp()).collect();
        assert_close("erf_backward", &dx, &want, 1e-6);

        tanh(&x, &mut y);
        assert_close("tanh", &y, &x.iter().map(|&v| f64::from(v).tanh()).collect::<Vec<_>>(), 1e-6);
        tanh_backward(dy, &y, &mut dx);
        let want: Vec<f64> = y.iter().zip(dy).map(|(&t, &g)| f64::from(g) * (1.0 - f64::from(t).powi(2))).collect();
        assert_close("tanh_backward", &dx, &want, 1e-6);
    }

    #[test]
    fn add_mul_and_reshape_match_reference(a in vec(-4.0f32..4.0, 0..40), b in vec(-4.0f32..4.0, 40)) {
        let b = &b[..a.len()];
        let mut c = vec![0.0; a.len()];
        add(&a, b, &mut c);
        assert_close("add", &c, &a.iter().zip(b).map(|(&a, &b)| f64::from(a + b)).collect::<Vec<_>>(), 0.0);
        mul(&a, b, &mut c);
        assert_close("mul", &c, &a.iter().zip(b).map(|(&a, &b)| f64::from(a * b)).collect::<Vec<_>>(), 0.0);
        let mut r = vec![0.0; a.len()];
        reshape(&a, &mut r);
        prop_assert_eq!(&r, &a);
    }

    #[test]
    fn softmax_matches_reference((shape, noise, _p) in rows_case(rows_strategy(), 2)) {
        let x: Vec<f32> = noise[0].iter().map(|v| v * 20.0).collect(); // up to ±6
        let mut y = vec![0.0; x.len()];
        softmax(shape, &x, &mut y);
        assert_close("softmax", &y, &ref_softmax(shape, &x), 1e-6);
        let dy = &noise[1];
        let mut dx = vec![0.0; x.len()];
        softmax_backward(shape, dy, &y, &mut dx);
        let d = shape.cols;
        let mut want = vec![0.0; x.len()];
        for r in 0..shape.rows {
            let s: f64 = (0..d).map(|k| f64::from(dy[r * d + k]) * f64::from(y[r * d + k])).sum();
            for k in 0..d {
                want[r * d + k] = f64::from(y[r * d + k]) * (f64::from(dy[r * d + k]) - s);
            }
        }
        assert_close("softmax_backward", &dx, &want, 1e-6);
    }

    #[test]
    fn cross_entropy_matches_reference(
        (shape, logits, labels) in rows_strategy().prop_flat_map(|s| {
            (Just(s), vec(-5.0f32..5.0, s.numel()), vec(0..s.cols as i32, s.rows))
        })
    ) {
        let mut loss = [0.0];
        let mut probs = vec![0.0; logits.len()];
        softmax_cross_entropy(shape, &logits, &labels, &mut loss, &mut probs).expect("labels in range");
        let p = ref_softmax(shape, &logits);
        assert_close("probs", &probs, &p, 1e-6);
        let c = shape.cols;
        let want = labels.iter().enumerate().map(|(r, &l)| -p[r * c + l as usize].ln()).sum::<f64>() / shape.rows as f64;
        assert_close("loss", &loss, &[want], 1e-5);

        let mut dl = vec![0.0; logits.len()];
        softmax_cross_entropy_backward(shape, &probs, &labels, &mut dl).expect("labels in range");
        let mut want = to_f64(&probs);
        for (r, &l) in labels.iter().enumerate() {
            want[r * c + l as usize] -= 1.0;
        }
        let want: Vec<f64> = want.iter().map(|v| v / shape.rows as f64).collect();
        assert_close("dlogits", &dl, &want, 1e-6);
    }

    #[test]
    fn bias_add_and_grad_match_reference(
        (shape, axis, x, b) in vec(1usize..5, 1..5)
            .prop_flat_map(|s| (Just(s.clone()), 0..s.len()))
            .prop_flat_map(|(s, axis)| {
                let n: usize = s.iter().product();
                let c = s[axis];
                (Just(s), Just(axis), vec(-2.0f32..2.0, n), vec(-2.0f32..2.0, c))
            })
    ) {
        let view = ChannelView::of(&shape, axis);
        let mut y = vec![0.0; x.len()];
        bias_add(view, &x, &b, &mut y);
        let want: Vec<f64> =
            (0..x.len()).map(|i| f64::from(x[i] + b[unravel(i, &shape)[axis]])).collect();
        assert_close("bias_add", &y, &want, 0.0);
        let mut db = vec![0.0; b.len()];
        bias_grad(view, &x, &mut db);
        let mut want = vec![0.0; b.len()];
        for (i, &v) in x.iter().enumerate() {
            want[unravel(i, &shape)[axis]] += f64::from(v);
        }
        assert_close("bias_grad", &db, &want, 1e-6);
    }

    #[test]
    fn concat_and_split_match_reference((shapes, axis, inputs) in concat_case()) {
        let outer: usize = shapes[0][..axis].iter().product();
        let refs: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
        let want = ref_concat(&shapes, axis, &inputs);
        let mut y = vec![0.0; want.len()];
        concat(outer, &refs, &mut y);
        prop_assert_eq!(&y, &want);
        let mut outs: Vec<Vec<f32>> = inputs.iter().map(|v| vec![0.0; v.len()]).collect();
        let mut out_refs: Vec<&mut [f32]> = outs.iter_mut().map(Vec::as_mut_slice).collect();
        split(outer, &y, &mut out_refs);
        prop_assert_eq!(&outs, &inputs);
    }

    #[test]
    fn transpose_matches_reference((shape, perm, x) in transpose_case(8)) {
        let mut y = vec![0.0; x.len()];
        transpose(&shape, &perm, &x, &mut y);
        prop_assert_eq!(&y, &ref_transpose(&shape, &perm, &x));
        // The inverse permutation undoes it.
        let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        let mut back = vec![0.0; x.len()];
        transpose(&out_shape, &inverse(&perm), &y, &mut back);
        prop_assert_eq!(&back, &x);
    }

    #[test]
    fn embedding_matches_reference(
        (vocab, dim, table, ids, dy) in (1usize..6, 1usize..5, 0usize..7).prop_flat_map(|(v, d, n)| {
            (Just(v), Just(d), vec(-2.0f32..2.0, v * d), vec(0..v as i32, n), vec(-2.0f32..2.0, n * d))
        })
    ) {
        let shape = Rows { rows: vocab, cols: dim };
        let mut y = vec![0.0; ids.len() * dim];
        embedding(shape, &ids, &table, &mut y).expect("ids in range");
        let want: Vec<f32> = ids.iter().flat_map(|&i| table[i as usize * dim..][..dim].to_vec()).collect();
        prop_assert_eq!(&y, &want);
        // i64 ids give the same.
        let ids64: Vec<i64> = ids.iter().map(|&i| i64::from(i)).collect();
        let mut y64 = vec![0.0; y.len()];
        embedding(shape, &ids64, &table, &mut y64).expect("ids in range");
        prop_assert_eq!(&y64, &y);

        let mut dtable = vec![f32::NAN; table.len()]; // must be overwritten
        embedding_backward(shape, &dy, &ids, &mut dtable).expect("ids in range");
        let mut want = vec![0.0; table.len()];
        for (k, &i) in ids.iter().enumerate() {
            for j in 0..dim {
                want[i as usize * dim + j] += f64::from(dy[k * dim + j]);
            }
        }
        assert_close("dtable", &dtable, &want, 1e-6);
    }

    #[test]
    fn sgd_matches_reference(
        w in vec(-2.0f32..2.0, 0..30),
        g in vec(-2.0f32..2.0, 30),
        v in vec(-2.0f32..2.0, 30),
        lr in 0.0f32..0.5,
        momentum in 0.0f32..0.99,
        wd in prop_oneof![Just(0.0f32), 0.0f32..0.1],
    ) {
        let n = w.len();
        let (g, v) = (&g[..n], &v[..n]);
        let mut w1 = w.clone();
        sgd(Sgd { lr, weight_decay: wd }, g, &mut w1);
        let want: Vec<f64> = w
            .iter()
            .zip(g)
            .map(|(&w, &g)| f64::from(w) - f64::from(lr) * (f64::from(g) + f64::from(wd) * f64::from(w)))
            .collect();
        assert_close("sgd weight", &w1, &want, 1e-6);

        let (mut w2, mut v2) = (w.clone(), v.to_vec());
        sgd_momentum(SgdMomentum { lr, momentum, weight_decay: wd }, g, &mut w2, &mut v2);
        let (lr, mo, wd) = (f64::from(lr), f64::from(momentum), f64::from(wd));
        let want_v: Vec<f64> = (0..n)
            .map(|i| mo * f64::from(v[i]) + f64::from(g[i]) + wd * f64::from(w[i]))
            .collect();
        let want_w: Vec<f64> = (0..n).map(|i| f64::from(w[i]) - lr * want_v[i]).collect();
        assert_close("velocity", &v2, &want_v, 1e-6);
        assert_close("sgd_momentum weight", &w2, &want_w, 1e-6);
    }
}

// ---------------------------------------------------------------------------------------
// Gradient checks: every backward kernel against central differences of L = Σ y · g
// (the loss itself for cross-entropy).

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn batch_norm_backward_is_the_gradient((view, noise, params) in view_case(2)) {
        let x = bn_x(view, &noise[0]);
        let (scale, shift) = (&params[0], &params[1]);
        let g: Vec<f32> = noise[1].iter().map(|v| v * 3.0).collect();
        let c = view.channels;
        let forward = |x: &[f32], scale: &[f32], shift: &[f32]| {
            let (mut y, mut m, mut s) = (vec![0.0; x.len()], vec![0.0; c], vec![0.0; c]);
            batch_norm(view, EPS, x, scale, shift, &mut y, &mut m, &mut s);
            (y, m, s)
        };
        let (_, mean, istd) = forward(&x, scale, shift);
        let (mut dx, mut dscale, mut dshift) = (vec![0.0; x.len()], vec![0.0; c], vec![0.0; c]);
        batch_norm_backward(view, &g, &x, scale, &mean, &istd, &mut dx, &mut dscale, &mut dshift);
        assert_grad("dx", &dx, &numeric_grad(&x, H, |x| dot(&forward(x, scale, shift).0, &g)));
        assert_grad("dscale", &dscale, &numeric_grad(scale, H, |s| dot(&forward(&x, s, shift).0, &g)));
        assert_grad("dshift", &dshift, &numeric_grad(shift, H, |b| dot(&forward(&x, scale, b).0, &g)));
    }

    #[test]
    fn layer_norm_backward_is_the_gradient((shape, noise, params) in rows_case(rows_strategy(), 2)) {
        // Includes D = 1, where y = shift and the x and scale gradients are 0.
        let x = ln_x(shape, &noise[0]);
        let (scale, shift) = (&params[0], &params[1]);
        let g: Vec<f32> = noise[1].iter().map(|v| v * 3.0).collect();
        let r = shape.rows;
        let forward = |x: &[f32], scale: &[f32], shift: &[f32]| {
            let (mut y, mut m, mut s) = (vec![0.0; x.len()], vec![0.0; r], vec![0.0; r]);
            layer_norm(shape, EPS, x, scale, shift, &mut y, &mut m, &mut s);
            (y, m, s)
        };
        let (_, mean, istd) = forward(&x, scale, shift);
        let d = shape.cols;
        let (mut dx, mut dscale, mut dshift) = (vec![0.0; x.len()], vec![0.0; d], vec![0.0; d]);
        layer_norm_backward(shape, &g, &x, scale, &mean, &istd, &mut dx, &mut dscale, &mut dshift);
        assert_grad("dx", &dx, &numeric_grad(&x, H, |x| dot(&forward(x, scale, shift).0, &g)));
        assert_grad("dscale", &dscale, &numeric_grad(scale, H, |s| dot(&forward(&x, s, shift).0, &g)));
        assert_grad("dshift", &dshift, &numeric_grad(shift, H, |b| dot(&forward(&x, scale, b).0, &g)));
    }

    #[test]
    fn layer_norm_backward_is_the_gradient_for_wide_rows((shape, noise, params) in rows_case(rows_strategy_3(), 2)) {
        let x = ln_x(shape, &noise[0]);
        let (scale, shift) = (&params[0], &params[1]);
        let g: Vec<f32> = noise[1].iter().map(|v| v * 3.0).collect();
        let r = shape.rows;
        let forward = |x: &[f32]| {
            let (mut y, mut m, mut s) = (vec![0.0; x.len()], vec![0.0; r], vec![0.0; r]);
            layer_norm(shape, EPS, x, scale, shift, &mut y, &mut m, &mut s);
            (y, m, s)
        };
        let (_, mean, istd) = forward(&x);
        let d = shape.cols;
        let (mut dx, mut dscale, mut dshift) = (vec![0.0; x.len()], vec![0.0; d], vec![0.0; d]);
        layer_norm_backward(shape, &g, &x, scale, &mean, &istd, &mut dx, &mut dscale, &mut dshift);
        assert_grad("dx", &dx, &numeric_grad(&x, H, |x| dot(&forward(x).0, &g)));
    }

    #[test]
    fn relu_backward_is_the_gradient((x, g) in (1usize..30).prop_flat_map(|n| (away_from_zero(n), vec(-1.0f32..1.0, n)))) {
        let fwd = |x: &[f32]| { let mut y = vec![0.0; x.len()]; relu(x, &mut y); y };
        let mut dx = vec![0.0; x.len()];
        relu_backward(&g, &fwd(&x), &mut dx);
        assert_grad("relu", &dx, &numeric_grad(&x, H, |x| dot(&fwd(x), &g)));
    }

    #[test]
    fn gelu_backward_is_the_gradient((x, g) in (1usize..30).prop_flat_map(|n| (vec(-4.0f32..4.0, n), vec(-1.0f32..1.0, n)))) {
        let fwd = |x: &[f32]| { let mut y = vec![0.0; x.len()]; gelu(x, &mut y); y };
        let mut dx = vec![0.0; x.len()];
        gelu_backward(&g, &x, &mut dx);
        assert_grad("gelu", &dx, &numeric_grad(&x, H, |x| dot(&fwd(x), &g)));
    }

    #[test]
    fn erf_backward_is_the_gradient((x, g) in (1usize..30).prop_flat_map(|n| (vec(-3.0f32..3.0, n), vec(-1.0f32..1.0, n)))) {
        let fwd = |x: &[f32]| { let mut y = vec![0.0; x.len()]; erf(x, &mut y); y };
        let mut dx = vec![0.0; x.len()];
        erf_backward(&g, &x, &mut dx);
        assert_grad("erf", &dx, &numeric_grad(&x, H, |x| dot(&fwd(x), &g)));
    }

    #[test]
    fn tanh_backward_is_the_gradient((x, g) in (1usize..30).prop_flat_map(|n| (vec(-3.0f32..3.0, n), vec(-1.0f32..1.0, n)))) {
        let fwd = |x: &[f32]| { let mut y = vec![0.0; x.len()]; tanh(x, &mut y); y };
        let mut dx = vec![0.0; x.len()];
        tanh_backward(&g, &fwd(&x), &mut dx);
        assert_grad("tanh", &dx, &numeric_grad(&x, H, |x| dot(&fwd(x), &g)));
    }

    #[test]
    fn softmax_backward_is_the_gradient((shape, noise, _p) in rows_case(rows_strategy(), 2)) {
        let x: Vec<f32> = noise[0].iter().map(|v| v * 10.0).collect();
        let g: Vec<f32> = noise[1].iter().map(|v| v * 3.0).collect();
        let fwd = |x: &[f32]| { let mut y = vec![0.0; x.len()]; softmax(shape, x, &mut y); y };
        let mut dx = vec![0.0; x.len()];
        softmax_backward(shape, &g, &fwd(&x), &mut dx);
        assert_grad("softmax", &dx, &numeric_grad(&x, H, |x| dot(&fwd(x), &g)));
    }

    #[test]
    fn cross_entropy_backward_is_the_gradient(
        (shape, logits, labels) in rows_strategy().prop_flat_map(|s| {
            (Just(s), vec(-3.0f32..3.0, s.numel()), vec(0..s.cols as i32, s.rows))
        })
    ) {
        let fwd = |x: &[f32]| {
            let (mut loss, mut p) = ([0.0f32], vec![0.0; x.len()]);
            softmax_cross_entropy(shape, x, &labels, &mut loss, &mut p).expect("labels in range");
            (f64::from(loss[0]), p)
        };
        let mut dl = vec![0.0; logits.len()];
        softmax_cross_entropy_backward(shape, &fwd(&logits).1, &labels, &mut dl).expect("labels in range");
        assert_grad("dlogits", &dl, &numeric_grad(&logits, H, |x| fwd(x).0));
    }

    #[test]
    fn embedding_backward_is_the_gradient(
        (vocab, dim, table, ids, g) in (1usize..5, 1usize..4, 1usize..6).prop_flat_map(|(v, d, n)| {
            (Just(v), Just(d), vec(-2.0f32..2.0, v * d), vec(0..v as i32, n), vec(-2.0f32..2.0, n * d))
        })
    ) {
        let shape = Rows { rows: vocab, cols: dim };
        let fwd = |t: &[f32]| {
            let mut y = vec![0.0; ids.len() * dim];
            embedding(shape, &ids, t, &mut y).expect("ids in range");
            y
        };
        let mut dtable = vec![0.0; table.len()];
        embedding_backward(shape, &g, &ids, &mut dtable).expect("ids in range");
        assert_grad("dtable", &dtable, &numeric_grad(&table, H, |t| dot(&fwd(t), &g)));
    }

    #[test]
    fn bias_grad_is_the_gradient_of_bias_add(
        (view, x, b, g) in view_strategy().prop_flat_map(|v| {
            (Just(v), vec(-2.0f32..2.0, v.numel()), vec(-2.0f32..2.0, v.channels), vec(-2.0f32..2.0, v.numel()))
        })
    ) {
        let fwd = |b: &[f32]| { let mut y = vec![0.0; x.len()]; bias_add(view, &x, b, &mut y); y };
        let mut db = vec![0.0; b.len()];
        bias_grad(view, &g, &mut db);
        assert_grad("dbias", &db, &numeric_grad(&b, H, |b| dot(&fwd(b), &g)));
    }

    #[test]
    fn split_is_the_gradient_of_concat(
        ((shapes, axis, inputs), seed) in (concat_case(), vec(-2.0f32..2.0, 400))
    ) {
        let outer: usize = shapes[0][..axis].iter().product();
        let total: usize = inputs.iter().map(Vec::len).sum();
        let g = &seed[..total.min(seed.len())];
        prop_assume!(g.len() == total);
        let mut grads: Vec<Vec<f32>> = inputs.iter().map(|v| vec![0.0; v.len()]).collect();
        let mut refs: Vec<&mut [f32]> = grads.iter_mut().map(Vec::as_mut_slice).collect();
        split(outer, g, &mut refs);
        for (k, input) in inputs.iter().enumerate() {
            let loss = |xk: &[f32]| {
                let ins: Vec<&[f32]> = inputs.iter().enumerate().map(|(i, v)| if i == k { xk } else { v.as_slice() }).collect();
                let mut y = vec![0.0; total];
                concat(outer, &ins, &mut y);
                dot(&y, g)
            };
            assert_grad("concat input", &grads[k], &numeric_grad(input, H, loss));
        }
    }

    #[test]
    fn inverse_transpose_is_the_gradient((shape, perm, x) in transpose_case(5), seed in vec(-2.0f32..2.0, 243)) {
        let g = &seed[..x.len()];
        let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        let fwd = |x: &[f32]| { let mut y = vec![0.0; x.len()]; transpose(&shape, &perm, x, &mut y); y };
        let mut dx = vec![0.0; x.len()];
        transpose(&out_shape, &inverse(&perm), g, &mut dx);
        assert_grad("transpose", &dx, &numeric_grad(&x, H, |x| dot(&fwd(x), g)));
    }
}

// ---------------------------------------------------------------------------------------
// Error paths.

#[test]
fn out_of_range_labels_are_errors_and_nothing_is_written() {
    let shape = Rows { rows: 2, cols: 3 };
    let logits = [0.1f32, 0.2, 0.3, 0.4, 0.5, 0.6];
    for (labels, bad) in [([0i32, 3], 3i64), ([-1, 0], -1)] {
        let (mut loss, mut probs) = ([7.0f32], [7.0f32; 6]);
        let err = softmax_cross_entropy(shape, &logits, &labels, &mut loss, &mut probs).expect_err("bad label");
        assert_eq!(err, KernelError::IndexOutOfRange { what: "label", index: bad, bound: 3 });
        assert_eq!(err.to_string(), format!("label {bad} is out of range [0, 3)"));
        assert_eq!((loss, probs), ([7.0], [7.0; 6]));
        let mut dl = [7.0f32; 6];
        let err = softmax_cross_entropy_backward(shape, &logits, &labels, &mut dl).expect_err("bad label");
        assert_eq!(err, KernelError::IndexOutOfRange { what: "label", index: bad, bound: 3 });
        assert_eq!(dl, [7.0; 6]);
    }
    // i64 labels beyond i32.
    let labels = [0i64, 1 << 40];
    let err = softmax_cross_entropy(shape, &logits, &labels, &mut [0.0], &mut [0.0; 6]).expect_err("bad label");
    assert_eq!(err, KernelError::IndexOutOfRange { what: "label", index: 1 << 40, bound: 3 });
}

#[test]
fn out_of_range_ids_are_errors_and_nothing_is_written() {
    let shape = Rows { rows: 4, cols: 2 };
    let table = [1.0f32; 8];
    for (ids, bad) in [([0i32, 4, 1], 4i64), ([2, -3, 9], -3)] {
        let mut y = [7.0f32; 6];
        let err = embedding(shape, &ids, &table, &mut y).expect_err("bad id");
        assert_eq!(err, KernelError::IndexOutOfRange { what: "embedding id", index: bad, bound: 4 });
        assert_eq!(y, [7.0; 6]);
        let mut dtable = [7.0f32; 8];
        let err = embedding_backward(shape, &[1.0; 6], &ids, &mut dtable).expect_err("bad id");
        assert_eq!(err, KernelError::IndexOutOfRange { what: "embedding id", index: bad, bound: 4 });
        assert_eq!(dtable, [7.0; 8]);
    }
    let err = embedding(shape, &[i64::MIN], &table, &mut [0.0; 2]).expect_err("bad id");
    assert_eq!(err, KernelError::IndexOutOfRange { what: "embedding id", index: i64::MIN, bound: 4 });
    // An empty vocabulary has no valid id.
    let err = embedding(Rows { rows: 0, cols: 2 }, &[0i32], &[], &mut [0.0; 2]).expect_err("empty vocabulary");
    assert_eq!(err, KernelError::IndexOutOfRange { what: "embedding id", index: 0, bound: 0 });
}

// ---------------------------------------------------------------------------------------
// Degenerate sizes.

#[test]
fn layer_norm_with_one_column_outputs_the_shift_and_has_no_x_gradient() {
    let shape = Rows { rows: 3, cols: 1 };
    let x = [5.0f32, -2.0, 0.25];
    let (scale, shift) = ([3.0f32], [0.5f32]);
    let (mut y, mut mean, mut istd) = ([0.0; 3], [0.0; 3], [0.0; 3]);
    layer_norm(shape, EPS, &x, &scale, &shift, &mut y, &mut mean, &mut istd);
    assert_eq!(y, [0.5; 3]);
    assert_eq!(mean, x);
    let want_istd = (1.0 / f64::from(EPS).sqrt()) as f32;
    assert_eq!(istd, [want_istd; 3]);
    let (mut dx, mut ds, mut db) = ([9.0; 3], [9.0], [9.0]);
    layer_norm_backward(shape, &[1.0, 2.0, 3.0], &x, &scale, &mean, &istd, &mut dx, &mut ds, &mut db);
    assert_eq!((dx, ds, db), ([0.0; 3], [0.0], [6.0]));
}

#[test]
fn batch_norm_with_one_element_per_channel_outputs_the_shift() {
    let view = ChannelView { outer: 1, channels: 2, inner: 1 };
    let (mut y, mut mean, mut istd) = ([0.0; 2], [0.0; 2], [0.0; 2]);
    batch_norm(view, EPS, &[4.0, -1.0], &[2.0, 2.0], &[0.1, 0.2], &mut y, &mut mean, &mut istd);
    assert_eq!((y, mean), ([0.1, 0.2], [4.0, -1.0]));
    let (mut dx, mut ds, mut db) = ([9.0; 2], [9.0; 2], [9.0; 2]);
    batch_norm_backward(view, &[1.0, 2.0], &[4.0, -1.0], &[2.0, 2.0], &mean, &istd, &mut dx, &mut ds, &mut db);
    assert_eq!((dx, ds, db), ([0.0; 2], [0.0; 2], [1.0, 2.0]));
}

#[test]
fn empty_tensors_are_no_ops() {
    let view = ChannelView { outer: 0, channels: 3, inner: 4 };
    let (mut mean, mut istd) = ([9.0; 3], [9.0; 3]);
    batch_norm(view, 0.25, &[], &[1.0; 3], &[0.0; 3], &mut [], &mut mean, &mut istd);
    assert_eq!((mean, istd), ([0.0; 3], [2.0; 3]));
    let mut db = [9.0; 3];
    bias_grad(view, &[], &mut db);
    assert_eq!(db, [0.0; 3]);
    let empty_rows = Rows { rows: 0, cols: 5 };
    let mut loss = [9.0];
    softmax_cross_entropy::<i32>(empty_rows, &[], &[], &mut loss, &mut []).expect("no labels");
    assert_eq!(loss, [0.0]);
    softmax(empty_rows, &[], &mut []);
    let (mut ds, mut dsh) = ([9.0; 5], [9.0; 5]);
    layer_norm_backward(empty_rows, &[], &[], &[1.0; 5], &[], &[], &mut [], &mut ds, &mut dsh);
    assert_eq!((ds, dsh), ([0.0; 5], [0.0; 5]));
    let mut dtable = [9.0f32; 6];
    embedding_backward::<i32>(Rows { rows: 3, cols: 2 }, &[], &[], &mut dtable).expect("no ids");
    assert_eq!(dtable, [0.0; 6]);
    transpose::<f32>(&[2, 0, 3], &[2, 1, 0], &[], &mut []);
    concat::<f32>(0, &[&[], &[]], &mut []);
    concat::<f32>(3, &[&[1.0, 2.0, 3.0], &[]], &mut [0.0; 3]);
}

#[test]
fn softmax_of_one_column_is_one_and_survives_huge_logits() {
    let mut y = [0.0; 3];
    softmax(Rows { rows: 3, cols: 1 }, &[-1e30, 0.0, 88.0], &mut y);
    assert_eq!(y, [1.0; 3]);
    let mut y = [0.0; 2];
    softmax(Rows { rows: 1, cols: 2 }, &[1e30, 1e30 - 1e24], &mut y);
    assert!(y.iter().all(|v| v.is_finite()), "{y:?}");
    let (mut loss, mut p) = ([0.0], [0.0; 2]);
    softmax_cross_entropy(Rows { rows: 1, cols: 2 }, &[1000.0, -1000.0], &[1i32], &mut loss, &mut p).expect("ok");
    assert_eq!(loss, [2000.0]); // finite: log-sum-exp, not log(p)
}

// ---------------------------------------------------------------------------------------
// Tensors above the parallel threshold: the rayon paths against the references, and
// bit-identical results from run to run.

// The sizes below must exceed PAR_CHUNK.
const _: () = assert!(PAR_CHUNK < 20_000);

#[test]
fn parallel_paths_match_the_references() {
    // Batch norm, inner > 1 and inner = 1 (runs of channels cut across tasks).
    for view in [ChannelView { outer: 3, channels: 5, inner: 1500 }, ChannelView { outer: 3001, channels: 7, inner: 1 }]
    {
        let n = view.numel();
        let x: Vec<f32> = noise(n, 1).iter().map(|v| v * 2.0 + 10.0).collect(); // a mean far from 0
        let (scale, shift) = (noise(view.channels, 2), noise(view.channels, 3));
        let (mut y, mut mean, mut istd) = (vec![0.0; n], vec![0.0; view.channels], vec![0.0; view.channels]);
        batch_norm(view, EPS, &x, &scale, &shift, &mut y, &mut mean, &mut istd);
        let (ry, rm, ri) = ref_batch_norm(view, f64::from(EPS), &x, &scale, &shift);
        assert_close("bn y", &y, &ry, 1e-4);
        assert_close("bn mean", &mean, &rm, 1e-6);
        assert_close("bn inv_std", &istd, &ri, 1e-5);
        let dy = noise(n, 4);
        let (mut dx, mut ds, mut db) = (vec![0.0; n], vec![0.0; view.channels], vec![0.0; view.channels]);
        batch_norm_backward(view, &dy, &x, &scale, &mean, &istd, &mut dx, &mut ds, &mut db);
        let (rdx, rds, rdb) = ref_batch_norm_backward(view, &dy, &x, &scale, &mean, &istd);
        assert_close("bn dx", &dx, &rdx, 1e-4);
        assert_close("bn dscale", &ds, &rds, 1e-4);
        assert_close("bn dshift", &db, &rdb, 1e-4);
        let mut again = vec![0.0; n];
        batch_norm_backward(view, &dy, &x, &scale, &mean, &istd, &mut again, &mut ds.clone(), &mut db.clone());
        assert_eq!(again, dx, "batch_norm_backward is not deterministic");

        let mut dbias = vec![0.0; view.channels];
        bias_grad(view, &dy, &mut dbias);
        assert_close("bias_grad", &dbias, &rdb, 1e-5);
        let mut yb = vec![0.0; n];
        bias_add(view, &x, &scale, &mut yb);
        let want: Vec<f64> = (0..n).map(|k| f64::from(x[k] + scale[(k / view.inner) % view.channels])).collect();
        assert_close("bias_add", &yb, &want, 0.0);
    }

    // Row ops: layer norm, softmax, cross-entropy.
    let shape = Rows { rows: 301, cols: 70 };
    let n = shape.numel();
    let x = noise(n, 5);
    let (scale, shift) = (noise(70, 6), noise(70, 7));
    let (mut y, mut mean, mut istd) = (vec![0.0; n], vec![0.0; 301], vec![0.0; 301]);
    layer_norm(shape, EPS, &x, &scale, &shift, &mut y, &mut mean, &mut istd);
    let (ry, rm, ri) = ref_layer_norm(shape, f64::from(EPS), &x, &scale, &shift);
    assert_close("ln y", &y, &ry, 1e-4);
    assert_close("ln mean", &mean, &rm, 1e-6);
    assert_close("ln inv_std", &istd, &ri, 1e-5);
    let dy = noise(n, 8);
    let (mut dx, mut ds, mut db) = (vec![0.0; n], vec![0.0; 70], vec![0.0; 70]);
    layer_norm_backward(shape, &dy, &x, &scale, &mean, &istd, &mut dx, &mut ds, &mut db);
    let (rdx, rds, rdb) = ref_layer_norm_backward(shape, &dy, &x, &scale, &mean, &istd);
    assert_close("ln dx", &dx, &rdx, 1e-4);
    assert_close("ln dscale", &ds, &rds, 1e-4);
    assert_close("ln dshift", &db, &rdb, 1e-4);

    let logits: Vec<f32> = x.iter().map(|v| v * 5.0).collect();
    let mut p = vec![0.0; n];
    softmax(shape, &logits, &mut p);
    assert_close("softmax", &p, &ref_softmax(shape, &logits), 1e-6);
    let labels: Vec<i32> = (0..301).map(|r| r * 7 % 70).collect();
    let (mut loss, mut probs) = ([0.0], vec![0.0; n]);
    softmax_cross_entropy(shape, &logits, &labels, &mut loss, &mut probs).expect("labels in range");
    assert_eq!(probs, p);
    let want: f64 =
        labels.iter().enumerate().map(|(r, &l)| -f64::from(p[r * 70 + l as usize]).ln()).sum::<f64>() / 301.0;
    assert_close("loss", &loss, &[want], 1e-5);

    // Elementwise and the optimizer.
    let (a, b) = (noise(20_001, 9), noise(20_001, 10));
    let mut c = vec![0.0; a.len()];
    add(&a, &b, &mut c);
    assert!(c.iter().zip(a.iter().zip(&b)).all(|(&c, (&a, &b))| c == a + b));
    gelu(&a, &mut c);
    assert_close("gelu", &c, &a.iter().map(|&v| ref_gelu(f64::from(v))).collect::<Vec<_>>(), 1e-6);
    let (mut w, mut v) = (a.clone(), b.clone());
    sgd_momentum(SgdMomentum { lr: 0.1, momentum: 0.9, weight_decay: 0.01 }, &c, &mut w, &mut v);
    for i in [0, 16_383, 16_384, 20_000] {
        let vi = 0.9 * b[i] + (c[i] + 0.01 * a[i]);
        assert_eq!((v[i], w[i]), (vi, a[i] - 0.1 * vi), "element {i}");
    }

    // Data movement: the BERT head transpose, a 2-D transpose, concat/split both ways.
    let shape4 = [2, 40, 4, 64];
    let x4 = noise(shape4.iter().product(), 11);
    for perm in [[0, 2, 1, 3], [0, 2, 3, 1], [3, 1, 2, 0]] {
        let mut y4 = vec![0.0; x4.len()];
        transpose(&shape4, &perm, &x4, &mut y4);
        assert_eq!(y4, ref_transpose(&shape4, &perm, &x4), "perm {perm:?}");
    }
    let shapes = [vec![3, 5000], vec![3, 2], vec![3, 700]];
    let inputs: Vec<Vec<f32>> = shapes.iter().enumerate().map(|(k, s)| noise(s[0] * s[1], 20 + k as u64)).collect();
    let refs: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
    for (outer, shapes) in [(3, shapes.to_vec()), (1, shapes.iter().map(|s| vec![s[0] * s[1]]).collect())] {
        let axis = shapes[0].len() - 1;
        let want = ref_concat(&shapes, axis, &inputs);
        let mut y = vec![0.0; want.len()];
        concat(outer, &refs, &mut y);
        assert_eq!(y, want);
        let mut outs: Vec<Vec<f32>> = inputs.iter().map(|v| vec![0.0; v.len()]).collect();
        let mut out_refs: Vec<&mut [f32]> = outs.iter_mut().map(Vec::as_mut_slice).collect();
        split(outer, &y, &mut out_refs);
        assert_eq!(outs, inputs);
    }
    let (vocab, dim) = (3000, 8);
    let ids: Vec<i32> = (0..500).map(|k| (k * 37 % vocab) as i32).chain([5, 5, 2999]).collect();
    let dy = noise(ids.len() * dim, 12);
    let mut dtable = vec![f32::NAN; vocab * dim];
    embedding_backward(Rows { rows: vocab, cols: dim }, &dy, &ids, &mut dtable).expect("ids in range");
    let mut want = vec![0.0f64; vocab * dim];
    for (k, &i) in ids.iter().enumerate() {
        for j in 0..dim {
            want[i as usize * dim + j] += f64::from(dy[k * dim + j]);
        }
    }
    assert_close("dtable", &dtable, &want, 1e-6);
}

// ---------------------------------------------------------------------------------------
// Sigmoid, clip, dropout, broadcast add/mul with sum_to, RMS norm: references, property
// tests, gradient checks and the parallel paths.

fn ref_sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// SplitMix64 as a sequential generator (its reference form): dropout's mask draws its
/// `i`-th element from the `i`-th output.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The mask: element i kept when the top 32 bits of draw i are at least ratio · 2^32.
fn ref_mask(n: usize, ratio: f64, seed: u64) -> Vec<u8> {
    let mut rng = SplitMix64(seed);
    let threshold = (ratio * 4_294_967_296.0).round() as u64;
    (0..n).map(|_| u8::from(rng.next() >> 32 >= threshold)).collect()
}

/// `b`'s flat index for `a`'s flat index `i`, `b` broadcast from the right.
fn broadcast_index(i: usize, a: &[usize], b: &[usize]) -> usize {
    let idx = unravel(i, a);
    let offset = a.len() - b.len();
    let bidx: Vec<usize> = b.iter().enumerate().map(|(k, &d)| if d == 1 { 0 } else { idx[offset + k] }).collect();
    ravel(&bidx, b)
}

fn ref_broadcast(a_shape: &[usize], b_shape: &[usize], a: &[f32], b: &[f32], f: impl Fn(f64, f64) -> f64) -> Vec<f64> {
    (0..a.len()).map(|i| f(f64::from(a[i]), f64::from(b[broadcast_index(i, a_shape, b_shape)]))).collect()
}

fn ref_sum_to(a_shape: &[usize], b_shape: &[usize], dy: &[f32]) -> Vec<f64> {
    let mut y = vec![0.0; b_shape.iter().product()];
    for (i, &v) in dy.iter().enumerate() {
        y[broadcast_index(i, a_shape, b_shape)] += f64::from(v);
    }
    y
}

/// A shape `a` (rank 0 to 4) and a `b` that broadcasts to it: some leading dimensions
/// dropped, some others set to 1.
fn broadcast_case() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    vec(1usize..5, 0..5)
        .prop_flat_map(|a| {
            let r = a.len();
            (Just(a), 0..=r, vec(any::<bool>(), r))
        })
        .prop_map(|(a, dropped, ones)| {
            let b = a[dropped..].iter().zip(&ones[dropped..]).map(|(&d, &one)| if one { 1 } else { d }).collect();
            (a, b)
        })
}

/// RMS norm in f64: (y, inv_rms).
fn ref_rms_norm(s: Rows, eps: f64, x: &[f32], scale: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let d = s.cols;
    let mut y = vec![0.0; x.len()];
    let mut rs = vec![];
    for r in 0..s.rows {
        let row = &x[r * d..(r + 1) * d];
        let ms = row.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / d as f64;
        let rr = 1.0 / (ms + eps).sqrt();
        for k in 0..d {
            y[r * d + k] = f64::from(row[k]) * rr * f64::from(scale[k]);
        }
        rs.push(rr);
    }
    (y, rs)
}

/// RMS norm backward in f64, from its own derivation: with x̂ = x · r and g = dy · scale,
/// ∂y_k/∂x_j = scale_k · (r · δ_kj − r³ x_k x_j / D), so dx_j = r · g_j − r³ x_j /
/// D · Σ_k g_k x_k; dscale = Σ dy · x̂.
fn ref_rms_norm_backward(s: Rows, dy: &[f32], x: &[f32], scale: &[f32], inv_rms: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let d = s.cols;
    let mut dx = vec![0.0; x.len()];
    let mut dscale = vec![0.0; d];
    for r in 0..s.rows {
        let rr = f64::from(inv_rms[r]);
        let x = |k: usize| f64::from(x[r * d + k]);
        let g = |k: usize| f64::from(dy[r * d + k]) * f64::from(scale[k]);
        let gx: f64 = (0..d).map(|k| g(k) * x(k)).sum();
        for j in 0..d {
            dx[r * d + j] = rr * g(j) - rr.powi(3) * x(j) / d as f64 * gx;
            dscale[j] += f64::from(dy[r * d + j]) * x(j) * rr;
        }
    }
    (dx, dscale)
}

/// Values away from clip's bounds (−1 and 1.5) by at least 0.1, on both sides of each.
fn away_from_bounds(n: usize) -> impl Strategy<Value = Vec<f32>> {
    vec(prop_oneof![-3.0f32..-1.1, -0.9f32..1.4, 1.6f32..3.0], n)
}

const CLIP: Clip = Clip { min: -1.0, max: 1.5 };

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn sigmoid_and_clip_match_reference(x in vec(-20.0f32..20.0, 0..40), seed in vec(-1.0f32..1.0, 40)) {
        let n = x.len();
        let dy = &seed[..n];
        let (mut y, mut dx) = (vec![0.0; n], vec![0.0; n]);

        sigmoid(&x, &mut y);
        assert_close("sigmoid", &y, &x.iter().map(|&v| ref_sigmoid(f64::from(v))).collect::<Vec<_>>(), 1e-6);
        sigmoid_backward(dy, &y, &mut dx);
        let want: Vec<f64> =
            y.iter().zip(dy).map(|(&s, &g)| f64::from(g) * f64::from(s) * (1.0 - f64::from(s))).collect();
        assert_close("sigmoid_backward", &dx, &want, 1e-6);

        // ReLU6 and a clip with negative bounds, both inclusive.
        for p in [Clip { min: 0.0, max: 6.0 }, CLIP] {
            clip(p, &x, &mut y);
            let want: Vec<f64> = x.iter().map(|&v| f64::from(v.max(p.min).min(p.max))).collect();
            assert_close("clip", &y, &want, 0.0);
            clip_backward(p, dy, &x, &mut dx);
            let want: Vec<f64> =
                x.iter().zip(dy).map(|(&v, &g)| if p.min <= v && v <= p.max { f64::from(g) } else { 0.0 }).collect();
            assert_close("clip_backward", &dx, &want, 0.0);
        }
    }

    #[test]
    fn dropout_matches_reference(
        x in vec(-4.0f32..4.0, 0..300),
        ratio in prop_oneof![Just(0.0), 0.0f64..0.95],
        seed in any::<u64>(),
    ) {
        let n = x.len();
        let p = Dropout { ratio, seed };
        let (mut y, mut mask) = (vec![0.0; n], vec![7u8; n]);
        dropout(p, &x, &mut y, &mut mask);
        let want_mask = ref_mask(n, ratio, seed);
        prop_assert_eq!(&mask, &want_mask);
        let keep = 1.0 / (1.0 - ratio);
        let want: Vec<f64> = x.iter().zip(&mask).map(|(&v, &m)| f64::from(v) * f64::from(m) * keep).collect();
        assert_close("dropout", &y, &want, 1e-6);
        if ratio == 0.0 {
            prop_assert_eq!(&y, &x);
        }
        // The same seed, the same mask; another seed, another (for more than a few elements).
        let (mut y2, mut mask2) = (vec![0.0; n], vec![0u8; n]);
        dropout(p, &x, &mut y2, &mut mask2);
        prop_assert_eq!((&y2, &mask2), (&y, &mask));
        if n >= 64 && ratio > 0.2 {
            dropout(Dropout { ratio, seed: seed ^ 1 }, &x, &mut y2, &mut mask2);
            prop_assert_ne!(&mask2, &mask);
        }

        let dy: Vec<f32> = x.iter().map(|v| v * 0.5 - 0.25).collect();
        let mut dx = vec![0.0; n];
        dropout_backward(Dropout { ratio, seed: 0 }, &dy, &mask, &mut dx);
        let want: Vec<f64> = dy.iter().zip(&mask).map(|(&g, &m)| f64::from(g) * f64::from(m) * keep).collect();
        assert_close("dropout_backward", &dx, &want, 1e-6);
    }

    #[test]
    fn broadcast_add_mul_and_sum_to_match_reference((a_shape, b_shape) in broadcast_case(), seed in any::<u64>()) {
        let bc = Broadcast::new(&a_shape, &b_shape).expect("broadcasts");
        let (na, nb) = (bc.a_numel(), bc.b_numel());
        let (a, b) = (noise(na, seed), noise(nb, seed ^ 0x55));
        let mut c = vec![f32::NAN; na];
        add_broadcast(&bc, &a, &b, &mut c);
        assert_close("add", &c, &ref_broadcast(&a_shape, &b_shape, &a, &b, |a, b| a + b), 1e-7);
        mul_broadcast(&bc, &a, &b, &mut c);
        assert_close("mul", &c, &ref_broadcast(&a_shape, &b_shape, &a, &b, |a, b| a * b), 1e-7);
        let mut y = vec![f32::NAN; nb];
        sum_to(&bc, &a, &mut y);
        assert_close("sum_to", &y, &ref_sum_to(&a_shape, &b_shape, &a), 1e-6);
        if a_shape == b_shape {
            // Identical shapes broadcast trivially, like the plain kernels.
            let mut plain = vec![0.0; na];
            mul(&a, &b, &mut plain);
            mul_broadcast(&bc, &a, &b, &mut c);
            prop_assert_eq!(&plain, &c);
            prop_assert_eq!(&y, &a);
        }
    }

    #[test]
    fn rms_norm_matches_reference((shape, noise, params) in rows_case(rows_strategy(), 2)) {
        let x = ln_x(shape, &noise[0]);
        let scale = &params[0];
        let (mut y, mut inv_rms) = (vec![0.0; x.len()], vec![0.0; shape.rows]);
        rms_norm(shape, EPS, &x, scale, &mut y, &mut inv_rms);
        let (ry, rr) = ref_rms_norm(shape, f64::from(EPS), &x, scale);
        assert_close("y", &y, &ry, 1e-5);
        assert_close("inv_rms", &inv_rms, &rr, 1e-6);

        let dy = &noise[1];
        let (mut dx, mut dscale) = (vec![0.0; x.len()], vec![0.0; shape.cols]);
        rms_norm_backward(shape, dy, &x, scale, &inv_rms, &mut dx, &mut dscale);
        let (rdx, rdscale) = ref_rms_norm_backward(shape, dy, &x, scale, &inv_rms);
        assert_close("dx", &dx, &rdx, 1e-4);
        assert_close("dscale", &dscale, &rdscale, 1e-5);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn sigmoid_backward_is_the_gradient((x, g) in (1usize..30).prop_flat_map(|n| (vec(-6.0f32..6.0, n), vec(-1.0f32..1.0, n)))) {
        let fwd = |x: &[f32]| { let mut y = vec![0.0; x.len()]; sigmoid(x, &mut y); y };
        let mut dx = vec![0.0; x.len()];
        sigmoid_backward(&g, &fwd(&x), &mut dx);
        assert_grad("sigmoid", &dx, &numeric_grad(&x, H, |x| dot(&fwd(x), &g)));
    }

    #[test]
    fn clip_backward_is_the_gradient((x, g) in (1usize..30).prop_flat_map(|n| (away_from_bounds(n), vec(-1.0f32..1.0, n)))) {
        let fwd = |x: &[f32]| { let mut y = vec![0.0; x.len()]; clip(CLIP, x, &mut y); y };
        let mut dx = vec![0.0; x.len()];
        clip_backward(CLIP, &g, &x, &mut dx);
        assert_grad("clip", &dx, &numeric_grad(&x, H, |x| dot(&fwd(x), &g)));
    }

    #[test]
    fn dropout_backward_is_the_gradient_for_its_mask(
        (x, g) in (1usize..60).prop_flat_map(|n| (vec(-2.0f32..2.0, n), vec(-1.0f32..1.0, n))),
        ratio in 0.0f64..0.9,
        seed in any::<u64>(),
    ) {
        // The mask depends on the seed and the positions only, so it is fixed while x moves.
        let p = Dropout { ratio, seed };
        let fwd = |x: &[f32]| {
            let (mut y, mut m) = (vec![0.0; x.len()], vec![0; x.len()]);
            dropout(p, x, &mut y, &mut m);
            (y, m)
        };
        let mut dx = vec![0.0; x.len()];
        dropout_backward(p, &g, &fwd(&x).1, &mut dx);
        assert_grad("dropout", &dx, &numeric_grad(&x, H, |x| dot(&fwd(x).0, &g)));
    }

    #[test]
    fn sum_to_is_the_gradient_of_a_broadcast_operand((a_shape, b_shape) in broadcast_case(), seed in any::<u64>()) {
        let bc = Broadcast::new(&a_shape, &b_shape).expect("broadcasts");
        let (na, nb) = (bc.a_numel(), bc.b_numel());
        let (a, b, g) = (noise(na, seed), noise(nb, seed ^ 0x55), noise(na, seed ^ 0xAA));
        let fwd = |a: &[f32], b: &[f32], multiply: bool| {
            let mut c = vec![0.0; na];
            if multiply { mul_broadcast(&bc, a, b, &mut c) } else { add_broadcast(&bc, a, b, &mut c) }
            c
        };
        // add: da = g, db = sum_to(g).
        let mut db = vec![0.0; nb];
        sum_to(&bc, &g, &mut db);
        assert_grad("add da", &g, &numeric_grad(&a, H, |a| dot(&fwd(a, &b, false), &g)));
        assert_grad("add db", &db, &numeric_grad(&b, H, |b| dot(&fwd(&a, b, false), &g)));
        // mul: da = g · b (b broadcast), db = sum_to(g · a).
        let mut da = vec![0.0; na];
        mul_broadcast(&bc, &g, &b, &mut da);
        let mut ga = vec![0.0; na];
        mul(&g, &a, &mut ga);
        sum_to(&bc, &ga, &mut db);
        assert_grad("mul da", &da, &numeric_grad(&a, H, |a| dot(&fwd(a, &b, true), &g)));
        assert_grad("mul db", &db, &numeric_grad(&b, H, |b| dot(&fwd(&a, b, true), &g)));
    }

    #[test]
    fn rms_norm_backward_is_the_gradient((shape, noise, params) in rows_case(rows_strategy(), 2)) {
        let x = ln_x(shape, &noise[0]);
        let scale = &params[0];
        let g: Vec<f32> = noise[1].iter().map(|v| v * 3.0).collect();
        let forward = |x: &[f32], scale: &[f32]| {
            let (mut y, mut r) = (vec![0.0; x.len()], vec![0.0; shape.rows]);
            rms_norm(shape, EPS, x, scale, &mut y, &mut r);
            (y, r)
        };
        let (_, inv_rms) = forward(&x, scale);
        let (mut dx, mut dscale) = (vec![0.0; x.len()], vec![0.0; shape.cols]);
        rms_norm_backward(shape, &g, &x, scale, &inv_rms, &mut dx, &mut dscale);
        assert_grad("dx", &dx, &numeric_grad(&x, H, |x| dot(&forward(x, scale).0, &g)));
        assert_grad("dscale", &dscale, &numeric_grad(scale, H, |s| dot(&forward(&x, s).0, &g)));
    }
}

#[test]
fn broadcasts_that_do_not_fit_are_refused() {
    assert!(Broadcast::new(&[2, 3], &[2]).is_none());
    assert!(Broadcast::new(&[3], &[2, 3]).is_none());
    assert!(Broadcast::new(&[2, 3], &[2, 3]).is_some());
    assert!(Broadcast::new(&[], &[]).is_some());
    let (mut y, mut mean) = ([9.0f32; 0], [9.0f32; 2]);
    // RMS norm of empty rows: the statistic is still written.
    rms_norm(Rows { rows: 2, cols: 0 }, 0.25, &[], &[], &mut y, &mut mean);
    assert_eq!(mean, [2.0; 2]);
    // sum_to of an empty input is zeros.
    let bc = Broadcast::new(&[0, 3], &[3]).expect("broadcasts");
    let mut s = [9.0f32; 3];
    sum_to(&bc, &[], &mut s);
    assert_eq!(s, [0.0; 3]);
}

#[test]
fn dropout_keeps_about_one_minus_ratio_and_runs_the_same_in_parallel() {
    let n = 3 * PAR_CHUNK + 17;
    let x = noise(n, 30);
    for ratio in [0.1, 0.5, 0.9] {
        let p = Dropout { ratio, seed: 42 };
        let (mut y, mut mask) = (vec![0.0; n], vec![0u8; n]);
        dropout(p, &x, &mut y, &mut mask);
        assert_eq!(mask, ref_mask(n, ratio, 42), "ratio {ratio}: chunks draw from the right counters");
        let kept = mask.iter().filter(|&&m| m == 1).count() as f64 / n as f64;
        assert!((kept - (1.0 - ratio)).abs() < 0.01, "ratio {ratio}: kept {kept}");
        let scale = p.scale();
        assert!(y.iter().zip(&x).zip(&mask).all(|((&y, &x), &m)| y == if m == 1 { x * scale } else { 0.0 }));
        let mut dx = vec![0.0; n];
        dropout_backward(p, &x, &mask, &mut dx);
        assert_eq!(dx, y, "the backward of the same values is the forward");
    }
}

#[test]
fn broadcast_and_rms_norm_parallel_paths_match_the_references() {
    // Above PAR_CHUNK: a bias-like [N, D] over [D] (sum_to with one accumulator per task),
    // a per-row [N, D] over [N, 1], a per-channel NCHW over [C, 1, 1], and a large b
    // ([2, 1, 9000] over [2, 3, 9000]: sum_to gathering per output range).
    let cases: [(&[usize], &[usize]); 5] = [
        (&[700, 40], &[40]),
        (&[700, 40], &[700, 1]),
        (&[4, 16, 30, 30], &[16, 1, 1]),
        (&[2, 3, 9000], &[2, 1, 9000]),
        (&[3, 5000, 2], &[5000, 1]),
    ];
    for (a_shape, b_shape) in cases {
        let bc = Broadcast::new(a_shape, b_shape).expect("broadcasts");
        let (na, nb) = (bc.a_numel(), bc.b_numel());
        assert!(na > PAR_CHUNK);
        let (a, b) = (noise(na, 40), noise(nb, 41));
        let mut c = vec![0.0; na];
        mul_broadcast(&bc, &a, &b, &mut c);
        assert_close("mul", &c, &ref_broadcast(a_shape, b_shape, &a, &b, |a, b| a * b), 1e-7);
        add_broadcast(&bc, &a, &b, &mut c);
        assert_close("add", &c, &ref_broadcast(a_shape, b_shape, &a, &b, |a, b| a + b), 1e-7);
        let mut y = vec![0.0; nb];
        sum_to(&bc, &a, &mut y);
        assert_close("sum_to", &y, &ref_sum_to(a_shape, b_shape, &a), 1e-5);
        let mut again = vec![0.0; nb];
        sum_to(&bc, &a, &mut again);
        assert_eq!(again, y, "sum_to is not deterministic for {a_shape:?} over {b_shape:?}");
    }

    let shape = Rows { rows: 301, cols: 70 };
    let n = shape.numel();
    let (x, scale, dy) = (noise(n, 42), noise(70, 43), noise(n, 44));
    let (mut y, mut inv_rms) = (vec![0.0; n], vec![0.0; 301]);
    rms_norm(shape, EPS, &x, &scale, &mut y, &mut inv_rms);
    let (ry, rr) = ref_rms_norm(shape, f64::from(EPS), &x, &scale);
    assert_close("rms y", &y, &ry, 1e-5);
    assert_close("rms inv_rms", &inv_rms, &rr, 1e-6);
    let (mut dx, mut ds) = (vec![0.0; n], vec![0.0; 70]);
    rms_norm_backward(shape, &dy, &x, &scale, &inv_rms, &mut dx, &mut ds);
    let (rdx, rds) = ref_rms_norm_backward(shape, &dy, &x, &scale, &inv_rms);
    assert_close("rms dx", &dx, &rdx, 1e-4);
    assert_close("rms dscale", &ds, &rds, 1e-4);
    let (mut dx2, mut ds2) = (vec![0.0; n], vec![0.0; 70]);
    rms_norm_backward(shape, &dy, &x, &scale, &inv_rms, &mut dx2, &mut ds2);
    assert_eq!((dx2, ds2), (dx, ds), "rms_norm_backward is not deterministic");

    let x = noise(20_001, 45);
    let mut s = vec![0.0; x.len()];
    sigmoid(&x, &mut s);
    assert_close("sigmoid", &s, &x.iter().map(|&v| ref_sigmoid(f64::from(v))).collect::<Vec<_>>(), 1e-6);
}

// ---------------------------------------------------------------------------------------
// Hard sigmoid and hard swish: references (f64, from the definitions), property tests
// that include the kinks themselves, gradient checks away from them, and the parallel
// path.

/// ONNX's defaults (kinks at ±2.5), PyTorch's `hardsigmoid` (±3), and a negative slope
/// (t = 0 at x = 1, t = 1 at x = −3). Every kink is a multiple of 1/64, and alpha · kink
/// + beta rounds to exactly 0 or 1 in f32, so the grid below holds them all.
const HARD_SIGMOIDS: [HardSigmoid; 3] = [
    HardSigmoid { alpha: 0.2, beta: 0.5 },
    HardSigmoid { alpha: 1.0 / 6.0, beta: 0.5 },
    HardSigmoid { alpha: -0.25, beta: 0.25 },
];

fn ref_hard_sigmoid(p: HardSigmoid, x: f64) -> f64 {
    (f64::from(p.alpha) * x + f64::from(p.beta)).clamp(0.0, 1.0)
}

/// `alpha` inside the open band `0 < alpha · x + beta < 1`, else 0. With alpha widened to
/// f64, `t` at a kink of [`HARD_SIGMOIDS`] misses 0 or 1 by ~1e-8, always on the outside
/// (as the kernel's exact 0 or 1 is), and every other value of [`kinked_values`] is at
/// least |alpha|/64 from a kink.
fn ref_hard_sigmoid_grad(p: HardSigmoid, x: f64) -> f64 {
    let t = f64::from(p.alpha) * x + f64::from(p.beta);
    if 0.0 < t && t < 1.0 { f64::from(p.alpha) } else { 0.0 }
}

fn ref_hard_swish(x: f64) -> f64 {
    x * (x / 6.0 + 0.5).clamp(0.0, 1.0)
}

/// PyTorch's `hardswish_backward` (since 2.7): 0 up to −3, (2x + 3)/6 strictly between,
/// 1 from 3.
fn ref_hard_swish_grad(x: f64) -> f64 {
    if x <= -3.0 {
        0.0
    } else if x >= 3.0 {
        1.0
    } else {
        (2.0 * x + 3.0) / 6.0
    }
}

/// Multiples of 1/64 in [−8, 8] (exact in f32), with every kink of [`HARD_SIGMOIDS`] and
/// of hard swish drawn often on its own.
fn kinked_values(n: std::ops::Range<usize>) -> impl Strategy<Value = Vec<f32>> {
    let kinks = vec![-3.0f32, 3.0, -2.5, 2.5, 1.0];
    vec(prop_oneof![3 => (-512i32..=512).prop_map(|k| k as f32 / 64.0), 1 => prop::sample::select(kinks)], n)
}

/// Values at least 0.1 from the kinks at ±k, on both sides of each.
fn away_from_kinks(k: f32, n: usize) -> impl Strategy<Value = Vec<f32>> {
    vec(prop_oneof![-2.0 * k..-k - 0.1, -k + 0.1..k - 0.1, k + 0.1..2.0 * k], n)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn hard_sigmoid_and_hard_swish_match_reference(x in kinked_values(0..40), seed in vec(-1.0f32..1.0, 40)) {
        let n = x.len();
        let dy = &seed[..n];
        let (mut y, mut dx) = (vec![0.0; n], vec![0.0; n]);

        for p in HARD_SIGMOIDS {
            hard_sigmoid(p, &x, &mut y);
            assert_close("hard_sigmoid", &y, &x.iter().map(|&v| ref_hard_sigmoid(p, f64::from(v))).collect::<Vec<_>>(), 1e-6);
            hard_sigmoid_backward(p, dy, &x, &mut dx);
            let want: Vec<f64> =
                x.iter().zip(dy).map(|(&v, &g)| f64::from(g) * ref_hard_sigmoid_grad(p, f64::from(v))).collect();
            assert_close("hard_sigmoid_backward", &dx, &want, 1e-6);
        }

        hard_swish(&x, &mut y);
        assert_close("hard_swish", &y, &x.iter().map(|&v| ref_hard_swish(f64::from(v))).collect::<Vec<_>>(), 1e-6);
        hard_swish_backward(dy, &x, &mut dx);
        let want: Vec<f64> = x.iter().zip(dy).map(|(&v, &g)| f64::from(g) * ref_hard_swish_grad(f64::from(v))).collect();
        assert_close("hard_swish_backward", &dx, &want, 1e-6);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn hard_sigmoid_backward_is_the_gradient((x, g) in (1usize..30).prop_flat_map(|n| (away_from_kinks(2.5, n), vec(-1.0f32..1.0, n)))) {
        let p = HARD_SIGMOIDS[0];
        let fwd = |x: &[f32]| { let mut y = vec![0.0; x.len()]; hard_sigmoid(p, x, &mut y); y };
        let mut dx = vec![0.0; x.len()];
        hard_sigmoid_backward(p, &g, &x, &mut dx);
        assert_grad("hard_sigmoid", &dx, &numeric_grad(&x, H, |x| dot(&fwd(x), &g)));
    }

    #[test]
    fn hard_swish_backward_is_the_gradient((x, g) in (1usize..30).prop_flat_map(|n| (away_from_kinks(3.0, n), vec(-1.0f32..1.0, n)))) {
        let fwd = |x: &[f32]| { let mut y = vec![0.0; x.len()]; hard_swish(x, &mut y); y };
        let mut dx = vec![0.0; x.len()];
        hard_swish_backward(&g, &x, &mut dx);
        assert_grad("hard_swish", &dx, &numeric_grad(&x, H, |x| dot(&fwd(x), &g)));
    }
}

#[test]
fn hard_activations_take_the_documented_values_at_their_kinks() {
    // PyTorch's parameters: flat outside (−3, 3); the gradient is 0 at both kinks.
    let p = HARD_SIGMOIDS[1];
    let x = [-4.0, -3.0, 0.0, 3.0, 4.0, f32::NAN];
    let (mut y, mut dx) = ([9.0; 6], [9.0; 6]);
    hard_sigmoid(p, &x, &mut y);
    assert_eq!(y[..5], [0.0, 0.0, 0.5, 1.0, 1.0]);
    assert!(y[5].is_nan());
    hard_sigmoid_backward(p, &[2.0; 6], &x, &mut dx);
    assert_eq!(dx, [0.0, 0.0, 2.0 * p.alpha, 0.0, 0.0, 0.0]);
    // Hard swish: the outer pieces at both kinks, 0 at −3 and dy at 3.
    hard_swish(&x, &mut y);
    assert_eq!(y[..5], [0.0, 0.0, 0.0, 3.0, 4.0]);
    assert!(y[5].is_nan());
    hard_swish_backward(&[2.0; 6], &x, &mut dx);
    assert_eq!(dx, [0.0, 0.0, 1.0, 2.0, 2.0, 2.0]);
}

#[test]
fn hard_activations_parallel_paths_match_the_references() {
    let x: Vec<f32> = noise(20_001, 46).iter().map(|v| v * 6.0).collect();
    let dy = noise(x.len(), 47);
    let (mut y, mut dx) = (vec![0.0; x.len()], vec![0.0; x.len()]);
    let p = HARD_SIGMOIDS[0];
    hard_sigmoid(p, &x, &mut y);
    assert_close("hard_sigmoid", &y, &x.iter().map(|&v| ref_hard_sigmoid(p, f64::from(v))).collect::<Vec<_>>(), 1e-6);
    hard_sigmoid_backward(p, &dy, &x, &mut dx);
    let want: Vec<f64> =
        x.iter().zip(&dy).map(|(&v, &g)| f64::from(g) * ref_hard_sigmoid_grad(p, f64::from(v))).collect();
    assert_close("hard_sigmoid_backward", &dx, &want, 1e-6);
    hard_swish(&x, &mut y);
    assert_close("hard_swish", &y, &x.iter().map(|&v| ref_hard_swish(f64::from(v))).collect::<Vec<_>>(), 1e-6);
    hard_swish_backward(&dy, &x, &mut dx);
    let want: Vec<f64> = x.iter().zip(&dy).map(|(&v, &g)| f64::from(g) * ref_hard_swish_grad(f64::from(v))).collect();
    assert_close("hard_swish_backward", &dx, &want, 1e-6);
}
