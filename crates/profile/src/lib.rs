//! The profiler: which (node, configuration) pairs to measure, how to pack them into
//! passes, how to measure them, where the results are kept, and how two profiles
//! compare.

pub mod agreement;
pub mod checkpoint;
pub mod design;
pub mod engine;
pub mod export;
pub mod interference;
pub mod lock;
pub mod merge;
pub mod mismatch;
pub mod overhead;
pub mod pass_run;
pub mod passes;
pub mod profiler;
pub mod record;
pub mod source;
pub mod tasks;

pub use design::{Design, DesignSpec};
pub use profiler::{PassPlan, ProfileOptions, ProfileOutcome, Progress, checkpoint_name, profile_into_dir};
pub use record::{
    ActivitySample, Measurement, Mode, PoolInfo, Profile, ProfileHeader, Protocol, Shard, ShardSource, Steps,
};

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("checkpoint {path}: {reason}", path = path.display())]
    Checkpoint { path: PathBuf, reason: String },
    #[error("{reason}")]
    Mismatch { reason: String },
    /// There is no checkpoint to fall back on.
    #[error("no checkpoint in {dir}: profile a model first (placer profile MODEL, or placer pipeline)", dir = dir.display())]
    NoCheckpoint { dir: PathBuf },
    /// A checkpoint's model cannot be found again as it was profiled.
    #[error("checkpoint {checkpoint}: {reason}", checkpoint = checkpoint.display())]
    ModelSource { checkpoint: PathBuf, reason: String },
    #[error("{reason}")]
    Usage { reason: String },
    /// Shards that cannot be merged into one profile.
    #[error("{reason}")]
    Merge { reason: String },
    /// Another profiler holds the checkpoint's lock.
    #[error("checkpoint {path} is being written by {holder}: wait for it, or use another --checkpoint-dir", path = path.display())]
    Busy { path: PathBuf, holder: String },
    /// The checkpoint directory could not be created.
    #[error("cannot create {path}", path = path.display())]
    CreateDir { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Exec(#[from] placer_exec::ExecError),
    #[error(transparent)]
    Host(#[from] placer_host::HostError),
}
