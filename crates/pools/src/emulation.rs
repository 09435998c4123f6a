//! The emulated tier: data stays in DRAM, and each kernel that touches it waits the
//! extra time the slow device would have cost (docs/background.md, the emulated tier):
//!
//! extra = Σ bytes_read × (1/bw_read_slow − 1/bw_read_dram)
//!       + bytes_written × (1/bw_write_slow − 1/bw_write_dram)
//!
//! The per-byte costs are computed once, by whoever builds the pool (placer-host),
//! from the host's measured DRAM bandwidth and a device model's ratios.

use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq)]
pub struct Emulation {
    /// The device model's name, e.g. `optane-dcpmm`. Shown wherever results appear.
    pub device: String,
    pub read_extra_ns_per_byte: f64,
    pub write_extra_ns_per_byte: f64,
}

impl Emulation {
    /// Per-byte extra cost from bandwidths in bytes/s. A device faster than DRAM (HBM)
    /// cannot be emulated by waiting; the cost is clamped at zero and the caller is
    /// expected to say so.
    pub fn from_bandwidths(
        device: &str,
        dram_read: f64,
        dram_write: f64,
        slow_read: f64,
        slow_write: f64,
    ) -> Emulation {
        let extra = |slow: f64, dram: f64| (1e9 / slow - 1e9 / dram).max(0.0);
        Emulation {
            device: device.to_string(),
            read_extra_ns_per_byte: extra(slow_read, dram_read),
            write_extra_ns_per_byte: extra(slow_write, dram_write),
        }
    }

    /// The extra nanoseconds for a kernel that reads and writes this many bytes here.
    pub fn extra_ns(&self, bytes_read: u64, bytes_written: u64) -> f64 {
        bytes_read as f64 * self.read_extra_ns_per_byte + bytes_written as f64 * self.write_extra_ns_per_byte
    }
}

/// Sleeps until `deadline`, spinning the last 50 µs since a sleep overshoots: for waits
/// that stand for a device's time and must not keep a core busy.
pub fn sleep_until(deadline: Instant) {
    if let Some(sleep) = deadline.checked_duration_since(Instant::now() + Duration::from_micros(50)) {
        std::thread::sleep(sleep);
    }
    busy_wait_until(deadline);
}

/// Spins until `deadline`.
pub fn busy_wait_until(deadline: Instant) {
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

/// Spins (does not sleep: a sleep's wake-up latency is tens of µs) until `ns` have
/// passed; returns the time actually waited.
pub fn busy_wait_ns(ns: f64) -> Duration {
    let start = Instant::now();
    if ns <= 0.0 {
        return Duration::ZERO;
    }
    let target = Duration::from_nanos(ns as u64);
    loop {
        let waited = start.elapsed();
        if waited >= target {
            return waited;
        }
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_cost_follows_the_formula() {
        // DRAM 40 GB/s read, 20 GB/s write; the slow device is 4x slower on both.
        let e = Emulation::from_bandwidths("slow", 40e9, 20e9, 10e9, 5e9);
        assert!((e.read_extra_ns_per_byte - (0.1 - 0.025)).abs() < 1e-12);
        assert!((e.write_extra_ns_per_byte - (0.2 - 0.05)).abs() < 1e-12);
        assert!((e.extra_ns(1000, 100) - (75.0 + 15.0)).abs() < 1e-9);
    }

    #[test]
    fn a_faster_device_costs_nothing_extra() {
        let e = Emulation::from_bandwidths("hbm", 40e9, 20e9, 400e9, 200e9);
        assert_eq!((e.read_extra_ns_per_byte, e.write_extra_ns_per_byte), (0.0, 0.0));
    }

    #[test]
    fn busy_wait_waits_at_least_the_time_asked() {
        assert!(busy_wait_ns(200_000.0) >= Duration::from_micros(200));
        assert_eq!(busy_wait_ns(-1.0), Duration::ZERO);
    }
}
