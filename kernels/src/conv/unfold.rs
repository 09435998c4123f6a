//! im2col and col2im: between an image `[c, h, w]` and its column matrix `[c·r·s, p·q]`
//! (see the module documentation of [`super`]).
//!
//! Whole rows of the column matrix (every output position of one channel and tap) are
//! built by [`im2col_rows`]: the valid output rows and columns of the tap are found once
//! per row, then each output row is a short zero fill, a copy and a zero fill. Those runs
//! are a few dozen floats at LeNet's sizes, where `copy_from_slice` and `fill` (calls to
//! `memcpy` and `memset`) and a division per run cost several times the copy itself: the
//! runs are copied with inline fixed-size moves instead ([`copy_run`], [`zero_run`]). In
//! "same" convolutions (stride 1, output as wide as the input) the valid rows of a tap are
//! one contiguous copy ([`same_row`]). Together they took LeNet's 28×28 5×5 im2col from
//! ~17 µs to ~2 µs an image.

use super::Conv2d;
use crate::tensor_ops::PAR_CHUNK;
use multiversion::multiversion;
use rayon::prelude::*;
use std::ops::Range;

/// The output positions `o` in `0..out_len` whose input coordinate `o·stride + offset`
/// lies in `0..in_len`.
pub(super) fn valid(out_len: usize, in_len: usize, stride: usize, offset: isize) -> Range<usize> {
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

/// `dst = src` (same length) with inline moves: 8 floats at a time and an overlapping
/// last 8, or 4 and 4, or one by one, rather than a call to `memcpy`. (Fixed-size arrays:
/// with `chunks_exact(8)` LLVM still called `memcpy` for each chunk.)
#[inline(always)]
fn copy_run(dst: &mut [f32], src: &[f32]) {
    let n = dst.len();
    let src = &src[..n];
    if n >= 64 {
        dst.copy_from_slice(src); // long enough for the call to pay
    } else if n >= 8 {
        for (d, s) in dst.as_chunks_mut::<8>().0.iter_mut().zip(src.as_chunks::<8>().0) {
            *d = *s;
        }
        if let (Some(d), Some(s)) = (dst.last_chunk_mut::<8>(), src.last_chunk::<8>()) {
            *d = *s;
        }
    } else if n >= 4 {
        if let (Some(d), Some(s)) = (dst.first_chunk_mut::<4>(), src.first_chunk::<4>()) {
            *d = *s;
        }
        if let (Some(d), Some(s)) = (dst.last_chunk_mut::<4>(), src.last_chunk::<4>()) {
            *d = *s;
        }
    } else {
        // Up to three: explicit stores (a loop would become a `memcpy` call again).
        if n > 0 {
            dst[0] = src[0];
        }
        if n > 1 {
            dst[1] = src[1];
        }
        if n > 2 {
            dst[2] = src[2];
        }
    }
}

/// `dst = 0` with inline stores, like [`copy_run`].
#[inline(always)]
fn zero_run(dst: &mut [f32]) {
    let n = dst.len();
    if n >= 64 {
        dst.fill(0.0);
    } else if n >= 8 {
        dst.as_chunks_mut::<8>().0.iter_mut().for_each(|d| *d = [0.0; 8]);
        if let Some(d) = dst.last_chunk_mut::<8>() {
            *d = [0.0; 8];
        }
    } else if n >= 4 {
        if let Some(d) = dst.first_chunk_mut::<4>() {
            *d = [0.0; 4];
        }
        if let Some(d) = dst.last_chunk_mut::<4>() {
            *d = [0.0; 4];
        }
    } else {
        if n > 0 {
            dst[0] = 0.0;
        }
        if n > 1 {
            dst[1] = 0.0;
        }
        if n > 2 {
            dst[2] = 0.0;
        }
    }
}

/// Whole rows `row0..` of one image's column matrix into `rows` (a multiple of `p·q`
/// long), on the calling thread. Compiled for AVX-512 and AVX2 too, for wider moves.
#[multiversion(targets("x86_64+avx512f+avx512vl+fma", "x86_64+avx2+fma"))]
pub(super) fn im2col_rows(p: &Conv2d, x_n: &[f32], row0: usize, rows: &mut [f32]) {
    let (hw, pq, rs) = (p.h * p.w, p.p * p.q, p.r * p.s);
    if pq == 0 {
        return;
    }
    for (i, row) in rows.chunks_exact_mut(pq).enumerate() {
        let (ci, tap) = ((row0 + i) / rs, (row0 + i) % rs);
        let plane = &x_n[ci * hw..][..hw];
        let (off_h, off_w) = tap_offsets(p, tap / p.s, tap % p.s);
        let oh_ok = valid(p.p, p.h, p.stride[0], off_h);
        let ow_ok = valid(p.q, p.w, p.stride[1], off_w);
        if ow_ok.is_empty() {
            zero_run(row);
            continue;
        }
        if p.stride == [1, 1] && p.q == p.w {
            same_row(p, plane, (off_h, off_w), (oh_ok, ow_ok), row);
            continue;
        }
        let iw0 = ((ow_ok.start * p.stride[1]) as isize + off_w) as usize;
        for (oh, seg) in row.chunks_exact_mut(p.q).enumerate() {
            if !oh_ok.contains(&oh) {
                zero_run(seg);
                continue;
            }
            let ih = ((oh * p.stride[0]) as isize + off_h) as usize;
            let src = &plane[ih * p.w + iw0..];
            let (head, rest) = seg.split_at_mut(ow_ok.start);
            let (mid, tail) = rest.split_at_mut(ow_ok.len());
            zero_run(head);
            zero_run(tail);
            if p.stride[1] == 1 {
                copy_run(mid, src);
            } else {
                for (o, &v) in mid.iter_mut().zip(src.iter().step_by(p.stride[1])) {
                    *o = v;
                }
            }
        }
    }
}

/// One row of the column matrix when the stride is 1 and the output is as wide as the
/// input ("same" convolutions): output position `j = oh·q + ow` then reads input element
/// `j + off_h·w + off_w` of the plane, so the valid output rows are one contiguous copy,
/// after which the columns outside `ow_ok` (which read the neighbouring input row, or
/// were cut off at the plane's ends) are cleared.
#[inline(always)]
fn same_row(
    p: &Conv2d,
    plane: &[f32],
    (off_h, off_w): (isize, isize),
    (oh_ok, ow_ok): (Range<usize>, Range<usize>),
    row: &mut [f32],
) {
    let q = p.q;
    let delta = off_h * p.w as isize + off_w;
    // Output positions of the valid rows whose source index lies inside the plane.
    // Both are clamped to the row: with padding and dilation larger than the input, the
    // first source index can lie past the end of the output row.
    let len = row.len() as isize;
    let lo = ((oh_ok.start * q) as isize).max(-delta).min(len) as usize;
    let hi = ((oh_ok.end * q) as isize).min(plane.len() as isize - delta).min(len).max(lo as isize) as usize;
    row[..lo].fill(0.0);
    row[hi..].fill(0.0);
    if hi > lo {
        row[lo..hi].copy_from_slice(&plane[(lo as isize + delta) as usize..][..hi - lo]);
    }
    for seg in row[oh_ok.start * q..oh_ok.end * q].chunks_exact_mut(q) {
        let (head, rest) = seg.split_at_mut(ow_ok.start);
        zero_run(head);
        zero_run(&mut rest[ow_ok.len()..]);
    }
}

/// Unfolds one image `x_n = [c, h, w]` into `col = [c·r·s, p·q]`, rows split over rayon.
pub(super) fn im2col(p: &Conv2d, x_n: &[f32], col: &mut [f32]) {
    let pq = p.p * p.q;
    if pq == 0 || col.is_empty() {
        return;
    }
    if col.len() <= PAR_CHUNK {
        im2col_rows(p, x_n, 0, col);
    } else {
        let per = rows_per_task(pq);
        col.par_chunks_mut(per * pq).enumerate().for_each(|(t, rows)| im2col_rows(p, x_n, t * per, rows));
    }
}

/// Writes columns `cols` of row `(ci, tap)` of one image's column matrix into `out`
/// (`cols.len()` long): for each output position, the input element the tap reads, or 0.
/// (For the fused blocks, which start and end anywhere in an output row.)
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

/// Columns `cols` of the column-matrix rows of `channels` (every tap of each), row-major
/// into `out` (`channels.len()·r·s` rows of `cols.len()`), on the calling thread.
pub(super) fn im2col_block(p: &Conv2d, x_n: &[f32], channels: Range<usize>, cols: Range<usize>, out: &mut [f32]) {
    let (rs, width) = (p.r * p.s, cols.len());
    if width == 0 {
        return;
    }
    for (i, row) in out.chunks_exact_mut(width).enumerate().take(channels.len() * rs) {
        im2col_row(p, x_n, channels.start + i / rs, i % rs, cols.clone(), row);
    }
}

/// Folds `col = [c·r·s, p·q]` back onto one image: `dx_n = [c, h, w]` is overwritten with
/// the sum, for every input element, of the column entries that read it. Planes split
/// over rayon.
pub(super) fn col2im(p: &Conv2d, col: &[f32], dx_n: &mut [f32]) {
    let (hw, pq, rs) = (p.h * p.w, p.p * p.q, p.r * p.s);
    if hw == 0 {
        return;
    }
    if dx_n.len() <= PAR_CHUNK {
        col2im_planes(p, col, 0, dx_n);
    } else {
        let per = rows_per_task(hw.max(rs * pq));
        dx_n.par_chunks_mut(per * hw).enumerate().for_each(|(t, planes)| col2im_planes(p, col, t * per, planes));
    }
}

/// [`col2im`] for the planes of channels `c0..` (`planes`, whole planes), on the calling
/// thread; multiversioned like [`im2col_rows`].
#[multiversion(targets("x86_64+avx512f+avx512vl+fma", "x86_64+avx2+fma"))]
pub(super) fn col2im_planes(p: &Conv2d, col: &[f32], c0: usize, planes: &mut [f32]) {
    let (hw, pq, rs) = (p.h * p.w, p.p * p.q, p.r * p.s);
    if hw == 0 {
        return;
    }
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
    fn short_runs_copy_and_clear_every_length() {
        for n in 0..80 {
            let src: Vec<f32> = (0..n).map(|i| i as f32 + 1.0).collect();
            let mut dst = vec![f32::NAN; n + 1];
            copy_run(&mut dst[..n], &src);
            assert_eq!(&dst[..n], &src[..], "copy of {n}");
            assert!(dst[n].is_nan(), "copy of {n} wrote past its end");
            zero_run(&mut dst[..n]);
            assert!(dst[..n].iter().all(|&v| v == 0.0), "clear of {n}");
            assert!(dst[n].is_nan(), "clear of {n} wrote past its end");
        }
    }
}
