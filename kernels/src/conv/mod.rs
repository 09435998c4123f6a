//! 2-D convolution (`conv2d`, `conv2d_backward_data`, `conv2d_backward_filter`) by
//! im2col / col2im and GEMM, NCHW activations and `[K, C/groups, R, S]` filters.
//!
//! Per image, the input is unfolded into a column matrix `col` of `C·R·S` rows and `P·Q`
//! columns (row `(c, r, s)` holds, for each output position, the input element tap
//! `(r, s)` of channel `c` reads, or 0 in the padding). Group `g` owns rows
//! `g·(C/groups)·R·S ..` of it, and then
//!
//! - forward: `y[n, g] (K/g × PQ) = w[g] (K/g × CRS/g) · col[g] (CRS/g × PQ)`;
//! - backward data: `col[g] = w[g]ᵀ · dy[n, g]`, then col2im adds every tap back onto
//!   `dx[n]` (overwritten);
//! - backward filter: `dw[g] = Σₙ dy[n, g] · col[g]ᵀ` (overwritten, images added in order).
//!
//! A 1×1 convolution with stride 1 and no padding ([`Conv2d::is_pointwise`]) needs no
//! unfolding: `x[n]` already is `col`, and `dx[n]` is written by the GEMM directly.
//!
//! There are three ways to run a convolution, chosen from its sizes alone:
//!
//! - **Image lanes** (`lanes.rs`), for a per-image product below
//!   [`PARALLEL_MIN_MACS`] in a batch with at least that much work in all: the images are
//!   spread over up to 4 lanes, each with its own column matrix, so both cores work and
//!   nothing is forked per image. LeNet's 5×5 layers (a 6 × 784 × 25 product per image)
//!   ran image by image at 7–30 GFLOP/s, on one core with rayon forks around each im2col.
//! - **Fused im2col** (`fused.rs`), when a group's product is large and there are enough
//!   output positions (see `fused_block_cols`): the forward pass and the filter gradient
//!   never build the whole column matrix; the output positions are cut into blocks of a
//!   few hundred KiB of columns, and each block is unfolded right before the GEMM that
//!   reads it, while it is in cache ([`sgemm_fill_b`] for the forward pass; for the
//!   filter gradient, `FILTER_LANES` lanes, each with its own block buffer and, past lane
//!   0, partial sum in the same scratch). On a ResNet-50 3×3 layer this took the forward
//!   pass from ~100 to ~150 GFLOP/s and the filter gradient from ~85 to ~140, against
//!   ~165–200 for the bare GEMM.
//! - **Image by image** otherwise: im2col and col2im (`unfold.rs`) are split over
//!   channels, and with one group the GEMM splits itself (see [`crate::gemm`]); with
//!   several, small groups (depthwise) run one group per task.
//!
//! **Scratch.** All three kernels take the same scratch, of [`conv2d_scratch_len`] f32:
//! 0 for a pointwise convolution; on image lanes, `lanes · C·R·S·P·Q` (a column matrix
//! per lane) plus `(lanes − 1) · numel(w)` (the filter gradient's partial sums);
//! otherwise `C·R·S·P·Q`, the column matrix of one image. It depends on the geometry
//! alone, never on the thread count; the lanes' part is capped at 4 MiB.
//!
//! **Determinism.** Results are the same from run to run. The lanes of the filter
//! gradients (both kinds) are fixed by the sizes, but a different thread count may change
//! how a large GEMM is blocked, and so the last bits of a sum.

mod fused;
mod lanes;
mod unfold;

use crate::gemm::{PARALLEL_MIN_MACS, Sgemm, sgemm, sgemm_fill_b, sgemm_serial};
use fused::{backward_filter_fused, fused_block_cols, fused_filter_block_cols};
use rayon::prelude::*;
use unfold::{col2im, im2col, im2col_block};

