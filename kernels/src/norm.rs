//! Batch normalisation (training mode, axis 1), layer normalisation and RMS
//! normalisation (last axis), forward and backward.
//!
//! Batch and layer norm save the statistics the backward pass reads: the mean and
//! `inv_std = 1/sqrt(var + epsilon)`, where `var` is the **biased** variance (divided by
//! the count, not count − 1). Sums are accumulated in f64: batch norm's in one pass over
//! data shifted by the channel's first element (the "shifted data" method, which does
//! not cancel catastrophically when the mean is large against the spread), layer norm's
//! in two passes over each row (the row is in cache for the second). RMS norm saves
//! `inv_rms = 1/sqrt(mean(x²) + epsilon)` only (there is no mean to subtract), its sum of
//! squares in f64 too.
//!
//! Degenerate sizes: a channel or row with a single element has variance 0, so
//! `inv_std = 1/sqrt(epsilon)` and the output is `shift` (x − mean is exactly 0); its
//! input gradient is 0 and `dscale` is 0, since the output does not depend on x or scale
//! (layer norm with D = 1 is this case for every row). A channel or row with no elements
//! gets mean 0 and `inv_std = 1/sqrt(epsilon)`.

use crate::tensor_ops::{
    ChannelView, PAR_CHUNK, Rows, channel_runs, for_row_groups, reduce_rows, reduce_rows_with_output, rows_per_task,
    sum_f64,
};
use multiversion::multiversion;
use rayon::prelude::*;

/// Sums of `x − k` and `(x − k)²` in f64, eight independent accumulators each (one
/// AVX-512 register; the order is fixed by the code, so every clone gives the same bits).
/// Compiled for AVX-512 and AVX2 as well as the baseline, like the other row loops here:
/// with the baseline's two-lane f64 code, batch norm ran at ~6 GB/s forward and ~10 GB/s
/// backward in a ResNet-50 training step; vectorised, at memory speed (~20 and ~26).
#[multiversion(targets("x86_64+avx512f+avx512vl+fma", "x86_64+avx2+fma"))]
fn shifted_moments(x: &[f32], k: f32) -> (f64, f64) {
    let k = f64::from(k);
    let (mut s1, mut s2) = ([0.0f64; 8], [0.0f64; 8]);
    let (chunks, tail) = x.as_chunks::<8>();
    for c in chunks {
        for i in 0..8 {
            let d = f64::from(c[i]) - k;
            s1[i] += d;
            s2[i] += d * d;
        }
    }
    let (mut a, mut b) = (s1.iter().sum::<f64>(), s2.iter().sum::<f64>());
    for &v in tail {
        let d = f64::from(v) - k;
        a += d;
        b += d * d;
    }
    (a, b)
}

/// Sums of `dy` and `dy · (x − m)` in f64; multiversioned like [`shifted_moments`].
#[multiversion(targets("x86_64+avx512f+avx512vl+fma", "x86_64+avx2+fma"))]
fn grad_moments(dy: &[f32], x: &[f32], m: f32) -> (f64, f64) {
    let m = f64::from(m);
    let (mut s1, mut s2) = ([0.0f64; 8], [0.0f64; 8]);
    let (dyc, dyt) = dy.as_chunks::<8>();
    let (xc, xt) = x.as_chunks::<8>();
    for (g, v) in dyc.iter().zip(xc) {
        for i in 0..8 {
            let g = f64::from(g[i]);
            s1[i] += g;
            s2[i] += g * (f64::from(v[i]) - m);
        }
    }
    let (mut a, mut b) = (s1.iter().sum::<f64>(), s2.iter().sum::<f64>());
    for (&g, &v) in dyt.iter().zip(xt) {
        let g = f64::from(g);
        a += g;
        b += g * (f64::from(v) - m);
    }
    (a, b)
}

/// `y = (x − m) · a + b` over one row; multiversioned so it runs 16 (or 8) lanes wide.
#[multiversion(targets("x86_64+avx512f+avx512vl+fma", "x86_64+avx2+fma"))]
fn affine_row(x: &[f32], y: &mut [f32], m: f32, a: f32, b: f32) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y = (x - m) * a + b;
    }
}

/// `dx = k1 · (dy − k2 − (x − m) · k3)` over one row; multiversioned like [`affine_row`].
#[multiversion(targets("x86_64+avx512f+avx512vl+fma", "x86_64+avx2+fma"))]
fn bn_backward_row(dy: &[f32], x: &[f32], dx: &mut [f32], m: f32, [k1, k2, k3]: [f32; 3]) {
    for ((o, &g), &v) in dx.iter_mut().zip(dy).zip(x) {
        *o = k1 * (g - k2 - (v - m) * k3);
    }
}

