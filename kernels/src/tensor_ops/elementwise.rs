//! Elementwise arithmetic (`add`, `mul`) and bias (`bias_add`, `bias_grad`), in `f32`.

use super::{ChannelView, channel_runs, for_row_groups, map_binary, reduce_rows, sum_f64};

/// `c = a + b`, elementwise (no broadcasting: all three have one length).
///
/// # Panics
/// If the lengths differ (here and in every kernel: lengths come from a validated model,
/// so a mismatch is a bug of the caller).
pub fn add(a: &[f32], b: &[f32], c: &mut [f32]) {
    map_binary(a, b, c, |a, b| a + b);
}

/// `c = a · b`, elementwise.
pub fn mul(a: &[f32], b: &[f32], c: &mut [f32]) {
    map_binary(a, b, c, |a, b| a * b);
}

/// `y[o, c, i] = x[o, c, i] + bias[c]` over `view` (the op's `axis` is the channel axis).
pub fn bias_add(view: ChannelView, x: &[f32], bias: &[f32], y: &mut [f32]) {
    let ChannelView { channels, inner, .. } = view;
    assert_eq!(x.len(), view.numel(), "x does not match the view");
    assert_eq!(y.len(), view.numel(), "y does not match the view");
    assert_eq!(bias.len(), channels, "bias length is not the channel count");
    if inner == 1 {
        // [rows, channels]: add the bias vector to each row.
        for_row_groups(y, channels, |row0, ys| {
            let xs = &x[row0 * channels..][..ys.len()];
            for (yr, xr) in ys.chunks_exact_mut(channels).zip(xs.chunks_exact(channels)) {
                for ((y, &x), &b) in yr.iter_mut().zip(xr).zip(bias) {
                    *y = x + b;
                }
            }
        });
    } else {
        for_row_groups(y, inner, |row0, ys| {
            let xs = &x[row0 * inner..][..ys.len()];
            for (r, (yr, xr)) in ys.chunks_exact_mut(inner).zip(xs.chunks_exact(inner)).enumerate() {
                let b = bias[(row0 + r) % channels];
                for (y, &x) in yr.iter_mut().zip(xr) {
                    *y = x + b;
                }
            }
        });
    }
}

/// `dbias[c] = Σ_{o, i} dy[o, c, i]`, accumulated in f64: the backward of [`bias_add`].
pub fn bias_grad(view: ChannelView, dy: &[f32], dbias: &mut [f32]) {
    let ChannelView { outer, channels, inner } = view;
    assert_eq!(dy.len(), view.numel(), "dy does not match the view");
    assert_eq!(dbias.len(), channels, "dbias length is not the channel count");
    if channels == 0 {
        return;
    }
    let sums = reduce_rows(outer * channels, inner, channels, |acc, range| {
        channel_runs(channels, range, |c0, row, count| {
            let acc = &mut acc[c0..c0 + count];
            if inner == 1 {
                for (a, &v) in acc.iter_mut().zip(&dy[row..row + count]) {
                    *a += f64::from(v);
                }
            } else {
                for (k, a) in acc.iter_mut().enumerate() {
                    *a += sum_f64(&dy[(row + k) * inner..][..inner]);
                }
            }
        });
    });
    for (d, s) in dbias.iter_mut().zip(sums) {
        *d = s as f32;
    }
}
