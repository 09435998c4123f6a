//! This machine's ceilings, measured the same way as the kernels so ratios are fair:
//!
//! - `fma_peak`: independent fused multiply-add chains on every core, vectorised for the
//!   widest FMA the CPU has (AVX-512 or AVX2, chosen at run time), FLOPs = 2 per FMA
//!   lane. GEMM-like kernels are judged against it.
//! - `triad`: a[i] = b[i] + s * c[i] over three 128 MiB arrays on every core (STREAM's
//!   triad, f32), bytes = 12 per element. Memory-bound kernels are judged against it.
//!
//! scripts/bench-kernels.sh turns these and the kernel benches into one table.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use multiversion::multiversion;
use rayon::prelude::*;
use std::hint::black_box;

const LANES: usize = 16;
/// Enough independent chains to cover FMA latency (4 cycles) on two FMA ports.
const CHAINS: usize = 12;
const FMA_ITERS: usize = 2_000_000;
const TRIAD_LEN: usize = 32 << 20;

#[multiversion(targets("x86_64+avx512f+avx512vl+fma", "x86_64+avx2+fma"))]
fn fma_chains(iters: usize, seed: f32) -> f32 {
    let mut acc = [seed; LANES * CHAINS];
    let (x, y) = (1.000_001f32, 1e-7f32);
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = a.mul_add(x, y);
        }
    }
    acc.iter().sum()
}

fn ceilings(c: &mut Criterion) {
    let threads = rayon::current_num_threads();
    let mut group = c.benchmark_group("machine");
    group.sample_size(10);
    let flops = 2 * (LANES * CHAINS * FMA_ITERS * threads) as u64;
    group.throughput(Throughput::Elements(flops));
    group.bench_function(format!("fma_peak/flops={flops}"), |b| {
        b.iter(|| (0..threads).into_par_iter().map(|t| fma_chains(FMA_ITERS, black_box(t as f32))).sum::<f32>())
    });

    let b_arr = vec![1.0f32; TRIAD_LEN];
    let c_arr = vec![2.0f32; TRIAD_LEN];
    let mut a_arr = vec![0.0f32; TRIAD_LEN];
    let bytes = (12 * TRIAD_LEN) as u64;
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function(format!("triad/bytes={bytes}"), |bench| {
        bench.iter(|| {
            a_arr.par_chunks_mut(1 << 16).zip(b_arr.par_chunks(1 << 16)).zip(c_arr.par_chunks(1 << 16)).for_each(
                |((a, b), c)| {
                    for ((a, b), c) in a.iter_mut().zip(b).zip(c) {
                        *a = b + 3.0 * c;
                    }
                },
            );
            black_box(&a_arr);
        })
    });
    group.finish();
}

criterion_group!(benches, ceilings);
criterion_main!(benches);
