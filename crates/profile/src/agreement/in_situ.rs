//! A profile against the kernels as they ran in a plan ([`InSitu`]): what the solver was
//! told each kernel costs, set beside what it cost amid the plan's own neighbours, arena
//! reuse and background copies.
//!
//! Each kernel of the run is looked up in the profile by its signature and its pools at
//! that step, with the operands the profile never moved (its negligible-operand rule)
//! ignored, as the solver looks it up. A configuration the profile measured gives a
//! measured row; one a screening design predicted gives a predicted row; one it neither
//! measured nor predicted (the solver's cost model estimated it) is counted and left
//! out. A second run of the same plan is the noise floor: kernel by kernel, the run
//! against its repeat.
//!
//! The host's pace is the other thing a run minutes after a profile differs by. The run
//! times all-DRAM beside the plan, interleaved with it, and all-DRAM's kernels are looked
//! up in the profile as the plan's are: their median ratio is the shift common to every
//! placement ([`Pace`]): the host's pace between the profile and the run, and whatever
//! the run's steps do to every kernel alike. It moves a plan's predicted step, never
//! which placement is faster. The report gives the rows divided by it beside the rows
//! as measured. (The profile's own reference pass is no anchor: on this machine kind the
//! host's speed moved by a quarter between it and the passes after it.)

use super::all_dram::{self, AllDramReference, Pace};
use super::lookup::{Lookup, ProfileTime};
use super::stats::{EDGE_SLACK, differs};
use super::{Agreement, Bias, CompareOptions, ProfileFacts, Row, config_names, percent, short};
use crate::ProfileError;
use crate::record::{InSitu, InSituKernel, PoolInfo, Profile};
use placer_exec::Stats;
use serde::Serialize;
use std::collections::BTreeMap;

/// One kernel of the run beside the profile's time for it: A is the run, B the profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InSituRow {
    pub step: usize,
    pub from: ProfileTime,
    pub beside_copy: bool,
    /// What the plan charged this kernel for the copies beside it, µs (0 without copies,
    /// or in a record older than the charge).
    pub charged_us: f64,
    #[serde(flatten)]
    pub row: Row,
}

impl InSituRow {
    /// The solver's prediction for this kernel against the run: the profile's time plus
    /// the plan's charge, over the run's time at the profile's pace (`pace`: all-DRAM's
    /// profile/run, 1 when not known).
    /// A is then the run's time at that pace, B the prediction.
    fn prediction(&self, pace: f64) -> Row {
        let r = &self.row;
        let (a_us, a_mad_us, b_us) = (r.a_us * pace, r.a_mad_us * pace, r.b_us + self.charged_us);
        let significant = differs(a_us * 1e3, a_mad_us * 1e3, r.a_count, b_us * 1e3, r.b_mad_us * 1e3, r.b_count);
        Row { a_us, a_mad_us, b_us, ratio: b_us / a_us, significant, ..r.clone() }
    }
}

/// One op's kernels beside a background copy: what the copies cost them in the run
/// against what the plan charged for them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CopyCharge {
    pub op: String,
    pub kernels: usize,
    pub copies_charged_ms: f64,
    /// Σ (run × pace − profile) over those kernels: their time in the run, at the
    /// profile's pace, beyond the profile's.
    pub copies_cost_ms: f64,
}

