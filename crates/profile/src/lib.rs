//! The profiler: which (node, configuration) pairs to measure, how to pack them into
//! passes, how to measure them, where the results are kept, and how two profiles
//! compare.

mod agreement;
mod design;
mod engine;
mod export;
mod interference;
mod lock;
mod merge;
mod overhead;
mod pass_run;
mod passes;
mod profiler;
mod record;
mod source;
mod tasks;

// The record: what a profile holds and the checkpoint format (a leaf module).
pub use record::codec::{
    decode as decode_checkpoint, encode as encode_checkpoint, load as load_checkpoint,
    load_header as load_checkpoint_header, save as save_checkpoint,
};
pub use record::mismatch::{RESUME, Sides, differences, mismatch};
pub use record::{
    ActivitySample, CHECK_KERNEL_NS, CHECK_MIN_PAIRS, CopiesBesideSteps, Design, DesignRecord, DesignSpec,
    DesignSummary, FORMAT_NAME, FORMAT_VERSION, FamilyVerdict, Fit, IN_SITU_FORMAT, IN_SITU_VERSION, InSitu,
    InSituKernel, Interference, KernelPairs, KernelSource, LONG_KERNEL_NS, Measurement, Mode, OpInterference,
    PRECISION_FLOOR_NS, PinRule, PinRuleTarget, PoolInfo, Prediction, Profile, ProfileHeader, Protocol, ROUND_NOISE,
    RoundCheck, Shard, ShardSource, SignatureInterference, StepOverhead, Steps, ValidationPoint, WAKE_UP_MIN_STEPS,
    merge as merge_measurements,
};

// What to measure, and in which passes.
pub use design::verdict::{Judgement, allowed_error_ns, judge, judge_family};
pub use design::{
    FamilyDesign, all_values, design_families, design_family, first_stage_tasks, screening_points, tasks_for,
    validation_count,
};
pub use passes::{
    Pick, ScheduleStats, conflicts, lower_bound, schedule as schedule_passes, schedule_alone, stats as pass_stats,
};
pub use tasks::{
    ANY_POOL, Choice, Family, MAX_CONFIGS_PER_NODE, NEGLIGIBLE_SHARE, Pin, PinTarget, RuleCounts, Rules, SplitMix64,
    Task, TaskList, enumerate as enumerate_tasks, mask_negligible, negligible_operands, sample as sample_tasks,
    signature,
};

// Measuring a profile into its checkpoint.
pub use interference::{
    CopyBench, FIXED_MIN_NS, FIXED_PAIRS as INTERFERENCE_FIXED_PAIRS, MAX_SIGNATURES, PAIRS as INTERFERENCE_PAIRS,
    SIGNATURE_MIN_NS,
};
pub use lock::{CheckpointLock, lock as lock_checkpoint, lock_path};
pub use profiler::{
    Foreign, LIVE_STEP_FLOPS, PassSchedule, ProfileOptions, ProfileOutcome, Progress, QUIET_CHECK,
    calibrates_interference, check_passes, checkpoint_name, checkpoint_name_of, checkpoint_stem, default_steps,
    footprint_fits, is_finished, measures_step_overhead, pack as pack_passes, profile_into_dir, run_to_checkpoint,
    schedule as schedule_profile,
};

// Reading profiles back: the latest for a model, exports, merges, comparisons.
pub use agreement::{
    Agreement, AgreementReport, AllDramReference, Anchor, Bias, BiasCause, CompareOptions, ISOLATION_MIN_NS,
    ISOLATION_TOLERANCE, InSituGroup, InSituReport, InSituRow, IsolationCheck, IsolationClass, IsolationRow, Pace,
    Paired, PlanEffectOp, ProfileFacts, ProfileTime, Row, WORST, compare, compare_in_situ, compare_with_repeat,
    median_se, scatter_svg, significant,
};
pub use export::{csv as export_csv, json as export_json};
pub use merge::{
    MIN_FLOOR, Merged, NOISE_FACTOR, SPEED_KERNEL_NS, default_output, merge as merge_shards, merge_files, noise_floor,
    relative_time,
};
pub use source::{Profiled, latest, latest_of, profiled};

/// The measuring machinery, for the examples in `crates/profile/examples` that time
/// passes one at a time (whole against picked steps, the base picks): not part of the
/// crate's surface, and free to change with the profiler.
#[doc(hidden)]
pub mod lab {
    pub use crate::engine::Engine;
    pub use crate::pass_run::{PassContext, PassResult, base_placement, reference_pass, run_pass};
}

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("checkpoint {path}: {reason}", path = path.display())]
    Checkpoint { path: PathBuf, reason: String },
    #[error("{reason}")]
    Mismatch { reason: String },
    /// An in-situ record (`placer run --plan ... --in-situ`) that cannot be read or written.
    #[error("in-situ record {path}: {reason}", path = path.display())]
    InSitu { path: PathBuf, reason: String },
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
    /// Another framework's own training step, timed for the step overhead, failed.
    #[error("the framework's own training step failed: {reason}")]
    WholeStep { reason: String },
    #[error(transparent)]
    Exec(#[from] placer_exec::ExecError),
    #[error(transparent)]
    Host(#[from] placer_host::HostError),
}
