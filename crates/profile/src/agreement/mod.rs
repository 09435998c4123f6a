//! Comparing two profiles of the same model: does simultaneous profiling measure what
//! single-config profiling measures, or do two runs of one agree?
//!
//! Measurements are joined on their key, `(signature, config)`, and every joined pair (a
//! [`Row`]) gets the ratio of medians B/A and a significance test. Kernels shorter than
//! `min_us` in A are *tiny*: timer resolution, the clock read and launch overheads are a
//! large part of their time, so they are summarised apart and never decide the verdict.
//!
//! The reference system (AutoTM) found its simultaneous profiles disagreed with single
//! ones (median ratio 1.18, 33% within ±10%, worst 5.8x); [`AgreementReport::meets`] is the
//! check that placer's do not.

mod all_dram;
mod bias;
mod floor;
mod in_situ;
mod isolation;
mod lookup;
mod plot;
mod stats;
#[cfg(test)]
mod tests;

pub use all_dram::{AllDramReference, Pace, PlanEffectOp};
pub use bias::{Bias, BiasCause};
pub use in_situ::{InSituGroup, InSituReport, InSituRow, compare_in_situ};
pub use isolation::{Anchor, ISOLATION_MIN_NS, ISOLATION_TOLERANCE, IsolationCheck, IsolationClass, IsolationRow};
pub use lookup::ProfileTime;
pub use plot::scatter_svg;
pub use stats::{Agreement, Paired, median_se, significant};

use crate::ProfileError;
use crate::record::{Measurement, PoolInfo, Prediction, Profile};
use floor::{joint_floor, repeats_note, shortfall};
use serde::Serialize;
use stats::EDGE_SLACK;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

/// How many of the worst offenders an [`AgreementReport`] keeps.
pub const WORST: usize = 10;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareOptions {
    /// Relative difference of medians (|B/A − 1|) that counts as agreement.
    pub tolerance: f64,
    /// Kernels whose median in A is below this (µs) are tiny: summarised separately and
    /// left out of the verdict.
    pub min_us: f64,
    /// Share of non-tiny kernels that must agree within `tolerance`.
    pub share: f64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions { tolerance: 0.05, min_us: 50.0, share: 0.95 }
    }
}

/// What one profile was, for the report's facts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProfileFacts {
    /// `Mode::label()`: "single" or "simultaneous (...)".
    pub mode: String,
    /// Whose kernels were timed: "placer's kernels", or another framework's in words.
    pub kernels: String,
    pub host_fingerprint: String,
    pub emulated: bool,
    pub passes_total: u32,
    pub passes_done: u32,
    pub wall_seconds: f64,
    pub measurements: usize,
}

impl ProfileFacts {
    fn of(p: &Profile) -> ProfileFacts {
        ProfileFacts {
            mode: p.header.mode.label(),
            kernels: p.kernels.as_ref().map_or_else(|| "placer's".to_string(), |k| k.describe()),
            host_fingerprint: p.header.host_fingerprint.clone(),
            emulated: p.header.emulated || p.header.pools.iter().any(|pool| pool.emulated_as.is_some()),
            passes_total: p.passes_total,
            passes_done: p.passes_done,
            wall_seconds: p.wall_seconds,
            measurements: p.measurements.len(),
        }
    }
}

