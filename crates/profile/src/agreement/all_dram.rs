//! All-DRAM, run interleaved beside a plan, as a second reference inside one run.
//!
//! A plan's kernel differs from the profile's time for two reasons: the profile's own
//! error, and what the plan does to the kernel (a copy beside it, the cache state its
//! arenas leave its memory in). One run cannot tell them apart from the plan's kernels
//! alone. All-DRAM's kernels, timed in the same run, can:
//! - the profile against all-DRAM's kernels, at the host's pace, is how well the profile
//!   predicts a kernel that nothing of the plan touches;
//! - the plan's kernels whose operands all sat in DRAM against the same nodes in
//!   all-DRAM's run (the same configuration, the same moment) are what the plan itself
//!   did to them, which no profile of kernels sees.
//!
//! The record keeps all-DRAM's medians only, so these rows carry no significance test.

use super::lookup::Lookup;
use super::{Agreement, Row, config_names, percent};
use crate::record::InSitu;
use placer_exec::Stats;
use placer_ir::Model;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// An op whose kernels the plan moved off their all-DRAM time needs at least this many
/// kernels before a note names it.
const NAMED_MIN_KERNELS: usize = 5;

/// The shift common to every placement: all-DRAM, run beside the plan, against the
/// profile's times for its kernels.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pace {
    /// Median over all-DRAM's kernels (at least `min_us` in the run) of the profile's
    /// time over the run's: the profile/run ratio the pace alone explains.
    pub ratio: f64,
    pub nodes: usize,
}

/// One op of the plan's kernels whose operands all sat in DRAM, against the same nodes
/// in all-DRAM's run (A all-DRAM's run, B the plan's).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanEffectOp {
    pub op: String,
    pub apart: Agreement,
    pub beside_copy: Agreement,
    /// Over the kernels beside a copy: Σ (plan − all-DRAM), what the copies cost them
    /// measured against all-DRAM's run (no pace and no profile in it), and Σ of what the
    /// plan charged them for the copies.
    pub copies_cost_ms: f64,
    pub copies_charged_ms: f64,
}

/// All-DRAM's run as the second reference ([module docs](self)), over kernels of at
/// least `min_us` in it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AllDramReference {
    /// The profile's all-DRAM time over all-DRAM's run, divided by the pace.
    pub profile: Agreement,
    /// The plan's kernels in the all-DRAM configuration over all-DRAM's, apart from copies
    /// and beside one.
    pub plan_apart: Agreement,
    pub plan_beside_copy: Agreement,
    /// The same per op, the ops with most kernels first.
    pub per_op: Vec<PlanEffectOp>,
    /// All-DRAM's second run (A′) over its first, node by node: the floor under every
    /// figure above, from one run. `None` when the run kept no second all-DRAM.
    pub itself: Option<Agreement>,
}

/// The profile's all-DRAM time against all-DRAM's run, node by node (A the run, B the
/// profile), for the nodes of at least `min_us` in the run that the profile has.
pub(super) fn profile_rows(run: &InSitu, lookup: &Lookup, model: &Model, min_us: f64) -> Vec<Row> {
    run.reference_ns
        .iter()
        .filter_map(|(node, &now)| {
            let n = model.node_id(node)?;
            let all_dram = vec![0; model.node(n).operands().len()];
            let (_, then, mad, count) = lookup.time(n, &all_dram)?;
            (usable_ns(now, min_us) && usable_ns(then, 0.0)).then(|| {
                let config = config_names(&all_dram, &run.pools);
                against_all_dram(node, model.node(n).op.to_string(), config, now, (then, mad, count))
            })
        })
        .collect()
}

/// A time all-DRAM's run (or a profile) recorded that can be set against another: at
/// least `min_us`, above 0 and finite.
pub(super) fn usable_ns(ns: f64, min_us: f64) -> bool {
    ns >= min_us * 1e3 && ns > 0.0 && ns.is_finite()
}