fn inv_std_of(var: f64, epsilon: f32) -> f32 {
    (1.0 / (var.max(0.0) + f64::from(epsilon)).sqrt()) as f32
}

/// Training-mode batch normalisation over the channels of `view` (`[N, C, rest…]` as
/// `[N, C, prod(rest)]`): per channel c, over all N and trailing positions,
/// `mean[c]`, `inv_std[c] = 1/sqrt(var[c] + epsilon)` (biased variance) and
/// `y = (x − mean[c]) · inv_std[c] · scale[c] + shift[c]`.
#[allow(clippy::too_many_arguments)] // the op's operands, in order
pub fn batch_norm(
    view: ChannelView,
    epsilon: f32,
    x: &[f32],
    scale: &[f32],
    shift: &[f32],
    y: &mut [f32],
    mean: &mut [f32],
    inv_std: &mut [f32],
) {
    let ChannelView { outer, channels, inner } = view;
    assert_eq!(x.len(), view.numel(), "x does not match the view");
    assert_eq!(y.len(), view.numel(), "y does not match the view");
    for (what, s) in [("scale", scale.len()), ("shift", shift.len()), ("mean", mean.len()), ("inv_std", inv_std.len())]
    {
        assert_eq!(s, channels, "{what} length is not the channel count");
    }
    if channels == 0 {
        return;
    }
    let count = outer * inner;
    if count == 0 {
        mean.fill(0.0);
        inv_std.fill(inv_std_of(0.0, epsilon));
        return;
    }
    // Shift of each channel: its first element.
    let shifts: Vec<f32> = (0..channels).map(|c| x[c * inner]).collect();
    let sums = reduce_rows(outer * channels, inner, 2 * channels, |acc, range| {
        let (s1, s2) = acc.split_at_mut(channels);
        channel_runs(channels, range, |c0, row, n| {
            if inner == 1 {
                for (((a, b), &v), &k) in
                    s1[c0..c0 + n].iter_mut().zip(&mut s2[c0..c0 + n]).zip(&x[row..row + n]).zip(&shifts[c0..c0 + n])
                {
                    let d = f64::from(v) - f64::from(k);
                    *a += d;
                    *b += d * d;
                }
            } else {
                for k in 0..n {
                    let (a, b) = shifted_moments(&x[(row + k) * inner..][..inner], shifts[c0 + k]);
                    s1[c0 + k] += a;
                    s2[c0 + k] += b;
                }
            }
        });
    });
    let n = count as f64;
    for c in 0..channels {
        let (m1, m2) = (sums[c] / n, sums[channels + c] / n);
        mean[c] = (f64::from(shifts[c]) + m1) as f32;
        inv_std[c] = inv_std_of(m2 - m1 * m1, epsilon);
    }
    let (mean, inv_std) = (&*mean, &*inv_std);
    normalize_rows(view, x, y, |c| (mean[c], inv_std[c] * scale[c], shift[c]));
}

/// `y = (x − m) · a + b` per channel, with `(m, a, b) = coef(c)`.
fn normalize_rows(view: ChannelView, x: &[f32], y: &mut [f32], coef: impl Fn(usize) -> (f32, f32, f32) + Sync) {
    let ChannelView { channels, inner, .. } = view;
    if inner == 1 {
        let coefs: Vec<(f32, f32, f32)> = (0..channels).map(coef).collect();
        for_row_groups(y, channels, |row0, ys| {
            let xs = &x[row0 * channels..][..ys.len()];
            for (yr, xr) in ys.chunks_exact_mut(channels).zip(xs.chunks_exact(channels)) {
                for ((y, &x), &(m, a, b)) in yr.iter_mut().zip(xr).zip(&coefs) {
                    *y = (x - m) * a + b;
                }
            }
        });
    } else {
        for_row_groups(y, inner, |row0, ys| {
            let xs = &x[row0 * inner..][..ys.len()];
            for (r, (yr, xr)) in ys.chunks_exact_mut(inner).zip(xs.chunks_exact(inner)).enumerate() {
                let (m, a, b) = coef((row0 + r) % channels);
                affine_row(xr, yr, m, a, b);
            }
        });
    }
}

