//! Pooling over NCHW tensors: max and average pooling with a window, forward and backward,
//! and global average pooling.
//!
//! Windows follow the IR (`placer_ir::ops`): floor mode, symmetric padding of at most half
//! the window, no dilation. Window `(oh, ow)` covers input rows `oh·stride_h − pad_h ..`
//! `+ kernel_h` (columns likewise); the part in the padding holds no values.
//!
//! - **Max pooling** never picks padding. `indices` holds, for each output, the flat
//!   position `ih·W + iw` of its maximum inside its own `(n, c)` input plane; among equal
//!   values the first in row-major window order wins, and a NaN wins over any number (the
//!   first NaN of the window), so NaN propagates. The backward pass scatter-adds `dy` at
//!   those positions.
//! - **Average pooling** sums the window's real elements and divides, as PyTorch does, by
//!   the window's area clipped to the padded input when `count_include_pad` (padding
//!   counts as zeros; a window hanging past the padding does not), or by the number of
//!   real elements otherwise.
//!
//! Every kernel overwrites its output. Work is split over `(n, c)` planes on the rayon
//! pool once a tensor exceeds [`PAR_CHUNK`] elements; each output element is computed in
//! the same order whatever the thread count.

use crate::conv::conv_output_dim;
use crate::error::KernelError;
use crate::tensor_ops::PAR_CHUNK;
use multiversion::multiversion;
use rayon::prelude::*;
use std::ops::Range;

/// A windowed pooling's geometry: `x = [n, c, h, w]` → `y = [n, c, p, q]`. Pairs are
/// `[height, width]`.
///
/// `p` and `q` must equal [`pooling_output_dim`] of the other fields, and the padding may be
/// at most half the window; the kernels panic otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pooling2d {
    /// Batch size.
    pub n: usize,
    /// Channels.
    pub c: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output height.
    pub p: usize,
    /// Output width.
    pub q: usize,
    /// Window size; positive.
    pub kernel: [usize; 2],
    /// Step between windows; positive (the IR's default is the kernel).
    pub stride: [usize; 2],
    /// Padding on each side; `2·padding ≤ kernel`.
    pub padding: [usize; 2],
    /// Average pooling only: whether padding counts in the divisor (see the module docs).
    pub count_include_pad: bool,
}

/// One output dimension (floor mode): `(input + 2·padding − kernel) / stride + 1`, or
/// `None` if the window does not fit the padded input or the kernel or stride is zero.
pub fn pooling_output_dim(input: usize, kernel: usize, stride: usize, padding: usize) -> Option<usize> {
    conv_output_dim(input, kernel, stride, padding, 1)
}

impl Pooling2d {
    /// Builds the geometry with `p` and `q` from [`pooling_output_dim`]; `None` if the window
    /// does not fit or the padding is more than half the window.
    pub fn new(
        [n, c, h, w]: [usize; 4],
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        count_include_pad: bool,
    ) -> Option<Pooling2d> {
        if 2 * padding[0] > kernel[0] || 2 * padding[1] > kernel[1] {
            return None;
        }
        let p = pooling_output_dim(h, kernel[0], stride[0], padding[0])?;
        let q = pooling_output_dim(w, kernel[1], stride[1], padding[1])?;
        Some(Pooling2d { n, c, h, w, p, q, kernel, stride, padding, count_include_pad })
    }

    /// Elements of `x` and `dx`: `n·c·h·w`.
    pub fn x_len(&self) -> usize {
        self.n * self.c * self.h * self.w
    }

    /// Elements of `y`, `dy` and `indices`: `n·c·p·q`.
    pub fn y_len(&self) -> usize {
        self.n * self.c * self.p * self.q
    }

    fn check(&self, op: &str) {
        let p = pooling_output_dim(self.h, self.kernel[0], self.stride[0], self.padding[0]);
        let q = pooling_output_dim(self.w, self.kernel[1], self.stride[1], self.padding[1]);
        assert!(
            p == Some(self.p) && q == Some(self.q),
            "{op}: output {}×{} does not match the geometry, which gives {p:?}×{q:?}, in {self:?}",
            self.p,
            self.q
        );
        assert!(
            2 * self.padding[0] <= self.kernel[0] && 2 * self.padding[1] <= self.kernel[1],
            "{op}: padding {:?} is more than half the window {:?}",
            self.padding,
            self.kernel
        );
    }

