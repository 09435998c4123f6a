//! GEMM, convolution and pooling kernels against plain-loop references (f64), over random
//! small shapes, plus central-difference checks of every backward kernel.
//!
//! Outputs and scratch are filled with NaN before each call, so a kernel that fails to
//! overwrite an element, or reads scratch it did not write, shows up as a mismatch.

use placer_kernels::KernelError;
use placer_kernels::conv::{Conv2d, conv2d_backward_data, conv2d_backward_filter, conv2d_forward, conv2d_scratch_len};
use placer_kernels::gemm::{MatMul, Sgemm, matmul, sgemm};
use placer_kernels::pooling::{
    Pooling2d, avg_pool2d_backward, avg_pool2d_forward, global_avg_pool_backward, global_avg_pool_forward,
    max_pool2d_backward, max_pool2d_forward,
};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------
// Helpers

/// splitmix64: reproducible data from a proptest-chosen seed (shrinks the shape, not
/// thousands of floats).
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    fn vec(&mut self, len: usize) -> Vec<f32> {
        (0..len).map(|_| self.unit()).collect()
    }

    /// `len` distinct values 0.1 apart, shuffled: no two elements within 2·eps of each
    /// other, so a max-pool's choice survives a finite-difference step.
    fn distinct(&mut self, len: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..len).map(|i| i as f32 * 0.1 - len as f32 * 0.05).collect();
        for i in (1..len).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
        v
    }

    /// Values from {-1, 0, 1}: many ties.
    fn ternary(&mut self, len: usize) -> Vec<f32> {
        (0..len).map(|_| (self.next_u64() % 3) as f32 - 1.0).collect()
    }
}

fn nan(len: usize) -> Vec<f32> {
    vec![f32::NAN; len]
}

/// |got − want| ≤ atol + rtol·|want| elementwise (NaN fails).
fn assert_close(what: &str, got: &[f32], want: &[f64], atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(err <= atol + rtol * w.abs(), "{what}[{i}]: got {g}, want {w} (error {err:e})");
    }
}

/// Tolerances for f32 products of values in [-1, 1] with short reductions.
const ATOL: f64 = 1e-4;
const RTOL: f64 = 1e-4;

fn dot(a: &[f32], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| f64::from(x) * y).sum()
}

/// Checks `grad` = ∂L/∂input for L(input) = Σ f(input)·g, by central differences over
/// every input element. `f` writes its output into the given buffer.
fn check_gradient(
    what: &str,
    input: &[f32],
    g: &[f64],
    grad: &[f32],
    eps: f32,
    mut f: impl FnMut(&[f32], &mut Vec<f32>),
) {
    let mut x = input.to_vec();
    let mut out = Vec::new();
    for i in 0..x.len() {
        let orig = x[i];
        x[i] = orig + eps;
        f(&x, &mut out);
        let plus = dot(&out, g);
        x[i] = orig - eps;
        f(&x, &mut out);
        let minus = dot(&out, g);
        x[i] = orig;
        let numeric = (plus - minus) / (2.0 * f64::from(eps));
        let analytic = f64::from(grad[i]);
        let err = (numeric - analytic).abs();
        assert!(
            err <= 2e-3 + 0.02 * analytic.abs().max(numeric.abs()),
            "{what}[{i}]: backward gives {analytic}, central difference {numeric}"
        );
    }
}

fn to_f64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| f64::from(x)).collect()
}

// ---------------------------------------------------------------------------------------
// References

fn ref_matmul(p: &MatMul, a: &[f32], b: &[f32]) -> Vec<f64> {
    let (m, n, k) = (p.m, p.n, p.k);
    let mut c = vec![0.0; p.batch * m * n];
    for bi in 0..p.batch {
        let (a, b) = (&a[bi * m * k..], &b[bi * k * n..]);
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0f64;
                for l in 0..k {
                    let av = if p.transpose_a { a[l * m + i] } else { a[i * k + l] };
                    let bv = if p.transpose_b { b[j * k + l] } else { b[l * n + j] };
                    acc += f64::from(av) * f64::from(bv);
                }
                c[bi * m * n + i * n + j] = f64::from(p.alpha) * acc;
            }
        }
    }
    c
}

/// The whole `c` buffer after `sgemm`, including the untouched gaps between rows.
fn ref_sgemm(g: &Sgemm, a: &[f32], b: &[f32], c: &[f32]) -> Vec<f64> {
    let mut out = to_f64(c);
    for i in 0..g.m {
        for j in 0..g.n {
            let mut acc = 0.0f64;
            for l in 0..g.k {
                let av = if g.transpose_a { a[l * g.lda + i] } else { a[i * g.lda + l] };
                let bv = if g.transpose_b { b[j * g.ldb + l] } else { b[l * g.ldb + j] };
                acc += f64::from(av) * f64::from(bv);
            }
            let old = if g.beta == 0.0 { 0.0 } else { f64::from(g.beta) * f64::from(c[i * g.ldc + j]) };
            out[i * g.ldc + j] = f64::from(g.alpha) * acc + old;
        }
    }
    out
}

