//! Arenas: one buffer per pool, reserved once, in which a plan places every tensor at
//! an offset it chose ahead of time. Pages stay warm from one step to the next, and
//! what a pool holds is exactly what the plan said, so the peak is measured here rather
//! than trusted.
//!
//! The arena is also the referee of the plan: it refuses to place a range over a live
//! one, to lend a range that is not placed, to lend the same bytes mutably twice, and to
//! lend bytes that a background copy is reading or writing. Those checks are what make
//! the raw-pointer views below sound.
//!
//! Background copies run on the arenas' own copy thread, so the whole contract that
//! makes them sound lives in this module: a copy's raw pointers never leave it; its
//! slots are fenced from [`Arenas::start_copy`] until [`Arenas::finish_copy`], which
//! waits for the copy thread to report the copy done (finishing early cannot happen);
//! and dropping or releasing the arenas joins the copy thread before any buffer is
//! freed. A copy is named by a [`CopyTicket`] that cannot be cloned, so it is finished
//! once, and only by the arenas that started it.
//!
//! The emulated part of a copy is slept, not spun: it stands for time the device keeps
//! the copy waiting, and spinning would take a core from the kernels it overlaps, which
//! on a 2-core host halves them.

use crate::{Backend, Buffer, HUGE_PAGE, PoolError, PoolId, PoolSet, anon_huge_page_bytes, sleep_until};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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

/// The first byte of an arena's buffer, taken once when the arena is reserved. Every
/// view and copy is derived from it, so no reference to the whole buffer is made while
/// the copy thread writes part of it.
#[derive(Debug, Clone, Copy)]
struct Base(*mut u8);

// SAFETY: the pointer is into memory owned by the arena's `Buffer` (a heap vector, a
// mapping or a memkind allocation), which does not move when the arenas move to another
// thread; all access through it is governed by the checks in `Arenas`, wherever they run.
unsafe impl Send for Base {}

#[derive(Debug)]
struct Arena {
    /// Owns the bytes; not touched again between `reserve` and `free_buffers`.
    buffer: Buffer,
    base: Base,
    len: u64,
    /// Placed ranges: offset → reserved length.
    placed: BTreeMap<u64, u64>,
    in_use: u64,
    peak: u64,
    /// Bytes of it on huge pages once touched, where its backend asks for them.
    huge_bytes: Option<u64>,
}

/// A copy in flight on the copy thread: which job, and the two slots it touches.
#[derive(Debug, Clone, Copy)]
struct Busy {
    job: u64,
    from: Slot,
    to: Slot,
}

/// Bytes lent by [`Arenas::views`]: the read slots, then the written ones.
pub type Views<'a> = (Vec<&'a [u8]>, Vec<&'a mut [u8]>);

/// A copy started by [`Arenas::start_copy`], to be handed back to
/// [`Arenas::finish_copy`]. Its slots stay fenced until then.
///
/// ```
/// use placer_pools::{Arenas, Pool, PoolId, PoolKind, PoolSet, Slot};
/// let mut pools = PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 1 << 20)]);
/// let mut arenas = Arenas::reserve(&mut pools, &[8192]).expect("reserved");
/// let (from, to) = (Slot { pool: PoolId(0), offset: 0, len: 4096 }, Slot { pool: PoolId(0), offset: 4096, len: 4096 });
/// arenas.place(from).expect("placed");
/// arenas.place(to).expect("placed");
/// let ticket = arenas.start_copy(from, to, 0.0).expect("started");
/// arenas.finish_copy(ticket).expect("finished");
/// ```
///
/// A ticket cannot be copied, so a copy is finished once:
///
/// ```compile_fail,E0382
/// # use placer_pools::{Arenas, Pool, PoolId, PoolKind, PoolSet, Slot};
/// # let mut pools = PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 1 << 20)]);
/// # let mut arenas = Arenas::reserve(&mut pools, &[8192]).expect("reserved");
/// # let (from, to) = (Slot { pool: PoolId(0), offset: 0, len: 4096 }, Slot { pool: PoolId(0), offset: 4096, len: 4096 });
/// # arenas.place(from).expect("placed");
/// # arenas.place(to).expect("placed");
/// let ticket = arenas.start_copy(from, to, 0.0).expect("started");
/// arenas.finish_copy(ticket).expect("finished");
/// arenas.finish_copy(ticket).expect("finished twice");
/// ```
#[must_use = "a copy's slots stay fenced until it is finished"]
#[derive(Debug, PartialEq, Eq)]
pub struct CopyTicket {
    id: u64,
}

