//! Arenas: one buffer per pool, reserved once, in which a plan places every tensor at
//! an offset it chose ahead of time. Pages stay warm from one step to the next, and
//! what a pool holds is exactly what the plan said, so the peak is measured here rather
//! than trusted.
//!
//! The arena is also the referee of the plan: it refuses to place a range over a live
//! one, to lend a range that is not placed, to lend the same bytes mutably twice, and to
//! lend bytes that a background copy is reading or writing. Those checks are what make
//! the raw-pointer views below sound.

use crate::{Buffer, PoolError, PoolId, PoolSet};
use std::collections::BTreeMap;

/// Bytes of one arena: `len` bytes at `offset` in pool `pool`'s arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub pool: PoolId,
    pub offset: u64,
    pub len: u64,
}

impl Slot {
    fn end(&self) -> u64 {
        self.offset + self.len
    }

    fn overlaps(&self, other: &Slot) -> bool {
        self.pool == other.pool && self.offset < other.end() && other.offset < self.end()
    }
}

#[derive(Debug)]
struct Arena {
    buffer: Buffer,
    /// Placed ranges: offset → reserved length.
    placed: BTreeMap<u64, u64>,
    in_use: u64,
    peak: u64,
}

/// A copy in flight on another thread: which job, and the two slots it touches.
#[derive(Debug, Clone, Copy)]
struct Busy {
    job: u64,
    from: Slot,
    to: Slot,
}

/// Bytes lent by [`Arenas::views`]: the read slots, then the written ones.
pub type Views<'a> = (Vec<&'a [u8]>, Vec<&'a mut [u8]>);

/// One arena per pool (pools a plan does not use get an empty one).
#[derive(Debug)]
pub struct Arenas {
    arenas: Vec<Arena>,
    busy: Vec<Busy>,
}

/// A copy handed to another thread. It holds raw pointers into the arenas: the arenas
/// keep both slots out of every view until [`Arenas::finish_copy`] is called, and the
/// owner must not drop the arenas while a job runs.
#[derive(Debug)]
pub struct CopyJob {
    pub id: u64,
    src: *const u8,
    dst: *mut u8,
    len: usize,
}

// SAFETY: the pointers refer to arena memory that stays allocated and untouched by any
// other view until the job is finished (see `Arenas::start_copy`); moving the job to
// the copy thread moves the only access to those bytes with it.
unsafe impl Send for CopyJob {}

impl CopyJob {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the bytes.
    pub fn run(&self) {
        // SAFETY: `start_copy` checked that both slots lie inside their arenas, are
        // placed, and do not overlap each other; while the job is busy no view may
        // touch the destination or write the source, so nothing else aliases them.
        unsafe { std::ptr::copy_nonoverlapping(self.src, self.dst, self.len) }
    }
}

impl Arenas {
    /// Reserves `bytes[p]` in every pool `p` (nothing for 0), zeroed and touched once.
    pub fn reserve(pools: &mut PoolSet, bytes: &[u64]) -> Result<Arenas, PoolError> {
        let mut arenas = Vec::with_capacity(bytes.len());
        for (i, &len) in bytes.iter().enumerate() {
            let mut buffer = pools.allocate(PoolId(i as u16), len)?;
            // Touch every page now, so no step pays for first-touch faults.
            for page in buffer.bytes_mut().chunks_mut(4096) {
                page[0] = 0;
            }
            arenas.push(Arena { buffer, placed: BTreeMap::new(), in_use: 0, peak: 0 });
        }
        Ok(Arenas { arenas, busy: Vec::new() })
    }

    /// Bytes reserved in each pool.
    pub fn reserved(&self) -> Vec<u64> {
        self.arenas.iter().map(|a| a.buffer.len_bytes() as u64).collect()
    }

    /// The most bytes placed at once in each pool since the arenas were reserved.
    pub fn peaks(&self) -> Vec<u64> {
        self.arenas.iter().map(|a| a.peak).collect()
    }

    pub fn in_use(&self) -> Vec<u64> {
        self.arenas.iter().map(|a| a.in_use).collect()
    }

    /// Bytes placed in one pool now.
    pub fn in_use_of(&self, pool: PoolId) -> u64 {
        self.arenas.get(pool.index()).map_or(0, |a| a.in_use)
    }

    /// Gives the arenas' buffers back to their pools.
    pub fn release_all(self, pools: &mut PoolSet) {
        for a in self.arenas {
            pools.free(a.buffer);
        }
    }

    fn arena(&self, pool: PoolId) -> Result<&Arena, PoolError> {
        self.arenas.get(pool.index()).ok_or_else(|| refused(pool, format!("no arena for pool {}", pool.0)))
    }

