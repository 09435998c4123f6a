//! The pools of one host, with per-pool capacity enforcement and accounting.

use crate::alloc::Region;
use crate::alloc::heap::HeapRegion;
use crate::pool::{Backend, Pool, PoolKind};
use crate::{ALIGN, Buffer, HUGE_PAGE, PoolError, PoolId};

#[derive(Debug, Clone)]
pub struct PoolSet {
    pools: Vec<Pool>,
}

impl PoolSet {
    pub fn new(pools: Vec<Pool>) -> PoolSet {
        PoolSet { pools }
    }

    /// One heap DRAM pool whose capacity is what the kernel reports as available now,
    /// so an oversized model is refused with a clear error instead of meeting the OOM
    /// killer.
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

    pub fn ids(&self) -> impl Iterator<Item = PoolId> + use<> {
        (0..self.pools.len()).map(|i| PoolId(i as u16))
    }

    /// True when any pool is emulated: every result from this set must say so.
    pub fn any_emulated(&self) -> bool {
        self.pools.iter().any(Pool::is_emulated)
    }

    /// Extra ns the emulation charges for reading `read` bytes from `pool` and writing
    /// `written` bytes into it (zero for real pools).
    pub fn emulated_ns(&self, pool: PoolId, read: u64, written: u64) -> f64 {
        self.pool(pool).emulation.as_ref().map_or(0.0, |e| e.extra_ns(read, written))
    }

    /// What the emulated pools charge for copying `bytes` from `src` into `dst`, on top
    /// of the copy itself: the source's read and the destination's write. The plan
    /// executor and placer_torch charge a move by this.
    pub fn copy_extra_ns(&self, src: PoolId, dst: PoolId, bytes: u64) -> f64 {
        self.emulated_ns(src, bytes, 0) + self.emulated_ns(dst, 0, bytes)
    }

    /// What the emulated pools charge a kernel that took `kernel_ns` with its data in
    /// DRAM, given each operand's (pool, bytes read, bytes written): each pool's bytes
    /// added up, then that pool's wait model applied (zero for real pools).
    /// Runs between every two kernels, so it allocates nothing: each emulated pool
    /// walks the (few) operands again.
    pub fn kernel_wait_ns(&self, operands: impl Iterator<Item = (PoolId, u64, u64)> + Clone, kernel_ns: f64) -> f64 {
        self.ids()
            .filter_map(|id| {
                let emulation = self.pool(id).emulation.as_ref()?;
                let (read, written) = operands
                    .clone()
                    .filter(|(pool, ..)| *pool == id)
                    .fold((0, 0), |(r, w), (_, read, written)| (r + read, w + written));
                Some(emulation.kernel_wait_ns(read, written, kernel_ns))
            })
            .sum()
    }

