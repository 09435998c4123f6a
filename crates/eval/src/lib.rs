//! Closing the loop: plans executed for real, side by side, against what they predicted
//! (the last stage of the pipeline), and the report `placer pipeline` writes.
//!
//! - [`measure`](mod@measure) runs several plans interleaved in one process.
//! - [`compare`] turns the measurements into rows: measured, predicted, error, speedups.
//! - [`report`] writes summary.md, plan.json and the SVG plots.

pub mod compare;
pub mod measure;
pub mod report;

pub use compare::{Comparison, Row};
pub use measure::{Contender, MeasureOptions, Measured, measure};
pub use report::{Report, SweepPoint};

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