/// Copy ids are unique across all arenas, so a ticket from other arenas names no copy here.
static NEXT_COPY: AtomicU64 = AtomicU64::new(0);

/// One arena per pool (pools a plan does not use get an empty one), and the thread that
/// runs copies between them.
#[derive(Debug)]
pub struct Arenas {
    arenas: Vec<Arena>,
    busy: Vec<Busy>,
    copier: CopyThread,
    /// The core copies keep off (the launcher's; see [`crate::Pinned`]).
    copies_off: Option<usize>,
    /// Whether copies move their bytes ([`Arenas::set_copies_move_bytes`]).
    move_bytes: bool,
}

/// A copy on its way to the copy thread. Its pointers never leave this module.
#[derive(Debug)]
struct Job {
    id: u64,
    src: *const u8,
    dst: *mut u8,
    len: usize,
    /// What the emulated pools charge for the copy: the thread sleeps until this long
    /// after its memcpy began, so the memcpy's own time counts toward it (as
    /// placer_torch's copies beside the step do), where a blocking copy waits it after.
    extra_ns: f64,
    /// The core the copy thread keeps off while it runs this copy.
    keep_off: Option<usize>,
    /// False: no memcpy, only the emulated wait ([`Arenas::set_copies_move_bytes`]).
    move_bytes: bool,
}

// SAFETY: the pointers refer to arena memory that stays allocated (the arenas join the
// copy thread before freeing any buffer) and that no view touches, except to read the
// source, until the job is finished (see `Arenas::start_copy`); moving the job to the copy
// thread moves the only write access to those bytes with it.
unsafe impl Send for Job {}

/// The copy thread: runs copies in the order they were started.
#[derive(Debug)]
struct CopyThread {
    jobs: Option<Sender<Job>>,
    /// Each copy done: its id, its bytes and how long its memcpy took, ns.
    done: Receiver<(u64, u64, u64)>,
    /// Copies reported done that nobody has finished yet.
    finished: Vec<u64>,
    /// Bytes copied and the ns their memcpys took, over every copy reported done.
    memcpy: (u64, u64),
    thread: Option<JoinHandle<()>>,
}