/// Calls `f(ni, gi, ci, ki, oh, ow, ih, iw, tap)` for every (output, tap) pair of the
/// convolution that reads a real (non-padding) input element; `tap` = (ci_in_group, r, s).
fn conv_taps(p: &Conv2d, mut f: impl FnMut([usize; 4], [usize; 3], [usize; 3])) {
    let (cg, kg) = (p.c / p.groups, p.k / p.groups);
    for ni in 0..p.n {
        for ki in 0..p.k {
            let gi = ki / kg;
            for oh in 0..p.p {
                for ow in 0..p.q {
                    for cl in 0..cg {
                        for ri in 0..p.r {
                            for si in 0..p.s {
                                let ih = (oh * p.stride[0] + ri * p.dilation[0]) as isize - p.padding[0] as isize;
                                let iw = (ow * p.stride[1] + si * p.dilation[1]) as isize - p.padding[1] as isize;
                                if ih < 0 || iw < 0 || ih >= p.h as isize || iw >= p.w as isize {
                                    continue;
                                }
                                let ci = gi * cg + cl;
                                f([ni, ki, oh, ow], [ci, ih as usize, iw as usize], [cl, ri, si]);
                            }
                        }
                    }
                }
            }
        }
    }
}

fn x_at(p: &Conv2d, [ni, ci, ih, iw]: [usize; 4]) -> usize {
    ((ni * p.c + ci) * p.h + ih) * p.w + iw
}
fn y_at(p: &Conv2d, [ni, ki, oh, ow]: [usize; 4]) -> usize {
    ((ni * p.k + ki) * p.p + oh) * p.q + ow
}
fn w_at(p: &Conv2d, ki: usize, [cl, ri, si]: [usize; 3]) -> usize {
    ((ki * (p.c / p.groups) + cl) * p.r + ri) * p.s + si
}

fn ref_conv_forward(p: &Conv2d, x: &[f32], w: &[f32]) -> Vec<f64> {
    let mut y = vec![0.0; p.y_len()];
    conv_taps(p, |o, [ci, ih, iw], tap| {
        y[y_at(p, o)] += f64::from(x[x_at(p, [o[0], ci, ih, iw])]) * f64::from(w[w_at(p, o[1], tap)]);
    });
    y
}

fn ref_conv_backward_data(p: &Conv2d, dy: &[f32], w: &[f32]) -> Vec<f64> {
    let mut dx = vec![0.0; p.x_len()];
    conv_taps(p, |o, [ci, ih, iw], tap| {
        dx[x_at(p, [o[0], ci, ih, iw])] += f64::from(dy[y_at(p, o)]) * f64::from(w[w_at(p, o[1], tap)]);
    });
    dx
}

fn ref_conv_backward_filter(p: &Conv2d, x: &[f32], dy: &[f32]) -> Vec<f64> {
    let mut dw = vec![0.0; p.w_len()];
    conv_taps(p, |o, [ci, ih, iw], tap| {
        dw[w_at(p, o[1], tap)] += f64::from(dy[y_at(p, o)]) * f64::from(x[x_at(p, [o[0], ci, ih, iw])]);
    });
    dw
}

/// Input rows (or columns) of window `o`, unclipped: `start .. start + kernel`.
fn pooling_window(p: &Pooling2d, dim: usize, o: usize) -> std::ops::Range<isize> {
    let start = (o * p.stride[dim]) as isize - p.padding[dim] as isize;
    start..start + p.kernel[dim] as isize
}

fn ref_max_pool(p: &Pooling2d, x: &[f32]) -> (Vec<f32>, Vec<i32>) {
    let (mut y, mut idx) = (Vec::new(), Vec::new());
    for plane in x.chunks(p.h * p.w) {
        for oh in 0..p.p {
            for ow in 0..p.q {
                let mut best: Option<(f32, usize)> = None;
                for ih in pooling_window(p, 0, oh) {
                    for iw in pooling_window(p, 1, ow) {
                        if ih < 0 || iw < 0 || ih >= p.h as isize || iw >= p.w as isize {
                            continue;
                        }
                        let at = ih as usize * p.w + iw as usize;
                        let v = plane[at];
                        let better = match best {
                            None => true,
                            Some((b, _)) => v > b || (v.is_nan() && !b.is_nan()),
                        };
                        if better {
                            best = Some((v, at));
                        }
                    }
                }
                let (v, at) = best.expect("every window holds a real element");
                y.push(v);
                idx.push(at as i32);
            }
        }
    }
    (y, idx)
}

fn ref_max_pool_backward(p: &Pooling2d, dy: &[f32], idx: &[i32]) -> Vec<f64> {
    let (hw, pq) = (p.h * p.w, p.p * p.q);
    let mut dx = vec![0.0; p.x_len()];
    for (o, (&g, &i)) in dy.iter().zip(idx).enumerate() {
        dx[(o / pq) * hw + i as usize] += f64::from(g);
    }
    dx
}

