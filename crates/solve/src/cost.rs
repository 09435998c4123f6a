//! Kernel cost: the profile's measured times where a configuration was measured, its
//! design's predictions where a screening design predicted it instead (validated per
//! signature, docs/profiling.md), and a cost model fitted to the measurements
//! everywhere else (docs/solving.md).
//!
//! The model is additive over operands, which is how a slow pool slows a kernel down:
//! each byte read from or written to pool p costs extra ns on top of the kernel's DRAM
//! time.
//!
//! ```text
//! time(n, config) = base(n) + Σ_operands δ(n, operand, pool of operand)
//! base(n)         = measured all-DRAM time, else fixed + flops·ns_per_flop + bytes·ns_per_byte
//! δ(n, o, p)      = read(o)·read_extra(p) + written(o)·write_extra(p)     (0 for pool 0)
//! ```
//!
//! The global coefficients are least-squares fits to the profile; with no profile they
//! come from the pools' bandwidths (and a nominal compute rate). For every signature the
//! profile measured, base and δ are refitted to that kernel's own measurements (ridge
//! regression toward the global model, so operands the profile never moved keep the
//! global estimate). The ILP weighs configurations with this per-kernel fit; the plan's
//! predicted time uses the measured value wherever there is one.

use crate::pools::SolvePools;
use placer_ir::ops::node_traffic;
use placer_ir::{Model, NodeId};
use placer_profile::{Interference, Measurement, Prediction, mask_negligible, negligible_operands, signature};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Nominal compute rate when no profile calibrates it: about half of this VM's measured
/// FMA peak (229 GFLOP/s, docs/BENCHMARKS.md), since real kernels reach 20–90% of it.
const DEFAULT_GFLOPS: f64 = 100.0;
/// Nominal per-kernel overhead (dispatch, thread wake-up) when no profile calibrates it.
const DEFAULT_FIXED_NS: f64 = 2_000.0;

/// Where a kernel time comes from, in the order they are preferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeSource {
    /// Measured by the profile.
    Measured,
    /// Predicted by a screening design from its kernel's measured configurations, and
    /// validated on a held-out sample.
    Predicted,
    /// Estimated by the cost model.
    Estimated,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostModel {
    pub fixed_ns: f64,
    pub ns_per_flop: f64,
    pub ns_per_byte: f64,
    /// Extra ns per byte read from each pool (0 for pool 0).
    pub read_extra_ns_per_byte: Vec<f64>,
    pub write_extra_ns_per_byte: Vec<f64>,
    /// All-DRAM measurements the base coefficients were fitted to (0: nominal).
    pub base_fitted_from: usize,
    /// Measurements with an operand outside pool 0 the pool coefficients were fitted
    /// to (0: from the pools' bandwidths).
    pub pools_fitted_from: usize,
}

/// One kernel's additive cost: base plus an extra per operand and pool.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelCost {
    pub base_ns: f64,
    /// `delta_ns[operand][pool]`, operands in `Node::operands` order; pool 0 is 0.
    pub delta_ns: Vec<Vec<f64>>,
    /// Whether the profile measured this kernel's signature at all.
    pub fitted: bool,
    /// The share of a background copy's CPU time this kernel loses while the copy runs
    /// beside it ([`KernelCost::copy_loss_ns`]): measured per op by the profile's
    /// interference calibration (per signature for the longest-running ones), else
    /// [`UNCALIBRATED_SHARE`].
    pub interference_share: f64,
    /// What a background copy costs this kernel whatever its size (handing it over wakes
    /// the copy thread on a worker's core): measured per op by the same calibration,
    /// else 0.
    pub interference_fixed_ns: f64,
}

/// A kernel's share of a background copy's CPU time when no profile measured its op:
/// all of it, as a kernel split evenly over every core of a host the copy thread shares
/// loses (on two cores, BERT-tiny's GEMMs lost about that).
pub const UNCALIBRATED_SHARE: f64 = 1.0;

