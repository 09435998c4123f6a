//! The thread that runs the step's ops pinned to its core, and apply's copy thread kept
//! off it: the arrangement placer's executor runs a plan in and its profile calibrates
//! copies in (`placer_exec::as_launcher`). Unpinned, a copy thread woken on the core of
//! the thread dispatching torch's ops takes that core for a scheduler slice, and the
//! step stalls between ops by what no kernel's time shows. apply uses it only when asked
//! (`pin=True`): on this project's VM the pinned step ran slower, its copies sharing a
//! core with an intra-op thread (docs/BENCHMARKS.md).

use placer_pools::{CopyCores, Pinned};
use pyo3::prelude::*;
use std::cell::RefCell;

/// The calling thread pinned to the core it is on, until `release()` (or until the
/// object is dropped). Not sendable: it belongs to the thread it pinned.
#[pyclass(unsendable)]
#[derive(Debug)]
pub struct Pin {
    pinned: Option<Pinned>,
}

#[pymethods]
impl Pin {
    /// The core the thread is pinned to, or None once released.
    #[getter]
    fn cpu(&self) -> Option<usize> {
        self.pinned.as_ref().map(Pinned::cpu)
    }

    /// Gives the thread back the mask it had.
    fn release(&mut self) {
        self.pinned = None;
    }
}

/// Pins the calling thread to its core; None where there is no other core to keep a
/// copy off, or the kernel refused the mask (the thread is then left as it was).
#[pyfunction]
pub fn pin_here() -> Option<Pin> {
    Pinned::here().map(|p| Pin { pinned: Some(p) })
}

thread_local! {
    /// The calling thread's cores as it first asked (`CopyCores::of_this_process`).
    static CORES: RefCell<Option<CopyCores>> = const { RefCell::new(None) };
}

/// Keeps the calling thread (a copy thread) off core `cpu`, or lets it use all of the
/// process's cores again with None. Cheap when nothing changes.
#[pyfunction]
pub fn keep_off(cpu: Option<usize>) {
    CORES.with(|c| c.borrow_mut().get_or_insert_with(CopyCores::of_this_process).keep_off(cpu));
}
