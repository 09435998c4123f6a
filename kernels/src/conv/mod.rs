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
//! **Scratch.** All three kernels take the same scratch, of [`conv2d_scratch_len`] f32:
//! `C·R·S·P·Q` (the column matrix of one image, every group), or 0 for a pointwise
//! convolution. It does not depend on the batch size or the thread count.
//!
//! **Fused im2col.** When a group's product is large and there are enough output positions
//! (see `fused_block_cols`), the forward pass and the filter gradient never build the whole
//! column matrix: the output positions are cut into blocks of a few hundred KiB of columns,
//! and each block is unfolded right before the GEMM that reads it, while it is in cache
//! ([`sgemm_fill_b`] for the forward pass; for the filter gradient, `FILTER_LANES` lanes,
//! each with its own block buffer and, past lane 0, partial sum in the same scratch). On a
//! ResNet-50 3×3 layer this took the forward pass from ~100 to ~150 GFLOP/s and the filter
//! gradient from ~85 to ~140, against ~165–200 for the bare GEMM.
//!
//! **Parallelism.** Fused blocks are spread over rayon tasks; otherwise im2col and col2im
//! are split over channels, and with one group the GEMM splits itself (see
//! [`crate::gemm`]); with several, small groups (depthwise) run one group per task. Results
//! are the same from run to run; the filter gradient's lanes are fixed, but a different
//! thread count may change how a GEMM is blocked, and so the last bits of a sum.

use crate::gemm::{PARALLEL_MIN_MACS, Sgemm, sgemm, sgemm_fill_b, sgemm_serial};
use crate::tensor_ops::PAR_CHUNK;
use rayon::prelude::*;
use std::ops::Range;

/// Target size, in f32, of one column block of the fused forward pass: built by im2col and
/// multiplied while it sits in the core's L2 cache (384 KiB of the 1 MiB here).
const FUSED_BLOCK_F32: usize = 96 * 1024;

