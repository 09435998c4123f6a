//! Closing the loop: plans executed for real, side by side, against what they predicted
//! (DESIGN §3, last stage), and the report `placer pipeline` writes.
//!
//! - [`measure`](mod@measure) runs several plans interleaved in one process.
//! - [`compare`] turns the measurements into rows: measured, predicted, error, speedups.
//! - [`report`] writes summary.md, plan.json and the SVG plots.

pub mod compare;
pub mod measure;
pub mod report;

pub use compare::{Comparison, Row};
pub use measure::{Contender, MeasureOptions, Measured, measure};

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error(transparent)]
    Solve(#[from] placer_solve::SolveError),
    #[error("running the {strategy} plan: {error}")]
    Exec { strategy: String, error: placer_exec::ExecError },
    #[error(transparent)]
    Host(#[from] placer_host::HostError),
    #[error("report {path}: {reason}", path = path.display())]
    Report { path: PathBuf, reason: String },
    #[error("{reason}")]
    Usage { reason: String },
}