/// A convolution's geometry: input `x = [n, c, h, w]`, filter `w = [k, c/groups, r, s]`,
/// output `y = [n, k, p, q]`. Pairs are `[height, width]`.
///
/// `p` and `q` must equal [`conv_output_dim`] of the other fields (they are given, not
/// derived, because the backward kernels get them from `dy`'s shape). The kernels panic
/// otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Conv2d {
    /// Batch size.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output channels (filters).
    pub k: usize,
    /// Filter height.
    pub r: usize,
    /// Filter width.
    pub s: usize,
    /// Output height.
    pub p: usize,
    /// Output width.
    pub q: usize,
    /// Step between windows, `[h, w]`; positive.
    pub stride: [usize; 2],
    /// Zeros added on each side, `[h, w]`.
    pub padding: [usize; 2],
    /// Step between filter taps, `[h, w]`; positive.
    pub dilation: [usize; 2],
    /// Channel groups: `c` and `k` are multiples of it; `groups = c = k` is depthwise.
    pub groups: usize,
}

/// The output size of one spatial dimension (floor mode, as `placer_ir::ops`):
/// `(input + 2·padding − ((kernel − 1)·dilation + 1)) / stride + 1`, or `None` if the
/// dilated window does not fit the padded input or an argument is zero where it may not be.
pub fn conv_output_dim(input: usize, kernel: usize, stride: usize, padding: usize, dilation: usize) -> Option<usize> {
    if kernel == 0 || stride == 0 || dilation == 0 {
        return None;
    }
    let window = (kernel - 1).checked_mul(dilation)?.checked_add(1)?;
    let padded = padding.checked_mul(2)?.checked_add(input)?;
    Some(padded.checked_sub(window)? / stride + 1)
}

impl Conv2d {
    /// Builds the geometry with `p` and `q` computed by [`conv_output_dim`]; `None` if the
    /// window does not fit, or `groups` is 0 or does not divide `c` and `k`.
    pub fn new(
        [n, c, h, w]: [usize; 4],
        [k, r, s]: [usize; 3],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        groups: usize,
    ) -> Option<Conv2d> {
        if groups == 0 || !c.is_multiple_of(groups) || !k.is_multiple_of(groups) {
            return None;
        }
        let p = conv_output_dim(h, r, stride[0], padding[0], dilation[0])?;
        let q = conv_output_dim(w, s, stride[1], padding[1], dilation[1])?;
        Some(Conv2d { n, c, h, w, k, r, s, p, q, stride, padding, dilation, groups })
    }

    /// Elements of `x` (and `dx`): `n·c·h·w`.
    pub fn x_len(&self) -> usize {
        self.n * self.c * self.h * self.w
    }

    /// Elements of the filter `w` (and `dw`): `k·(c/groups)·r·s`.
    pub fn w_len(&self) -> usize {
        self.k * self.c_per_group() * self.r * self.s
    }

    /// Elements of `y` (and `dy`): `n·k·p·q`.
    pub fn y_len(&self) -> usize {
        self.n * self.k * self.p * self.q
    }

    /// Multiply-accumulates of each of the three kernels, as the IR counts them:
    /// `numel(y)·(c/groups)·r·s`.
    pub fn macs(&self) -> u64 {
        self.y_len() as u64 * (self.c_per_group() * self.r * self.s) as u64
    }

    /// A 1×1 filter with stride 1 and no padding (dilation is then irrelevant): the input
    /// is its own column matrix and the kernels need no scratch.
    pub fn is_pointwise(&self) -> bool {
        self.r == 1 && self.s == 1 && self.stride == [1, 1] && self.padding == [0, 0]
    }

    fn c_per_group(&self) -> usize {
        self.c / self.groups.max(1)
    }

    fn k_per_group(&self) -> usize {
        self.k / self.groups.max(1)
    }

    /// Rows of one group's column matrix: `(c/groups)·r·s`.
    fn crs_per_group(&self) -> usize {
        self.c_per_group() * self.r * self.s
    }

