//! Memory-bound kernels on 2^24 f32 (64 MiB per operand, far beyond any cache): relu,
//! gelu and its backward, add, sgd_momentum, batch_norm forward and backward, softmax and
//! the attention-head transpose [0, 2, 1, 3].
//!
//! Each benchmark is `elementwise/<kernel>/<shape>,bytes=<B>`, where B is the bytes the
//! kernel moves to and from memory in one call (read + written, 4 bytes an element, n =
//! 2^24 elements per tensor), and Criterion's throughput is set to B, so bytes/s =
//! B / time (Criterion prints it as "thrpt"; a script can parse `bytes=` from the ID):
//!
//! | kernel | B | why |
//! |---|---|---|
//! | relu | 8n | read x, write y |
//! | gelu | 8n | read x, write y (exact erf form, vectorised: near memory speed on two cores) |
//! | gelu_backward | 12n | read dy and x, write dx |
//! | add | 12n | read a and b, write c |
//! | sgd_momentum | 20n | read grad, read and write weight and velocity |
//! | batch_norm | 12n | read x twice (statistics, then normalise), write y; the per-channel vectors are negligible |
//! | batch_norm_backward | 20n | read dy and x twice (sums, then dx), write dx |
//! | softmax | 8n | read x, write y (each row's second and third pass hit the cache) |
//! | transpose_0213 | 8n | read x, write y |
//!
//! Run with `cargo bench -p placer-kernels --bench elementwise`; about a minute.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use placer_kernels::activation::{gelu, gelu_backward, relu, softmax};
use placer_kernels::norm::{batch_norm, batch_norm_backward};
use placer_kernels::optim::{SgdMomentum, sgd_momentum};
use placer_kernels::tensor_ops::{ChannelView, Rows, add, transpose};
use std::hint::black_box;
use std::time::Duration;

const N: usize = 1 << 24;
const F32: u64 = 4;

#[path = "../tests/common/mod.rs"]
mod common;

/// Deterministic values in [−1, 1), every page touched before timing.
fn data(seed: u64) -> Vec<f32> {
    common::noise(N, seed)
}

/// `<kernel>/<shape>,bytes=<B>`, with B = 4 · the elements read and written.
fn id(kernel: &str, shape: &str, elements_moved: u64) -> BenchmarkId {
    BenchmarkId::new(kernel, format!("{shape},bytes={}", elements_moved * F32))
}

fn elementwise(c: &mut Criterion) {
    let mut group = c.benchmark_group("elementwise");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    let n = N as u64;
    let x = data(1);
    let mut y = vec![0.0f32; N];

    group.throughput(Throughput::Bytes(2 * n * F32));
    group.bench_with_input(id("relu", "[16777216]", 2 * n), &x, |b, x| b.iter(|| relu(black_box(x), &mut y)));

    group.throughput(Throughput::Bytes(2 * n * F32));
    group.bench_with_input(id("gelu", "[16777216]", 2 * n), &x, |b, x| b.iter(|| gelu(black_box(x), &mut y)));

    let other = data(2);
    group.throughput(Throughput::Bytes(3 * n * F32));
    group.bench_with_input(id("gelu_backward", "[16777216]", 3 * n), &x, |b, x| {
        b.iter(|| gelu_backward(black_box(&other), black_box(x), &mut y))
    });

    group.throughput(Throughput::Bytes(3 * n * F32));
    group.bench_with_input(id("add", "[16777216]", 3 * n), &x, |b, x| {
        b.iter(|| add(black_box(x), black_box(&other), &mut y))
    });
    drop(other);

    {
        let (mut w, mut v) = (data(3), vec![0.0f32; N]);
        let p = SgdMomentum { lr: 0.01, momentum: 0.9, weight_decay: 1e-4 };
        group.throughput(Throughput::Bytes(5 * n * F32));
        group.bench_with_input(id("sgd_momentum", "[16777216]", 5 * n), &x, |b, g| {
            b.iter(|| sgd_momentum(p, black_box(g), &mut w, &mut v))
        });
    }

    {
        // ResNet-like: [64, 64, 64, 64].
        let view = ChannelView { outer: 64, channels: 64, inner: 64 * 64 };
        let (scale, shift) = (vec![1.0f32; 64], vec![0.0f32; 64]);
        let (mut mean, mut inv_std) = (vec![0.0f32; 64], vec![0.0f32; 64]);
        group.throughput(Throughput::Bytes(3 * n * F32));
        group.bench_with_input(id("batch_norm", "[64,64,64,64]", 3 * n), &x, |b, x| {
            b.iter(|| batch_norm(view, 1e-5, black_box(x), &scale, &shift, &mut y, &mut mean, &mut inv_std))
        });
        let dy = data(4);
        let (mut dscale, mut dshift) = (vec![0.0f32; 64], vec![0.0f32; 64]);
        group.throughput(Throughput::Bytes(5 * n * F32));
        group.bench_with_input(id("batch_norm_backward", "[64,64,64,64]", 5 * n), &x, |b, x| {
            b.iter(|| {
                batch_norm_backward(view, black_box(&dy), x, &scale, &mean, &inv_std, &mut y, &mut dscale, &mut dshift)
            })
        });
    }

    {
        // Attention scores: rows of 512.
        let shape = Rows { rows: N / 512, cols: 512 };
        group.throughput(Throughput::Bytes(2 * n * F32));
        group.bench_with_input(id("softmax", "[32768,512]", 2 * n), &x, |b, x| {
            b.iter(|| softmax(shape, black_box(x), &mut y))
        });
    }

    {
        // BERT-large heads: [batch 32, seq 512, heads 16, head dim 64] -> [32, 16, 512, 64].
        let shape = [32, 512, 16, 64];
        group.throughput(Throughput::Bytes(2 * n * F32));
        group.bench_with_input(id("transpose_0213", "[32,512,16,64]", 2 * n), &x, |b, x| {
            b.iter(|| transpose(&shape, &[0, 2, 1, 3], black_box(x), &mut y))
        });
    }
    group.finish();
}

criterion_group!(benches, elementwise);
criterion_main!(benches);
