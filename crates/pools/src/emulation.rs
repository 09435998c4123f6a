//! The emulated tier: data stays in DRAM, and each kernel that touches it waits the
//! extra time the slow device would have cost (docs/background.md, the emulated tier):
//!
//! extra = Σ bytes_read × (1/bw_read_slow − 1/bw_read_dram)
//!       + bytes_written × (1/bw_write_slow − 1/bw_write_dram)
//!
//! That is the `additive` wait model. The `overlap` model charges writes the same way
//! but lets a kernel's compute hide its reads: the device streams them while the kernel
//! runs, so a kernel waits only for the part of the device's read time that outlasts
//! the kernel itself (docs/hosts.md, wait models, with the real Optane figures it was
//! chosen from).
//!
//! The per-byte costs are computed once, by whoever builds the pool (placer-host),
//! from the host's measured DRAM bandwidth and a device model's ratios.

use std::time::{Duration, Instant};

/// How an emulated pool turns a kernel's bytes into a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WaitModel {
    /// Every byte read or written costs the bandwidth gap, operand by operand, added up.
    #[default]
    Additive,
    /// Writes cost the bandwidth gap; reads cost only the part of the device's read
    /// time (all of the pool's reads for the kernel) that exceeds the kernel's own time.
    Overlap,
}

impl WaitModel {
    pub const ALL: [WaitModel; 2] = [WaitModel::Additive, WaitModel::Overlap];

    pub fn as_str(self) -> &'static str {
        match self {
            WaitModel::Additive => "additive",
            WaitModel::Overlap => "overlap",
        }
    }

    pub fn parse(text: &str) -> Option<WaitModel> {
        WaitModel::ALL.into_iter().find(|m| m.as_str() == text)
    }

    /// How results name an emulated `device` under this wait model, as `--emulate`
    /// takes it: `optane-dcpmm:overlap`.
    pub fn label(self, device: &str) -> String {
        format!("{device}:{self}")
    }
}

impl std::fmt::Display for WaitModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Emulation {
    /// The device model's name, e.g. `optane-dcpmm`. Shown wherever results appear.
    pub device: String,
    pub wait: WaitModel,
    pub read_extra_ns_per_byte: f64,
    pub write_extra_ns_per_byte: f64,
    /// The device's whole read time per byte (1/bw_read_slow), which the overlap model
    /// sets against the kernel's time.
    pub read_ns_per_byte: f64,
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
            wait: WaitModel::Additive,
            read_extra_ns_per_byte: extra(slow_read, dram_read),
            write_extra_ns_per_byte: extra(slow_write, dram_write),
            read_ns_per_byte: 1e9 / slow_read,
        }
    }

    pub fn with_wait(mut self, wait: WaitModel) -> Emulation {
        self.wait = wait;
        self
    }

    /// What results carry as the emulation's name: the device and the wait model, as
    /// `--emulate` takes them (`optane-dcpmm:overlap`). Profiles record it, so a profile
    /// taken with one wait model is never mixed with another.
    pub fn label(&self) -> String {
        self.wait.label(&self.device)
    }

    /// The extra nanoseconds for bytes that move to or from this pool with nothing to
    /// hide behind (copies, probes): the bandwidth gap, in either wait model.
    pub fn extra_ns(&self, bytes_read: u64, bytes_written: u64) -> f64 {
        bytes_read as f64 * self.read_extra_ns_per_byte + bytes_written as f64 * self.write_extra_ns_per_byte
    }

    /// The wait for a kernel that took `kernel_ns` with its data in DRAM and read and
    /// wrote this many bytes (all its operands in this pool together) here.
    pub fn kernel_wait_ns(&self, bytes_read: u64, bytes_written: u64, kernel_ns: f64) -> f64 {
        match self.wait {
            WaitModel::Additive => self.extra_ns(bytes_read, bytes_written),
            WaitModel::Overlap => {
                let reads = (bytes_read as f64 * self.read_ns_per_byte - kernel_ns).max(0.0);
                reads + bytes_written as f64 * self.write_extra_ns_per_byte
            }
        }
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
    fn overlap_hides_reads_behind_the_kernel_and_charges_writes() {
        // Slow reads at 10 GB/s: 0.1 ns/B. 1 MB read takes the device 100 µs.
        let e = Emulation::from_bandwidths("slow", 40e9, 20e9, 10e9, 5e9).with_wait(WaitModel::Overlap);
        assert_eq!(e.label(), "slow:overlap");
        // A kernel of 150 µs hides the whole read; its 1,000 written bytes cost 150 ns.
        assert!((e.kernel_wait_ns(1_000_000, 1000, 150_000.0) - 150.0).abs() < 1e-6);
        // A kernel of 40 µs waits the other 60 µs of the read.
        assert!((e.kernel_wait_ns(1_000_000, 0, 40_000.0) - 60_000.0).abs() < 1e-6);
        // Copies have nothing to hide behind: the gap, as in the additive model.
        assert!((e.extra_ns(1000, 100) - (75.0 + 15.0)).abs() < 1e-9);
        let additive = e.clone().with_wait(WaitModel::Additive);
        assert_eq!(additive.label(), "slow:additive");
        assert!((additive.kernel_wait_ns(1000, 100, 1e9) - 90.0).abs() < 1e-9);
        assert_eq!(WaitModel::parse("overlap"), Some(WaitModel::Overlap));
        assert_eq!(WaitModel::parse("sideways"), None);
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
