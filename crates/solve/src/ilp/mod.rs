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

mod build;
mod highs;
mod windows;

use crate::SolveError;
use crate::instance::Instance;
use crate::placement::Placement;
use build::{NS_PER_UNIT, build};
use highs::{first_feasible_in_log, run_guarded};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Instant;
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
    /// HiGHS's time limit, seconds. A wall-clock guard stops waiting at 1.5× this plus
    /// 20 s, since HiGHS can overrun its own limit.
    pub time_limit: f64,
    /// The solve stops when its proven gap is at most this share of the step time
    /// (standard MIP gap for an objective of step time; the gap on what the placement
    /// adds is reported too).
    pub gap: f64,
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
    /// Show HiGHS's log on the terminal.
    pub verbose: bool,
    /// Where HiGHS writes its log (it is read back for the time to the first feasible
    /// plan).
    pub log_file: Option<PathBuf>,
}

impl Default for IlpOptions {
    fn default() -> Self {
        IlpOptions {
            formulation: Formulation::Sync,
            time_limit: 300.0,
            gap: 0.01,
            async_window: 5,
            async_kernel_share: 1.0,
            min_hidden_share: 0.25,
            small_tensor_bytes: 64 << 10,
            windows_above_binaries: 20_000,
            window_binaries: 1_500,
            verbose: false,
            log_file: None,
        }
    }
}

impl IlpOptions {
    /// Refuses limits the solver cannot honour, before anything is measured or built.
    pub fn check(&self) -> Result<(), SolveError> {
        if self.time_limit > 0.0 && self.gap >= 0.0 && self.gap < 1.0 {
            return Ok(());
        }
        Err(SolveError::Usage {
            reason: format!(
                "--time-limit must be above 0 (got {}) and --gap in [0, 1) (got {})",
                self.time_limit, self.gap
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
    /// Relative gap on the objective (what the placement adds).
    pub gap: f64,
    /// Σ of every kernel's base (all-DRAM) time under the fit: objective + this is the
    /// step time the solver optimised.
    pub base_ns: f64,
    pub build_seconds: f64,
    pub solve_seconds: f64,
    /// When the solver's log first shows a feasible plan (the warm start counts).
    pub first_feasible_seconds: Option<f64>,
    pub size: ModelSize,
    /// The window-by-window improvement of the start, when it ran.
    pub windows: Option<WindowReport>,
}

/// Solves `inst` with the ILP; `warm` (any placement the model can represent, such as a
/// baseline's or a simpler formulation's) is handed to HiGHS as a starting plan.
///
/// For large async models, the start is first improved window by window over the
/// schedule (each a small MIP with everything outside the window fixed), then the whole
/// model gets the remaining time: HiGHS alone finds good async plans too slowly there.
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
    let built = build(inst, opts);
    let base_ns: f64 = inst.kernels.iter().map(|k| k.cost.base_ns).sum();
    let mut start = warm.and_then(|w| built.values_for(inst, w));
    let build_seconds = started.elapsed().as_secs_f64();
    let solve_started = Instant::now();
    let mut first_feasible = start.as_ref().map(|_| 0.0);
    let mut windows_report = None;
    if let Some(x) = &mut start
        && opts.formulation == Formulation::Async
        && built.size().binaries > opts.windows_above_binaries
    {
        // The windows can stop once the start is within the gap of a bound of zero
        // (every term of the objective is a non-negative cost).
        let target = opts.gap * base_ns / NS_PER_UNIT;
        let budget = opts.time_limit * WINDOW_SHARE_OF_TIME;
        let limits = windows::Limits { seconds: budget, binaries: opts.window_binaries, good_enough: target };
        windows_report = Some(windows::polish(&built, inst, x, &limits, progress));
    }
    let outcome = |x: &[f64], status: String, bound: f64, gap: f64, first_feasible: Option<f64>| IlpOutcome {
        placement: built.placement_from(inst, x),
        status,
        objective_ns: built.objective(x) * NS_PER_UNIT,
        bound_ns: bound * NS_PER_UNIT,
        gap,
        base_ns,
        build_seconds,
        solve_seconds: solve_started.elapsed().as_secs_f64(),
        first_feasible_seconds: first_feasible,
        size: built.size(),
        windows: windows_report,
    };
    // Stop at an absolute gap of `gap` × the kernels' base times: every plan's step takes
    // at least that, so the gap as a share of the step time is at most `gap`.
    let abs_gap = opts.gap * base_ns / NS_PER_UNIT;
    // No plan can score below what the columns' bounds allow (for async: every kernel
    // at its all-DRAM time); a start that close to it needs no solver.
    // After windows that used most of the time, the whole model is not handed to HiGHS:
    // its root LP is no tighter than the box bound, and on DenseNet-264 presolving it
    // alone outran the time left.
    let time_left = opts.time_limit - solve_started.elapsed().as_secs_f64();
    let whole_model_hopeless = windows_report.is_some() && time_left < WHOLE_MODEL_SHARE_OF_TIME * opts.time_limit;
    if let (Some(x), Some(bound)) = (&start, built.trivial_bound())
        && (built.objective(x) - bound <= abs_gap || whole_model_hopeless)
    {
        let objective = built.objective(x);
        let gap = if objective.abs() > 0.0 { (objective - bound) / objective.abs() } else { 0.0 };
        let status = if objective - bound <= abs_gap { "gap limit (box bound)" } else { "time limit (box bound)" };
        return Ok(outcome(x, status.into(), bound, gap, first_feasible));
    }
    let time_left = time_left.max(opts.time_limit * 0.1);
    if windows_report.is_some() {
        progress(&format!("windows stalled; HiGHS gets the whole model for {time_left:.0} s"));
    }
    let result = run_guarded(&built.lp.cols, &built.lp.rows, start.clone(), abs_gap, time_left, opts)?;
    let Some(result) = result else {
        let Some(x) = start else {
            return Err(SolveError::Solver {
                reason: format!("HiGHS overran its {} s time limit by more than half and has no plan", opts.time_limit),
            });
        };
        let status = format!(
            "guard: HiGHS overran its time limit; the plan is its start, after {:.0} s",
            solve_started.elapsed().as_secs_f64()
        );
        return Ok(outcome(&x, status, f64::NAN, f64::NAN, first_feasible));
    };
    if first_feasible.is_none() {
        first_feasible = opts.log_file.as_deref().and_then(first_feasible_in_log);
    }
    let mut solved = outcome(&result.x, result.status, result.bound, result.gap, first_feasible);
    solved.objective_ns = result.objective * NS_PER_UNIT;
    Ok(solved)
}

/// Share of the time limit the windows may use.
const WINDOW_SHARE_OF_TIME: f64 = 0.95;
/// When windows stall with at least this share of the time left, the whole model gets
/// it; otherwise the box bound is the bound.
const WHOLE_MODEL_SHARE_OF_TIME: f64 = 0.3;
