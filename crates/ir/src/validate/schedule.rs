//! The schedule checks: which node must run before which (data, read-before-update and
//! update order), dependency cycles named by their members, and the schedule itself,
//! checked when the file gives one and derived when it does not.

use super::Validator;
use crate::diag::{DiagnosticKind as K, Subject};
use crate::model::{ModelDecl, Node};
use crate::types::{NodeId, TensorId};
use petgraph::algo::tarjan_scc;
use petgraph::graph::DiGraph;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// Why one node must run before another.
#[derive(Debug, Clone, Copy)]
pub(super) struct Dependency {
    from: NodeId,
    to: NodeId,
    tensor: TensorId,
    kind: DepKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DepKind {
    /// `to` reads what `from` produced.
    Data,
    /// `to` updates in place what `from` reads, so `from` must read first.
    ReadBeforeUpdate,
    /// Two in-place updates of the same tensor apply in file order.
    UpdateOrder,
}

impl Validator<'_, '_> {
    /// Reports every group of nodes that depend on each other; true if there are none.
    pub(super) fn cycles(&mut self, decl: &ModelDecl, count: usize, deps: &[Dependency]) -> bool {
        let mut graph = DiGraph::<usize, ()>::with_capacity(count, deps.len());
        for i in 0..count {
            graph.add_node(i);
        }
        for d in deps {
            graph.add_edge(d.from.0.into(), d.to.0.into(), ());
        }
        let mut acyclic = true;
        for scc in tarjan_scc(&graph) {
            // A lone node is a cycle only through an edge to itself.
            if scc.len() < 2 && !scc.iter().any(|&n| graph.contains_edge(n, n)) {
                continue;
            }
            acyclic = false;
            let mut members: Vec<usize> = scc.iter().map(|n| n.index()).collect();
            members.sort_unstable();
            let mut names: Vec<&str> = members.iter().take(8).map(|&m| decl.nodes[m].name.as_str()).collect();
            if members.len() > 8 {
                names.push("...");
            }
            self.diags.push(
                K::Cycle,
                self.node_loc(members[0]),
                Subject::Node(decl.nodes[members[0]].name.clone()),
                format!("is part of a dependency cycle of {} nodes: {}", members.len(), names.join(", ")),
            );
        }
        acyclic
    }

    pub(super) fn given_schedule(
        &mut self,
        order: &[String],
        ids: &HashMap<&str, usize>,
        decl: &ModelDecl,
        deps: &[Dependency],
    ) -> Option<Vec<NodeId>> {
        let mut position: Vec<Option<usize>> = vec![None; decl.nodes.len()];
        let mut schedule = Vec::with_capacity(order.len());
        let mut ok = true;
        for (step, name) in order.iter().enumerate() {
            let loc = self.at(|s| s.schedule.get(step).copied());
            match ids.get(name.as_str()) {
                None => {
                    self.diags.push(
                        K::UnknownName,
                        loc,
                        Subject::Model,
                        format!("schedule names node '{name}', which does not exist"),
                    );
                    ok = false;
                }
                Some(&n) if position[n].is_some() => {
                    self.diags.push(
                        K::ScheduleOrder,
                        loc,
                        Subject::Node(name.clone()),
                        "appears twice in the schedule".to_string(),
                    );
                    ok = false;
                }
                Some(&n) => {
                    position[n] = Some(step);
                    schedule.push(NodeId(n as u32));
                }
            }
        }
        for (i, p) in position.iter().enumerate() {
            if p.is_none() && ids.get(decl.nodes[i].name.as_str()) == Some(&i) {
                self.diags.push(
                    K::ScheduleOrder,
                    self.node_loc(i),
                    Subject::Node(decl.nodes[i].name.clone()),
                    "is missing from the schedule".to_string(),
                );
                ok = false;
            }
        }
        for d in deps {
            let (Some(from), Some(to)) = (position[d.from.index()], position[d.to.index()]) else { continue };
            if from < to {
                continue;
            }
            let tensor = decl.tensors.get(d.tensor.index()).map_or("?", |t| t.name.as_str());
            let why = match d.kind {
                DepKind::Data => format!("reads tensor '{tensor}'"),
                DepKind::ReadBeforeUpdate => format!("updates tensor '{tensor}' in place"),
                DepKind::UpdateOrder => format!("updates tensor '{tensor}' after"),
            };
            let needs = match d.kind {
                DepKind::Data => "which is produced by",
                DepKind::ReadBeforeUpdate => "which must first be read by",
                DepKind::UpdateOrder => "in file order,",
            };
            self.diags.push(
                K::ScheduleOrder,
                self.at(|s| s.schedule.get(to).copied()),
                Subject::Node(decl.nodes[d.to.index()].name.clone()),
                format!(
                    "runs at step {to} and {why}, {needs} node '{}' at step {from}",
                    decl.nodes[d.from.index()].name
                ),
            );
            ok = false;
        }
        ok.then_some(schedule)
    }
}

pub(super) fn dependencies(nodes: &[Option<Node>], producer: &[Option<NodeId>]) -> Vec<Dependency> {
    let mut deps = Vec::new();
    let mut readers: Vec<Vec<NodeId>> = vec![Vec::new(); producer.len()];
    let mut updaters: Vec<Vec<NodeId>> = vec![Vec::new(); producer.len()];
    for (i, node) in nodes.iter().enumerate() {
        let Some(node) = node else { continue };
        let id = NodeId(i as u32);
        for &t in node.inputs.iter().chain(&node.updates) {
            if let Some(p) = producer[t.index()].filter(|&p| p != id) {
                deps.push(Dependency { from: p, to: id, tensor: t, kind: DepKind::Data });
            }
        }
        for &t in &node.inputs {
            readers[t.index()].push(id);
        }
        for &t in &node.updates {
            updaters[t.index()].push(id);
        }
    }
    for (t, ups) in updaters.iter().enumerate() {
        let Some(&first) = ups.first() else { continue };
        let tensor = TensorId(t as u32);
        for &r in &readers[t] {
            if r != first {
                deps.push(Dependency { from: r, to: first, tensor, kind: DepKind::ReadBeforeUpdate });
            }
        }
        for pair in ups.windows(2) {
            deps.push(Dependency { from: pair[0], to: pair[1], tensor, kind: DepKind::UpdateOrder });
        }
    }
    deps.sort_by_key(|d| (d.to, d.from));
    deps.dedup_by_key(|d| (d.to, d.from));
    deps
}

/// Kahn's algorithm, always taking the ready node that comes first in the file, so the
/// file order is the schedule whenever it is valid and the result is deterministic.
pub(super) fn derived_schedule(count: usize, deps: &[Dependency]) -> Vec<NodeId> {
    let mut indegree = vec![0usize; count];
    let mut successors: Vec<Vec<NodeId>> = vec![Vec::new(); count];
    for d in deps {
        indegree[d.to.index()] += 1;
        successors[d.from.index()].push(d.to);
    }
    let mut ready: BinaryHeap<Reverse<NodeId>> =
        (0..count).filter(|&i| indegree[i] == 0).map(|i| Reverse(NodeId(i as u32))).collect();
    let mut order = Vec::with_capacity(count);
    while let Some(Reverse(n)) = ready.pop() {
        order.push(n);
        for &s in &successors[n.index()] {
            indegree[s.index()] -= 1;
            if indegree[s.index()] == 0 {
                ready.push(Reverse(s));
            }
        }
    }
    order
}
