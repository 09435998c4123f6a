//! What the clock can resolve, measured rather than assumed: a timer's granularity can
//! masquerade as signal (a 1/256 s clock once produced "sprinkles" of 3.9 ms).

use serde::Serialize;
use std::time::Instant;

#[derive(Debug, Clone, Copy, Serialize)]
pub struct ClockInfo {
    /// The smallest non-zero difference between two consecutive readings, in ns.
    pub resolution_ns: f64,
    /// The median cost of one reading, in ns (what every timed kernel pays once).
    pub overhead_ns: f64,
}

impl ClockInfo {
    /// Reads `Instant` (CLOCK_MONOTONIC on Linux) back to back many times.
    pub fn measure() -> ClockInfo {
        const READS: usize = 20_001;
        let mut deltas = Vec::with_capacity(READS);
        let mut prev = Instant::now();
        for _ in 0..READS {
            let now = Instant::now();
            deltas.push(now.duration_since(prev).as_nanos() as f64);
            prev = now;
        }
        let resolution_ns = deltas.iter().copied().filter(|&d| d > 0.0).fold(f64::INFINITY, f64::min);
        deltas.sort_by(f64::total_cmp);
        ClockInfo { resolution_ns, overhead_ns: deltas[READS / 2] }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_monotonic_clock_resolves_below_a_microsecond() {
        let c = ClockInfo::measure();
        assert!(c.resolution_ns > 0.0 && c.resolution_ns < 1_000.0, "{c:?}");
        assert!(c.overhead_ns < 10_000.0, "{c:?}");
    }
}
