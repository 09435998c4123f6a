//! Plans measured side by side, as rows a person (or a script) can compare: measured
//! against predicted, and speedups over first-touch and all-DRAM from the same
//! interleaved run.

use crate::interleave::Measured;
use placer_exec::Stats;
use placer_solve::{Baseline, TWO_LM_LABEL as TWO_LM};
use serde::Serialize;

/// The reference strategies' names, as contenders are named.
pub const FIRST_TOUCH: &str = "first-touch";
pub const ALL_DRAM: &str = "all-dram";
/// All-DRAM run a second time in the same interleaved run (A′): the host's pace now
/// against the profile's, and the run's noise floor against all-DRAM itself.
pub const ALL_DRAM_AGAIN: &str = "all-dram (A′)";

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub name: String,
    pub measured_ms: f64,
    /// Median absolute deviation of the step, ms.
    pub mad_ms: f64,
    pub predicted_ms: f64,
    /// (measured − predicted) / predicted.
    pub error: f64,
    /// Measured against the prediction plus the anchor's shift where applied
    /// ([`Anchor::error_of`]): (measured − predicted − shift) / (predicted + shift);
    /// `None` without an anchor. With the shift, all-DRAM's is A against A′.
    pub anchored_error: Option<f64>,
    /// First-touch's measured time over this one's: above 1 is faster than first-touch.
    pub speedup_vs_first_touch: Option<f64>,
    /// This one's measured time over all-DRAM's: 1 is as fast as unlimited DRAM.
    pub slowdown_vs_all_dram: Option<f64>,
    pub dram_reserved_bytes: u64,
    pub dram_peak_bytes: u64,
    pub budget_bytes: u64,
    pub blocking_moves: usize,
    pub background_moves: usize,
    pub bytes_moved: u64,
    pub last_loss: Option<f32>,
}

/// The host's pace in the run against the profile's, from all-DRAM run twice: the
/// second copy (A′) measured against all-DRAM's prediction. Under emulation every plan
/// does the same real work on the same DRAM and differs by the waits the device model
/// adds, which do not drift with the host, so the host's speed moves every plan's step
/// by about the same milliseconds: the shift is added, not multiplied. It is applied
/// only beyond the noise the same plan shows twice in this run: A′ with 5 steps of
/// ResNet-50 b32 read 3.4% over the prediction in a run whose rows were all within
/// ±0.6% of theirs (docs/BENCHMARKS.md, "The host's pace").
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Anchor {
    /// A′'s measured step and its MAD, ms.
    pub measured_ms: f64,
    pub mad_ms: f64,
    /// All-DRAM's predicted step, ms.
    pub predicted_ms: f64,
    /// A′ − predicted, ms: above 0, the host ran the work every plan shares slower than
    /// the profile timed it.
    pub shift_ms: f64,
    /// All-DRAM (A) over A′, less 1: two runs of one plan in one interleaved run, the
    /// floor under any agreement figure of this run. `None` when all-DRAM did not run.
    pub noise_floor: Option<f64>,
    /// What the same plan twice shows as noise, ms: |A − A′| or their MADs together,
    /// whichever is larger (A′'s MAD alone without A).
    pub noise_ms: f64,
    /// Whether |shift| is beyond that noise, and so added to every prediction.
    pub applied: bool,
}

impl Anchor {
    /// From A′'s steps, all-DRAM's predicted step and (where it ran) all-DRAM's steps, ns.
    pub fn new(again: &Stats, predicted_ns: f64, all_dram: Option<&Stats>) -> Anchor {
        let shift = again.median - predicted_ns;
        let noise = all_dram.map_or(again.mad, |a| (a.median - again.median).abs().max(a.mad + again.mad));
        Anchor {
            measured_ms: again.median / 1e6,
            mad_ms: again.mad / 1e6,
            predicted_ms: predicted_ns / 1e6,
            shift_ms: shift / 1e6,
            noise_floor: all_dram.map(|a| a.median / again.median - 1.0),
            noise_ms: noise / 1e6,
            applied: shift.abs() > noise,
        }
    }