/// (real elements, divisor) of window (oh, ow), counted one position at a time.
fn ref_avg_window(p: &Pooling2d, oh: usize, ow: usize) -> (Vec<(usize, usize)>, f64) {
    let (mut real, mut padded) = (Vec::new(), 0usize);
    for ih in pooling_window(p, 0, oh) {
        for iw in pooling_window(p, 1, ow) {
            let in_padded = |v: isize, size: usize, pad: usize| v >= -(pad as isize) && v < (size + pad) as isize;
            if in_padded(ih, p.h, p.padding[0]) && in_padded(iw, p.w, p.padding[1]) {
                padded += 1;
            }
            if ih >= 0 && iw >= 0 && ih < p.h as isize && iw < p.w as isize {
                real.push((ih as usize, iw as usize));
            }
        }
    }
    let div = if p.count_include_pad { padded } else { real.len() };
    (real, div as f64)
}

fn ref_avg_pool(p: &Pooling2d, x: &[f32]) -> Vec<f64> {
    let mut y = Vec::new();
    for plane in x.chunks(p.h * p.w) {
        for oh in 0..p.p {
            for ow in 0..p.q {
                let (real, div) = ref_avg_window(p, oh, ow);
                y.push(real.iter().map(|&(ih, iw)| f64::from(plane[ih * p.w + iw])).sum::<f64>() / div);
            }
        }
    }
    y
}

fn ref_avg_pool_backward(p: &Pooling2d, dy: &[f32]) -> Vec<f64> {
    let (hw, pq) = (p.h * p.w, p.p * p.q);
    let mut dx = vec![0.0; p.x_len()];
    for (plane, dy) in dx.chunks_mut(hw).zip(dy.chunks(pq)) {
        for oh in 0..p.p {
            for ow in 0..p.q {
                let (real, div) = ref_avg_window(p, oh, ow);
                for (ih, iw) in real {
                    plane[ih * p.w + iw] += f64::from(dy[oh * p.q + ow]) / div;
                }
            }
        }
    }
    dx
}

// ---------------------------------------------------------------------------------------
// Strategies

fn matmul_shape() -> impl Strategy<Value = MatMul> {
    (1usize..=3, 1usize..=9, 1usize..=9, 1usize..=9, any::<bool>(), any::<bool>(), -2.0f32..2.0).prop_map(
        |(batch, m, n, k, transpose_a, transpose_b, alpha)| MatMul { batch, m, n, k, transpose_a, transpose_b, alpha },
    )
}

fn sgemm_shape() -> impl Strategy<Value = Sgemm> {
    (
        (1usize..=8, 1usize..=8, 0usize..=8),
        (any::<bool>(), any::<bool>(), 0usize..=3, 0usize..=3, 0usize..=3),
        (-2.0f32..2.0, prop::sample::select(vec![0.0f32, 1.0, 0.5, -1.5])),
    )
        .prop_map(|((m, n, k), (transpose_a, transpose_b, pa, pb, pc), (alpha, beta))| Sgemm {
            m,
            n,
            k,
            alpha,
            beta,
            transpose_a,
            lda: if transpose_a { m } else { k } + pa,
            transpose_b,
            ldb: if transpose_b { k } else { n } + pb,
            ldc: n + pc,
        })
}

/// General convolutions: any groups, odd sizes, stride above the kernel, padding,
/// dilation; plus depthwise and pointwise ones, which take other code paths.
fn conv_shape() -> impl Strategy<Value = Conv2d> {
    let general = (
        (1usize..=2, 1usize..=3, 1usize..=3, 1usize..=3),
        (1usize..=7, 1usize..=7, 1usize..=3, 1usize..=3),
        ([1usize..=3, 1usize..=3], [0usize..=2, 0usize..=2], [1usize..=2, 1usize..=2]),
    )
        .prop_filter_map("window must fit", |((n, g, cg, kg), (h, w, r, s), (stride, padding, dilation))| {
            Conv2d::new([n, g * cg, h, w], [g * kg, r, s], stride, padding, dilation, g)
        });
    let depthwise = ((1usize..=2, 1usize..=4, 1usize..=2), (2usize..=6, 2usize..=6), (1usize..=2, 0usize..=1))
        .prop_filter_map("window must fit", |((n, c, mult), (h, w), (stride, pad))| {
            Conv2d::new([n, c, h, w], [c * mult, 3, 3], [stride, stride], [pad, pad], [1, 1], c)
        });
    let pointwise = ((1usize..=2, 1usize..=2, 1usize..=4, 1usize..=4), (1usize..=5, 1usize..=5))
        .prop_filter_map("always fits", |((n, g, cg, kg), (h, w))| {
            Conv2d::new([n, g * cg, h, w], [g * kg, 1, 1], [1, 1], [0, 0], [1, 1], g)
        });
    prop_oneof![4 => general, 1 => depthwise, 1 => pointwise]
}

