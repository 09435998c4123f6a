//! Packing tasks into passes: in one pass, the picked nodes must not share a tensor
//! (optionally: nor be two tensors apart), since each needs its operands where its
//! configuration says. Greedy, in task order, trying every instance of a signature.

use crate::tasks::Task;
use placer_ir::{Model, NodeId, analysis};
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};

/// One (task, node) pick: measure `task` at node `node`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    pub task: usize,
    pub node: NodeId,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PlanStats {
    pub passes: usize,
    pub measurements: usize,
    pub max_per_pass: usize,
    pub mean_per_pass: f64,
    /// [`lower_bound`] of the tasks packed.
    pub lower_bound: usize,
}

/// The nodes each node conflicts with, as a sorted list; with `two_hop`, also the
/// neighbours of its neighbours.
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

/// How many tasks each node must host: a signature with a single instance node must
/// be measured there, so its tasks are that node's load; a signature with several
/// instances can spread and loads none (it is counted by its own bound instead).
fn sole_loads(tasks: &[Task], remaining: impl Iterator<Item = usize>, nodes: usize) -> Vec<usize> {
    let mut load = vec![0; nodes];
    for t in remaining {
        if let [only] = tasks[t].instances.as_slice() {
            load[only.index()] += 1;
        }
    }
    load
}

/// Per tensor, the summed load of the nodes that touch it: they all conflict with one
/// another (they share the tensor), so each pass measures at most one of them.
fn clique_loads(model: &Model, load: &[usize]) -> Vec<usize> {
    let mut per_tensor = vec![0; model.tensors().len()];
    for (i, node) in model.nodes().iter().enumerate() {
        if load[i] > 0 {
            for t in node.operands() {
                per_tensor[t.index()] += load[i];
            }
        }
    }
    per_tensor
}

/// The fewest passes any packing can have, the largest of three bounds:
///
/// - a node is picked at most once per pass, so a signature with T tasks and I instance
///   nodes needs ceil(T / I) passes;
/// - the nodes that touch one tensor conflict pairwise, so the tasks that can only be
///   measured at those nodes (their signature has no other instance) need a pass each;
/// - a pass holds at most `max_per_pass` picks.
pub fn lower_bound(model: &Model, tasks: &[Task], max_per_pass: usize) -> usize {
    let instances = instances_per_signature(tasks);
    let mut per_signature: HashMap<u64, usize> = HashMap::new();
    for t in tasks {
        *per_signature.entry(t.signature).or_default() += 1;
    }
    let by_signature = per_signature.iter().map(|(s, n)| n.div_ceil(instances[s].max(1))).max().unwrap_or(0);
    let load = sole_loads(tasks, 0..tasks.len(), model.nodes().len());
    let by_tensor = clique_loads(model, &load).into_iter().max().unwrap_or(0);
    by_signature.max(by_tensor).max(tasks.len().div_ceil(max_per_pass.max(1)))
}

/// Greedy packing, most constrained first. Each pass orders the remaining tasks by the
/// bound they are part of: a task that can only be measured at one node by the largest
/// remaining load on any tensor of that node (its critical clique), any other by its
/// signature's remaining tasks per instance. Then it takes them in that order, each at
/// the first of its instances that is neither blocked by an earlier pick nor already
/// picked, up to `max_per_pass`. What sets the lower bound goes first, so no tail of
/// near-empty passes is left for it.
pub fn plan(model: &Model, tasks: &[Task], max_per_pass: usize, two_hop: bool) -> Vec<Vec<Pick>> {
    let conflicts = conflicts(model, two_hop);
    let nodes = model.nodes().len();
    let instances = instances_per_signature(tasks);
    let mut remaining: Vec<usize> = (0..tasks.len()).collect();
    let mut passes = Vec::new();
    // Stamps instead of clearing a set per pass: blocked[n] == pass means blocked now.
    let mut blocked = vec![usize::MAX; nodes];
    while !remaining.is_empty() {
        let mut left: HashMap<u64, usize> = HashMap::new();
        for &t in &remaining {
            *left.entry(tasks[t].signature).or_default() += 1;
        }
        let clique = clique_loads(model, &sole_loads(tasks, remaining.iter().copied(), nodes));
        let priority = |t: usize| match tasks[t].instances.as_slice() {
            [only] => model.node(*only).operands().iter().map(|x| clique[x.index()]).max().unwrap_or(0),
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
            let free = tasks[task].instances.iter().copied().find(|n| blocked[n.index()] != stamp);
            match free {
                Some(node) => {
                    blocked[node.index()] = stamp;
                    for c in &conflicts[node.index()] {
                        blocked[c.index()] = stamp;
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

pub fn stats(passes: &[Vec<Pick>], lower_bound: usize) -> PlanStats {
    let measurements: usize = passes.iter().map(Vec::len).sum();
    PlanStats {
        passes: passes.len(),
        measurements,
        max_per_pass: passes.iter().map(Vec::len).max().unwrap_or(0),
        mean_per_pass: if passes.is_empty() { 0.0 } else { measurements as f64 / passes.len() as f64 },
        lower_bound,
    }
}
