//! Runs a model's schedule for real on this host: every tensor in a buffer from a memory
//! pool, every kernel timed with the monotonic clock, tensors movable between pools
//! between kernels.

mod clock;
mod data;
mod executor;
mod stats;
mod summary;

pub use clock::ClockInfo;
pub use executor::{EmulatedPoolUse, Executor, Placement, RunOptions, RunReport, StepTimes};
pub use stats::Stats;
pub use summary::{KernelRow, OpRow, RunSummary};

use placer_ir::DType;

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("tensor '{tensor}': {source}")]
    Pool { tensor: String, source: placer_pools::PoolError },
    #[error("scratch space of {bytes} bytes: {source}")]
    Scratch { bytes: u64, source: placer_pools::PoolError },
    #[error("node '{node}' ({op}): {source}")]
    Kernel { node: String, op: placer_ir::Op, source: placer_kernels::KernelError },
    #[error("tensor '{tensor}' has element type {dtype}, which the CPU kernels do not support (only f32 and i32)")]
    UnsupportedType { tensor: String, dtype: DType },
    #[error("placement lists {given} pools for {expected} tensors")]
    PlacementLength { given: usize, expected: usize },
    /// Only reachable if one node both reads and writes a tensor, which validation
    /// refuses; reported rather than panicking all the same.
    #[error("tensor '{tensor}' is read and written by the same node")]
    BufferInUse { tensor: String },
    #[error("iterations must be at least 1")]
    NoIterations,
}
