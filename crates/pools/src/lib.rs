//! Memory pools: where tensor buffers live.
//!
//! A [`PoolSet`] holds N pools, each with a name, a kind and a capacity that is
//! enforced the way a real memory node would enforce it. Every tensor buffer comes from
//! one pool and can be moved to another between kernels. Today the only backend is the
//! process heap (plain DRAM); NUMA-bound, memkind and emulated-tier backends slot in
//! behind the same [`Buffer`] type.

use bytemuck::{Pod, Zeroable};
use std::fmt;

/// Index of a pool in its [`PoolSet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolId(pub u16);

impl PoolId {
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// Every buffer starts on a 64-byte boundary (a cache line, and an AVX-512 vector), so
/// kernels see the same alignment whichever pool a tensor is in.
pub const ALIGN: usize = 64;

#[derive(Debug, Clone, Copy, Pod, Zeroable)]
#[repr(C, align(64))]
struct Line([u8; ALIGN]);

#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("pool '{pool}' is full: cannot allocate {requested} bytes with {in_use} of {capacity} bytes in use")]
    Full { pool: String, requested: u64, in_use: u64, capacity: u64 },
    #[error("pool '{pool}': the system refused an allocation of {requested} bytes (out of memory)")]
    OutOfMemory { pool: String, requested: u64 },
    #[error("unknown pool '{name}'; pools: {available}")]
    UnknownPool { name: String, available: String },
    #[error("buffer of {len} bytes cannot be viewed as {what}: its length is not a multiple of the element size")]
    BadView { len: usize, what: &'static str },
}

/// What kind of memory a pool is. Only `Dram` has a backend today.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    Dram,
}

impl fmt::Display for PoolKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolKind::Dram => f.write_str("dram"),
        }
    }
}

/// A pool's identity and limits, plus running accounting.
#[derive(Debug, Clone)]
pub struct Pool {
    pub name: String,
    pub kind: PoolKind,
    /// Bytes this pool may hand out at once.
    pub capacity: u64,
    in_use: u64,
    peak: u64,
}

impl Pool {
    pub fn new(name: &str, kind: PoolKind, capacity: u64) -> Pool {
        Pool { name: name.to_string(), kind, capacity, in_use: 0, peak: 0 }
    }

    pub fn in_use(&self) -> u64 {
        self.in_use
    }

    /// The most bytes this pool has had in use at once.
    pub fn peak(&self) -> u64 {
        self.peak
    }
}

/// A buffer owned by one pool. The bytes are zeroed when allocated and touched once, so
/// the first kernel to use it does not pay for page faults inside its timing.
#[derive(Debug)]
pub struct Buffer {
    lines: Vec<Line>,
    len: usize,
    pool: PoolId,
}

impl Buffer {
    pub fn pool(&self) -> PoolId {
        self.pool
    }

    pub fn len_bytes(&self) -> usize {
        self.len
    }

    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.lines)[..self.len]
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.lines)[..self.len]
    }

    pub fn as_f32(&self) -> Result<&[f32], PoolError> {
        view(self.bytes(), "f32")
    }

    pub fn as_f32_mut(&mut self) -> Result<&mut [f32], PoolError> {
        view_mut(self.bytes_mut(), "f32")
    }

    pub fn as_i32(&self) -> Result<&[i32], PoolError> {
        view(self.bytes(), "i32")
    }

    pub fn as_i32_mut(&mut self) -> Result<&mut [i32], PoolError> {
        view_mut(self.bytes_mut(), "i32")
    }
}

fn view<'a, T: Pod>(bytes: &'a [u8], what: &'static str) -> Result<&'a [T], PoolError> {
    bytemuck::try_cast_slice(bytes).map_err(|_| PoolError::BadView { len: bytes.len(), what })
}

fn view_mut<'a, T: Pod>(bytes: &'a mut [u8], what: &'static str) -> Result<&'a mut [T], PoolError> {
    let len = bytes.len();
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| PoolError::BadView { len, what })
}

/// The pools of one host, with per-pool capacity enforcement and accounting.
#[derive(Debug, Clone)]
pub struct PoolSet {
    pools: Vec<Pool>,
}

impl PoolSet {
    pub fn new(pools: Vec<Pool>) -> PoolSet {
        PoolSet { pools }
    }

