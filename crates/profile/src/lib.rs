//! The profiler: which (node, configuration) pairs to measure, how to pack them into
//! passes, how to measure them, where the results are kept, and how two profiles
//! compare.

pub mod checkpoint;
pub mod compare;
pub mod export;
pub mod measure;
pub mod passes;
pub mod record;
pub mod session;
pub mod tasks;

pub use record::{Measurement, Mode, PoolInfo, Profile, ProfileHeader, Protocol};
pub use session::{Plan, ProfileOptions, Progress, checkpoint_name};

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("checkpoint {path}: {reason}", path = path.display())]
    Checkpoint { path: PathBuf, reason: String },
    #[error("{reason}")]
    Mismatch { reason: String },
    #[error("{reason}")]
    Usage { reason: String },
    #[error(transparent)]
    Exec(#[from] placer_exec::ExecError),
    #[error(transparent)]
    Host(#[from] placer_host::HostError),
}