/// A group of rows: an op, or a configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InSituGroup {
    pub name: String,
    pub agreement: Agreement,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InSituReport {
    pub model_name: String,
    pub model_hash: String,
    pub pools: Vec<String>,
    pub options: CompareOptions,
    /// The plan that ran, and the profile judged against it.
    pub plan: String,
    pub run_steps: u32,
    pub profile: ProfileFacts,
    pub emulated: bool,
    /// Kernels of the run, and those whose configuration the profile neither measured
    /// nor predicted.
    pub kernels: usize,
    pub unknown: usize,
    /// Over the rows of at least `min_us` in the run: every one, the measured ones, the
    /// predicted ones, and those with a background copy beside them.
    pub all: Agreement,
    pub measured: Agreement,
    pub predicted: Agreement,
    pub beside_copy: Agreement,
    /// The kernels beside a copy again, each profile time plus what the plan charged for
    /// its copies: the solver's whole prediction for them. `None` when the run kept no
    /// charge (no copies, or a record older than the charge).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beside_copy_charged: Option<Agreement>,
    pub apart_from_copies: Agreement,
    pub tiny: Agreement,
    /// The shift common to every placement, when the run timed all-DRAM beside the plan;
    /// `paced` is `all` with every ratio divided by it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pace: Option<Pace>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paced: Option<Agreement>,
    /// The run against its repeat, kernel by kernel (at least `min_us`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor: Option<Agreement>,
    /// What the verdict judges: the solver's prediction for every kernel (the profile's
    /// time plus the plan's charge for the copies beside it) over the run's time at the
    /// profile's pace, when the pace is known; `judged_paced` says whether it was.
    pub judged: Agreement,
    pub judged_paced: bool,
    /// The repeat's pace against the run's (all-DRAM's run/repeat, the shift between the
    /// two runs), by which the floor's ratios are divided when the verdict is paced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_pace: Option<f64>,
    /// Per op, the kernels beside a copy: their copies' cost in the run against the charge.
    pub copy_charges: Vec<CopyCharge>,
    /// All-DRAM's run as a second reference: the profile against it, and the plan's own
    /// kernels against it ([`all_dram`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all_dram: Option<AllDramReference>,
    /// `judged`, per op and per configuration of the operands' pools.
    pub per_op: Vec<InSituGroup>,
    pub per_config: Vec<InSituGroup>,
    /// The profile's times as a whole off the run's beyond 1% and the floor, and the
    /// likely cause.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bias: Option<Bias>,
    /// The kernels `judged` finds furthest off: each row's A is the run at the pace, B
    /// the prediction.
    pub worst: Vec<InSituRow>,
    pub meets: bool,
    pub verdict: String,
    pub notes: Vec<String>,
    pub rows: Vec<InSituRow>,
}

impl InSituReport {
    /// The `n` kernels of at least `min_us` whose prediction is furthest from the run, as
    /// the verdict judges them (at the host's pace when it is known), worst first.
    pub fn worst_offenders(&self, n: usize) -> Vec<InSituRow> {
        let pace = self.pace.as_ref().filter(|_| self.judged_paced).map_or(1.0, |p| p.ratio);
        worst_of(&predictions(&self.rows, pace), n)
    }
}