/// Node `node` in all-DRAM's run (A, `all_ns`; the record keeps only its median, so the
/// row has no significance test) beside `b`: median, MAD and samples, in ns.
fn against_all_dram(node: &str, op: String, config: String, all_ns: f64, b: (f64, f64, u32)) -> Row {
    let (b_ns, b_mad_ns, b_count) = b;
    Row {
        signature: 0,
        node: node.to_string(),
        op,
        config,
        a_us: all_ns / 1e3,
        b_us: b_ns / 1e3,
        a_mad_us: 0.0,
        b_mad_us: b_mad_ns / 1e3,
        a_count: 0,
        b_count,
        ratio: b_ns / all_ns,
        significant: false,
        tiny: false,
    }
}

/// The pace: the median of `rows`' ratios ([`profile_rows`]).
pub(super) fn pace(rows: &[Row]) -> Option<Pace> {
    let ratios: Vec<f64> = rows.iter().map(|r| r.ratio).collect();
    Some(Pace { ratio: Stats::of(&ratios)?.median, nodes: ratios.len() })
}

/// All-DRAM's run as the second reference; `None` when the run timed no all-DRAM beside
/// the plan or the profile has none of its kernels.
pub(super) fn reference(
    run: &InSitu,
    profile_rows: &[Row],
    pace: Option<&Pace>,
    min_us: f64,
    tolerance: f64,
) -> Option<AllDramReference> {
    let pace = pace?;
    let paced: Vec<Row> = profile_rows.iter().map(|r| Row { ratio: r.ratio / pace.ratio, ..r.clone() }).collect();
    // (beside a copy, charged ns, row): the plan's kernels whose every operand sat in DRAM.
    let plan: Vec<(bool, f64, Row)> = run
        .kernels
        .iter()
        .filter(|k| k.config.iter().all(|&p| p == 0) && usable_ns(k.median_ns, 0.0))
        .filter_map(|k| {
            let all = *run.reference_ns.get(&k.node).filter(|&&ns| usable_ns(ns, min_us))?;
            let config = config_names(&k.config, &run.pools);
            let row = against_all_dram(&k.node, k.op.clone(), config, all, (k.median_ns, k.mad_ns, k.count));
            Some((k.beside_copy, k.charged_ns, row))
        })
        .collect();
    let of = |beside: bool, op: Option<&str>| {
        let rows = plan.iter().filter(|(b, _, r)| *b == beside && op.is_none_or(|o| r.op == o)).map(|(_, _, r)| r);
        Agreement::of(rows, tolerance)
    };
    let ops: BTreeSet<&str> = plan.iter().map(|(_, _, r)| r.op.as_str()).collect();
    let mut per_op: Vec<PlanEffectOp> = ops
        .into_iter()
        .map(|op| {
            let beside = plan.iter().filter(|(b, _, r)| *b && r.op == op);
            let (cost_us, charged_ns) = beside.fold((0.0, 0.0), |(c, q), (_, ch, r)| (c + r.b_us - r.a_us, q + ch));
            PlanEffectOp {
                op: op.to_string(),
                apart: of(false, Some(op)),
                beside_copy: of(true, Some(op)),
                copies_cost_ms: cost_us / 1e3,
                copies_charged_ms: charged_ns / 1e6,
            }
        })
        .collect();
    let size = |p: &PlanEffectOp| p.apart.rows + p.beside_copy.rows;
    per_op.sort_by(|a, b| size(b).cmp(&size(a)).then_with(|| a.op.cmp(&b.op)));
    // A′ against A: the same placement twice, minutes apart in one run.
    let itself: Vec<Row> = run
        .reference_again_ns
        .iter()
        .filter_map(|(node, &again)| {
            let first = *run.reference_ns.get(node).filter(|&&ns| usable_ns(ns, min_us))?;
            usable_ns(again, 0.0).then(|| against_all_dram(node, String::new(), String::new(), first, (again, 0.0, 0)))
        })
        .collect();
    Some(AllDramReference {
        itself: (!itself.is_empty()).then(|| Agreement::of(itself.iter(), tolerance)),
        profile: Agreement::of(paced.iter(), tolerance),
        plan_apart: of(false, None),
        plan_beside_copy: of(true, None),
        per_op,
    })
}