    pub fn find(&self, name: &str) -> Result<PoolId, PoolError> {
        self.pools.iter().position(|p| p.name == name).map(|i| PoolId(i as u16)).ok_or_else(|| PoolError::UnknownPool {
            name: name.to_string(),
            available: self.pools.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }

    /// Allocates `bytes` zeroed bytes in `pool`, refusing when the pool's capacity or
    /// the system's memory would be exceeded. Nothing is accounted on failure.
    pub fn allocate(&mut self, pool: PoolId, bytes: u64) -> Result<Buffer, PoolError> {
        let p = &mut self.pools[pool.index()];
        let rounded = granule(bytes);
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
        let region = match &p.backend {
            Backend::Heap => Region::Heap(HeapRegion::allocate_zeroed(len).ok_or_else(oom)?),
            // Small buffers share huge pages (alloc/small.rs); each chunk's pages are
            // placed and checked once, when it is mapped.
            Backend::Numa { nodes, binder } if len < HUGE_PAGE => {
                let (name, pages) = (&p.name, &mut p.pages);
                Region::Small(p.small.carve(name, len, || {
                    let (chunk, placement) = binder.allocate(name, nodes, HUGE_PAGE)?;
                    pages.add(&placement);
                    Ok(chunk)
                })?)
            }
            Backend::Numa { nodes, binder } => {
                let (region, placement) = binder.allocate(&p.name, nodes, len)?;
                p.pages.add(&placement);
                Region::Mapped(region)
            }
            #[cfg(feature = "memkind")]
            Backend::Memkind { kind, nodes } => {
                let mut region = crate::alloc::memkind::MemkindRegion::allocate_zeroed(kind, len).ok_or_else(oom)?;
                if !nodes.is_empty() {
                    p.pages.add(&crate::alloc::numa::PagePlacement::touch_and_query(region.bytes_mut(), nodes));
                }
                Region::Memkind(region)
            }
        };
        p.in_use += rounded;
        p.peak = p.peak.max(p.in_use);
        Ok(Buffer { region, pool })
    }

    /// Where `buffer`'s pages are now, asked of the kernel (not remembered from the
    /// allocation), for a pool bound to NUMA nodes; `None` for one that is not.
    pub fn query_pages(&self, buffer: &Buffer) -> Option<crate::alloc::numa::PagePlacement> {
        let nodes = self.pool(buffer.pool()).backend.checked_nodes();
        (!nodes.is_empty()).then(|| crate::alloc::numa::PagePlacement::query(buffer.bytes(), nodes))
    }

    /// Returns a buffer's bytes to its pool.
    pub fn free(&mut self, buffer: Buffer) {
        let p = &mut self.pools[buffer.pool.index()];
        p.in_use -= granule(buffer.len_bytes() as u64);
    }

    /// True when two pools hand out the same physical memory: an emulated pool and the
    /// real pool its data lives in (same NUMA nodes), or two heap pools.
    pub fn same_memory(&self, a: PoolId, b: PoolId) -> bool {
        match (&self.pools[a.index()].backend, &self.pools[b.index()].backend) {
            (Backend::Heap, Backend::Heap) => true,
            (Backend::Numa { nodes: x, .. }, Backend::Numa { nodes: y, .. }) => x == y,
            _ => false,
        }
    }

    /// Hands a buffer to another pool that shares its memory (see [`Self::same_memory`])
    /// without copying: only the accounting moves. Profiling uses it so a kernel's
    /// operands keep their addresses, and so their cache and page layout, from one pass
    /// to the next. The target's capacity is enforced; on failure the buffer comes back.
    pub fn retag(&mut self, mut buffer: Buffer, to: PoolId) -> Result<Buffer, (Buffer, PoolError)> {
        if buffer.pool == to {
            return Ok(buffer);
        }
        let bytes = buffer.len_bytes() as u64;
        if !self.same_memory(buffer.pool, to) {
            let err = PoolError::BackendUnavailable {
                backend: format!("retagging into pool '{}'", self.pools[to.index()].name),
                reason: format!("it does not share memory with pool '{}'", self.pools[buffer.pool.index()].name),
            };
            return Err((buffer, err));
        }
        let target = &mut self.pools[to.index()];
        if target.in_use.saturating_add(granule(bytes)) > target.capacity {
            let err = PoolError::Full {
                pool: target.name.clone(),
                requested: bytes,
                in_use: target.in_use,
                capacity: target.capacity,
            };
            return Err((buffer, err));
        }
        target.in_use += granule(bytes);
        target.peak = target.peak.max(target.in_use);
        self.pools[buffer.pool.index()].in_use -= granule(bytes);
        buffer.pool = to;
        Ok(buffer)
    }

    /// Moves a buffer's contents to another pool: allocate there, copy, free here. On
    /// failure the original buffer comes back untouched with the error.
    pub fn move_to(&mut self, buffer: Buffer, to: PoolId) -> Result<Buffer, (Buffer, PoolError)> {
        if buffer.pool == to {
            return Ok(buffer);
        }
        match self.allocate(to, buffer.len_bytes() as u64) {
            Ok(mut moved) => {
                moved.bytes_mut().copy_from_slice(buffer.bytes());
                self.free(buffer);
                Ok(moved)
            }
            Err(e) => Err((buffer, e)),
        }
    }
}

/// Capacity is accounted in whole cache lines, the allocation granule of every backend.
fn granule(bytes: u64) -> u64 {
    bytes.div_ceil(ALIGN as u64) * ALIGN as u64
}

/// This host's total memory (`MemTotal`), if /proc/meminfo says.
pub fn total_memory() -> Option<u64> {
    meminfo("MemTotal:")
}

/// `MemAvailable` from /proc/meminfo, in bytes.
pub fn available_memory() -> Option<u64> {
    meminfo("MemAvailable:")
}

fn meminfo(key: &str) -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