impl KernelCost {
    /// What a background copy taking `copy_cpu_ns` of CPU time costs this kernel beside
    /// it: the fixed part, plus its share of that time capped at the kernel's all-DRAM
    /// time (it cannot lose more than it overlaps, and an emulated pool's wait is a
    /// sleep). The fixed part is not capped: it is what the hand-over cost a kernel of
    /// the op, measured as a whole, not a share of this kernel. Several copies beside one
    /// kernel are capped one by one, not together, so that the cost stays linear in the
    /// moves the solver chooses; that over-charges a kernel with several.
    pub fn copy_loss_ns(&self, copy_cpu_ns: f64) -> f64 {
        self.interference_fixed_ns.max(0.0) + self.interference_share.max(0.0) * copy_cpu_ns.min(self.base_ns)
    }

    pub fn estimate(&self, config: &[u16]) -> f64 {
        self.base_ns + config.iter().zip(&self.delta_ns).map(|(&p, d)| d[p as usize]).sum::<f64>()
    }
}

#[derive(Debug, Clone)]
pub struct Costs {
    pub model: CostModel,
    /// Indexed by node id.
    pub kernels: Vec<KernelCost>,
    pub signatures: Vec<u64>,
    measured: HashMap<(u64, Vec<u16>), f64>,
    predicted: HashMap<(u64, Vec<u16>), f64>,
    /// Per signature, the operands whose pool the profile deemed immaterial (its
    /// negligible-operand rule): lookups ignore them.
    immaterial: HashMap<u64, Vec<bool>>,
    /// What a step costs beyond its kernels' times (the profile's
    /// [`placer_profile::overhead`] measurement, else 0), ns: added to every plan's
    /// predicted step. It does not depend on where tensors are.
    pub step_overhead_ns: f64,
    /// Whether a profile's calibration set the kernels' interference shares.
    pub interference_calibrated: bool,
    /// The one share another framework's whole step set in place of those shares, where
    /// its profile measured one ([`Costs::with_copy_level`]).
    pub copy_level: Option<CopyLevel>,
}

/// The one share [`Costs::with_copy_level`] gave every kernel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CopyLevel {
    /// What the framework's step lost per byte a copy thread moved beside it, ns/B.
    pub loss_ns_per_byte: f64,
    /// `loss_ns_per_byte` over the memcpy's time alone: every kernel's share.
    pub share: f64,
    /// What the calibration's per-op shares would have charged per byte, their fixed
    /// parts left out (each kernel's share weighted by its all-DRAM time, as a copy paced
    /// through the step meets the kernels in proportion to their time, times the memcpy's
    /// time alone), ns/B: set aside, reported beside the loss.
    pub calibrated_ns_per_byte: f64,
}

impl Costs {
    /// Costs for `model` on `pools`, from `measurements` (merged rounds of a profile of
    /// this model; empty for the cost model alone).
    pub fn new(model: &Model, pools: &SolvePools, measurements: &[Measurement]) -> Costs {
        let n_pools = pools.len();
        let signatures: Vec<u64> = (0..model.nodes().len()).map(|i| signature(model, NodeId(i as u32))).collect();
        let mut first_of: HashMap<u64, NodeId> = HashMap::new();
        for (i, &s) in signatures.iter().enumerate() {
            first_of.entry(s).or_insert(NodeId(i as u32));
        }
        let features: HashMap<u64, Features> = first_of.iter().map(|(&s, &n)| (s, Features::of(model, n))).collect();
        let measured: HashMap<(u64, Vec<u16>), f64> = measurements
            .iter()
            .filter(|m| features.get(&m.signature).is_some_and(|f| f.traffic.len() == m.config.len()))
            .filter(|m| m.config.iter().all(|&p| (p as usize) < n_pools) && m.median_ns.is_finite())
            .map(|m| ((m.signature, m.config.clone()), m.median_ns))
            .collect();
        let cost_model = fit_global(pools, &features, &measured);
        let mut by_signature: HashMap<u64, Vec<(&[u16], f64)>> = HashMap::new();
        for ((s, config), &t) in &measured {
            by_signature.entry(*s).or_default().push((config.as_slice(), t));
        }
        let fits: HashMap<u64, KernelCost> = features
            .iter()
            .map(|(&s, f)| {
                let prior = cost_model.kernel(f, n_pools);
                let fit = match by_signature.get(&s) {
                    Some(rows) => fit_kernel(&prior, rows, n_pools),
                    None => prior,
                };
                (s, fit)
            })
            .collect();
        let kernels = signatures.iter().map(|s| fits[s].clone()).collect();
        Costs {
            model: cost_model,
            kernels,
            signatures,
            measured,
            predicted: HashMap::new(),
            immaterial: HashMap::new(),
            step_overhead_ns: 0.0,
            interference_calibrated: false,
            copy_level: None,
        }
    }

