//! The copy thread: runs background copies in the order they were submitted, each
//! followed by the wait an emulated pool charges for it.
//!
//! The emulated part of a copy is slept, not spun: it stands for time the device keeps
//! the copy waiting, and spinning would take a core from the kernels it overlaps, which
//! on a 2-core host halves them. The last 50 µs are spun, since a sleep overshoots.

use crate::ExecError;
use placer_pools::{CopyJob, busy_wait_until};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const SPIN: Duration = Duration::from_micros(50);

#[derive(Debug)]
pub(crate) struct Copier {
    jobs: Option<Sender<(CopyJob, f64)>>,
    done: Receiver<u64>,
    finished: Vec<u64>,
    thread: Option<JoinHandle<()>>,
}

impl Copier {
    pub(crate) fn start() -> Copier {
        let (jobs, inbox) = channel::<(CopyJob, f64)>();
        let (report, done) = channel();
        let thread = std::thread::Builder::new()
            .name("placer-copy".into())
            .spawn(move || {
                for (job, extra_ns) in inbox {
                    let start = Instant::now();
                    job.run();
                    let deadline = start + Duration::from_nanos(extra_ns.max(0.0) as u64);
                    if let Some(sleep) = deadline.checked_duration_since(Instant::now() + SPIN) {
                        std::thread::sleep(sleep);
                    }
                    busy_wait_until(deadline);
                    if report.send(job.id).is_err() {
                        break;
                    }
                }
            })
            .ok();
        Copier { jobs: Some(jobs), done, finished: Vec::new(), thread }
    }

    /// Queues a copy; with no copy thread (the OS refused one) it runs here and now.
    pub(crate) fn submit(&mut self, job: CopyJob, extra_ns: f64) {
        if let (Some(jobs), Some(_)) = (&self.jobs, &self.thread) {
            if let Err(returned) = jobs.send((job, extra_ns)) {
                let (job, _) = returned.0;
                job.run();
                self.finished.push(job.id);
            }
        } else {
            job.run();
            placer_pools::busy_wait_ns(extra_ns);
            self.finished.push(job.id);
        }
    }

    /// Blocks until job `id` has run.
    pub(crate) fn wait_for(&mut self, id: u64) -> Result<(), ExecError> {
        while !self.finished.contains(&id) {
            let done = self.done.recv().map_err(|_| ExecError::Copy { reason: "the copy thread stopped".into() })?;
            self.finished.push(done);
        }
        self.finished.retain(|&f| f != id);
        Ok(())
    }
}

impl Drop for Copier {
    fn drop(&mut self) {
        // Closing the queue ends the thread after the jobs already queued, which still
        // point into the arenas: join it before they can be freed.
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
