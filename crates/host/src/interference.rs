//! What a background copy costs the kernels it overlaps. A copy thread takes CPU time
//! and memory bandwidth from the kernel beside it; on a host with few cores that is far
//! from free, and a solver that treats an overlapped copy as hidden predicts plans that
//! do not hold up.
//!
//! This measures the cost per byte copied the way the executor copies: a run of short
//! kernel-like loops (each split evenly between the kernels' threads, as GEMM and
//! convolution split their work) timed alone and then with a copy handed, at the start
//! of each loop, to a copy thread that sleeps between jobs and sleeps what an emulated
//! pool charges, as the executor's copy thread does. Alone and with-copy runs alternate.

use crate::HostError;
use crate::bandwidth::Spread;
use placer_pools::{PoolSet, sleep_until};
use rayon::prelude::*;
use std::hint::black_box;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

/// Bytes copied beside each kernel: a mid-sized activation.
const COPY: usize = 1 << 20;
/// Kernel-like loops per sample.
const KERNELS: usize = 40;

/// One kernel-like loop: a few multiply-adds per element.
fn kernel(data: &[f32], rounds: usize) {
    let piece = data.len().div_ceil(rayon::current_num_threads().max(1));
    for _ in 0..rounds {
        let sum: f32 =
            data.par_chunks(piece).map(|c| c.iter().fold(0.0f32, |acc, &x| acc.mul_add(1.0001, x * x + 0.5))).sum();
        black_box(sum);
    }
}

/// Kernel time lost per byte a background copy moves from `from` to `to`, in ns, over
/// `repeats` alternating pairs of samples.
pub fn interference_ns_per_byte(
    pools: &mut PoolSet,
    from: placer_pools::PoolId,
    to: placer_pools::PoolId,
    repeats: usize,
) -> Result<Spread, HostError> {
    let mut src = pools.allocate(from, COPY as u64)?;
    let mut dst = pools.allocate(to, COPY as u64)?;
    src.bytes_mut().fill(1);
    let wait_ns = pools.emulated_ns(from, COPY as u64, 0) + pools.emulated_ns(to, 0, COPY as u64);
    let data: Vec<f32> = (0..(256 << 10)).map(|i| (i % 97) as f32 * 0.01).collect();
    // Each kernel-like loop takes about 1 ms, the order of the kernels copies overlap.
    let start = Instant::now();
    kernel(&data, 1);
    let rounds = ((1e-3 / start.elapsed().as_secs_f64().max(1e-6)).ceil() as usize).max(1);
    let (jobs, inbox) = channel::<()>();
    let (done, finished) = channel::<()>();
    let mut samples = Vec::with_capacity(repeats);
    std::thread::scope(|s| {
        let (src, dst) = (&src, &mut dst);
        s.spawn(move || {
            for () in inbox {
                let start = Instant::now();
                dst.bytes_mut().copy_from_slice(src.bytes());
                black_box(dst.bytes());
                sleep_until(start + Duration::from_nanos(wait_ns as u64));
                if done.send(()).is_err() {
                    break;
                }
            }
        });
        for _ in 0..repeats {
            let alone = Instant::now();
            for _ in 0..KERNELS {
                kernel(&data, rounds);
            }
            let alone = alone.elapsed().as_secs_f64();
            let with = Instant::now();
            let mut waited = 0.0;
            for _ in 0..KERNELS {
                let _ = jobs.send(());
                kernel(&data, rounds);
                // A copy longer than the kernel is waited for, as the consuming kernel
                // would; only the kernels' own time counts.
                let wait = Instant::now();
                let _ = finished.recv();
                waited += wait.elapsed().as_secs_f64();
            }
            let with = with.elapsed().as_secs_f64() - waited;
            samples.push(((with - alone) * 1e9 / (KERNELS * COPY) as f64).max(0.0));
        }
        drop(jobs);
    });
    pools.free(src);
    pools.free(dst);
    Ok(Spread::of(samples))
}
