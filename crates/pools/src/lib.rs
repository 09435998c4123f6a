//! Memory pools: where tensor buffers live.
//!
//! A [`PoolSet`] holds N pools. Each has a name, a kind (what memory it is), a
//! capacity enforced the way a real memory node would enforce it, a [`Backend`] that
//! says where its bytes come from, and optionally an [`Emulation`]: a slow tier whose
//! bytes are really in DRAM and whose extra cost is paid by busy-waiting. Every tensor
//! buffer comes from one pool and can be moved to another between kernels.
//!
//! `unsafe` lives only in [`alloc`] (the allocators and the page-placement query).

#[allow(unsafe_code)]
mod alloc;
mod buffer;
mod cpus;
mod emulation;
mod pool;
mod set;
mod side_cache;

pub use alloc::arena::{Arenas, CopyTicket, Slot, Views};
pub use alloc::evict::evict_from_cache;
#[cfg(feature = "memkind")]
pub use alloc::memkind::{MemkindKind, MemkindSpec};
pub use alloc::numa::{
    HUGE_PAGE, NumaBinder, PagePlacement, anon_huge_page_bytes, node_list, transparent_huge_pages, whole_huge_pages,
};
pub use buffer::Buffer;
pub use cpus::{CopyCores, Pinned};
pub use emulation::{Emulation, WaitModel, busy_wait_ns, busy_wait_until, sleep_until};
pub use pool::{Backend, PageTally, Pool, PoolKind};
pub use set::{PoolSet, available_memory, total_memory};
pub use side_cache::{MemorySideCache, SideTraffic};

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
    #[error("{backend} is not available: {reason}")]
    BackendUnavailable { backend: String, reason: String },
    /// A plan asked the arena for something unsound (overlapping or unplaced bytes):
    /// a bug in the plan or its executor, never ignored.
    #[error("arena of pool {pool}: {reason}")]
    Arena { pool: u16, reason: String },
    /// The copy thread stopped, or a copy was finished by arenas that did not start it.
    #[error("background copy: {reason}")]
    Copy { reason: String },
    #[error("pool '{pool}': cannot bind {bytes} bytes to NUMA node(s) {nodes}: {reason}")]
    Bind { pool: String, nodes: String, bytes: u64, reason: String },
}