impl AllDramReference {
    /// What a verdict of disagreement adds: [`Self::drift_clause`], then
    /// [`Self::plan_clause`].
    pub(super) fn verdict_clause(&self, tolerance: f64) -> String {
        self.drift_clause(tolerance) + &self.plan_clause(tolerance)
    }

    /// When all-DRAM's second run (A′) sat off its first by more than the tolerance in
    /// median, the host's pace moved within the run, between two runs of one placement:
    /// no figure of the run can be judged to the tolerance. Else nothing.
    fn drift_clause(&self, tolerance: f64) -> String {
        let Some((a, m)) = self.itself.as_ref().and_then(|a| Some((a, a.median_ratio?))) else {
            return String::new();
        };
        if (m - 1.0).abs() <= tolerance {
            return String::new();
        }
        format!(
            "; the host drifted within the run: all-DRAM run twice beside the plan (A′ over A) differed by a median \
             of {m:.3} over {} kernel(s), {} within ±{}, so this run cannot judge a profile to ±{}: run the plan \
             again on a quieter host",
            a.rows,
            a.within_tolerance.map_or("-".into(), percent),
            percent(tolerance),
            percent(tolerance)
        )
    }

    /// When the plan moved its own all-DRAM kernels off all-DRAM's time (apart from
    /// copies) at least as often as the profile missed all-DRAM's, the plan, not the
    /// profile, is the larger part of it. Else nothing.
    fn plan_clause(&self, tolerance: f64) -> String {
        let (Some(profile), Some(plan)) = (self.profile.within_tolerance, self.plan_apart.within_tolerance) else {
            return String::new();
        };
        if plan > profile {
            return String::new();
        }
        format!(
            "; the plan moved its own kernels: all in DRAM and apart from copies, {} were within ±{} of all-DRAM's \
             run beside it, where the profile was within ±{} of all-DRAM's kernels for {} (at the pace): a \
             profile that matched all-DRAM's run exactly would reach about that first share on those kernels",
            percent(plan),
            percent(tolerance),
            percent(tolerance),
            percent(profile)
        )
    }

