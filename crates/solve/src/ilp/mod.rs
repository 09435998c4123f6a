//! The ILP (docs/background.md: the reference ILP, solver scale): per tensor, a location
//! per segment of its live range and a flow of transitions between segments; DRAM (and
//! every capped pool) bounded at every step through a running-occupancy variable;
//! kernels weighed by their additive cost.
//!
//! - static: one segment per tensor.
//! - sync: segments break just before and just after every use, with blocking moves.
//! - async: also within `async_window` steps of a use, with copies that overlap the
//!   kernel before the break (beside kernels long enough to hide a fair share of the
//!   copy). A kernel with overlapped copies costs the larger of the two.
//!
//! The model is built as plain rows and columns first (`build::Lp`), so that a warm start can
//! be written for any placement it can represent, then handed to HiGHS through good_lp.

mod bound;
mod build;
mod highs;
mod priced;
mod windows;

use crate::SolveError;
use crate::instance::Instance;
use crate::placement::Placement;
use crate::stages::{Stage, StageTime, Stages};
use bound::BoundSearch;
use build::{NS_PER_UNIT, build};
use highs::{first_feasible_in_log, run_guarded};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{Duration, Instant};
pub use windows::WindowReport;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Formulation {
    Static,
    Sync,
    Async,
}

impl Formulation {
    pub fn name(self) -> &'static str {
        match self {
            Formulation::Static => "static",
            Formulation::Sync => "sync",
            Formulation::Async => "async",
        }
    }
}

#[derive(Debug, Clone)]
pub struct IlpOptions {
    pub formulation: Formulation,
    /// Seconds this call may take, from building the model to returning its plan. HiGHS
    /// can overrun its own limit, so a guard stops waiting for it at the deadline.
    pub time_limit: f64,
    /// The solve stops when its proven gap is at most this share of the step time
    /// (standard MIP gap for an objective of step time; the gap on what the placement
    /// adds is reported too).
    pub gap: f64,
    /// Windowed async solves also go on, while time is left, until the proven gap is at
    /// most this share of what the placement adds (the objective).
    pub placement_gap: f64,
    /// Async only: how many steps before or after a use a copy may run.
    pub async_window: usize,
    /// Async only: copies overlap only the longest kernels, this share of them.
    pub async_kernel_share: f64,
    /// Async only: a copy may overlap a kernel only if the kernel could hide at least
    /// this share of it.
    pub min_hidden_share: f64,
    /// Tensors smaller than this keep one pool for life (a reduction: they cannot pay
    /// for a move's bookkeeping, and they multiply the model).
    pub small_tensor_bytes: u64,
    /// Async models with more binaries than this are improved window by window before
    /// the whole model is solved.
    pub windows_above_binaries: usize,
    /// About how many binaries each window frees.
    pub window_binaries: usize,
    /// Windows solved at once; `None`: one per core (at most four).
    pub window_workers: Option<usize>,
    /// Async only: solve the sync formulation first, for its plan to start the async
    /// solve, when the time limit is long enough for it to pay (the driver's
    /// `SYNC_FIRST_MIN_SECONDS`); off, to measure that again.
    pub sync_first: bool,
    /// Show HiGHS's log on the terminal.
    pub verbose: bool,
    /// Where HiGHS writes its log (it is read back for the time to the first feasible
    /// plan).
    pub log_file: Option<PathBuf>,
}

impl Default for IlpOptions {
    fn default() -> Self {
        IlpOptions {
            // Async, in every verb: its model holds every sync plan, and it starts from
            // the sync stage's plan (or the bound's priced start), so it costs solve time,
            // never plan quality. Plans of blocking moves only trailed greedy in torch.
            formulation: Formulation::Async,
            time_limit: 300.0,
            gap: 0.01,
            placement_gap: 0.25,
            async_window: 5,
            async_kernel_share: 1.0,
            min_hidden_share: 0.25,
            small_tensor_bytes: 64 << 10,
            windows_above_binaries: 20_000,
            window_binaries: 1_500,
            window_workers: None,
            sync_first: true,
            verbose: false,
            log_file: None,
        }
    }
}

