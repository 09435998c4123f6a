//! Closing the loop: plans executed for real, side by side, against what they predicted
//! (the last stage of the pipeline), and the report `placer pipeline` writes.
//!
//! - [`interleave`] runs several plans interleaved in one process.
//! - [`contenders`] says which plans run side by side, and under what names.
//! - [`compare`] turns the measurements into rows: measured, predicted, error, speedups.
//! - [`report`] writes summary.md, plan.json and the SVG plots.
//! - [`run`](mod@run) and [`pipeline`](mod@pipeline) are `placer run` and `placer pipeline` as
//!   library calls, for any front end.

pub mod compare;
pub mod contenders;
mod in_situ;
pub mod interleave;
pub mod pipeline;
pub mod report;
pub mod run;

pub use compare::{Comparison, Row, Standing, Versus};
pub use contenders::{LeftOut, plan_label};
pub use in_situ::in_situ;
pub use interleave::{Contender, MeasureOptions, Measured, run_interleaved};
pub use pipeline::{PipelineEvent, PipelineOutcome, PipelineRequest, Stage, pipeline};
pub use report::{Report, SweepPoint};
pub use run::{Beside, PlainRun, PlanRunEvent, assign_roles, run_plain, run_plan};

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    // Boxed: the inner errors are large, and this one travels through every `?`.
    #[error(transparent)]
    Solve(Box<placer_solve::SolveError>),
    #[error("running the {strategy} plan: {error}")]
    Exec { strategy: String, error: Box<placer_exec::ExecError> },
    #[error(transparent)]
    Host(Box<placer_host::HostError>),
    #[error("report {path}: {reason}", path = path.display())]
    Report { path: PathBuf, reason: String },
    #[error("{reason}")]
    Usage { reason: String },
    /// A `--place ROLE=POOL` rule names a pool this host does not have; the pool error
    /// is the next cause.
    #[error("--place {rule}")]
    Place { rule: String, source: placer_pools::PoolError },
    /// A plain run (no plan) failed.
    #[error(transparent)]
    Run(Box<placer_exec::ExecError>),
    #[error(transparent)]
    Profile(Box<placer_profile::ProfileError>),
}

impl EvalError {
    /// A plain run's executor error.
    pub fn run(e: placer_exec::ExecError) -> Self {
        EvalError::Run(Box::new(e))
    }
}

/// Watches the host before plans are timed ([`placer_host::HostActivity::watch`]): its
/// activity, or `NotQuiet` when it was busy and `require_quiet`. `None` without `/proc`.
pub fn check_host(when: &str, require_quiet: bool) -> Result<Option<placer_host::HostActivity>, EvalError> {
    let activity = placer_host::HostActivity::watch(placer_profile::QUIET_CHECK);
    if let (true, Some(a)) = (require_quiet, activity) {
        a.require_quiet(when)?;
    }
    Ok(activity)
}

impl From<placer_profile::ProfileError> for EvalError {
    fn from(e: placer_profile::ProfileError) -> Self {
        EvalError::Profile(Box::new(e))
    }
}

impl From<placer_solve::SolveError> for EvalError {
    fn from(e: placer_solve::SolveError) -> Self {
        EvalError::Solve(Box::new(e))
    }
}

impl From<placer_host::HostError> for EvalError {
    fn from(e: placer_host::HostError) -> Self {
        EvalError::Host(Box::new(e))
    }
}
