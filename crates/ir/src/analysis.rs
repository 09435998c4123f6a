//! Analyses over a validated model: live ranges, live bytes per step, the conflict
//! graph the profiler packs passes with, and configuration counts for N pools.

use crate::model::{Model, Phase};
use crate::types::{NodeId, Role, TensorId};

/// The inclusive range of schedule steps during which a tensor occupies memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveRange {
    pub first: usize,
    pub last: usize,
}

/// Live ranges of every tensor over the model's schedule.
///
/// Rules (docs/model-format.md): weights and optimizer state are live at every step,
/// since they outlive the step; inputs from step 0 to their last use; every other
/// tensor from the step that produces it to its last read or update.
#[derive(Debug, Clone)]
pub struct Liveness {
    pub ranges: Vec<LiveRange>,
    /// Position of each node in the schedule.
    pub step_of: Vec<usize>,
}

impl Liveness {
    pub fn new(model: &Model) -> Liveness {
        let steps = model.schedule().len();
        let mut step_of = vec![0; model.nodes().len()];
        for (step, &n) in model.schedule().iter().enumerate() {
            step_of[n.index()] = step;
        }
        let mut last_use = vec![None::<usize>; model.tensors().len()];
        for (step, &n) in model.schedule().iter().enumerate() {
            let node = model.node(n);
            for &t in node.inputs.iter().chain(&node.updates) {
                last_use[t.index()] = Some(step);
            }
        }
        let ranges = model
            .tensors()
            .iter()
            .enumerate()
            .map(|(i, t)| {
                if t.role.is_persistent() {
                    return LiveRange { first: 0, last: steps.saturating_sub(1) };
                }
                let first = model.producer(TensorId(i as u32)).map_or(0, |p| step_of[p.index()]);
                let last = last_use[i].map_or(first, |u| u.max(first));
                LiveRange { first, last }
            })
            .collect();
        Liveness { ranges, step_of }
    }
}

/// Bytes live at each step of the schedule.
#[derive(Debug, Clone)]
pub struct MemoryProfile {
    pub live_bytes: Vec<u64>,
    pub peak_bytes: u64,
    /// The first step at which the peak is reached.
    pub peak_step: usize,
}

impl MemoryProfile {
    pub fn new(model: &Model, liveness: &Liveness) -> MemoryProfile {
        let steps = model.schedule().len();
        // Validation refuses models without nodes, so every range fits `steps + 1`.
        let mut delta = vec![0i128; steps.max(1) + 1];
        for (t, r) in model.tensors().iter().zip(&liveness.ranges) {
            delta[r.first] += i128::from(t.bytes);
            delta[r.last + 1] -= i128::from(t.bytes);
        }
        let mut live = 0i128;
        let live_bytes: Vec<u64> = delta[..steps]
            .iter()
            .map(|d| {
                live += d;
                live as u64
            })
            .collect();
        let (peak_step, peak_bytes) =
            live_bytes.iter().enumerate().fold((0, 0), |best, (i, &b)| if b > best.1 { (i, b) } else { best });
        MemoryProfile { live_bytes, peak_bytes, peak_step }
    }
}

/// Total bytes of all tensors, as if none were ever freed.
pub fn footprint_bytes(model: &Model) -> u64 {
    model.tensors().iter().map(|t| t.bytes).sum()
}

/// Bytes and element count of the tensors with a given role.
pub fn role_totals(model: &Model, role: Role) -> (u64, u64) {
    model.tensors().iter().filter(|t| t.role == role).fold((0, 0), |(b, n), t| (b + t.bytes, n + t.numel()))
}