    /// Panics unless the geometry is consistent.
    fn check(&self) {
        assert!(self.groups >= 1, "conv2d: groups must be positive in {self:?}");
        assert!(
            self.c.is_multiple_of(self.groups) && self.k.is_multiple_of(self.groups),
            "conv2d: channels c = {} and filters k = {} must be multiples of groups = {}",
            self.c,
            self.k,
            self.groups
        );
        let p = conv_output_dim(self.h, self.r, self.stride[0], self.padding[0], self.dilation[0]);
        let q = conv_output_dim(self.w, self.s, self.stride[1], self.padding[1], self.dilation[1]);
        assert!(
            p == Some(self.p) && q == Some(self.q),
            "conv2d: output {}×{} does not match the geometry, which gives {p:?}×{q:?}, in {self:?}",
            self.p,
            self.q
        );
    }

    /// An untransposed, overwriting `m × n × k` product of densely stored operands; the
    /// kernels adjust transposes and `beta` from it.
    fn gemm(&self, m: usize, n: usize, k: usize) -> Sgemm {
        Sgemm { m, n, k, alpha: 1.0, beta: 0.0, transpose_a: false, lda: k, transpose_b: false, ldb: n, ldc: n }
    }
}

/// Scratch for [`conv2d_forward`], [`conv2d_backward_data`] and
/// [`conv2d_backward_filter`] (the same for all three), in f32: 0 when
/// [`Conv2d::is_pointwise`]; `lanes · c·r·s·p·q + (lanes − 1) · numel(w)` when the images
/// run on lanes (2 to 4, from the sizes; see the module documentation); otherwise
/// `c·r·s·p·q`, the column matrix of one image. Never depends on the thread count.
pub fn conv2d_scratch_len(p: &Conv2d) -> usize {
    match lanes::image_lanes(p) {
        Some(lanes) => lanes::lanes_scratch_len(p, lanes),
        None => col_len(p),
    }
}

/// Elements of one image's column matrix (every group), or 0 for a pointwise convolution,
/// which reads `x` in place.
fn col_len(p: &Conv2d) -> usize {
    if p.is_pointwise() { 0 } else { p.c * p.r * p.s * p.p * p.q }
}

/// `y = conv(x, w)`: `x = [n, c, h, w]`, `w = [k, c/groups, r, s]`, `y = [n, k, p, q]`
/// (overwritten). `scratch` holds at least [`conv2d_scratch_len`] f32 (contents ignored).
///
/// # Panics
/// If the geometry is inconsistent or a slice has the wrong length.
pub fn conv2d_forward(p: &Conv2d, x: &[f32], w: &[f32], y: &mut [f32], scratch: &mut [f32]) {
    p.check();
    check_len("x", x.len(), p.x_len());
    check_len("w", w.len(), p.w_len());
    check_len("y", y.len(), p.y_len());
    check_scratch(p, scratch.len());
    let (chw, kpq, pq, col_len) = (p.c * p.h * p.w, p.k * p.p * p.q, p.p * p.q, col_len(p));
    if kpq == 0 {
        return;
    }
    if let Some(lanes) = lanes::image_lanes(p) {
        lanes::forward(p, x, w, y, scratch, lanes);
        return;
    }
    let (kg, crs) = (p.k_per_group(), p.crs_per_group());
    // y[n, g] = w[g] · col[g]
    let g = p.gemm(kg, pq, crs);
    let fused = if p.is_pointwise() || (p.groups > 1 && kg * pq * crs < PARALLEL_MIN_MACS) {
        None
    } else {
        fused_block_cols(crs, pq)
    };
    for (ni, y_n) in y.chunks_mut(kpq).enumerate() {
        let x_n = &x[ni * chw..][..chw];
        if let Some(block_cols) = fused {
            // Large groups: im2col each block of output positions just before its GEMM.
            let cg = p.c_per_group();
            for (gi, y_g) in y_n.chunks_mut(kg * pq).enumerate() {
                sgemm_fill_b(&g, &w[gi * kg * crs..][..kg * crs], y_g, block_cols, scratch, |cols, block| {
                    im2col_block(p, x_n, gi * cg..(gi + 1) * cg, cols, block)
                });
            }
            continue;
        }
        let col: &[f32] = if p.is_pointwise() {
            x_n
        } else {
            im2col(p, x_n, &mut scratch[..col_len]);
            &scratch[..col_len]
        };
        per_group(p, &g, y_n, kg * pq, |gi, y_g, serial| {
            run(&g, &w[gi * kg * crs..][..kg * crs], &col[gi * crs * pq..][..crs * pq], y_g, serial);
        });
    }
}

