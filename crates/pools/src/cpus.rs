//! Which cores a thread may run on: the thread that launches kernels pinned to its core,
//! and a copy thread kept off that core, so a copy never preempts the launcher between
//! kernels (why, and what it measured: `placer_exec::as_launcher`, docs/running.md).

use rustix::thread::{CpuSet, Pid, RawPid, sched_getaffinity, sched_getcpu, sched_setaffinity};

/// The calling thread pinned to the core it was on; its previous mask is restored when
/// this is dropped.
#[derive(Debug)]
pub struct Pinned {
    saved: CpuSet,
    cpu: usize,
}

impl Pinned {
    /// Pins the calling thread to the core it is running on, if the thread may run on
    /// another core as well (with one core there is nothing to keep a copy off). `None`
    /// when it may not, or when the kernel refuses the mask.
    pub fn here() -> Option<Pinned> {
        let saved = sched_getaffinity(None).ok()?;
        if saved.count() < 2 {
            return None;
        }
        let cpu = sched_getcpu();
        let mut only = CpuSet::new();
        only.set(cpu);
        sched_setaffinity(None, &only).ok()?;
        Some(Pinned { saved, cpu })
    }

    /// The core the thread is pinned to.
    pub fn cpu(&self) -> usize {
        self.cpu
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // The thread keeps running either way; a mask the kernel refuses now is one it
        // accepted before, so this cannot fail in practice, and there is no one to tell.
        let _ = sched_setaffinity(None, &self.saved);
    }
}

/// The cores a copy thread may run on as it started, so that it can keep off one of
/// them (the launcher's) and come back to all of them.
#[derive(Debug)]
pub struct CopyCores {
    allowed: CpuSet,
    off: Option<usize>,
}

impl CopyCores {
    /// The process's cores (its main thread's mask), every core when they cannot be read,
    /// made the calling thread's own. Not the calling thread's mask: a copy thread started
    /// by a launcher pinned to its core inherits that one core, and taking it as all the
    /// thread may use kept every copy *on* the launcher's core, since a thread's only core
    /// is never given up. The profile's interference calibration started its copy thread
    /// so, and timed copies that took the launcher's core where a plan's take the other.
    pub fn of_this_process() -> CopyCores {
        let main = Pid::from_raw(std::process::id() as RawPid);
        let allowed = main.and_then(|p| sched_getaffinity(Some(p)).ok()).unwrap_or_else(|| {
            let mut all = CpuSet::new();
            (0..CpuSet::MAX_CPU).for_each(|c| all.set(c));
            all
        });
        // A refused mask leaves the thread where it was, as `keep_off` does.
        let _ = sched_setaffinity(None, &allowed);
        CopyCores { allowed, off: None }
    }

    /// Keeps the calling thread off core `cpu`, or lets it run on all of its cores again
    /// when `None`. A core the thread may not use, or its only core, is not given up.
    pub fn keep_off(&mut self, cpu: Option<usize>) {
        if cpu == self.off {
            return;
        }
        let mut mask = self.allowed;
        if let Some(cpu) = cpu
            && cpu < CpuSet::MAX_CPU
            && mask.is_set(cpu)
            && mask.count() > 1
        {
            mask.unset(cpu);
        }
        // A refused mask leaves the thread where it was, which costs only the stall this
        // avoids; `off` stays as it was, so the next copy tries again.
        if sched_setaffinity(None, &mask).is_ok() {
            self.off = cpu;
        }
    }
}