/// For every node, the other nodes it shares a tensor with, sorted. Two such nodes
/// cannot be measured in different configurations in the same profiling pass.
pub fn conflict_graph(model: &Model) -> Vec<Vec<NodeId>> {
    let mut touching: Vec<Vec<NodeId>> = vec![Vec::new(); model.tensors().len()];
    for (i, node) in model.nodes().iter().enumerate() {
        for t in node.operands() {
            touching[t.index()].push(NodeId(i as u32));
        }
    }
    model
        .nodes()
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let me = NodeId(i as u32);
            let mut nbrs: Vec<NodeId> =
                node.operands().iter().flat_map(|t| touching[t.index()].iter().copied()).filter(|&n| n != me).collect();
            nbrs.sort_unstable();
            nbrs.dedup();
            nbrs
        })
        .collect()
}

/// Number of memory configurations of a node over `pools` pools: each distinct
/// operand may sit in any pool, so `pools ^ operands` (saturating).
pub fn config_count(model: &Model, node: NodeId, pools: u32) -> u128 {
    let operands = model.node(node).operands().len() as u32;
    u128::from(pools).checked_pow(operands).unwrap_or(u128::MAX)
}

/// FLOPs of one whole training step, every node once (saturating, as [`crate::ops::Cost`]
/// counts do).
pub fn step_flops(model: &Model) -> u64 {
    (0..model.nodes().len()).map(|i| model.cost(NodeId(i as u32)).flops).fold(0, u64::saturating_add)
}

/// Forward multiply-accumulates and FLOPs of one step (what published model FLOP
/// counts refer to).
pub fn forward_cost(model: &Model) -> crate::ops::Cost {
    (0..model.nodes().len())
        .map(|i| NodeId(i as u32))
        .filter(|&n| model.phase(n) == Phase::Forward)
        .map(|n| model.cost(n))
        .fold(crate::ops::Cost::default(), |acc, c| crate::ops::Cost {
            macs: acc.macs + c.macs,
            flops: acc.flops + c.flops,
        })
}

/// For every node (indexed by node id), the operands it reads (inputs and in-place
/// updates) that a training step has left out of a last-level cache of `cache_bytes`:
/// more than that many distinct bytes were touched since the step last touched them.
/// An operand first touched at this node was last touched in the previous step, so its
/// distance wraps around the schedule.
///
/// A kernel timed on its own, or right after its producers, finds every operand in
/// cache; in the step it reads a saved activation or a weight from memory. These are the
/// operands to evict before timing it. The distance counts each tensor once, as an LRU
/// cache would hold it; real caches are not LRU, so it is a rule, not a simulation.
pub fn cold_reads(model: &Model, cache_bytes: u64) -> Vec<Vec<TensorId>> {
    let schedule = model.schedule();
    let steps = schedule.len();
    let mut touches: Vec<Vec<usize>> = vec![Vec::new(); model.tensors().len()];
    for (pos, &n) in schedule.iter().enumerate() {
        for t in model.node(n).operands() {
            touches[t.index()].push(pos);
        }
    }
    let mut cold = vec![Vec::new(); model.nodes().len()];
    let mut seen = std::collections::HashSet::new();
    for (pos, &n) in schedule.iter().enumerate() {
        let node = model.node(n);
        for &t in node.inputs.iter().chain(&node.updates) {
            if cold[n.index()].contains(&t) {
                continue;
            }
            let at = &touches[t.index()];
            // The last touch before this one, else the last in the step before.
            let previous = at.iter().rev().find(|&&p| p < pos).or(at.last()).copied().unwrap_or(pos);
            let between = if previous < pos { pos - previous - 1 } else { steps - previous - 1 + pos };
            seen.clear();
            let mut bytes = 0u64;
            // Walks back from this node until the cache is full or the last touch is met.
            for back in 1..=between {
                let other = model.node(schedule[(pos + steps - back) % steps]);
                for u in other.operands() {
                    if u != t && seen.insert(u) {
                        bytes += model.tensor(u).bytes;
                    }
                }
                if bytes > cache_bytes {
                    cold[n.index()].push(t);
                    break;
                }
            }
        }
    }
    cold
}
