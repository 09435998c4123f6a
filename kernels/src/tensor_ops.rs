//! Elementwise arithmetic (`add`, `mul`), bias (`bias_add`, `bias_grad`) and data
//! movement (`concat`, `split`, `reshape`, `transpose`, `embedding`,
//! `embedding_backward`), plus the two views of a tensor the other modules share:
//! [`Rows`] (the last axis) and [`ChannelView`] (one axis between an outer and an inner
//! block).
//!
//! Data-movement kernels are generic over the element type (`T: Copy`), because the IR
//! allows any dtype there (an `i32` label tensor can be reshaped); arithmetic is `f32`.
//! Index operands (`ids`) may be `i32` or `i64`.
//!
//! Parallelism: work is cut into tasks of at least [`PAR_CHUNK`] elements, so a tensor
//! smaller than that runs on the calling thread without touching rayon. Reductions use a
//! partition that depends only on the sizes, and add the partial sums in a fixed order,
//! so every kernel gives bit-identical results from run to run and on any thread count.

use crate::error::KernelError;
use multiversion::multiversion;
use rayon::prelude::*;
use std::ops::Range;

/// The least number of elements a parallel task gets. Smaller tensors stay on one thread.
pub const PAR_CHUNK: usize = 16 * 1024;

/// The most tasks a reduction is cut into (each keeps its own small accumulator).
const MAX_REDUCE_TASKS: usize = 32;

/// A row-major tensor seen as `rows` rows of `cols` contiguous elements: the view of
/// every "over the last axis" op (softmax, layer norm, cross-entropy, embedding tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rows {
    pub rows: usize,
    pub cols: usize,
}

impl Rows {
    /// `shape` seen as rows of its last axis; a rank-0 shape is one row of one element.
    pub fn of_last_axis(shape: &[usize]) -> Rows {
        match shape.split_last() {
            Some((&cols, outer)) => Rows { rows: outer.iter().product(), cols },
            None => Rows { rows: 1, cols: 1 },
        }
    }

    pub fn numel(self) -> usize {
        self.rows * self.cols
    }
}

/// A row-major tensor seen as `[outer, channels, inner]` around one axis: `channels` is
/// the axis's size, `outer` the product of the dimensions before it, `inner` of those
/// after it. Axis 1 of NCHW is `[N, C, H·W]`; the last axis of `[rows, D]` is
/// `[rows, D, 1]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelView {
    pub outer: usize,
    pub channels: usize,
    pub inner: usize,
}

impl ChannelView {
    /// `shape` seen around `axis` (already normalised to `0..rank`).
    ///
    /// # Panics
    /// If `axis` is not below the rank of `shape`.
    pub fn of(shape: &[usize], axis: usize) -> ChannelView {
        assert!(axis < shape.len(), "axis {axis} is out of range for a rank-{} shape", shape.len());
        ChannelView {
            outer: shape[..axis].iter().product(),
            channels: shape[axis],
            inner: shape[axis + 1..].iter().product(),
        }
    }

    pub fn numel(self) -> usize {
        self.outer * self.channels * self.inner
    }
}

// ---------------------------------------------------------------------------------------
// Shared helpers (crate-private).

/// How many rows of `cols` elements make one parallel task.
pub(crate) fn rows_per_task(cols: usize) -> usize {
    (PAR_CHUNK / cols.max(1)).max(1)
}

/// Rows per task for a reduction over `rows` rows of `cols`: at least [`PAR_CHUNK`]
/// elements and at most [`MAX_REDUCE_TASKS`] tasks. Depends on the sizes only.
pub(crate) fn reduce_rows_per_task(rows: usize, cols: usize) -> usize {
    rows_per_task(cols).max(rows.div_ceil(MAX_REDUCE_TASKS)).max(1)
}