    /// One DRAM pool whose capacity is what the kernel reports as available now, so an
    /// oversized model is refused with a clear error instead of meeting the OOM killer.
    pub fn host_dram() -> PoolSet {
        let capacity = available_memory().unwrap_or(u64::MAX);
        PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, capacity)])
    }

    pub fn pools(&self) -> &[Pool] {
        &self.pools
    }

    pub fn pool(&self, id: PoolId) -> &Pool {
        &self.pools[id.index()]
    }

    pub fn find(&self, name: &str) -> Result<PoolId, PoolError> {
        self.pools.iter().position(|p| p.name == name).map(|i| PoolId(i as u16)).ok_or_else(|| PoolError::UnknownPool {
            name: name.to_string(),
            available: self.pools.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }

    /// Allocates `bytes` zeroed bytes in `pool`, refusing when the pool's capacity or
    /// the system's memory would be exceeded.
    pub fn allocate(&mut self, pool: PoolId, bytes: u64) -> Result<Buffer, PoolError> {
        let p = &mut self.pools[pool.index()];
        let rounded = bytes.div_ceil(ALIGN as u64) * ALIGN as u64;
        if p.in_use.saturating_add(rounded) > p.capacity {
            return Err(PoolError::Full {
                pool: p.name.clone(),
                requested: bytes,
                in_use: p.in_use,
                capacity: p.capacity,
            });
        }
        let oom = || PoolError::OutOfMemory { pool: p.name.clone(), requested: bytes };
        let len = usize::try_from(bytes).map_err(|_| oom())?;
        let mut lines: Vec<Line> = Vec::new();
        lines.try_reserve_exact(len.div_ceil(ALIGN)).map_err(|_| oom())?;
        lines.resize(len.div_ceil(ALIGN), Line::zeroed());
        p.in_use += rounded;
        p.peak = p.peak.max(p.in_use);
        Ok(Buffer { lines, len, pool })
    }

    /// Returns a buffer's bytes to its pool.
    pub fn free(&mut self, buffer: Buffer) {
        let p = &mut self.pools[buffer.pool.index()];
        p.in_use -= (buffer.len as u64).div_ceil(ALIGN as u64) * ALIGN as u64;
    }

    /// Moves a buffer's contents to another pool: allocate there, copy, free here. On
    /// failure the original buffer comes back untouched with the error.
    pub fn move_to(&mut self, buffer: Buffer, to: PoolId) -> Result<Buffer, (Buffer, PoolError)> {
        if buffer.pool == to {
            return Ok(buffer);
        }
        match self.allocate(to, buffer.len as u64) {
            Ok(mut moved) => {
                moved.bytes_mut().copy_from_slice(buffer.bytes());
                self.free(buffer);
                Ok(moved)
            }
            Err(e) => Err((buffer, e)),
        }
    }
}

/// `MemAvailable` from /proc/meminfo, in bytes.
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_pools() -> PoolSet {
        PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 1 << 20), Pool::new("slow", PoolKind::Dram, 4096)])
    }

    #[test]
    fn buffers_are_aligned_zeroed_and_typed() {
        let mut pools = two_pools();
        let mut b = pools.allocate(PoolId(0), 100).expect("fits");
        assert_eq!(b.bytes().as_ptr() as usize % ALIGN, 0);
        assert!(b.bytes().iter().all(|&x| x == 0));
        assert_eq!(b.as_f32().expect("100 bytes are 25 floats").len(), 25);
        b.as_f32_mut().expect("view")[3] = 1.5;
        assert_eq!(b.as_f32().expect("view")[3], 1.5);
        let odd = pools.allocate(PoolId(0), 6).expect("fits");
        assert!(matches!(odd.as_i32(), Err(PoolError::BadView { len: 6, .. })));
    }

    #[test]
    fn capacity_is_enforced_and_accounted_at_allocation_granularity() {
        let mut pools = two_pools();
        let slow = pools.find("slow").expect("exists");
        let a = pools.allocate(slow, 4000).expect("fits");
        assert_eq!(pools.pool(slow).in_use(), 4032);
        let err = pools.allocate(slow, 100).expect_err("full");
        assert!(err.to_string().contains("pool 'slow' is full"), "{err}");
        pools.free(a);
        assert_eq!(pools.pool(slow).in_use(), 0);
        assert_eq!(pools.pool(slow).peak(), 4032);
        assert!(pools.allocate(slow, 4096).is_ok());
    }

    #[test]
    fn moves_copy_contents_and_fail_without_losing_data() {
        let mut pools = two_pools();
        let mut b = pools.allocate(PoolId(0), 64).expect("fits");
        b.bytes_mut()[7] = 42;
        let moved = pools.move_to(b, PoolId(1)).expect("fits");
        assert_eq!((moved.pool(), moved.bytes()[7]), (PoolId(1), 42));
        assert_eq!(pools.pool(PoolId(0)).in_use(), 0);
        let big = pools.allocate(PoolId(0), 8192).expect("fits");
        let (back, err) = pools.move_to(big, PoolId(1)).expect_err("too big for slow");
        assert_eq!(back.pool(), PoolId(0));
        assert!(matches!(err, PoolError::Full { .. }));
    }

    #[test]
    fn unknown_pools_are_named_in_the_error() {
        let err = two_pools().find("pmem").expect_err("unknown");
        assert_eq!(err.to_string(), "unknown pool 'pmem'; pools: dram, slow");
    }

    #[test]
    fn the_system_refusing_memory_is_an_error_not_an_abort() {
        let mut pools = PoolSet::new(vec![Pool::new("huge", PoolKind::Dram, u64::MAX)]);
        let err = pools.allocate(PoolId(0), u64::MAX / 2).expect_err("cannot be satisfied");
        assert!(matches!(err, PoolError::OutOfMemory { .. }), "{err}");
    }
}