    /// These costs with a screening design's predictions for the configurations it did
    /// not measure (a measured configuration keeps its measurement).
    pub fn with_predictions(mut self, predictions: &[Prediction]) -> Costs {
        self.predicted = predictions
            .iter()
            .filter(|p| p.predicted_ns.is_finite() && !self.measured.contains_key(&(p.signature, p.config.clone())))
            .map(|p| ((p.signature, p.config.clone()), p.predicted_ns))
            .collect();
        self
    }

    /// These costs with the interference shares and fixed parts `calibration` measured
    /// for each op (ops it did not measure keep [`UNCALIBRATED_SHARE`] and no fixed part),
    /// a signature's own share in place of its op's where it measured one.
    pub fn with_interference(mut self, model: &Model, calibration: &Interference) -> Costs {
        let (shares, fixed) = (calibration.shares(), calibration.fixed_ns());
        let own = calibration.signature_shares();
        for (i, k) in self.kernels.iter_mut().enumerate() {
            let op = model.node(NodeId(i as u32)).op.to_string();
            if let (Some(&share), Some(&fixed)) = (shares.get(op.as_str()), fixed.get(op.as_str())) {
                k.interference_share = own.get(&self.signatures[i]).copied().unwrap_or(share);
                k.interference_fixed_ns = fixed;
            }
        }
        self.interference_calibrated = true;
        self
    }

    /// These costs with one share for every kernel, so that a copy is charged
    /// `loss_ns_per_byte` whatever kernel it runs beside: what another framework's whole
    /// step lost per byte a copy thread moved beside it (its profile's
    /// `placer_profile::CopiesBesideSteps`), over `memcpy_ns_per_byte`, the memcpy's time
    /// alone. No fixed part: the loss per byte includes the hand-overs.
    ///
    /// The calibration's per-op shares are set aside, not scaled: they time kernels one at
    /// a time, pinned, as placer's executor runs them, and in the framework's unpinned step
    /// their ranking misled the solver. Scaled to the same level, they sent a ResNet-50
    /// plan's copies beside the kernels they called cheap, and torch's step lost 2.8× their
    /// charge; the one share's plan ran 11-15% faster in the same runs
    /// (docs/solving.md, "The level from another framework's own step").
    pub fn with_copy_level(mut self, loss_ns_per_byte: f64, memcpy_ns_per_byte: f64) -> Costs {
        if !(loss_ns_per_byte.is_finite() && memcpy_ns_per_byte > 0.0 && memcpy_ns_per_byte.is_finite()) {
            return self;
        }
        let loss_ns_per_byte = loss_ns_per_byte.max(0.0);
        let (weighted, total) = self
            .kernels
            .iter()
            .fold((0.0, 0.0), |(w, t), k| (w + k.interference_share.max(0.0) * k.base_ns, t + k.base_ns));
        let calibrated_ns_per_byte = if total > 0.0 { memcpy_ns_per_byte * weighted / total } else { 0.0 };
        let share = loss_ns_per_byte / memcpy_ns_per_byte;
        for k in &mut self.kernels {
            k.interference_share = share;
            k.interference_fixed_ns = 0.0;
        }
        self.copy_level = Some(CopyLevel { loss_ns_per_byte, share, calibrated_ns_per_byte });
        self
    }

    /// These costs with `ns` added to every step: what the profile measured a step to
    /// cost beyond its kernels' medians.
    pub fn with_step_overhead(mut self, ns: f64) -> Costs {
        self.step_overhead_ns = ns;
        self
    }