    /// Reserves `slot` for a tensor (or scratch); refuses a range outside the arena or
    /// over a placed one.
    pub fn place(&mut self, slot: Slot) -> Result<(), PoolError> {
        let arena = self.arenas.get_mut(slot.pool.index()).ok_or_else(|| refused(slot.pool, "no arena".into()))?;
        if slot.end() > arena.buffer.len_bytes() as u64 {
            return Err(refused(
                slot.pool,
                format!(
                    "{} bytes at {} run past the arena's {} bytes",
                    slot.len,
                    slot.offset,
                    arena.buffer.len_bytes()
                ),
            ));
        }
        let before = arena.placed.range(..slot.end()).next_back();
        if let Some((&at, &len)) = before
            && at + len > slot.offset
        {
            return Err(refused(
                slot.pool,
                format!("{} bytes at {} overlap the {len} bytes placed at {at}", slot.len, slot.offset),
            ));
        }
        arena.placed.insert(slot.offset, slot.len);
        arena.in_use += slot.len;
        arena.peak = arena.peak.max(arena.in_use);
        Ok(())
    }

    /// Frees the range placed at `slot.offset`.
    pub fn release(&mut self, slot: Slot) -> Result<(), PoolError> {
        if self.busy.iter().any(|b| b.from.overlaps(&slot) || b.to.overlaps(&slot)) {
            return Err(refused(slot.pool, format!("bytes at {} are freed while a copy uses them", slot.offset)));
        }
        let arena = self.arenas.get_mut(slot.pool.index()).ok_or_else(|| refused(slot.pool, "no arena".into()))?;
        let len = arena
            .placed
            .remove(&slot.offset)
            .ok_or_else(|| refused(slot.pool, format!("nothing is placed at {}", slot.offset)))?;
        arena.in_use -= len;
        Ok(())
    }

    /// Checks that `slot` lies inside one placed range.
    fn check_placed(&self, slot: Slot) -> Result<(), PoolError> {
        let arena = self.arena(slot.pool)?;
        match arena.placed.range(..=slot.offset).next_back() {
            Some((&at, &len)) if slot.end() <= at + len => Ok(()),
            _ => Err(refused(slot.pool, format!("{} bytes at {} are not placed", slot.len, slot.offset))),
        }
    }

    /// Lends the bytes of `reads` immutably and of `writes` mutably, all at once.
    /// Refused when a slot is not placed, when a written slot overlaps any other slot,
    /// or when a copy in flight writes a slot or reads a written one.
    pub fn views(&mut self, reads: &[Slot], writes: &[Slot]) -> Result<Views<'_>, PoolError> {
        for &s in reads.iter().chain(writes) {
            self.check_placed(s)?;
            if self.busy.iter().any(|b| b.to.overlaps(&s)) {
                return Err(refused(s.pool, format!("bytes at {} are being copied into", s.offset)));
            }
        }
        for (i, w) in writes.iter().enumerate() {
            let clash = reads.iter().chain(&writes[i + 1..]).any(|o| o.overlaps(w))
                || self.busy.iter().any(|b| b.from.overlaps(w));
            if clash {
                return Err(refused(w.pool, format!("bytes at {} would be lent twice", w.offset)));
            }
        }
        let base: Vec<*mut u8> = self.arenas.iter_mut().map(|a| a.buffer.bytes_mut().as_mut_ptr()).collect();
        let ptr = |s: &Slot| {
            // SAFETY: `check_placed` showed the slot lies inside its arena's buffer, so
            // the offset stays within the same allocation.
            unsafe { base[s.pool.index()].add(s.offset as usize) }
        };
        // SAFETY: every slot is inside a live buffer borrowed mutably through `self`
        // for the lifetime of the views; written slots overlap nothing else lent here
        // nor anything a copy job touches, and read slots are only read (by the views
        // and by copy jobs reading them as sources).
        let read_views = reads.iter().map(|s| unsafe { std::slice::from_raw_parts(ptr(s), s.len as usize) }).collect();
        // SAFETY: as above; mutable slots are pairwise disjoint.
        let write_views =
            writes.iter().map(|s| unsafe { std::slice::from_raw_parts_mut(ptr(s), s.len as usize) }).collect();
        Ok((read_views, write_views))
    }

    /// Hands out a copy of `from` into `to` for another thread; both slots must be
    /// placed, of equal length, and not already in a copy. Until [`Self::finish_copy`]
    /// no view may write `from` or touch `to`, and neither may be released.
    pub fn start_copy(&mut self, id: u64, from: Slot, to: Slot) -> Result<CopyJob, PoolError> {
        self.check_placed(from)?;
        self.check_placed(to)?;
        if from.len != to.len || from.overlaps(&to) {
            return Err(refused(
                to.pool,
                format!("a copy of {} bytes into {} bytes at {}", from.len, to.len, to.offset),
            ));
        }
        if self.busy.iter().any(|b| b.to.overlaps(&from) || b.to.overlaps(&to) || b.from.overlaps(&to)) {
            return Err(refused(to.pool, format!("bytes at {} are already in a copy", to.offset)));
        }
        let src = self.arenas[from.pool.index()].buffer.bytes_mut().as_mut_ptr();
        let dst = self.arenas[to.pool.index()].buffer.bytes_mut().as_mut_ptr();
        self.busy.push(Busy { job: id, from, to });
        // SAFETY: both slots were checked to lie inside their buffers.
        let (src, dst) = unsafe { (src.add(from.offset as usize).cast_const(), dst.add(to.offset as usize)) };
        Ok(CopyJob { id, src, dst, len: from.len as usize })
    }

    /// The job has run: its slots may be lent and released again.
    pub fn finish_copy(&mut self, id: u64) {
        self.busy.retain(|b| b.job != id);
    }

    /// Copies in flight.
    pub fn copies_in_flight(&self) -> usize {
        self.busy.len()
    }
}