/// The backward of [`batch_norm`], from the saved `mean` and `inv_std`. With M = N ·
/// prod(rest) elements per channel and `x̂ = (x − mean) · inv_std`:
/// `dshift = Σ dy`, `dscale = Σ dy · x̂`, and
/// `dx = scale · inv_std / M · (M · dy − dshift − x̂ · dscale)`.
#[allow(clippy::too_many_arguments)] // the op's operands, in order
pub fn batch_norm_backward(
    view: ChannelView,
    dy: &[f32],
    x: &[f32],
    scale: &[f32],
    mean: &[f32],
    inv_std: &[f32],
    dx: &mut [f32],
    dscale: &mut [f32],
    dshift: &mut [f32],
) {
    let ChannelView { outer, channels, inner } = view;
    for (what, len) in [("dy", dy.len()), ("x", x.len()), ("dx", dx.len())] {
        assert_eq!(len, view.numel(), "{what} does not match the view");
    }
    for (what, len) in [
        ("scale", scale.len()),
        ("mean", mean.len()),
        ("inv_std", inv_std.len()),
        ("dscale", dscale.len()),
        ("dshift", dshift.len()),
    ] {
        assert_eq!(len, channels, "{what} length is not the channel count");
    }
    if channels == 0 {
        return;
    }
    let sums = reduce_rows(outer * channels, inner, 2 * channels, |acc, range| {
        let (s1, s2) = acc.split_at_mut(channels);
        channel_runs(channels, range, |c0, row, n| {
            if inner == 1 {
                for ((((a, b), &g), &v), &m) in s1[c0..c0 + n]
                    .iter_mut()
                    .zip(&mut s2[c0..c0 + n])
                    .zip(&dy[row..row + n])
                    .zip(&x[row..row + n])
                    .zip(&mean[c0..c0 + n])
                {
                    let g = f64::from(g);
                    *a += g;
                    *b += g * (f64::from(v) - f64::from(m));
                }
            } else {
                for k in 0..n {
                    let at = (row + k) * inner;
                    let (a, b) = grad_moments(&dy[at..][..inner], &x[at..][..inner], mean[c0 + k]);
                    s1[c0 + k] += a;
                    s2[c0 + k] += b;
                }
            }
        });
    });
    let count = (outer * inner) as f64;
    // dx = k1 · (dy − k2 − (x − mean) · k3) per channel.
    let mut coefs = Vec::with_capacity(channels);
    for c in 0..channels {
        let (sdy, sdyx) = (sums[c], sums[channels + c]);
        let istd = f64::from(inv_std[c]);
        dshift[c] = sdy as f32;
        dscale[c] = (sdyx * istd) as f32;
        let (k2, k3) = if count > 0.0 { (sdy / count, sdyx * istd * istd / count) } else { (0.0, 0.0) };
        coefs.push((f64::from(scale[c]) * istd) as f32);
        coefs.push(k2 as f32);
        coefs.push(k3 as f32);
    }
    let coefs = &coefs;
    let apply = move |c: usize, g: f32, v: f32| {
        let (k1, k2, k3) = (coefs[3 * c], coefs[3 * c + 1], coefs[3 * c + 2]);
        k1 * (g - k2 - (v - mean[c]) * k3)
    };
    if inner == 1 {
        for_row_groups(dx, channels, |row0, out| {
            let at = row0 * channels;
            for (r, o) in out.chunks_exact_mut(channels).enumerate() {
                let (g, v) = (&dy[at + r * channels..][..channels], &x[at + r * channels..][..channels]);
                for (c, ((o, &g), &v)) in o.iter_mut().zip(g).zip(v).enumerate() {
                    *o = apply(c, g, v);
                }
            }
        });
    } else {
        for_row_groups(dx, inner, |row0, out| {
            for (r, o) in out.chunks_exact_mut(inner).enumerate() {
                let row = row0 + r;
                let c = row % channels;
                let (g, v) = (&dy[row * inner..][..inner], &x[row * inner..][..inner]);
                bn_backward_row(g, v, o, mean[c], [coefs[3 * c], coefs[3 * c + 1], coefs[3 * c + 2]]);
            }
        });
    }
}