    /// These costs under the profile's negligible-operand rule at `share`: an operand
    /// moving at most that share of its kernel's bytes was never moved by the profile,
    /// and its pool is ignored when a configuration is looked up.
    pub fn with_negligible(mut self, model: &Model, share: f64) -> Costs {
        for (i, &s) in self.signatures.iter().enumerate() {
            self.immaterial.entry(s).or_insert_with(|| negligible_operands(model, NodeId(i as u32), share));
        }
        let immaterial = &self.immaterial;
        let rekey = |map: HashMap<(u64, Vec<u16>), f64>| -> HashMap<(u64, Vec<u16>), f64> {
            map.into_iter().map(|((s, c), t)| ((s, mask_negligible(immaterial, s, &c)), t)).collect()
        };
        self.measured = rekey(std::mem::take(&mut self.measured));
        self.predicted = rekey(std::mem::take(&mut self.predicted));
        self
    }

    /// The time of `node` in `config` (one pool per operand, `Node::operands` order):
    /// measured, else predicted by the design, else estimated by the cost model.
    pub fn kernel_ns(&self, node: NodeId, config: &[u16]) -> (f64, TimeSource) {
        let signature = self.signatures[node.index()];
        let key = (signature, mask_negligible(&self.immaterial, signature, config));
        if let Some(&t) = self.measured.get(&key) {
            return (t, TimeSource::Measured);
        }
        match self.predicted.get(&key) {
            Some(&t) => (t, TimeSource::Predicted),
            None => (self.kernels[node.index()].estimate(config), TimeSource::Estimated),
        }
    }

    pub fn measured_count(&self) -> usize {
        self.measured.len()
    }

    pub fn predicted_count(&self) -> usize {
        self.predicted.len()
    }
}

/// What the model needs of a kernel: its cost and each operand's traffic.
#[derive(Debug, Clone)]
struct Features {
    flops: f64,
    bytes: f64,
    /// (read, written) bytes per operand.
    traffic: Vec<(f64, f64)>,
}

impl Features {
    fn of(model: &Model, n: NodeId) -> Features {
        let traffic: Vec<(f64, f64)> =
            node_traffic(model, n).into_iter().map(|(_, t)| (t.read as f64, t.written as f64)).collect();
        Features { flops: model.cost(n).flops as f64, bytes: traffic.iter().map(|(r, w)| r + w).sum(), traffic }
    }
}

impl CostModel {
    fn base(&self, f: &Features) -> f64 {
        self.fixed_ns + f.flops * self.ns_per_flop + f.bytes * self.ns_per_byte
    }

    fn kernel(&self, f: &Features, pools: usize) -> KernelCost {
        let delta_ns = f
            .traffic
            .iter()
            .map(|&(r, w)| {
                (0..pools)
                    .map(|p| {
                        if p == 0 {
                            0.0
                        } else {
                            r * self.read_extra_ns_per_byte[p] + w * self.write_extra_ns_per_byte[p]
                        }
                    })
                    .collect()
            })
            .collect();
        KernelCost {
            base_ns: self.base(f),
            delta_ns,
            fitted: false,
            interference_share: UNCALIBRATED_SHARE,
            interference_fixed_ns: 0.0,
        }
    }
}

