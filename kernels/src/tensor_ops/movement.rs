//! Data movement: `concat`, `split`, `reshape`, `transpose`, `embedding` and
//! `embedding_backward`, generic over the element type where the IR allows any dtype.

use super::{PAR_CHUNK, Rows, check_indices, for_row_groups, par_copy, reduce_rows_per_task};
use crate::error::KernelError;
use rayon::prelude::*;

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
}