/// `y[i] = f(x[i])` on the calling thread, compiled for AVX-512 and AVX2 as well as the
/// baseline and picked at run time: `f`, a small closure, is inlined into each clone, so
/// the loop vectorises at the widest width the CPU has. (A large `f` may not be inlined,
/// and then every element pays a call: GELU's backward ran 7× slower that way, so GELU
/// has loops of its own; see [`map_unary_chunks`].)
#[multiversion(targets("x86_64+avx512f+avx512vl+fma", "x86_64+avx2+fma"))]
fn unary_loop<F: Fn(f32) -> f32>(x: &[f32], y: &mut [f32], f: &F) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y = f(x);
    }
}

/// `y[i] = f(a[i], b[i])` on the calling thread; multiversioned like [`unary_loop`].
#[multiversion(targets("x86_64+avx512f+avx512vl+fma", "x86_64+avx2+fma"))]
fn binary_loop<F: Fn(f32, f32) -> f32>(a: &[f32], b: &[f32], y: &mut [f32], f: &F) {
    for ((y, &a), &b) in y.iter_mut().zip(a).zip(b) {
        *y = f(a, b);
    }
}

/// `y[i] = f(x[i])`, in parallel over large slices.
pub(crate) fn map_unary(x: &[f32], y: &mut [f32], f: impl Fn(f32) -> f32 + Sync) {
    assert_eq!(x.len(), y.len(), "input and output lengths differ");
    if y.len() <= PAR_CHUNK {
        unary_loop(x, y, &f);
    } else {
        y.par_chunks_mut(PAR_CHUNK).zip(x.par_chunks(PAR_CHUNK)).for_each(|(y, x)| unary_loop(x, y, &f));
    }
}

/// `y[i] = f(a[i], b[i])`, in parallel over large slices.
pub(crate) fn map_binary(a: &[f32], b: &[f32], y: &mut [f32], f: impl Fn(f32, f32) -> f32 + Sync) {
    assert_eq!(a.len(), y.len(), "first input and output lengths differ");
    assert_eq!(b.len(), y.len(), "second input and output lengths differ");
    if y.len() <= PAR_CHUNK {
        binary_loop(a, b, y, &f);
    } else {
        y.par_chunks_mut(PAR_CHUNK)
            .zip(a.par_chunks(PAR_CHUNK))
            .zip(b.par_chunks(PAR_CHUNK))
            .for_each(|((y, a), b)| binary_loop(a, b, y, &f));
    }
}

/// `f(x_chunk, y_chunk)` over matching chunks of [`PAR_CHUNK`] elements, in parallel over
/// large slices: for kernels whose loop is a multiversioned function of its own (an
/// element function too large to be sure of inlining into [`unary_loop`]).
pub(crate) fn map_unary_chunks(x: &[f32], y: &mut [f32], f: impl Fn(&[f32], &mut [f32]) + Sync) {
    assert_eq!(x.len(), y.len(), "input and output lengths differ");
    if y.len() <= PAR_CHUNK {
        f(x, y);
    } else {
        y.par_chunks_mut(PAR_CHUNK).zip(x.par_chunks(PAR_CHUNK)).for_each(|(y, x)| f(x, y));
    }
}

/// `f(a_chunk, b_chunk, y_chunk)`, like [`map_unary_chunks`].
pub(crate) fn map_binary_chunks(a: &[f32], b: &[f32], y: &mut [f32], f: impl Fn(&[f32], &[f32], &mut [f32]) + Sync) {
    assert_eq!(a.len(), y.len(), "first input and output lengths differ");
    assert_eq!(b.len(), y.len(), "second input and output lengths differ");
    if y.len() <= PAR_CHUNK {
        f(a, b, y);
    } else {
        y.par_chunks_mut(PAR_CHUNK)
            .zip(a.par_chunks(PAR_CHUNK))
            .zip(b.par_chunks(PAR_CHUNK))
            .for_each(|((y, a), b)| f(a, b, y));
    }
}

/// `dst.copy_from_slice(src)`, in parallel over large slices.
pub(crate) fn par_copy<T: Copy + Send + Sync>(src: &[T], dst: &mut [T]) {
    assert_eq!(src.len(), dst.len(), "source and destination lengths differ");
    if dst.len() <= PAR_CHUNK {
        dst.copy_from_slice(src);
    } else {
        dst.par_chunks_mut(PAR_CHUNK).zip(src.par_chunks(PAR_CHUNK)).for_each(|(d, s)| d.copy_from_slice(s));
    }
}

