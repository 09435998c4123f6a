//! Comparing two profiles of the same model: does simultaneous profiling measure what
//! single-config profiling measures, or do two runs of one agree?
//!
//! Measurements are joined on their key, `(signature, config)`, and every joined pair (a
//! [`Row`]) gets the ratio of medians B/A and a significance test. Kernels shorter than
//! `min_us` in A are *tiny*: timer resolution, the clock read and launch overheads are a
//! large part of their time, so they are summarised apart and never decide the verdict.
//!
//! The reference system (AutoTM) found its simultaneous profiles disagreed with single
//! ones (median ratio 1.18, 33% within ±10%, worst 5.8x); [`Comparison::meets`] is the
//! check that placer's do not.

use crate::ProfileError;
use crate::record::{Measurement, PoolInfo, Profile};
use placer_plot::{COLORS, Chart, Mark, Marker, Series};
use serde::Serialize;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

/// How many of the worst offenders a [`Comparison`] keeps.
pub const WORST: usize = 10;

/// sqrt(π/2): the asymptotic standard error of a sample median is this times σ/√n for
/// normally distributed samples.
const MEDIAN_SE_FACTOR: f64 = 1.2533;
/// Scales a MAD to σ for normally distributed samples.
const MAD_TO_SIGMA: f64 = 1.4826;
/// A difference is significant beyond this many combined standard errors.
const SIGNIFICANCE_SIGMAS: f64 = 3.0;
/// Ratios are compared with their band with this much slack, so a ratio that is exactly
/// on the edge (1.1 computed as 1.1000000000000001) counts as inside.
const EDGE_SLACK: f64 = 1e-9;

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

/// What one profile was, for the comparison's facts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProfileFacts {
    /// `Mode::label()`: "single" or "simultaneous (...)".
    pub mode: String,
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

/// Agreement over a set of rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agreement {
    pub rows: usize,
    /// Shares of rows with |B/A − 1| within 5%, 10% and the tolerance; `None` without rows.
    pub within_5: Option<f64>,
    pub within_10: Option<f64>,
    pub within_tolerance: Option<f64>,
    pub median_ratio: Option<f64>,
    pub geomean_ratio: Option<f64>,
    pub significant: usize,
}