/// One kernel signature in one configuration, measured by both profiles.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub signature: u64,
    /// The node A measured (B may have measured another instance of the signature).
    pub node: String,
    pub op: String,
    /// The pool of each operand, by name, in operand order: `pmem,dram,dram`.
    pub config: String,
    pub a_us: f64,
    pub b_us: f64,
    pub a_mad_us: f64,
    pub b_mad_us: f64,
    pub a_count: u32,
    pub b_count: u32,
    /// B/A.
    pub ratio: f64,
    /// The difference of medians exceeds what the two spreads explain (see [`significant`]).
    pub significant: bool,
    /// A's median is below `min_us`.
    pub tiny: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgreementReport {
    pub model_name: String,
    pub model_hash: String,
    /// The pool names, for reading `Row::config`.
    pub pools: Vec<String>,
    pub options: CompareOptions,
    pub a: ProfileFacts,
    pub b: ProfileFacts,
    /// B's wall time over A's; `None` when A took no time.
    pub wall_ratio: Option<f64>,
    /// Either profile has an emulated pool: its timings are not measurements of the device.
    pub emulated: bool,
    /// Keys measured by both.
    pub matched: usize,
    /// Keys measured by only one side.
    pub only_in_a: usize,
    pub only_in_b: usize,
    /// Matched keys left out because a median is zero or not a number.
    pub unusable: usize,
    pub non_tiny: Agreement,
    pub tiny: Agreement,
    /// The non-tiny rows furthest from agreement (by |ln B/A|), worst first.
    pub worst: Vec<Row>,
    /// The non-tiny share within tolerance reaches `options.share`, over at least one row.
    pub meets: bool,
    /// One line saying whether the profiles agree and by how much.
    pub verdict: String,
    pub notes: Vec<String>,
    /// The noise floor, when a repeat of A was given: A against its repeat, over the
    /// kernels of at least `min_us`. Disagreement between A and B is meaningful only
    /// beyond this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor: Option<Agreement>,
    /// When B's repeat was given too: A against its repeat and B against its, each
    /// alone. `floor` is then both together ([`compare_with_repeat`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub a_repeat: Option<Agreement>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b_repeat: Option<Agreement>,
    /// B/A against the floor kernel by kernel, when there is a floor: whether B/A's
    /// share falls short of the floor's beyond chance ([`Paired`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paired: Option<Paired>,
    /// B's kernels as a whole off A's beyond 1% and beyond the floor's own shift, and
    /// the likely cause ([`bias`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bias: Option<Bias>,
    /// Every matched row, in A's measurement order.
    pub rows: Vec<Row>,
    /// When either profile is a screening design: its predictions against the other
    /// profile's measurements of the same configurations (ratio B/A as always), over the
    /// kernels of at least `min_us`. The configurations both measured are the noise
    /// floor they are judged against (`non_tiny`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted: Option<Agreement>,
    /// The rows behind `predicted`, tiny ones included.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub predicted_rows: Vec<Row>,
}

impl AgreementReport {
    /// The `n` non-tiny rows furthest from agreement (by |ln B/A|), worst first; ties keep
    /// A's order, so the list is deterministic.
    pub fn worst_offenders(&self, n: usize) -> Vec<Row> {
        let mut rows: Vec<&Row> = self.rows.iter().filter(|r| !r.tiny).collect();
        rows.sort_by(|x, y| y.ratio.ln().abs().total_cmp(&x.ratio.ln().abs()));
        rows.into_iter().take(n).cloned().collect()
    }
}

