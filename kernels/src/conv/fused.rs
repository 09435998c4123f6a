//! Convolution passes with im2col fused into the GEMM: the output positions are cut into
//! blocks of a few hundred KiB of columns, and each block is unfolded right before the
//! GEMM that reads it, while it is in cache (see the module documentation of [`super`]).

use super::Conv2d;
use super::unfold::im2col_block;
use crate::gemm::{PARALLEL_MIN_MACS, Sgemm, sgemm_serial};
use rayon::prelude::*;

/// Target size, in f32, of one column block of the fused forward pass: built by im2col and
/// multiplied while it sits in the core's L2 cache (384 KiB of the 1 MiB here).
const FUSED_BLOCK_F32: usize = 96 * 1024;

/// Independent partial sums of the fused filter gradient: its parallelism, fixed so that
/// the summation order (and so the result) does not depend on the thread count.
const FILTER_LANES: usize = 4;

/// Column-block width for the fused forward pass ([`sgemm_fill_b`]), or `None` when the
/// unfused path is better: a block holds about [`FUSED_BLOCK_F32`] of the column matrix
/// (`crs` rows), at least 64 columns, and there must be a block per thread at least.
pub(super) fn fused_block_cols(crs: usize, pq: usize) -> Option<usize> {
    let width = (FUSED_BLOCK_F32 / crs.max(1)).max(64).next_multiple_of(16);
    (pq >= width * rayon::current_num_threads().max(2)).then_some(width)
}

/// Column blocks of the fused filter gradient, or `None` for the unfused path: as for the
/// forward pass, and the lanes' blocks and partial sums must fit the scratch.
pub(super) fn fused_filter_block_cols(p: &Conv2d) -> Option<usize> {
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
pub(super) fn backward_filter_fused(
    p: &Conv2d,
    x: &[f32],
    dy: &[f32],
    dw: &mut [f32],
    scratch: &mut [f32],
    block_cols: usize,
) {
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
