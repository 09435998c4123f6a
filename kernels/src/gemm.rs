//! Single-precision matrix products: the `matmul` op and the GEMM under the convolutions.
//!
//! Every product goes through [`sgemm`], a row-major, BLAS-like GEMM on slices, or its
//! implicit-GEMM variant [`sgemm_fill_b`]. Both are backed by `faer`'s safe matrix views (no
//! `unsafe` here): faer picks an AVX-512 or AVX2 micro-kernel at run time. Large products
//! are cut into blocks of `C` that run single-threaded on the rayon pool.
//!
//! faer was chosen by measurement against the `gemm` (0.19, rayon) and `matrixmultiply`
//! (0.3, threading) crates on the project's 2-core AVX-512 VM (best of 6 rounds, GFLOP/s,
//! both cores; peak is about 100 per core):
//!
//! | m × n × k | faer, blocks on rayon (this module) | faer `Par::rayon` | gemm | matrixmultiply |
//! |---|---:|---:|---:|---:|
//! | 64³ (single thread) | 110 | 110 | 103 | 80 |
//! | 256³ | 220 | 193 | 211 | 173 |
//! | 1024³ | 213 | 214 | 177 | 190 |
//! | 2048³ | 212 | 215 | 194 | 186 |
//! | 64 × 3136 × 576 (3×3 conv) | 209 | 184 | 165 | 115 |
//! | 576 × 3136 × 64, Aᵀ (conv data grad) | 216 | 190 | 208 | 181 |
//! | 64 × 576 × 3136, Bᵀ (conv filter grad) | 204 | 185 | 165 | 98 |
//!
//! faer's own threading fared worst when another process took a core: in a contended run
//! its median on the conv shape fell to 19 GFLOP/s (best 168), below one thread, while
//! rayon blocks slow down to the remaining core's speed. faer is also the only candidate
//! with a safe API. Its cost is build time: about 90 s of a clean release build, against
//! 20 s for `gemm` and 4 s for `matrixmultiply`.
//!
//! Layout conventions (row-major throughout, like CBLAS with `CblasRowMajor`):
//! - an `r × c` operand stored untransposed has element `(i, j)` at `i·ld + j`, `ld ≥ c`;
//! - stored transposed, the slice holds its `c × r` transpose: `(i, j)` is at `j·ld + i`,
//!   `ld ≥ r`.

use faer::{Accum, MatMut, MatRef, Par};
use multiversion::multiversion;
use multiversion::target::match_target;
use rayon::prelude::*;
use std::ops::Range;

/// faer's product, then the calling thread's upper vector state cleared.
///
/// faer's AVX-512 micro-kernels return with the upper halves of the vector registers
/// dirty. The x86-64 calling convention expects them clean, and code compiled for
/// baseline x86-64 (SSE, most of this crate outside its multiversioned loops) then pays
/// a transition penalty on every vector instruction until something clears them. On the
/// project's AMD EPYC VM, `layer_norm_backward` on BERT-base's shape ran in 2.9 ms on a
/// thread that had run a GEMM, and in 0.8 ms after a `vzeroupper` (docs/BENCHMARKS.md,
/// "Dirty upper vector state after faer's GEMM").
fn faer_matmul(dst: MatMut<'_, f32>, beta: Accum, lhs: MatRef<'_, f32>, rhs: MatRef<'_, f32>, alpha: f32, par: Par) {
    faer::linalg::matmul::matmul(dst, beta, lhs, rhs, alpha, par);
    clear_upper_vector_state();
}

/// `vzeroupper` where the CPU has AVX; nothing elsewhere.
#[multiversion(targets("x86_64+avx"))]
fn clear_upper_vector_state() {
    match_target! {
        "x86_64+avx" => std::arch::x86_64::_mm256_zeroupper(),
        _ => {}
    }
}

/// Products with fewer multiply-accumulates than this (128³) run on one thread. Measured:
/// split over two cores, 64³ runs at 60% of the single-thread speed, 96³ breaks even and
/// 128³ gains 1.2–1.5×.
pub const PARALLEL_MIN_MACS: usize = 1 << 21;

/// Parallel blocks of `C` are whole multiples of this many rows or columns (one AVX-512
/// register of f32), so no block ends in a partial SIMD panel except the last.
const SPLIT_ALIGN: usize = 16;