fn fit_global(
    pools: &SolvePools,
    features: &HashMap<u64, Features>,
    measured: &HashMap<(u64, Vec<u16>), f64>,
) -> CostModel {
    let n = pools.len();
    let dram = &pools.pools[0];
    let prior_read: Vec<f64> =
        pools.pools.iter().map(|p| (1.0 / p.read_gbps - 1.0 / dram.read_gbps).max(0.0)).collect();
    let prior_write: Vec<f64> =
        pools.pools.iter().map(|p| (1.0 / p.write_gbps - 1.0 / dram.write_gbps).max(0.0)).collect();
    let mut model = CostModel {
        fixed_ns: DEFAULT_FIXED_NS,
        ns_per_flop: 1.0 / DEFAULT_GFLOPS,
        ns_per_byte: 1.0 / dram.read_gbps,
        read_extra_ns_per_byte: prior_read,
        write_extra_ns_per_byte: prior_write,
        base_fitted_from: 0,
        pools_fitted_from: 0,
    };
    // Base: all-DRAM measurements against [1, flops, bytes], coefficients kept >= 0.
    let mut base_rows = Vec::new();
    let mut base_of: HashMap<u64, f64> = HashMap::new();
    for ((s, config), &t) in measured {
        if config.iter().all(|&p| p == 0) {
            let f = &features[s];
            base_rows.push((vec![1.0, f.flops, f.bytes], t));
            base_of.insert(*s, t);
        }
    }
    if base_rows.len() >= 3 {
        let prior = [model.fixed_ns, model.ns_per_flop, model.ns_per_byte];
        if let Some(c) = nonnegative_fit(&base_rows, &prior) {
            (model.fixed_ns, model.ns_per_flop, model.ns_per_byte) = (c[0], c[1], c[2]);
            model.base_fitted_from = base_rows.len();
        }
    }
    // Pools: what a kernel gains over its base, against bytes read and written per pool.
    if n > 1 {
        let mut rows = Vec::new();
        for ((s, config), &t) in measured {
            if config.iter().all(|&p| p == 0) {
                continue;
            }
            let f = &features[s];
            let base = base_of.get(s).copied().unwrap_or_else(|| model.base(f));
            let mut x = vec![0.0; 2 * (n - 1)];
            for (&p, &(r, w)) in config.iter().zip(&f.traffic) {
                if p > 0 {
                    x[2 * (p as usize - 1)] += r;
                    x[2 * (p as usize - 1) + 1] += w;
                }
            }
            rows.push((x, t - base));
        }
        let prior: Vec<f64> =
            (1..n).flat_map(|p| [model.read_extra_ns_per_byte[p], model.write_extra_ns_per_byte[p]]).collect();
        if !rows.is_empty()
            && let Some(c) = nonnegative_fit(&rows, &prior)
        {
            for p in 1..n {
                model.read_extra_ns_per_byte[p] = c[2 * (p - 1)];
                model.write_extra_ns_per_byte[p] = c[2 * (p - 1) + 1];
            }
            model.pools_fitted_from = rows.len();
        }
    }
    model
}

/// Refits one kernel's base and δ to its own measurements, pulled gently toward the
/// global model so that directions the measurements do not determine keep its values.
fn fit_kernel(prior: &KernelCost, rows: &[(&[u16], f64)], pools: usize) -> KernelCost {
    let ops = prior.delta_ns.len();
    let dim = 1 + ops * (pools - 1);
    let column = |o: usize, p: usize| 1 + o * (pools - 1) + (p - 1);
    let mut prior_vec = vec![prior.base_ns];
    for d in &prior.delta_ns {
        prior_vec.extend_from_slice(&d[1..]);
    }
    let data: Vec<(Vec<f64>, f64)> = rows
        .iter()
        .map(|(config, t)| {
            let mut x = vec![0.0; dim];
            x[0] = 1.0;
            for (o, &p) in config.iter().enumerate() {
                if p > 0 {
                    x[column(o, p as usize)] = 1.0;
                }
            }
            (x, *t)
        })
        .collect();
    let Some(beta) = ridge(&data, &prior_vec, 1e-6) else {
        return prior.clone();
    };
    let delta_ns =
        (0..ops).map(|o| (0..pools).map(|p| if p == 0 { 0.0 } else { beta[column(o, p)] }).collect()).collect();
    KernelCost {
        base_ns: beta[0],
        delta_ns,
        fitted: true,
        interference_share: prior.interference_share,
        interference_fixed_ns: prior.interference_fixed_ns,
    }
}

