//! Running plans for real, side by side: every plan gets its own executor, arenas and
//! pools, and the timed steps go round-robin (A, B, C, A, B, C …, starting one further
//! along each round) so that a host drifting by tens of percent over a minute moves all
//! of them alike: ratios measured side by side hold, absolute times do not
//! (docs/background.md, timing on a shared host).
//!
//! A plan's turn starts with an untimed step of its own ([`MeasureOptions::rewarm`]):
//! a model that fits in the last-level cache otherwise runs its timed step in what the
//! plan before it left there, not in its own steady state, as a training run would. The
//! all-DRAM plan of LeNet b256 measured +9% and +16% over its prediction interleaved
//! without it, +2% and +4% alone (docs/running.md).

use crate::EvalError;
use placer_exec::{ClockInfo, EmulatedPoolUse, PlanExecutor, PlanRunReport, PlanStepTimes, Stats};
use placer_ir::Model;
use placer_pools::PoolSet;
use placer_solve::{Plan, exec_plan};
use serde::Serialize;

/// A plan to run, under the name it is reported by.
#[derive(Debug, Clone)]
pub struct Contender {
    pub name: String,
    pub plan: Plan,
}

#[derive(Debug, Clone, Copy)]
pub struct MeasureOptions {
    /// Untimed steps of each plan first.
    pub warmup: usize,
    /// Timed steps of each plan.
    pub iterations: usize,
    /// Untimed steps of a plan at the start of each of its turns, when there are
    /// several plans.
    pub rewarm: usize,
    pub seed: u64,
    /// A busy host before the timed steps is an error instead of a warning
    /// ([`crate::check_host`]).
    pub require_quiet: bool,
}

impl Default for MeasureOptions {
    fn default() -> Self {
        MeasureOptions { warmup: 2, iterations: 10, rewarm: 1, seed: 0x5EED, require_quiet: false }
    }
}

/// One plan, measured.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub name: String,
    pub predicted_step_ns: f64,
    /// Wall time of a whole step (kernels, blocking copies, waits for background
    /// copies), ns.
    pub step_ns: Stats,
    /// Per kernel: median measured time, ns, and the plan's prediction.
    pub kernel_ns: Vec<f64>,
    pub predicted_kernel_ns: Vec<f64>,
    /// Per kernel: median time waiting for background copies before it, ns.
    pub copy_wait_ns: Vec<f64>,
    /// Median time in blocking copies per step, ns.
    pub blocking_ns: f64,
    /// Per kernel: DRAM bytes placed while it ran (last timed step).
    pub dram_bytes: Vec<u64>,
    pub budget_bytes: u64,
    pub report: PlanRunReport,
    /// The host's activity just before the timed steps (the same for every plan of one run).
    pub host_before: Option<placer_host::HostActivity>,
}

impl Measured {
    /// (measured − predicted) / predicted, on the step's median.
    pub fn prediction_error(&self) -> f64 {
        self.step_ns.median / self.predicted_step_ns - 1.0
    }

    /// Says, in every output that carries times, which pools were emulated.
    pub fn timing_note(&self) -> String {
        if self.report.emulated.is_empty() {
            "measured on real memory: no tensor is in an emulated pool".into()
        } else {
            let pools: Vec<String> = self.report.emulated.iter().map(EmulatedPoolUse::describe).collect();
            format!(
                "EMULATED: tensors in {}: each kernel and copy waits what the device model charges; \
                 these are not measurements of that device",
                pools.join(", ")
            )
        }
    }
}

/// Runs every contender, interleaved; `progress` hears about each plan as it starts.
pub fn run_interleaved(
    model: &Model,
    pools: &mut dyn FnMut() -> Result<PoolSet, EvalError>,
    contenders: &[Contender],
    options: &MeasureOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Measured>, EvalError> {
    if options.iterations == 0 {
        return Err(EvalError::Usage { reason: "iterations must be at least 1".into() });
    }
    let mut executors = Vec::with_capacity(contenders.len());
    for c in contenders {
        let pools = pools()?;
        let plan = exec_plan(&c.plan, model, &pools)?;
        let exec = PlanExecutor::new(model, pools, plan, options.seed)
            .map_err(|source| EvalError::Exec { strategy: c.name.clone(), error: Box::new(source) })?;
        executors.push(exec);
    }
    let step = |exec: &mut PlanExecutor<'_>, name: &str| {
        exec.step().map_err(|source| EvalError::Exec { strategy: name.to_string(), error: Box::new(source) })
    };
    // After every plan is known to fit, before any step: a refusal costs no run.
    let when = "before the runs";
    let host = crate::check_host(when, options.require_quiet)?;
    if let Some(warning) = host.and_then(|a| a.warning(when)) {
        progress(&format!("warning: {warning}"));
    }
    let clock = ClockInfo::measure();
    let mut times: Vec<Vec<PlanStepTimes>> = vec![Vec::with_capacity(options.iterations); contenders.len()];
    let mut losses: Vec<Vec<f32>> = vec![Vec::new(); contenders.len()];
    for (i, (exec, c)) in executors.iter_mut().zip(contenders).enumerate() {
        progress(&format!("warming up {} ({} of {})", c.name, i + 1, contenders.len()));
        for _ in 0..options.warmup {
            step(exec, &c.name)?;
            losses[i].extend(exec.loss());
        }
    }
    let n = contenders.len();
    // One plan has no neighbour to warm its cache away.
    let rewarm = if n > 1 { options.rewarm } else { 0 };
    progress(&format!(
        "{} timed steps of each plan, interleaved{}",
        options.iterations,
        match rewarm {
            0 => String::new(),
            1 => ", each after an untimed one of its own".to_string(),
            r => format!(", each after {r} untimed ones of its own"),
        }
    ));
    for round in 0..options.iterations {
        for k in 0..n {
            let i = (round + k) % n;
            for _ in 0..rewarm {
                step(&mut executors[i], &contenders[i].name)?;
                losses[i].extend(executors[i].loss());
            }
            let t = step(&mut executors[i], &contenders[i].name)?;
            losses[i].extend(executors[i].loss());
            times[i].push(t);
        }
    }
    let mut out = Vec::with_capacity(n);
    for (((exec, c), steps), losses) in executors.iter().zip(contenders).zip(times).zip(losses) {
        out.push(Measured { host_before: host, ..summarise(c, exec.report(clock, steps, losses))? });
    }
    Ok(out)
}

fn median(samples: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = samples.collect();
    Stats::of(&v).map_or(0.0, |s| s.median)
}

fn summarise(c: &Contender, report: PlanRunReport) -> Result<Measured, EvalError> {
    let steps = &report.steps;
    let kernels = c.plan.kernels.len();
    let walls: Vec<f64> = steps.iter().map(|s| s.wall_ns).collect();
    Ok(Measured {
        name: c.name.clone(),
        predicted_step_ns: c.plan.predicted.step_ns,
        step_ns: Stats::of(&walls).ok_or_else(|| EvalError::Usage { reason: "no timed steps".into() })?,
        kernel_ns: (0..kernels).map(|k| median(steps.iter().map(|s| s.kernel_ns[k]))).collect(),
        predicted_kernel_ns: c.plan.kernels.iter().map(|k| k.time_ns).collect(),
        copy_wait_ns: (0..kernels).map(|k| median(steps.iter().map(|s| s.copy_wait_ns[k]))).collect(),
        blocking_ns: median(steps.iter().map(|s| s.blocking_ns)),
        dram_bytes: steps.last().map(|s| s.dram_bytes.clone()).unwrap_or_default(),
        budget_bytes: c.plan.budget_bytes,
        report,
        host_before: None,
    })
}