/// Parameters of the `matmul` op: `batch` independent products
/// `C_b[m×n] = alpha · op(A_b) · op(B_b)`.
///
/// `A_b` is stored `[m, k]`, or `[k, m]` when `transpose_a`; `B_b` is stored `[k, n]`, or
/// `[n, k]` when `transpose_b`; `C_b` is `[m, n]`. All row-major, and the batches of each
/// operand follow one another with no gap (the IR's leading dimensions, flattened).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MatMul {
    /// Number of independent products (the product of the leading dimensions; 1 for 2-D).
    pub batch: usize,
    /// Rows of `C` and of `op(A)`.
    pub m: usize,
    /// Columns of `C` and of `op(B)`.
    pub n: usize,
    /// The contracted dimension: columns of `op(A)`, rows of `op(B)`.
    pub k: usize,
    /// `A` is stored as its transpose, `[k, m]`.
    pub transpose_a: bool,
    /// `B` is stored as its transpose, `[n, k]`.
    pub transpose_b: bool,
    /// Output scale (1 unless the model says otherwise, e.g. 1/√d in attention).
    pub alpha: f32,
}

impl MatMul {
    /// Elements of `a`: `batch · m · k`.
    pub fn a_len(&self) -> usize {
        self.batch * self.m * self.k
    }

    /// Elements of `b`: `batch · k · n`.
    pub fn b_len(&self) -> usize {
        self.batch * self.k * self.n
    }

    /// Elements of `c`: `batch · m · n`.
    pub fn c_len(&self) -> usize {
        self.batch * self.m * self.n
    }

    /// Multiply-accumulates, as the IR's cost model counts them: `numel(c) · k`.
    pub fn macs(&self) -> u64 {
        self.c_len() as u64 * self.k as u64
    }
}

/// The `matmul` op: for every batch `b`, `C_b = alpha · op(A_b) · op(B_b)`. `c` is
/// overwritten (never read, so it may hold anything, NaN included).
///
/// Small products with several batches (attention heads) run one batch per rayon task
/// when there is enough work in all; large ones run one after another, each split over
/// the pool.
///
/// # Panics
///
/// If a slice's length differs from [`MatMul::a_len`], [`MatMul::b_len`] or
/// [`MatMul::c_len`].
pub fn matmul(p: &MatMul, a: &[f32], b: &[f32], c: &mut [f32]) {
    assert_eq!(a.len(), p.a_len(), "matmul: a has {} elements, {p:?} needs {}", a.len(), p.a_len());
    assert_eq!(b.len(), p.b_len(), "matmul: b has {} elements, {p:?} needs {}", b.len(), p.b_len());
    assert_eq!(c.len(), p.c_len(), "matmul: c has {} elements, {p:?} needs {}", c.len(), p.c_len());
    let (a_size, b_size, c_size) = (p.m * p.k, p.k * p.n, p.m * p.n);
    if c_size == 0 {
        return;
    }
    let g = Sgemm {
        m: p.m,
        n: p.n,
        k: p.k,
        alpha: p.alpha,
        beta: 0.0,
        transpose_a: p.transpose_a,
        lda: if p.transpose_a { p.m } else { p.k },
        transpose_b: p.transpose_b,
        ldb: if p.transpose_b { p.k } else { p.n },
        ldc: p.n,
    };
    // With k = 0 the A and B batches are empty slices; chunks_exact needs a non-zero size.
    let a_at = |i: usize| &a[i * a_size..(i + 1) * a_size];
    let b_at = |i: usize| &b[i * b_size..(i + 1) * b_size];
    let per_batch = p.m * p.n * p.k;
    if p.batch > 1 && per_batch < PARALLEL_MIN_MACS && per_batch * p.batch >= PARALLEL_MIN_MACS {
        c.par_chunks_mut(c_size).enumerate().for_each(|(i, c)| sgemm_serial(&g, a_at(i), b_at(i), c));
    } else {
        for (i, c) in c.chunks_mut(c_size).enumerate() {
            sgemm(&g, a_at(i), b_at(i), c);
        }
    }
}

