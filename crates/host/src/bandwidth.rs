//! Memory bandwidth and latency loops, on plain byte slices. All-core bandwidth splits
//! the slice across threads; latency chases pointers through a random cycle on one core.

use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::time::Instant;

/// Repeated measurements of one quantity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(mut samples: Vec<f64>) -> Spread {
        samples.sort_by(f64::total_cmp);
        let n = samples.len();
        let median = if n == 0 {
            f64::NAN
        } else if n % 2 == 1 {
            samples[n / 2]
        } else {
            0.5 * (samples[n / 2 - 1] + samples[n / 2])
        };
        Spread {
            median,
            min: samples.first().copied().unwrap_or(f64::NAN),
            max: samples.last().copied().unwrap_or(f64::NAN),
        }
    }
}

/// Runs `work` on `threads` disjoint chunks of `data` at once; returns seconds.
fn timed_split<T: Send>(data: &mut [T], threads: usize, work: impl Fn(&mut [T]) + Sync) -> f64 {
    let chunk = data.len().div_ceil(threads.max(1)).max(1);
    let start = Instant::now();
    std::thread::scope(|s| {
        for part in data.chunks_mut(chunk) {
            let work = &work;
            s.spawn(move || work(part));
        }
    });
    start.elapsed().as_secs_f64()
}

/// Seconds to read every byte of `data` (as u64 words, four independent sums so the
/// loop is bound by memory, not by one add chain).
pub fn read_seconds(data: &mut [u64], threads: usize) -> f64 {
    timed_split(data, threads, |part| {
        let mut acc = [0u64; 4];
        let mut quads = part.chunks_exact(4);
        for q in &mut quads {
            for (a, x) in acc.iter_mut().zip(q) {
                *a = a.wrapping_add(*x);
            }
        }
        for x in quads.remainder() {
            acc[0] = acc[0].wrapping_add(*x);
        }
        black_box(acc);
    })
}

/// Seconds to overwrite every byte of `data`.
pub fn write_seconds(data: &mut [u64], threads: usize, value: u64) -> f64 {
    timed_split(data, threads, |part| {
        part.fill(value);
        black_box(part);
    })
}

/// Seconds to copy `src` into `dst` (equal lengths).
pub fn copy_seconds(src: &[u64], dst: &mut [u64], threads: usize) -> f64 {
    let chunk = dst.len().div_ceil(threads.max(1)).max(1);
    let start = Instant::now();
    std::thread::scope(|s| {
        for (d, from) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
            s.spawn(move || {
                d.copy_from_slice(from);
                black_box(d);
            });
        }
    });
    start.elapsed().as_secs_f64()
}

/// Average ns per dependent load, chasing a random cycle through every 64-byte line of
/// `data` (Sattolo's shuffle, so it is one cycle and the prefetchers cannot follow).
/// Includes TLB misses, as an application on 4 KiB pages sees them.
pub fn chase_ns(data: &mut [u64], steps: usize, seed: u64) -> f64 {
    const WORDS_PER_LINE: usize = 8;
    let lines = data.len() / WORDS_PER_LINE;
    if lines < 2 {
        return f64::NAN;
    }
    let mut order: Vec<u32> = (0..lines as u32).collect();
    let mut rng = seed | 1;
    for i in (1..lines).rev() {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let j = (rng % i as u64) as usize;
        order.swap(i, j);
    }
    // Line order[k] points to line order[k + 1]: one cycle through all lines.
    for k in 0..lines {
        let next = order[(k + 1) % lines] as usize;
        data[order[k] as usize * WORDS_PER_LINE] = (next * WORDS_PER_LINE) as u64;
    }
    let mut at = order[0] as usize * WORDS_PER_LINE;
    let start = Instant::now();
    for _ in 0..steps {
        at = data[at] as usize;
    }
    let elapsed = start.elapsed().as_nanos() as f64;
    black_box(at);
    elapsed / steps as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loops_touch_what_they_claim() {
        let mut data = vec![0u64; 4096];
        assert!(write_seconds(&mut data, 3, 7) >= 0.0);
        assert!(data.iter().all(|&x| x == 7));
        let mut dst = vec![0u64; 4096];
        copy_seconds(&data, &mut dst, 2);
        assert_eq!(data, dst);
        assert!(read_seconds(&mut data, 2) >= 0.0);
    }

    #[test]
    fn the_chase_visits_every_line_in_one_cycle() {
        let mut data = vec![0u64; 8 * 1000];
        chase_ns(&mut data, 10, 42);
        let mut seen = vec![false; 1000];
        let mut at = 0usize;
        for _ in 0..1000 {
            assert!(!seen[at / 8], "line {} visited twice before the cycle closed", at / 8);
            seen[at / 8] = true;
            at = data[at] as usize;
        }
        assert_eq!(at, 0);
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn spreads_take_the_median() {
        let s = Spread::of(vec![3.0, 1.0, 2.0, 10.0]);
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 10.0));
    }
}