/// `dx`, the gradient of [`conv2d_forward`]'s input, from `dy = [n, k, p, q]` and the
/// filter `w`; `dx = [n, c, h, w]` is overwritten (input positions no window reads get
/// 0). `scratch` holds at least [`conv2d_scratch_len`] f32.
///
/// # Panics
/// If the geometry is inconsistent or a slice has the wrong length.
pub fn conv2d_backward_data(p: &Conv2d, dy: &[f32], w: &[f32], dx: &mut [f32], scratch: &mut [f32]) {
    p.check();
    check_len("dy", dy.len(), p.y_len());
    check_len("w", w.len(), p.w_len());
    check_len("dx", dx.len(), p.x_len());
    check_scratch(p, scratch.len());
    let (chw, kpq, pq, col_len) = (p.c * p.h * p.w, p.k * p.p * p.q, p.p * p.q, col_len(p));
    if chw == 0 {
        return;
    }
    if let Some(lanes) = lanes::image_lanes(p) {
        lanes::backward_data(p, dy, w, dx, scratch, lanes);
        return;
    }
    let (kg, crs) = (p.k_per_group(), p.crs_per_group());
    // col[g] (crs × pq) = w[g]ᵀ · dy[n, g]; w[g] is stored kg × crs.
    let g = Sgemm { transpose_a: true, lda: crs, ..p.gemm(crs, pq, kg) };
    for (ni, dx_n) in dx.chunks_mut(chw).enumerate() {
        let dy_n = &dy[ni * kpq..][..kpq];
        let product = |gi: usize, out: &mut [f32], serial: bool| {
            run(&g, &w[gi * kg * crs..][..kg * crs], &dy_n[gi * kg * pq..][..kg * pq], out, serial);
        };
        if p.is_pointwise() {
            per_group(p, &g, dx_n, crs * pq, product);
        } else {
            let col = &mut scratch[..col_len];
            per_group(p, &g, col, crs * pq, product);
            col2im(p, col, dx_n);
        }
    }
}

/// `dw`, the gradient of [`conv2d_forward`]'s filter, from the forward input `x` and
/// `dy`; `dw = [k, c/groups, r, s]` is overwritten (the images' contributions are added
/// in batch order). `scratch` holds at least [`conv2d_scratch_len`] f32.
///
/// # Panics
/// If the geometry is inconsistent or a slice has the wrong length.
pub fn conv2d_backward_filter(p: &Conv2d, x: &[f32], dy: &[f32], dw: &mut [f32], scratch: &mut [f32]) {
    p.check();
    check_len("x", x.len(), p.x_len());
    check_len("dy", dy.len(), p.y_len());
    check_len("dw", dw.len(), p.w_len());
    check_scratch(p, scratch.len());
    let (chw, kpq, pq, col_len) = (p.c * p.h * p.w, p.k * p.p * p.q, p.p * p.q, col_len(p));
    let (kg, crs) = (p.k_per_group(), p.crs_per_group());
    if p.n == 0 || pq == 0 {
        dw.fill(0.0);
        return;
    }
    if dw.is_empty() {
        return;
    }
    if let Some(lanes) = lanes::image_lanes(p) {
        lanes::backward_filter(p, x, dy, dw, scratch, lanes);
        return;
    }
    if let Some(block_cols) = fused_filter_block_cols(p) {
        backward_filter_fused(p, x, dy, dw, scratch, block_cols);
        return;
    }
    // dw[g] (kg × crs) (+)= dy[n, g] (kg × pq) · col[g]ᵀ; col[g] is stored crs × pq.
    let first = Sgemm { transpose_b: true, ldb: pq, ..p.gemm(kg, crs, pq) };
    let rest = Sgemm { beta: 1.0, ..first };
    for ni in 0..p.n {
        let x_n = &x[ni * chw..][..chw];
        let dy_n = &dy[ni * kpq..][..kpq];
        let col: &[f32] = if p.is_pointwise() {
            x_n
        } else {
            im2col(p, x_n, &mut scratch[..col_len]);
            &scratch[..col_len]
        };
        let g = if ni == 0 { &first } else { &rest };
        per_group(p, g, dw, kg * crs, |gi, dw_g, serial| {
            run(g, &dy_n[gi * kg * pq..][..kg * pq], &col[gi * crs * pq..][..crs * pq], dw_g, serial);
        });
    }
}

