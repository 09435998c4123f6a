//! The statistics of agreement: how two medians are judged different beyond their
//! noise, and how a set of rows (kernels measured by both profiles) is summarised.

use super::Row;
use crate::record::Measurement;
use serde::Serialize;

/// sqrt(π/2): the asymptotic standard error of a sample median is this times σ/√n for
/// normally distributed samples.
const MEDIAN_SE_FACTOR: f64 = 1.2533;
/// Scales a MAD to σ for normally distributed samples.
const MAD_TO_SIGMA: f64 = 1.4826;
/// A difference is significant beyond this many combined standard errors.
const SIGNIFICANCE_SIGMAS: f64 = 3.0;
/// Ratios are compared with their band with this much slack, so a ratio that is exactly
/// on the edge (1.1 computed as 1.1000000000000001) counts as inside.
pub(super) const EDGE_SLACK: f64 = 1e-9;

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
    pub(super) fn of<'a>(rows: impl Iterator<Item = &'a Row>, tolerance: f64) -> Agreement {
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
    differs(a.median_ns, a.mad_ns, a.count, b.median_ns, b.mad_ns, b.count)
}

/// [`significant`] on bare figures: medians, MADs and sample counts of A and B.
pub(super) fn differs(a_ns: f64, a_mad: f64, a_count: u32, b_ns: f64, b_mad: f64, b_count: u32) -> bool {
    let se = median_se(a_mad, a_count).hypot(median_se(b_mad, b_count));
    (b_ns - a_ns).abs() > SIGNIFICANCE_SIGMAS * se
}

/// B/A set against its noise floor kernel by kernel, over the kernels both judge: how
/// many are within tolerance in the floor but not in B/A (`worse`), and the reverse
/// (`better`). Both shares come from the same kernels, so whether B/A's is lower than
/// the floor's beyond chance is McNemar's test on these two counts: under "B agrees as
/// well as the repeat does", each kernel that differs is as likely to fall either way.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Paired {
    pub kernels: usize,
    pub worse: usize,
    pub better: usize,
    /// One-sided, continuity-corrected: (worse − better − 1)/√(worse + better), 0 when
    /// none differ.
    pub z: f64,
}

/// Fewer kernels than this that differ between B/A and the floor cannot tell chance
/// from a real shortfall, and the floor's share is needed outright.
pub const PAIRED_MIN_DISCORDANT: usize = 20;
/// B/A falls short of the floor beyond chance above this z (one-sided 5%).
pub const PAIRED_Z: f64 = 1.645;

impl Paired {
    /// Joins `rows` (B/A; tiny ones left out) and `floor` on the kernel and its
    /// configuration.
    pub(super) fn of(rows: &[Row], floor: &[Row], tolerance: f64) -> Paired {
        let within = |r: &Row| (r.ratio - 1.0).abs() <= tolerance + EDGE_SLACK;
        let of_floor: std::collections::HashMap<(u64, &str), bool> =
            floor.iter().map(|r| ((r.signature, r.config.as_str()), within(r))).collect();
        let (mut kernels, mut worse, mut better) = (0, 0, 0);
        for r in rows.iter().filter(|r| !r.tiny) {
            let Some(&in_floor) = of_floor.get(&(r.signature, r.config.as_str())) else { continue };
            kernels += 1;
            match (within(r), in_floor) {
                (false, true) => worse += 1,
                (true, false) => better += 1,
                _ => {}
            }
        }
        let differ = (worse + better) as f64;
        let z = if differ > 0.0 { (worse as f64 - better as f64 - 1.0) / differ.sqrt() } else { 0.0 };
        Paired { kernels, worse, better, z }
    }

    /// Enough kernels differ to judge, and B/A is not short of the floor beyond chance.
    pub fn within_chance(&self) -> bool {
        self.worse + self.better >= PAIRED_MIN_DISCORDANT && self.z <= PAIRED_Z
    }
}
