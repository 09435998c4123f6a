//! After the first stage: fit each screened family, check its predictions on the
//! validation sample, and decide what the second stage measures (every configuration
//! of the families whose predictions missed) and what is predicted (the rest).

use super::model::Fit;
use super::{DesignSpec, FamilyPlan, all_values, tasks_for};
use crate::record::Measurement;
use crate::tasks::{Task, TaskList};
use placer_ir::Model;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One validation configuration: measured, and predicted from the design alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidationPoint {
    /// Pool of each operand, `Node::operands` order.
    pub config: Vec<u16>,
    pub measured_ns: f64,
    pub predicted_ns: f64,
    /// The largest |predicted − measured| accepted ([`allowed_error_ns`]).
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

/// The standard error of a median estimated from its MAD: 1.2533·1.4826·MAD/√n.
fn median_se(m: &Measurement) -> f64 {
    1.2533 * 1.4826 * m.mad_ns / f64::from(m.count.max(1)).sqrt()
}

/// The largest error accepted for a prediction of `m` whose own standard error is
/// `predicted_se`: the tolerance share of the median, or three standard errors of the
/// difference (measurement and prediction), or `spec.min_error_ns`, whichever is
/// largest. A prediction cannot be held to a precision its inputs and the measurement
/// lack.
pub fn allowed_error_ns(m: &Measurement, predicted_se: f64, spec: &DesignSpec) -> f64 {
    (spec.tolerance * m.median_ns).max(3.0 * median_se(m).hypot(predicted_se)).max(spec.min_error_ns)
}

/// The standard error of the fit's prediction at `values`: the fit is linear in the
/// design points' times (away from its clamp), so each point's standard error counts
/// with the weight its time has in the prediction, found by refitting with that time
/// moved by 1 ns.
fn prediction_se<'m>(
    factors: usize,
    pools: u16,
    values: &[u16],
    design: &[Vec<u16>],
    lookup: &impl Fn(&[u16]) -> Option<&'m Measurement>,
) -> f64 {
    let time = |v: &[u16], moved: &[u16]| lookup(v).map(|m| m.median_ns + if v == moved { 1.0 } else { 0.0 });
    let Some(at) = Fit::from_design(factors, pools, |v| time(v, &[])).map(|f| f.predict(values)) else {
        return 0.0;
    };
    design
        .iter()
        .filter_map(|point| {
            let weight = Fit::from_design(factors, pools, |v| time(v, point))?.predict(values) - at;
            Some((weight * median_se(lookup(point)?)).powi(2))
        })
        .sum::<f64>()
        .sqrt()
}

/// Fits one screened family of `factors` factors to its design, predicts its
/// validation sample and says why it must be measured in full, if it must. `lookup`
/// gives the merged measurement of a configuration by its factor values.
pub fn judge_family<'m>(
    plan: &FamilyPlan,
    factors: usize,
    pools: u16,
    lookup: impl Fn(&[u16]) -> Option<&'m Measurement>,
    spec: &DesignSpec,
) -> (Option<Fit>, Vec<ValidationPoint>, Option<String>) {
    let Some(fit) = Fit::from_design(factors, pools, |v| lookup(v).map(|m| m.median_ns)) else {
        return (None, Vec::new(), Some("a design configuration was not measured".into()));
    };
    let validation: Vec<ValidationPoint> = plan
        .validation
        .iter()
        .filter_map(|v| {
            let m = lookup(v)?;
            let se = prediction_se(factors, pools, v, &plan.design, &lookup);
            Some(ValidationPoint {
                config: m.config.clone(),
                measured_ns: m.median_ns,
                predicted_ns: fit.predict(v),
                allowed_ns: allowed_error_ns(m, se, spec),
            })
        })
        .collect();
    let missed: Vec<&ValidationPoint> = validation.iter().filter(|p| !p.passed()).collect();
    let fallback = if let Some(worst) = missed.iter().max_by(|a, b| a.error().abs().total_cmp(&b.error().abs())) {
        Some(format!(
            "{} of {} validation configurations missed; worst {:+.1}% ({:.1} µs predicted, {:.1} µs measured, \
             {:.1} µs allowed)",
            missed.len(),
            validation.len(),
            100.0 * worst.error(),
            worst.predicted_ns / 1e3,
            worst.measured_ns / 1e3,
            worst.allowed_ns / 1e3
        ))
    } else if validation.is_empty() {
        Some("no validation configuration was measured".into())
    } else {
        None
    };
    (Some(fit), validation, fallback)
}

/// What the first stage decided.
#[derive(Debug, Clone)]
pub struct Judgement {
    pub families: Vec<FamilyVerdict>,
    pub predictions: Vec<Prediction>,
    /// The second stage: every configuration of the failed families not yet measured.
    pub second_stage: Vec<Task>,
}

/// Judges every family on `measured` (merged rounds of the first stage).
pub fn judge(
    model: &Model,
    list: &TaskList,
    plans: &[FamilyPlan],
    measured: &[Measurement],
    reference_ns: &[f64],
    pools: u16,
    spec: &DesignSpec,
) -> Judgement {
    let by_key: HashMap<(u64, &[u16]), &Measurement> =
        measured.iter().map(|m| ((m.signature, m.config.as_slice()), m)).collect();
    let mut families = Vec::with_capacity(plans.len());
    let mut predictions = Vec::new();
    let mut refit: Vec<(usize, Vec<u16>)> = Vec::new();
    for plan in plans {
        let family = &list.families[plan.family];
        let first = model.node(family.instances[0]);
        let k = family.factors().len();
        let lookup = |v: &[u16]| by_key.get(&(family.signature, family.config(v).as_slice())).copied();
        let mut verdict = FamilyVerdict {
            signature: family.signature,
            node: first.name.clone(),
            op: first.op.to_string(),
            configurations: u64::try_from(plan.space).unwrap_or(u64::MAX),
            screened: plan.screened,
            base_twice_ns: reference_ns
                .get(family.instances[0].index())
                .copied()
                .filter(|r| *r > 0.0)
                .zip(lookup(&vec![0; k]).map(|m| m.median_ns)),
            fit: None,
            validation: Vec::new(),
            fallback: None,
        };
        if !plan.screened {
            families.push(verdict);
            continue;
        }
        let (fit, validation, fallback) = judge_family(plan, k, pools, lookup, spec);
        verdict.validation = validation;
        verdict.fallback = fallback;
        match (&fit, &verdict.fallback) {
            (Some(fit), None) => {
                let error = verdict.worst_error();
                for v in all_values(k, pools) {
                    if lookup(&v).is_none() {
                        predictions.push(Prediction {
                            signature: family.signature,
                            config: family.config(&v),
                            node: verdict.node.clone(),
                            op: verdict.op.clone(),
                            predicted_ns: fit.predict(&v),
                            validation_error: error,
                        });
                    }
                }
            }
            _ => {
                refit.extend(all_values(k, pools).into_iter().filter(|v| lookup(v).is_none()).map(|v| (plan.family, v)))
            }
        }
        verdict.fit = fit;
        families.push(verdict);
    }
    let second_stage = tasks_for(&list.families, refit.iter().map(|(f, v)| (*f, v)));
    Judgement { families, predictions, second_stage }
}
