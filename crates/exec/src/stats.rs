//! Robust summary statistics: a shared host makes single numbers meaningless.

use serde::Serialize;

#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Stats {
    pub count: usize,
    pub median: f64,
    /// Median absolute deviation from the median.
    pub mad: f64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    /// Coefficient of variation: standard deviation / mean.
    pub cv: f64,
}

impl Stats {
    /// Summarises samples; `None` when there are none.
    pub fn of(samples: &[f64]) -> Option<Stats> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let median = median_sorted(&sorted);
        let mut deviations: Vec<f64> = sorted.iter().map(|x| (x - median).abs()).collect();
        deviations.sort_by(f64::total_cmp);
        let n = samples.len() as f64;
        let mean = samples.iter().sum::<f64>() / n;
        let variance = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        Some(Stats {
            count: samples.len(),
            median,
            mad: median_sorted(&deviations),
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            mean,
            cv: if mean > 0.0 { variance.sqrt() / mean } else { 0.0 },
        })
    }
}

fn median_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_mad_resist_outliers() {
        let s = Stats::of(&[10.0, 11.0, 9.0, 10.0, 1000.0]).expect("samples");
        assert_eq!((s.median, s.mad, s.min, s.max, s.count), (10.0, 1.0, 9.0, 1000.0, 5));
        assert!(s.cv > 1.0);
        let even = Stats::of(&[1.0, 2.0, 3.0, 4.0]).expect("samples");
        assert_eq!(even.median, 2.5);
        assert_eq!(Stats::of(&[]), None);
    }
}
