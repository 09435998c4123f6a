//! Elementwise arithmetic (`add`, `mul`, with a second operand broadcast or not, and
//! `sum_to`), bias (`bias_add`, `bias_grad`) and data movement (`concat`, `split`,
//! `reshape`, `transpose`, `embedding`, `embedding_backward`), plus the two views of a
//! tensor the other modules share: [`Rows`] (the last axis) and [`ChannelView`] (one axis
//! between an outer and an inner block).
//!
//! Data-movement kernels are generic over the element type (`T: Copy`), because the IR
//! allows any dtype there (an `i32` label tensor can be reshaped); arithmetic is `f32`.
//! Index operands (`ids`) may be `i32` or `i64`.
//!
//! Parallelism: work is cut into tasks of at least [`PAR_CHUNK`] elements, so a tensor
//! smaller than that runs on the calling thread without touching rayon. Reductions use a
//! partition that depends only on the sizes, and add the partial sums in a fixed order,
//! so every kernel gives bit-identical results from run to run and on any thread count.
//!
//! This file holds the views and the parallel helpers every kernel module shares;
//! `elementwise` the arithmetic and bias kernels, `movement` the data-movement ones.

mod elementwise;
mod movement;

pub use elementwise::{Broadcast, add, add_broadcast, bias_add, bias_grad, mul, mul_broadcast, sum_to};
pub use movement::{concat, embedding, embedding_backward, reshape, split, transpose};

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