/// A row-major GEMM: `C = alpha · op(A) · op(B) + beta · C`, with `op(A)` `m × k`,
/// `op(B)` `k × n` and `C` `m × n`, each stored with a leading dimension (row stride).
///
/// See the module documentation for the layout; [`Sgemm::a_len`] and friends give the
/// shortest slices that hold the operands.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sgemm {
    /// Rows of `C` and `op(A)`.
    pub m: usize,
    /// Columns of `C` and `op(B)`.
    pub n: usize,
    /// Columns of `op(A)`, rows of `op(B)`.
    pub k: usize,
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of the old `C`. `0` means `C` is not read at all (NaN in it does not
    /// propagate); `1` accumulates.
    pub beta: f32,
    /// `A` is stored as its `k × m` transpose.
    pub transpose_a: bool,
    /// Row stride of `A` as stored: `≥ k`, or `≥ m` when `transpose_a`.
    pub lda: usize,
    /// `B` is stored as its `n × k` transpose.
    pub transpose_b: bool,
    /// Row stride of `B` as stored: `≥ n`, or `≥ k` when `transpose_b`.
    pub ldb: usize,
    /// Row stride of `C`: `≥ n`.
    pub ldc: usize,
}

/// The shortest slice holding a `rows × cols` row-major matrix with row stride `ld`.
fn strided_len(rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 || cols == 0 { 0 } else { (rows - 1) * ld + cols }
}

impl Sgemm {
    /// Stored shape of `A`: `(rows, cols)` of the slice's matrix.
    fn a_stored(&self) -> (usize, usize) {
        if self.transpose_a { (self.k, self.m) } else { (self.m, self.k) }
    }

    fn b_stored(&self) -> (usize, usize) {
        if self.transpose_b { (self.n, self.k) } else { (self.k, self.n) }
    }

    /// The shortest `a` that holds `A`.
    pub fn a_len(&self) -> usize {
        let (r, c) = self.a_stored();
        strided_len(r, c, self.lda)
    }

    /// The shortest `b` that holds `B`.
    pub fn b_len(&self) -> usize {
        let (r, c) = self.b_stored();
        strided_len(r, c, self.ldb)
    }

    /// The shortest `c` that holds `C`.
    pub fn c_len(&self) -> usize {
        strided_len(self.m, self.n, self.ldc)
    }

    /// Panics unless the strides and slice lengths fit the shape.
    fn check(&self, a: usize, b: usize, c: usize) {
        let (ar, ac) = self.a_stored();
        let (br, bc) = self.b_stored();
        assert!(self.lda >= ac, "sgemm: lda {} is less than A's stored width {ac} in {self:?}", self.lda);
        assert!(self.ldb >= bc, "sgemm: ldb {} is less than B's stored width {bc} in {self:?}", self.ldb);
        assert!(self.ldc >= self.n, "sgemm: ldc {} is less than n {} in {self:?}", self.ldc, self.n);
        assert!(
            a >= self.a_len(),
            "sgemm: a has {a} elements, a {ar}×{ac} matrix with lda {} needs {}",
            self.lda,
            self.a_len()
        );
        assert!(
            b >= self.b_len(),
            "sgemm: b has {b} elements, a {br}×{bc} matrix with ldb {} needs {}",
            self.ldb,
            self.b_len()
        );
        assert!(c >= self.c_len(), "sgemm: c has {c} elements, {self:?} needs {}", self.c_len());
    }
}

/// A read-only row-major view, transposed if asked. `rows × cols` is the stored shape.
fn view(data: &[f32], rows: usize, cols: usize, ld: usize, transpose: bool) -> MatRef<'_, f32> {
    // Row-major with row stride ld is the transpose of column-major with column stride ld.
    let stored = MatRef::from_column_major_slice_with_stride(&data[..strided_len(rows, cols, ld)], cols, rows, ld);
    if transpose { stored } else { stored.transpose() }
}

/// `C = alpha · op(A) · op(B) + beta · C`; see [`Sgemm`]. Runs on the rayon pool when the
/// product has at least [`PARALLEL_MIN_MACS`] multiply-accumulates.
///
/// Slices may be longer than needed; the excess is neither read nor written.
///
/// # Panics
///
/// If a leading dimension is smaller than the stored row it strides over, or a slice is
/// shorter than [`Sgemm::a_len`], [`Sgemm::b_len`] or [`Sgemm::c_len`].
pub fn sgemm(g: &Sgemm, a: &[f32], b: &[f32], c: &mut [f32]) {
    let parallel = g.m.saturating_mul(g.n).saturating_mul(g.k) >= PARALLEL_MIN_MACS;
    sgemm_with(g, a, b, c, parallel);
}