/// `profile`'s times against `run`'s kernels; with `repeat` (the same plan run again),
/// judged against that floor. Refuses a profile of another model or pools, a profile
/// that does not carry its model, and a repeat of another plan.
pub fn compare_in_situ(
    run: &InSitu,
    profile: &Profile,
    repeat: Option<&InSitu>,
    options: &CompareOptions,
) -> Result<InSituReport, ProfileError> {
    super::check_options(options)?;
    let mismatch = |reason: String| Err(ProfileError::Mismatch { reason });
    let h = &profile.header;
    if h.model_hash != run.model_hash {
        return mismatch(format!(
            "the run is of model {} ({}), the profile of {} ({})",
            run.model_name,
            short(&run.model_hash),
            h.model_name,
            short(&h.model_hash)
        ));
    }
    if h.pools != run.pools {
        let names = |p: &[PoolInfo]| p.iter().map(|p| p.name.clone()).collect::<Vec<_>>().join(", ");
        return mismatch(format!("the run's pools are {}; the profile's are {}", names(&run.pools), names(&h.pools)));
    }
    let Some(json) = profile.model_json.as_deref() else {
        return Err(ProfileError::Usage {
            reason: "the profile does not carry its model (a checkpoint older than version 17): profile again".into(),
        });
    };
    let model = placer_ir::parse_model(json)
        .map_err(|e| ProfileError::Usage { reason: format!("the profile's own model does not load: {e}") })?;
    if let Some(r) = repeat {
        check_repeat(run, r)?;
    }
    let lookup = Lookup::new(&model, profile)?;
    let mut rows = Vec::new();
    // Beside a copy, the profile's time plus the plan's charge for the copy: every such
    // kernel, a charge of 0 (an op calibrated to lose nothing) included, once the record
    // keeps charges at all.
    let kept_charges = run.kernels.iter().any(|k| k.charged_ns > 0.0);
    let (mut unknown, mut strangers) = (0usize, 0usize);
    for k in &run.kernels {
        let Some(node) = model.node_id(&k.node) else {
            strangers += 1;
            continue;
        };
        let Some((from, ns, mad, count)) = lookup.time(node, &k.config) else {
            unknown += 1;
            continue;
        };
        if !(ns.is_finite() && ns > 0.0 && k.median_ns.is_finite() && k.median_ns > 0.0) {
            unknown += 1;
            continue;
        }
        rows.push(InSituRow {
            step: k.step,
            from,
            beside_copy: k.beside_copy,
            charged_us: if k.beside_copy { k.charged_ns / 1e3 } else { 0.0 },
            row: row(k, ns, mad, count, &run.pools, options),
        });
    }
    if strangers > 0 {
        return mismatch(format!("{strangers} kernel(s) of the run are not nodes of the profile's model"));
    }
    let big = || rows.iter().filter(|r| !r.row.tiny);
    let of =
        |pick: &dyn Fn(&InSituRow) -> bool| Agreement::of(big().filter(|r| pick(r)).map(|r| &r.row), options.tolerance);
    let all = of(&|_| true);
    let measured = of(&|r| r.from == ProfileTime::Measured);
    let predicted = of(&|r| r.from == ProfileTime::Predicted);
    let beside_copy = of(&|r| r.beside_copy);
    let apart_from_copies = of(&|r| !r.beside_copy);
    // The solver's prediction for each kernel beside a copy, at the profile's pace.
    let beside_copy_charged = (kept_charges && rows.iter().any(|r| r.beside_copy)).then(|| {
        let rows: Vec<Row> = big().filter(|r| r.beside_copy).map(|r| r.prediction(1.0)).collect();
        Agreement::of(rows.iter(), options.tolerance)
    });
    let all_dram_rows = all_dram::profile_rows(run, &lookup, &model, options.min_us);
    let pace = all_dram::pace(&all_dram_rows);
    let all_dram = all_dram::reference(run, &all_dram_rows, pace.as_ref(), options.min_us, options.tolerance);
    let pace_ratio = pace.as_ref().map_or(1.0, |p| p.ratio);
    let paced = pace.as_ref().map(|p| {
        let rows: Vec<Row> = big().map(|r| Row { ratio: r.row.ratio / p.ratio, ..r.row.clone() }).collect();
        Agreement::of(rows.iter(), options.tolerance)
    });
    // The verdict judges what the solver predicted each kernel to take, and, where the
    // run timed all-DRAM beside the plan, at the host's pace in the run: a shift of the
    // whole host between the profile and the run is no fault of the profile's, and the
    // interleaved all-DRAM measures it. The floor is then the repeat at the run's pace.
    let judged_paced = pace.is_some();
    let predictions = predictions(&rows, pace_ratio);
    let judged = Agreement::of(predictions.iter().map(|r| &r.row), options.tolerance);
    let (floor, floor_pace) = match repeat {
        Some(again) => {
            let shift = if judged_paced { repeat_pace(run, again, options.min_us) } else { None };
            (Some(floor_of(run, again, shift.unwrap_or(1.0), options)), shift)
        }
        None => (None, None),
    };
    let copy_charges = copy_charges(&rows, pace_ratio);
    // The shift is of the times as measured, so it is set against the floor as measured:
    // the paced floor's median times the repeat's pace.
    let bias = all.median_ratio.and_then(|m| {
        let floor_median = floor.as_ref().and_then(|f| f.median_ratio).map(|f| f * floor_pace.unwrap_or(1.0));
        let expected = pace.as_ref().map(|p| p.ratio);
        super::bias::in_situ(m, floor_median, expected, &beside_copy, &apart_from_copies, profile.header.protocol.steps)
    });
    let tiny = Agreement::of(rows.iter().filter(|r| r.row.tiny).map(|r| &r.row), options.tolerance);
    // The groups and the worst kernels are of what the verdict judges.
    let per_op = groups(&predictions, |r| r.row.op.clone(), options.tolerance);
    let per_config = groups(&predictions, |r| r.row.config.clone(), options.tolerance);
    let worst = worst_of(&predictions, super::WORST);
    let needed = floor.as_ref().and_then(|f| f.within_tolerance).map_or(options.share, |f| options.share.min(f));
    let meets = judged.rows > 0 && judged.within_tolerance.unwrap_or(0.0) + EDGE_SLACK >= needed;
    let emulated = run.pools.iter().any(|p| p.emulated_as.is_some());
    let mut notes = Vec::new();
    if unknown > 0 {
        notes.push(format!(
            "{unknown} kernel(s) ran in a configuration the profile neither measured nor predicted (the solver's cost \
             model estimated them): left out"
        ));
    }
    if floor.is_none() {
        notes.push(
            "no noise floor: these figures are not judged against the plan run again (`--repeat RUN2.json`, a second \
             `placer run --plan ... --in-situ` of the same plan, gives one)"
                .into(),
        );
    }
    if beside_copy.rows > 0 {
        notes.push(format!(
            "{} kernel(s) ran beside a background copy: the copy thread's share of the machine is in their time and \
             in no profile's",
            beside_copy.rows
        ));
    }
    if let Some(m) = beside_copy_charged.as_ref().and_then(|c| c.median_ratio) {
        // The solver's prediction for those kernels is the profile plus this charge, so
        // its median says whether the calibration over- or under-charges the copies here;
        // at the host's pace when it is known, as the verdict judges.
        let beside = predictions.iter().filter(|r| r.beside_copy).map(|r| &r.row);
        let m = Agreement::of(beside, options.tolerance).median_ratio.unwrap_or(m);
        let side = if m > 1.0 { "over" } else { "under" };
        let at_pace = if pace.is_some() { " at the host's pace" } else { "" };
        let (cost, charge) =
            copy_charges.iter().fold((0.0, 0.0), |(a, b), c| (a + c.copies_cost_ms, b + c.copies_charged_ms));
        notes.push(format!(
            "with the plan's charge for their copies{at_pace}, those kernels' median prediction/run is {m:.3}: the \
             charge {side}states what the copies cost them in this run by {:.1}% of their time (in all, {charge:.1} \
             ms charged for {cost:.1} ms of cost)",
            (m - 1.0).abs() * 100.0
        ));
    }
    if let Some(r) = &all_dram {
        notes.extend(r.notes(options.tolerance));
    }
    if pace.is_none() {
        notes.push(
            "the host's pace is not known: the run timed no all-DRAM beside the plan, or none of its kernels is in \
             the profile"
                .into(),
        );
    }
    if emulated {
        notes
            .push("EMULATED: at least one pool stands in DRAM for its device; these are not measurements of it".into());
    }
    let mut report = InSituReport {
        model_name: run.model_name.clone(),
        model_hash: run.model_hash.clone(),
        pools: run.pools.iter().map(|p| p.name.clone()).collect(),
        options: options.clone(),
        plan: run.plan.clone(),
        run_steps: run.steps,
        profile: ProfileFacts::of(profile),
        emulated,
        kernels: run.kernels.len(),
        unknown,
        all,
        measured,
        predicted,
        beside_copy,
        beside_copy_charged,
        apart_from_copies,
        tiny,
        pace,
        paced,
        floor,
        judged,
        judged_paced,
        floor_pace,
        copy_charges,
        all_dram,
        per_op,
        per_config,
        bias,
        worst,
        meets,
        verdict: String::new(),
        notes,
        rows,
    };
    report.verdict = verdict(&report, needed);
    Ok(report)
}