/// Independent partial sums of the fused filter gradient: its parallelism, fixed so that
/// the summation order (and so the result) does not depend on the thread count.
const FILTER_LANES: usize = 4;

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
/// [`conv2d_backward_filter`] (the same for all three), in f32: `c·r·s·p·q`, the column
/// matrix of one image, or 0 when [`Conv2d::is_pointwise`].
pub fn conv2d_scratch_len(p: &Conv2d) -> usize {
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
    let col_len = check_scratch(p, scratch.len());
    let (chw, kpq, pq) = (p.c * p.h * p.w, p.k * p.p * p.q, p.p * p.q);
    if kpq == 0 {
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
    let col_len = check_scratch(p, scratch.len());
    let (chw, kpq, pq) = (p.c * p.h * p.w, p.k * p.p * p.q, p.p * p.q);
    if chw == 0 {
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
    let col_len = check_scratch(p, scratch.len());
    let (chw, kpq, pq) = (p.c * p.h * p.w, p.k * p.p * p.q, p.p * p.q);
    let (kg, crs) = (p.k_per_group(), p.crs_per_group());
    if p.n == 0 || pq == 0 {
        dw.fill(0.0);
        return;
    }
    if dw.is_empty() {
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

/// Column blocks of the fused filter gradient, or `None` for the unfused path: as for the
/// forward pass, and the lanes' blocks and partial sums must fit the scratch.
fn fused_filter_block_cols(p: &Conv2d) -> Option<usize> {
    let (kg, crs, pq) = (p.k_per_group(), p.crs_per_group(), p.p * p.q);
    if p.is_pointwise() || (p.groups > 1 && kg * pq * crs < PARALLEL_MIN_MACS) {
        return None;
    }
    let width = fused_block_cols(crs, pq)?;
    (FILTER_LANES * width + (FILTER_LANES - 1) * kg <= pq).then_some(width)
}

/// The filter gradient with im2col fused into the GEMM, one group at a time. The output
/// positions of each image are cut into blocks of `block_cols`; block `b` goes to lane
/// `b mod FILTER_LANES`, which builds it (im2col) in its own buffer and adds
/// `dy[n, g][:, block] · blockᵀ` to its own sum (lane 0's sum is `dw[g]` itself, the others
/// live in scratch after the lanes' buffers). The lanes run in parallel and their sums are
/// added in lane order at the end, so the result does not depend on the thread count.
fn backward_filter_fused(p: &Conv2d, x: &[f32], dy: &[f32], dw: &mut [f32], scratch: &mut [f32], block_cols: usize) {
    let (cg, kg, crs) = (p.c_per_group(), p.k_per_group(), p.crs_per_group());
    let (chw, kpq, pq) = (p.c * p.h * p.w, p.k * p.p * p.q, p.p * p.q);
    let blocks = pq.div_ceil(block_cols);
    let (bufs, partials) = scratch.split_at_mut(FILTER_LANES * crs * block_cols);
    for (gi, dw_g) in dw.chunks_mut(kg * crs).enumerate() {
        let mut sums: Vec<&mut [f32]> =
            std::iter::once(&mut *dw_g).chain(partials.chunks_mut(kg * crs).take(FILTER_LANES - 1)).collect();
        sums.par_iter_mut().zip(bufs.par_chunks_mut(crs * block_cols)).enumerate().for_each(|(lane, (sum, buf))| {
            let mut first = true;
            for ni in 0..p.n {
                let x_n = &x[ni * chw..][..chw];
                let dy_g = &dy[ni * kpq + gi * kg * pq..][..kg * pq];
                for b in (lane..blocks).step_by(FILTER_LANES) {
                    let cols = b * block_cols..pq.min((b + 1) * block_cols);
                    let width = cols.len();
                    let block = &mut buf[..crs * width];
                    im2col_block(p, x_n, gi * cg..(gi + 1) * cg, cols.clone(), block);
                    // sum (kg × crs) (+)= dy_g[:, cols] (kg × width, row stride pq) · blockᵀ
                    let g = Sgemm {
                        m: kg,
                        n: crs,
                        k: width,
                        alpha: 1.0,
                        beta: if first { 0.0 } else { 1.0 },
                        transpose_a: false,
                        lda: pq,
                        transpose_b: true,
                        ldb: width,
                        ldc: crs,
                    };
                    sgemm_serial(&g, &dy_g[cols.start..], block, sum);
                    first = false;
                }
            }
            if first {
                sum.fill(0.0);
            }
        });
        let (total, rest) = sums.split_first_mut().expect("lane 0 is dw itself");
        for part in rest {
            total.iter_mut().zip(part.iter()).for_each(|(t, &v)| *t += v);
        }
    }
}

fn check_len(what: &str, got: usize, want: usize) {
    assert_eq!(got, want, "conv2d: {what} has {got} elements, the geometry needs {want}");
}

/// Panics if the scratch is too short; returns the length the kernels use.
fn check_scratch(p: &Conv2d, got: usize) -> usize {
    let want = conv2d_scratch_len(p);
    assert!(got >= want, "conv2d: scratch has {got} f32, conv2d_scratch_len gives {want} for {p:?}");
    want
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

/// The output positions `o` in `0..out_len` whose input coordinate `o·stride + offset`
/// lies in `0..in_len`.
fn valid(out_len: usize, in_len: usize, stride: usize, offset: isize) -> Range<usize> {
    let (stride_i, in_i) = (stride as isize, in_len as isize);
    // First o with o·stride + offset ≥ 0; first o with o·stride + offset ≥ in_len.
    let lo = if offset >= 0 { 0 } else { (-offset + stride_i - 1) / stride_i };
    let hi = if offset >= in_i { 0 } else { (in_i - offset + stride_i - 1) / stride_i };
    let (lo, hi) = (lo as usize, hi as usize);
    lo.min(out_len)..hi.clamp(lo.min(out_len), out_len)
}

/// Offsets of tap `(ri, si)`: input coordinate = output coordinate · stride + offset.
fn tap_offsets(p: &Conv2d, ri: usize, si: usize) -> (isize, isize) {
    ((ri * p.dilation[0]) as isize - p.padding[0] as isize, (si * p.dilation[1]) as isize - p.padding[1] as isize)
}

/// Rows of `col` (each `len` long) per rayon task: at least [`PAR_CHUNK`] elements.
fn rows_per_task(len: usize) -> usize {
    (PAR_CHUNK / len.max(1)).max(1)
}

/// Writes columns `cols` of row `(ci, tap)` of one image's column matrix into `out`
/// (`cols.len()` long): for each output position, the input element the tap reads, or 0.
fn im2col_row(p: &Conv2d, x_n: &[f32], ci: usize, tap: usize, cols: Range<usize>, out: &mut [f32]) {
    let hw = p.h * p.w;
    let plane = &x_n[ci * hw..][..hw];
    let (off_h, off_w) = tap_offsets(p, tap / p.s, tap % p.s);
    let oh_ok = valid(p.p, p.h, p.stride[0], off_h);
    let ow_ok = valid(p.q, p.w, p.stride[1], off_w);
    let mut pos = cols.start;
    while pos < cols.end {
        // The part of output row `oh` inside `cols`: columns ow0..ow1.
        let (oh, ow0) = (pos / p.q, pos % p.q);
        let ow1 = p.q.min(ow0 + (cols.end - pos));
        let seg = &mut out[pos - cols.start..][..ow1 - ow0];
        pos += ow1 - ow0;
        if !oh_ok.contains(&oh) {
            seg.fill(0.0);
            continue;
        }
        let lo = ow_ok.start.clamp(ow0, ow1);
        let hi = ow_ok.end.clamp(lo, ow1);
        seg[..lo - ow0].fill(0.0);
        seg[hi - ow0..].fill(0.0);
        if lo == hi {
            continue;
        }
        let ih = ((oh * p.stride[0]) as isize + off_h) as usize;
        let iw0 = ((lo * p.stride[1]) as isize + off_w) as usize;
        let src = &plane[ih * p.w..][..p.w];
        let dst = &mut seg[lo - ow0..hi - ow0];
        if p.stride[1] == 1 {
            dst.copy_from_slice(&src[iw0..][..hi - lo]);
        } else {
            for (o, &v) in dst.iter_mut().zip(src[iw0..].iter().step_by(p.stride[1])) {
                *o = v;
            }
        }
    }
}

/// Unfolds one image `x_n = [c, h, w]` into `col = [c·r·s, p·q]`, rows split over rayon.
fn im2col(p: &Conv2d, x_n: &[f32], col: &mut [f32]) {
    let (pq, rs) = (p.p * p.q, p.r * p.s);
    if pq == 0 || col.is_empty() {
        return;
    }
    let fill_rows = |row0: usize, rows: &mut [f32]| {
        for (i, row) in rows.chunks_exact_mut(pq).enumerate() {
            im2col_row(p, x_n, (row0 + i) / rs, (row0 + i) % rs, 0..pq, row);
        }
    };
    if col.len() <= PAR_CHUNK {
        fill_rows(0, col);
    } else {
        let per = rows_per_task(pq);
        col.par_chunks_mut(per * pq).enumerate().for_each(|(t, rows)| fill_rows(t * per, rows));
    }
}

/// Columns `cols` of the column-matrix rows of `channels` (every tap of each), row-major
/// into `out` (`channels.len()·r·s` rows of `cols.len()`), on the calling thread.
fn im2col_block(p: &Conv2d, x_n: &[f32], channels: Range<usize>, cols: Range<usize>, out: &mut [f32]) {
    let (rs, width) = (p.r * p.s, cols.len());
    if width == 0 {
        return;
    }
    for (i, row) in out.chunks_exact_mut(width).enumerate().take(channels.len() * rs) {
        im2col_row(p, x_n, channels.start + i / rs, i % rs, cols.clone(), row);
    }
}

/// Column-block width for the fused forward pass ([`sgemm_fill_b`]), or `None` when the
/// unfused path is better: a block holds about [`FUSED_BLOCK_F32`] of the column matrix
/// (`crs` rows), at least 64 columns, and there must be a block per thread at least.
fn fused_block_cols(crs: usize, pq: usize) -> Option<usize> {
    let width = (FUSED_BLOCK_F32 / crs.max(1)).max(64).next_multiple_of(16);
    (pq >= width * rayon::current_num_threads().max(2)).then_some(width)
}

/// Folds `col = [c·r·s, p·q]` back onto one image: `dx_n = [c, h, w]` is overwritten with
/// the sum, for every input element, of the column entries that read it.
fn col2im(p: &Conv2d, col: &[f32], dx_n: &mut [f32]) {
    let (hw, pq, rs) = (p.h * p.w, p.p * p.q, p.r * p.s);
    if hw == 0 {
        return;
    }
    let fold = |c0: usize, planes: &mut [f32]| {
        for (i, plane) in planes.chunks_exact_mut(hw).enumerate() {
            plane.fill(0.0);
            if pq == 0 {
                continue;
            }
            let rows = &col[(c0 + i) * rs * pq..][..rs * pq];
            for (tap, row) in rows.chunks_exact(pq).enumerate() {
                let (off_h, off_w) = tap_offsets(p, tap / p.s, tap % p.s);
                let oh_ok = valid(p.p, p.h, p.stride[0], off_h);
                let ow_ok = valid(p.q, p.w, p.stride[1], off_w);
                if ow_ok.is_empty() {
                    continue;
                }
                let iw0 = ((ow_ok.start * p.stride[1]) as isize + off_w) as usize;
                for oh in oh_ok {
                    let ih = ((oh * p.stride[0]) as isize + off_h) as usize;
                    let dst = &mut plane[ih * p.w..][..p.w];
                    let src = &row[oh * p.q..][ow_ok.clone()];
                    if p.stride[1] == 1 {
                        for (d, &v) in dst[iw0..].iter_mut().zip(src) {
                            *d += v;
                        }
                    } else {
                        for (d, &v) in dst[iw0..].iter_mut().step_by(p.stride[1]).zip(src) {
                            *d += v;
                        }
                    }
                }
            }
        }
    };
    if dx_n.len() <= PAR_CHUNK {
        fold(0, dx_n);
    } else {
        let per = rows_per_task(hw.max(rs * pq));
        dx_n.par_chunks_mut(per * hw).enumerate().for_each(|(t, planes)| fold(t * per, planes));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_ranges() {
        // 5 outputs, stride 2, input 8, offset −1: inputs −1, 1, 3, 5, 7 → outputs 1..5.
        assert_eq!(valid(5, 8, 2, -1), 1..5);
        // offset 2, stride 3, input 7: inputs 2, 5, 8 → 0..2.
        assert_eq!(valid(3, 7, 3, 2), 0..2);
        // Entirely outside either way.
        assert_eq!(valid(3, 2, 1, 5), 0..0);
        assert_eq!(valid(2, 4, 1, -9), 2..2);
    }

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
