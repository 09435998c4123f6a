//! After the first stage: fit each screened family, check its predictions on the
//! validation sample, and decide what the second stage measures (every configuration
//! of the families whose predictions missed) and what is predicted (the rest).

use super::{FamilyDesign, all_values, tasks_for};
use crate::record::{DesignSpec, FamilyVerdict, Fit, Measurement, Prediction, ValidationPoint};
use crate::tasks::{Task, TaskList};
use placer_ir::Model;
use std::collections::HashMap;

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
    plan: &FamilyDesign,
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
    plans: &[FamilyDesign],
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
