//! What a placement adds to a kernel's time, fitted to a screening design.
//!
//! ```text
//! t(v) = t0 + Σ_{f slow} Δ_f(v_f) + (j − 1)·σ̄        j = number of factors outside pool 0 (j ≥ 1)
//! ```
//!
//! `t0` is the base (every factor in pool 0), `Δ_f(p)` what factor f alone in pool p adds
//! (its single minus the base), and `σ_p` the interaction: what every further slow
//! factor adds beyond its own main effect, fitted so that the corner (every factor in
//! p) is reproduced exactly: `σ_p = (corner_p − t0 − Σ_f Δ_f(p)) / (k − 1)`. In a mixed
//! configuration `σ̄` is the mean of its slow factors' pools' σ.
//!
//! Why this form: a kernel is bound by compute or by memory. Write it as a roofline,
//! `t = t0 + max(0, Σ_{f slow} μ_f − s)`: every slow operand brings μ_f of extra memory
//! time, and the kernel's compute hides the first `s` of it. With μ_f = Δ_f + s this is
//! the formula above with σ = s. So
//!
//! - σ > 0: the kernel is compute-bound; a slow operand alone is (partly) hidden and costs
//!   less than it does beside others;
//! - σ = 0: penalties add up, per operand, as in the emulated tier (which charges each
//!   operand's bytes by construction) and in a memory-bound kernel;
//! - σ < 0: penalties overlap (one slow stream hides another's latency, or a write
//!   penalty hides reads); the predicted excess never falls below the largest single
//!   effect among the slow factors.
//!
//! The model reproduces every design point exactly, so the design itself cannot show its
//! error: the validation sample does (`verdict`). What it cannot express, such as which
//! operands hide which, shows there as a miss, and the family is measured in full.

use crate::record::Fit;

impl Fit {
    /// Fits the model to a design of `factors` factors over `pools` pools, reading each
    /// design point's time from `time` (factor values to ns). `None` when a point of the
    /// design is missing.
    pub fn from_design(factors: usize, pools: u16, time: impl Fn(&[u16]) -> Option<f64>) -> Option<Fit> {
        let pools = usize::from(pools);
        let base_ns = time(&vec![0; factors])?;
        let mut main_ns = vec![vec![0.0; pools]; factors];
        for (f, row) in main_ns.iter_mut().enumerate() {
            for (p, slot) in row.iter_mut().enumerate().skip(1) {
                let mut v = vec![0u16; factors];
                v[f] = p as u16;
                *slot = time(&v)? - base_ns;
            }
        }
        let mut interaction_ns = vec![0.0; pools];
        if factors >= 2 {
            for (p, slot) in interaction_ns.iter_mut().enumerate().skip(1) {
                let corner = time(&vec![p as u16; factors])?;
                let additive: f64 = main_ns.iter().map(|row| row[p]).sum();
                *slot = (corner - base_ns - additive) / (factors - 1) as f64;
            }
        }
        Some(Fit { base_ns, main_ns, interaction_ns })
    }

    /// The predicted time of the configuration whose factors sit in `values`.
    pub fn predict(&self, values: &[u16]) -> f64 {
        let slow: Vec<(usize, usize)> =
            values.iter().enumerate().filter(|(_, p)| **p != 0).map(|(f, &p)| (f, usize::from(p))).collect();
        if slow.is_empty() {
            return self.base_ns;
        }
        let main: f64 = slow.iter().map(|&(f, p)| self.main_ns[f][p]).sum();
        let sigma = slow.iter().map(|&(_, p)| self.interaction_ns[p]).sum::<f64>() / slow.len() as f64;
        let mut excess = main + (slow.len() - 1) as f64 * sigma;
        if sigma < 0.0 {
            let largest = slow.iter().map(|&(f, p)| self.main_ns[f][p]).fold(f64::NEG_INFINITY, f64::max);
            excess = excess.max(largest);
        }
        self.base_ns + excess
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel as a closure of factor values, fitted on its design and asked elsewhere.
    fn fit_of(k: usize, pools: u16, t: impl Fn(&[u16]) -> f64) -> Fit {
        Fit::from_design(k, pools, |v| Some(t(v))).expect("complete design")
    }

    #[test]
    fn additive_kernels_are_predicted_exactly() {
        let cost = [[0.0, 30.0, 45.0], [0.0, 5.0, 9.0], [0.0, 120.0, 200.0], [0.0, 1.0, 2.0]];
        let t = |v: &[u16]| 1000.0 + v.iter().enumerate().map(|(f, &p)| cost[f][p as usize]).sum::<f64>();
        let fit = fit_of(4, 3, t);
        for v in crate::design::all_values(4, 3) {
            assert!((fit.predict(&v) - t(&v)).abs() < 1e-9, "{v:?}");
        }
        assert!(fit.interaction_ns.iter().all(|s| s.abs() < 1e-9));
    }

    #[test]
    fn design_points_are_reproduced_whatever_the_kernel() {
        // A roofline: compute 1000 hides memory until it exceeds it.
        let t = |v: &[u16]| {
            let memory =
                400.0 + v.iter().enumerate().map(|(f, &p)| f64::from(p) * (150.0 + 50.0 * f as f64)).sum::<f64>();
            memory.max(1000.0)
        };
        let fit = fit_of(5, 2, t);
        for v in crate::design::screening_points(5, 2) {
            assert!((fit.predict(&v) - t(&v)).abs() < 1e-9, "{v:?}");
        }
    }

    #[test]
    fn a_compute_bound_kernel_hides_a_slow_operand_alone() {
        // Compute 1000, memory 700 in DRAM; each slow operand adds 400 of memory time.
        let t = |v: &[u16]| (700.0 + 400.0 * v.iter().filter(|p| **p != 0).count() as f64).max(1000.0);
        let fit = fit_of(3, 2, t);
        assert_eq!(fit.main_ns[0][1], 100.0, "one slow operand shows only what compute cannot hide");
        assert!(fit.interaction_ns[1] > 0.0, "a second one costs more than the first: σ = {:?}", fit.interaction_ns);
        // Two slow operands: 1500 measured; the additive model would say 1200.
        assert!((fit.predict(&[1, 1, 0]) - 1500.0).abs() < 1e-9, "{}", fit.predict(&[1, 1, 0]));
    }

    #[test]
    fn overlapping_penalties_never_predict_less_than_the_largest_single() {
        // A write penalty (factor 2) hides the reads (factors 0, 1).
        let t = |v: &[u16]| {
            let reads = 100.0 * f64::from(v[0]) + 100.0 * f64::from(v[1]);
            1000.0 + reads.max(300.0 * f64::from(v[2]))
        };
        let fit = fit_of(3, 2, t);
        assert!(fit.interaction_ns[1] < 0.0);
        assert!(fit.predict(&[1, 0, 1]) >= 1300.0 - 1e-9);
    }
}