impl Agreement {
    fn of<'a>(rows: impl Iterator<Item = &'a Row>, tolerance: f64) -> Agreement {
        let rows: Vec<&Row> = rows.collect();
        let n = rows.len();
        let share = |band: f64| {
            (n > 0)
                .then(|| rows.iter().filter(|r| (r.ratio - 1.0).abs() <= band + EDGE_SLACK).count() as f64 / n as f64)
        };
        let mut ratios: Vec<f64> = rows.iter().map(|r| r.ratio).collect();
        ratios.sort_by(f64::total_cmp);
        let median_ratio = match n {
            0 => None,
            n if n % 2 == 1 => Some(ratios[n / 2]),
            n => Some((ratios[n / 2 - 1] + ratios[n / 2]) / 2.0),
        };
        // Ratios multiply (2x slower and 2x faster cancel), so their mean is geometric.
        let geomean_ratio = (n > 0).then(|| (ratios.iter().map(|r| r.ln()).sum::<f64>() / n as f64).exp());
        Agreement {
            rows: n,
            within_5: share(0.05),
            within_10: share(0.10),
            within_tolerance: share(tolerance),
            median_ratio,
            geomean_ratio,
            significant: rows.iter().filter(|r| r.significant).count(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
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
    /// Every matched row, in A's measurement order.
    pub rows: Vec<Row>,
}

impl Comparison {
    /// The `n` non-tiny rows furthest from agreement (by |ln B/A|), worst first; ties keep
    /// A's order, so the list is deterministic.
    pub fn worst_offenders(&self, n: usize) -> Vec<Row> {
        let mut rows: Vec<&Row> = self.rows.iter().filter(|r| !r.tiny).collect();
        rows.sort_by(|x, y| y.ratio.ln().abs().total_cmp(&x.ratio.ln().abs()));
        rows.into_iter().take(n).cloned().collect()
    }
}

/// Standard error of a sample median estimated from its MAD: σ ≈ 1.4826·MAD (normal
/// samples), and the median's standard error is sqrt(π/2)·σ/√n ≈ 1.2533·σ/√n. Infinite
/// without samples, so nothing measured zero times is ever significant.
pub fn median_se(mad: f64, count: u32) -> f64 {
    if count == 0 {
        return f64::INFINITY;
    }
    MEDIAN_SE_FACTOR * MAD_TO_SIGMA * mad / f64::from(count).sqrt()
}

/// The two medians differ by more than three combined standard errors:
/// |Δmedian| > 3·sqrt(se_a² + se_b²). Timing noise is not normal (it has a long right
/// tail), so this is a screen for "clearly more than noise", not an exact test.
pub fn significant(a: &Measurement, b: &Measurement) -> bool {
    let se = median_se(a.mad_ns, a.count).hypot(median_se(b.mad_ns, b.count));
    (b.median_ns - a.median_ns).abs() > SIGNIFICANCE_SIGMAS * se
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
pub fn compare(a: &Profile, b: &Profile, options: &CompareOptions) -> Result<Comparison, ProfileError> {
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
            "different measurement protocols: A warm-up {}, reps {}-{}, CV target {}, seed {}; \
             B warm-up {}, reps {}-{}, CV target {}, seed {}",
            ha.protocol.warmup,
            ha.protocol.reps,
            ha.protocol.max_reps,
            ha.protocol.cv_target,
            ha.protocol.seed,
            hb.protocol.warmup,
            hb.protocol.reps,
            hb.protocol.max_reps,
            hb.protocol.cv_target,
            hb.protocol.seed
        ));
    }
    if ha.pins != hb.pins {
        notes.push(format!("different --pin rules: A [{}], B [{}]", ha.pins.join(" "), hb.pins.join(" ")));
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

    let non_tiny = Agreement::of(rows.iter().filter(|r| !r.tiny), options.tolerance);
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

    let share = non_tiny.within_tolerance.unwrap_or(0.0);
    let meets = non_tiny.rows > 0 && share + EDGE_SLACK >= options.share;
    let mut comparison = Comparison {
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
        notes,
        rows,
    };
    comparison.worst = comparison.worst_offenders(WORST);
    if comparison.non_tiny.rows == 0 {
        comparison.notes.push(format!(
            "no kernel of at least {} µs was measured by both profiles: there is nothing to judge agreement on",
            options.min_us
        ));
    }
    comparison.verdict = verdict(&comparison);
    Ok(comparison)
}

fn short(hash: &str) -> &str {
    hash.get(..16).unwrap_or(hash)
}

fn verdict(c: &Comparison) -> String {
    let o = &c.options;
    let emulated = if c.emulated { " (EMULATED pools)" } else { "" };
    let n = &c.non_tiny;
    if n.rows == 0 {
        return format!("profiles cannot be judged: no kernel of at least {} µs in both{emulated}", o.min_us);
    }
    let within = n.within_tolerance.unwrap_or(0.0);
    let median = n.median_ratio.unwrap_or(f64::NAN);
    let head = format!(
        "{} of {} kernel(s) of at least {} µs within ±{} (needed {}); median B/A {:.3}",
        percent(within),
        n.rows,
        o.min_us,
        percent(o.tolerance),
        percent(o.share),
        median
    );
    let worst = c
        .worst
        .first()
        .map(|w| format!(", worst {:.2}x ({} {} {})", w.ratio, w.op, w.node, w.config))
        .unwrap_or_default();
    if c.meets {
        format!("profiles agree: {head}{emulated}")
    } else {
        format!("profiles disagree: {head}{worst}{emulated}")
    }
}

/// A log-log scatter of A's median (x) against B's (y) with the y = x line and the ±10%
/// lines (y = 0.9x, 1.1x); tiny kernels are their own series. placer-plot has linear axes
/// whose y starts at zero, so the chart plots log10 of the medians in µs, or in ns when a
/// median is under 1 µs (whose log10 µs would fall below the axis); the axis labels say
/// which.
pub fn scatter_svg(c: &Comparison) -> String {
    let all = || c.rows.iter().flat_map(|r| [r.a_us, r.b_us]);
    let (unit, scale) = if all().all(|v| v >= 1.0) { ("µs", 1.0) } else { ("ns", 1e3) };
    let log = |v: f64| (v * scale).log10();
    let (lo, hi) = all().map(log).fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| (l.min(v), h.max(v)));
    let (lo, hi) = if lo.is_finite() && hi.is_finite() { (lo, hi.max(lo + 1.0)) } else { (0.0, 1.0) };
    let emulated = if c.emulated { " [EMULATED]" } else { "" };
    let mut chart = Chart::new(
        &format!("{}: kernel medians, B ({}) against A ({}){emulated}", c.model_name, c.b.mode, c.a.mode),
        &format!("A median, log10 {unit}"),
        &format!("B median, log10 {unit}"),
    );
    let line = |label: &str, color: &str, factor: f64| Series {
        label: label.into(),
        color: color.into(),
        mark: Mark::Line,
        points: vec![(lo, lo + factor.log10()), (hi, hi + factor.log10())],
    };
    chart.series.push(line("B = A", "#333333", 1.0));
    chart.series.push(line("B = 1.1·A (+10%)", COLORS[2], 1.1));
    chart.series.push(line("B = 0.9·A (−10%)", COLORS[2], 0.9));
    let points = |tiny: bool| -> Vec<(f64, f64)> {
        c.rows.iter().filter(|r| r.tiny == tiny).map(|r| (log(r.a_us), log(r.b_us))).collect()
    };
    chart.series.push(Series {
        label: format!("kernels ≥ {} µs", c.options.min_us),
        color: COLORS[0].into(),
        mark: Mark::Points,
        points: points(false),
    });
    chart.series.push(Series {
        label: format!("tiny (< {} µs)", c.options.min_us),
        color: COLORS[3].into(),
        mark: Mark::Points,
        points: points(true),
    });
    if let Some(w) = c.worst.first() {
        chart.markers.push(Marker {
            x: log(w.a_us),
            y: log(w.b_us),
            label: format!("worst: {} {} {:.2}x", w.op, w.node, w.ratio),
        });
    }
    chart.to_svg()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{FORMAT_NAME, FORMAT_VERSION, Mode, ProfileHeader, Protocol};

    fn pools() -> Vec<PoolInfo> {
        vec![
            PoolInfo { name: "dram".into(), kind: "dram".into(), emulated_as: None },
            PoolInfo { name: "pmem".into(), kind: "pmem".into(), emulated_as: None },
        ]
    }

    fn header(max_simultaneous: u32) -> ProfileHeader {
        ProfileHeader {
            format: FORMAT_NAME.into(),
            version: FORMAT_VERSION,
            model_name: "toy-b1".into(),
            model_hash: "00112233445566778899aabbccddeeff".into(),
            host_fingerprint: "host-a".into(),
            pools: pools(),
            emulated: false,
            protocol: Protocol { warmup: 2, reps: 10, max_reps: 50, cv_target: 0.02, seed: 7, rounds: 1 },
            mode: Mode { max_simultaneous, two_hop: false, sample: None, max_configs: 4096 },
            pins: vec![],
            plan_hash: "plan".into(),
        }
    }

    /// A measurement of signature `sig` in config `[sig % 2, 0]`, median `us`.
    fn m(sig: u64, us: f64, mad_us: f64, count: u32) -> Measurement {
        Measurement {
            signature: sig,
            config: vec![(sig % 2) as u16, 0],
            node: format!("n{sig}"),
            op: "conv2d".into(),
            pass: 0,
            count,
            median_ns: us * 1e3,
            drift_corrected_ns: us * 1e3,
            mad_ns: mad_us * 1e3,
            min_ns: us * 1e3,
            max_ns: us * 1e3,
            cv: 0.0,
        }
    }

    fn profile(max_simultaneous: u32, measurements: Vec<Measurement>) -> Profile {
        Profile {
            header: header(max_simultaneous),
            passes_total: 4,
            passes_done: 4,
            wall_seconds: 10.0,
            clock_resolution_ns: 1.0,
            clock_overhead_ns: 20.0,
            reference_ns: vec![],
            pass_drift: vec![],
            measurements,
        }
    }

    /// A profile whose signature i (from 0) has median `us[i]`, MAD 1 µs, 20 samples.
    fn medians(max_simultaneous: u32, us: &[f64]) -> Profile {
        profile(max_simultaneous, us.iter().enumerate().map(|(i, &u)| m(i as u64, u, 1.0, 20)).collect())
    }

    fn close(x: f64, y: f64) -> bool {
        (x - y).abs() < 1e-9
    }

    #[test]
    fn identical_profiles_agree_completely() {
        let a = medians(1, &[100.0, 200.0, 300.0, 1000.0]);
        let c = compare(&a, &a, &CompareOptions::default()).expect("same model");
        assert_eq!((c.matched, c.only_in_a, c.only_in_b), (4, 0, 0));
        assert_eq!(c.non_tiny.rows, 4);
        assert_eq!(c.non_tiny.within_5, Some(1.0));
        assert_eq!(c.non_tiny.median_ratio, Some(1.0));
        assert_eq!(c.non_tiny.geomean_ratio, Some(1.0));
        assert_eq!(c.non_tiny.significant, 0);
        assert!(c.meets && !c.emulated, "{c:?}");
        assert!(c.verdict.starts_with("profiles agree: 100.0% of 4"), "{}", c.verdict);
        assert_eq!(c.rows[1].config, "pmem,dram");
        assert_eq!(c.wall_ratio, Some(1.0));
        assert!(c.notes.is_empty(), "{:?}", c.notes);
    }

    #[test]
    fn a_slower_subset_is_summarised_as_by_hand() {
        let ratios = [1.0, 1.0, 1.0, 1.0, 1.04, 1.08, 1.2, 1.2, 1.2, 0.75];
        let a = medians(1, &[1000.0; 10]);
        let b = medians(8, &ratios.map(|r| 1000.0 * r));
        let c = compare(&a, &b, &CompareOptions::default()).expect("same model");
        let n = &c.non_tiny;
        assert_eq!(n.rows, 10);
        // |r − 1| ≤ 0.05: the four 1.0s and 1.04; ≤ 0.10 adds 1.08.
        assert_eq!(n.within_5, Some(0.5));
        assert_eq!(n.within_10, Some(0.6));
        assert_eq!(n.within_tolerance, Some(0.5));
        // Sorted: 0.75 1 1 1 1 | 1.04 1.08 1.2 1.2 1.2 → (1 + 1.04) / 2.
        assert!(close(n.median_ratio.expect("rows"), 1.02));
        // exp((ln 1.04 + ln 1.08 + 3 ln 1.2 + ln 0.75) / 10), by hand: 1.0382602078.
        assert!((n.geomean_ratio.expect("rows") - 1.038_260_207_8).abs() < 1e-9);
        assert!(!c.meets);
        assert!(c.verdict.starts_with("profiles disagree: 50.0% of 10"), "{}", c.verdict);
        assert!(c.verdict.contains("worst 0.75x (conv2d n9 pmem,dram)"), "{}", c.verdict);
        // |ln 0.75| = 0.288 > ln 1.2 = 0.182 (three ties, in A's order) > ln 1.08 > ln 1.04.
        let worst: Vec<&str> = c.worst.iter().map(|r| r.node.as_str()).collect();
        assert_eq!(worst, ["n9", "n6", "n7", "n8", "n5", "n4", "n0", "n1", "n2", "n3"]);
        assert_eq!(c.worst_offenders(2).len(), 2);
        // MAD 1 µs over 20 samples: a 40 µs difference is far beyond noise, equality is not.
        assert_eq!(n.significant, 6);
    }

    #[test]
    fn geometric_mean_and_median_of_two() {
        let a = medians(1, &[100.0, 100.0]);
        let b = medians(1, &[200.0, 800.0]);
        let c = compare(&a, &b, &CompareOptions::default()).expect("same model");
        assert!(close(c.non_tiny.geomean_ratio.expect("rows"), 4.0));
        assert!(close(c.non_tiny.median_ratio.expect("rows"), 5.0));
        assert_eq!(c.non_tiny.within_10, Some(0.0));
    }

    #[test]
    fn significance_weighs_the_difference_against_the_spreads() {
        // se = 1.2533 · 1.4826 · 5 / √100 = 0.93 µs each; 3 · √2 · 0.93 = 3.9 µs ≪ 100 µs.
        assert!(significant(&m(0, 1000.0, 5.0, 100), &m(0, 1100.0, 5.0, 100)));
        // se = 1.2533 · 1.4826 · 200 / √10 = 117.5 µs each; 3 · √2 · 117.5 = 499 µs ≫ 10 µs.
        assert!(!significant(&m(0, 1000.0, 200.0, 10), &m(0, 1010.0, 200.0, 10)));
        assert!((median_se(5000.0, 100) - 929.071_29).abs() < 1e-6);
        assert!(!significant(&m(0, 1000.0, 0.0, 0), &m(0, 5000.0, 0.0, 0)), "no samples, no evidence");
    }

    #[test]
    fn tiny_kernels_are_summarised_apart_and_do_not_decide() {
        let a = medians(1, &[1000.0, 2000.0, 10.0, 20.0]);
        let b = medians(2, &[1000.0, 2000.0, 30.0, 20.0]);
        let c = compare(&a, &b, &CompareOptions::default()).expect("same model");
        assert_eq!((c.non_tiny.rows, c.tiny.rows), (2, 2));
        assert_eq!(c.tiny.within_5, Some(0.5));
        assert!(c.rows[2].tiny && !c.rows[0].tiny);
        assert!(c.worst.iter().all(|r| !r.tiny));
        assert!(c.meets);
        assert!(c.notes.iter().any(|n| n.contains("2 kernel(s) under 50 µs")), "{:?}", c.notes);
    }

    #[test]
    fn unmatched_keys_are_counted() {
        let a = medians(1, &[100.0, 100.0, 100.0, 100.0]);
        let mut b = medians(1, &[100.0, 100.0]);
        b.measurements.push(m(40, 100.0, 1.0, 20));
        // Same signature in another configuration is another key.
        let mut other = m(0, 100.0, 1.0, 20);
        other.config = vec![1, 1];
        b.measurements.push(other);
        let c = compare(&a, &b, &CompareOptions::default()).expect("same model");
        assert_eq!((c.matched, c.only_in_a, c.only_in_b), (2, 2, 2));
        assert!(c.notes.iter().any(|n| n.contains("2 measurement(s) only in A and 2 only in B")), "{:?}", c.notes);
    }

    #[test]
    fn different_models_and_pools_are_refused() {
        let a = medians(1, &[100.0]);
        let mut b = a.clone();
        b.header.model_hash = "ffeeddccbbaa99887766554433221100".into();
        b.header.model_name = "other-b1".into();
        let err = compare(&a, &b, &CompareOptions::default()).expect_err("different models");
        assert!(matches!(err, ProfileError::Mismatch { .. }));
        let text = err.to_string();
        assert!(text.contains("toy-b1") && text.contains("other-b1") && !text.contains('\n'), "{text}");

        let mut b = a.clone();
        b.header.pools[1].emulated_as = Some("optane-pmem-100".into());
        let err = compare(&a, &b, &CompareOptions::default()).expect_err("different pools");
        assert!(err.to_string().contains("emulated as optane-pmem-100"), "{err}");
    }

    #[test]
    fn bad_options_are_refused() {
        let a = medians(1, &[100.0]);
        for options in [
            CompareOptions { tolerance: -0.1, ..CompareOptions::default() },
            CompareOptions { min_us: f64::NAN, ..CompareOptions::default() },
            CompareOptions { share: 1.5, ..CompareOptions::default() },
        ] {
            let err = compare(&a, &a, &options).expect_err("bad option");
            assert!(matches!(err, ProfileError::Usage { .. }), "{err}");
        }
    }

    #[test]
    fn hosts_protocols_and_emulation_are_noted() {
        let mut a = medians(1, &[100.0]);
        a.header.pools[1].emulated_as = Some("optane-pmem-100".into());
        a.header.emulated = true;
        let mut b = a.clone();
        b.header.host_fingerprint = "host-b".into();
        b.header.protocol.reps = 20;
        b.wall_seconds = 2.5;
        b.passes_done = 1;
        let c = compare(&a, &b, &CompareOptions::default()).expect("same model");
        assert!(c.emulated && c.a.emulated && c.b.emulated);
        assert!(c.verdict.contains("EMULATED"), "{}", c.verdict);
        assert_eq!(c.wall_ratio, Some(0.25));
        let notes = c.notes.join("\n");
        for needle in ["different hosts", "different measurement protocols", "B is incomplete", "EMULATED: 'pmem'"] {
            assert!(notes.contains(needle), "{needle} missing from {notes}");
        }
    }

    #[test]
    fn nothing_to_judge_does_not_meet() {
        let a = medians(1, &[10.0]);
        let c = compare(&a, &a, &CompareOptions::default()).expect("same model");
        assert_eq!(c.non_tiny.rows, 0);
        assert_eq!(c.non_tiny.within_5, None);
        assert!(!c.meets);
        assert!(c.notes.iter().any(|n| n.contains("nothing to judge")), "{:?}", c.notes);
        let empty = profile(1, vec![]);
        assert!(!compare(&empty, &empty, &CompareOptions::default()).expect("same model").meets);
    }

    #[test]
    fn scatter_is_deterministic_and_shows_both_series() {
        let a = medians(1, &[1000.0, 2000.0, 10.0]);
        let b = medians(2, &[1100.0, 2000.0, 30.0]);
        let c = compare(&a, &b, &CompareOptions::default()).expect("same model");
        let svg = scatter_svg(&c);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("log10 µs") && svg.contains("tiny (&lt; 50 µs)") && svg.contains("B = 1.1·A (+10%)"));
        assert_eq!(svg.matches("<circle").count(), 3 + 1, "three kernels and the worst-offender marker");
        assert_eq!(scatter_svg(&c), svg);

        let a = medians(1, &[0.5, 100.0]);
        let svg = scatter_svg(&compare(&a, &a, &CompareOptions::default()).expect("same model"));
        assert!(svg.contains("log10 ns"), "sub-µs medians switch the axes to ns");
        let empty = profile(1, vec![]);
        assert!(scatter_svg(&compare(&empty, &empty, &CompareOptions::default()).expect("same")).contains("</svg>"));
    }
}
