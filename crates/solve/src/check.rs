//! The plan checker. It reads a plan as a file's contents and replays it against the
//! model, the pools and the kernel costs, sharing nothing with the code that made the
//! plan: live ranges come from the IR, locations from the plan's spans, and every
//! figure the plan states is recomputed and compared.

use crate::cost::{Costs, TimeSource};
use crate::placement::MoveKind;
use crate::plan::Plan;
use crate::pools::SolvePools;
use crate::two_lm;
use placer_ir::{Liveness, Model, TensorId};
use placer_kernels::dispatch::scratch_len;
use std::collections::HashMap;

#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    /// Every problem found; empty when the plan is sound.
    pub problems: Vec<String>,
    pub step_ns: f64,
    pub peak_bytes: Vec<u64>,
    pub measured: usize,
    pub predicted: usize,
    pub estimated: usize,
}

impl CheckReport {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

const PAGE: u64 = 4096;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()) + 1e-3
}

/// Checks `plan` for `model` on `pools`, with DRAM capped at `budget` and every other
/// pool at its capacity.
pub fn check(model: &Model, plan: &Plan, costs: &Costs, pools: &SolvePools, budget: u64) -> CheckReport {
    let mut report = CheckReport::default();
    let mut problem = |p: String| report.problems.push(p);
    if plan.provenance.model_hash != model.content_hash() {
        problem(format!("the plan is for model '{}' with another content hash", plan.provenance.model));
        return report;
    }
    let names = pools.names();
    let plan_names: Vec<String> = plan.inputs.pools.iter().map(|p| p.name.clone()).collect();
    if plan_names != names {
        problem(format!("the plan's pools ({}) are not this host's ({})", plan_names.join(", "), names.join(", ")));
        return report;
    }
    let pool_index: HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect();
    let steps = model.schedule().len();
    let liveness = Liveness::new(model);
    if plan.tensors.len() != model.tensors().len() {
        problem(format!("the plan places {} tensors; the model has {}", plan.tensors.len(), model.tensors().len()));
        return report;
    }
    let capacity: Vec<u64> =
        pools.pools.iter().enumerate().map(|(i, p)| if i == 0 { budget } else { p.capacity }).collect();
    for (p, (&arena, &cap)) in plan.arena_bytes.iter().zip(&capacity).enumerate() {
        if arena > cap {
            let need = plan.phase_peak_bytes.get(p).copied().unwrap_or(0);
            problem(format!(
                "{}'s arena of {arena} bytes (its busiest phase holds {need}) is over its {cap} byte limit",
                names[p]
            ));
        }
    }
    if plan.arena_bytes.len() != names.len() {
        problem(format!("the plan lays out {} arenas for {} pools", plan.arena_bytes.len(), names.len()));
    }
    let mut bytes = vec![vec![0i128; steps + 1]; names.len()];
    // Where each tensor is at each of its live steps, as spans of pool indices.
    let mut where_: Vec<Vec<(usize, usize, usize)>> = Vec::with_capacity(plan.tensors.len());
    for (i, (pt, t)) in plan.tensors.iter().zip(model.tensors()).enumerate() {
        let range = liveness.ranges[i];
        let size = t.bytes.div_ceil(PAGE) * PAGE;
        if pt.name != t.name || pt.bytes != size {
            problem(format!(
                "tensor {i}: the plan has '{}' of {} bytes, the model '{}' of {size}",
                pt.name, pt.bytes, t.name
            ));
        }
        let mut spans = Vec::new();
        let mut expect = range.first;
        for s in &pt.placement {
            let Some(&p) = pool_index.get(s.pool.as_str()) else {
                problem(format!("tensor '{}': unknown pool '{}'", t.name, s.pool));
                continue;
            };
            if s.from != expect || s.to < s.from {
                problem(format!(
                    "tensor '{}': span {}..={} does not continue from step {expect}",
                    t.name, s.from, s.to
                ));
            }
            expect = s.to.saturating_add(1);
            if plan.arena_bytes.get(p).is_none_or(|&arena| s.offset.saturating_add(size) > arena) {
                problem(format!("tensor '{}': span {}..={} lies outside {}'s arena", t.name, s.from, s.to, s.pool));
            }
            bytes[p][s.from.min(steps)] += i128::from(size);
            bytes[p][s.to.saturating_add(1).min(steps)] -= i128::from(size);
            spans.push((s.from, s.to, p));
        }
        if expect != range.last + 1 {
            problem(format!(
                "tensor '{}': the plan covers it up to step {}, it is live to {}",
                t.name,
                expect as i64 - 1,
                range.last
            ));
        }
        where_.push(spans);
    }
    let pool_at = |t: usize, step: usize| where_[t].iter().find(|s| s.0 <= step && step <= s.1).map(|s| s.2);

    // Moves: exactly one per change of pool, from where it was to where it goes.
    let tensor_index: HashMap<&str, usize> =
        model.tensors().iter().enumerate().map(|(i, t)| (t.name.as_str(), i)).collect();
    let mut changes: HashMap<(usize, usize), (usize, usize)> = HashMap::new();
    for (t, spans) in where_.iter().enumerate() {
        for w in spans.windows(2) {
            if w[0].2 != w[1].2 {
                changes.insert((t, w[1].0), (w[0].2, w[1].2));
            }
        }
        let persistent = model.tensor(TensorId(t as u32)).role.is_persistent();
        if let (true, Some(first), Some(last)) = (persistent, spans.first(), spans.last())
            && first.2 != last.2
        {
            changes.insert((t, steps), (last.2, first.2));
        }
    }
    let mut copies = vec![0.0; steps];
    let mut slowdown = vec![0.0; steps];
    let mut sync_ns = 0.0;
    for m in &plan.moves {
        let (Some(&t), Some(&from), Some(&to)) =
            (tensor_index.get(m.tensor.as_str()), pool_index.get(m.from.as_str()), pool_index.get(m.to.as_str()))
        else {
            problem(format!("move of '{}' names an unknown tensor or pool", m.tensor));
            continue;
        };
        match changes.remove(&(t, m.before_step)) {
            Some((a, b)) if a == from && b == to => {}
            _ => {
                problem(format!(
                    "move of '{}' {}→{} before step {} does not match its locations",
                    m.tensor, m.from, m.to, m.before_step
                ));
                continue;
            }
        }
        let size = plan.tensors[t].bytes;
        if m.bytes != size {
            problem(format!("move of '{}' copies {} bytes; the tensor has {size}", m.tensor, m.bytes));
        }
        let ns = size as f64 * pools.move_ns_per_byte[from][to];
        match m.kind {
            MoveKind::Sync => sync_ns += ns,
            MoveKind::Async => {
                let during = m.before_step.checked_sub(1).filter(|&s| s < steps && m.overlaps == Some(s));
                let Some(during) = during else {
                    problem(format!(
                        "async move of '{}' before step {} must overlap step {}",
                        m.tensor,
                        m.before_step,
                        m.before_step as i64 - 1
                    ));
                    continue;
                };
                let node = model.node(model.schedule()[during]);
                if node.outputs.iter().chain(&node.updates).any(|w| w.index() == t) {
                    problem(format!("async move of '{}' overlaps '{}', which writes it", m.tensor, node.name));
                }
                copies[during] += ns;
                let cpu_ns = size as f64 * pools.copy_cpu_ns_per_byte[from][to];
                slowdown[during] += costs.kernels[model.schedule()[during].index()].copy_loss_ns(cpu_ns);
                bytes[to][during] += i128::from(size);
                bytes[to][during + 1] -= i128::from(size);
            }
        }
    }
    for ((t, at), (a, b)) in changes {
        problem(format!(
            "tensor '{}' goes from {} to {} before step {at} without a move",
            model.tensors()[t].name,
            names[a],
            names[b]
        ));
    }

    // Capacity, kernels and time, step by step.
    let mut live = vec![0i128; names.len()];
    let mut peak = vec![0u64; names.len()];
    let mut step_ns = sync_ns + costs.step_overhead_ns;
    // A 2LM plan: its cached pool is reached at DRAM speed, plus the cache's wait.
    let side = match &plan.memory_side_cache {
        None => None,
        Some(cache) => match two_lm::predicted_waits(model, plan, cache, costs, pools) {
            Ok(side) => Some(side),
            Err(e) => {
                problem(e);
                return report;
            }
        },
    };
    if plan.kernels.len() != steps || plan.dram_bytes.len() != steps {
        problem(format!(
            "the plan lists {} kernels and {} DRAM figures for {steps} steps",
            plan.kernels.len(),
            plan.dram_bytes.len()
        ));
        return report;
    }
    for (i, &n) in model.schedule().iter().enumerate() {
        let node = model.node(n);
        let shapes = |ids: &[TensorId]| ids.iter().map(|&t| model.tensor(t).shape.as_slice()).collect::<Vec<_>>();
        let scratch = (scratch_len(node.op, &node.attrs, &shapes(&node.inputs), &shapes(&node.outputs)) as u64 * 4)
            .div_ceil(PAGE)
            * PAGE;
        let scratch_end = plan.kernels.get(i).map_or(0, |k| k.scratch_offset) + scratch;
        if scratch > 0 && plan.arena_bytes.first().is_none_or(|&arena| scratch_end > arena) {
            problem(format!("step {i} ({}): its scratch lies outside DRAM's arena", node.name));
        }
        for p in 0..names.len() {
            live[p] += bytes[p][i];
            let used = live[p] + if p == 0 { i128::from(scratch) } else { 0 };
            peak[p] = peak[p].max(used as u64);
            if used > i128::from(capacity[p]) {
                problem(format!(
                    "step {i} ({}): {} holds {used} bytes, over its {} limit",
                    node.name, names[p], capacity[p]
                ));
            }
            if p == 0 && used as u64 != plan.dram_bytes[i] {
                problem(format!(
                    "step {i}: the plan predicts {} DRAM bytes, the replay finds {used}",
                    plan.dram_bytes[i]
                ));
            }
        }
        let config: Option<Vec<u16>> =
            node.operands().iter().map(|t| pool_at(t.index(), i).map(|p| p as u16)).collect();
        let Some(config) = config else {
            problem(format!("step {i} ({}): an operand has no location", node.name));
            continue;
        };
        let (time, source) = match &side {
            None => costs.kernel_ns(n, &config),
            Some((cached, waits)) => {
                let seen: Vec<u16> = config.iter().map(|&p| if p as usize == *cached { 0 } else { p }).collect();
                let (time, source) = costs.kernel_ns(n, &seen);
                (time + waits[i], source)
            }
        };
        match source {
            TimeSource::Measured => report.measured += 1,
            TimeSource::Predicted => report.predicted += 1,
            TimeSource::Estimated => report.estimated += 1,
        }
        let pk = &plan.kernels[i];
        let named: Vec<&str> = config.iter().map(|&p| names[p as usize].as_str()).collect();
        if pk.node != node.name || pk.config != named || !close(pk.time_ns, time) || pk.source != source {
            problem(format!(
                "step {i} ({}): the plan says {:?} {:.0} ns ({:?}), the replay {named:?} {time:.0} ns ({source:?})",
                node.name, pk.config, pk.time_ns, pk.source
            ));
        }
        if !close(pk.interference_ns, slowdown[i]) {
            problem(format!(
                "step {i} ({}): the plan says copies slow it by {:.0} ns, the replay {:.0} ns",
                node.name, pk.interference_ns, slowdown[i]
            ));
        }
        step_ns += (time + slowdown[i]).max(copies[i]);
    }
    if !close(plan.predicted.step_ns, step_ns) {
        problem(format!("predicted step time {:.0} ns; the replay finds {step_ns:.0} ns", plan.predicted.step_ns));
    }
    report.step_ns = step_ns;
    report.peak_bytes = peak;
    report
}
