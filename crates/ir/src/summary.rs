//! The numbers `placer inspect` shows, computed once for both the table and the JSON.

use crate::analysis::{Liveness, MemoryProfile, config_count, footprint_bytes, forward_cost};
use crate::model::{Model, Phase};
use crate::types::{NodeId, Role};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub name: String,
    pub content_hash: String,
    pub meta: BTreeMap<String, String>,
    pub nodes: usize,
    pub tensors: usize,
    pub schedule_given: bool,
    pub nodes_by_phase: BTreeMap<&'static str, usize>,
    /// Node count per op, most frequent first.
    pub ops: Vec<OpCount>,
    pub parameters: u64,
    pub parameter_bytes: u64,
    pub bytes_by_role: BTreeMap<&'static str, u64>,
    pub footprint_bytes: u64,
    pub peak_live_bytes: u64,
    pub peak_step: usize,
    pub peak_node: String,
    pub forward_macs: u64,
    pub step_flops: u64,
    pub largest_tensors: Vec<TensorRow>,
    pub configs: ConfigStats,
}

#[derive(Debug, Clone, Serialize)]
pub struct OpCount {
    pub op: &'static str,
    pub count: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct TensorRow {
    pub name: String,
    pub shape: Vec<u64>,
    pub dtype: &'static str,
    pub role: &'static str,
    pub bytes: u64,
    pub live_first: usize,
    pub live_last: usize,
}

/// Memory configurations per node for a given number of pools. Counts can exceed any
/// integer type (a concat of 40 inputs over 3 pools), so they are reported as f64.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigStats {
    pub pools: u32,
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub total: f64,
    pub max_node: String,
    /// How many nodes have 1, 2-4, 5-16, 17-64... configurations (powers of 4).
    pub histogram: Vec<(String, usize)>,
}

impl Summary {
    pub fn new(model: &Model, pools: u32, top: usize) -> Summary {
        let liveness = Liveness::new(model);
        let profile = MemoryProfile::new(model, &liveness);
        let node_ids = || (0..model.nodes().len()).map(|i| NodeId(i as u32));

        let mut nodes_by_phase = BTreeMap::new();
        for n in node_ids() {
            *nodes_by_phase.entry(model.phase(n).as_str()).or_insert(0) += 1;
        }
        let mut op_counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        for node in model.nodes() {
            *op_counts.entry(node.op.as_str()).or_insert(0) += 1;
        }
        let mut ops: Vec<OpCount> = op_counts.into_iter().map(|(op, count)| OpCount { op, count }).collect();
        ops.sort_by(|a, b| b.count.cmp(&a.count).then(a.op.cmp(b.op)));

        let mut bytes_by_role = BTreeMap::new();
        for t in model.tensors() {
            *bytes_by_role.entry(t.role.as_str()).or_insert(0) += t.bytes;
        }
        let weights = model.tensors().iter().filter(|t| t.role == Role::Weight);
        let (parameters, parameter_bytes) = weights.fold((0, 0), |(n, b), t| (n + t.numel(), b + t.bytes));

        let mut order: Vec<usize> = (0..model.tensors().len()).collect();
        order.sort_by(|&a, &b| model.tensors()[b].bytes.cmp(&model.tensors()[a].bytes).then(a.cmp(&b)));
        let largest_tensors = order
            .into_iter()
            .take(top)
            .map(|i| {
                let t = &model.tensors()[i];
                TensorRow {
                    name: t.name.clone(),
                    shape: t.shape.clone(),
                    dtype: t.dtype.as_str(),
                    role: t.role.as_str(),
                    bytes: t.bytes,
                    live_first: liveness.ranges[i].first,
                    live_last: liveness.ranges[i].last,
                }
            })
            .collect();

        let forward = forward_cost(model);
        let step_flops = crate::analysis::step_flops(model);
        let peak_node =
            model.schedule().get(profile.peak_step).map(|&n| model.node(n).name.clone()).unwrap_or_default();
        Summary {
            name: model.name().to_string(),
            content_hash: model.content_hash(),
            meta: model.meta().clone(),
            nodes: model.nodes().len(),
            tensors: model.tensors().len(),
            schedule_given: model.schedule_given(),
            nodes_by_phase,
            ops,
            parameters,
            parameter_bytes,
            bytes_by_role,
            footprint_bytes: footprint_bytes(model),
            peak_live_bytes: profile.peak_bytes,
            peak_step: profile.peak_step,
            peak_node,
            forward_macs: forward.macs,
            step_flops,
            largest_tensors,
            configs: ConfigStats::new(model, pools),
        }
    }
}

impl ConfigStats {
    fn new(model: &Model, pools: u32) -> ConfigStats {
        let mut counts: Vec<(f64, usize)> =
            (0..model.nodes().len()).map(|i| (config_count(model, NodeId(i as u32), pools) as f64, i)).collect();
        counts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (min, median, max) = match counts.as_slice() {
            [] => (0.0, 0.0, 0.0),
            c => (c[0].0, c[c.len() / 2].0, c[c.len() - 1].0),
        };
        let max_node = counts.last().map(|&(_, i)| model.nodes()[i].name.clone()).unwrap_or_default();
        let mut histogram: Vec<(String, usize)> = Vec::new();
        let mut upper = 1.0;
        let mut lower = 1.0;
        let mut rest = counts.iter().map(|c| c.0).peekable();
        while rest.peek().is_some() {
            let n = std::iter::from_fn(|| rest.next_if(|&c| c <= upper)).count();
            let label = if lower == upper { format!("{upper}") } else { format!("{lower}-{upper}") };
            if n > 0 {
                histogram.push((label, n));
            }
            lower = upper + 1.0;
            upper *= 4.0;
        }
        ConfigStats { pools, min, median, max, total: counts.iter().map(|c| c.0).sum(), max_node, histogram }
    }
}

/// Phases in schedule order, for drawing.
pub fn phase_spans(model: &Model) -> Vec<(Phase, usize, usize)> {
    let mut spans: Vec<(Phase, usize, usize)> = Vec::new();
    for (step, &n) in model.schedule().iter().enumerate() {
        let phase = model.phase(n);
        match spans.last_mut() {
            Some(last) if last.0 == phase => last.2 = step,
            _ => spans.push((phase, step, step)),
        }
    }
    spans
}