    /// A plan's error once its prediction carries the shift (where applied), from its
    /// measured and predicted step, ns.
    pub fn error_of(&self, measured_ns: f64, predicted_ns: f64) -> f64 {
        let shift = if self.applied { self.shift_ms * 1e6 } else { 0.0 };
        measured_ns / (predicted_ns + shift) - 1.0
    }

    /// One paragraph for a report.
    pub fn note(&self) -> String {
        let way = if self.shift_ms >= 0.0 { "slower" } else { "faster" };
        let verdict = if self.applied {
            format!(
                "beyond the {:.3} ms the same plan twice shows as noise, so the anchored column adds it to every \
                 prediction",
                self.noise_ms
            )
        } else {
            format!(
                "within the {:.3} ms the same plan twice shows as noise, so the anchored column is the raw error",
                self.noise_ms
            )
        };
        let floor = match self.noise_floor {
            Some(f) => {
                format!(" All-DRAM against A′ differ by {:+.1}%: the noise floor under every error here.", 100.0 * f)
            }
            None => String::new(),
        };
        format!(
            "The host's pace: all-DRAM ran a second time, interleaved with the others (A′), {:.3} ms ±{:.3} \
             against {:.3} ms predicted: this run did the work every plan shares {:.3} ms ({:.1}%) {way} than the \
             profile timed it, {verdict} (docs/running.md, \"The host's pace\").{floor}",
            self.measured_ms,
            self.mad_ms,
            self.predicted_ms,
            self.shift_ms.abs(),
            100.0 * (self.shift_ms / self.predicted_ms).abs(),
        )
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Every plan measured, but A′.
    pub rows: Vec<Row>,
    /// From A′, where it ran ([`ALL_DRAM_AGAIN`]).
    pub anchor: Option<Anchor>,
}

impl Comparison {
    pub fn new(measured: &[Measured]) -> Comparison {
        let find = |name: &str| measured.iter().find(|m| m.name == name);
        let first_touch = find(FIRST_TOUCH).map(|m| m.step_ns.median);
        let steps_of_all_dram = find(ALL_DRAM).map(|m| &m.step_ns);
        let all_dram = steps_of_all_dram.map(|s| s.median);
        let anchor =
            find(ALL_DRAM_AGAIN).map(|again| Anchor::new(&again.step_ns, again.predicted_step_ns, steps_of_all_dram));
        let rows = measured
            .iter()
            .filter(|m| m.name != ALL_DRAM_AGAIN)
            .map(|m| {
                let t = m.step_ns.median;
                Row {
                    name: m.name.clone(),
                    measured_ms: t / 1e6,
                    mad_ms: m.step_ns.mad / 1e6,
                    predicted_ms: m.predicted_step_ns / 1e6,
                    error: m.prediction_error(),
                    anchored_error: anchor.as_ref().map(|a| a.error_of(t, m.predicted_step_ns)),
                    speedup_vs_first_touch: first_touch.map(|f| f / t),
                    slowdown_vs_all_dram: all_dram.map(|a| t / a),
                    dram_reserved_bytes: m.report.reserved_bytes.first().copied().unwrap_or(0),
                    dram_peak_bytes: m.report.peak_bytes.first().copied().unwrap_or(0),
                    budget_bytes: m.budget_bytes,
                    blocking_moves: m.report.blocking_moves,
                    background_moves: m.report.background_moves,
                    bytes_moved: m.report.bytes_moved,
                    last_loss: m.report.losses.last().copied(),
                }
            })
            .collect();
        Comparison { rows, anchor }
    }

    pub fn row(&self, name: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.name == name)
    }
}

/// How one measured step compares with the plan's, side by side in one run.
#[derive(Debug, Clone, Serialize)]
pub struct Versus {
    pub name: String,
    pub measured_ms: f64,
    /// Its step over the plan's: above 1, the plan is faster.
    pub ratio: f64,
    /// True when the two medians differ by less than their MADs together: neither is
    /// faster beyond this run's noise.
    pub level: bool,
}