    /// Input rows (`dim` 0) or columns (1) of window `o`, clipped to the real input.
    fn window(&self, dim: usize, o: usize) -> Range<usize> {
        let (start, len) = self.window_padded(dim, o);
        let size = [self.h, self.w][dim] as isize;
        start.clamp(0, size) as usize..(start + len as isize).clamp(0, size) as usize
    }

    /// Start (possibly negative) and length of window `o` clipped to the padded input.
    fn window_padded(&self, dim: usize, o: usize) -> (isize, usize) {
        let start = (o * self.stride[dim]) as isize - self.padding[dim] as isize;
        let end_max = ([self.h, self.w][dim] + self.padding[dim]) as isize;
        let end = (start + self.kernel[dim] as isize).min(end_max);
        (start, (end - start) as usize)
    }

    /// The divisor of average window `(oh, ow)`.
    fn divisor(&self, oh: usize, ow: usize) -> f32 {
        let count = if self.count_include_pad {
            self.window_padded(0, oh).1 * self.window_padded(1, ow).1
        } else {
            self.window(0, oh).len() * self.window(1, ow).len()
        };
        count as f32
    }
}

fn check_len(op: &str, what: &str, got: usize, want: usize) {
    assert_eq!(got, want, "{op}: {what} has {got} elements, the geometry needs {want}");
}

/// Runs `f(in_plane_chunk, out_plane_chunk)` over matching groups of planes (`in_plane`
/// and `out_plane` elements each), in parallel once the work is large enough.
fn for_planes<A: Sync, B: Send>(
    input: &[A],
    in_plane: usize,
    output: &mut [B],
    out_plane: usize,
    f: impl Fn(&[A], &mut [B]) + Sync,
) {
    if input.is_empty() || output.is_empty() {
        return;
    }
    let work = input.len().max(output.len());
    if work <= PAR_CHUNK {
        f(input, output);
    } else {
        let per = (PAR_CHUNK / in_plane.max(out_plane).max(1)).max(1);
        output.par_chunks_mut(per * out_plane).zip(input.par_chunks(per * in_plane)).for_each(|(o, i)| f(i, o));
    }
}

/// `y` = the maximum of each window of `x`, and `indices` = its position `ih·W + iw` in
/// its `(n, c)` plane (see the module docs for ties and NaN).
///
/// # Panics
/// If the geometry is inconsistent, a slice has the wrong length, the input planes are
/// empty (`h` or `w` is 0) while the output is not, or a plane has more than `i32::MAX`
/// elements.
pub fn max_pool2d_forward(p: &Pooling2d, x: &[f32], y: &mut [f32], indices: &mut [i32]) {
    const OP: &str = "max_pool2d";
    p.check(OP);
    check_len(OP, "x", x.len(), p.x_len());
    check_len(OP, "y", y.len(), p.y_len());
    check_len(OP, "indices", indices.len(), p.y_len());
    let (hw, pq) = (p.h * p.w, p.p * p.q);
    assert!(i32::try_from(hw).is_ok(), "{OP}: a {}×{} plane does not fit i32 indices", p.h, p.w);
    if y.is_empty() {
        return;
    }
    assert!(hw > 0, "{OP}: windows over an empty {}×{} input have no maximum", p.h, p.w);
    // y and indices are zipped plane by plane: pair them so one split covers both.
    if x.len().max(y.len()) <= PAR_CHUNK {
        max_pool_planes(p, x, y, indices);
    } else {
        let per = (PAR_CHUNK / hw.max(pq)).max(1);
        y.par_chunks_mut(per * pq)
            .zip(indices.par_chunks_mut(per * pq))
            .zip(x.par_chunks(per * hw))
            .for_each(|((y, idx), x)| max_pool_planes(p, x, y, idx));
    }
}

/// Output columns per step of the vectorised max pooling (the size of its stack buffer).
const MAX_POOL_COLS: usize = 256;

/// `v` replaces the running maximum `best` of an earlier-ordered candidate: if it is
/// greater, or the first NaN (so the first maximum in window order wins, and NaN
/// propagates). Bitwise `|` and `&`, not `||` and `&&`: no branches, so loops over it
/// vectorise.
#[inline(always)]
fn beats(v: f32, best: f32) -> bool {
    (v > best) | (v.is_nan() & !best.is_nan())
}

