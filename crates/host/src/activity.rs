//! Is this host quiet enough to measure on? Other processes competing for the CPUs,
//! a hypervisor stealing time, and jitter that no process explains all make timings
//! noisy, and a profile taken then disagrees with its own repeat.
//!
//! Two kinds of evidence, both cheap:
//! - `/proc`: the share of all CPU time that other processes used over an interval
//!   (the whole machine's busy time from `/proc/stat` less this process's own, from
//!   `/proc/self/stat`, both in the same clock ticks), the stolen share, the tasks that
//!   are runnable besides this process's (`/proc/loadavg`, `/proc/self/task/*/stat`),
//!   and the load average;
//! - a calibration kernel: a fixed chain of dependent floating-point operations, timed
//!   [`CALIBRATION_REPS`] times. On a quiet CPU its times agree within a few percent; a
//!   competitor that takes the core, or an interrupt storm, shows as spread (p90 against
//!   p10), whatever `/proc` says.

use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// Other processes may use this many CPUs' worth of time before the host counts as busy.
pub const BUSY_OTHERS_CPUS: f64 = 0.5;
/// A hypervisor may steal this share of CPU time before the host counts as busy.
pub const BUSY_STEAL: f64 = 0.05;
/// The calibration kernel's spread, (p90 − p10) / median, above which the host counts as
/// jittery.
pub const BUSY_SPREAD: f64 = 0.15;
/// Timings of the calibration kernel per check.
pub const CALIBRATION_REPS: usize = 41;
/// Dependent operations per timing: about 0.1–0.3 ms on current CPUs.
const CALIBRATION_OPS: u64 = 200_000;
/// Bytes per memcpy timing: past a core's L2, a few milliseconds.
pub const MEMCPY_BYTES: usize = 16 << 20;
/// Memcpy timings per check, after an untimed one that faults the destination in.
const MEMCPY_REPS: usize = 5;

/// Cumulative CPU time counters at one moment, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTimes {
    /// Every CPU's time, all states summed (the aggregate `cpu` line of `/proc/stat`).
    pub total: u64,
    /// Busy time: total less idle and iowait.
    pub busy: u64,
    pub steal: u64,
    /// This process's own CPU time (user + system, all threads).
    pub own: u64,
}

/// The aggregate `cpu` line of `/proc/stat`: (total, busy, steal).
pub fn parse_proc_stat(text: &str) -> Option<(u64, u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line.split_whitespace().skip(1).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is
    // already counted in user and nice.
    let field = |i: usize| fields.get(i).copied().unwrap_or(0);
    let total: u64 = (0..8).map(field).sum();
    let idle = field(3) + field(4);
    Some((total, total.saturating_sub(idle), field(7)))
}

/// utime + stime of a `/proc/<pid>/stat` line (fields 14 and 15, after the command name,
/// which may itself hold spaces and parentheses).
pub fn parse_own_stat(text: &str) -> Option<(char, u64)> {
    let after = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    // After the name: state is field 3, utime field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((state, utime + stime))
}

/// (load average over one minute, runnable tasks) from `/proc/loadavg`.
pub fn parse_loadavg(text: &str) -> Option<(f64, u32)> {
    let mut fields = text.split_whitespace();
    let load1 = fields.next()?.parse().ok()?;
    let runnable = fields.nth(2)?.split('/').next()?.parse().ok()?;
    Some((load1, runnable))
}

impl CpuTimes {
    /// Now, from `/proc`; `None` where there is no `/proc` to read.
    pub fn now() -> Option<CpuTimes> {
        let (total, busy, steal) = parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)?;
        let (_, own) = parse_own_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
        Some(CpuTimes { total, busy, steal, own })
    }
}

/// Runnable tasks besides this process's own running threads, and the load average.
fn runnable_others() -> Option<(u32, f64)> {
    let (load1, runnable) = parse_loadavg(&std::fs::read_to_string("/proc/loadavg").ok()?)?;
    let own_running = std::fs::read_dir("/proc/self/task")
        .ok()?
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
        .filter(|s| parse_own_stat(s).is_some_and(|(state, _)| state == 'R'))
        .count() as u32;
    Some((runnable.saturating_sub(own_running), load1))
}

/// The calibration kernel's timings: median and spread; and the host's memory speed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub median_ns: f64,
    /// (p90 − p10) / median.
    pub spread: f64,
    /// One thread's memcpy time per byte ([`MEMCPY_BYTES`], median of [`MEMCPY_REPS`]):
    /// the memory bandwidth this host gives the process at the moment, which the
    /// calibration kernel, all in registers, cannot see. On this project's VM it moved
    /// from 0.08 to 0.16-0.52 ns/B within an hour, other processes idle.
    pub memcpy_ns_per_byte: f64,
}

