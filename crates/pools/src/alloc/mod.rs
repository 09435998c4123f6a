//! The allocators behind [`crate::Backend`]. This is one of the two places in placer
//! where `unsafe` is allowed (the other is `memkind-sys`).

pub(crate) mod arena;
pub(crate) mod evict;
pub(crate) mod heap;
#[cfg(feature = "memkind")]
pub(crate) mod memkind;
pub(crate) mod numa;
pub(crate) mod small;

/// The memory under one [`crate::Buffer`]: at least `len` bytes, 64-byte aligned,
/// zeroed when handed out, released on drop.
#[derive(Debug)]
pub(crate) enum Region {
    Heap(heap::HeapRegion),
    Mapped(numa::MappedRegion),
    /// A NUMA pool's buffer under a huge page, in a chunk shared with others.
    Small(small::SmallRegion),
    #[cfg(feature = "memkind")]
    Memkind(memkind::MemkindRegion),
}

impl Region {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Region::Heap(r) => r.bytes(),
            Region::Mapped(r) => r.bytes(),
            Region::Small(r) => r.bytes(),
            #[cfg(feature = "memkind")]
            Region::Memkind(r) => r.bytes(),
        }
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Region::Heap(r) => r.bytes_mut(),
            Region::Mapped(r) => r.bytes_mut(),
            Region::Small(r) => r.bytes_mut(),
            #[cfg(feature = "memkind")]
            Region::Memkind(r) => r.bytes_mut(),
        }
    }
}
