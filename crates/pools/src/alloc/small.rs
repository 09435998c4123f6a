//! Buffers smaller than a huge page, packed side by side into shared 2 MiB chunks of a
//! NUMA pool.
//!
//! A mapping of its own per small buffer gets 4 KiB pages (a huge page needs 2 MiB of
//! aligned mapping) scattered anew for every buffer. The profiler keeps every tensor in
//! a buffer of its own, and a plan runs in one arena on huge pages, so small kernels ran
//! 2-7× slower in the profile than in the plan they were to predict (docs/running.md).
//! Packed into chunks, small buffers sit on huge pages next to each other, as tensors do
//! in an arena.
//!
//! A chunk is carved front to back and never hands out the same bytes twice, so every
//! buffer starts zeroed (fresh anonymous pages) and no two buffers overlap. That is what
//! makes the raw-pointer views below sound. The chunk is unmapped when the last buffer
//! carved from it is dropped.
//!
//! The price: a chunk's pages are touched when it is mapped, and neither its tail (not
//! yet carved) nor the bytes of its freed buffers count against the pool's capacity
//! until the chunk goes. Callers allocate small buffers once per profile pass or plan,
//! so that is at most a few MiB per pool; a long churn of small allocations with one
//! survivor per chunk would hold more.

use super::numa::MappedRegion;
use crate::PoolError;
use std::sync::Arc;

/// Every small buffer starts on a cache line, as every other buffer does.
const ALIGN: usize = 64;

/// One shared mapping, and the address its bytes start at, taken once when it was made.
#[derive(Debug)]
struct Chunk {
    /// Owns the mapping; never read or written again through itself.
    _region: MappedRegion,
    base: *mut u8,
    len: usize,
}

// SAFETY: `base` points into the mapping `_region` owns, which stays at its address
// until the chunk is dropped, wherever the chunk moves. Bytes are reached only through
// `SmallRegion`s, each the sole owner of a disjoint range (see `Chunks::carve`), whose
// `&self`/`&mut self` methods give the usual borrow guarantees for that range.
unsafe impl Send for Chunk {}
// SAFETY: as above; shared access to a chunk only reads `base` and `len`.
unsafe impl Sync for Chunk {}

/// The chunk a pool is carving small buffers from, and where its free bytes start.
#[derive(Debug, Default)]
pub(crate) struct Chunks {
    current: Option<(Arc<Chunk>, usize)>,
}

/// A copy of a pool starts a chunk of its own: two pools carving the same chunk from
/// their own cursors would hand out the same bytes twice.
impl Clone for Chunks {
    fn clone(&self) -> Chunks {
        Chunks::default()
    }
}

impl Chunks {
    /// `len` bytes from the current chunk, or from a fresh one that `new_chunk` maps
    /// when the current one has too little left. More than a fresh chunk holds is
    /// refused as out of memory for `pool`.
    pub(crate) fn carve(
        &mut self,
        pool: &str,
        len: usize,
        new_chunk: impl FnOnce() -> Result<MappedRegion, PoolError>,
    ) -> Result<SmallRegion, PoolError> {
        let fits = |(chunk, next): &(Arc<Chunk>, usize)| next.checked_add(len).is_some_and(|end| end <= chunk.len);
        if !self.current.as_ref().is_some_and(fits) {
            let mut region = new_chunk()?;
            let bytes = region.bytes_mut();
            let chunk = Chunk { base: bytes.as_mut_ptr(), len: bytes.len(), _region: region };
            self.current = Some((Arc::new(chunk), 0));
        }
        let Some((chunk, next)) = self.current.as_mut().filter(|c| fits(c)) else {
            return Err(PoolError::OutOfMemory { pool: pool.to_string(), requested: len as u64 });
        };
        let region = SmallRegion { chunk: Arc::clone(chunk), offset: *next, len };
        // Never handed out again: the next buffer starts on the following cache line.
        *next = (*next + len).next_multiple_of(ALIGN).min(chunk.len);
        Ok(region)
    }
}

/// `len` bytes at `offset` of a shared chunk, owned by one buffer alone.
#[derive(Debug)]
pub(crate) struct SmallRegion {
    chunk: Arc<Chunk>,
    offset: usize,
    len: usize,
}

impl SmallRegion {
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `offset..offset + len` lies inside the chunk (`carve` checked it), the
        // chunk is mapped while `self.chunk` holds it, and no other region was given any
        // of these bytes, so nothing writes them while this shared borrow lives.
        unsafe { std::slice::from_raw_parts(self.chunk.base.add(self.offset), self.len) }
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes this the only borrow of the range.
        unsafe { std::slice::from_raw_parts_mut(self.chunk.base.add(self.offset), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::numa::{HUGE_PAGE, NumaBinder};

    fn chunk() -> Result<MappedRegion, PoolError> {
        let binder = NumaBinder::new(hwlocality::Topology::new().expect("hwloc reads this host"))?;
        Ok(binder.allocate("test", &[0], HUGE_PAGE)?.0)
    }

    #[test]
    fn a_chunk_is_unmapped_with_the_last_buffer_carved_from_it() {
        let mut chunks = Chunks::default();
        let a = chunks.carve("test", 100, chunk).expect("fits");
        let b = chunks.carve("test", 100, || panic!("the first chunk has room")).expect("fits");
        let weak = Arc::downgrade(&a.chunk);
        drop(chunks);
        drop(a);
        assert!(weak.upgrade().is_some(), "b still uses the chunk");
        drop(b);
        assert!(weak.upgrade().is_none(), "no buffer uses the chunk, yet it is alive");
    }

    #[test]
    fn more_than_a_fresh_chunk_holds_is_refused_not_carved() {
        let mut chunks = Chunks::default();
        let err = chunks.carve("test", HUGE_PAGE + 1, chunk).expect_err("larger than a chunk");
        assert!(matches!(err, PoolError::OutOfMemory { requested, .. } if requested == HUGE_PAGE as u64 + 1));
    }
}