fn pooling_shape() -> impl Strategy<Value = Pooling2d> {
    (
        (1usize..=2, 1usize..=3, 1usize..=8, 1usize..=8),
        [1usize..=4, 1usize..=4],
        [1usize..=4, 1usize..=4],
        any::<bool>(),
    )
        .prop_flat_map(|(nchw, kernel, stride, include)| {
            ([0..=kernel[0] / 2, 0..=kernel[1] / 2], Just((nchw, kernel, stride, include)))
        })
        .prop_filter_map("window must fit", |(padding, ((n, c, h, w), kernel, stride, include))| {
            Pooling2d::new([n, c, h, w], kernel, stride, padding, include)
        })
}

// ---------------------------------------------------------------------------------------
// Runners (fresh NaN outputs and scratch each call)

fn run_conv_forward(p: &Conv2d, x: &[f32], w: &[f32]) -> Vec<f32> {
    let mut y = nan(p.y_len());
    let mut scratch = nan(conv2d_scratch_len(p));
    conv2d_forward(p, x, w, &mut y, &mut scratch);
    y
}

fn run_conv_backward_data(p: &Conv2d, dy: &[f32], w: &[f32]) -> Vec<f32> {
    let mut dx = nan(p.x_len());
    let mut scratch = nan(conv2d_scratch_len(p));
    conv2d_backward_data(p, dy, w, &mut dx, &mut scratch);
    dx
}

fn run_conv_backward_filter(p: &Conv2d, x: &[f32], dy: &[f32]) -> Vec<f32> {
    let mut dw = nan(p.w_len());
    let mut scratch = nan(conv2d_scratch_len(p));
    conv2d_backward_filter(p, x, dy, &mut dw, &mut scratch);
    dw
}

fn check_conv_all(p: &Conv2d, seed: u64) {
    let mut rng = Rng(seed);
    let (x, w, dy) = (rng.vec(p.x_len()), rng.vec(p.w_len()), rng.vec(p.y_len()));
    assert_close("conv y", &run_conv_forward(p, &x, &w), &ref_conv_forward(p, &x, &w), ATOL, RTOL);
    assert_close("conv dx", &run_conv_backward_data(p, &dy, &w), &ref_conv_backward_data(p, &dy, &w), ATOL, RTOL);
    assert_close("conv dw", &run_conv_backward_filter(p, &x, &dy), &ref_conv_backward_filter(p, &x, &dy), ATOL, RTOL);
}

fn run_max_pool(p: &Pooling2d, x: &[f32]) -> (Vec<f32>, Vec<i32>) {
    let mut y = nan(p.y_len());
    let mut idx = vec![-7; p.y_len()];
    max_pool2d_forward(p, x, &mut y, &mut idx);
    (y, idx)
}

fn run_avg_pool(p: &Pooling2d, x: &[f32]) -> Vec<f32> {
    let mut y = nan(p.y_len());
    avg_pool2d_forward(p, x, &mut y);
    y
}

// ---------------------------------------------------------------------------------------
// Properties against the references

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn matmul_matches_reference(p in matmul_shape(), seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let (a, b) = (rng.vec(p.a_len()), rng.vec(p.b_len()));
        let mut c = nan(p.c_len());
        matmul(&p, &a, &b, &mut c);
        assert_close("matmul", &c, &ref_matmul(&p, &a, &b), ATOL, RTOL);
    }

    #[test]
    fn sgemm_matches_reference(g in sgemm_shape(), seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let (a, b) = (rng.vec(g.a_len()), rng.vec(g.b_len()));
        // Old C: NaN when beta is 0 (it must not be read), random otherwise.
        let mut c = if g.beta == 0.0 { nan(g.c_len()) } else { rng.vec(g.c_len()) };
        // The gaps between rows must survive: give them a marker value.
        for (i, v) in c.iter_mut().enumerate() {
            if i % g.ldc >= g.n {
                *v = 42.0;
            }
        }
        let want = ref_sgemm(&g, &a, &b, &c);
        sgemm(&g, &a, &b, &mut c);
        assert_close("sgemm", &c, &want, ATOL, RTOL);
    }

    #[test]
    fn conv_matches_reference(p in conv_shape(), seed in any::<u64>()) {
        check_conv_all(&p, seed);
    }

    #[test]
    fn max_pool_matches_reference(p in pooling_shape(), seed in any::<u64>(), ties in any::<bool>()) {
        let mut rng = Rng(seed);
        let x = if ties { rng.ternary(p.x_len()) } else { rng.vec(p.x_len()) };
        let (y, idx) = run_max_pool(&p, &x);
        let (want_y, want_idx) = ref_max_pool(&p, &x);
        prop_assert_eq!(&y, &want_y);
        prop_assert_eq!(&idx, &want_idx);
        let dy = rng.vec(p.y_len());
        let mut dx = nan(p.x_len());
        max_pool2d_backward(&p, &dy, &idx, &mut dx).expect("indices from the forward pass");
        assert_close("max_pool dx", &dx, &ref_max_pool_backward(&p, &dy, &idx), 1e-6, 1e-6);
    }

    #[test]
    fn avg_pool_matches_reference(p in pooling_shape(), seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let (x, dy) = (rng.vec(p.x_len()), rng.vec(p.y_len()));
        assert_close("avg_pool y", &run_avg_pool(&p, &x), &ref_avg_pool(&p, &x), 1e-5, 1e-5);
        let mut dx = nan(p.x_len());
        avg_pool2d_backward(&p, &dy, &mut dx);
        assert_close("avg_pool dx", &dx, &ref_avg_pool_backward(&p, &dy), 1e-5, 1e-5);
    }

    #[test]
    fn global_avg_pool_matches_reference(n in 1usize..=3, c in 1usize..=4, hw in 1usize..=20, seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let (x, dy) = (rng.vec(n * c * hw), rng.vec(n * c));
        let mut y = nan(n * c);
        global_avg_pool_forward(n, c, hw, &x, &mut y);
        let want: Vec<f64> = x.chunks(hw).map(|pl| pl.iter().map(|&v| f64::from(v)).sum::<f64>() / hw as f64).collect();
        assert_close("global_avg_pool y", &y, &want, 1e-6, 1e-6);
        let mut dx = nan(n * c * hw);
        global_avg_pool_backward(n, c, hw, &dy, &mut dx);
        let want: Vec<f64> = dy.iter().flat_map(|&g| std::iter::repeat_n(f64::from(g) / hw as f64, hw)).collect();
        assert_close("global_avg_pool dx", &dx, &want, 1e-6, 1e-6);
    }
}