/// One timing of the calibration kernel: `CALIBRATION_OPS` dependent multiply-adds, so
/// that neither the compiler nor the CPU can overlap them.
fn calibration_kernel() -> Duration {
    let start = Instant::now();
    let mut x = std::hint::black_box(1.000_000_1_f64);
    for _ in 0..CALIBRATION_OPS {
        x = x.mul_add(0.999_999_9, 1e-9);
    }
    std::hint::black_box(x);
    start.elapsed()
}

/// One thread's memcpy time per byte: [`MEMCPY_REPS`] copies of [`MEMCPY_BYTES`], median.
fn memcpy_ns_per_byte() -> f64 {
    let src = vec![1u8; MEMCPY_BYTES];
    let mut dst = vec![0u8; MEMCPY_BYTES];
    dst.copy_from_slice(&src);
    let mut ns: Vec<f64> = (0..MEMCPY_REPS)
        .map(|_| {
            let start = Instant::now();
            dst.copy_from_slice(std::hint::black_box(&src));
            std::hint::black_box(&dst);
            start.elapsed().as_nanos() as f64 / MEMCPY_BYTES as f64
        })
        .collect();
    ns.sort_by(f64::total_cmp);
    ns[ns.len() / 2]
}

/// Times the calibration kernel [`CALIBRATION_REPS`] times, and a memcpy (a few
/// milliseconds each).
pub fn calibrate() -> Calibration {
    for _ in 0..3 {
        calibration_kernel(); // warm the core's clock and the code
    }
    let mut ns: Vec<f64> = (0..CALIBRATION_REPS).map(|_| calibration_kernel().as_nanos() as f64).collect();
    ns.sort_by(f64::total_cmp);
    let at = |q: f64| ns[((ns.len() - 1) as f64 * q).round() as usize];
    let median = at(0.5);
    Calibration {
        median_ns: median,
        spread: if median > 0.0 { (at(0.9) - at(0.1)) / median } else { 0.0 },
        memcpy_ns_per_byte: memcpy_ns_per_byte(),
    }
}

/// What the host did over one interval (before a profile, or during one of its passes).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HostActivity {
    pub seconds: f64,
    pub cpus: u32,
    /// CPUs' worth of time other processes used (0 to `cpus`).
    pub others_cpus: f64,
    /// Share of all CPU time stolen by the hypervisor.
    pub steal: f64,
    /// Tasks runnable at the end besides this process's own.
    pub runnable_others: u32,
    pub load1: f64,
    pub calibration: Option<Calibration>,
}

impl HostActivity {
    /// What happened between `start` and now; `None` without `/proc`.
    pub fn since(start: &(CpuTimes, Instant), calibration: Option<Calibration>) -> Option<HostActivity> {
        let now = CpuTimes::now()?;
        let (runnable_others, load1) = runnable_others()?;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        let total = now.total.saturating_sub(start.0.total).max(1) as f64;
        let busy = now.busy.saturating_sub(start.0.busy) as f64;
        let own = now.own.saturating_sub(start.0.own) as f64;
        let steal = now.steal.saturating_sub(start.0.steal) as f64;
        let machine_cpus = cpus as f64;
        Some(HostActivity {
            seconds: start.1.elapsed().as_secs_f64(),
            cpus,
            others_cpus: ((busy - own - steal).max(0.0) / total * machine_cpus).min(machine_cpus),
            steal: steal / total,
            runnable_others,
            load1,
            calibration,
        })
    }

    /// Watches the host for `interval` while timing the calibration kernel: the check
    /// before a profile or a run.
    pub fn watch(interval: Duration) -> Option<HostActivity> {
        let start = (CpuTimes::now()?, Instant::now());
        let calibration = calibrate();
        std::thread::sleep(interval.saturating_sub(start.1.elapsed()));
        HostActivity::since(&start, Some(calibration))
    }

    /// Why this interval counts as busy, or `None` when it was quiet.
    pub fn busy(&self) -> Option<String> {
        let mut why = Vec::new();
        if self.others_cpus >= BUSY_OTHERS_CPUS {
            why.push("other processes competed for the CPUs");
        }
        if self.steal >= BUSY_STEAL {
            why.push("the hypervisor stole time");
        }
        if self.calibration.is_some_and(|c| c.spread >= BUSY_SPREAD) {
            why.push(if why.is_empty() {
                "jitter that no process explains"
            } else {
                "the calibration kernel jittered"
            });
        }
        (!why.is_empty()).then(|| why.join(", "))
    }

