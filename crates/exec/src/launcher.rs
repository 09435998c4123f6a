//! The thread that launches kernels while background copies run.
//!
//! A plan's step is driven by one thread: it hands copies to the copy thread and runs
//! every kernel with the pool's other threads. Unpinned, a copy thread woken by it was
//! often placed on its core and kept that core for a scheduler slice: the launcher
//! stalled between kernels for milliseconds that no kernel's timing showed and no model
//! charged (docs/BENCHMARKS.md, "The copy thread's stall"). Pinned, with the copy thread
//! kept off its core, the launcher is never the thread a copy displaces; the copy shares
//! a core with another worker of the kernel, which is what the profile's interference
//! calibration measures, in the same arrangement.

use placer_pools::Pinned;

/// Runs `f` on a worker of the pool, pinned to its core for the call, and gives it that
/// core (`None` when there is no other core to keep copies on, or the thread could not
/// be pinned). Kernels `f` runs are launched from this thread; copies it starts should
/// keep off the core (`placer_pools::Arenas::keep_copies_off`,
/// `placer_pools::CopyCores::keep_off`).
pub fn as_launcher<R: Send>(f: impl FnOnce(Option<usize>) -> R + Send) -> R {
    rayon::scope(|_| {
        let pinned = Pinned::here();
        f(pinned.as_ref().map(Pinned::cpu))
    })
}