// ---------------------------------------------------------------------------------------
// Gradient checks: L = Σ y·g for random g; backward vs central differences of forward

const EPS: f32 = 1e-2;

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn conv_backward_data_is_the_gradient(p in conv_shape(), seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let (x, w, g) = (rng.vec(p.x_len()), rng.vec(p.w_len()), rng.vec(p.y_len()));
        let dx = run_conv_backward_data(&p, &g, &w);
        check_gradient("conv dx", &x, &to_f64(&g), &dx, EPS, |x, y| *y = run_conv_forward(&p, x, &w));
    }

    #[test]
    fn conv_backward_filter_is_the_gradient(p in conv_shape(), seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let (x, w, g) = (rng.vec(p.x_len()), rng.vec(p.w_len()), rng.vec(p.y_len()));
        let dw = run_conv_backward_filter(&p, &x, &g);
        check_gradient("conv dw", &w, &to_f64(&g), &dw, EPS, |w, y| *y = run_conv_forward(&p, &x, w));
    }

    #[test]
    fn max_pool_backward_is_the_gradient(p in pooling_shape(), seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let (x, g) = (rng.distinct(p.x_len()), rng.vec(p.y_len()));
        let (_, idx) = run_max_pool(&p, &x);
        let mut dx = nan(p.x_len());
        max_pool2d_backward(&p, &g, &idx, &mut dx).expect("indices from the forward pass");
        check_gradient("max_pool dx", &x, &to_f64(&g), &dx, EPS, |x, y| *y = run_max_pool(&p, x).0);
    }

    #[test]
    fn avg_pool_backward_is_the_gradient(p in pooling_shape(), seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let (x, g) = (rng.vec(p.x_len()), rng.vec(p.y_len()));
        let mut dx = nan(p.x_len());
        avg_pool2d_backward(&p, &g, &mut dx);
        check_gradient("avg_pool dx", &x, &to_f64(&g), &dx, EPS, |x, y| *y = run_avg_pool(&p, x));
    }

    #[test]
    fn global_avg_pool_backward_is_the_gradient(n in 1usize..=2, c in 1usize..=3, hw in 1usize..=12, seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let (x, g) = (rng.vec(n * c * hw), rng.vec(n * c));
        let mut dx = nan(n * c * hw);
        global_avg_pool_backward(n, c, hw, &g, &mut dx);
        check_gradient("global_avg_pool dx", &x, &to_f64(&g), &dx, EPS, |x, y| {
            *y = nan(n * c);
            global_avg_pool_forward(n, c, hw, x, y);
        });
    }
}

// ---------------------------------------------------------------------------------------
// Fixed cases: the parallel paths (larger shapes), edge cases, and refusals

#[test]
fn large_matmul_takes_the_parallel_paths() {
    let mut rng = Rng(7);
    // ≥ PARALLEL_MIN_MACS (128³): one product split over the pool, by columns and by rows.
    // 8 × 64³: small products, one batch per task.
    for p in [
        MatMul { batch: 1, m: 144, n: 150, k: 140, transpose_a: true, transpose_b: false, alpha: 0.5 },
        MatMul { batch: 1, m: 200, n: 100, k: 120, transpose_a: false, transpose_b: true, alpha: 1.0 },
        MatMul { batch: 8, m: 64, n: 64, k: 66, transpose_a: false, transpose_b: true, alpha: 1.0 },
    ] {
        let (a, b) = (rng.vec(p.a_len()), rng.vec(p.b_len()));
        let mut c = nan(p.c_len());
        matmul(&p, &a, &b, &mut c);
        assert_close("matmul", &c, &ref_matmul(&p, &a, &b), 1e-3, 1e-4);
    }
}