fn refused(pool: PoolId, reason: String) -> PoolError {
    PoolError::Arena { pool: pool.0, reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Pool, PoolKind};

    fn arenas(sizes: &[u64]) -> (PoolSet, Arenas) {
        let mut pools =
            PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 1 << 30), Pool::new("slow", PoolKind::Dram, 1 << 30)]);
        let arenas = Arenas::reserve(&mut pools, sizes).expect("arena");
        (pools, arenas)
    }

    fn slot(pool: u16, offset: u64, len: u64) -> Slot {
        Slot { pool: PoolId(pool), offset, len }
    }

    #[test]
    fn placing_over_a_live_range_is_refused_and_peaks_are_measured() {
        let (mut pools, mut a) = arenas(&[8192, 4096]);
        a.place(slot(0, 0, 4096)).expect("arena");
        assert!(a.place(slot(0, 2048, 4096)).is_err());
        assert!(a.place(slot(0, 4096, 8192)).is_err(), "past the end");
        a.place(slot(0, 4096, 4096)).expect("arena");
        a.release(slot(0, 0, 4096)).expect("arena");
        assert!(a.release(slot(0, 0, 4096)).is_err(), "nothing placed there any more");
        a.place(slot(0, 0, 1024)).expect("arena");
        assert_eq!(a.in_use(), vec![5120, 0]);
        assert_eq!(a.peaks(), vec![8192, 0]);
        assert_eq!(pools.pool(PoolId(0)).in_use(), 8192);
        a.release_all(&mut pools);
        assert_eq!(pools.pool(PoolId(0)).in_use(), 0);
    }

    #[test]
    fn views_refuse_aliasing_and_unplaced_bytes() {
        let (_pools, mut a) = arenas(&[8192, 4096]);
        a.place(slot(0, 0, 4096)).expect("arena");
        a.place(slot(1, 0, 4096)).expect("arena");
        assert!(a.views(&[slot(0, 0, 64)], &[slot(0, 32, 64)]).is_err());
        assert!(a.views(&[], &[slot(0, 0, 64), slot(0, 0, 64)]).is_err());
        assert!(a.views(&[slot(0, 4096, 64)], &[]).is_err(), "not placed");
        let (r, w) = a.views(&[slot(0, 0, 64), slot(0, 0, 64)], &[slot(1, 0, 128)]).expect("arena");
        assert_eq!((r.len(), w.len(), w[0].len()), (2, 1, 128));
    }

    #[test]
    fn a_copy_in_flight_fences_its_slots() {
        let (_pools, mut a) = arenas(&[8192, 4096]);
        a.place(slot(0, 0, 4096)).expect("arena");
        a.place(slot(1, 0, 4096)).expect("arena");
        a.views(&[], &[slot(0, 0, 4096)]).expect("arena").1[0].fill(7);
        let job = a.start_copy(1, slot(0, 0, 4096), slot(1, 0, 4096)).expect("arena");
        assert!(a.views(&[slot(1, 0, 8)], &[]).is_err(), "destination is being written");
        assert!(a.views(&[], &[slot(0, 0, 8)]).is_err(), "source is being read");
        assert!(a.views(&[slot(0, 0, 8)], &[]).is_ok(), "reading the source is fine");
        assert!(a.release(slot(1, 0, 4096)).is_err());
        let job = std::thread::spawn(move || {
            job.run();
            job.id
        })
        .join()
        .expect("arena");
        a.finish_copy(job);
        assert!(a.views(&[slot(1, 0, 4096)], &[]).expect("arena").0[0].iter().all(|&b| b == 7));
        a.release(slot(1, 0, 4096)).expect("arena");
    }
}
