//! The noise floor B/A is judged by, when it is not A against its repeat alone: both
//! profiles against their repeats, and the words for a shortfall against a floor.

use super::stats::{PAIRED_MIN_DISCORDANT, PAIRED_Z};
use super::{Agreement, Paired, Row, percent};
use crate::record::Profile;
use std::collections::BTreeMap;

/// The floor of B/A from A against its repeat and B against its (rows of each pair,
/// joined on the kernel and its configuration; tiny as A says): kernel by kernel,
/// ratio exp((ln A′/A + ln B′/B)/√2). If every ratio strays by independent noise, ln
/// B/A has variance σ_A² + σ_B², ln A′/A 2σ_A² and ln B′/B 2σ_B², so this sum has B/A's
/// variance: the agreement two profiles with A's and B's noise reach when they measure
/// the same thing. A kernel differs significantly here when it does in either pair.
pub(super) fn joint_floor(a_rows: &[Row], b_rows: &[Row]) -> Vec<Row> {
    let of_b: BTreeMap<(u64, &str), &Row> = b_rows.iter().map(|r| ((r.signature, r.config.as_str()), r)).collect();
    a_rows
        .iter()
        .filter(|r| !r.tiny)
        .filter_map(|ra| {
            let rb = of_b.get(&(ra.signature, ra.config.as_str()))?;
            let ratio = ((ra.ratio.ln() + rb.ratio.ln()) / std::f64::consts::SQRT_2).exp();
            Some(Row { ratio, significant: ra.significant || rb.significant, ..ra.clone() })
        })
        .collect()
}

/// A note when B agrees with its own repeat clearly less well than A does with its,
/// with the likely reason when their wall times give one.
pub(super) fn repeats_note(of_a: &Agreement, of_b: &Agreement, a: &Profile, b: &Profile) -> Option<String> {
    let (wa, wb) = (of_a.within_tolerance?, of_b.within_tolerance?);
    if wb + REPEATS_APART >= wa {
        return None;
    }
    let why = if 2.0 * b.wall_seconds < a.wall_seconds {
        format!(
            "likely because B was measured in {:.0} s and A in {:.0} s: a profile measured in seconds carries the \
             host's pace of those seconds, where one measured over minutes averages it",
            b.wall_seconds, a.wall_seconds
        )
    } else {
        "cause not known: B was measured for at least half as long as A".to_string()
    };
    Some(format!(
        "B agrees with its repeat on {} of kernels, A with its on {} ({why}); the floor is both repeats' noise",
        percent(wb),
        percent(wa)
    ))
}

/// How much worse B's repeat must agree than A's before the report says why.
const REPEATS_APART: f64 = 0.10;

/// Whether B/A's shortfall against the floor is chance, in words.
pub(super) fn shortfall(p: &Paired) -> String {
    if p.worse + p.better < PAIRED_MIN_DISCORDANT {
        format!("under {PAIRED_MIN_DISCORDANT} differ, too few to call it chance, so the floor's share is needed")
    } else if p.within_chance() {
        format!("short of it within chance (McNemar z {:.2} ≤ {PAIRED_Z})", p.z)
    } else {
        format!("short of it beyond chance (McNemar z {:.2} > {PAIRED_Z})", p.z)
    }
}