#[test]
fn large_convs_take_the_parallel_paths() {
    // im2col / col2im above PAR_CHUNK with a parallel GEMM; depthwise groups spread over
    // tasks; a pointwise layer with a parallel GEMM.
    let shapes = [
        Conv2d::new([2, 8, 24, 24], [8, 3, 3], [1, 1], [1, 1], [1, 1], 1),
        Conv2d::new([1, 64, 32, 32], [64, 3, 3], [1, 1], [1, 1], [1, 1], 64),
        Conv2d::new([1, 32, 20, 20], [64, 1, 1], [1, 1], [0, 0], [1, 1], 1),
        Conv2d::new([1, 6, 30, 30], [4, 3, 3], [2, 2], [2, 2], [2, 2], 2),
    ];
    for (i, p) in shapes.into_iter().enumerate() {
        check_conv_all(&p.expect("window fits"), i as u64);
    }
}

#[test]
fn convs_with_fused_im2col() {
    // Enough column-matrix rows (c·r·s ≥ 1536: blocks of 64 columns) and output positions
    // for the forward pass and the filter gradient to build im2col blocks inside the GEMM;
    // the last block is partial, and the filter gradient's lanes get different numbers of
    // blocks (5 blocks over 4 lanes).
    let shapes = [
        Conv2d::new([1, 96, 17, 16], [2, 4, 4], [1, 1], [2, 2], [1, 1], 1),
        Conv2d::new([1, 96, 35, 35], [1, 4, 4], [2, 2], [2, 2], [2, 2], 1),
    ];
    for (i, p) in shapes.into_iter().enumerate() {
        let p = p.expect("window fits");
        assert!(p.p * p.q > 4 * 64 && p.c * p.r * p.s >= 1536, "{p:?} is too small to fuse");
        check_conv_all(&p, 100 + i as u64);
    }
}

/// Whether `p` runs on image lanes: only then is its scratch more than one column matrix.
fn on_image_lanes(p: &Conv2d) -> bool {
    conv2d_scratch_len(p) > p.c * p.r * p.s * p.p * p.q
}

#[test]
fn small_convs_over_many_images_take_the_lanes() {
    // Per-image products below PARALLEL_MIN_MACS, whole batches above it: the images are
    // spread over lanes. LeNet's two layers (10 images: lanes of 3, 3, 3 and 1); a grouped,
    // strided, dilated one with asymmetric padding (6 images on 3 lanes).
    let shapes = [
        Conv2d::new([20, 1, 28, 28], [6, 5, 5], [1, 1], [2, 2], [1, 1], 1),
        Conv2d::new([10, 6, 14, 14], [16, 5, 5], [1, 1], [0, 0], [1, 1], 1),
        Conv2d::new([10, 3, 20, 20], [8, 5, 5], [1, 1], [2, 2], [1, 1], 1),
        Conv2d::new([6, 8, 41, 37], [16, 3, 3], [2, 1], [1, 2], [2, 1], 2),
    ];
    for (i, p) in shapes.into_iter().enumerate() {
        let p = p.expect("window fits");
        assert!(on_image_lanes(&p), "{p:?} does not run on lanes");
        check_conv_all(&p, 200 + i as u64);
    }
}

#[test]
fn image_lanes_give_the_same_bits_on_any_thread_count() {
    let p = Conv2d::new([10, 3, 20, 20], [8, 5, 5], [1, 1], [2, 2], [1, 1], 1).expect("fits");
    assert!(on_image_lanes(&p));
    let mut rng = Rng(21);
    let (x, w, dy) = (rng.vec(p.x_len()), rng.vec(p.w_len()), rng.vec(p.y_len()));
    let all =
        || (run_conv_forward(&p, &x, &w), run_conv_backward_data(&p, &dy, &w), run_conv_backward_filter(&p, &x, &dy));
    let on = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("thread pool");
        pool.install(all)
    };
    let once = on(1);
    for threads in [2, 3, 1] {
        assert!(on(threads) == once, "results on {threads} threads differ from those on 1");
    }
}

/// One group's (x, w, y) operands, or (dx, dw, dy).
type GroupOperands = (Vec<f32>, Vec<f32>, Vec<f32>);

/// Splits a grouped convolution's operands into those of `groups` separate ones.
fn split_groups(p: &Conv2d, x: &[f32], w: &[f32], y: &[f32]) -> (Conv2d, Vec<GroupOperands>) {
    let one = Conv2d { c: p.c / p.groups, k: p.k / p.groups, groups: 1, ..*p };
    let (hw, pq) = (p.h * p.w, p.p * p.q);
    let parts = (0..p.groups)
        .map(|g| {
            let mut xg = Vec::new();
            let mut yg = Vec::new();
            for ni in 0..p.n {
                xg.extend_from_slice(&x[(ni * p.c + g * one.c) * hw..][..one.c * hw]);
                yg.extend_from_slice(&y[(ni * p.k + g * one.k) * pq..][..one.k * pq]);
            }
            (xg, w[g * one.w_len()..][..one.w_len()].to_vec(), yg)
        })
        .collect();
    (one, parts)
}

