//! When B's kernels run faster or slower than A's as a whole, beyond the noise: by how
//! much, and the likeliest reason, from what the two profiles recorded.
//!
//! A median ratio off 1 says nothing of simultaneity by itself. The causes this can tell
//! apart, in the order they are tested:
//!
//! - **step context**: A and B ran different steps (picked against live or whole), so a
//!   kernel's inputs were in cache to different degrees (docs/profiling.md);
//! - **the host's pace**: every profile times each node once in its reference pass
//!   (base placement, nothing picked) before the first pass, identically in single and
//!   simultaneous mode. When B's reference pass ran as much faster or slower than A's as
//!   its kernels did, the host changed speed between the two (frequency, neighbours on
//!   a shared host), not the packing;
//! - **rounds**: one profile measured its kernels in a single round (its round check
//!   was quiet) and the other in several. A round's medians share one moment of the
//!   host's pace; on this project's VM a simultaneous LeNet profile of one round sat
//!   1.9% off a single one, and two of three rounds each 0.1%;
//! - **neighbours in the pass**: the two differ in how many configurations share a pass,
//!   and nothing above explains the shift;
//! - otherwise, not known.
//!
//! Background copies are not a cause between two profiles: no pass runs the copy
//! thread. Against a plan's run ([`in_situ`]) they are the first cause tested: a plan
//! runs its background copies beside its kernels.

use super::Agreement;
use crate::record::{Profile, Steps};
use placer_exec::Stats;
use serde::Serialize;