/// Run kernel `k` (A) beside the profile's `ns` (B).
fn row(k: &InSituKernel, ns: f64, mad: f64, count: u32, pools: &[PoolInfo], o: &CompareOptions) -> Row {
    Row {
        signature: 0,
        node: k.node.clone(),
        op: k.op.clone(),
        config: config_names(&k.config, pools),
        a_us: k.median_ns / 1e3,
        b_us: ns / 1e3,
        a_mad_us: k.mad_ns / 1e3,
        b_mad_us: mad / 1e3,
        a_count: k.count,
        b_count: count,
        ratio: ns / k.median_ns,
        significant: differs(k.median_ns, k.mad_ns, k.count, ns, mad, count),
        tiny: k.median_ns / 1e3 < o.min_us,
    }
}

/// Refuses a repeat of another plan or model than the run's.
fn check_repeat(run: &InSitu, repeat: &InSitu) -> Result<(), ProfileError> {
    if repeat.plan_digest != run.plan_digest || repeat.model_hash != run.model_hash {
        return Err(ProfileError::Mismatch {
            reason: format!(
                "the repeat is a run of another plan ({}, digest {}) than the run ({}, digest {})",
                repeat.plan,
                short(&repeat.plan_digest),
                run.plan,
                short(&run.plan_digest)
            ),
        });
    }
    Ok(())
}

