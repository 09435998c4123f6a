//! The solver's view of one problem: tensors with live ranges and uses at allocation
//! granularity, kernels with their costs, pools with capacities and move costs.

use crate::cost::{Costs, KernelCost};
use crate::pools::SolvePools;
use placer_ir::{Liveness, Model, NodeId, TensorId};
use placer_kernels::dispatch::scratch_len;
use placer_profile::Pin;
use placer_units::fmt_bytes;

/// Allocations are rounded up to whole pages: that is what a pool hands out.
pub const PAGE: u64 = 4096;

pub fn round_to_page(bytes: u64) -> u64 {
    bytes.div_ceil(PAGE) * PAGE
}

#[derive(Debug, Clone)]
pub struct TensorInfo {
    pub id: TensorId,
    pub name: String,
    /// Bytes as allocated (rounded up to a page).
    pub bytes: u64,
    /// First and last step the tensor is live (inclusive).
    pub first: usize,
    pub last: usize,
    /// Steps whose kernel reads or writes it, ascending.
    pub uses: Vec<usize>,
    /// Steps whose kernel writes it (produces or updates it).
    pub writes: Vec<usize>,
    /// Weights and optimiser state: live across iterations, so a plan must leave them
    /// where the next step expects them.
    pub persistent: bool,
    /// The only pool it may live in, when pinned.
    pub pinned: Option<u16>,
}

#[derive(Debug, Clone)]
pub struct KernelInfo {
    pub node: NodeId,
    pub name: String,
    /// Operands (tensor indices) in `Node::operands` order.
    pub operands: Vec<usize>,
    pub cost: KernelCost,
    /// Scratch space the kernel needs, always in DRAM (pool 0), page-rounded.
    pub scratch_bytes: u64,
}

#[derive(Debug, Clone)]
pub struct Instance {
    pub tensors: Vec<TensorInfo>,
    /// One per schedule step.
    pub kernels: Vec<KernelInfo>,
    pub pools: SolvePools,
    /// Bytes each pool may hold: the budget for pool 0, the capacity for the others.
    pub capacity: Vec<u64>,
    /// The most bytes live at one step if everything sat in DRAM, scratch included.
    pub peak_bytes: u64,
    /// What every step costs beyond its kernels (`Costs::step_overhead_ns`), ns.
    pub step_overhead_ns: f64,
}

/// Why a budget cannot be met.
#[derive(Debug, Clone, PartialEq)]
pub struct Infeasible {
    pub step: usize,
    pub node: String,
    /// The largest tensors that must be in DRAM at that step, with their bytes.
    pub tensors: Vec<(String, u64)>,
    pub required: u64,
    pub smallest_feasible: u64,
}

impl std::fmt::Display for Infeasible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.tensors.iter().map(|(n, b)| format!("{n} ({})", fmt_bytes(*b))).collect();
        write!(
            f,
            "no placement fits: at step {} ({}) {} must be in DRAM ({}); the smallest feasible budget is {} ({} bytes)",
            self.step,
            self.node,
            fmt_bytes(self.required),
            if names.is_empty() { "scratch space".to_string() } else { names.join(", ") },
            fmt_bytes(self.smallest_feasible),
            self.smallest_feasible
        )
    }
}

