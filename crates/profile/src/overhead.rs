//! What a step costs beyond the sum of its kernels' median times, measured once per
//! profile on the executor plans run on.
//!
//! A plan's predicted step adds up per-kernel times, and the profile gives each
//! kernel's median. A step measured as `placer run` runs it takes longer than that sum,
//! by three things no profiled kernel time holds:
//!
//! - **the time between kernels**: the executor's own work around each kernel (lending
//!   its operands from the arena, placing and freeing tensors, looking up emulated
//!   waits), 2.6-4 µs per kernel on this project's 2-core VM;
//! - **a sum of medians is not the median of a sum**: kernel times skew right, so each
//!   kernel's median sits below its mean, and a step of many kernels lands near the sum
//!   of their means. Over BERT-tiny b8's 190 kernels the sum of medians fell 4-5% short
//!   of the steps' median kernel total; the sum of means came within 1.6% of it.
//!
//! - **waking the pool's threads**: the profile wakes every thread of the kernels' pool
//!   before each kernel, outside its timing, so that a kernel's time does not depend on
//!   what ran before it. A run does not, and a parallel kernel after a serial stretch
//!   waits for its threads inside its own time: 3-4.5% of BERT-tiny b32's kernel time,
//!   1% of LeNet's.
//!
//! All three are measured here together, as one figure per step: whole steps of the
//! base placement (where the profile's pinned tensors are, all else in DRAM) in a plan
//! executor laid out as a plan's arena is, alternating steps as `placer run` runs them
//! (threads not woken) with steps as the profile times kernels (threads woken before
//! each). The figure is the run-like steps' median wall time less the sum of each
//! kernel's median time in the woken steps. The solver adds it to every plan's
//! predicted step, the wake-up only where enough steps of each kind were timed to tell
//! it from the host's drift ([`crate::WAKE_UP_MIN_STEPS`]). It does not depend on where
//! tensors are, so it changes no plan, only how long each is predicted to take. The
//! parts are kept apart for the record.
//!
//! Another framework's whole steps are timed a third way too, with a copy thread
//! memcpying beside them ([`CopiesBesideSteps`]): what the framework's own step loses per
//! byte a background copy moves, in the arrangement its plans run in (no thread pinned;
//! the framework's threads, dispatch and interpreter between the kernels). The
//! interference calibration times kernels one at a time, pinned as placer's executor runs
//! them; for a framework's plans the solver sets its per-op shares aside and charges
//! every kernel the one share this figure gives.

use crate::ProfileError;
use crate::record::{CopiesBesideSteps, StepOverhead};
use placer_exec::{ExecPlan, PlanExecutor, PoolAssignment, SharedRunner, Stats};
use placer_ir::Model;
use placer_pools::{CopyCores, PoolSet};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

/// Untimed steps first: the arena's pages faulted in, caches in a step's state.
const WARMUP: usize = 2;
/// Timed steps of each kind: as many as take [`TARGET_NS`], within these bounds. The medians'
/// shortfall is a difference of two sums of medians, and settles only with tens of
/// steps (BERT-tiny b32 read 1.2 and 2.5 ms in two profiles with 9). At least as many
/// as the wake-up needs to be added, so that every step under [`LONG_STEP_NS`] has it.
const MIN_STEPS: usize = crate::WAKE_UP_MIN_STEPS as usize;
const MAX_STEPS: usize = 41;
const TARGET_NS: f64 = 3e9;
/// Steps of at least this long take [`MIN_LONG_STEPS`] of each kind: each holds
/// thousands of kernels (ResNet-200 b32: 2,166 in about 20 s), whose medians' skew
/// averages out within a step, and nine of each would cost a profile six minutes.
const LONG_STEP_NS: f64 = 5e9;
const MIN_LONG_STEPS: usize = 3;
/// The same where the steps are also timed beside a copy thread: the loss is the
/// difference of two medians, each ±2-5% of a step on this project's VM, against a loss
/// of 5-20% of it.
const MIN_LONG_STEPS_BESIDE_COPIES: usize = 5;