#[test]
fn grouped_fused_conv_is_its_groups_side_by_side() {
    // Each group's product is above PARALLEL_MIN_MACS, so the groups run one after another
    // on the fused path; too big for the f64 reference in a debug build, so each group is
    // compared with an ungrouped convolution (itself checked against the reference above).
    let p = Conv2d::new([1, 192, 24, 24], [10, 3, 3], [1, 1], [1, 1], [1, 1], 2).expect("fits");
    assert!(p.k / 2 * p.p * p.q * (p.c / 2) * 9 >= placer_kernels::gemm::PARALLEL_MIN_MACS);
    let mut rng = Rng(9);
    let (x, w, dy) = (rng.vec(p.x_len()), rng.vec(p.w_len()), rng.vec(p.y_len()));
    let (y, dx, dw) =
        (run_conv_forward(&p, &x, &w), run_conv_backward_data(&p, &dy, &w), run_conv_backward_filter(&p, &x, &dy));
    let (one, parts) = split_groups(&p, &x, &w, &dy);
    let (_, got) = split_groups(&p, &dx, &dw, &y);
    for ((xg, wg, dyg), (dxg, dwg, yg)) in parts.iter().zip(&got) {
        assert_close("group y", yg, &to_f64(&run_conv_forward(&one, xg, wg)), ATOL, RTOL);
        assert_close("group dx", dxg, &to_f64(&run_conv_backward_data(&one, dyg, wg)), ATOL, RTOL);
        assert_close("group dw", dwg, &to_f64(&run_conv_backward_filter(&one, xg, dyg)), ATOL, RTOL);
    }
}

#[test]
fn large_poolings_take_the_parallel_paths() {
    let mut rng = Rng(3);
    let p = Pooling2d::new([2, 16, 32, 32], [3, 3], [2, 2], [1, 1], false).expect("fits");
    let x = rng.vec(p.x_len());
    let (y, idx) = run_max_pool(&p, &x);
    let (want_y, want_idx) = ref_max_pool(&p, &x);
    assert_eq!((y, &idx), (want_y, &want_idx));
    let dy = rng.vec(p.y_len());
    let mut dx = nan(p.x_len());
    max_pool2d_backward(&p, &dy, &idx, &mut dx).expect("valid indices");
    assert_close("max dx", &dx, &ref_max_pool_backward(&p, &dy, &idx), 1e-6, 1e-6);
    assert_close("avg y", &run_avg_pool(&p, &x), &ref_avg_pool(&p, &x), 1e-5, 1e-5);
    avg_pool2d_backward(&p, &dy, &mut dx);
    assert_close("avg dx", &dx, &ref_avg_pool_backward(&p, &dy), 1e-5, 1e-5);
    let (n, c, hw) = (4, 64, 196);
    let x = rng.vec(n * c * hw);
    let mut y = nan(n * c);
    global_avg_pool_forward(n, c, hw, &x, &mut y);
    let want: Vec<f64> = x.chunks(hw).map(|pl| pl.iter().map(|&v| f64::from(v)).sum::<f64>() / hw as f64).collect();
    assert_close("global y", &y, &want, 1e-6, 1e-6);
}

#[test]
fn vectorised_max_pools_match_the_reference_with_ties_and_nan() {
    // Shapes for every path of the forward pass: 2×2 stride-2 windows that tile the input
    // (groups of output rows that cross planes, an odd height with a row left over, a VGG
    // width); rows longer than one step of the row-wise path, stride 1 and 2; and a stride
    // the row-wise path does not take. Ternary data (ties everywhere) with NaNs sprinkled.
    let shapes = [
        Pooling2d::new([3, 5, 41, 34], [2, 2], [2, 2], [0, 0], false),
        Pooling2d::new([1, 3, 30, 224], [2, 2], [2, 2], [0, 0], false),
        Pooling2d::new([1, 2, 5, 600], [3, 3], [1, 1], [1, 1], false),
        Pooling2d::new([1, 2, 7, 600], [3, 3], [2, 2], [1, 1], false),
        Pooling2d::new([2, 3, 9, 33], [3, 3], [2, 2], [0, 0], false),
        Pooling2d::new([1, 2, 9, 20], [2, 3], [2, 1], [1, 1], false),
        Pooling2d::new([2, 2, 12, 40], [3, 4], [3, 3], [1, 2], false),
    ];
    for (i, p) in shapes.into_iter().enumerate() {
        let p = p.expect("fits");
        let mut rng = Rng(300 + i as u64);
        let mut x = rng.ternary(p.x_len());
        for k in (0..x.len()).step_by(37) {
            x[k] = f32::NAN;
        }
        let (y, idx) = run_max_pool(&p, &x);
        let (want_y, want_idx) = ref_max_pool(&p, &x);
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&y), bits(&want_y), "values of {p:?}");
        assert_eq!(idx, want_idx, "indices of {p:?}");
    }
}

#[test]
fn matmul_with_empty_contraction_writes_zeros() {
    let p = MatMul { batch: 2, m: 2, n: 3, k: 0, transpose_a: false, transpose_b: true, alpha: 1.0 };
    let mut c = nan(p.c_len());
    matmul(&p, &[], &[], &mut c);
    assert_eq!(c, vec![0.0; 12]);
}