/// Where the solver's plan stands: against the best placement baseline and the
/// EMULATED 2LM as measured, and against the step the solver proved no plan at this
/// budget can be predicted under. What `placer pipeline` tells a person first.
#[derive(Debug, Clone, Serialize)]
pub struct Standing {
    pub plan: String,
    pub best_baseline: Option<Versus>,
    pub two_lm: Option<Versus>,
    /// The best baseline's predicted step, ms.
    pub best_baseline_predicted_ms: Option<f64>,
    /// The solver's proven floor and its score of its own plan, ms, both as the solver
    /// scores plans (its base, every kernel at its all-DRAM time, plus what the placement
    /// adds): (floor, score). A plan's predicted step is the checker's replay of the
    /// profile, which can differ from the score by a few percent either way.
    pub solver_ms: Option<(f64, f64)>,
    /// All-DRAM's and all-slow's predicted steps, ms: what the slow pool costs at all.
    pub all_dram_predicted_ms: Option<f64>,
    pub all_slow_predicted_ms: Option<f64>,
}

impl Standing {
    /// The first row is the plan's, the others the contenders'; `solver_ns` is what the
    /// solver proved and scored ([`placer_solve::Plan::solver_floor_and_score_ns`]).
    pub fn of(comparison: &Comparison, solver_ns: Option<(f64, f64)>) -> Option<Standing> {
        let ours = comparison.rows.first()?;
        let versus = |r: &Row| Versus {
            name: r.name.clone(),
            measured_ms: r.measured_ms,
            ratio: r.measured_ms / ours.measured_ms,
            level: (r.measured_ms - ours.measured_ms).abs() <= r.mad_ms + ours.mad_ms,
        };
        let best = comparison.rows[1..]
            .iter()
            .filter(|r| r.name != ALL_DRAM && r.name != TWO_LM)
            .min_by(|a, b| a.measured_ms.total_cmp(&b.measured_ms));
        let predicted = |name: &str| comparison.row(name).map(|r| r.predicted_ms);
        Some(Standing {
            plan: ours.name.clone(),
            best_baseline: best.map(versus),
            two_lm: comparison.row(TWO_LM).map(versus),
            best_baseline_predicted_ms: best.map(|r| r.predicted_ms),
            solver_ms: solver_ns.map(|(floor, score)| (floor / 1e6, score / 1e6)),
            all_dram_predicted_ms: predicted(ALL_DRAM),
            all_slow_predicted_ms: predicted(Baseline::AllSlow.name()),
        })
    }
}

/// An arena the host backed partly with small pages when it was reserved: `share` of
/// its whole huge pages ([`placer_pools::whole_huge_pages`]) were huge.
#[derive(Debug, Clone, PartialEq)]
struct HugePageShortfall {
    plan: String,
    pool: String,
    share: f64,
}

/// Every arena of `measured` the host put on huge pages only in part; `pools` names
/// each pool index.
fn huge_page_shortfalls(measured: &[Measured], pools: &[String]) -> Vec<HugePageShortfall> {
    measured
        .iter()
        .flat_map(|m| shortfalls_of(&m.name, &m.report.reserved_bytes, &m.report.huge_page_bytes, pools))
        .collect()
}

fn shortfalls_of<'a>(
    plan: &'a str,
    reserved: &'a [u64],
    huge: &'a [Option<u64>],
    pools: &'a [String],
) -> impl Iterator<Item = HugePageShortfall> + 'a {
    reserved.iter().zip(huge).enumerate().filter_map(move |(i, (&len, &huge))| {
        let whole = placer_pools::whole_huge_pages(len);
        let huge = huge.filter(|&h| whole > 0 && h < whole)?;
        Some(HugePageShortfall {
            plan: plan.to_string(),
            pool: pools.get(i).cloned().unwrap_or_else(|| format!("pool {i}")),
            share: huge as f64 / whole as f64,
        })
    })
}