/// Least squares with every coefficient kept >= 0: coefficients that come out negative
/// are fixed at 0 and the rest refitted. Tiny ridge toward `prior` keeps it solvable.
fn nonnegative_fit(rows: &[(Vec<f64>, f64)], prior: &[f64]) -> Option<Vec<f64>> {
    let dim = prior.len();
    let mut active = vec![true; dim];
    for _ in 0..=dim {
        let reduced: Vec<(Vec<f64>, f64)> = rows
            .iter()
            .map(|(x, y)| (x.iter().zip(&active).filter(|(_, a)| **a).map(|(v, _)| *v).collect(), *y))
            .collect();
        let reduced_prior: Vec<f64> = prior.iter().zip(&active).filter(|(_, a)| **a).map(|(v, _)| *v).collect();
        let beta = ridge(&reduced, &reduced_prior, 1e-9)?;
        let mut full = vec![0.0; dim];
        let mut it = beta.into_iter();
        for (i, a) in active.iter().enumerate() {
            if *a {
                full[i] = it.next()?;
            }
        }
        match full.iter().position(|&c| c < 0.0) {
            None => return Some(full),
            Some(i) => active[i] = false,
        }
    }
    None
}

/// Solves min |Xβ − y|² + λ·s·|β − prior|², with s the mean of XᵀX's diagonal so that λ is
/// relative. Columns are scaled to unit norm first so that bytes and flops (1e6–1e10)
/// and indicator columns (0/1) condition alike.
pub(crate) fn ridge(rows: &[(Vec<f64>, f64)], prior: &[f64], lambda: f64) -> Option<Vec<f64>> {
    let dim = prior.len();
    if dim == 0 {
        return Some(Vec::new());
    }
    let scale: Vec<f64> = (0..dim)
        .map(|j| {
            let norm = rows.iter().map(|(x, _)| x[j] * x[j]).sum::<f64>().sqrt();
            if norm > 0.0 { norm } else { 1.0 }
        })
        .collect();
    let mut a = vec![vec![0.0; dim + 1]; dim];
    for (x, y) in rows {
        for i in 0..dim {
            let xi = x[i] / scale[i];
            for j in 0..dim {
                a[i][j] += xi * x[j] / scale[j];
            }
            a[i][dim] += xi * y;
        }
    }
    let mean_diag = (0..dim).map(|i| a[i][i]).sum::<f64>() / dim as f64;
    let weight = lambda * if mean_diag > 0.0 { mean_diag } else { 1.0 };
    for i in 0..dim {
        a[i][i] += weight;
        a[i][dim] += weight * prior[i] * scale[i];
    }
    let beta = gauss(a)?;
    Some(beta.iter().zip(&scale).map(|(b, s)| b / s).collect())
}