/// Sums per-task accumulators of `acc_len` values over `rows` rows of `cols` elements:
/// `f(acc, rows)` adds the contribution of a range of rows into `acc`. The partition and
/// the order of the final additions depend on the sizes only (deterministic).
pub(crate) fn reduce_rows(
    rows: usize,
    cols: usize,
    acc_len: usize,
    f: impl Fn(&mut [f64], Range<usize>) + Sync,
) -> Vec<f64> {
    let mut total = vec![0.0; acc_len];
    if rows * cols <= PAR_CHUNK {
        f(&mut total, 0..rows);
        return total;
    }
    let per = reduce_rows_per_task(rows, cols);
    let partials: Vec<Vec<f64>> = (0..rows.div_ceil(per))
        .into_par_iter()
        .map(|t| {
            let mut acc = vec![0.0; acc_len];
            f(&mut acc, t * per..((t + 1) * per).min(rows));
            acc
        })
        .collect();
    for p in &partials {
        for (t, v) in total.iter_mut().zip(p) {
            *t += v;
        }
    }
    total
}

/// Like [`reduce_rows`], but each task also writes its rows of `out` (`cols` elements a
/// row): `f(acc, first_row, out_rows)`.
pub(crate) fn reduce_rows_with_output(
    out: &mut [f32],
    rows: usize,
    cols: usize,
    acc_len: usize,
    f: impl Fn(&mut [f64], usize, &mut [f32]) + Sync,
) -> Vec<f64> {
    assert_eq!(out.len(), rows * cols, "output length is not rows × cols");
    let mut total = vec![0.0; acc_len];
    if rows * cols <= PAR_CHUNK || cols == 0 {
        f(&mut total, 0, out);
        return total;
    }
    let per = reduce_rows_per_task(rows, cols);
    let partials: Vec<Vec<f64>> = out
        .par_chunks_mut(per * cols)
        .enumerate()
        .map(|(t, chunk)| {
            let mut acc = vec![0.0; acc_len];
            f(&mut acc, t * per, chunk);
            acc
        })
        .collect();
    for p in &partials {
        for (t, v) in total.iter_mut().zip(p) {
            *t += v;
        }
    }
    total
}

/// Runs `f(first_row, out_rows)` over `out` cut into groups of whole rows of `cols`
/// elements, in parallel when `out` is large.
pub(crate) fn for_row_groups<T: Send>(out: &mut [T], cols: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    if out.is_empty() {
        return;
    }
    assert!(cols > 0 && out.len().is_multiple_of(cols), "output length is not a multiple of the row length");
    if out.len() <= PAR_CHUNK {
        f(0, out);
        return;
    }
    let per = rows_per_task(cols);
    out.par_chunks_mut(per * cols).enumerate().for_each(|(t, chunk)| f(t * per, chunk));
}

/// Calls `f(first_channel, first_row, count)` for maximal runs of consecutive rows
/// `range` of a `[outer, channels, inner]` view whose channels are consecutive too (a run
/// ends where the channel index wraps to 0).
pub(crate) fn channel_runs(channels: usize, range: Range<usize>, mut f: impl FnMut(usize, usize, usize)) {
    let mut row = range.start;
    while row < range.end {
        let c = row % channels;
        let count = (channels - c).min(range.end - row);
        f(c, row, count);
        row += count;
    }
}

/// Sum of `x` in f64, eight independent accumulators (vectorisable). Always inlined, so
/// a multiversioned caller gets it at its own vector width.
#[inline(always)]
pub(crate) fn sum_f64(x: &[f32]) -> f64 {
    let mut acc = [0.0f64; 8];
    let chunks = x.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for i in 0..8 {
            acc[i] += f64::from(c[i]);
        }
    }
    let mut s: f64 = acc.iter().sum();
    for &v in tail {
        s += f64::from(v);
    }
    s
}

