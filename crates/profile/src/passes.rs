//! Packing tasks into passes. In one pass a node is picked at most once, and two picks
//! that touch the same tensor must want it in the same pool, since each needs its
//! operands where its configuration says (with `two_hop`, nodes that share a tensor or
//! are two tensors apart never share a pass). Greedy, most constrained first, trying
//! every instance of a signature.

use crate::tasks::Task;
use placer_ir::{Model, NodeId, TensorId, analysis};
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};

/// One (task, node) pick: measure `task` at node `node`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    pub task: usize,
    pub node: NodeId,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ScheduleStats {
    pub passes: usize,
    pub measurements: usize,
    pub max_per_pass: usize,
    pub mean_per_pass: f64,
    /// [`lower_bound`] of the tasks packed.
    pub lower_bound: usize,
}

/// The nodes each node conflicts with, as a sorted list: those it shares a tensor with,
/// and with `two_hop` also the neighbours of its neighbours. Without `two_hop` a
/// conflict is resolved by agreeing on the shared tensors' pools (see [`plan`]).
pub fn conflicts(model: &Model, two_hop: bool) -> Vec<Vec<NodeId>> {
    let one = analysis::conflict_graph(model);
    if !two_hop {
        return one;
    }
    one.iter()
        .enumerate()
        .map(|(i, nbrs)| {
            let mut all: Vec<NodeId> =
                nbrs.iter().flat_map(|n| one[n.index()].iter().copied()).chain(nbrs.iter().copied()).collect();
            all.retain(|n| n.index() != i);
            all.sort_unstable();
            all.dedup();
            all
        })
        .collect()
}

/// The distinct nodes each signature's tasks can be measured at.
fn instances_per_signature(tasks: &[Task]) -> HashMap<u64, usize> {
    let mut nodes: HashMap<u64, BTreeSet<NodeId>> = HashMap::new();
    for t in tasks {
        nodes.entry(t.signature).or_default().extend(t.instances.iter().copied());
    }
    nodes.into_iter().map(|(s, n)| (s, n.len())).collect()
}

/// Per tensor, the passes needed by the tasks that can only be measured at the nodes
/// touching it (their signature has one instance). A node is measured once per pass,
/// and a pass puts the tensor in one pool, so the tasks that want it in pool p need as
/// many passes as the node with most such tasks has: the load is Σ_p max_node. With
/// `strict` (two-hop packing) those nodes never share a pass, and the load is the sum of
/// all their tasks.
fn tensor_loads(
    operands: &[Vec<TensorId>],
    tasks: &[Task],
    remaining: impl Iterator<Item = usize>,
    tensors: usize,
    strict: bool,
) -> Vec<usize> {
    let mut at_node: HashMap<(TensorId, u16, NodeId), usize> = HashMap::new();
    for t in remaining {
        if let [only] = tasks[t].instances.as_slice() {
            for (&x, &pool) in operands[only.index()].iter().zip(&tasks[t].config) {
                *at_node.entry((x, if strict { 0 } else { pool }, *only)).or_default() += 1;
            }
        }
    }
    let mut per_pool: HashMap<(TensorId, u16), usize> = HashMap::new();
    for ((x, pool, _), count) in at_node {
        let slot = per_pool.entry((x, pool)).or_default();
        *slot = if strict { *slot + count } else { (*slot).max(count) };
    }
    let mut load = vec![0; tensors];
    for ((x, _), count) in per_pool {
        load[x.index()] += count;
    }
    load
}

fn all_operands(model: &Model) -> Vec<Vec<TensorId>> {
    model.nodes().iter().map(|n| n.operands()).collect()
}

/// The fewest passes any packing can have, the largest of three bounds:
///
/// - a node is picked at most once per pass, so a signature with T tasks and I instance
///   nodes needs ceil(T / I) passes;
/// - the tasks that can only be measured at the nodes touching one tensor need the
///   passes its load says (see `tensor_loads`);
/// - a pass holds at most `max_per_pass` picks.
pub fn lower_bound(model: &Model, tasks: &[Task], max_per_pass: usize, two_hop: bool) -> usize {
    let instances = instances_per_signature(tasks);
    let mut per_signature: HashMap<u64, usize> = HashMap::new();
    for t in tasks {
        *per_signature.entry(t.signature).or_default() += 1;
    }
    let by_signature = per_signature.iter().map(|(s, n)| n.div_ceil(instances[s].max(1))).max().unwrap_or(0);
    let loads = tensor_loads(&all_operands(model), tasks, 0..tasks.len(), model.tensors().len(), two_hop);
    let by_tensor = loads.into_iter().max().unwrap_or(0);
    by_signature.max(by_tensor).max(tasks.len().div_ceil(max_per_pass.max(1)))
}