/// What the reader of a comparison needs to know about huge pages: which arenas the host
/// short-changed, or that every one measured got them in full; `None` when none was
/// measured.
pub fn huge_pages_note(measured: &[Measured], pools: &[String]) -> Option<String> {
    let any = measured.iter().any(|m| m.report.huge_page_bytes.iter().any(Option::is_some));
    note_for(&huge_page_shortfalls(measured, pools), any)
}

fn note_for(short: &[HugePageShortfall], measured_any: bool) -> Option<String> {
    if short.is_empty() {
        return measured_any.then(|| "Huge pages: every arena measured was on 2 MiB pages in full.".to_string());
    }
    let arenas: Vec<String> =
        short.iter().map(|s| format!("{}'s {} arena {:.0}%", s.plan, s.pool, 100.0 * s.share)).collect();
    Some(format!(
        "Huge pages short: the host had too few free 2 MiB pages when these arenas were reserved and backed \
         the rest with 4 KiB pages, on which kernels can run slower than the profile timed them ({} on huge \
         pages; every other arena in full). Free memory, or fewer plans at once, gives them back.",
        arenas.join(", ")
    ))
}

/// How far the host's memcpy speed before the runs may sit from the profile's median,
/// as a ratio either way, and outside every timing the profile took, before the report
/// says the host's memory moved. Within one quiet profile on this project's VM the
/// timings spread by ±10-25%; between one profile and the next hour they moved 3×.
pub const MEMORY_MOVED: f64 = 1.25;

/// The host's memory speed through the profile against before the runs: whether it
/// moved, and one line that says so with the figures. `profile` is the memcpy timings of
/// the profile's host checks, `before_runs` the one just before the timed steps, ns/B.
pub fn memory_note(profile: &Stats, before_runs: f64) -> (bool, String) {
    let ratio = before_runs / profile.median;
    let outside = before_runs < profile.min || before_runs > profile.max;
    let moved = outside && !(1.0 / MEMORY_MOVED..=MEMORY_MOVED).contains(&ratio);
    let figures = format!(
        "a {} MiB memcpy took {before_runs:.3} ns/B before the runs, {:.3} through the profile (median of {} \
         checks, {:.3}-{:.3})",
        placer_host::activity::MEMCPY_BYTES >> 20,
        profile.median,
        profile.count,
        profile.min,
        profile.max
    );
    if !moved {
        return (false, format!("Host memory held: {figures}."));
    }
    let (by, way) = if ratio < 1.0 { (1.0 / ratio, "faster") } else { (ratio, "slower") };
    (
        true,
        format!(
            "Host memory moved: {figures}. Memory ran {by:.1}× {way} in the runs than when the kernels were \
             profiled, and every prediction carries that (docs/running.md, \"Host memory\")."
        ),
    )
}

/// The solver's charge for background copies against what the kernels beside them
/// measured: a plan's kernels split by whether a copy overlaps them. The others'
/// measured-over-predicted ratio is the run's drift from the profile, which the kernels
/// beside copies share.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CopyFit {
    /// Kernels a background copy overlaps.
    pub kernels: usize,
    /// Their profiled times, without the copies, ns.
    pub predicted_ns: f64,
    /// What the solver charged them for the copies, ns.
    pub charged_ns: f64,
    /// What they measured, ns.
    pub measured_ns: f64,
    /// The other kernels, measured over predicted; `None` when there are none.
    pub others_ratio: Option<f64>,
    /// The copy thread's memcpy time per byte in the run, beside the kernels, and the
    /// one the solver costed a copy's CPU time at (measured alone when the profile
    /// calibrated), ns; set by the caller where known.
    pub memcpy_ns_per_byte: Option<(f64, f64)>,
    /// Whether the charge came from a profile's interference calibration; set by the
    /// caller.
    pub calibrated: bool,
}

