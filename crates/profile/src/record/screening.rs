//! What a designed profile records: which design it ran, how it judges predictions, and
//! the first stage's verdicts and predictions. Data only; the design and its judging
//! live in `design`.

use serde::{Deserialize, Serialize};

/// Which configurations a profile measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Design {
    /// Every configuration of every signature.
    Full,
    /// Base, singles and corners per family, a validation sample, and the full set for
    /// families whose validation fails.
    Screen,
}

impl Design {
    pub fn as_str(self) -> &'static str {
        match self {
            Design::Full => "full",
            Design::Screen => "screen",
        }
    }
}

/// How a designed profile is drawn and judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DesignSpec {
    pub design: Design,
    /// A validation configuration is predicted well when |predicted − measured| is at
    /// most this share of the measured median, or within the measurement's own noise
    /// (see `design::verdict::allowed_error_ns`).
    pub tolerance: f64,
    /// Errors below this many ns never send a family back: timer and launch overheads
    /// are of this size, and such an error cannot change a plan.
    pub min_error_ns: f64,
    /// Seed of the validation sample.
    pub seed: u64,
}

impl DesignSpec {
    pub fn full() -> DesignSpec {
        DesignSpec { design: Design::Full, tolerance: 0.05, min_error_ns: 20_000.0, seed: 0x5EED }
    }

    pub fn screen() -> DesignSpec {
        DesignSpec { design: Design::Screen, ..DesignSpec::full() }
    }
}

/// A family's fitted model of what a placement adds to a kernel's time (the formula and
/// why: `design::model`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// All factors in pool 0, ns.
    pub base_ns: f64,
    /// `main_ns[f][p]`: what factor f alone in pool p adds, ns (pool 0: 0).
    pub main_ns: Vec<Vec<f64>>,
    /// `interaction_ns[p]`: σ_p, ns (pool 0, and any pool without a corner: 0).
    pub interaction_ns: Vec<f64>,
}

/// One validation configuration: measured, and predicted from the design alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidationPoint {
    /// Pool of each operand, `Node::operands` order.
    pub config: Vec<u16>,
    pub measured_ns: f64,
    pub predicted_ns: f64,
    /// The largest |predicted − measured| accepted (`design::verdict::allowed_error_ns`).
    pub allowed_ns: f64,
}

impl ValidationPoint {
    /// (predicted − measured) / measured.
    pub fn error(&self) -> f64 {
        if self.measured_ns > 0.0 { (self.predicted_ns - self.measured_ns) / self.measured_ns } else { 0.0 }
    }

    pub fn passed(&self) -> bool {
        (self.predicted_ns - self.measured_ns).abs() <= self.allowed_ns
    }
}

/// What became of one family.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FamilyVerdict {
    pub signature: u64,
    /// The first node of the family, and its op.
    pub node: String,
    pub op: String,
    /// N^k, saturating.
    pub configurations: u64,
    /// False when the design was the whole space: measured in full from the start.
    pub screened: bool,
    /// The all-DRAM configuration measured twice in one run: in the reference pass (the
    /// first instance's median) and in the design (merged rounds), ns. Their agreement
    /// over all families is the noise floor the validation errors are read against.
    pub base_twice_ns: Option<(f64, f64)>,
    pub fit: Option<Fit>,
    pub validation: Vec<ValidationPoint>,
    /// Why the family was measured in full in the second stage; `None` when its
    /// predictions stand (or it was never screened).
    pub fallback: Option<String>,
}

impl FamilyVerdict {
    /// The largest |relative error| of the validation sample (0 without one).
    pub fn worst_error(&self) -> f64 {
        self.validation.iter().map(|v| v.error().abs()).fold(0.0, f64::max)
    }

    /// Whether this family's unmeasured configurations are predicted.
    pub fn predicts(&self) -> bool {
        self.screened && self.fallback.is_none()
    }
}

/// A configuration that was not measured: its time from its family's fit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub signature: u64,
    pub config: Vec<u16>,
    pub node: String,
    pub op: String,
    pub predicted_ns: f64,
    /// The family's largest |relative error| on its validation sample.
    pub validation_error: f64,
}

/// The outcome of a designed profile's first stage, kept in the checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DesignRecord {
    /// Wall time from the start of profiling to the end of the first stage (the
    /// reference pass included).
    pub first_stage_seconds: f64,
    /// Passes per round of the first stage (design and validation).
    pub first_stage_passes: u32,
    /// The global index of the first pass after the first stage (its passes times the
    /// rounds it ran): measurements of passes before it are the first stage's.
    pub first_stage_end: u32,
    /// Passes per round of the second stage (families measured in full).
    pub second_stage_passes: u32,
    pub families: Vec<FamilyVerdict>,
    pub predictions: Vec<Prediction>,
}

impl DesignRecord {
    pub fn fallbacks(&self) -> impl Iterator<Item = &FamilyVerdict> {
        self.families.iter().filter(|f| f.fallback.is_some())
    }

    /// Every validation point of every screened family.
    pub fn validation(&self) -> impl Iterator<Item = &ValidationPoint> {
        self.families.iter().flat_map(|f| &f.validation)
    }

    /// The figures a user reads: how many families, how the validation went.
    pub fn summary(&self) -> DesignSummary {
        let points: Vec<&ValidationPoint> = self.validation().collect();
        let long: Vec<&&ValidationPoint> = points.iter().filter(|p| p.measured_ns >= LONG_KERNEL_NS).collect();
        let twice: Vec<(f64, f64)> =
            self.families.iter().filter_map(|f| f.base_twice_ns).filter(|(r, _)| *r >= LONG_KERNEL_NS).collect();
        let mut errors: Vec<f64> = points.iter().map(|p| p.error().abs()).collect();
        errors.sort_by(f64::total_cmp);
        DesignSummary {
            families: self.families.len(),
            screened: self.families.iter().filter(|f| f.screened).count(),
            fallbacks: self.fallbacks().count(),
            predicted: self.predictions.len(),
            validation_points: points.len(),
            validation_passed: points.iter().filter(|p| p.passed()).count(),
            median_abs_error: errors.get(errors.len() / 2).copied().unwrap_or(0.0),
            worst_abs_error: errors.last().copied().unwrap_or(0.0),
            long_points: long.len(),
            long_within_5pct: long.iter().filter(|p| p.error().abs() <= 0.05).count(),
            floor_points: twice.len(),
            floor_within_5pct: twice.iter().filter(|(a, b)| ((b - a) / a).abs() <= 0.05).count(),
        }
    }
}

/// Kernels at least this long are the ones whose predictions the goals are about: their
/// times are well above timer and launch noise.
pub const LONG_KERNEL_NS: f64 = 1e6;

/// A screening design's figures, for the profile summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DesignSummary {
    pub families: usize,
    /// Families with more configurations than their design.
    pub screened: usize,
    /// Screened families measured in full after their validation missed.
    pub fallbacks: usize,
    /// Configurations predicted instead of measured.
    pub predicted: usize,
    pub validation_points: usize,
    /// Validation configurations predicted within their allowed error.
    pub validation_passed: usize,
    pub median_abs_error: f64,
    pub worst_abs_error: f64,
    /// Validation configurations of kernels of at least [`LONG_KERNEL_NS`], and how many
    /// of them were predicted within ±5%.
    pub long_points: usize,
    pub long_within_5pct: usize,
    /// The noise floor: families of at least [`LONG_KERNEL_NS`] whose all-DRAM time was
    /// measured twice in this run (reference pass and design), and how many of those
    /// pairs agree within ±5%.
    pub floor_points: usize,
    pub floor_within_5pct: usize,
}