/// Layer normalisation over the last axis of `[rows, D]`: per row, `mean`, `inv_std =
/// 1/sqrt(var + epsilon)` (biased variance) and `y = (x − mean) · inv_std · scale +
/// shift` with `scale` and `shift` of length D. For D = 1 see the module documentation.
#[allow(clippy::too_many_arguments)] // the op's operands, in order
pub fn layer_norm(
    shape: Rows,
    epsilon: f32,
    x: &[f32],
    scale: &[f32],
    shift: &[f32],
    y: &mut [f32],
    mean: &mut [f32],
    inv_std: &mut [f32],
) {
    let Rows { rows, cols: d } = shape;
    assert_eq!(x.len(), shape.numel(), "x does not match the shape");
    assert_eq!(y.len(), shape.numel(), "y does not match the shape");
    assert_eq!(scale.len(), d, "scale length is not D");
    assert_eq!(shift.len(), d, "shift length is not D");
    assert_eq!(mean.len(), rows, "mean length is not the row count");
    assert_eq!(inv_std.len(), rows, "inv_std length is not the row count");
    if d == 0 {
        mean.fill(0.0);
        inv_std.fill(inv_std_of(0.0, epsilon));
        return;
    }
    let run = |x: &[f32], y: &mut [f32], mean: &mut [f32], inv_std: &mut [f32]| {
        for (((xr, yr), m_out), s_out) in x.chunks_exact(d).zip(y.chunks_exact_mut(d)).zip(mean).zip(inv_std) {
            let n = d as f64;
            let m = sum_f64(xr) / n;
            let mut acc = [0.0f64; 4];
            let chunks = xr.chunks_exact(4);
            let tail = chunks.remainder();
            for c in chunks {
                for i in 0..4 {
                    let t = f64::from(c[i]) - m;
                    acc[i] += t * t;
                }
            }
            let mut v: f64 = acc.iter().sum();
            for &t in tail {
                let t = f64::from(t) - m;
                v += t * t;
            }
            let (m, istd) = (m as f32, inv_std_of(v / n, epsilon));
            (*m_out, *s_out) = (m, istd);
            for (((y, &v), &g), &b) in yr.iter_mut().zip(xr).zip(scale).zip(shift) {
                *y = (v - m) * istd * g + b;
            }
        }
    };
    if x.len() <= PAR_CHUNK {
        run(x, y, mean, inv_std);
    } else {
        let per = rows_per_task(d);
        y.par_chunks_mut(per * d)
            .zip(x.par_chunks(per * d))
            .zip(mean.par_chunks_mut(per))
            .zip(inv_std.par_chunks_mut(per))
            .for_each(|(((y, x), m), s)| run(x, y, m, s));
    }
}

/// The backward of [`layer_norm`]. Per row, with `x̂ = (x − mean) · inv_std` and
/// `g = dy · scale`: `dx = inv_std · (g − mean(g) − x̂ · mean(g · x̂))` (means over the
/// row); over all rows, `dscale = Σ dy · x̂` and `dshift = Σ dy`.
#[allow(clippy::too_many_arguments)] // the op's operands, in order
pub fn layer_norm_backward(
    shape: Rows,
    dy: &[f32],
    x: &[f32],
    scale: &[f32],
    mean: &[f32],
    inv_std: &[f32],
    dx: &mut [f32],
    dscale: &mut [f32],
    dshift: &mut [f32],
) {
    let Rows { rows, cols: d } = shape;
    for (what, len) in [("dy", dy.len()), ("x", x.len()), ("dx", dx.len())] {
        assert_eq!(len, shape.numel(), "{what} does not match the shape");
    }
    for (what, len) in [("scale", scale.len()), ("dscale", dscale.len()), ("dshift", dshift.len())] {
        assert_eq!(len, d, "{what} length is not D");
    }
    assert_eq!(mean.len(), rows, "mean length is not the row count");
    assert_eq!(inv_std.len(), rows, "inv_std length is not the row count");
    if d == 0 {
        return;
    }
    let sums = reduce_rows_with_output(dx, rows, d, 2 * d, |acc, row0, out| {
        let (ds, db) = acc.split_at_mut(d);
        for (r, o) in out.chunks_exact_mut(d).enumerate() {
            let row = row0 + r;
            let (g, v) = (&dy[row * d..][..d], &x[row * d..][..d]);
            let (m, istd) = (mean[row], inv_std[row]);
            let (mut sg, mut sgx) = (0.0f64, 0.0f64);
            for (((a, b), (&g, &v)), &w) in ds.iter_mut().zip(db.iter_mut()).zip(g.iter().zip(v)).zip(scale) {
                let xh = (v - m) * istd;
                *a += f64::from(g) * f64::from(xh);
                *b += f64::from(g);
                let gs = f64::from(g * w);
                sg += gs;
                sgx += gs * f64::from(xh);
            }
            let n = d as f64;
            let (mg, mgx) = ((sg / n) as f32, (sgx / n) as f32);
            for (((o, &g), &v), &w) in o.iter_mut().zip(g).zip(v).zip(scale) {
                let xh = (v - m) * istd;
                *o = istd * (g * w - mg - xh * mgx);
            }
        }
    });
    for k in 0..d {
        dscale[k] = sums[k] as f32;
        dshift[k] = sums[d + k] as f32;
    }
}