/// [`max_pool2d_forward`] over whole planes on the calling thread; compiled for AVX-512
/// and AVX2 too. With column stride 1 or 2 (every max pooling in the zoo), the output
/// columns whose window lies inside the input (all but one or two at each edge) are done a
/// row of outputs at a time: the taps are visited in row-major window order, and each
/// tap's inputs for the whole row (contiguous, or gathered from every second column) are
/// merged into the row of running maxima where they [`beats`] them, so ties and NaN come
/// out as window by window. Those loops vectorise; the window-by-window loop
/// ([`window_max`], scalar and branchy, ~10 ns an output) is left for the edge columns
/// and other strides.
#[multiversion(targets("x86_64+avx512f+avx512vl+fma", "x86_64+avx2+fma"))]
fn max_pool_planes(p: &Pooling2d, x: &[f32], y: &mut [f32], indices: &mut [i32]) {
    if tiles_by_two(p) {
        max_pool_tiled(p, x, y, indices);
        return;
    }
    let (hw, pq) = (p.h * p.w, p.p * p.q);
    let (kw, sw, pw) = (p.kernel[1], p.stride[1], p.padding[1]);
    // Output columns whose windows are not clipped: ow·sw ≥ pw and ow·sw − pw + kw ≤ w.
    let lo = pw.div_ceil(sw).min(p.q);
    let hi = match sw {
        1 | 2 if p.w + pw >= kw => ((p.w + pw - kw) / sw + 1).clamp(lo, p.q),
        _ => lo,
    };
    let mut gathered = [0.0f32; MAX_POOL_COLS];
    for ((plane, y), idx) in x.chunks_exact(hw).zip(y.chunks_exact_mut(pq)).zip(indices.chunks_exact_mut(pq)) {
        for oh in 0..p.p {
            let rows = p.window(0, oh);
            let (y_row, idx_row) = (&mut y[oh * p.q..][..p.q], &mut idx[oh * p.q..][..p.q]);
            for ow in (0..lo).chain(hi..p.q) {
                let (best, at) = window_max(p, plane, rows.clone(), p.window(1, ow));
                y_row[ow] = best;
                idx_row[ow] = at as i32; // < hw ≤ i32::MAX, checked by the caller
            }
            for c0 in (lo..hi).step_by(MAX_POOL_COLS) {
                let n = MAX_POOL_COLS.min(hi - c0);
                let (best, at) = (&mut y_row[c0..c0 + n], &mut idx_row[c0..c0 + n]);
                for (i, ih) in rows.clone().enumerate() {
                    for s in 0..kw {
                        // The input element of output column c0 + j for this tap: at0 + j·sw.
                        let at0 = ih * p.w + c0 * sw + s - pw;
                        let v: &[f32] = if sw == 1 {
                            &plane[at0..][..n]
                        } else {
                            gather_every_second(&plane[at0..], &mut gathered[..n]);
                            &gathered[..n]
                        };
                        let (at0, sw) = (at0 as i32, sw as i32); // < hw ≤ i32::MAX
                        if i == 0 && s == 0 {
                            best.copy_from_slice(v);
                            at.iter_mut().enumerate().for_each(|(j, a)| *a = at0 + j as i32 * sw);
                            continue;
                        }
                        for (j, ((b, a), &v)) in best.iter_mut().zip(at.iter_mut()).zip(v).enumerate() {
                            let take = beats(v, *b);
                            *b = if take { v } else { *b };
                            *a = if take { at0 + j as i32 * sw } else { *a };
                        }
                    }
                }
            }
        }
    }
}

/// Outputs per group of the tiled max pooling: its buffers hold this many outputs' inputs.
const TILED_OUTPUTS: usize = MAX_POOL_COLS;

/// Windows that tile the input exactly along the rows, two columns wide (LeNet's and VGG's
/// 2×2 stride-2 pooling): window = stride, no padding, `w = 2q`, and an output row fits a
/// group of [`max_pool_tiled`].
fn tiles_by_two(p: &Pooling2d) -> bool {
    p.kernel == p.stride && p.kernel[1] == 2 && p.padding == [0, 0] && p.w == 2 * p.q && p.q <= TILED_OUTPUTS
}