/// The run against its repeat, kernel by kernel: ratios repeat/run, divided by `shift`
/// (the repeat's pace against the run's, 1 for none).
fn floor_of(run: &InSitu, repeat: &InSitu, shift: f64, o: &CompareOptions) -> Agreement {
    let again: BTreeMap<usize, &InSituKernel> = repeat.kernels.iter().map(|k| (k.step, k)).collect();
    let rows: Vec<Row> = run
        .kernels
        .iter()
        .filter_map(|k| {
            let r = again.get(&k.step).filter(|r| r.node == k.node && r.median_ns > 0.0 && k.median_ns > 0.0)?;
            let row = row(k, r.median_ns, r.mad_ns, r.count, &run.pools, o);
            Some(Row { ratio: row.ratio / shift, ..row })
        })
        .filter(|r| !r.tiny)
        .collect();
    Agreement::of(rows.iter(), o.tolerance)
}

/// The shift between two runs of a plan: the median over all-DRAM's kernels (at least
/// `min_us` in the run) of the repeat's time over the run's. `None` when either run
/// timed no all-DRAM beside the plan.
fn repeat_pace(run: &InSitu, repeat: &InSitu, min_us: f64) -> Option<f64> {
    let ratios: Vec<f64> = run
        .reference_ns
        .iter()
        .filter_map(|(node, &first)| {
            let second = *repeat.reference_ns.get(node)?;
            (all_dram::usable_ns(first, min_us) && all_dram::usable_ns(second, 0.0)).then(|| second / first)
        })
        .collect();
    Stats::of(&ratios).map(|s| s.median)
}

/// Per op, over the kernels beside a copy: the plan's charge against what the copies
/// cost them in the run at the profile's `pace`; the ops that cost or were charged most
/// first.
fn copy_charges(rows: &[InSituRow], pace: f64) -> Vec<CopyCharge> {
    let mut by: BTreeMap<&str, CopyCharge> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.beside_copy) {
        let c = by.entry(r.row.op.as_str()).or_insert_with(|| CopyCharge {
            op: r.row.op.clone(),
            kernels: 0,
            copies_charged_ms: 0.0,
            copies_cost_ms: 0.0,
        });
        c.kernels += 1;
        c.copies_charged_ms += r.charged_us / 1e3;
        c.copies_cost_ms += (r.row.a_us * pace - r.row.b_us) / 1e3;
    }
    let mut out: Vec<CopyCharge> = by.into_values().collect();
    let size = |c: &CopyCharge| c.copies_charged_ms.max(c.copies_cost_ms.abs());
    out.sort_by(|a, b| size(b).total_cmp(&size(a)).then_with(|| a.op.cmp(&b.op)));
    out
}

