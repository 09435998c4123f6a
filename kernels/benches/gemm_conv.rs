//! Speed of the GEMM-backed kernels: `matmul` at square and conv-like shapes, a ResNet-50
//! 3×3 layer and a 1×1 layer and LeNet's two 5×5 layers at batch 256 (forward, backward
//! data, backward filter: tiny per-image products, run on image lanes), and max pooling
//! (the ResNet-50 stem and LeNet's first 2×2 pooling).
//!
//! Every benchmark ID ends in `flop=N`, the op's FLOP count in placer's cost model
//! (2 × MACs for GEMM-like ops, `numel(y)·kh·kw` / `numel(dx)` for pooling), and the
//! throughput is set to N elements, so Criterion's "elem/s" reads as FLOP/s. A script gets
//! GFLOP/s as N / median-ns from `target/criterion/<group>/<id>/new/estimates.json`.
//!
//! `cargo bench -p placer-kernels --bench gemm_conv` (about a minute).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use placer_kernels::conv::{Conv2d, conv2d_backward_data, conv2d_backward_filter, conv2d_forward, conv2d_scratch_len};
use placer_kernels::gemm::{MatMul, matmul};
use placer_kernels::pooling::{Pooling2d, max_pool2d_backward, max_pool2d_forward};
use std::hint::black_box;
use std::time::Duration;

#[path = "../tests/common/mod.rs"]
mod common;

use common::noise;

fn configure<'a>(c: &'a mut Criterion, name: &str) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_millis(1500));
    g
}

fn bench_matmul(c: &mut Criterion) {
    let mut group = configure(c, "matmul");
    let shapes = [
        ("256x256x256", 256, 256, 256),
        ("1024x1024x1024", 1024, 1024, 1024),
        ("2048x2048x2048", 2048, 2048, 2048),
        // A ResNet-50 3×3 layer's forward GEMM for one image: K × CRS times CRS × PQ.
        ("64x3136x576", 64, 3136, 576),
    ];
    for (label, m, n, k) in shapes {
        let p = MatMul { batch: 1, m, n, k, transpose_a: false, transpose_b: false, alpha: 1.0 };
        let flop = 2 * p.macs();
        let (a, b) = (noise(p.a_len(), 1), noise(p.b_len(), 2));
        let mut out = vec![0.0; p.c_len()];
        group.throughput(Throughput::Elements(flop));
        group.bench_function(BenchmarkId::new("mnk", format!("{label}/flop={flop}")), |bch| {
            bch.iter(|| matmul(&p, black_box(&a), black_box(&b), &mut out))
        });
    }
    group.finish();
}

fn bench_conv(c: &mut Criterion) {
    let mut group = configure(c, "conv2d");
    let layers = [
        // ResNet-50 conv2_x 3×3: 64 → 64 channels at 56×56, padding 1.
        ("n4_c64_56x56_k64_3x3_pad1", Conv2d::new([4, 64, 56, 56], [64, 3, 3], [1, 1], [1, 1], [1, 1], 1)),
        // ResNet-50 conv2_x 1×1 reduction: 256 → 64 channels at 56×56.
        ("n4_c256_56x56_k64_1x1", Conv2d::new([4, 256, 56, 56], [64, 1, 1], [1, 1], [0, 0], [1, 1], 1)),
        // LeNet conv1: 1 → 6 channels, 5×5, padding 2, at 28×28.
        ("n256_c1_28x28_k6_5x5_pad2", Conv2d::new([256, 1, 28, 28], [6, 5, 5], [1, 1], [2, 2], [1, 1], 1)),
        // LeNet conv2: 6 → 16 channels, 5×5, at 14×14.
        ("n256_c6_14x14_k16_5x5", Conv2d::new([256, 6, 14, 14], [16, 5, 5], [1, 1], [0, 0], [1, 1], 1)),
    ];
    for (label, p) in layers {
        let p = p.expect("layer geometry fits");
        let flop = 2 * p.macs();
        let (x, w, dy) = (noise(p.x_len(), 3), noise(p.w_len(), 4), noise(p.y_len(), 5));
        let mut scratch = vec![0.0; conv2d_scratch_len(&p)];
        let (mut y, mut dx, mut dw) = (vec![0.0; p.y_len()], vec![0.0; p.x_len()], vec![0.0; p.w_len()]);
        group.throughput(Throughput::Elements(flop));
        group.bench_function(BenchmarkId::new("forward", format!("{label}/flop={flop}")), |b| {
            b.iter(|| conv2d_forward(&p, black_box(&x), black_box(&w), &mut y, &mut scratch))
        });
        group.bench_function(BenchmarkId::new("backward_data", format!("{label}/flop={flop}")), |b| {
            b.iter(|| conv2d_backward_data(&p, black_box(&dy), black_box(&w), &mut dx, &mut scratch))
        });
        group.bench_function(BenchmarkId::new("backward_filter", format!("{label}/flop={flop}")), |b| {
            b.iter(|| conv2d_backward_filter(&p, black_box(&x), black_box(&dy), &mut dw, &mut scratch))
        });
    }
    group.finish();
}

fn bench_pooling(c: &mut Criterion) {
    let mut group = configure(c, "max_pool2d");
    let windows = [
        // ResNet-50 stem: 3×3, stride 2, padding 1 over 64 × 112×112.
        ("n4_c64_112x112_3x3_s2_pad1", Pooling2d::new([4, 64, 112, 112], [3, 3], [2, 2], [1, 1], false)),
        // LeNet pool1: 2×2, stride 2 over 6 × 28×28.
        ("n256_c6_28x28_2x2_s2", Pooling2d::new([256, 6, 28, 28], [2, 2], [2, 2], [0, 0], false)),
    ];
    for (label, p) in windows {
        let p = p.expect("fits");
        let x = noise(p.x_len(), 6);
        let dy = noise(p.y_len(), 7);
        let (mut y, mut idx, mut dx) = (vec![0.0; p.y_len()], vec![0i32; p.y_len()], vec![0.0; p.x_len()]);
        let flop = (p.y_len() * p.kernel[0] * p.kernel[1]) as u64;
        group.throughput(Throughput::Elements(flop));
        group.bench_function(BenchmarkId::new("forward", format!("{label}/flop={flop}")), |b| {
            b.iter(|| max_pool2d_forward(&p, black_box(&x), &mut y, &mut idx))
        });
        max_pool2d_forward(&p, &x, &mut y, &mut idx);
        let flop = p.x_len() as u64;
        group.throughput(Throughput::Elements(flop));
        group.bench_function(BenchmarkId::new("backward", format!("{label}/flop={flop}")), |b| {
            b.iter(|| max_pool2d_backward(&p, black_box(&dy), black_box(&idx), &mut dx).expect("indices from forward"))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_matmul, bench_conv, bench_pooling);
criterion_main!(benches);
