//! Packing tasks into passes: in one pass, the picked nodes must not share a tensor
//! (optionally: nor be two tensors apart), since each needs its operands where its
//! configuration says. Greedy, in task order, trying every instance of a signature.

use crate::tasks::Task;
use placer_ir::{Model, NodeId, analysis};
use serde::Serialize;

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

/// Greedy packing: each pass takes tasks in order, each at the first of its instances
/// that is neither blocked by an earlier pick nor already picked, up to `max_per_pass`.
pub fn plan(model: &Model, tasks: &[Task], max_per_pass: usize, two_hop: bool) -> Vec<Vec<Pick>> {
    let conflicts = conflicts(model, two_hop);
    let nodes = model.nodes().len();
    let mut remaining: Vec<usize> = (0..tasks.len()).collect();
    let mut passes = Vec::new();
    // Stamps instead of clearing a set per pass: blocked[n] == pass means blocked now.
    let mut blocked = vec![usize::MAX; nodes];
    while !remaining.is_empty() {
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

pub fn stats(passes: &[Vec<Pick>]) -> PlanStats {
    let measurements: usize = passes.iter().map(Vec::len).sum();
    PlanStats {
        passes: passes.len(),
        measurements,
        max_per_pass: passes.iter().map(Vec::len).max().unwrap_or(0),
        mean_per_pass: if passes.is_empty() { 0.0 } else { measurements as f64 / passes.len() as f64 },
    }
}
