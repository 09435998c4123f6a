//! Baselines: simple static placements a plan has to beat, each as a user (or the OS)
//! would get them. All respect pins and capacities, and none moves a tensor.
//!
//! - all-slow: everything in the slowest pool that has room.
//! - first-touch: in allocation order, the fastest pool with room for the tensor's whole
//!   life (Linux's default NUMA policy with DRAM preferred, as in AutoTM's comparison).
//! - interleave: in allocation order, pools taken round-robin (numactl --interleave, at
//!   tensor rather than page granularity).
//! - size-greedy: smallest tensors first into the fastest pool with room, so that DRAM
//!   holds as many tensors as possible.
//! - greedy: the best static placement a fast heuristic finds: tensors by how much
//!   kernel time DRAM saves them per byte-step, each into its best pool with room. It is
//!   also the ILP's warm start.

use crate::instance::Instance;
use crate::placement::Placement;
use crate::segtree::MaxTree;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    AllSlow,
    FirstTouch,
    Interleave,
    SizeGreedy,
    Greedy,
}

impl Baseline {
    pub const ALL: [Baseline; 5] =
        [Baseline::AllSlow, Baseline::FirstTouch, Baseline::Interleave, Baseline::SizeGreedy, Baseline::Greedy];

    /// The baseline called `name`, if there is one.
    pub fn parse(name: &str) -> Option<Baseline> {
        Baseline::ALL.into_iter().find(|b| b.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Baseline::AllSlow => "all-slow",
            Baseline::FirstTouch => "first-touch",
            Baseline::Interleave => "interleave",
            Baseline::SizeGreedy => "size-greedy",
            Baseline::Greedy => "greedy",
        }
    }

    /// The placement, or why it does not fit (a tensor no pool has room for).
    pub fn place(self, inst: &Instance) -> Result<Placement, String> {
        let by_speed = inst.pools.by_speed();
        let slowest_first: Vec<u16> = by_speed.iter().rev().copied().collect();
        let mut allocation: Vec<usize> = (0..inst.tensors.len()).collect();
        allocation.sort_by_key(|&t| (inst.tensors[t].first, t));
        match self {
            Baseline::AllSlow => fill(inst, &allocation, |_, _| slowest_first.clone()),
            Baseline::FirstTouch => fill(inst, &allocation, |_, _| by_speed.clone()),
            Baseline::Interleave => fill(inst, &allocation, |_, rank| {
                let n = by_speed.len();
                (0..n).map(|i| by_speed[(rank + i) % n]).collect()
            }),
            Baseline::SizeGreedy => {
                let mut order = allocation.clone();
                order.sort_by_key(|&t| (inst.tensors[t].bytes, inst.tensors[t].first, t));
                fill(inst, &order, |_, _| by_speed.clone())
            }
            Baseline::Greedy => {
                let costs = static_costs(inst);
                let benefit = |t: usize| {
                    let c = &costs[t];
                    let worst = c.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let best = c.iter().copied().fold(f64::INFINITY, f64::min);
                    let info = &inst.tensors[t];
                    (worst - best) / (info.bytes.max(1) as f64 * (info.last - info.first + 1) as f64)
                };
                let mut order = allocation.clone();
                let density: Vec<f64> = (0..inst.tensors.len()).map(benefit).collect();
                order.sort_by(|&a, &b| density[b].total_cmp(&density[a]).then(a.cmp(&b)));
                fill(inst, &order, |t, _| {
                    let mut pools: Vec<u16> = (0..inst.pools.len() as u16).collect();
                    pools.sort_by(|&a, &b| costs[t][a as usize].total_cmp(&costs[t][b as usize]).then(a.cmp(&b)));
                    pools
                })
            }
        }
    }
}

/// Σ over a tensor's uses of the kernel time its pool adds, per pool (additive model).
fn static_costs(inst: &Instance) -> Vec<Vec<f64>> {
    let mut costs = vec![vec![0.0; inst.pools.len()]; inst.tensors.len()];
    for k in &inst.kernels {
        for (o, &t) in k.operands.iter().enumerate() {
            for (p, d) in k.cost.delta_ns[o].iter().enumerate() {
                costs[t][p] += d;
            }
        }
    }
    costs
}

/// Places tensors in `order`, each into the first pool of `preference(tensor, rank)`
/// that allows it and has room over its whole live range.
fn fill(inst: &Instance, order: &[usize], preference: impl Fn(usize, usize) -> Vec<u16>) -> Result<Placement, String> {
    let steps = inst.steps();
    let mut used: Vec<MaxTree> = (0..inst.pools.len()).map(|_| MaxTree::new(steps)).collect();
    for (i, k) in inst.kernels.iter().enumerate() {
        used[0].add(i, i, i128::from(k.scratch_bytes));
    }
    let mut pool_of = vec![0u16; inst.tensors.len()];
    let mut rank = 0;
    let pinned = order.iter().filter(|&&t| inst.tensors[t].pinned.is_some());
    let free = order.iter().filter(|&&t| inst.tensors[t].pinned.is_none());
    for &t in pinned.chain(free) {
        let info = &inst.tensors[t];
        let candidates = match info.pinned {
            Some(p) => vec![p],
            None => {
                rank += 1;
                preference(t, rank - 1)
            }
        };
        let fits = |p: u16, used: &[MaxTree]| {
            used[p as usize].max(info.first, info.last) + i128::from(info.bytes)
                <= i128::from(inst.capacity[p as usize])
        };
        let Some(&p) = candidates.iter().find(|&&p| inst.allowed(t, p) && fits(p, &used)) else {
            return Err(format!("no pool has room for tensor '{}' ({} bytes)", info.name, info.bytes));
        };
        used[p as usize].add(info.first, info.last, i128::from(info.bytes));
        pool_of[t] = p;
    }
    Ok(Placement::fixed(inst, &pool_of))
}
