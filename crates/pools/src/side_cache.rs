//! A memory-side cache in front of a slow pool, as hardware 2LM builds one (Intel's
//! Memory Mode for Optane: DRAM caching PMEM): direct-mapped, line-granular, tags kept
//! by the hardware, write-back. It counts what each access costs the slow device: the
//! lines it fetches (read misses) and the dirty lines it evicts to make room.
//!
//! Writes allocate without fetching: a CPU writes whole lines back from its own caches,
//! so a line written over needs nothing from the device. Addresses are offsets in the
//! slow pool's arena, taken as physical: real hardware indexes by physical address, and
//! the operating system scatters pages, so conflicts between tensors fall differently
//! there (within a page they are the same).
//!
//! The state is kept as runs of consecutive sets holding consecutive lines of one
//! "generation" (line / sets) with one dirty bit, so a tensor-sized access costs the
//! number of runs it meets, not its number of lines.

use std::collections::BTreeMap;

/// What accesses cost the device behind the cache, in lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SideTraffic {
    /// Lines accessed.
    pub lines: u64,
    /// Lines read from the device (read misses).
    pub fills: u64,
    /// Dirty lines written back to the device to make room.
    pub writebacks: u64,
}

impl std::ops::AddAssign for SideTraffic {
    fn add_assign(&mut self, o: SideTraffic) {
        self.lines += o.lines;
        self.fills += o.fills;
        self.writebacks += o.writebacks;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    end: u64,
    tag: u64,
    dirty: bool,
}

#[derive(Debug, Clone)]
pub struct MemorySideCache {
    line: u64,
    sets: u64,
    /// Start set → run; runs never overlap. Sets outside every run hold nothing.
    runs: BTreeMap<u64, Run>,
}

impl MemorySideCache {
    /// A cache of `bytes` (rounded down to whole lines, at least one) with `line`-byte
    /// lines, empty.
    pub fn new(bytes: u64, line: u64) -> MemorySideCache {
        let line = line.max(1);
        MemorySideCache { line, sets: (bytes / line).max(1), runs: BTreeMap::new() }
    }

    /// Reads (or, with `write`, writes) `len` bytes at `addr`.
    pub fn access(&mut self, addr: u64, len: u64, write: bool) -> SideTraffic {
        let mut traffic = SideTraffic::default();
        if len == 0 {
            return traffic;
        }
        let (first, end) = (addr / self.line, (addr + len).div_ceil(self.line));
        traffic.lines = end - first;
        let mut l = first;
        while l < end {
            let set = l % self.sets;
            let n = (end - l).min(self.sets - set);
            self.touch(set, set + n, l / self.sets, write, &mut traffic);
            l += n;
        }
        traffic
    }

    /// Sets `s0..s1` are accessed for lines of generation `tag`.
    fn touch(&mut self, s0: u64, s1: u64, tag: u64, write: bool, traffic: &mut SideTraffic) {
        let before = self.runs.range(..s0).next_back().filter(|(_, r)| r.end > s0).map(|(&s, &r)| (s, r));
        let met: Vec<(u64, Run)> = before.into_iter().chain(self.runs.range(s0..s1).map(|(&s, &r)| (s, r))).collect();
        let mut pieces: Vec<(u64, Run)> = Vec::with_capacity(met.len() + 1);
        let mut push = |start: u64, end: u64, dirty: bool| match pieces.last_mut() {
            Some((_, last)) if last.end == start && last.dirty == dirty => last.end = end,
            _ => pieces.push((start, Run { end, tag, dirty })),
        };
        let mut p = s0;
        for &(start, run) in &met {
            let (a, b) = (start.max(s0), run.end.min(s1));
            if p < a {
                traffic.fills += if write { 0 } else { a - p };
                push(p, a, write);
            }
            if run.tag == tag {
                push(a, b, run.dirty || write);
            } else {
                traffic.fills += if write { 0 } else { b - a };
                traffic.writebacks += if run.dirty { b - a } else { 0 };
                push(a, b, write);
            }
            p = b;
        }
        if p < s1 {
            traffic.fills += if write { 0 } else { s1 - p };
            push(p, s1, write);
        }
        for &(start, run) in &met {
            self.runs.remove(&start);
            if start < s0 {
                self.runs.insert(start, Run { end: s0, ..run });
            }
            if run.end > s1 {
                self.runs.insert(s1, run);
            }
        }
        self.runs.extend(pieces);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One entry per set, line by line: the obvious cache the runs must agree with.
    struct Naive {
        line: u64,
        sets: Vec<Option<(u64, bool)>>,
    }

    impl Naive {
        fn access(&mut self, addr: u64, len: u64, write: bool) -> SideTraffic {
            let mut t = SideTraffic::default();
            if len == 0 {
                return t;
            }
            let n = self.sets.len() as u64;
            for l in addr / self.line..(addr + len).div_ceil(self.line) {
                t.lines += 1;
                let entry = &mut self.sets[(l % n) as usize];
                match *entry {
                    Some((tag, dirty)) if tag == l / n => *entry = Some((tag, dirty || write)),
                    old => {
                        t.fills += u64::from(!write);
                        t.writebacks += u64::from(old.is_some_and(|(_, d)| d));
                        *entry = Some((l / n, write));
                    }
                }
            }
            t
        }
    }

    #[test]
    fn a_hand_computed_sequence() {
        // 4 sets of 64 B: 256 B of cache.
        let mut c = MemorySideCache::new(256, 64);
        // Lines 0..3 read: 3 fills into sets 0..2.
        assert_eq!(c.access(0, 192, false), SideTraffic { lines: 3, fills: 3, writebacks: 0 });
        // Read again: hits.
        assert_eq!(c.access(10, 100, false), SideTraffic { lines: 2, fills: 0, writebacks: 0 });
        // Lines 4..6 written (sets 0..1): no fills, clean victims, no writebacks.
        assert_eq!(c.access(256, 128, true), SideTraffic { lines: 2, fills: 0, writebacks: 0 });
        // Line 0 read back: set 0 holds dirty line 4 → one writeback, one fill.
        assert_eq!(c.access(0, 64, false), SideTraffic { lines: 1, fills: 1, writebacks: 1 });
        // Lines 3..5 (sets 3, 0, 1): set 3 empty (fill), set 0 holds line 0 (clean: fill),
        // set 1 holds line 5 itself, dirty (hit).
        assert_eq!(c.access(192, 192, false), SideTraffic { lines: 3, fills: 2, writebacks: 0 });
        // Line 5 is still dirty: reading line 1 (set 1) writes it back.
        assert_eq!(c.access(64, 1, false), SideTraffic { lines: 1, fills: 1, writebacks: 1 });
    }

    #[test]
    fn agrees_with_a_line_by_line_cache_on_random_accesses() {
        // A small LCG: deterministic, and enough to mix sizes, overlaps and wraps.
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |m: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % m
        };
        for (bytes, line) in [(64 * 7, 64), (4096, 64), (1000, 100), (64, 64)] {
            let mut fast = MemorySideCache::new(bytes, line);
            let sets = fast.sets as usize;
            let mut naive = Naive { line, sets: vec![None; sets] };
            for _ in 0..2000 {
                let (addr, len, write) = (next(bytes * 5), next(bytes * 3), next(3) == 0);
                assert_eq!(fast.access(addr, len, write), naive.access(addr, len, write), "{addr}+{len} {write}");
            }
        }
    }
}
