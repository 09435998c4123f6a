//! What a profile holds: a header saying what it was measured on and how, and one
//! measurement per (kernel signature, configuration). Checkpoints store exactly this.

use serde::{Deserialize, Serialize};

pub const FORMAT_NAME: &str = "placer-profile";
/// Bumped whenever the encoding of [`Profile`] changes; older files are refused.
pub const FORMAT_VERSION: u32 = 1;

/// One pool as the profile saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolInfo {
    pub name: String,
    pub kind: String,
    /// The device model when the pool is emulated.
    pub emulated_as: Option<String>,
}

/// How kernels are measured. Identical in both modes, so profiles compare.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Protocol {
    /// Untimed whole steps at the start of every pass.
    pub warmup: u32,
    /// Timed steps per pass, at least.
    pub reps: u32,
    /// Timed steps per pass, at most (adaptive repetition stops here).
    pub max_reps: u32,
    /// More steps are run while a picked kernel's CV (MAD-based) is above this.
    pub cv_target: f64,
    /// Seed of the data every pass starts from.
    pub seed: u64,
}

/// Single-config (`max_simultaneous == 1`) or simultaneous profiling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mode {
    pub max_simultaneous: u32,
    /// Conflicts also between nodes two tensors apart.
    pub two_hop: bool,
    /// Measure only a random sample of this many tasks (with this seed).
    pub sample: Option<(u32, u64)>,
}

impl Mode {
    pub fn label(&self) -> String {
        let base = if self.max_simultaneous == 1 {
            "single".to_string()
        } else {
            format!("simultaneous (up to {} per pass{})", self.max_simultaneous, if self.two_hop { ", 2-hop" } else { "" })
        };
        match self.sample {
            Some((k, seed)) => format!("{base}, sample of {k} (seed {seed})"),
            None => base,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileHeader {
    pub format: String,
    pub version: u32,
    pub model_name: String,
    pub model_hash: String,
    pub host_fingerprint: String,
    pub pools: Vec<PoolInfo>,
    /// True when any pool is emulated: these timings are then not measurements of the
    /// device the pool stands for.
    pub emulated: bool,
    pub protocol: Protocol,
    pub mode: Mode,
    /// The `--pin` rules, as given.
    pub pins: Vec<String>,
    /// A digest of the task list and pass plan: a resumed run must follow the same plan.
    pub plan_hash: String,
}

/// One kernel signature in one configuration, measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Digest of the kernel signature (op, attributes, shapes, dtypes); with `config`,
    /// the key that profiles of the same model are joined on.
    pub signature: u64,
    /// The pool of each operand, in `Node::operands` order.
    pub config: Vec<u16>,
    /// The node instance that was measured (others with the same signature share it).
    pub node: String,
    pub op: String,
    /// Which pass measured it.
    pub pass: u32,
    /// Timed samples.
    pub count: u32,
    pub median_ns: f64,
    /// Median absolute deviation, ns.
    pub mad_ns: f64,
    pub min_ns: f64,
    pub max_ns: f64,
    /// 1.4826 · MAD / median.
    pub cv: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub header: ProfileHeader,
    pub passes_total: u32,
    pub passes_done: u32,
    /// Wall time spent profiling so far, over every run that contributed.
    pub wall_seconds: f64,
    pub clock_resolution_ns: f64,
    pub clock_overhead_ns: f64,
    pub measurements: Vec<Measurement>,
}

impl Profile {
    pub fn is_complete(&self) -> bool {
        self.passes_done >= self.passes_total
    }
}