/// A median ratio within this of 1 is never called a bias, floor or not.
const NEGLIGIBLE: f64 = 0.01;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BiasCause {
    CopyThread,
    StepContext,
    HostPace,
    Rounds,
    Neighbours,
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bias {
    /// Median B/A over the kernels of at least `min_us`.
    pub median_ratio: f64,
    /// The floor's median ratio (A against its repeat), when there is one.
    pub floor_ratio: Option<f64>,
    /// Median over nodes of B's reference-pass time over A's (nodes of at least
    /// `min_us` in A); `None` when either profile lacks its reference pass. Against a
    /// plan's run: the profile/run ratio of all-DRAM beside it ([`super::Pace`]).
    pub pace_ratio: Option<f64>,
    pub cause: BiasCause,
    /// One sentence: the shift, and its likely cause.
    pub text: String,
}

/// The bias of B against A with `median` B/A, or `None` when it is within 1% of 1 or
/// within the floor's own shift (`floor`: A against its repeat).
pub(super) fn judge(a: &Profile, b: &Profile, median: f64, floor: Option<f64>, min_us: f64) -> Option<Bias> {
    let off = median.ln().abs();
    let floor_off = floor.map_or(0.0, |f| f.ln().abs());
    if !off.is_finite() || off <= (1.0 + NEGLIGIBLE).ln() || off <= floor_off {
        return None;
    }
    let pace_ratio = pace(a, b, min_us);
    let (ha, hb) = (&a.header, &b.header);
    let (ra, rb) = (rounds(a), rounds(b));
    let (cause, why) = if ha.protocol.steps != hb.protocol.steps {
        let why = format!(
            "step context: A ran {} steps and B {} steps, so kernels read inputs in different cache states",
            ha.protocol.steps.as_str(),
            hb.protocol.steps.as_str()
        );
        (BiasCause::StepContext, why)
    } else if let Some(p) = pace_ratio.filter(|p| (p.ln() - median.ln()).abs() < off / 2.0) {
        let why = format!("the host's pace: B's reference pass, the same placement in both, ran {p:.3}x A's too");
        (BiasCause::HostPace, why)
    } else if ra != rb && ra.min(rb) == 1 {
        let why = format!(
            "rounds: A's kernels were measured in {ra} round(s) and B's in {rb}, and one round's medians share one \
             moment of the host's pace (`--round-noise 0` runs every round)"
        );
        (BiasCause::Rounds, why)
    } else if ha.mode.max_simultaneous != hb.mode.max_simultaneous {
        let pace = pace_ratio.map_or_else(String::new, |p| format!(" (their reference passes ran {p:.3}x)"));
        let why = format!("neighbours in the pass: A is {}, B {}{pace}", ha.mode.label(), hb.mode.label());
        (BiasCause::Neighbours, why)
    } else {
        (BiasCause::Unknown, "cause not known: same steps, same mode, and the host's pace does not explain it".into())
    };
    let shift = if median > 1.0 { "slower" } else { "faster" };
    let text =
        format!("B's kernels ran {} {shift} than A's {}", off_by(median), because("median B/A", median, floor, &why));
    Some(Bias { median_ratio: median, floor_ratio: floor, pace_ratio, cause, text })
}

/// In how many rounds a profile measured its kernels: the median over its (signature,
/// configuration) keys of how many measurements each has (a round check's re-run adds
/// one to a few keys, and a pass's instances of one signature are one measurement each).
fn rounds(p: &Profile) -> usize {
    let mut per_key: std::collections::HashMap<(u64, &[u16]), usize> = std::collections::HashMap::new();
    for m in &p.measurements {
        *per_key.entry((m.signature, m.config.as_slice())).or_default() += 1;
    }
    let mut counts: Vec<usize> = per_key.into_values().collect();
    counts.sort_unstable();
    counts.get(counts.len() / 2).copied().unwrap_or(0)
}

/// Median over nodes of B's reference-pass time over A's, for nodes of at least
/// `min_us` in A.
fn pace(a: &Profile, b: &Profile, min_us: f64) -> Option<f64> {
    if a.reference_ns.len() != b.reference_ns.len() {
        return None;
    }
    let ratios: Vec<f64> = a
        .reference_ns
        .iter()
        .zip(&b.reference_ns)
        .filter(|&(&x, &y)| x >= min_us * 1e3 && y > 0.0 && x.is_finite() && y.is_finite())
        .map(|(x, y)| y / x)
        .collect();
    Stats::of(&ratios).map(|s| s.median)
}

/// The bias of a profile's times against a plan's run (median profile/run `median`;
/// `floor`: the run against its repeat; `pace`: the ratio the host's pace explains), or
/// `None` within 1% of 1 or within the floor.
/// `beside` and `apart` are the kernels with and without a background copy beside them
/// in the run; `steps` what the profile's passes ran.
pub(super) fn in_situ(
    median: f64,
    floor: Option<f64>,
    pace: Option<f64>,
    beside: &Agreement,
    apart: &Agreement,
    steps: Steps,
) -> Option<Bias> {
    let off = median.ln().abs();
    let floor_off = floor.map_or(0.0, |f| f.ln().abs());
    let quiet = (1.0 + NEGLIGIBLE).ln().max(floor_off);
    if !off.is_finite() || off <= quiet {
        return None;
    }
    let (cause, why) = match (beside.median_ratio, apart.median_ratio) {
        _ if pace.is_some_and(|p| (p.ln() - median.ln()).abs() < off / 2.0) => (
            BiasCause::HostPace,
            format!(
                "the host's pace: all-DRAM, run beside the plan, is off the profile by {:.3} too (a shift common \
                 to every placement)",
                pace.unwrap_or(f64::NAN)
            ),
        ),
        (Some(b), Some(a)) if a.ln().abs() <= quiet && b.ln().abs() > quiet => (
            BiasCause::CopyThread,
            format!(
                "the copy thread: the {} kernel(s) beside a background copy are off by {b:.3}, the others by {a:.3}",
                beside.rows
            ),
        ),
        _ if steps == Steps::Picked => (
            BiasCause::StepContext,
            "step context: the profile ran picked steps (each kernel right after its producers, with what a step \
             leaves in memory written out of cache by a rule), the plan whole ones, so kernels may read inputs in \
             different cache states"
                .to_string(),
        ),
        _ => (
            BiasCause::Unknown,
            "cause not known: the kernels' neighbours in the plan, or the reuse of the arenas' bytes (all-DRAM \
             beside the plan, where it ran, does not explain it)"
                .to_string(),
        ),
    };
    let shift = if median > 1.0 { "longer" } else { "shorter" };
    let text = format!(
        "the profile's times are {} {shift} than the run's {}",
        off_by(median),
        because("median", median, floor, &why)
    );
    Some(Bias { median_ratio: median, floor_ratio: floor, pace_ratio: pace, cause, text })
}

/// How far a median ratio is off 1, in percent.
fn off_by(median: f64) -> String {
    format!("{:.1}%", 100.0 * (median - 1.0).abs())
}

/// What follows a shift's first words: its median beside the floor's, and its likely cause.
fn because(label: &str, median: f64, floor: Option<f64>, why: &str) -> String {
    let beyond =
        floor.map_or_else(|| "with no floor to judge it by".to_string(), |f| format!("beyond the floor's {f:.3}"));
    format!("({label} {median:.3}, {beyond}); likely cause: {why}")
}
