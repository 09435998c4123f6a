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
//! predicted step. It does not depend on where tensors are, so it changes no plan, only
//! how long each is predicted to take. The parts are kept apart for the record.

use crate::ProfileError;
use crate::record::StepOverhead;
use placer_exec::{ExecPlan, PlanExecutor, PoolAssignment, SharedRunner, Stats};
use placer_ir::Model;
use placer_pools::PoolSet;
use std::time::Instant;

/// Untimed steps first: the arena's pages faulted in, caches in a step's state.
const WARMUP: usize = 2;
/// Timed steps of each kind: as many as take [`TARGET_NS`], within these bounds. The medians'
/// shortfall is a difference of two sums of medians, and settles only with tens of
/// steps (BERT-tiny b32 read 1.2 and 2.5 ms in two profiles with 9).
const MIN_STEPS: usize = 9;
const MAX_STEPS: usize = 41;
const TARGET_NS: f64 = 3e9;
/// Steps of at least this long take [`MIN_LONG_STEPS`] of each kind: each holds
/// thousands of kernels (ResNet-200 b32: 2,166 in about 20 s), whose medians' skew
/// averages out within a step, and nine of each would cost a profile six minutes.
const LONG_STEP_NS: f64 = 5e9;
const MIN_LONG_STEPS: usize = 3;

/// Times whole steps of `model` in placement `base` on `pools`, as `placer run` runs a
/// plan, and returns what they cost beyond their kernels' medians.
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
    let least = if first_ns >= LONG_STEP_NS { MIN_LONG_STEPS } else { MIN_STEPS };
    let steps = ((TARGET_NS / first_ns.max(1.0)) as usize).clamp(least, MAX_STEPS);
    let kernels = model.schedule().len();
    let mut per_kernel: Vec<Vec<f64>> = vec![Vec::with_capacity(steps); kernels];
    let mut woken: Vec<Vec<f64>> = vec![Vec::with_capacity(steps); kernels];
    let (mut walls, mut sums) = (Vec::with_capacity(steps), Vec::with_capacity(steps));
    let record = |to: &mut Vec<Vec<f64>>, times: &[f64]| {
        for (k, &ns) in to.iter_mut().zip(times) {
            k.push(ns);
        }
    };
    // Alternating, so drift in the host's speed falls on both kinds alike.
    for _ in 0..steps {
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
                walls.push(whole(r)?.ok_or_else(reason)?);
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
    }))
}