impl CopyFit {
    /// From per-kernel profiled times, copy charges and measured times (medians), ns;
    /// `None` when no copy overlaps a kernel or the lengths disagree.
    pub fn of(predicted: &[f64], charged: &[f64], measured: &[f64]) -> Option<CopyFit> {
        if predicted.len() != charged.len() || predicted.len() != measured.len() {
            return None;
        }
        let (mut fit, mut others) = (CopyFit::default(), (0.0, 0.0));
        for ((&p, &c), &m) in predicted.iter().zip(charged).zip(measured) {
            if c > 0.0 {
                fit.kernels += 1;
                fit.predicted_ns += p;
                fit.charged_ns += c;
                fit.measured_ns += m;
            } else {
                others.0 += p;
                others.1 += m;
            }
        }
        fit.others_ratio = (others.0 > 0.0).then(|| others.1 / others.0);
        (fit.kernels > 0).then_some(fit)
    }

    /// What the copies cost the kernels beside them as measured, ns: those kernels over
    /// their profiled times once scaled by the others' drift.
    pub fn measured_cost_ns(&self) -> f64 {
        self.measured_ns - self.predicted_ns * self.others_ratio.unwrap_or(1.0)
    }

    /// One paragraph for a report.
    pub fn note(&self) -> String {
        let pct = |x: f64| format!("{:+.1}%", 100.0 * x);
        let others = match self.others_ratio {
            Some(r) => format!(", and the plan's other kernels {} off theirs", pct(r - 1.0)),
            None => String::new(),
        };
        let memcpy = match self.memcpy_ns_per_byte {
            Some((run, solver)) => format!(
                " The copy thread's memcpy took {run:.3} ns/B in this run, beside kernels; the solver costed a \
                 copy's CPU time at {solver:.3} ns/B."
            ),
            None => String::new(),
        };
        let source = if self.calibrated {
            "The charge comes from the profile's interference calibration (docs/solving.md), on the host as it was then."
        } else {
            "No profile calibrated the charge: it is each copy's whole CPU time (docs/solving.md)."
        };
        format!(
            "Background copies: the solver charged the {} kernels they overlap {:.1} ms for them ({} on those \
             kernels' {:.1} ms as profiled). Measured, those kernels ran {} over their profiled times{others}: \
             the copies cost them about {:.1} ms, {:.2}× the charge. {source}{memcpy}",
            self.kernels,
            self.charged_ns / 1e6,
            pct(self.charged_ns / self.predicted_ns),
            self.predicted_ns / 1e6,
            pct(self.measured_ns / self.predicted_ns - 1.0),
            self.measured_cost_ns() / 1e6,
            self.measured_cost_ns() / self.charged_ns
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, measured_ms: f64, mad_ms: f64, predicted_ms: f64) -> Row {
        Row {
            name: name.into(),
            measured_ms,
            mad_ms,
            predicted_ms,
            error: measured_ms / predicted_ms - 1.0,
            anchored_error: None,
            speedup_vs_first_touch: None,
            slowdown_vs_all_dram: None,
            dram_reserved_bytes: 0,
            dram_peak_bytes: 0,
            budget_bytes: 0,
            blocking_moves: 0,
            background_moves: 0,
            bytes_moved: 0,
            last_loss: None,
        }
    }

    #[test]
    fn the_best_baseline_is_a_placement_and_level_means_within_both_mads() {
        let c = Comparison {
            rows: vec![
                row("ilp (async)", 10.0, 0.1, 10.2),
                row(Baseline::AllSlow.name(), 14.0, 0.1, 14.1),
                row("greedy", 10.15, 0.1, 10.3),
                row(TWO_LM, 9.0, 0.2, 9.1),
                row(ALL_DRAM, 5.0, 0.1, 5.0),
            ],
            anchor: None,
        };
        let st = Standing::of(&c, Some((9.9e6, 10.1e6))).expect("rows");
        // All-DRAM and 2LM are faster, but neither is a placement within the budget.
        let best = st.best_baseline.expect("a baseline");
        assert_eq!((best.name.as_str(), best.level), ("greedy", true), "0.15 ms apart, MADs 0.2 together");
        assert!((best.ratio - 1.015).abs() < 1e-12);
        let two_lm = st.two_lm.expect("2LM ran");
        assert!(!two_lm.level && two_lm.ratio < 1.0, "2LM is faster beyond the noise");
        assert_eq!(st.best_baseline_predicted_ms, Some(10.3));
        assert_eq!(
            (st.all_dram_predicted_ms, st.all_slow_predicted_ms, st.solver_ms),
            (Some(5.0), Some(14.1), Some((9.9, 10.1)))
        );
        assert!(Standing::of(&Comparison { rows: vec![], anchor: None }, None).is_none());
    }

    #[test]
    fn the_anchor_shifts_every_prediction_by_a_prime_s_miss_only_beyond_the_noise() {
        let stats = |v: &[f64]| Stats::of(v).expect("steps");
        // All-DRAM predicted 80 ms; A′ ran 76 (MAD 0.5), all-DRAM itself 76.76 (MAD 0.26):
        // a 4 ms shift against noise of max(0.76, 0.76).
        let (again, a) = (stats(&[75.5e6, 76e6, 76.5e6]), stats(&[76.5e6, 76.76e6, 77.02e6]));
        let anchor = Anchor::new(&again, 80e6, Some(&a));
        assert_eq!((anchor.measured_ms, anchor.mad_ms, anchor.predicted_ms), (76.0, 0.5, 80.0));
        assert!((anchor.shift_ms + 4.0).abs() < 1e-9 && (anchor.noise_ms - 0.76).abs() < 1e-9, "{anchor:?}");
        assert!(anchor.applied && (anchor.noise_floor.expect("all-DRAM ran") - 0.01).abs() < 1e-9, "{anchor:?}");
        // A plan predicted at 120 ms that measured 114: raw -5.0%; against 116, -1.7%.
        assert!((anchor.error_of(114e6, 120e6) - (114.0 / 116.0 - 1.0)).abs() < 1e-12);
        // All-DRAM's own anchored error is A against A′.
        assert!((anchor.error_of(76.76e6, 80e6) - 0.01).abs() < 1e-9);
        let note = anchor.note();
        assert!(
            note.starts_with(
                "The host's pace: all-DRAM ran a second time, interleaved with the others (A′), 76.000 ms ±0.500 \
                 against 80.000 ms predicted: this run did the work every plan shares 4.000 ms (5.0%) faster"
            ),
            "{note}"
        );
        assert!(note.contains("beyond the 0.760 ms the same plan twice shows as noise, so the anchored column adds"));
        assert!(note.ends_with("differ by +1.0%: the noise floor under every error here."), "{note}");

        // The same A′ beside an all-DRAM 4.5 ms slower: the shift is noise, and not applied.
        let noisy = Anchor::new(&again, 80e6, Some(&stats(&[80.5e6])));
        assert!(!noisy.applied && (noisy.noise_ms - 4.5).abs() < 1e-9, "{noisy:?}");
        assert_eq!(noisy.error_of(114e6, 120e6), 114.0 / 120.0 - 1.0);
        assert!(noisy.note().contains(
            "within the 4.500 ms the same plan twice shows as noise, so the anchored column is the raw error"
        ));
        // No all-DRAM: A′'s MAD is the noise, and nothing is said of a floor.
        let slower = Anchor::new(&stats(&[84e6]), 80e6, None);
        assert!(slower.applied && slower.note().contains("4.000 ms (5.0%) slower"), "{slower:?}");
        assert!(!slower.note().contains("noise floor"));
    }

    #[test]
    fn host_memory_moved_only_beyond_the_ratio_and_outside_the_profile_s_own_timings() {
        let profile = Stats::of(&[0.164, 0.238, 0.521, 0.2, 0.3]).expect("samples");
        // 0.09 against a median of 0.238: 2.6× faster, below every timing the profile took.
        let (moved, note) = memory_note(&profile, 0.09);
        assert!(moved, "{note}");
        assert!(
            note.starts_with("Host memory moved: a 16 MiB memcpy took 0.090 ns/B before the runs, 0.238"),
            "{note}"
        );
        assert!(note.contains("(median of 5 checks, 0.164-0.521)") && note.contains("2.6× faster"), "{note}");
        assert!(memory_note(&profile, 0.7).1.contains("2.9× slower"));
        // Inside the profile's own spread: held, even 1.3× off its median.
        let (moved, note) = memory_note(&profile, 0.31);
        assert!(!moved && note.starts_with("Host memory held: "), "{note}");
        // Outside the spread but within the ratio: held.
        let tight = Stats::of(&[0.080, 0.082, 0.084]).expect("samples");
        assert!(!memory_note(&tight, 0.09).0);
        assert!(memory_note(&tight, 0.11).0);
    }

    #[test]
    fn arenas_short_of_huge_pages_are_named_and_the_others_are_not() {
        const MIB: u64 = 1 << 20;
        let pools = ["dram".to_string(), "pmem".to_string()];
        // 10 MiB + a tail: 5 whole huge pages. 4 of them huge is 80%; all 5 is in full,
        // whatever the tail got; unmeasured and under-a-huge-page arenas say nothing.
        let short: Vec<_> = shortfalls_of("greedy", &[10 * MIB + 4096, 1 << 30], &[Some(8 * MIB), None], &pools)
            .chain(shortfalls_of("ilp", &[10 * MIB + 4096, MIB], &[Some(10 * MIB), Some(0)], &pools))
            .collect();
        assert_eq!(short, [HugePageShortfall { plan: "greedy".into(), pool: "dram".into(), share: 0.8 }]);
        let note = note_for(&short, true).expect("one arena short");
        assert!(
            note.starts_with("Huge pages short:") && note.contains("greedy's dram arena 80% on huge pages"),
            "{note}"
        );
        assert_eq!(
            note_for(&[], true).as_deref(),
            Some("Huge pages: every arena measured was on 2 MiB pages in full.")
        );
        assert_eq!(note_for(&[], false), None, "nothing measured, nothing to say");
    }

    #[test]
    fn a_copy_charge_is_set_beside_what_its_kernels_measured_net_of_the_others_drift() {
        // Two kernels beside copies (10 and 20 ms profiled, charged 3 and 6 ms), measured
        // at 12 and 24; the others ran 10% over (50 → 55): drift explains 3 ms of the 6.
        let fit = CopyFit::of(&[10e6, 20e6, 50e6], &[3e6, 6e6, 0.0], &[12e6, 24e6, 55e6]).expect("two copies");
        assert_eq!((fit.kernels, fit.predicted_ns, fit.charged_ns, fit.measured_ns), (2, 30e6, 9e6, 36e6));
        assert!((fit.others_ratio.expect("others") - 1.1).abs() < 1e-12);
        assert!((fit.measured_cost_ns() - 3e6).abs() < 1e-3, "{fit:?}");
        let note = fit.note();
        assert!(
            note.contains("the 2 kernels they overlap 9.0 ms for them (+30.0% on those kernels' 30.0 ms"),
            "{note}"
        );
        assert!(
            note.contains("ran +20.0% over their profiled times, and the plan's other kernels +10.0% off"),
            "{note}"
        );
        assert!(note.contains("about 3.0 ms, 0.33× the charge"), "{note}");
        assert!(!note.contains("memcpy"), "not known, not said: {note}");
        assert!(
            note.ends_with("No profile calibrated the charge: it is each copy's whole CPU time (docs/solving.md)."),
            "{note}"
        );
        let fit = CopyFit { memcpy_ns_per_byte: Some((0.1234, 0.2)), calibrated: true, ..fit };
        let note = fit.note();
        assert!(note.contains("The charge comes from the profile's interference calibration"), "{note}");
        assert!(
            note.ends_with(
                "memcpy took 0.123 ns/B in this run, beside kernels; the solver costed a copy's CPU time at 0.200 ns/B."
            ),
            "{note}"
        );
        assert_eq!(CopyFit::of(&[1.0], &[0.0], &[1.0]), None, "no copies, nothing to fit");
        assert_eq!(CopyFit::of(&[1.0], &[1.0], &[]), None, "lengths disagree");
    }
}