/// Converts an index to `usize` if it lies in `[0, bound)`.
pub(crate) fn checked_index<I: Copy + Into<i64>>(
    what: &'static str,
    id: I,
    bound: usize,
) -> Result<usize, KernelError> {
    let index: i64 = id.into();
    match usize::try_from(index) {
        Ok(i) if i < bound => Ok(i),
        _ => Err(KernelError::IndexOutOfRange { what, index, bound }),
    }
}

/// Checks every index of `ids` against `[0, bound)`, reporting the first that is not.
pub(crate) fn check_indices<I: Copy + Into<i64>>(
    what: &'static str,
    ids: &[I],
    bound: usize,
) -> Result<(), KernelError> {
    for &id in ids {
        checked_index(what, id, bound)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Elementwise arithmetic.

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

// ---------------------------------------------------------------------------------------
// Data movement.

/// `y = x`: a reshape is a copy (the target shape is only the caller's view of `y`).
pub fn reshape<T: Copy + Send + Sync>(x: &[T], y: &mut [T]) {
    par_copy(x, y);
}

/// Concatenation along one axis. Each input is seen as `[outer, len_i / outer]` (its
/// size along the axis times the product of the dimensions after it), and the output
/// as `[outer, Σ len_i / outer]`; `outer` is the product of the dimensions before the
/// axis.
///
/// # Panics
/// If `outer` is 0 while an input or the output is not empty, if an input's length is
/// not a multiple of `outer`, or if `y` has the wrong length.
pub fn concat<T: Copy + Send + Sync>(outer: usize, inputs: &[&[T]], y: &mut [T]) {
    if outer == 0 {
        assert!(y.is_empty() && inputs.iter().all(|x| x.is_empty()), "outer is 0 but operands are not empty");
        return;
    }
    for x in inputs {
        assert!(x.len().is_multiple_of(outer), "input length {} is not a multiple of outer {outer}", x.len());
    }
    let total: usize = inputs.iter().map(|x| x.len() / outer).sum();
    assert_eq!(y.len(), outer * total, "output length is not outer × the sum of the input rows");
    if total == 0 {
        return;
    }
    if total >= PAR_CHUNK {
        // Long rows: copy segment by segment, each in parallel.
        for (o, row) in y.chunks_exact_mut(total).enumerate() {
            let mut off = 0;
            for x in inputs {
                let len = x.len() / outer;
                par_copy(&x[o * len..][..len], &mut row[off..off + len]);
                off += len;
            }
        }
    } else {
        for_row_groups(y, total, |row0, ys| {
            for (r, row) in ys.chunks_exact_mut(total).enumerate() {
                let o = row0 + r;
                let mut off = 0;
                for x in inputs {
                    let len = x.len() / outer;
                    row[off..off + len].copy_from_slice(&x[o * len..][..len]);
                    off += len;
                }
            }
        });
    }
}

/// Splitting along one axis, the inverse (and backward) of [`concat`]: `x` is seen as
/// `[outer, Σ len_i / outer]` and output i as `[outer, len_i / outer]`.
///
/// # Panics
/// As [`concat`], with the roles of inputs and output exchanged.
pub fn split<T: Copy + Send + Sync>(outer: usize, x: &[T], outputs: &mut [&mut [T]]) {
    if outer == 0 {
        assert!(x.is_empty() && outputs.iter().all(|y| y.is_empty()), "outer is 0 but operands are not empty");
        return;
    }
    for y in outputs.iter() {
        assert!(y.len().is_multiple_of(outer), "output length {} is not a multiple of outer {outer}", y.len());
    }
    let total: usize = outputs.iter().map(|y| y.len() / outer).sum();
    assert_eq!(x.len(), outer * total, "input length is not outer × the sum of the output rows");
    let mut off = 0;
    for y in outputs.iter_mut() {
        let len = y.len() / outer;
        if len == 0 {
            continue;
        }
        if len >= PAR_CHUNK {
            for (o, row) in y.chunks_exact_mut(len).enumerate() {
                par_copy(&x[o * total + off..][..len], row);
            }
        } else {
            for_row_groups(y, len, |row0, ys| {
                for (r, row) in ys.chunks_exact_mut(len).enumerate() {
                    row.copy_from_slice(&x[(row0 + r) * total + off..][..len]);
                }
            });
        }
        off += len;
    }
}

/// Side of the square tiles the transpose moves when the input's innermost axis does not
/// stay innermost.
const TILE: usize = 32;

/// `y = x` transposed: `y.shape[i] = shape[perm[i]]`, any rank.
///
/// Dimensions of size 1 are dropped and output dimensions that are also adjacent, in
/// order, in the input are merged first, so e.g. `[0, 2, 1, 3]` on `[B, S, H, D]`
/// becomes a copy of contiguous rows of D elements, and a batched matrix transpose
/// becomes a tiled 2-D transpose.
///
/// # Panics
/// If `perm` is not a permutation of `0..shape.len()` or the lengths do not match `shape`.
pub fn transpose<T: Copy + Send + Sync>(shape: &[usize], perm: &[usize], x: &[T], y: &mut [T]) {
    let rank = shape.len();
    assert_eq!(perm.len(), rank, "perm {perm:?} does not match the rank of {shape:?}");
    let mut seen = vec![false; rank];
    for &p in perm {
        assert!(p < rank && !seen[p], "perm {perm:?} is not a permutation of 0..{rank}");
        seen[p] = true;
    }
    let numel: usize = shape.iter().product();
    assert_eq!(x.len(), numel, "x does not match shape {shape:?}");
    assert_eq!(y.len(), numel, "y does not match shape {shape:?}");
    if numel == 0 {
        return;
    }
    let mut in_stride = vec![0; rank];
    let mut acc = 1;
    for d in (0..rank).rev() {
        in_stride[d] = acc;
        acc *= shape[d];
    }
    // Output dimensions as (size, stride in x), simplified.
    let mut dims: Vec<(usize, usize)> = Vec::with_capacity(rank);
    for &p in perm {
        let (n, s) = (shape[p], in_stride[p]);
        if n == 1 {
            continue;
        }
        match dims.last_mut() {
            Some(last) if last.1 == s * n => *last = (last.0 * n, s),
            _ => dims.push((n, s)),
        }
    }
    let Some(&(row_len, last_stride)) = dims.last() else {
        y.copy_from_slice(x); // a single element
        return;
    };
    if last_stride == 1 {
        if dims.len() == 1 {
            par_copy(x, y);
        } else {
            transpose_rows(&dims, x, y);
        }
        return;
    }
    // The input's unit-stride axis exists (a dimension of size > 1 with stride 1: the
    // innermost non-trivial input axis) and is not the output's last.
    let j = dims.iter().position(|&(_, s)| s == 1).expect("some dimension has stride 1");
    let inner: usize = dims[j + 1..].iter().map(|d| d.0).product();
    let prefix = &dims[..j];
    let mid = &dims[j + 1..dims.len() - 1];
    let n_j = dims[j].0;
    let work = |p: usize, block: &mut [T]| {
        // `block` is y[p, :, ...]: all of dims j.. for one prefix index p.
        let src_prefix = offset_of(prefix, p);
        let tile = |t: usize, out: &mut [T]| {
            let a0 = t * TILE;
            let rows_a = out.len() / inner;
            let mut odo = Odometer::new(mid, 0);
            for m in 0..inner / row_len {
                let src_mid = odo.offset;
                for b0 in (0..row_len).step_by(TILE) {
                    let b1 = (b0 + TILE).min(row_len);
                    for a in 0..rows_a {
                        let src = src_prefix + a0 + a + src_mid;
                        let dst = &mut out[a * inner + m * row_len..][b0..b1];
                        for (k, d) in dst.iter_mut().enumerate() {
                            *d = x[src + (b0 + k) * last_stride];
                        }
                    }
                }
                odo.step();
            }
        };
        if block.len() <= PAR_CHUNK {
            block.chunks_mut(TILE * inner).enumerate().for_each(|(t, out)| tile(t, out));
        } else {
            block.par_chunks_mut(TILE * inner).enumerate().for_each(|(t, out)| tile(t, out));
        }
    };
    if numel <= PAR_CHUNK {
        y.chunks_mut(n_j * inner).enumerate().for_each(|(p, b)| work(p, b));
    } else {
        y.par_chunks_mut(n_j * inner).enumerate().for_each(|(p, b)| work(p, b));
    }
}

/// The transpose whose output's last dimension is contiguous in the input: whole rows.
fn transpose_rows<T: Copy + Send + Sync>(dims: &[(usize, usize)], x: &[T], y: &mut [T]) {
    let (row_len, _) = dims[dims.len() - 1];
    let outer = &dims[..dims.len() - 1];
    for_row_groups(y, row_len, |row0, ys| {
        let mut odo = Odometer::new(outer, row0);
        for row in ys.chunks_exact_mut(row_len) {
            row.copy_from_slice(&x[odo.offset..][..row_len]);
            odo.step();
        }
    });
}

/// The source offset of linear index `i` over `dims` (size, stride), row-major.
fn offset_of(dims: &[(usize, usize)], mut i: usize) -> usize {
    let mut off = 0;
    for &(n, s) in dims.iter().rev() {
        off += (i % n) * s;
        i /= n;
    }
    off
}

/// Walks a row-major multi-index over dims (size, stride), tracking the strided offset.
struct Odometer<'a> {
    dims: &'a [(usize, usize)],
    index: Vec<usize>,
    offset: usize,
}

impl<'a> Odometer<'a> {
    fn new(dims: &'a [(usize, usize)], mut linear: usize) -> Self {
        let mut index = vec![0; dims.len()];
        let mut offset = 0;
        for (d, &(n, s)) in dims.iter().enumerate().rev() {
            index[d] = linear % n;
            offset += index[d] * s;
            linear /= n;
        }
        Odometer { dims, index, offset }
    }

    fn step(&mut self) {
        for (d, &(n, s)) in self.dims.iter().enumerate().rev() {
            self.index[d] += 1;
            self.offset += s;
            if self.index[d] < n {
                return;
            }
            self.offset -= n * s;
            self.index[d] = 0;
        }
    }
}

/// `y[k, :] = table[ids[k], :]`: one row of the `[vocab, dim]` table per id (ids of any
/// shape, flattened).
///
/// # Errors
/// [`KernelError::IndexOutOfRange`] for the first id outside `[0, vocab)`; `y` is then
/// left unwritten.
pub fn embedding<I: Copy + Into<i64> + Sync>(
    table_shape: Rows,
    ids: &[I],
    table: &[f32],
    y: &mut [f32],
) -> Result<(), KernelError> {
    let Rows { rows: vocab, cols: dim } = table_shape;
    assert_eq!(table.len(), table_shape.numel(), "table does not match its shape");
    assert_eq!(y.len(), ids.len() * dim, "output is not ids × dim");
    check_indices("embedding id", ids, vocab)?;
    if dim == 0 {
        return Ok(());
    }
    for_row_groups(y, dim, |row0, ys| {
        for (row, &id) in ys.chunks_exact_mut(dim).zip(&ids[row0..]) {
            let v = id.into() as usize; // checked above
            row.copy_from_slice(&table[v * dim..][..dim]);
        }
    });
    Ok(())
}

/// The table gradient of [`embedding`]: `dtable` is zeroed, then `dy[k, :]` is added to
/// row `ids[k]` for every k, in order (rows hit twice accumulate; the result does not
/// depend on the thread count).
///
/// # Errors
/// [`KernelError::IndexOutOfRange`] for the first id outside `[0, vocab)`; `dtable` is
/// then left unwritten.
pub fn embedding_backward<I: Copy + Into<i64> + Sync>(
    table_shape: Rows,
    dy: &[f32],
    ids: &[I],
    dtable: &mut [f32],
) -> Result<(), KernelError> {
    let Rows { rows: vocab, cols: dim } = table_shape;
    assert_eq!(dtable.len(), table_shape.numel(), "dtable does not match its shape");
    assert_eq!(dy.len(), ids.len() * dim, "dy is not ids × dim");
    check_indices("embedding id", ids, vocab)?;
    if dim == 0 {
        return Ok(());
    }
    // Each task owns a range of table rows and scans all the ids for those in it.
    let per = reduce_rows_per_task(vocab, dim);
    let work = |v0: usize, rows: &mut [f32]| {
        rows.fill(0.0);
        let v1 = v0 + rows.len() / dim;
        for (k, &id) in ids.iter().enumerate() {
            let v = id.into() as usize;
            if (v0..v1).contains(&v) {
                let dst = &mut rows[(v - v0) * dim..][..dim];
                for (d, &g) in dst.iter_mut().zip(&dy[k * dim..][..dim]) {
                    *d += g;
                }
            }
        }
    };
    if dtable.len() <= PAR_CHUNK {
        work(0, dtable);
    } else {
        dtable.par_chunks_mut(per * dim).enumerate().for_each(|(t, rows)| work(t * per, rows));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_of_shapes() {
        assert_eq!(ChannelView::of(&[2, 3, 4, 5], 1), ChannelView { outer: 2, channels: 3, inner: 20 });
        assert_eq!(ChannelView::of(&[6, 7], 1), ChannelView { outer: 6, channels: 7, inner: 1 });
        assert_eq!(Rows::of_last_axis(&[2, 3, 4]), Rows { rows: 6, cols: 4 });
        assert_eq!(Rows::of_last_axis(&[]), Rows { rows: 1, cols: 1 });
    }

    #[test]
    fn transpose_simplifies_to_row_copies_and_tiles() {
        // [0, 2, 1, 3] on [2, 3, 4, 5]: rows of 5.
        let shape = [2, 3, 4, 5];
        let x: Vec<u32> = (0..120).collect();
        let mut y = vec![0; 120];
        transpose(&shape, &[0, 2, 1, 3], &x, &mut y);
        assert_eq!(&y[..10], &[0, 1, 2, 3, 4, 20, 21, 22, 23, 24]);
        // A 2-D transpose larger than a tile.
        let (r, c) = (70, 45);
        let x: Vec<u32> = (0..(r * c) as u32).collect();
        let mut y = vec![0; r * c];
        transpose(&[r, c], &[1, 0], &x, &mut y);
        for i in 0..r {
            for j in 0..c {
                assert_eq!(y[j * r + i], x[i * c + j]);
            }
        }
    }

    #[test]
    fn large_tensors_take_the_parallel_paths() {
        // Bigger than PAR_CHUNK, so rayon runs; results must match the serial reading.
        let (b, s, h, d) = (2, 130, 4, 40);
        let n = b * s * h * d;
        let x: Vec<u32> = (0..n as u32).collect();
        let mut y = vec![0; n];
        transpose(&[b, s, h, d], &[0, 2, 3, 1], &x, &mut y);
        for i0 in 0..b {
            for i2 in 0..h {
                for i3 in 0..d {
                    for i1 in 0..s {
                        let out = ((i0 * h + i2) * d + i3) * s + i1;
                        assert_eq!(y[out], x[((i0 * s + i1) * h + i2) * d + i3]);
                    }
                }
            }
        }
        let view = ChannelView { outer: 3, channels: 7, inner: 1000 };
        let dy: Vec<f32> = (0..view.numel()).map(|i| (i % 13) as f32 - 6.0).collect();
        let mut db = vec![0.0; 7];
        bias_grad(view, &dy, &mut db);
        for (c, &v) in db.iter().enumerate() {
            let want: f64 =
                (0..3).flat_map(|o| (0..1000).map(move |i| (o * 7 + c) * 1000 + i)).map(|k| f64::from(dy[k])).sum();
            assert!((f64::from(v) - want).abs() < 1e-3, "{v} vs {want}");
        }
    }
}