/// [`sgemm`] on the calling thread only, for callers that already split work over rayon.
pub fn sgemm_serial(g: &Sgemm, a: &[f32], b: &[f32], c: &mut [f32]) {
    sgemm_with(g, a, b, c, false);
}

/// Scales `C` by `beta` (unless it is 0 or 1) and views it for faer; `None` when there is
/// nothing left to do (`C` empty, or `k = 0`, in which case `C` has been finished).
fn prepare_c<'c>(g: &Sgemm, c: &'c mut [f32]) -> Option<(MatMut<'c, f32>, Accum)> {
    if g.m == 0 || g.n == 0 {
        return None;
    }
    let c_len = g.c_len();
    let accum = if g.beta == 0.0 { Accum::Replace } else { Accum::Add };
    if g.beta != 0.0 && g.beta != 1.0 {
        for row in c[..c_len].chunks_mut(g.ldc) {
            let row_len = row.len().min(g.n);
            row[..row_len].iter_mut().for_each(|v| *v *= g.beta);
        }
    }
    // C is row-major with row stride ldc: the transpose of a column-major n×m view. (faer
    // 0.24's `from_row_major_slice_with_stride_mut` builds a column-major view instead, so
    // it is avoided.)
    let mut cm = MatMut::from_column_major_slice_with_stride_mut(&mut c[..c_len], g.n, g.m, g.ldc).transpose_mut();
    if g.k == 0 {
        // Nothing to add; faer's kernels are not asked to handle an empty contraction.
        if accum == Accum::Replace {
            cm.fill(0.0);
        }
        return None;
    }
    Some((cm, accum))
}

/// Cuts `cm` into blocks of `step` columns (or rows), tagged with their first index.
fn split_blocks<'c>(cm: MatMut<'c, f32>, split_cols: bool, step: usize) -> Vec<(usize, usize, MatMut<'c, f32>)> {
    let len = if split_cols { cm.ncols() } else { cm.nrows() };
    let mut blocks = Vec::with_capacity(len.div_ceil(step.max(1)));
    let mut rest = cm;
    let mut start = 0;
    while start < len {
        let size = step.min(len - start);
        let (block, tail) = if split_cols { rest.split_at_col_mut(size) } else { rest.split_at_row_mut(size) };
        blocks.push((start, size, block));
        rest = tail;
        start += size;
    }
    blocks
}

fn sgemm_with(g: &Sgemm, a: &[f32], b: &[f32], c: &mut [f32], parallel: bool) {
    g.check(a.len(), b.len(), c.len());
    let Some((cm, accum)) = prepare_c(g, c) else { return };
    let (ar, ac) = g.a_stored();
    let (br, bc) = g.b_stored();
    let am = view(a, ar, ac, g.lda, g.transpose_a);
    let bm = view(b, br, bc, g.ldb, g.transpose_b);
    let threads = rayon::current_num_threads();
    if !parallel || threads < 2 {
        faer_matmul(cm, accum, am, bm, g.alpha, Par::Seq);
        return;
    }
    // Split C along its longer side into blocks of whole SIMD panels and run each block
    // single-threaded on the pool. Measured against faer's own `Par::rayon` on this 2-core
    // machine this is as fast on large squares, faster on small and conv-like shapes, and
    // slows down far less when another process takes a core (see the module docs).
    let macs = g.m * g.n * g.k;
    let pieces = if macs >= 16 * PARALLEL_MIN_MACS { 2 * threads } else { threads };
    let split_cols = g.n >= g.m;
    let len = if split_cols { g.n } else { g.m };
    let blocks = split_blocks(cm, split_cols, len.div_ceil(pieces).next_multiple_of(SPLIT_ALIGN));
    blocks.into_par_iter().for_each(|(start, size, block)| {
        let (am, bm) = if split_cols { (am, bm.subcols(start, size)) } else { (am.subrows(start, size), bm) };
        faer_matmul(block, accum, am, bm, g.alpha, Par::Seq);
    });
}

