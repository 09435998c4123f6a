//! Runs a model's schedule for real on this host: every tensor in a buffer from a memory
//! pool, every kernel timed with the monotonic clock, tensors movable between pools
//! between kernels.

mod clock;
mod data;
mod executor;
mod invoke;
mod launcher;
mod layout;
mod plan_run;
mod planned;
mod runner;
mod stats;
mod summary;

pub use clock::ClockInfo;
pub use data::SplitMix64;
pub use executor::{EmulatedPoolUse, Executor, PoolAssignment, RunOptions, RunReport, StepTimes};
pub use launcher::as_launcher;
pub use layout::first_fit;
pub use plan_run::{PlanExecutor, PlanRunReport, PlanStepTimes};
pub use planned::{CopyKind, ExecPlan, PlannedMove, PlannedSpan, SideWaits, reserved_bytes};
pub use runner::{KernelRunner, SharedRunner};
pub use stats::Stats;
pub use summary::{KernelRow, OpRow, RunSummary};

use placer_ir::DType;

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    // The inner errors are part of the message rather than `source`s, so `{:#}` shows
    // them once.
    #[error("tensor '{tensor}': {error}")]
    Pool { tensor: String, error: placer_pools::PoolError },
    #[error("scratch space of {bytes} bytes: {error}")]
    Scratch { bytes: u64, error: placer_pools::PoolError },
    #[error("node '{node}' ({op}): {error}")]
    Kernel { node: String, op: placer_ir::Op, error: placer_kernels::KernelError },
    #[error(
        "tensor '{tensor}' has element type {dtype}, which the CPU kernels do not support (only f32, i32, i64 and u8)"
    )]
    UnsupportedType { tensor: String, dtype: DType },
    #[error("placement lists {given} pools for {expected} tensors")]
    AssignmentLength { given: usize, expected: usize },
    /// A kernel needs a tensor this executor holds no buffer for: one that holds only
    /// some tensors (`Executor::hold`) was asked to run a kernel it was not given, or,
    /// which validation refuses, one node both reads and writes the tensor.
    #[error("tensor '{tensor}' has no buffer here: not held by this executor, or read and written by one node")]
    NoBuffer { tensor: String },
    /// A kernel runner other than placer's own failed on a node.
    #[error("node '{node}': {reason}")]
    Runner { node: String, reason: String },
    #[error("plan: {reason}")]
    Plan { reason: String },
    #[error("background copy: {reason}")]
    Copy { reason: String },
    #[error("iterations must be at least 1")]
    NoIterations,
}