impl CopyThread {
    fn start() -> Result<CopyThread, PoolError> {
        let (jobs, inbox) = channel::<Job>();
        let (report, done) = channel();
        let thread = std::thread::Builder::new()
            .name("placer-copy".into())
            .spawn(move || {
                let mut cores = crate::CopyCores::of_this_process();
                for job in inbox {
                    cores.keep_off(job.keep_off);
                    let start = Instant::now();
                    if job.move_bytes {
                        // SAFETY: `start_copy` checked that both slots lie inside their
                        // arenas, are placed, and do not overlap each other; until the job
                        // is finished no view may touch the destination or write the
                        // source, and the buffers outlive this thread (it is joined before
                        // they are freed).
                        unsafe { std::ptr::copy_nonoverlapping(job.src, job.dst, job.len) }
                    }
                    let memcpy_ns = start.elapsed().as_nanos() as u64;
                    sleep_until(start + Duration::from_nanos(job.extra_ns.max(0.0) as u64));
                    if report.send((job.id, job.len as u64, memcpy_ns)).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| stopped(&e.to_string()))?;
        Ok(CopyThread { jobs: Some(jobs), done, finished: Vec::new(), memcpy: (0, 0), thread: Some(thread) })
    }

    fn submit(&mut self, job: Job) -> Result<(), PoolError> {
        let jobs = self.jobs.as_ref().ok_or_else(|| stopped("closed"))?;
        jobs.send(job).map_err(|_| stopped("the copy thread stopped"))
    }

    /// Blocks until copy `id` has run.
    fn wait_for(&mut self, id: u64) -> Result<(), PoolError> {
        while !self.finished.contains(&id) {
            let (done, bytes, ns) = self.done.recv().map_err(|_| stopped("the copy thread stopped"))?;
            self.finished.push(done);
            self.memcpy = (self.memcpy.0 + bytes, self.memcpy.1 + ns);
        }
        self.finished.retain(|&f| f != id);
        Ok(())
    }

    /// Closes the queue and joins the thread, which first runs the copies already queued:
    /// afterwards nothing touches the arenas' memory.
    fn stop(&mut self) {
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            // A panicking copy thread has stopped touching memory all the same.
            let _ = thread.join();
        }
    }
}

impl Drop for CopyThread {
    fn drop(&mut self) {
        self.stop();
    }
}

fn stopped(reason: &str) -> PoolError {
    PoolError::Copy { reason: reason.to_string() }
}

impl Drop for Arenas {
    fn drop(&mut self) {
        // The copies in flight point into the buffers: let them run before the buffers,
        // dropped after this, are freed.
        self.copier.stop();
    }
}

impl Arenas {
    /// Reserves `bytes[p]` in every pool `p` (nothing for 0), zeroed and touched once,
    /// and starts the copy thread.
    pub fn reserve(pools: &mut PoolSet, bytes: &[u64]) -> Result<Arenas, PoolError> {
        let mut arenas = Vec::with_capacity(bytes.len());
        for (i, &len) in bytes.iter().enumerate() {
            // A NUMA pool's buffers ask for huge pages (alloc/numa.rs); whether the host
            // had them free shows in what the process holds before and after the touch.
            let asks = pools.pools().get(i).is_some_and(|p| matches!(p.backend, Backend::Numa { .. }))
                && len >= HUGE_PAGE as u64;
            let before = if asks { anon_huge_page_bytes() } else { None };
            let buffer = match pools.allocate(PoolId(i as u16), len) {
                Ok(buffer) => buffer,
                Err(e) => {
                    free_buffers(arenas, pools);
                    return Err(e);
                }
            };
            let mut arena = Arena::new(buffer);
            arena.huge_bytes = before.and_then(|b| Some(anon_huge_page_bytes()?.saturating_sub(b).min(arena.len)));
            arenas.push(arena);
        }
        let copier = match CopyThread::start() {
            Ok(copier) => copier,
            Err(e) => {
                free_buffers(arenas, pools);
                return Err(e);
            }
        };
        Ok(Arenas { arenas, busy: Vec::new(), copier, copies_off: None, move_bytes: true })
    }

    /// Bytes reserved in each pool.
    pub fn reserved(&self) -> Vec<u64> {
        self.arenas.iter().map(|a| a.len).collect()
    }

    /// Per pool, the bytes of its arena on huge pages when it was reserved and touched:
    /// `None` where not measured (a backend that does not ask for huge pages, an arena
    /// under one huge page, a kernel that does not say). [`crate::whole_huge_pages`] is what
    /// the host can always back; the tail past it may get a huge page of the mapping's
    /// slack too, so "in full" is at least that much.
    pub fn huge_page_bytes(&self) -> Vec<Option<u64>> {
        self.arenas.iter().map(|a| a.huge_bytes).collect()
    }

