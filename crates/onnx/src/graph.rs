//! The node graph: who produces and who reads each value, and a topological order.

use crate::OnnxError;
use crate::proto::{GraphProto, NodeProto};
use std::collections::{BTreeSet, HashMap, VecDeque};

/// How an ONNX node is referred to in messages: its name, else its first output.
pub fn node_label(node: &NodeProto) -> String {
    match node.name.as_deref() {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => node.output.first().cloned().unwrap_or_else(|| "<unnamed>".into()),
    }
}

pub fn op_label(node: &NodeProto) -> String {
    let op = node.op_type.clone().unwrap_or_default();
    match node.domain.as_deref() {
        None | Some("") | Some("ai.onnx") => op,
        Some(d) => format!("{d}.{op}"),
    }
}

#[derive(Debug)]
pub struct Topology {
    /// Node indices in an order where every value is produced before it is read.
    pub order: Vec<usize>,
    /// For each value name, the indices of the nodes that read it.
    pub readers: HashMap<String, Vec<usize>>,
    /// For each value name produced by a node, that node's index.
    pub producer: HashMap<String, usize>,
}

impl Topology {
    pub fn readers_of(&self, value: &str) -> &[usize] {
        self.readers.get(value).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// Orders the nodes (stable: file order where the dependencies allow it) and refuses
/// values read but never provided, values written twice, and cycles.
pub fn topology(graph: &GraphProto) -> Result<Topology, OnnxError> {
    let mut provided: BTreeSet<&str> = graph.input.iter().filter_map(|v| v.name.as_deref()).collect();
    provided.extend(graph.initializer.iter().filter_map(|t| t.name.as_deref()));
    let mut producer = HashMap::new();
    for (i, node) in graph.node.iter().enumerate() {
        for out in node.output.iter().filter(|o| !o.is_empty()) {
            if producer.insert(out.clone(), i).is_some() || provided.contains(out.as_str()) {
                return Err(OnnxError::Malformed(format!(
                    "value '{out}' is written twice (node '{}')",
                    node_label(node)
                )));
            }
        }
    }
    let mut readers: HashMap<String, Vec<usize>> = HashMap::new();
    let mut waiting = vec![0usize; graph.node.len()];
    for (i, node) in graph.node.iter().enumerate() {
        for input in node.input.iter().filter(|n| !n.is_empty()) {
            let entry = readers.entry(input.clone()).or_default();
            if entry.last() == Some(&i) {
                continue;
            }
            entry.push(i);
            if producer.contains_key(input) {
                waiting[i] += 1;
            } else if !provided.contains(input.as_str()) {
                return Err(OnnxError::Malformed(format!(
                    "node '{}' reads '{input}', which no node, graph input or initializer provides",
                    node_label(node)
                )));
            }
        }
    }
    let mut ready: VecDeque<usize> = (0..graph.node.len()).filter(|&i| waiting[i] == 0).collect();
    let mut order = Vec::with_capacity(graph.node.len());
    while let Some(i) = ready.pop_front() {
        order.push(i);
        for out in graph.node[i].output.iter().filter(|o| !o.is_empty()) {
            for &r in readers.get(out).map(Vec::as_slice).unwrap_or(&[]) {
                waiting[r] -= 1;
                if waiting[r] == 0 {
                    ready.push_back(r);
                }
            }
        }
    }
    if order.len() < graph.node.len() {
        let stuck: Vec<String> = (0..graph.node.len())
            .filter(|&i| waiting[i] > 0)
            .take(6)
            .map(|i| format!("'{}'", node_label(&graph.node[i])))
            .collect();
        return Err(OnnxError::Cycle { nodes: stuck.join(", ") });
    }
    Ok(Topology { order, readers, producer })
}