fn describe_pools(pools: &[PoolInfo]) -> String {
    pools
        .iter()
        .map(|p| match &p.emulated_as {
            Some(device) => format!("{} ({}, emulated as {device})", p.name, p.kind),
            None => format!("{} ({})", p.name, p.kind),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn config_names(config: &[u16], pools: &[PoolInfo]) -> String {
    config
        .iter()
        .map(|&i| pools.get(usize::from(i)).map_or_else(|| format!("pool#{i}"), |p| p.name.clone()))
        .collect::<Vec<_>>()
        .join(",")
}

fn percent(v: f64) -> String {
    format!("{:.1}%", 100.0 * v)
}

/// Compares B against A. Refuses profiles of different models or pool layouts (their
/// keys would join things that are not the same kernel in the same memory); different
/// hosts, protocols or pins are allowed and noted.
pub fn compare(a: &Profile, b: &Profile, options: &CompareOptions) -> Result<AgreementReport, ProfileError> {
    Ok(judge(a, b, measure(a, b, options)?, None))
}

/// Refuses a tolerance, kernel floor or share that cannot be meant.
fn check_options(options: &CompareOptions) -> Result<(), ProfileError> {
    let usage = |reason: String| Err(ProfileError::Usage { reason });
    if !(options.tolerance.is_finite() && options.tolerance >= 0.0) {
        return usage(format!("tolerance {} must be a fraction of at least 0 (0.05 is ±5%)", options.tolerance));
    }
    if !(options.min_us.is_finite() && options.min_us >= 0.0) {
        return usage(format!("minimum kernel time {} µs must be at least 0", options.min_us));
    }
    if !(0.0..=1.0).contains(&options.share) {
        return usage(format!("share {} must be between 0 and 1", options.share));
    }
    Ok(())
}

/// The rows and summaries of B against A, judged against `share` alone; no bias and no
/// verdict yet ([`judge`] adds them).
fn measure(a: &Profile, b: &Profile, options: &CompareOptions) -> Result<AgreementReport, ProfileError> {
    check_options(options)?;
    let (ha, hb) = (&a.header, &b.header);
    if ha.model_hash != hb.model_hash {
        return Err(ProfileError::Mismatch {
            reason: format!(
                "profiles of different models: A is {} (model hash {}), B is {} (model hash {})",
                ha.model_name,
                short(&ha.model_hash),
                hb.model_name,
                short(&hb.model_hash)
            ),
        });
    }
    if ha.pools != hb.pools {
        return Err(ProfileError::Mismatch {
            reason: format!(
                "profiles over different pools: A has {}; B has {}",
                describe_pools(&ha.pools),
                describe_pools(&hb.pools)
            ),
        });
    }
    let mut notes = Vec::new();
    if ha.host_fingerprint != hb.host_fingerprint {
        notes.push(format!(
            "measured on different hosts (A {}, B {}): differences include the machines",
            ha.host_fingerprint, hb.host_fingerprint
        ));
    }
    if ha.protocol != hb.protocol {
        notes.push(format!(
            "different measurement protocols: A warm-up {}, reps {}-{}, precision {}, seed {}; \
             B warm-up {}, reps {}-{}, precision {}, seed {}",
            ha.protocol.warmup,
            ha.protocol.reps,
            ha.protocol.max_reps,
            ha.protocol.precision,
            ha.protocol.seed,
            hb.protocol.warmup,
            hb.protocol.reps,
            hb.protocol.max_reps,
            hb.protocol.precision,
            hb.protocol.seed
        ));
    }
    if ha.pins != hb.pins {
        let rules =
            |pins: &[crate::record::PinRule]| pins.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ");
        notes.push(format!("different --pin rules: A [{}], B [{}]", rules(&ha.pins), rules(&hb.pins)));
    }
    for (side, p) in [("A", a), ("B", b)] {
        if !p.is_complete() {
            notes.push(format!("{side} is incomplete: {} of {} passes done", p.passes_done, p.passes_total));
        }
    }

    // Rounds measure a key once each; they are merged into one measurement per key.
    let (merged_a, merged_b) = (a.merged(), b.merged());
    let (a_measurements, b_measurements) = (&merged_a, &merged_b);
    // Join on the key. A key measured twice in one profile (which the profiler does not
    // do) keeps its first measurement, and is noted.
    let mut by_key: BTreeMap<(u64, &[u16]), &Measurement> = BTreeMap::new();
    let mut duplicates = 0usize;
    for m in b_measurements {
        match by_key.entry((m.signature, m.config.as_slice())) {
            Entry::Vacant(slot) => {
                slot.insert(m);
            }
            Entry::Occupied(_) => duplicates += 1,
        }
    }
    let mut seen_a: BTreeSet<(u64, &[u16])> = BTreeSet::new();
    let mut rows = Vec::new();
    let (mut matched, mut only_in_a, mut unusable) = (0usize, 0usize, 0usize);
    for ma in a_measurements {
        let key = (ma.signature, ma.config.as_slice());
        if !seen_a.insert(key) {
            duplicates += 1;
            continue;
        }
        let Some(mb) = by_key.get(&key) else {
            only_in_a += 1;
            continue;
        };
        matched += 1;
        let usable = |m: &Measurement| m.median_ns.is_finite() && m.median_ns > 0.0;
        if !usable(ma) || !usable(mb) {
            unusable += 1;
            continue;
        }
        let a_us = ma.median_ns / 1e3;
        rows.push(Row {
            signature: ma.signature,
            node: ma.node.clone(),
            op: ma.op.clone(),
            config: config_names(&ma.config, &ha.pools),
            a_us,
            b_us: mb.median_ns / 1e3,
            a_mad_us: ma.mad_ns / 1e3,
            b_mad_us: mb.mad_ns / 1e3,
            a_count: ma.count,
            b_count: mb.count,
            ratio: mb.median_ns / ma.median_ns,
            significant: significant(ma, mb),
            tiny: a_us < options.min_us,
        });
    }
    let only_in_b = by_key.len() - matched;
    if only_in_a > 0 || only_in_b > 0 {
        notes.push(format!(
            "{only_in_a} measurement(s) only in A and {only_in_b} only in B are not compared \
             (a sampled or incomplete profile measures fewer)"
        ));
    }
    if duplicates > 0 {
        notes.push(format!("{duplicates} measurement(s) repeat a key within one profile; the first was used"));
    }
    if unusable > 0 {
        notes.push(format!("{unusable} matched pair(s) have a zero or invalid median and are left out"));
    }

    let predicted_rows = predicted_rows(a, b, &merged_a, &merged_b, options);
    let non_tiny = Agreement::of(rows.iter().filter(|r| !r.tiny), options.tolerance);
    let predicted = (!predicted_rows.is_empty())
        .then(|| Agreement::of(predicted_rows.iter().filter(|r| !r.tiny), options.tolerance));
    let tiny = Agreement::of(rows.iter().filter(|r| r.tiny), options.tolerance);
    if tiny.rows > 0 {
        notes.push(format!(
            "{} kernel(s) under {} µs in A are summarised apart: timer and launch overheads dominate them",
            tiny.rows, options.min_us
        ));
    }
    let emulated_pools: Vec<String> =
        ha.pools.iter().filter_map(|p| p.emulated_as.as_ref().map(|d| format!("'{}' as {d}", p.name))).collect();
    let (fa, fb) = (ProfileFacts::of(a), ProfileFacts::of(b));
    let emulated = fa.emulated || fb.emulated;
    if emulated {
        notes.push(format!(
            "EMULATED: {} stand(s) in DRAM for the device; these timings are not measurements of it",
            if emulated_pools.is_empty() { "a pool".to_string() } else { emulated_pools.join(", ") }
        ));
    }

    let meets = judged(&non_tiny, predicted.as_ref(), options.share, false);
    let mut report = AgreementReport {
        model_name: ha.model_name.clone(),
        model_hash: ha.model_hash.clone(),
        pools: ha.pools.iter().map(|p| p.name.clone()).collect(),
        options: options.clone(),
        wall_ratio: (a.wall_seconds > 0.0).then(|| b.wall_seconds / a.wall_seconds),
        a: fa,
        b: fb,
        emulated,
        matched,
        only_in_a,
        only_in_b,
        unusable,
        non_tiny,
        tiny,
        worst: Vec::new(),
        meets,
        verdict: String::new(),
        floor: None,
        a_repeat: None,
        b_repeat: None,
        paired: None,
        bias: None,
        notes,
        rows,
        predicted,
        predicted_rows,
    };
    report.worst = report.worst_offenders(WORST);
    if report.non_tiny.rows == 0 {
        report.notes.push(format!(
            "no kernel of at least {} µs was measured by both profiles: there is nothing to judge agreement on",
            options.min_us
        ));
    }
    Ok(report)
}

/// `report` judged against the floor's rows (non-tiny; A against its repeat, or both
/// repeats) when there are some: the share needed, the shift named, the verdict. Below
/// the floor's share, B/A still agrees when enough kernels differ between the two to
/// judge and its shortfall is within chance ([`Paired`]): with B as good as a repeat,
/// its share falls below the floor's about half the time.
fn judge(a: &Profile, b: &Profile, mut report: AgreementReport, floor: Option<Vec<Row>>) -> AgreementReport {
    let o = report.options.clone();
    report.paired = floor.as_ref().map(|rows| Paired::of(&report.rows, rows, o.tolerance));
    let floor = floor.map(|rows| Agreement::of(rows.iter(), o.tolerance));
    if let Some(f) = floor.as_ref().and_then(|f| f.within_tolerance) {
        let by_chance = f < o.share && report.paired.is_some_and(|p| p.within_chance());
        report.meets = judged(&report.non_tiny, report.predicted.as_ref(), o.share.min(f), by_chance);
    }
    let floor_median = floor.as_ref().and_then(|f| f.median_ratio);
    report.bias = report.non_tiny.median_ratio.and_then(|m| bias::judge(a, b, m, floor_median, o.min_us));
    report.floor = floor;
    report.verdict = verdict(&report);
    report
}

/// Whether B agrees with A: over at least one row, `share` of the kernels within
/// tolerance, or short of it only by chance (`by_chance`). Predictions are held to
/// `share`, or to how well the two profiles' measurements of one configuration agree,
/// whichever is lower: a prediction cannot agree better than a second measurement does.
fn judged(measured: &Agreement, predicted: Option<&Agreement>, share: f64, by_chance: bool) -> bool {
    let within = measured.within_tolerance.unwrap_or(0.0);
    let predictions_agree =
        predicted.is_none_or(|p| p.rows == 0 || p.within_tolerance.unwrap_or(0.0) + EDGE_SLACK >= share.min(within));
    measured.rows > 0 && (within + EDGE_SLACK >= share || by_chance) && predictions_agree
}

/// [`compare`] of B against A, judged against the noise floor when `repeat` (A measured
/// again, same model and mode) is given: the share within tolerance is then needed only
/// up to the floor's agreement (a second profile cannot agree with A better than A
/// agrees with itself), or short of it only by chance ([`judge`]), and a shift of B's
/// kernels as a whole counts only beyond the floor's. Without `repeat` the report says
/// that the floor is missing.
///
/// With `repeat_b` (B measured again) as well, the floor carries B's noise beside A's:
/// B/A strays by both, and a profile measured in a few seconds carries the host's pace
/// of those seconds where one measured over minutes averages it ([`joint_floor`]).
pub fn compare_with_repeat(
    a: &Profile,
    b: &Profile,
    repeat: Option<&Profile>,
    repeat_b: Option<&Profile>,
    options: &CompareOptions,
) -> Result<AgreementReport, ProfileError> {
    let mut report = measure(a, b, options)?;
    let floor = match (repeat, repeat_b) {
        (None, Some(_)) => {
            return Err(ProfileError::Usage {
                reason: "a repeat of B needs a repeat of A too: the floor of B/A is both profiles' noise".into(),
            });
        }
        (None, None) => {
            report.notes.push(
                "no noise floor: these figures are not judged against A measured again (`--repeat A2.ckpt`, a \
                 second profile of A's model and mode, gives one)"
                    .into(),
            );
            None
        }
        (Some(repeat), None) => Some(measure(a, repeat, options)?.rows.into_iter().filter(|r| !r.tiny).collect()),
        (Some(repeat), Some(repeat_b)) => {
            let (of_a, of_b) = (measure(a, repeat, options)?, measure(b, repeat_b, options)?);
            let floor = joint_floor(&of_a.rows, &of_b.rows);
            if let Some(note) = repeats_note(&of_a.non_tiny, &of_b.non_tiny, a, b) {
                report.notes.push(note);
            }
            report.a_repeat = Some(of_a.non_tiny);
            report.b_repeat = Some(of_b.non_tiny);
            Some(floor)
        }
    };
    Ok(judge(a, b, report, floor))
}

/// One side's predictions joined with the other side's measurements.
fn predicted_rows(
    a: &Profile,
    b: &Profile,
    merged_a: &[Measurement],
    merged_b: &[Measurement],
    options: &CompareOptions,
) -> Vec<Row> {
    let index = |ms: &[Measurement]| -> BTreeMap<(u64, Vec<u16>), Measurement> {
        ms.iter().map(|m| ((m.signature, m.config.clone()), m.clone())).collect()
    };
    let (measured_a, measured_b) = (index(merged_a), index(merged_b));
    let pools = &a.header.pools;
    let row = |p: &Prediction, m: &Measurement, predicted_in_a: bool| {
        let (a_ns, b_ns) = if predicted_in_a { (p.predicted_ns, m.median_ns) } else { (m.median_ns, p.predicted_ns) };
        let (a_mad, b_mad, a_count, b_count) =
            if predicted_in_a { (0.0, m.mad_ns, 0, m.count) } else { (m.mad_ns, 0.0, m.count, 0) };
        Row {
            signature: p.signature,
            node: p.node.clone(),
            op: p.op.clone(),
            config: config_names(&p.config, pools),
            a_us: a_ns / 1e3,
            b_us: b_ns / 1e3,
            a_mad_us: a_mad / 1e3,
            b_mad_us: b_mad / 1e3,
            a_count,
            b_count,
            ratio: b_ns / a_ns,
            // Only the measured side has a spread: the prediction is taken as exact.
            significant: (b_ns - a_ns).abs() > 3.0 * median_se(m.mad_ns, m.count),
            // Whether a kernel is tiny is judged on its measured time.
            tiny: m.median_ns / 1e3 < options.min_us,
        }
    };
    let usable = |x: f64| x.is_finite() && x > 0.0;
    let mut rows: Vec<Row> = Vec::new();
    for (predictions, measured, in_a) in [(a.predictions(), &measured_b, true), (b.predictions(), &measured_a, false)] {
        for p in predictions {
            if let Some(m) = measured.get(&(p.signature, p.config.clone()))
                && usable(p.predicted_ns)
                && usable(m.median_ns)
            {
                rows.push(row(p, m, in_a));
            }
        }
    }
    rows
}

fn short(hash: &str) -> &str {
    hash.get(..16).unwrap_or(hash)
}

fn verdict(c: &AgreementReport) -> String {
    let o = &c.options;
    let emulated = if c.emulated { " (EMULATED pools)" } else { "" };
    let n = &c.non_tiny;
    if n.rows == 0 {
        return format!("profiles cannot be judged: no kernel of at least {} µs in both{emulated}", o.min_us);
    }
    let within = n.within_tolerance.unwrap_or(0.0);
    let median = n.median_ratio.unwrap_or(f64::NAN);
    // Beside each figure, the floor's: A against its repeat.
    let floor = c.floor.as_ref();
    let needed = match (floor.and_then(|f| f.within_tolerance), &c.paired) {
        (Some(f), Some(p)) if f < o.share && within + EDGE_SLACK < f => format!(
            "the floor's {}: {} kernel(s) within it only in the floor, {} only here; {}",
            percent(f),
            p.worse,
            p.better,
            shortfall(p)
        ),
        (Some(f), _) if f < o.share => format!("needed {}, the floor's", percent(f)),
        _ => format!("needed {}", percent(o.share)),
    };
    let floor_median = floor.and_then(|f| f.median_ratio).map_or_else(String::new, |m| format!(" (floor {m:.3})"));
    let head = format!(
        "{} of {} kernel(s) of at least {} µs within ±{} ({needed}); median B/A {:.3}{floor_median}",
        percent(within),
        n.rows,
        o.min_us,
        percent(o.tolerance),
        median
    );
    // Last, before the EMULATED label: the shift's likely cause, or that no floor judged it.
    let shift = match (&c.bias, floor) {
        (Some(b), _) => format!("; {}", b.text),
        (None, None) => "; no noise floor".into(),
        (None, Some(_)) => String::new(),
    };
    let worst = c
        .worst
        .first()
        .map(|w| format!(", worst {:.2}x ({} {} {})", w.ratio, w.op, w.node, w.config))
        .unwrap_or_default();
    let predicted = match &c.predicted {
        Some(p) if p.rows > 0 => format!(
            "; predicted configurations {} of {} within ±{} (median B/A {:.3})",
            percent(p.within_tolerance.unwrap_or(0.0)),
            p.rows,
            percent(o.tolerance),
            p.median_ratio.unwrap_or(f64::NAN)
        ),
        _ => String::new(),
    };
    if c.meets {
        format!("profiles agree: {head}{predicted}{shift}{emulated}")
    } else {
        format!("profiles disagree: {head}{worst}{predicted}{shift}{emulated}")
    }
}