/// RMS normalisation over the last axis of `[rows, D]` (onnxruntime's
/// SimplifiedLayerNormalization, the RMSNorm of T5 and Llama): per row, `inv_rms =
/// 1/sqrt(mean(x²) + epsilon)` and `y = x · inv_rms · scale`, with `scale` of length D.
/// The mean of squares is accumulated in f64. A row of D = 0 gets `inv_rms =
/// 1/sqrt(epsilon)`.
pub fn rms_norm(shape: Rows, epsilon: f32, x: &[f32], scale: &[f32], y: &mut [f32], inv_rms: &mut [f32]) {
    let Rows { rows, cols: d } = shape;
    assert_eq!(x.len(), shape.numel(), "x does not match the shape");
    assert_eq!(y.len(), shape.numel(), "y does not match the shape");
    assert_eq!(scale.len(), d, "scale length is not D");
    assert_eq!(inv_rms.len(), rows, "inv_rms length is not the row count");
    if d == 0 {
        inv_rms.fill(inv_std_of(0.0, epsilon));
        return;
    }
    let run = |x: &[f32], y: &mut [f32], inv_rms: &mut [f32]| {
        for ((xr, yr), r_out) in x.chunks_exact(d).zip(y.chunks_exact_mut(d)).zip(inv_rms) {
            let (_, squares) = shifted_moments(xr, 0.0);
            let r = inv_std_of(squares / d as f64, epsilon);
            *r_out = r;
            for ((y, &v), &g) in yr.iter_mut().zip(xr).zip(scale) {
                *y = v * r * g;
            }
        }
    };
    if x.len() <= PAR_CHUNK {
        run(x, y, inv_rms);
    } else {
        let per = rows_per_task(d);
        y.par_chunks_mut(per * d)
            .zip(x.par_chunks(per * d))
            .zip(inv_rms.par_chunks_mut(per))
            .for_each(|((y, x), r)| run(x, y, r));
    }
}

/// The backward of [`rms_norm`], from the saved `inv_rms`. Per row, with `x̂ = x · inv_rms`
/// and `g = dy · scale`: `dx = inv_rms · (g − x̂ · mean(g · x̂))` (mean over the row); over
/// all rows, `dscale = Σ dy · x̂`.
#[allow(clippy::too_many_arguments)] // the op's operands, in order
pub fn rms_norm_backward(
    shape: Rows,
    dy: &[f32],
    x: &[f32],
    scale: &[f32],
    inv_rms: &[f32],
    dx: &mut [f32],
    dscale: &mut [f32],
) {
    let Rows { rows, cols: d } = shape;
    for (what, len) in [("dy", dy.len()), ("x", x.len()), ("dx", dx.len())] {
        assert_eq!(len, shape.numel(), "{what} does not match the shape");
    }
    assert_eq!(scale.len(), d, "scale length is not D");
    assert_eq!(dscale.len(), d, "dscale length is not D");
    assert_eq!(inv_rms.len(), rows, "inv_rms length is not the row count");
    if d == 0 {
        return;
    }
    let sums = reduce_rows_with_output(dx, rows, d, d, |acc, row0, out| {
        for (r, o) in out.chunks_exact_mut(d).enumerate() {
            let row = row0 + r;
            let (g, v) = (&dy[row * d..][..d], &x[row * d..][..d]);
            let rms = inv_rms[row];
            let mut sgx = 0.0f64;
            for ((a, (&g, &v)), &w) in acc.iter_mut().zip(g.iter().zip(v)).zip(scale) {
                let xh = v * rms;
                *a += f64::from(g) * f64::from(xh);
                sgx += f64::from(g * w) * f64::from(xh);
            }
            let mgx = (sgx / d as f64) as f32;
            for (((o, &g), &v), &w) in o.iter_mut().zip(g).zip(v).zip(scale) {
                *o = rms * (g * w - v * rms * mgx);
            }
        }
    });
    for (ds, s) in dscale.iter_mut().zip(sums) {
        *ds = s as f32;
    }
}