/// The solver's prediction for each row of at least `min_us`, against the run at `pace`.
fn predictions(rows: &[InSituRow], pace: f64) -> Vec<InSituRow> {
    rows.iter().filter(|r| !r.row.tiny).map(|r| InSituRow { row: r.prediction(pace), ..r.clone() }).collect()
}

/// The `n` of `predictions` furthest from agreement, worst first.
fn worst_of(predictions: &[InSituRow], n: usize) -> Vec<InSituRow> {
    let mut rows: Vec<&InSituRow> = predictions.iter().collect();
    rows.sort_by(|x, y| y.row.ratio.ln().abs().total_cmp(&x.row.ratio.ln().abs()));
    rows.into_iter().take(n).cloned().collect()
}

fn groups(rows: &[InSituRow], key: impl Fn(&InSituRow) -> String, tolerance: f64) -> Vec<InSituGroup> {
    let mut by: BTreeMap<String, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        by.entry(key(r)).or_default().push(&r.row);
    }
    let mut out: Vec<InSituGroup> = by
        .into_iter()
        .map(|(name, rows)| InSituGroup { name, agreement: Agreement::of(rows.into_iter(), tolerance) })
        .collect();
    // The groups with most kernels first; ties by name, so the order is deterministic.
    out.sort_by(|a, b| b.agreement.rows.cmp(&a.agreement.rows).then_with(|| a.name.cmp(&b.name)));
    out
}

fn verdict(r: &InSituReport, needed: f64) -> String {
    let o = &r.options;
    let emulated = if r.emulated { " (EMULATED pools)" } else { "" };
    let a = &r.all;
    if a.rows == 0 {
        return format!(
            "the profile cannot be judged: no kernel of at least {} µs in the run has its configuration in the \
             profile{emulated}",
            o.min_us
        );
    }
    let needed = match &r.floor {
        Some(f) if f.within_tolerance.is_some_and(|w| w < o.share) => {
            format!("needed {}, the floor's", percent(needed))
        }
        _ => format!("needed {}", percent(needed)),
    };
    let floor = match &r.floor {
        Some(f) => format!(
            " (floor {}, median {:.3})",
            percent(f.within_tolerance.unwrap_or(0.0)),
            f.median_ratio.unwrap_or(f64::NAN)
        ),
        None => "; no noise floor".into(),
    };
    let j = &r.judged;
    let what = match (r.judged_paced, r.pace.as_ref()) {
        (true, Some(p)) => format!(
            "the solver's predictions (the profile plus each copy's charge) at the host's pace in the run ({:.3}{})",
            p.ratio,
            r.floor_pace.map_or_else(String::new, |f| format!("; the repeat's {f:.3} of the run's"))
        ),
        _ => "the solver's predictions (the profile plus each copy's charge)".into(),
    };
    let head = format!(
        "{what}: {} of {} kernel(s) of at least {} µs within ±{} of the run ({needed}); median prediction/run \
         {:.3}{floor}; the profile's times as measured: {} within, median {:.3}",
        percent(j.within_tolerance.unwrap_or(0.0)),
        j.rows,
        o.min_us,
        percent(o.tolerance),
        j.median_ratio.unwrap_or(f64::NAN),
        percent(a.within_tolerance.unwrap_or(0.0)),
        a.median_ratio.unwrap_or(f64::NAN)
    );
    let shift = r.bias.as_ref().map_or_else(String::new, |b| format!("; {}", b.text));
    if r.meets {
        format!("the profile agrees with the run: {head}{shift}{emulated}")
    } else {
        let plan = r.all_dram.as_ref().map_or_else(String::new, |a| a.verdict_clause(o.tolerance));
        format!("the profile disagrees with the run: {head}{shift}{plan}{emulated}")
    }
}