/// Gaussian elimination with partial pivoting on an augmented matrix.
fn gauss(mut a: Vec<Vec<f64>>) -> Option<Vec<f64>> {
    let n = a.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, pivot);
        let (done, rest) = a.split_at_mut(col + 1);
        let pivot_row = &done[col];
        for row in rest.iter_mut() {
            let f = row[col] / pivot_row[col];
            if f != 0.0 {
                for (r, p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                    *r -= f * p;
                }
            }
        }
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|j| a[i][j] * x[j]).sum();
        x[i] = (a[i][n] - s) / a[i][i];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ridge_recovers_an_exact_linear_law() {
        let rows: Vec<(Vec<f64>, f64)> = (0..20)
            .map(|i| {
                let x = vec![1.0, i as f64 * 1e6, (i * i) as f64];
                let y = 500.0 + 0.01 * x[1] + 3.0 * x[2];
                (x, y)
            })
            .collect();
        let beta = ridge(&rows, &[0.0, 0.0, 0.0], 1e-12).expect("solvable");
        assert!(
            (beta[0] - 500.0).abs() < 1e-3 && (beta[1] - 0.01).abs() < 1e-9 && (beta[2] - 3.0).abs() < 1e-6,
            "{beta:?}"
        );
    }

    #[test]
    fn undetermined_directions_keep_the_prior() {
        // Two columns that always move together: only their sum is known.
        let rows = vec![(vec![1.0, 0.0, 0.0], 10.0), (vec![1.0, 1.0, 1.0], 16.0)];
        let beta = ridge(&rows, &[10.0, 5.0, 3.0], 1e-6).expect("solvable");
        assert!((beta[0] - 10.0).abs() < 1e-3 && (beta[1] + beta[2] - 6.0).abs() < 1e-3, "{beta:?}");
        assert!((beta[1] - 4.0).abs() < 0.01 && (beta[2] - 2.0).abs() < 0.01, "{beta:?}");
    }

    #[test]
    fn a_copy_costs_its_kernel_a_fixed_part_and_a_share_of_its_cpu_time_up_to_the_kernel_s_own() {
        let kernel = |share, fixed| KernelCost {
            base_ns: 100.0,
            delta_ns: Vec::new(),
            fitted: true,
            interference_share: share,
            interference_fixed_ns: fixed,
        };
        assert_eq!(kernel(0.5, 0.0).copy_loss_ns(60.0), 30.0, "below the cap: half the copy's 60 ns");
        assert_eq!(kernel(0.5, 0.0).copy_loss_ns(300.0), 50.0, "capped at half the kernel's 100 ns");
        assert_eq!(kernel(-0.2, 0.0).copy_loss_ns(60.0), 0.0, "a share noise made negative charges nothing");
        assert_eq!(kernel(UNCALIBRATED_SHARE, 0.0).copy_loss_ns(60.0), 60.0);
        assert_eq!(kernel(0.5, 40.0).copy_loss_ns(0.0), 40.0, "a copy of no bytes still costs the fixed part");
        assert_eq!(kernel(0.5, 140.0).copy_loss_ns(300.0), 190.0, "the fixed part is not capped");
        assert_eq!(kernel(0.5, -7.0).copy_loss_ns(60.0), 30.0, "a fixed part noise made negative charges nothing");
    }

    /// The level: one share for every kernel, so that a copy beside any of them is charged
    /// what the framework's step lost; what the calibration's shares charged is kept for
    /// the report.
    #[test]
    fn a_framework_step_sets_one_share_for_every_kernel() {
        let model = placer_zoo::build("mlp", 2).expect("zoo");
        let pools = crate::pools::tests::two_pools();
        let mut costs = Costs::new(&model, &pools, &[]);
        for (i, k) in costs.kernels.iter_mut().enumerate() {
            k.base_ns = 1e3 * (i + 1) as f64;
            k.interference_share = if i % 3 == 0 { -0.2 } else { 0.5 + 0.1 * i as f64 };
        }
        costs.kernels.iter_mut().for_each(|k| k.interference_fixed_ns = 40.0);
        let charged = |c: &Costs, memcpy: f64| {
            let total: f64 = c.kernels.iter().map(|k| k.base_ns).sum();
            memcpy * c.kernels.iter().map(|k| k.interference_share.max(0.0) * k.base_ns).sum::<f64>() / total
        };
        let memcpy = 0.1;
        let was = charged(&costs, memcpy);
        let costs = costs.with_copy_level(0.25, memcpy);
        let level = costs.copy_level.expect("a level");
        assert!((level.calibrated_ns_per_byte - was).abs() < 1e-12, "{level:?}");
        assert!((level.share - 2.5).abs() < 1e-12 && level.loss_ns_per_byte == 0.25);
        for k in &costs.kernels {
            assert_eq!((k.interference_share, k.interference_fixed_ns), (level.share, 0.0), "one share, no fixed part");
        }
        // A copy of 1000 B (100 ns of memcpy alone) beside any kernel long enough is
        // charged the loss: 250 ns.
        assert!(
            costs.kernels.iter().filter(|k| k.base_ns >= 250.0).all(|k| (k.copy_loss_ns(100.0) - 250.0).abs() < 1e-9)
        );
        // A negative loss (noise) charges nothing.
        let none = Costs::new(&model, &pools, &[]).with_copy_level(-0.05, memcpy);
        assert!(none.kernels.iter().all(|k| k.copy_loss_ns(100.0) == 0.0));
        // A loss that is not a number leaves the shares as they were.
        assert!(Costs::new(&model, &pools, &[]).with_copy_level(f64::NAN, memcpy).copy_level.is_none());
    }

    #[test]
    fn negative_coefficients_are_dropped() {
        let rows: Vec<(Vec<f64>, f64)> = (0..10).map(|i| (vec![1.0, i as f64], 100.0 - i as f64)).collect();
        let c = nonnegative_fit(&rows, &[0.0, 0.0]).expect("fit");
        assert!(c[1] == 0.0 && (c[0] - 95.5).abs() < 1e-6, "{c:?}");
    }
}
