//! The placement solver: turns measured kernel times into a plan that says where every
//! tensor lives at every step of the schedule, and when it moves, under a DRAM budget.
//!
//! - [`instance`] gathers what a plan is scored on: live ranges at allocation
//!   granularity, scratch space, per-kernel costs ([`cost`]) and move costs ([`pools`]).
//! - [`ilp`] builds the static, synchronous or asynchronous formulation
//!   (docs/background.md: the reference ILP, solver scale) and solves it with HiGHS
//!   through good_lp, warm-started from [`baselines`].
//! - [`plan`] is the file format; [`check`](mod@check) verifies any plan independently of how it
//!   was made.

mod baselines;
mod budget;
mod check;
mod cost;
mod driver;
mod execute;
mod ilp;
mod inputs;
mod instance;
mod layout;
mod placement;
mod plan;
mod pools;
mod repair;
mod segtree;
mod stages;
mod two_lm;

pub use baselines::Baseline;
pub use budget::{Budget, BudgetError};
pub use check::{CheckReport, check};
pub use cost::{CopyLevel, CostModel, Costs, KernelCost, TimeSource, UNCALIBRATED_SHARE};
pub use driver::{Candidate, SolveRequest, SolveResult, baselines, solve};
pub use execute::exec_plan;
pub use ilp::{Formulation, IlpOptions, IlpOutcome, LagrangianReport, ModelSize, WindowReport, solve as solve_ilp};
pub use inputs::{InputsEvent, SolveInputs, check_profile, solve_inputs, solve_pools};
pub use instance::{Infeasible, Instance, KernelInfo, PAGE, TensorInfo, round_to_page};
pub use layout::{Layout, lay_out};
pub use placement::{Evaluation, Move, MoveKind, Placement};
pub use plan::{
    PLAN_FORMAT, PLAN_VERSION, Plan, PlanContext, PlanInputs, PlanKernel, PlanMove, PlanSpan, PlanTensor, Predicted,
    Provenance, SideCache, SolverReport, Strategy,
};
pub use pools::{PoolFigures, SolvePools};
pub use repair::{Repair, fit_arena};
pub use stages::{Stage, StageTime, Stages};
pub use two_lm::{
    LABEL as TWO_LM_LABEL, LINE_BYTES, cached_pool, plan as two_lm_plan, predicted_waits, step_traffic, wait_ns,
};

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SolveError {
    #[error(transparent)]
    Budget(#[from] BudgetError),
    /// No placement can meet the budget; `reason` names the step and tensors, and the
    /// smallest feasible budget when it is known.
    #[error("{reason}")]
    Infeasible { reason: String, smallest_feasible: Option<u64> },
    #[error("{reason}")]
    Mismatch { reason: String },
    #[error("solver: {reason}")]
    Solver { reason: String },
    #[error("plan {path}: {reason}", path = path.display())]
    PlanFile { path: PathBuf, reason: String },
    #[error("{reason}")]
    Usage { reason: String },
    /// The independent checker rejected the solver's own plan: a bug in placer.
    #[error("the plan checker found {count} problem(s) in the solver's plan (a bug; please report it): {problems}")]
    PlanCheck { count: usize, problems: String },
    /// The profile could not be read or is not for this model and host, or a pin is
    /// bad. Boxed: the inner errors are large.
    #[error(transparent)]
    Profile(Box<placer_profile::ProfileError>),
    #[error(transparent)]
    Host(Box<placer_host::HostError>),
    /// Measuring copy bandwidth failed. Not boxed: the host's error is the next cause in
    /// the chain, where the binary finds it by type for the exit code.
    #[error("cannot measure the pools")]
    Probe(#[source] placer_host::HostError),
}

impl From<placer_profile::ProfileError> for SolveError {
    fn from(e: placer_profile::ProfileError) -> Self {
        SolveError::Profile(Box::new(e))
    }
}

impl From<placer_host::HostError> for SolveError {
    fn from(e: placer_host::HostError) -> Self {
        SolveError::Host(Box::new(e))
    }
}