#[test]
fn conv_scratch_may_be_longer_than_needed() {
    let p = Conv2d::new([1, 2, 5, 5], [3, 3, 3], [1, 1], [1, 1], [1, 1], 1).expect("fits");
    assert_eq!(conv2d_scratch_len(&p), 2 * 3 * 3 * 5 * 5);
    let mut rng = Rng(11);
    let (x, w) = (rng.vec(p.x_len()), rng.vec(p.w_len()));
    let mut y = nan(p.y_len());
    let mut scratch = nan(conv2d_scratch_len(&p) + 17);
    conv2d_forward(&p, &x, &w, &mut y, &mut scratch);
    assert_close("conv y", &y, &ref_conv_forward(&p, &x, &w), ATOL, RTOL);
}

#[test]
fn conv_backward_data_zeroes_inputs_no_window_reads() {
    // H = 8, R = 3, stride 2, no padding: P = 3 and input row 7 is never read.
    let p = Conv2d::new([1, 1, 8, 8], [1, 3, 3], [2, 2], [0, 0], [1, 1], 1).expect("fits");
    assert_eq!((p.p, p.q), (3, 3));
    let dx = run_conv_backward_data(&p, &[1.0; 9], &[1.0; 9]);
    assert!(dx[7 * 8..].iter().all(|&v| v == 0.0), "row 7 is never read");
    assert!((0..8).all(|row| dx[row * 8 + 7] == 0.0), "column 7 is never read");
    assert!(dx[..7 * 8].chunks(8).all(|row| row[..7].iter().all(|&v| v > 0.0)), "every other input is read");
}

#[test]
#[should_panic(expected = "scratch")]
fn conv_refuses_short_scratch() {
    let p = Conv2d::new([1, 1, 4, 4], [1, 3, 3], [1, 1], [0, 0], [1, 1], 1).expect("fits");
    let mut y = nan(p.y_len());
    conv2d_forward(&p, &[0.0; 16], &[0.0; 9], &mut y, &mut [0.0; 3]);
}

#[test]
#[should_panic(expected = "does not match the geometry")]
fn conv_refuses_inconsistent_output_size() {
    let p = Conv2d { p: 3, ..Conv2d::new([1, 1, 4, 4], [1, 3, 3], [1, 1], [0, 0], [1, 1], 1).expect("fits") };
    conv2d_forward(&p, &[0.0; 16], &[0.0; 9], &mut [0.0; 6], &mut [0.0; 54]);
}

#[test]
#[should_panic(expected = "ldc")]
fn sgemm_refuses_overlapping_rows() {
    let g = Sgemm {
        m: 2,
        n: 2,
        k: 1,
        alpha: 1.0,
        beta: 0.0,
        transpose_a: false,
        lda: 1,
        transpose_b: false,
        ldb: 2,
        ldc: 1,
    };
    sgemm(&g, &[1.0; 2], &[1.0; 2], &mut [0.0; 4]);
}

#[test]
fn max_pool_backward_rejects_bad_indices() {
    let p = Pooling2d::new([1, 1, 2, 2], [2, 2], [2, 2], [0, 0], false).expect("fits");
    let mut dx = nan(4);
    for bad in [4, -1] {
        let err = max_pool2d_backward(&p, &[1.0], &[bad], &mut dx).expect_err("out of range");
        assert_eq!(err, KernelError::IndexOutOfRange { what: "max-pool index", index: i64::from(bad), bound: 4 });
        assert!(dx.iter().all(|v| v.is_nan()), "dx is left unwritten");
    }
}

#[test]
fn max_pool_never_picks_padding_and_propagates_nan() {
    // All-negative input with padding: the max is a real element, not a padding zero.
    let p = Pooling2d::new([1, 1, 2, 2], [2, 2], [1, 1], [1, 1], false).expect("fits");
    let (y, idx) = run_max_pool(&p, &[-4.0, -3.0, -2.0, -1.0]);
    assert_eq!(y, vec![-4.0, -3.0, -3.0, -2.0, -1.0, -1.0, -2.0, -1.0, -1.0]);
    assert_eq!(idx, vec![0, 1, 1, 2, 3, 3, 2, 3, 3]);
    let p = Pooling2d::new([1, 1, 1, 3], [1, 3], [1, 1], [0, 0], false).expect("fits");
    let (y, idx) = run_max_pool(&p, &[1.0, f32::NAN, 5.0]);
    assert!(y[0].is_nan());
    assert_eq!(idx, vec![1]);
}

/// Found by `conv_matches_reference`: a "same"-width row whose padding and dilation put
/// the first source element past the end of the output row indexed out of bounds.
#[test]
fn conv_with_dilation_taller_than_the_input_matches_reference() {
    let p = Conv2d::new([1, 1, 1, 2], [1, 2, 3], [1, 1], [1, 1], [2, 1], 1).expect("a valid convolution");
    check_conv_all(&p, 0);
}