/// The paced copy thread's share of time spent copying: a plan that moves its tensors
/// in the background copies for about a tenth of its step (ResNet-50 b32 at a quarter of
/// its peak in DRAM: 3.5 GB a 4.4 s step, about 0.5 s of memcpy).
const DUTY: f64 = 0.125;
/// One memcpy of the paced thread: a few ms, as a plan's larger copies take.
const CHUNK: usize = 16 << 20;
/// Each of the paced thread's two buffers: twice the largest last-level cache this project
/// has met, so that its copies stream from and to memory, as a plan's do.
const STREAM_BUFFER: usize = 512 << 20;

/// Times whole steps of `model` in placement `base` on `pools`, as `placer run` runs a
/// plan, and returns what they cost beyond their kernels' medians. With `copies` and
/// another framework's kernels, its whole steps are also timed beside a paced copy
/// thread ([`CopiesBesideSteps`]).
///
/// With another framework's kernels (`runner`), the steps' wall time is the framework's
/// own training step ([`KernelRunner::whole_step`]), and the kernels' medians are its
/// kernels' times in executor steps of the same placement, alternating with it: the
/// figure is then what the framework spends beyond its kernels (its dispatch, autograd,
/// allocator and interpreter). `None` when the runner has no whole step to time.
///
/// [`KernelRunner::whole_step`]: placer_exec::KernelRunner::whole_step
pub fn measure(
    model: &Model,
    pools: &PoolSet,
    base: &PoolAssignment,
    seed: u64,
    runner: Option<&SharedRunner>,
    copies: bool,
) -> Result<Option<StepOverhead>, ProfileError> {
    let started = Instant::now();
    let plan = ExecPlan::resident(model, base, pools.pools().len());
    let mut exec = PlanExecutor::new(model, pools.clone(), plan, seed)?;
    exec.set_runner(runner.cloned());
    let whole = |r: &SharedRunner| -> Result<Option<f64>, ProfileError> {
        let mut r = r.lock().map_err(|_| ProfileError::WholeStep { reason: "the kernel runner panicked".into() })?;
        r.whole_step().map_err(|reason| ProfileError::WholeStep { reason })
    };
    let mut first_ns = 0.0;
    for _ in 0..WARMUP {
        first_ns = exec.step()?.wall_ns;
        if let Some(r) = runner {
            match whole(r)? {
                Some(ns) => first_ns += ns,
                None => return Ok(None),
            }
        }
    }
    let mut stream = match runner {
        Some(_) if copies => Some(PacedCopies::new()),
        _ => None,
    };
    let least = match (first_ns >= LONG_STEP_NS, stream.is_some()) {
        (true, false) => MIN_LONG_STEPS,
        // The copies' loss is a difference of two medians, each of a few steps.
        (true, true) => MIN_LONG_STEPS_BESIDE_COPIES,
        (false, _) => MIN_STEPS,
    };
    let steps = ((TARGET_NS / first_ns.max(1.0)) as usize).clamp(least, MAX_STEPS);
    let kernels = model.schedule().len();
    let mut per_kernel: Vec<Vec<f64>> = vec![Vec::with_capacity(steps); kernels];
    let mut woken: Vec<Vec<f64>> = vec![Vec::with_capacity(steps); kernels];
    let (mut walls, mut sums) = (Vec::with_capacity(steps), Vec::with_capacity(steps));
    let (mut beside, mut copied, mut memcpy) = (Vec::new(), Vec::new(), Vec::new());
    let record = |to: &mut Vec<Vec<f64>>, times: &[f64]| {
        for (k, &ns) in to.iter_mut().zip(times) {
            k.push(ns);
        }
    };
    // Alternating, so drift in the host's speed falls on both kinds alike.
    for i in 0..steps {
        exec.set_warm_pool(false);
        let times = exec.step()?;
        record(&mut per_kernel, &times.kernel_ns);
        sums.push(times.kernel_ns.iter().sum::<f64>());
        match runner {
            // The runner's kernels do not wait for placer's pool threads: woken or not
            // is the same step.
            Some(r) => {
                record(&mut woken, &times.kernel_ns);
                let reason = || ProfileError::WholeStep { reason: "the runner stopped timing whole steps".into() };
                // With and without the copies in turn first (ABBA), as the host drifts.
                let mut plain = || -> Result<(), ProfileError> {
                    walls.push(whole(r)?.ok_or_else(reason)?);
                    Ok(())
                };
                match stream.as_mut() {
                    Some(stream) => {
                        let mut paced = || -> Result<(), ProfileError> {
                            stream.start()?;
                            let ns = whole(r);
                            let (bytes, copy_ns) = stream.stop()?;
                            beside.push(ns?.ok_or_else(reason)?);
                            copied.push(bytes as f64);
                            memcpy.push(copy_ns / (bytes as f64).max(1.0));
                            Ok(())
                        };
                        if i % 2 == 0 {
                            plain()?;
                            paced()?;
                        } else {
                            paced()?;
                            plain()?;
                        }
                    }
                    None => plain()?,
                }
            }
            None => {
                walls.push(times.wall_ns);
                exec.set_warm_pool(true);
                record(&mut woken, &exec.step()?.kernel_ns);
            }
        }
    }
    let median = |v: &[f64]| Stats::of(v).map_or(0.0, |s| s.median);
    Ok(Some(StepOverhead {
        steps: steps as u32,
        kernels: kernels as u32,
        wall_ns: median(&walls),
        kernel_sums_ns: median(&sums),
        kernel_medians_ns: per_kernel.iter().map(|k| median(k)).sum(),
        woken_kernel_medians_ns: woken.iter().map(|k| median(k)).sum(),
        seconds: started.elapsed().as_secs_f64(),
        copies: stream.map(|_| CopiesBesideSteps {
            steps: beside.len() as u32,
            wall_ns: median(&beside),
            bytes: median(&copied),
            memcpy_ns_per_byte: median(&memcpy),
            duty: DUTY,
        }),
    }))
}