/// Greedy packing, most constrained first. Each pass orders the remaining tasks by the
/// bound they are part of: a task that can only be measured at one node by the largest
/// remaining load on any tensor of that node, any other by its signature's remaining
/// tasks per instance. Then it takes them in that order, each at the first of its
/// instances that is not picked yet and agrees with the earlier picks on every shared
/// tensor's pool (with `two_hop`: conflicts with no earlier pick), up to
/// `max_per_pass`. What sets the lower bound goes first, so no tail of near-empty
/// passes is left for it.
pub fn schedule(model: &Model, tasks: &[Task], max_per_pass: usize, two_hop: bool) -> Vec<Vec<Pick>> {
    let nodes = model.nodes().len();
    let tensors = model.tensors().len();
    let operands = all_operands(model);
    let blocks = if two_hop { conflicts(model, true) } else { vec![Vec::new(); nodes] };
    let instances = instances_per_signature(tasks);
    let mut remaining: Vec<usize> = (0..tasks.len()).collect();
    let mut passes = Vec::new();
    // Stamps instead of clearing per pass: taken[n] == pass means n cannot be picked
    // now, pool_of[t] == (pass, p) means an earlier pick put t in pool p.
    let mut taken = vec![usize::MAX; nodes];
    let mut pool_of = vec![(usize::MAX, 0u16); tensors];
    while !remaining.is_empty() {
        let mut left: HashMap<u64, usize> = HashMap::new();
        for &t in &remaining {
            *left.entry(tasks[t].signature).or_default() += 1;
        }
        let load = tensor_loads(&operands, tasks, remaining.iter().copied(), tensors, two_hop);
        let priority = |t: usize| match tasks[t].instances.as_slice() {
            [only] => operands[only.index()].iter().map(|x| load[x.index()]).max().unwrap_or(0),
            _ => {
                let s = tasks[t].signature;
                left[&s].div_ceil(instances[&s].max(1))
            }
        };
        remaining.sort_by_cached_key(|&t| (std::cmp::Reverse(priority(t)), t));
        let stamp = passes.len();
        let mut pass = Vec::new();
        remaining.retain(|&task| {
            if pass.len() >= max_per_pass.max(1) {
                return true;
            }
            let config = &tasks[task].config;
            let fits = |n: &NodeId| {
                taken[n.index()] != stamp
                    && operands[n.index()].iter().zip(config).all(|(x, &p)| {
                        let (when, pool) = pool_of[x.index()];
                        when != stamp || pool == p
                    })
            };
            match tasks[task].instances.iter().copied().find(fits) {
                Some(node) => {
                    taken[node.index()] = stamp;
                    for c in &blocks[node.index()] {
                        taken[c.index()] = stamp;
                    }
                    for (x, &p) in operands[node.index()].iter().zip(config) {
                        pool_of[x.index()] = (stamp, p);
                    }
                    pass.push(Pick { task, node });
                    false
                }
                None => true,
            }
        });
        passes.push(pass);
    }
    passes
}

/// Passes of kernels timed alone (`Steps::Isolated`): no two picks share a step, so
/// neither a node picked twice nor two pools wanted for one tensor matters, and a pass
/// is any `max_per_pass` picks, in task order. Packing them as shared steps instead left
/// DenseNet-264's second stage at about 3 picks a pass, each pass paying the host check
/// and a checkpoint save. Within a pass, a signature's tasks take one of its instances,
/// the next one in each pass it appears in: consecutive configurations of one node keep
/// its operands held ([`placer_exec::Executor::hold`]), and the passes still visit
/// several of its nodes.
pub fn schedule_alone(tasks: &[Task], max_per_pass: usize) -> Vec<Vec<Pick>> {
    let measurable: Vec<usize> = (0..tasks.len()).filter(|&t| !tasks[t].instances.is_empty()).collect();
    let mut turn: HashMap<u64, usize> = HashMap::new();
    measurable
        .chunks(max_per_pass.max(1))
        .map(|chunk| {
            let pass: Vec<Pick> = chunk
                .iter()
                .map(|&task| {
                    let t = &tasks[task];
                    let k = turn.get(&t.signature).copied().unwrap_or(0);
                    Pick { task, node: t.instances[k % t.instances.len()] }
                })
                .collect();
            let seen: BTreeSet<u64> = chunk.iter().map(|&t| tasks[t].signature).collect();
            for s in seen {
                *turn.entry(s).or_default() += 1;
            }
            pass
        })
        .collect()
}

pub fn stats(passes: &[Vec<Pick>], lower_bound: usize) -> ScheduleStats {
    let measurements: usize = passes.iter().map(Vec::len).sum();
    ScheduleStats {
        passes: passes.len(),
        measurements,
        max_per_pass: passes.iter().map(Vec::len).max().unwrap_or(0),
        mean_per_pass: if passes.is_empty() { 0.0 } else { measurements as f64 / passes.len() as f64 },
        lower_bound,
    }
}