/// `C = alpha · op(A) · B + beta · C` for a right operand `B` (`k × n`) that is never
/// stored whole: `fill(cols, block)` writes columns `cols` of `B` into `block`, row-major
/// `k × cols.len()` (row stride `cols.len()`), and the block is multiplied at once, while it
/// is still in cache. This is an implicit GEMM: a convolution's im2col feeds it.
///
/// `B` is cut into blocks of `block_cols` columns (the last may be narrower), which run in
/// parallel on the rayon pool, each with a single-threaded product; block `j` is built in
/// its own part of `b_scratch`, which holds at least `k · n` f32. `fill` must write every
/// element of its block. `g.transpose_b` and `g.ldb` are ignored.
///
/// # Panics
/// As [`sgemm`] for `a` and `c`; if `b_scratch` is shorter than `k · n` or `block_cols` is 0.
pub fn sgemm_fill_b(
    g: &Sgemm,
    a: &[f32],
    c: &mut [f32],
    block_cols: usize,
    b_scratch: &mut [f32],
    fill: impl Fn(Range<usize>, &mut [f32]) + Sync,
) {
    let g = Sgemm { transpose_b: false, ldb: g.n, ..*g };
    assert!(block_cols > 0, "sgemm_fill_b: blocks need at least one column");
    assert!(b_scratch.len() >= g.k * g.n, "sgemm_fill_b: scratch has {} f32, B needs {}", b_scratch.len(), g.k * g.n);
    g.check(a.len(), g.b_len(), c.len());
    let Some((cm, accum)) = prepare_c(&g, c) else { return };
    let (ar, ac) = g.a_stored();
    let am = view(a, ar, ac, g.lda, g.transpose_a);
    let blocks = split_blocks(cm, true, block_cols);
    let work = |(start, width, block): (usize, usize, MatMut<'_, f32>), buf: &mut [f32]| {
        let buf = &mut buf[..g.k * width];
        fill(start..start + width, buf);
        faer_matmul(block, accum, am, view(buf, g.k, width, width, false), g.alpha, Par::Seq);
    };
    // One block per buffer: k > 0 here, so both count ceil(n / block_cols).
    let bufs = &mut b_scratch[..g.k * g.n];
    if blocks.len() == 1 {
        blocks.into_iter().zip(bufs.chunks_mut(g.k * block_cols)).for_each(|(b, buf)| work(b, buf));
    } else {
        blocks.into_par_iter().zip(bufs.par_chunks_mut(g.k * block_cols)).for_each(|(b, buf)| work(b, buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_view_is_row_major() {
        // A 2×3 matrix in a buffer with row stride 4.
        let a = [1.0, 2.0, 3.0, -9.0, 4.0, 5.0, 6.0];
        let v = view(&a, 2, 3, 4, false);
        assert_eq!((v.nrows(), v.ncols()), (2, 3));
        assert_eq!(v[(1, 2)], 6.0);
        let t = view(&a, 2, 3, 4, true);
        assert_eq!((t.nrows(), t.ncols()), (3, 2));
        assert_eq!(t[(2, 1)], 6.0);
    }

    #[test]
    fn beta_scales_only_the_matrix() {
        // C is 2×2 with ldc 3; the padding column must not be touched.
        let g = Sgemm {
            m: 2,
            n: 2,
            k: 1,
            alpha: 1.0,
            beta: 2.0,
            transpose_a: false,
            lda: 1,
            transpose_b: false,
            ldb: 2,
            ldc: 3,
        };
        let mut c = [1.0, 1.0, 7.0, 1.0, 1.0];
        sgemm(&g, &[1.0, 2.0], &[1.0, 1.0], &mut c);
        assert_eq!(c, [3.0, 3.0, 7.0, 4.0, 4.0]);
    }

    #[test]
    fn empty_contraction_clears_or_keeps() {
        let mut g = Sgemm {
            m: 1,
            n: 2,
            k: 0,
            alpha: 1.0,
            beta: 0.0,
            transpose_a: false,
            lda: 0,
            transpose_b: false,
            ldb: 2,
            ldc: 2,
        };
        let mut c = [f32::NAN, 5.0];
        sgemm(&g, &[], &[], &mut c);
        assert_eq!(c, [0.0, 0.0]);
        g.beta = 1.0;
        let mut c = [3.0, 5.0];
        sgemm(&g, &[], &[], &mut c);
        assert_eq!(c, [3.0, 5.0]);
    }
}
