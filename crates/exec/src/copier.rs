//! The copy thread: runs background copies in the order they were submitted, each
//! followed by the wait an emulated pool charges for it.
//!
//! The emulated part of a copy is slept, not spun: it stands for time the device keeps
//! the copy waiting, and spinning would take a core from the kernels it overlaps, which
//! on a 2-core host halves them.

use crate::ExecError;
use placer_pools::{CopyJob, sleep_until};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub(crate) struct Copier {
    jobs: Option<Sender<(CopyJob, f64)>>,
    done: Receiver<u64>,
    finished: Vec<u64>,
    thread: Option<JoinHandle<()>>,
}

impl Copier {
    pub(crate) fn start() -> Result<Copier, ExecError> {
        let (jobs, inbox) = channel::<(CopyJob, f64)>();
        let (report, done) = channel();
        let thread = std::thread::Builder::new()
            .name("placer-copy".into())
            .spawn(move || {
                for (job, extra_ns) in inbox {
                    let start = Instant::now();
                    job.run();
                    sleep_until(start + Duration::from_nanos(extra_ns.max(0.0) as u64));
                    if report.send(job.id).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| stopped(&e.to_string()))?;
        Ok(Copier { jobs: Some(jobs), done, finished: Vec::new(), thread: Some(thread) })
    }

    /// Queues a copy.
    pub(crate) fn submit(&mut self, job: CopyJob, extra_ns: f64) -> Result<(), ExecError> {
        let jobs = self.jobs.as_ref().ok_or_else(|| stopped("closed"))?;
        jobs.send((job, extra_ns)).map_err(|_| stopped("the copy thread stopped"))
    }

    /// Blocks until job `id` has run.
    pub(crate) fn wait_for(&mut self, id: u64) -> Result<(), ExecError> {
        while !self.finished.contains(&id) {
            let done = self.done.recv().map_err(|_| stopped("the copy thread stopped"))?;
            self.finished.push(done);
        }
        self.finished.retain(|&f| f != id);
        Ok(())
    }
}

fn stopped(reason: &str) -> ExecError {
    ExecError::Copy { reason: reason.to_string() }
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