impl IlpOptions {
    /// Refuses limits the solver cannot honour, before anything is measured or built.
    pub fn check(&self) -> Result<(), SolveError> {
        let share = |g: f64| (0.0..1.0).contains(&g);
        if self.time_limit > 0.0 && share(self.gap) && share(self.placement_gap) {
            return Ok(());
        }
        Err(SolveError::Usage {
            reason: format!(
                "--time-limit must be above 0 (got {}), --gap and --placement-gap in [0, 1) (got {} and {})",
                self.time_limit, self.gap, self.placement_gap
            ),
        })
    }
}

/// Size of the model handed to the solver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelSize {
    pub variables: usize,
    pub binaries: usize,
    pub constraints: usize,
    pub nonzeros: usize,
}

#[derive(Debug, Clone)]
pub struct IlpOutcome {
    pub placement: Placement,
    /// "optimal", "gap limit", "time limit", or "guard: ..." when the solver overran.
    pub status: String,
    /// The solver's objective, ns: what the placement adds to the all-DRAM step time
    /// (kernels under the additive fit, plus moves).
    pub objective_ns: f64,
    /// The best bound the solver proved on that, ns.
    pub bound_ns: f64,
    /// Σ of every kernel's base (all-DRAM) time under the fit, plus the step's overhead:
    /// objective + this is the step time the solver optimised.
    pub base_ns: f64,
    pub build_seconds: f64,
    pub solve_seconds: f64,
    /// When the solver's log first shows a feasible plan (the warm start counts).
    pub first_feasible_seconds: Option<f64>,
    pub size: ModelSize,
    /// The window-by-window improvement of the start, when it ran.
    pub windows: Option<WindowReport>,
    /// The Lagrangian bound, when it was computed (large async models).
    pub lagrangian: Option<LagrangianReport>,
    /// Where this call's time went: build, bound, windows, HiGHS.
    pub stages: Vec<StageTime>,
}

/// What the Lagrangian bound reached, and what it took.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LagrangianReport {
    /// The bound on what the placement adds, ns.
    pub bound_ns: f64,
    pub iterations: usize,
    pub seconds: f64,
}

