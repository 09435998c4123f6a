//! Convolutions whose per-image product is too small to split (LeNet's layers, DenseNet's
//! 7×7 3×3 layers): the images are spread over a fixed number of lanes instead, each with
//! its own column matrix in the scratch, running im2col and serial GEMMs image after
//! image (see the module documentation of [`super`]).
//!
//! Per image, the forward pass and the data gradient do exactly what the image-by-image
//! path does, so their results do not depend on the lanes. The filter gradient sums
//! images: lane `l` adds its own contiguous range of images into its own partial sum
//! (lane 0's is `dw`, the others follow the column matrices in the scratch), and the
//! partial sums are added in lane order. The lane count depends on the sizes only, so the
//! result is the same on any number of threads.

use super::unfold::{col2im_planes, im2col_rows};
use super::{Conv2d, col_len};
use crate::gemm::{PARALLEL_MIN_MACS, Sgemm, sgemm_serial};
use rayon::prelude::*;

/// The most lanes: a few per core, so a core slowed by another process hands its
/// remaining lanes to the other (rayon steals whole lanes).
const IMAGE_LANES: usize = 4;

/// The most scratch, in f32, the lanes' column matrices may take together (4 MiB).
const LANES_SCRATCH_F32: usize = 1 << 20;

/// How many lanes `p` runs on, or `None` for the image-by-image path: the per-image product
/// must be below [`PARALLEL_MIN_MACS`] (larger ones split themselves, see
/// [`crate::gemm`]), the whole batch at least that much (or splitting does not pay), and
/// two lanes' column matrices must fit [`LANES_SCRATCH_F32`]. Pointwise convolutions need
/// no im2col and keep their image-by-image path (and no scratch).
pub(super) fn image_lanes(p: &Conv2d) -> Option<usize> {
    if p.is_pointwise() || p.n < 2 {
        return None;
    }
    let per_image = p.macs() / p.n as u64;
    if per_image >= PARALLEL_MIN_MACS as u64 || p.macs() < PARALLEL_MIN_MACS as u64 {
        return None;
    }
    let lanes = p.n.min(IMAGE_LANES).min(LANES_SCRATCH_F32 / col_len(p).max(1));
    (lanes >= 2).then_some(lanes)
}

/// Scratch of the lanes: a column matrix per lane, and a partial filter gradient for each
/// lane past the first.
pub(super) fn lanes_scratch_len(p: &Conv2d, lanes: usize) -> usize {
    lanes * col_len(p) + (lanes - 1) * p.w_len()
}

/// Images per lane: contiguous ranges of this many (the last may be shorter).
fn images_per_lane(p: &Conv2d, lanes: usize) -> usize {
    p.n.div_ceil(lanes)
}

/// The forward pass on lanes: per image, im2col into the lane's column matrix, then one
/// serial GEMM per group.
pub(super) fn forward(p: &Conv2d, x: &[f32], w: &[f32], y: &mut [f32], scratch: &mut [f32], lanes: usize) {
    let (chw, kpq, pq) = (p.c * p.h * p.w, p.k * p.p * p.q, p.p * p.q);
    let (kg, crs) = (p.k_per_group(), p.crs_per_group());
    let g = p.gemm(kg, pq, crs);
    let per = images_per_lane(p, lanes);
    let cols = scratch[..lanes * col_len(p)].par_chunks_mut(col_len(p));
    y.par_chunks_mut(per * kpq).zip(cols).enumerate().for_each(|(lane, (y_l, col))| {
        for (i, y_n) in y_l.chunks_mut(kpq).enumerate() {
            im2col_rows(p, &x[(lane * per + i) * chw..][..chw], 0, col);
            for (gi, y_g) in y_n.chunks_mut(kg * pq).enumerate() {
                sgemm_serial(&g, &w[gi * kg * crs..][..kg * crs], &col[gi * crs * pq..][..crs * pq], y_g);
            }
        }
    });
}

/// The data gradient on lanes: per image, one serial GEMM per group into the lane's
/// column matrix, then col2im onto the image's `dx`.
pub(super) fn backward_data(p: &Conv2d, dy: &[f32], w: &[f32], dx: &mut [f32], scratch: &mut [f32], lanes: usize) {
    let (chw, kpq, pq) = (p.c * p.h * p.w, p.k * p.p * p.q, p.p * p.q);
    let (kg, crs) = (p.k_per_group(), p.crs_per_group());
    // col[g] (crs × pq) = w[g]ᵀ · dy[n, g]; w[g] is stored kg × crs.
    let g = Sgemm { transpose_a: true, lda: crs, ..p.gemm(crs, pq, kg) };
    let per = images_per_lane(p, lanes);
    let cols = scratch[..lanes * col_len(p)].par_chunks_mut(col_len(p));
    dx.par_chunks_mut(per * chw).zip(cols).enumerate().for_each(|(lane, (dx_l, col))| {
        for (i, dx_n) in dx_l.chunks_mut(chw).enumerate() {
            let dy_n = &dy[(lane * per + i) * kpq..][..kpq];
            for (gi, col_g) in col.chunks_mut(crs * pq).enumerate() {
                sgemm_serial(&g, &w[gi * kg * crs..][..kg * crs], &dy_n[gi * kg * pq..][..kg * pq], col_g);
            }
            col2im_planes(p, col, 0, dx_n);
        }
    });
}

/// The filter gradient on lanes: each lane sums its images into its own partial sum,
/// and the partial sums are added in lane order (see the module documentation).
pub(super) fn backward_filter(p: &Conv2d, x: &[f32], dy: &[f32], dw: &mut [f32], scratch: &mut [f32], lanes: usize) {
    let (chw, kpq, pq) = (p.c * p.h * p.w, p.k * p.p * p.q, p.p * p.q);
    let (kg, crs) = (p.k_per_group(), p.crs_per_group());
    // dw[g] (kg × crs) (+)= dy[n, g] (kg × pq) · col[g]ᵀ; col[g] is stored crs × pq.
    let first = Sgemm { transpose_b: true, ldb: pq, ..p.gemm(kg, crs, pq) };
    let rest = Sgemm { beta: 1.0, ..first };
    let per = images_per_lane(p, lanes);
    let used = p.n.div_ceil(per);
    let (cols, partials) = scratch[..lanes_scratch_len(p, lanes)].split_at_mut(lanes * col_len(p));
    let mut sums: Vec<&mut [f32]> =
        std::iter::once(&mut *dw).chain(partials.chunks_mut(p.w_len())).take(used).collect();
    sums.par_iter_mut().zip(cols.par_chunks_mut(col_len(p))).enumerate().for_each(|(lane, (sum, col))| {
        let images = lane * per..p.n.min((lane + 1) * per);
        for ni in images.clone() {
            im2col_rows(p, &x[ni * chw..][..chw], 0, col);
            let g = if ni == images.start { &first } else { &rest };
            let dy_n = &dy[ni * kpq..][..kpq];
            for (gi, dw_g) in sum.chunks_mut(kg * crs).enumerate() {
                sgemm_serial(g, &dy_n[gi * kg * pq..][..kg * pq], &col[gi * crs * pq..][..crs * pq], dw_g);
            }
        }
    });
    let (total, rest) = sums.split_first_mut().expect("lane 0 is dw itself");
    for part in rest {
        total.iter_mut().zip(part.iter()).for_each(|(t, &v)| *t += v);
    }
}
