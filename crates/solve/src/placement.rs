//! A placement: where each tensor sits over its live range, and the moves between.
//! Every strategy (ILP or baseline) produces one; [`Placement::evaluate`] scores it the
//! way the plan reports it.

use crate::cost::{Costs, TimeSource};
use crate::instance::Instance;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MoveKind {
    /// A blocking copy before the kernel at `at`.
    Sync,
    /// A copy that runs during the kernel at `at - 1`.
    Async,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    pub tensor: usize,
    pub from: u16,
    pub to: u16,
    /// The tensor is in `to` from step `at` on. `at == steps` is the end of the step: a
    /// weight returning to where the next step expects it.
    pub at: usize,
    pub kind: MoveKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Per tensor: (first step, pool) spans in order; the first starts at the tensor's
    /// first live step.
    pub spans: Vec<Vec<(usize, u16)>>,
    pub moves: Vec<Move>,
}

/// What a placement costs, step by step.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub kernel_ns: Vec<f64>,
    pub sources: Vec<TimeSource>,
    /// Per step: the async copies that run during that kernel, ns.
    pub async_ns: Vec<f64>,
    /// Per step: what those copies slow the kernel by, ns (`KernelCost::copy_loss_ns`).
    pub interference_ns: Vec<f64>,
    pub sync_ns: f64,
    /// Σ max(kernel + its slowdown, async copies during it) + sync copies + the step's
    /// overhead (`Costs::step_overhead_ns`).
    pub step_ns: f64,
    /// Bytes in each pool at each step (`bytes[pool][step]`), scratch and in-flight
    /// async copies included.
    pub bytes: Vec<Vec<u64>>,
}

impl Evaluation {
    pub fn peak(&self, pool: usize) -> u64 {
        self.bytes[pool].iter().copied().max().unwrap_or(0)
    }

    /// How many kernel times come from `source`.
    pub fn count(&self, source: TimeSource) -> usize {
        self.sources.iter().filter(|s| **s == source).count()
    }
}

impl Placement {
    /// Each tensor in one pool for life.
    pub fn fixed(inst: &Instance, pool_of: &[u16]) -> Placement {
        Placement {
            spans: inst.tensors.iter().zip(pool_of).map(|(t, &p)| vec![(t.first, p)]).collect(),
            moves: Vec::new(),
        }
    }

    pub fn pool_at(&self, tensor: usize, step: usize) -> u16 {
        let spans = &self.spans[tensor];
        let i = spans.partition_point(|&(from, _)| from <= step);
        spans[i.saturating_sub(1)].1
    }

    /// Each kernel's operand pools, in operand order.
    pub fn config(&self, inst: &Instance, step: usize) -> Vec<u16> {
        inst.kernels[step].operands.iter().map(|&t| self.pool_at(t, step)).collect()
    }

    pub fn evaluate(&self, inst: &Instance, costs: &Costs) -> Evaluation {
        let steps = inst.steps();
        let (mut kernel_ns, mut sources) = (Vec::with_capacity(steps), Vec::with_capacity(steps));
        for (i, k) in inst.kernels.iter().enumerate() {
            let (t, s) = costs.kernel_ns(k.node, &self.config(inst, i));
            kernel_ns.push(t);
            sources.push(s);
        }
        let mut async_ns = vec![0.0; steps];
        let mut interference_ns = vec![0.0; steps];
        let mut sync_ns = 0.0;
        let mut delta = vec![vec![0i128; steps + 1]; inst.pools.len()];
        for m in &self.moves {
            let t = &inst.tensors[m.tensor];
            let ns = t.bytes as f64 * inst.pools.move_ns_per_byte[m.from as usize][m.to as usize];
            match m.kind {
                MoveKind::Sync => sync_ns += ns,
                MoveKind::Async => {
                    async_ns[m.at - 1] += ns;
                    let cpu_ns = t.bytes as f64 * inst.pools.copy_cpu_ns_per_byte[m.from as usize][m.to as usize];
                    interference_ns[m.at - 1] += inst.kernels[m.at - 1].cost.copy_loss_ns(cpu_ns);
                    delta[m.to as usize][m.at - 1] += i128::from(t.bytes);
                    delta[m.to as usize][m.at] -= i128::from(t.bytes);
                }
            }
        }
        for (t, spans) in inst.tensors.iter().zip(&self.spans) {
            for (j, &(from, pool)) in spans.iter().enumerate() {
                let to = spans.get(j + 1).map_or(t.last + 1, |s| s.0);
                delta[pool as usize][from] += i128::from(t.bytes);
                delta[pool as usize][to] -= i128::from(t.bytes);
            }
        }
        for (i, k) in inst.kernels.iter().enumerate() {
            delta[0][i] += i128::from(k.scratch_bytes);
            delta[0][i + 1] -= i128::from(k.scratch_bytes);
        }
        let bytes = delta
            .iter()
            .map(|d| {
                let mut live = 0i128;
                d[..steps]
                    .iter()
                    .map(|x| {
                        live += x;
                        live as u64
                    })
                    .collect()
            })
            .collect();
        let step_ns = (0..steps).map(|i| (kernel_ns[i] + interference_ns[i]).max(async_ns[i])).sum::<f64>()
            + sync_ns
            + costs.step_overhead_ns;
        Evaluation { kernel_ns, sources, async_ns, interference_ns, sync_ns, step_ns, bytes }
    }

    /// Whether every pool stays within `capacity` at every step.
    pub fn fits(&self, eval: &Evaluation, capacity: &[u64]) -> bool {
        eval.bytes.iter().zip(capacity).all(|(b, &c)| b.iter().all(|&x| x <= c))
    }
}