impl Instance {
    /// The problem for `model` on `pools` with DRAM capped at `budget` bytes (use
    /// `u64::MAX` for no cap), under `pins`.
    pub fn new(model: &Model, costs: &Costs, pools: SolvePools, budget: u64, pins: &[Pin]) -> Instance {
        let liveness = Liveness::new(model);
        let steps = model.schedule().len();
        let mut tensors: Vec<TensorInfo> = model
            .tensors()
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let id = TensorId(i as u32);
                let range = liveness.ranges[i];
                TensorInfo {
                    id,
                    name: t.name.clone(),
                    bytes: round_to_page(t.bytes),
                    first: range.first,
                    last: range.last,
                    uses: Vec::new(),
                    writes: Vec::new(),
                    persistent: t.role.is_persistent(),
                    pinned: pins.iter().rev().find(|p| p.applies_to(model, id)).map(|p| p.pool),
                }
            })
            .collect();
        let kernels: Vec<KernelInfo> = model
            .schedule()
            .iter()
            .enumerate()
            .map(|(step, &n)| {
                let node = model.node(n);
                let operands: Vec<usize> = node.operands().iter().map(|t| t.index()).collect();
                for &t in &operands {
                    tensors[t].uses.push(step);
                }
                for t in node.outputs.iter().chain(&node.updates) {
                    tensors[t.index()].writes.push(step);
                }
                let shapes =
                    |ids: &[TensorId]| ids.iter().map(|&t| model.tensor(t).shape.as_slice()).collect::<Vec<_>>();
                let scratch =
                    scratch_len(node.op, &node.attrs, &shapes(&node.inputs), &shapes(&node.outputs)) as u64 * 4;
                KernelInfo {
                    node: n,
                    name: node.name.clone(),
                    operands,
                    cost: costs.kernels[n.index()].clone(),
                    scratch_bytes: if scratch == 0 { 0 } else { round_to_page(scratch) },
                }
            })
            .collect();
        for t in &mut tensors {
            t.uses.dedup();
            t.writes.dedup();
        }
        let mut delta = vec![0i128; steps + 1];
        for t in &tensors {
            delta[t.first] += i128::from(t.bytes);
            delta[t.last + 1] -= i128::from(t.bytes);
        }
        let mut live = 0i128;
        let peak_bytes = (0..steps)
            .map(|i| {
                live += delta[i];
                live as u64 + kernels[i].scratch_bytes
            })
            .max()
            .unwrap_or(0);
        let mut capacity: Vec<u64> = pools.pools.iter().map(|p| p.capacity).collect();
        capacity[0] = budget;
        Instance { tensors, kernels, pools, capacity, peak_bytes, step_overhead_ns: costs.step_overhead_ns }
    }

    pub fn steps(&self) -> usize {
        self.kernels.len()
    }

    /// Checks that some placement can meet the capacities: at every step, scratch and
    /// tensors pinned to DRAM, plus whatever the other pools cannot hold, must fit in
    /// the budget.
    pub fn feasibility(&self) -> Result<(), Infeasible> {
        let steps = self.steps();
        let slow_room: u64 = self.capacity.iter().skip(1).fold(0u64, |a, &c| a.saturating_add(c));
        let mut pinned_dram = vec![0u64; steps + 1];
        let mut pinned_slow = vec![0u64; steps + 1];
        let mut free = vec![0u64; steps + 1];
        for t in &self.tensors {
            let acc = match t.pinned {
                Some(0) => &mut pinned_dram,
                Some(_) => &mut pinned_slow,
                None => &mut free,
            };
            // Difference arrays, wrapping: every add is undone at `last + 1`.
            acc[t.first] = acc[t.first].wrapping_add(t.bytes);
            acc[t.last + 1] = acc[t.last + 1].wrapping_sub(t.bytes);
        }
        let (mut d, mut s, mut f) = (0u64, 0u64, 0u64);
        let mut need = vec![0u64; steps];
        for i in 0..steps {
            d = d.wrapping_add(pinned_dram[i]);
            s = s.wrapping_add(pinned_slow[i]);
            f = f.wrapping_add(free[i]);
            let overflow = (s + f).saturating_sub(slow_room);
            need[i] = d + self.kernels[i].scratch_bytes + overflow;
        }
        let Some((step, &required)) = need.iter().enumerate().max_by_key(|(i, b)| (**b, std::cmp::Reverse(*i))) else {
            return Ok(());
        };
        if required <= self.capacity[0] {
            return Ok(());
        }
        let mut must: Vec<(String, u64)> = self
            .tensors
            .iter()
            .filter(|t| t.pinned == Some(0) && t.first <= step && step <= t.last)
            .map(|t| (t.name.clone(), t.bytes))
            .collect();
        must.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        must.truncate(5);
        Err(Infeasible {
            step,
            node: self.kernels[step].name.clone(),
            tensors: must,
            required,
            smallest_feasible: required,
        })
    }

    /// Whether `tensor` may live in `pool`.
    pub fn allowed(&self, tensor: usize, pool: u16) -> bool {
        self.tensors[tensor].pinned.is_none_or(|p| p == pool)
    }
}