fn check_len(what: &str, got: usize, want: usize) {
    assert_eq!(got, want, "conv2d: {what} has {got} elements, the geometry needs {want}");
}

/// Panics if the scratch is shorter than [`conv2d_scratch_len`].
fn check_scratch(p: &Conv2d, got: usize) {
    let want = conv2d_scratch_len(p);
    assert!(got >= want, "conv2d: scratch has {got} f32, conv2d_scratch_len gives {want} for {p:?}");
}

fn run(g: &Sgemm, a: &[f32], b: &[f32], c: &mut [f32], serial: bool) {
    if serial { sgemm_serial(g, a, b, c) } else { sgemm(g, a, b, c) }
}

/// Calls `f(group, out_g, serial)` for each group's `chunk`-element part of `out`. One
/// group: a (possibly parallel) GEMM. Several large groups: one after another, each
/// parallel. Several small groups: the groups spread over rayon tasks, each GEMM serial.
fn per_group(p: &Conv2d, g: &Sgemm, out: &mut [f32], chunk: usize, f: impl Fn(usize, &mut [f32], bool) + Sync) {
    if chunk == 0 {
        return;
    }
    let out = &mut out[..chunk * p.groups];
    let macs = g.m * g.n * g.k;
    if p.groups == 1 || macs >= PARALLEL_MIN_MACS {
        for (gi, o) in out.chunks_mut(chunk).enumerate() {
            f(gi, o, false);
        }
    } else if macs * p.groups < PARALLEL_MIN_MACS / 4 {
        for (gi, o) in out.chunks_mut(chunk).enumerate() {
            f(gi, o, true);
        }
    } else {
        out.par_chunks_mut(chunk).enumerate().for_each(|(gi, o)| f(gi, o, true));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_dim_matches_the_ir_rule() {
        assert_eq!(conv_output_dim(56, 3, 1, 1, 1), Some(56));
        assert_eq!(conv_output_dim(224, 7, 2, 3, 1), Some(112));
        assert_eq!(conv_output_dim(7, 3, 2, 0, 1), Some(3));
        assert_eq!(conv_output_dim(8, 3, 2, 0, 1), Some(3));
        assert_eq!(conv_output_dim(4, 3, 1, 0, 2), None);
        assert_eq!(conv_output_dim(4, 3, 0, 0, 1), None);
        assert!(Conv2d::new([1, 6, 5, 5], [4, 3, 3], [1, 1], [0, 0], [1, 1], 0).is_none());
        assert!(Conv2d::new([1, 6, 5, 5], [4, 3, 3], [1, 1], [0, 0], [1, 1], 3).is_none());
        assert!(Conv2d::new([1, 6, 5, 5], [4, 3, 3], [1, 1], [0, 0], [1, 1], 2).is_some());
    }

    #[test]
    fn pointwise_needs_no_scratch() {
        let p = Conv2d::new([2, 4, 5, 5], [6, 1, 1], [1, 1], [0, 0], [1, 1], 2).expect("fits");
        assert!(p.is_pointwise());
        assert_eq!(conv2d_scratch_len(&p), 0);
        let p = Conv2d::new([2, 4, 5, 5], [6, 1, 1], [2, 2], [0, 0], [1, 1], 2).expect("fits");
        assert_eq!(conv2d_scratch_len(&p), 4 * 3 * 3);
    }
}