/// Solves `inst` with the ILP; `warm` (any placement the model can represent, such as a
/// baseline's or a simpler formulation's) is handed to HiGHS as a starting plan. The
/// whole call ends within `opts.time_limit`.
///
/// For large async models, the start is first improved window by window over the
/// schedule (each a small MIP with everything outside the window fixed), with a
/// Lagrangian bound (`bound.rs`) computed before and after: it sets the windows'
/// target and proves the gap. The whole model goes to HiGHS only when the windows stall
/// with most of the time left: HiGHS alone finds good async plans too slowly there.
///
/// `progress` hears about long stages (the windows report every few seconds); pass
/// `&mut |_| {}` to ignore it.
pub fn solve(
    inst: &Instance,
    warm: Option<&Placement>,
    opts: &IlpOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<IlpOutcome, SolveError> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(opts.time_limit);
    let share = |f: f64| Duration::from_secs_f64(opts.time_limit * f);
    let built = build(inst, opts);
    // What no placement changes: every kernel's base, and the step's overhead.
    let base_ns: f64 = inst.kernels.iter().map(|k| k.cost.base_ns).sum::<f64>() + inst.step_overhead_ns;
    let mut start = warm.and_then(|w| built.values_for(inst, w));
    let build_seconds = started.elapsed().as_secs_f64();
    let name = opts.formulation.name();
    let mut stages = Stages::default();
    stages.add(Stage::Build, name, build_seconds);
    let solve_started = Instant::now();
    let mut first_feasible = start.as_ref().map(|_| 0.0);
    // Stop at an absolute gap of `gap` × the kernels' base times: every plan's step takes
    // at least that, so the gap as a share of the step time is at most `gap`. A share of
    // it is left for the arena: a plan whose DRAM arena packs over the budget is repaired
    // by moving tensors out of DRAM, and the gap reported is the repaired plan's.
    let abs_gap = opts.gap * (1.0 - GAP_LEFT_FOR_REPAIR) * base_ns / NS_PER_UNIT;
    let mut windows_report = None;
    // The best proven bound, and its name. No plan can score below what the columns'
    // bounds allow (for async: every kernel at its all-DRAM time).
    let mut bound = built.trivial_bound().map(|b| (b, "box bound"));
    let mut lagrangian = None;
    // The windows' target over a bound `floor`: within both gaps of it; and how close a
    // bound must come to a plan's `objective` to prove both.
    let done_at = |floor: f64| (floor + abs_gap).min(floor / (1.0 - opts.placement_gap));
    let close_enough = |objective: f64| abs_gap.min(opts.placement_gap * objective);
    if let Some(x) = &mut start
        && opts.formulation == Formulation::Async
        && built.size().binaries > opts.windows_above_binaries
    {
        let mut search = BoundSearch::new(&built, inst);
        // The bound, and plans built from its prices, in turns: each better bound prices
        // a better plan. The bound's steps keep aiming at the start (Polyak's target):
        // aimed at the priced plans, they were shorter, and the bound rose more slowly.
        let until = started + share(BOUND_SHARE_BEFORE);
        let turn = share(BOUND_SHARE_BEFORE / PRICED_TURNS as f64);
        let start_adds = built.objective(x);
        let mut first = search.run(start_adds, close_enough(start_adds), started + turn, usize::MAX);
        let mut priced_at = f64::NEG_INFINITY;
        let mut priced_seconds = 0.0;
        loop {
            if first.value > priced_at {
                priced_at = first.value;
                let t0 = Instant::now();
                // A turn's length past the bound's last turn: the last prices are the best.
                let (lag, price) = search.best_prices();
                if let Some(priced) = priced::plan(lag, price, inst, until + turn)
                    && built.objective(&priced) < built.objective(x)
                {
                    *x = priced;
                }
                priced_seconds += t0.elapsed().as_secs_f64();
            }
            let now = Instant::now();
            if now >= until || built.objective(x) - first.value <= close_enough(built.objective(x)) {
                break;
            }
            first = search.run(start_adds, close_enough(built.objective(x)), (now + turn).min(until), usize::MAX);
        }
        stages.add(Stage::Priced, name, priced_seconds);
        raise(&mut bound, first.value, "Lagrangian bound");
        let floor = bound.map_or(0.0, |b| b.0);
        if first.iterations > 0 {
            progress(&format!(
                "bound: {:.3} ms below any plan's placement cost ({} Lagrangian steps in {:.1} s); the start adds {:.3} ms, the plan from the bound's prices {:.3} ms",
                floor * NS_PER_UNIT / 1e6,
                first.iterations,
                first.seconds,
                start_adds * NS_PER_UNIT / 1e6,
                built.objective(x) * NS_PER_UNIT / 1e6
            ));
        }
        let seconds =
            deadline.saturating_duration_since(Instant::now()).saturating_sub(share(BOUND_SHARE_AFTER)).as_secs_f64();
        let limits = windows::Limits {
            seconds,
            binaries: opts.window_binaries,
            good_enough: done_at(floor),
            workers: opts.window_workers,
            gap: abs_gap,
        };
        let polished = windows::polish(&built, inst, x, &limits, progress);
        stages.add(Stage::Windows, name, polished.seconds);
        windows_report = Some(polished);
        let last = search.run(built.objective(x), close_enough(built.objective(x)), deadline, usize::MAX);
        stages.add(Stage::Bound, name, last.seconds);
        raise(&mut bound, last.value, "Lagrangian bound");
        lagrangian = last.value.is_finite().then_some(last);
    }
    let outcome = |x: &[f64], status: String, bound: f64, first_feasible: Option<f64>| IlpOutcome {
        placement: built.placement_from(inst, x),
        status,
        objective_ns: built.objective(x) * NS_PER_UNIT,
        bound_ns: bound * NS_PER_UNIT,
        base_ns,
        build_seconds,
        solve_seconds: solve_started.elapsed().as_secs_f64(),
        first_feasible_seconds: first_feasible,
        size: built.size(),
        windows: windows_report,
        lagrangian: lagrangian.map(|b| LagrangianReport {
            bound_ns: b.value * NS_PER_UNIT,
            iterations: b.iterations,
            seconds: b.seconds,
        }),
        stages: Vec::new(),
    };
    // A start within the gap of the bound needs no solver. After windows that used most
    // of the time, neither does one that is not: the whole model's root LP is no
    // tighter than the bounds here, and on DenseNet-264 presolving it alone outran the
    // time left.
    let time_left = deadline.saturating_duration_since(Instant::now());
    let whole_model_hopeless = windows_report.is_some() && time_left < share(WHOLE_MODEL_SHARE_OF_TIME);
    if let (Some(x), Some((b, name))) = (&start, bound)
        && (built.objective(x) - b <= abs_gap || whole_model_hopeless || time_left.is_zero())
    {
        let objective = built.objective(x);
        let status =
            if objective - b <= abs_gap { format!("gap limit ({name})") } else { format!("time limit ({name})") };
        let mut done = outcome(x, status, b, first_feasible);
        done.stages = stages.0;
        return Ok(done);
    }
    if windows_report.is_some() {
        progress(&format!("windows stalled; HiGHS gets the whole model for {:.0} s", time_left.as_secs_f64()));
    }
    // HiGHS stops a little before the deadline: reading its plan back takes a moment.
    let limit = (time_left.as_secs_f64() * 0.95).max(0.1);
    let highs_started = Instant::now();
    let result = run_guarded(&built.lp.cols, &built.lp.rows, start.clone(), abs_gap, limit, deadline, opts)?;
    stages.since(Stage::Highs, name, highs_started);
    let Some(result) = result else {
        let Some(x) = start else {
            return Err(SolveError::Solver {
                reason: format!("HiGHS found no plan within the {} s time limit", opts.time_limit),
            });
        };
        let status = format!(
            "guard: HiGHS overran its time limit; the plan is its start, after {:.0} s",
            solve_started.elapsed().as_secs_f64()
        );
        let mut done = outcome(&x, status, bound.map_or(f64::NAN, |(b, _)| b), first_feasible);
        done.stages = stages.0;
        return Ok(done);
    };
    if first_feasible.is_none() {
        first_feasible = opts.log_file.as_deref().and_then(first_feasible_in_log);
    }
    // HiGHS's own bound, or the Lagrangian one when that is higher.
    let b = bound.map_or(result.bound, |(b, _)| b.max(result.bound));
    let mut solved = outcome(&result.x, result.status, b, first_feasible);
    solved.objective_ns = result.objective * NS_PER_UNIT;
    solved.stages = stages.0;
    Ok(solved)
}