/// Whole planes of a pooling that [`tiles_by_two`], a group of output rows at a time
/// (across planes: the output rows of consecutive planes follow one another), so short
/// rows (14 and 5 outputs in LeNet, shorter than a vector) do not leave every loop to its
/// scalar remainder. For window row `r`, the input row `oh·kh + r` of each output row of
/// the group is copied, one after another, into a buffer where output `j`'s tap `(r, s)`
/// is element `2j + s`; taps are merged in row-major order as in [`max_pool_planes`], with
/// the tap number as the running index, turned into a plane position at the end.
#[inline(always)]
fn max_pool_tiled(p: &Pooling2d, x: &[f32], y: &mut [f32], idx: &mut [i32]) {
    let (q, w, kh, hw) = (p.q, p.w, p.kernel[0], p.h * p.w);
    let rows = y.len() / q; // output rows of every plane here
    let rows_per = TILED_OUTPUTS / q; // ≥ 1, see tiles_by_two
    // The first input element of output row `row` (plane `row / p`, row `row % p` in it).
    let input_row = |row: usize| (row / p.p) * hw + (row % p.p) * kh * w;
    let (mut rows_buf, mut gathered) = ([0.0f32; 2 * TILED_OUTPUTS], [0.0f32; TILED_OUTPUTS]);
    for row0 in (0..rows).step_by(rows_per) {
        let m = rows_per.min(rows - row0);
        let len = m * q;
        let (best, at) = (&mut y[row0 * q..][..len], &mut idx[row0 * q..][..len]);
        for r in 0..kh {
            for (k, dst) in rows_buf[..m * w].chunks_exact_mut(w).enumerate() {
                dst.copy_from_slice(&x[input_row(row0 + k) + r * w..][..w]);
            }
            for s in 0..2 {
                let tap = (2 * r + s) as i32;
                gather_every_second(&rows_buf[s..2 * len], &mut gathered[..len]);
                let v = &gathered[..len];
                if tap == 0 {
                    best.copy_from_slice(v);
                    at.fill(0);
                    continue;
                }
                for ((b, a), &v) in best.iter_mut().zip(at.iter_mut()).zip(v) {
                    let take = beats(v, *b);
                    *b = if take { v } else { *b };
                    *a = if take { tap } else { *a };
                }
            }
        }
        // Tap (r, s) of window (oh, ow) is at (oh·kh + r)·w + 2·ow + s in its plane.
        for (k, at_row) in at.chunks_exact_mut(q).enumerate() {
            let first = (((row0 + k) % p.p) * kh * w) as i32; // < h·w ≤ i32::MAX
            for (ow, a) in at_row.iter_mut().enumerate() {
                *a = first + 2 * ow as i32 + (*a >> 1) * w as i32 + (*a & 1);
            }
        }
    }
}

/// `out[j] = src[2·j]` (pairs of `chunks_exact`, which LLVM turns into vector shuffles);
/// `src` holds at least `2·out.len() − 1` elements.
#[inline(always)]
fn gather_every_second(src: &[f32], out: &mut [f32]) {
    let n = out.len();
    debug_assert!(n == 0 || src.len() > 2 * (n - 1), "gather_every_second: src is too short");
    let pairs = (src.len() / 2).min(n);
    for (o, c) in out.iter_mut().zip(src.chunks_exact(2)) {
        *o = c[0];
    }
    if pairs < n {
        out[n - 1] = src[2 * (n - 1)]; // the last element has no partner in src
    }
}

/// The maximum of one window of `plane` and its position, scanning in row-major order.
#[inline(always)]
fn window_max(p: &Pooling2d, plane: &[f32], rows: Range<usize>, cols: Range<usize>) -> (f32, usize) {
    let mut best_at = rows.start * p.w + cols.start;
    let mut best = plane[best_at];
    for ih in rows {
        let row = &plane[ih * p.w..][cols.clone()];
        for (j, &v) in row.iter().enumerate() {
            if beats(v, best) {
                best = v;
                best_at = ih * p.w + cols.start + j;
            }
        }
    }
    (best, best_at)
}