/// A copy thread that memcpys [`CHUNK`]s between two buffers of its own for [`DUTY`] of
/// its time, sleeping the rest, from [`PacedCopies::start`] to [`PacedCopies::stop`].
/// It runs on any core of the process, as a framework's plan copies (`placer_torch`'s
/// copy thread is not pinned). The buffers live between runs.
struct PacedCopies {
    buffers: Option<(Vec<u8>, Vec<u8>)>,
    running: Option<(Arc<AtomicBool>, JoinHandle<Copied>)>,
}

impl PacedCopies {
    fn new() -> PacedCopies {
        PacedCopies { buffers: None, running: None }
    }

    /// Starts the thread; the first start allocates and faults in the buffers, untimed by
    /// the caller's step.
    fn start(&mut self) -> Result<(), ProfileError> {
        // Both filled, so every page is faulted in before any step is timed: a zeroed
        // vector's pages fault on the first copy into them, and beside torch's ResNet-50
        // step those faults held the copies to 0.3 GB/s.
        let (src, mut dst) =
            self.buffers.take().unwrap_or_else(|| (vec![1u8; STREAM_BUFFER], vec![2u8; STREAM_BUFFER]));
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("placer-paced-copies".into())
            .spawn(move || {
                // Onto every core the process may use (a thread starts on its parent's).
                CopyCores::of_this_process();
                let (mut at, mut bytes, mut copy_ns) = (0, 0u64, 0.0);
                while !stopped.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let n = CHUNK.min(src.len() - at);
                    dst[at..at + n].copy_from_slice(&src[at..at + n]);
                    black_box(&mut dst[at..at + n]);
                    at = (at + n) % src.len();
                    bytes += n as u64;
                    let took = t.elapsed();
                    copy_ns += took.as_nanos() as f64;
                    std::thread::sleep(took.mul_f64(1.0 / DUTY - 1.0));
                }
                Copied { bytes, copy_ns, buffers: (src, dst) }
            })
            .map_err(|e| ProfileError::WholeStep { reason: format!("cannot start a copy thread: {e}") })?;
        self.running = Some((stop, thread));
        Ok(())
    }

    /// Stops the thread and says how many bytes it copied, and in how long (ns) of
    /// memcpy.
    fn stop(&mut self) -> Result<(u64, f64), ProfileError> {
        let (stop, thread) = self.running.take().ok_or_else(|| gone("was not started"))?;
        stop.store(true, Ordering::Relaxed);
        let copied = thread.join().map_err(|_| gone("panicked"))?;
        self.buffers = Some(copied.buffers);
        Ok((copied.bytes, copied.copy_ns))
    }
}

/// What a run of the paced thread did, and its buffers back.
struct Copied {
    bytes: u64,
    copy_ns: f64,
    buffers: (Vec<u8>, Vec<u8>),
}

fn gone(what: &str) -> ProfileError {
    ProfileError::WholeStep { reason: format!("the copy thread beside whole steps {what}") }
}