/// Whether an async solve of `inst` is large enough for the windows, and so for the
/// bound and its priced start. It builds the model to count its binaries: 0.3 s on
/// DenseNet-264 b32.
pub(crate) fn windowed(inst: &Instance, opts: &IlpOptions) -> bool {
    opts.formulation == Formulation::Async && build(inst, opts).size().binaries > opts.windows_above_binaries
}

/// Keeps the higher of two bounds, with its name.
fn raise(bound: &mut Option<(f64, &'static str)>, value: f64, name: &'static str) {
    if value.is_finite() && bound.is_none_or(|(b, _)| value > b) {
        *bound = Some((value, name));
    }
}

/// Shares of the time limit the Lagrangian bound may use before the windows (to set
/// their target) and after them (to prove the gap of what they found).
const BOUND_SHARE_BEFORE: f64 = 0.25;
const BOUND_SHARE_AFTER: f64 = 0.1;
/// The share of the gap an ILP stage leaves for the arena's repair. DenseNet-264 b32's
/// plans at 10% were repaired by 15 ms in one solve and by at least 50 ms (0.3% of the
/// step) in another, which proved 1.15% of the step once repaired where the ILP had
/// stopped at 1% (docs/BENCHMARKS.md).
const GAP_LEFT_FOR_REPAIR: f64 = 0.25;
/// Turns of bound and priced plan before the windows.
const PRICED_TURNS: usize = 4;
/// When windows stall with at least this share of the time left, the whole model gets
/// it; otherwise the best bound is the bound.
const WHOLE_MODEL_SHARE_OF_TIME: f64 = 0.3;