    /// The one-line warning for a busy interval described by `when` ("before profiling",
    /// "during pass 12"), or `None` when it was quiet.
    pub fn warning(&self, when: &str) -> Option<String> {
        let why = self.busy()?;
        Some(format!("busy host {when}: {why} ({}); timings will be noisy", self.describe()))
    }

    /// The error `--require-quiet` makes of a busy interval, or `Ok` when it was quiet.
    pub fn require_quiet(&self, when: &str) -> Result<(), crate::HostError> {
        match self.busy() {
            Some(why) => Err(crate::HostError::NotQuiet { when: when.to_string(), why, figures: self.describe() }),
            None => Ok(()),
        }
    }

    /// The figures, for a warning line and summary.md.
    pub fn describe(&self) -> String {
        let calibration = match self.calibration {
            Some(c) => {
                format!(
                    ", calibration kernel spread {:.0}% (median {:.0} µs), memcpy {:.3} ns/B",
                    100.0 * c.spread,
                    c.median_ns / 1e3,
                    c.memcpy_ns_per_byte
                )
            }
            None => String::new(),
        };
        format!(
            "other processes used {:.1} of {} CPUs, {} runnable besides placer, load {:.1}, steal {:.1}%{calibration}",
            self.others_cpus,
            self.cpus,
            self.runnable_others,
            self.load1,
            100.0 * self.steal
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_totals_exclude_guest_time_and_count_iowait_as_idle() {
        let text = "cpu  100 5 50 1000 20 3 2 7 40 0\ncpu0 50 2 25 500 10 1 1 3 20 0\nintr 1 2\n";
        // total = 100+5+50+1000+20+3+2+7; busy = total - (1000 + 20); steal = 7.
        assert_eq!(parse_proc_stat(text), Some((1187, 167, 7)));
        assert_eq!(parse_proc_stat("intr 1\n"), None);
    }

    #[test]
    fn own_stat_survives_a_command_name_with_spaces_and_parentheses() {
        let line = "4242 (my (weird) prog) R 1 2 3 4 5 6 7 8 9 10 250 30 0 0 20 0 3 0 100";
        assert_eq!(parse_own_stat(line), Some(('R', 280)));
        assert_eq!(parse_own_stat("4242 (x) S 1"), None);
    }

    #[test]
    fn loadavg_gives_the_one_minute_load_and_the_runnable_tasks() {
        assert_eq!(parse_loadavg("2.31 1.77 1.45 3/345 98765\n"), Some((2.31, 3)));
        assert_eq!(parse_loadavg("garbage"), None);
    }

    fn activity(others_cpus: f64, steal: f64, spread: f64) -> HostActivity {
        HostActivity {
            seconds: 1.0,
            cpus: 2,
            others_cpus,
            steal,
            runnable_others: 0,
            load1: 0.5,
            calibration: Some(Calibration { median_ns: 200_000.0, spread, memcpy_ns_per_byte: 0.08 }),
        }
    }

    #[test]
    fn a_calibration_times_the_host_s_memcpy() {
        let c = calibrate();
        // 16 MiB at 100 GB/s and at 100 MB/s: any host between.
        assert!(c.memcpy_ns_per_byte > 0.01 && c.memcpy_ns_per_byte < 10.0, "{c:?}");
    }

    #[test]
    fn the_verdict_names_each_reason_and_jitter_alone_as_unexplained() {
        assert_eq!(activity(0.1, 0.0, 0.02).busy(), None);
        assert_eq!(activity(1.8, 0.0, 0.02).busy().as_deref(), Some("other processes competed for the CPUs"));
        assert_eq!(activity(0.0, 0.2, 0.02).busy().as_deref(), Some("the hypervisor stole time"));
        assert_eq!(activity(0.0, 0.0, 0.4).busy().as_deref(), Some("jitter that no process explains"));
        assert_eq!(
            activity(1.8, 0.0, 0.4).busy().as_deref(),
            Some("other processes competed for the CPUs, the calibration kernel jittered")
        );
        assert_eq!(
            activity(1.8, 0.0, 0.4).describe(),
            "other processes used 1.8 of 2 CPUs, 0 runnable besides placer, load 0.5, steal 0.0%, \
             calibration kernel spread 40% (median 200 µs), memcpy 0.080 ns/B"
        );
    }

    #[test]
    fn watching_this_host_reads_proc_and_times_the_kernel() {
        let a = HostActivity::watch(Duration::from_millis(50)).expect("/proc is readable on Linux");
        assert!(a.seconds >= 0.04 && a.cpus >= 1 && (0.0..=a.cpus as f64).contains(&a.others_cpus), "{a:?}");
        assert!(a.calibration.is_some_and(|c| c.median_ns > 0.0 && c.spread >= 0.0), "{a:?}");
    }
}
