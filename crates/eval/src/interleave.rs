//! Running plans for real, side by side: every plan gets its own executor, arenas and
//! pools, built afresh for each of its turns, and the timed steps go round-robin (A, B,
//! C, A, B, C …, starting one further along each round) so that a host drifting by tens
//! of percent over a minute moves all of them alike: ratios measured side by side hold,
//! absolute times do not (docs/background.md, timing on a shared host).
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
    /// Untimed steps in each plan's first turn (each turn builds its executor afresh,
    /// [`run_interleaved`]).
    pub warmup: usize,
    /// Timed steps of each plan.
    pub iterations: usize,
    /// Untimed steps of a plan at the start of each of its later turns, when there are
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

/// How often, at most, [`run_interleaved`] says which round it is on.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs every contender, interleaved; `progress` hears how far the runs are.
///
/// Each turn of a plan builds its executor afresh and drops it when the turn ends, so
/// the host holds one plan's arenas at a time. Held all at once, ResNet-50 b32's eight
/// plans took 23.5 GB of this 24 GiB host, and the plans built last found too few free
/// 2 MiB pages: all-DRAM's arena got 8-15% of its bytes on huge pages, and its kernels
/// ran 3-10% over the profile, which timed them on huge pages (docs/running.md, "Huge
/// pages"). A fresh executor starts from the same seed, so every turn of every plan runs
/// the same steps on the same values.
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
    let mut build = |c: &Contender| -> Result<PlanExecutor<'_>, EvalError> {
        let pools = pools()?;
        let plan = exec_plan(&c.plan, model, &pools)?;
        PlanExecutor::new(model, pools, plan, options.seed)
            .map_err(|source| EvalError::Exec { strategy: c.name.clone(), error: Box::new(source) })
    };
    // Every plan built once before any step: one that does not fit costs no run.
    for c in contenders {
        drop(build(c)?);
    }
    let when = "before the runs";
    let host = crate::check_host(when, options.require_quiet)?;
    if let Some(warning) = host.and_then(|a| a.warning(when)) {
        progress(&format!("warning: {warning}"));
    }
    let clock = ClockInfo::measure();
    let n = contenders.len();
    // One plan has no neighbour to warm its cache away: one turn of all its steps.
    let (rounds, per_turn, rewarm) =
        if n > 1 { (options.iterations, 1, options.rewarm) } else { (1, options.iterations, 0) };
    let first = options.warmup.max(rewarm);
    let steps = options.iterations;
    progress(&match (n, first == rewarm) {
        (1, _) => format!("{steps} timed steps after {first} untimed"),
        (_, same) => format!(
            "{steps} timed steps of each plan, interleaved, each turn a fresh executor: {rewarm} untimed step(s) first{}",
            if same { String::new() } else { format!(", {first} in a plan's first turn") }
        ),
    });
    let mut turns: Vec<Turns> = (0..n).map(|_| Turns::default()).collect();
    // A round of a large model takes minutes: say where the runs are, at most every
    // PROGRESS_EVERY, so a short run stays quiet.
    let mut said = std::time::Instant::now();
    for round in 0..rounds {
        if round > 0 && said.elapsed() >= PROGRESS_EVERY {
            progress(&format!("round {} of {rounds}", round + 1));
            said = std::time::Instant::now();
        }
        for k in 0..n {
            let i = (round + k) % n;
            let (c, done) = (&contenders[i], &mut turns[i]);
            let mut exec = build(c)?;
            let untimed = if done.reports.is_empty() { first } else { rewarm };
            for timed in std::iter::repeat_n(false, untimed).chain(std::iter::repeat_n(true, per_turn)) {
                let t = exec
                    .step()
                    .map_err(|source| EvalError::Exec { strategy: c.name.clone(), error: Box::new(source) })?;
                done.losses.extend(exec.loss());
                if timed {
                    done.steps.push(t);
                }
            }
            done.reports.push(exec.report(clock, Vec::new(), Vec::new()));
        }
    }
    contenders
        .iter()
        .zip(turns)
        .map(|(c, t)| Ok(Measured { host_before: host, ..summarise(c, t.into_report()?)? }))
        .collect()
}

/// One plan's turns: the timed steps and losses of all, and each turn's executor's report.
#[derive(Debug, Default)]
struct Turns {
    steps: Vec<PlanStepTimes>,
    losses: Vec<f32>,
    reports: Vec<PlanRunReport>,
}

impl Turns {
    /// The plan's report over all its turns: the steps and losses of every turn; per
    /// pool, the fewest bytes any turn's arena got on huge pages; the copy thread's
    /// memcpy speed averaged over the turns (each copies the same bytes). The rest is
    /// the same in every turn and taken from the last.
    fn into_report(self) -> Result<PlanRunReport, EvalError> {
        let Turns { steps, losses, mut reports } = self;
        let huge_page_bytes = min_by_pool(reports.iter().map(|r| r.huge_page_bytes.as_slice()));
        let memcpy: Vec<f64> = reports.iter().filter_map(|r| r.copy_memcpy_ns_per_byte).collect();
        let copy_memcpy_ns_per_byte = (!memcpy.is_empty()).then(|| memcpy.iter().sum::<f64>() / memcpy.len() as f64);
        let last = reports.pop().ok_or_else(|| EvalError::Usage { reason: "no timed steps".into() })?;
        Ok(PlanRunReport { steps, losses, huge_page_bytes, copy_memcpy_ns_per_byte, ..last })
    }
}

/// Per pool, the smallest of the measured figures; `None` where no turn measured it.
fn min_by_pool<'a>(turns: impl Iterator<Item = &'a [Option<u64>]>) -> Vec<Option<u64>> {
    let lesser = |a: Option<u64>, b: Option<u64>| a.zip(b).map(|(a, b)| a.min(b)).or(a).or(b);
    turns
        .map(<[_]>::to_vec)
        .reduce(|acc, turn| acc.into_iter().zip(turn).map(|(a, b)| lesser(a, b)).collect())
        .unwrap_or_default()
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
        budget_bytes: c.plan.inputs.budget_bytes,
        report,
        host_before: None,
    })
}

#[cfg(test)]
mod tests {
    use super::min_by_pool;

    #[test]
    fn a_pools_huge_pages_are_its_worst_turns() {
        let turns = [vec![Some(8), None, None], vec![Some(3), Some(5), None], vec![Some(6), None, None]];
        assert_eq!(min_by_pool(turns.iter().map(Vec::as_slice)), vec![Some(3), Some(5), None]);
        assert_eq!(min_by_pool(std::iter::empty()), Vec::<Option<u64>>::new());
    }
}