    /// What the report's notes say of it: the ops the plan moved off their all-DRAM time
    /// beyond `tolerance`, faster or slower, each direction with its likely cause.
    pub(super) fn notes(&self, tolerance: f64) -> Vec<String> {
        // (faster, beside a copy) -> "op median (kernels)"
        let mut by: BTreeMap<(bool, bool), Vec<String>> = BTreeMap::new();
        for p in &self.per_op {
            for (beside, a) in [(false, &p.apart), (true, &p.beside_copy)] {
                let Some(m) = a.median_ratio else { continue };
                if a.rows >= NAMED_MIN_KERNELS && (m - 1.0).abs() > tolerance {
                    // Only the list of faster kernels mixes both; the label says which.
                    let at = match (m < 1.0, beside) {
                        (true, true) => " beside a copy",
                        (true, false) => " apart from copies",
                        (false, _) => "",
                    };
                    by.entry((m < 1.0, beside)).or_default().push(format!("{}{at} {m:.3} ({})", p.op, a.rows));
                }
            }
        }
        let mut notes = Vec::new();
        let (cost, charged) =
            self.per_op.iter().fold((0.0, 0.0), |(c, q), p| (c + p.copies_cost_ms, q + p.copies_charged_ms));
        if self.plan_beside_copy.rows > 0 && cost > 0.0 {
            notes.push(format!(
                "the plan's kernels all in DRAM beside a copy ({}) ran {cost:.1} ms longer than in all-DRAM's run \
                 beside the plan (the same configuration and moment: no pace, no profile in it; an op the plan's \
                 cache state sped up counts against the copies' cost), and the plan charged their copies \
                 {charged:.1} ms, {:.2}× that",
                self.plan_beside_copy.rows,
                charged / cost
            ));
        }
        let faster: Vec<String> =
            [false, true].iter().flat_map(|&b| by.remove(&(true, b)).unwrap_or_default()).collect();
        if !faster.is_empty() {
            notes.push(format!(
                "these ops' kernels, all in DRAM, ran faster in the plan than in all-DRAM's run beside it (median \
                 plan/all-DRAM, kernels): {}; likely cause: the cache state the plan's arenas leave their memory in \
                 (a DRAM arena under a budget reuses memory sooner, while it is still in cache), which no profile of \
                 kernels sees",
                faster.join(", ")
            ));
        }
        if let Some(slower) = by.remove(&(false, true)) {
            notes.push(format!(
                "these ops' kernels, all in DRAM, ran slower beside a copy in the plan than in all-DRAM's run: {}; \
                 likely cause: the copy thread, which the plan charges for apart from the profile's time",
                slower.join(", ")
            ));
        }
        if let Some(slower) = by.remove(&(false, false)) {
            notes.push(format!(
                "these ops' kernels, all in DRAM, ran slower apart from copies in the plan than in all-DRAM's run: \
                 {}; likely cause: their neighbours in the plan, or the host's pace moving between the two",
                slower.join(", ")
            ));
        }
        notes
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::in_situ::{lenet, run};
    use crate::{CompareOptions, ProfileError, compare_in_situ};

    #[test]
    fn the_plan_s_own_effect_on_its_kernels_is_told_apart_from_the_profile_s_error() -> Result<(), ProfileError> {
        let (model, p) = lenet();
        let op = |step: usize| model.node(model.schedule()[step]).op.to_string();
        // All-DRAM beside the plan ran every kernel 10% slower than the profile timed it
        // (the host's pace). The plan ran its matmuls at 0.7 of all-DRAM's time, its
        // momentum updates at 1.3, and every other kernel as all-DRAM did.
        let factor = |s: usize| {
            1.1 * match op(s).as_str() {
                "matmul" => 0.7,
                "sgd_momentum" => 1.3,
                _ => 1.0,
            }
        };
        let mut r = run(&model, "d", factor);
        r.reference_ns = model
            .schedule()
            .iter()
            .enumerate()
            .map(|(i, &n)| (model.node(n).name.clone(), 110e3 * (i + 1) as f64))
            .collect();
        // Step 3 ran beside a copy (the helper's), charged 50 µs for it.
        r.kernels[3].charged_ns = 50e3;
        let options = CompareOptions { min_us: 0.0, ..CompareOptions::default() };
        let report = compare_in_situ(&r, &p, None, &options)?;
        let all_dram = report.all_dram.as_ref().expect("all-DRAM ran beside the plan");
        // The profile matches all-DRAM's kernels at the pace: its error here is nil.
        assert_eq!((all_dram.profile.rows, all_dram.profile.within_5), (model.schedule().len(), Some(1.0)));
        let matmul = all_dram.per_op.iter().find(|o| o.op == "matmul").expect("matmul");
        let beside = (0..model.schedule().len()).filter(|&s| op(s) == "matmul" && s == 3).count();
        assert_eq!(matmul.apart.rows + matmul.beside_copy.rows, 9);
        assert_eq!(matmul.beside_copy.rows, beside);
        assert!((matmul.apart.median_ratio.expect("rows") - 0.7).abs() < 1e-9);
        let momentum = all_dram.per_op.iter().find(|o| o.op == "sgd_momentum").expect("sgd_momentum");
        assert!((momentum.apart.median_ratio.expect("rows") - 1.3).abs() < 1e-9);
        // Each is named with its likely cause; an op the plan left alone is not.
        let faster = report.notes.iter().find(|n| n.contains("ran faster in the plan")).expect("a note");
        assert!(faster.contains("matmul apart from copies 0.700") && faster.contains("cache state"), "{faster}");
        let slower = report.notes.iter().find(|n| n.contains("ran slower apart from copies")).expect("a note");
        assert!(slower.contains("sgd_momentum 1.300 (10)") && !slower.contains("relu"), "{slower}");
        assert!(!report.notes.iter().any(|n| n.contains("relu ")), "{:?}", report.notes);

        // The profile matched all-DRAM's kernels, the plan moved its own: the verdict says so.
        assert!(!report.meets, "{}", report.verdict);
        assert!(report.verdict.contains("; the plan moved its own kernels: all in DRAM"), "{}", report.verdict);

        // Beside a copy, what the copies cost against all-DRAM's run, beside the charge.
        let third = report.rows.iter().find(|row| row.step == 3).expect("step 3").row.op.clone();
        let beside = all_dram.per_op.iter().find(|o| o.op == third).expect("its op");
        let node = &r.kernels[3].node;
        let cost_ms = (r.kernels[3].median_ns - r.reference_ns[node]) / 1e6;
        assert!((beside.copies_cost_ms - cost_ms).abs() < 1e-9, "{} {cost_ms}", beside.copies_cost_ms);
        assert!((beside.copies_charged_ms - 0.05).abs() < 1e-12);
        assert!(report.notes.iter().any(|n| n.contains("ran") && n.contains("charged their copies 0.1 ms")));

        // A node all-DRAM's run timed at nothing (a damaged record) is left out, not divided by.
        let zeroed = model.node(model.schedule()[0]).name.clone();
        r.reference_ns.insert(zeroed.clone(), 0.0);
        let report = compare_in_situ(&r, &p, None, &options)?;
        let all_dram = report.all_dram.as_ref().expect("all-DRAM ran beside the plan");
        assert_eq!(all_dram.profile.rows, model.schedule().len() - 1);
        assert_eq!(all_dram.plan_apart.rows + all_dram.plan_beside_copy.rows, model.schedule().len() - 1);
        assert!(report.pace.as_ref().is_some_and(|p| p.ratio.is_finite()));

        // No second all-DRAM in the record: no floor.
        assert!(all_dram.itself.is_none());
        // A′ ran every node as A did, but for two at 1.2× and 0.8× A: the floor from one run.
        r.reference_again_ns = r.reference_ns.clone();
        let moved: Vec<String> = r.reference_ns.keys().filter(|k| **k != zeroed).take(2).cloned().collect();
        for (node, by) in moved.iter().zip([1.2, 0.8]) {
            *r.reference_again_ns.get_mut(node).expect("a node") *= by;
        }
        let report = compare_in_situ(&r, &p, None, &options)?;
        let itself = report.all_dram.as_ref().and_then(|a| a.itself.clone()).expect("A′ ran");
        // The node A timed at nothing is left out here too.
        let n = model.schedule().len() - 1;
        assert_eq!(itself.rows, n);
        assert!((itself.within_5.expect("rows") - (n - 2) as f64 / n as f64).abs() < 1e-12);
        // Two nodes off do not move the median: the verdict says nothing of drift.
        assert!(!report.verdict.contains("the host drifted"), "{}", report.verdict);
        // A′ 10% over A throughout: the host drifted within the run, and the verdict says so.
        r.reference_again_ns.values_mut().for_each(|ns| *ns *= 1.1);
        let report = compare_in_situ(&r, &p, None, &options)?;
        assert!(!report.meets);
        assert!(
            report.verdict.contains("; the host drifted within the run: all-DRAM run twice beside the plan (A′ over A) differed by a median of 1.100")
                && report.verdict.contains("; the plan moved its own kernels"),
            "{}",
            report.verdict
        );

        // Without all-DRAM beside the plan there is no second reference.
        r.reference_ns.clear();
        assert!(compare_in_situ(&r, &p, None, &options)?.all_dram.is_none());
        Ok(())
    }
}