/// `dx` (overwritten) = `dy` scattered onto the positions in `indices`, as written by
/// [`max_pool2d_forward`]; positions hit by several windows accumulate.
///
/// # Errors
/// [`KernelError::IndexOutOfRange`] for the first index outside `[0, h·w)`; `dx` is then
/// left unwritten.
///
/// # Panics
/// If the geometry is inconsistent or a slice has the wrong length.
pub fn max_pool2d_backward<I: Copy + Into<i64> + Sync>(
    p: &Pooling2d,
    dy: &[f32],
    indices: &[I],
    dx: &mut [f32],
) -> Result<(), KernelError> {
    const OP: &str = "max_pool2d_backward";
    p.check(OP);
    check_len(OP, "dy", dy.len(), p.y_len());
    check_len(OP, "indices", indices.len(), p.y_len());
    check_len(OP, "dx", dx.len(), p.x_len());
    let (hw, pq) = (p.h * p.w, p.p * p.q);
    if let Some(&bad) = indices.iter().find(|&&i| usize::try_from(i.into()).map_or(true, |i| i >= hw)) {
        return Err(KernelError::IndexOutOfRange { what: "max-pool index", index: bad.into(), bound: hw });
    }
    if dy.is_empty() {
        dx.fill(0.0);
        return Ok(());
    }
    // The planes of dy and indices line up, so pass their offsets along with dx's planes.
    let run = |dy: &[f32], idx: &[I], dx: &mut [f32]| {
        for ((dy, idx), dx) in dy.chunks_exact(pq).zip(idx.chunks_exact(pq)).zip(dx.chunks_exact_mut(hw)) {
            dx.fill(0.0);
            for (&g, &i) in dy.iter().zip(idx) {
                dx[i.into() as usize] += g; // 0 ≤ i < hw, checked above
            }
        }
    };
    if dx.len().max(dy.len()) <= PAR_CHUNK {
        run(dy, indices, dx);
    } else {
        let per = (PAR_CHUNK / hw.max(pq)).max(1);
        dx.par_chunks_mut(per * hw)
            .zip(dy.par_chunks(per * pq))
            .zip(indices.par_chunks(per * pq))
            .for_each(|((dx, dy), idx)| run(dy, idx, dx));
    }
    Ok(())
}

/// `y` = the mean of each window of `x`, divided as described in the module docs.
///
/// # Panics
/// If the geometry is inconsistent or a slice has the wrong length.
pub fn avg_pool2d_forward(p: &Pooling2d, x: &[f32], y: &mut [f32]) {
    const OP: &str = "avg_pool2d";
    p.check(OP);
    check_len(OP, "x", x.len(), p.x_len());
    check_len(OP, "y", y.len(), p.y_len());
    let (hw, pq) = (p.h * p.w, p.p * p.q);
    for_planes(x, hw, y, pq, |x, y| {
        for (plane, y) in x.chunks_exact(hw).zip(y.chunks_exact_mut(pq)) {
            for oh in 0..p.p {
                let rows = p.window(0, oh);
                for ow in 0..p.q {
                    let cols = p.window(1, ow);
                    let sum: f32 = rows.clone().map(|ih| plane[ih * p.w..][cols.clone()].iter().sum::<f32>()).sum();
                    y[oh * p.q + ow] = sum / p.divisor(oh, ow);
                }
            }
        }
    });
}

/// `dx` (overwritten): each `dy` divided by its window's divisor and added to the real
/// elements of its window.
///
/// # Panics
/// If the geometry is inconsistent or a slice has the wrong length.
pub fn avg_pool2d_backward(p: &Pooling2d, dy: &[f32], dx: &mut [f32]) {
    const OP: &str = "avg_pool2d_backward";
    p.check(OP);
    check_len(OP, "dy", dy.len(), p.y_len());
    check_len(OP, "dx", dx.len(), p.x_len());
    let (hw, pq) = (p.h * p.w, p.p * p.q);
    if dy.is_empty() {
        dx.fill(0.0);
        return;
    }
    for_planes(dy, pq, dx, hw, |dy, dx| {
        for (dy, plane) in dy.chunks_exact(pq).zip(dx.chunks_exact_mut(hw)) {
            plane.fill(0.0);
            for oh in 0..p.p {
                let rows = p.window(0, oh);
                for ow in 0..p.q {
                    let cols = p.window(1, ow);
                    let g = dy[oh * p.q + ow] / p.divisor(oh, ow);
                    for ih in rows.clone() {
                        plane[ih * p.w..][cols.clone()].iter_mut().for_each(|d| *d += g);
                    }
                }
            }
        }
    });
}