    /// The copy thread's memcpy time per byte over every copy finished so far, ns (the
    /// emulated pools' sleep excluded): what a background copy took of a core beside the
    /// kernels it overlapped. `None` before the first.
    pub fn memcpy_ns_per_byte(&self) -> Option<f64> {
        let (bytes, ns) = self.copier.memcpy;
        (bytes > 0).then(|| ns as f64 / bytes as f64)
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

    /// Gives the arenas' buffers back to their pools, once the copies in flight have run.
    pub fn release_all(mut self, pools: &mut PoolSet) {
        self.copier.stop();
        free_buffers(std::mem::take(&mut self.arenas), pools);
    }

    fn arena(&self, pool: PoolId) -> Result<&Arena, PoolError> {
        self.arenas.get(pool.index()).ok_or_else(|| refused(pool, format!("no arena for pool {}", pool.0)))
    }

    /// Reserves `slot` for a tensor (or scratch); refuses a range outside the arena or
    /// over a placed one.
    pub fn place(&mut self, slot: Slot) -> Result<(), PoolError> {
        let arena = self.arenas.get_mut(slot.pool.index()).ok_or_else(|| refused(slot.pool, "no arena".into()))?;
        if slot.end() > arena.len {
            return Err(refused(
                slot.pool,
                format!("{} bytes at {} run past the arena's {} bytes", slot.len, slot.offset, arena.len),
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
        // The whole placed range is freed, whatever length the caller names.
        let placed = self.arenas.get(slot.pool.index()).and_then(|a| a.placed.get(&slot.offset)).copied();
        let freed = Slot { len: placed.unwrap_or(0).max(slot.len), ..slot };
        if self.busy.iter().any(|b| b.from.overlaps(&freed) || b.to.overlaps(&freed)) {
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
        let ptr = |s: &Slot| self.slot_ptr(*s);
        // SAFETY: every slot is inside a live buffer owned by `self`, which is borrowed
        // mutably for the lifetime of the views; written slots overlap nothing else lent
        // here nor anything a copy in flight touches, and read slots are only read (by
        // the views and by copies reading them as sources).
        let read_views = reads.iter().map(|s| unsafe { std::slice::from_raw_parts(ptr(s), s.len as usize) }).collect();
        // SAFETY: as above; mutable slots are pairwise disjoint.
        let write_views =
            writes.iter().map(|s| unsafe { std::slice::from_raw_parts_mut(ptr(s), s.len as usize) }).collect();
        Ok((read_views, write_views))
    }

    /// A pointer to the first byte of `slot`, which must have been checked to lie
    /// inside its arena (`check_placed`).
    fn slot_ptr(&self, slot: Slot) -> *mut u8 {
        // SAFETY: the slot lies inside its arena's buffer, so the offset stays within the
        // allocation `base` points to.
        unsafe { self.arenas[slot.pool.index()].base.0.add(slot.offset as usize) }
    }

    /// Starts a copy of `from` into `to` on the copy thread, which then sleeps
    /// `extra_ns` (what emulated pools charge for it). Both slots must be placed, of
    /// equal length, disjoint, and not in another copy. Until the ticket is given to
    /// [`Self::finish_copy`] no view may write `from` or touch `to`, and neither may be
    /// released.
    pub fn start_copy(&mut self, from: Slot, to: Slot, extra_ns: f64) -> Result<CopyTicket, PoolError> {
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
        let id = NEXT_COPY.fetch_add(1, Ordering::Relaxed);
        let job = Job {
            id,
            src: self.slot_ptr(from).cast_const(),
            dst: self.slot_ptr(to),
            len: from.len as usize,
            extra_ns,
            keep_off: self.copies_off,
            move_bytes: self.move_bytes,
        };
        self.copier.submit(job)?;
        self.busy.push(Busy { job: id, from, to });
        Ok(CopyTicket { id })
    }

    /// Waits for the copy to have run, then lets its slots be lent and released again.
    /// Refused for a ticket these arenas did not issue.
    pub fn finish_copy(&mut self, ticket: CopyTicket) -> Result<(), PoolError> {
        if !self.busy.iter().any(|b| b.job == ticket.id) {
            return Err(PoolError::Copy { reason: format!("copy {} was not started by these arenas", ticket.id) });
        }
        self.copier.wait_for(ticket.id)?;
        self.busy.retain(|b| b.job != ticket.id);
        Ok(())
    }

    /// Keeps the copies started from now on off core `cpu` (the core of the thread that
    /// launches kernels, pinned there: see [`crate::Pinned`]), or lets them run on any
    /// core when `None`.
    pub fn keep_copies_off(&mut self, cpu: Option<usize>) {
        self.copies_off = cpu;
    }

    /// With `false`, the copies started from now on take their emulated wait but move no
    /// bytes, so their destinations keep stale contents: only for measuring what the
    /// memcpys cost the kernels beside them (a plan beside the same plan without them).
    pub fn set_copies_move_bytes(&mut self, on: bool) {
        self.move_bytes = on;
    }

    /// Copies in flight.
    pub fn copies_in_flight(&self) -> usize {
        self.busy.len()
    }
}

impl Arena {
    fn new(mut buffer: Buffer) -> Arena {
        // Touch every page now, so no step pays for first-touch faults.
        let bytes = buffer.bytes_mut();
        for page in bytes.chunks_mut(4096) {
            page[0] = 0;
        }
        let (base, len) = (Base(bytes.as_mut_ptr()), bytes.len() as u64);
        Arena { buffer, base, len, placed: BTreeMap::new(), in_use: 0, peak: 0, huge_bytes: None }
    }
}

fn free_buffers(arenas: Vec<Arena>, pools: &mut PoolSet) {
    for a in arenas {
        pools.free(a.buffer);
    }
}

fn refused(pool: PoolId, reason: String) -> PoolError {
    PoolError::Arena { pool: pool.0, reason }
}

#[cfg(test)]
mod tests;