/// `y[n, c]` = the mean of `x[n, c, :, :]` over its `hw` elements (summed in f64). With
/// `hw = 0` the mean is NaN, as 0/0.
///
/// # Panics
/// If `x` is not `n·c·hw` long or `y` not `n·c`.
pub fn global_avg_pool_forward(n: usize, c: usize, hw: usize, x: &[f32], y: &mut [f32]) {
    const OP: &str = "global_avg_pool";
    check_len(OP, "x", x.len(), n * c * hw);
    check_len(OP, "y", y.len(), n * c);
    if hw == 0 {
        y.fill(f32::NAN);
        return;
    }
    for_planes(x, hw, y, 1, |x, y| {
        for (plane, y) in x.chunks_exact(hw).zip(y.iter_mut()) {
            let sum: f64 = plane.iter().map(|&v| f64::from(v)).sum();
            *y = (sum / hw as f64) as f32;
        }
    });
}

/// `dx[n, c, :, :]` (overwritten) = `dy[n, c] / hw`.
///
/// # Panics
/// If `dy` is not `n·c` long or `dx` not `n·c·hw`.
pub fn global_avg_pool_backward(n: usize, c: usize, hw: usize, dy: &[f32], dx: &mut [f32]) {
    const OP: &str = "global_avg_pool_backward";
    check_len(OP, "dy", dy.len(), n * c);
    check_len(OP, "dx", dx.len(), n * c * hw);
    if hw == 0 {
        return;
    }
    for_planes(dy, 1, dx, hw, |dy, dx| {
        for (&g, plane) in dy.iter().zip(dx.chunks_exact_mut(hw)) {
            plane.fill(g / hw as f32);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divisors_follow_pytorch() {
        // 5×5 input, 3×3 window, stride 2, padding 1: outputs 3×3.
        let p = Pooling2d::new([1, 1, 5, 5], [3, 3], [2, 2], [1, 1], true).expect("fits");
        assert_eq!((p.p, p.q), (3, 3));
        assert_eq!(p.divisor(0, 0), 9.0);
        let p = Pooling2d { count_include_pad: false, ..p };
        assert_eq!(p.divisor(0, 0), 4.0);
        assert_eq!(p.divisor(1, 1), 9.0);
        // 4×4 input, 3×3 window, stride 2, padding 1: the last window spans input rows
        // 1..4 plus one padding row, inside the padded input (it ends at row 4 < 5).
        let p = Pooling2d::new([1, 1, 4, 4], [3, 3], [2, 2], [1, 1], true).expect("fits");
        assert_eq!((p.p, p.q), (2, 2));
        assert_eq!(p.divisor(1, 1), 9.0);
        // 5-wide input, window 4, stride 3, padding 2: padded width 9, windows start at
        // −2 and 1; the second ends at 5, inside the padded input (ends at 7).
        let p = Pooling2d::new([1, 1, 1, 5], [1, 4], [1, 3], [0, 2], true).expect("fits");
        assert_eq!(p.q, 2);
        assert_eq!(p.divisor(0, 0), 4.0);
        assert_eq!(p.divisor(0, 1), 4.0);
    }

    #[test]
    fn new_refuses_padding_over_half_the_window() {
        assert!(Pooling2d::new([1, 1, 4, 4], [2, 2], [2, 2], [2, 1], false).is_none());
        assert!(Pooling2d::new([1, 1, 4, 4], [2, 3], [2, 2], [1, 1], false).is_some());
    }

    #[test]
    fn window_clipped_by_padded_bounds() {
        // 3-wide input, window 2, stride 2, padding 1: padded width 5, windows at −1, 1.
        let p = Pooling2d::new([1, 1, 1, 3], [1, 2], [1, 2], [0, 1], true).expect("fits");
        assert_eq!(p.q, 2);
        assert_eq!(p.window(1, 0), 0..1);
        assert_eq!(p.window(1, 1), 1..3);
        assert_eq!(p.window_padded(1, 1), (1, 2));
    }
}
