//! A placement plan as the executor needs it: where each tensor sits (pool and arena
//! offset) over the schedule, which copies run when, and where each kernel's scratch
//! goes. Built by the solver from plan.json; validated here against the model so that a
//! hand-edited plan gets an error, not a wrong run.
//!
//! Before kernel `s`: wait for the background copies it needs, then the blocking copies,
//! those out of DRAM first. Then kernel `s` itself, with its scratch, its outputs, and
//! the background copies it overlaps. (The solver's layout, crates/solve/src/layout.rs,
//! assigns offsets on exactly these phases.)

use crate::ExecError;
use placer_ir::{Model, TensorId};
use placer_pools::{PoolId, PoolSet, Slot};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedSpan {
    /// First step of the span.
    pub from: usize,
    pub pool: PoolId,
    pub offset: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyKind {
    /// Blocks before kernel `before_step`.
    Blocking,
    /// Runs on the copy thread during kernel `before_step - 1`; kernel `before_step`
    /// waits for it.
    Background,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedMove {
    pub tensor: TensorId,
    /// The span the tensor moves into; 0 for a weight returning at the end of the step.
    pub to_span: usize,
    /// The tensor is in its new place from this step on (the schedule's length: the end
    /// of the step).
    pub before_step: usize,
    pub kind: CopyKind,
}

#[derive(Debug, Clone)]
pub struct ExecPlan {
    /// Per tensor, its spans in order; the first starts at the tensor's first step.
    pub spans: Vec<Vec<PlannedSpan>>,
    pub moves: Vec<PlannedMove>,
    /// Per step: the arena offset of the kernel's scratch in pool 0.
    pub scratch_offsets: Vec<u64>,
    /// Bytes to reserve per pool.
    pub arena_bytes: Vec<u64>,
    /// The DRAM budget the plan was made for: pool 0's arena must not exceed it.
    pub budget_bytes: u64,
    /// An emulated memory-side cache (2LM) in front of a pool: operands there are
    /// charged its per-step waits instead of the pool's per-byte charge.
    pub side_cache: Option<SideWaits>,
    /// Every item's offset comes from one packing across the pools
    /// ([`ExecPlan::resident`]), so no two items live at once share an offset whichever
    /// pools they are in. A pool that shares memory with DRAM's (an emulated one) then
    /// keeps its items in DRAM's arena, at the bytes they would have in DRAM, as the
    /// resident executor only retags such a tensor: moving a tensor to an emulated pool
    /// changes its waits, not which bytes it and later tensors occupy. With separate
    /// arenas, a kernel whose output reused bytes a moved tensor left cold in DRAM's
    /// arena ran 10-20% slower in simultaneous passes than in single ones
    /// (docs/BENCHMARKS.md, "One arena for memory the pools share").
    pub one_packing: bool,
}

/// What an emulated memory-side cache charges, step by step (computed by the solver's
/// `two_lm` module from the cache's state after each kernel).
#[derive(Debug, Clone, PartialEq)]
pub struct SideWaits {
    pub pool: PoolId,
    /// Per step, ns.
    pub waits_ns: Vec<f64>,
}

/// Bytes a tensor reserves in an arena: whole pages, as the plan counted them.
pub fn reserved_bytes(bytes: u64) -> u64 {
    bytes.div_ceil(4096) * 4096
}

impl ExecPlan {
    /// Where tensor `t` is during step `step`: its slot, sized to the tensor's bytes.
    pub(crate) fn slot(&self, model: &Model, t: TensorId, span: usize) -> Slot {
        let s = self.spans[t.index()][span];
        Slot { pool: s.pool, offset: s.offset, len: model.tensor(t).bytes }
    }

    pub(crate) fn span_at(&self, t: TensorId, step: usize) -> usize {
        let spans = &self.spans[t.index()];
        spans.partition_point(|s| s.from <= step).saturating_sub(1)
    }

    /// The pool tensor `t` is in during step `step`.
    pub fn pool_at(&self, t: TensorId, step: usize) -> PoolId {
        self.spans[t.index()][self.span_at(t, step)].pool
    }

    /// The emulated wait for a kernel at `step` that took `kernel_ns` with its data in
    /// DRAM, given each operand's traffic: each operand at its planned pool, except that
    /// a memory-side cache charges its own per-step wait for the pool behind it. placer's
    /// executor and placer_torch both charge by this one function.
    pub fn kernel_wait_ns(
        &self,
        pools: &PoolSet,
        traffic: impl Iterator<Item = (TensorId, u64, u64)> + Clone,
        step: usize,
        kernel_ns: f64,
    ) -> f64 {
        let cached = self.side_cache.as_ref().map(|c| c.pool);
        let operands = traffic.filter_map(|(t, read, written)| {
            let pool = self.pool_at(t, step);
            (Some(pool) != cached).then_some((pool, read, written))
        });
        pools.kernel_wait_ns(operands, kernel_ns) + self.side_cache.as_ref().map_or(0.0, |c| c.waits_ns[step])
    }

    /// Checks the plan's shape against the model and `pools` pools: one span list per
    /// tensor, steps inside the schedule, moves between existing spans, a budget that
    /// holds DRAM's arena.
    pub fn validate(&self, model: &Model, pools: usize) -> Result<(), ExecError> {
        let steps = model.schedule().len();
        let bad = |reason: String| Err(ExecError::Plan { reason });
        if self.spans.len() != model.tensors().len() || self.scratch_offsets.len() != steps {
            return bad(format!(
                "it places {} tensors and {} kernels; the model has {} and {steps}",
                self.spans.len(),
                self.scratch_offsets.len(),
                model.tensors().len()
            ));
        }
        if self.arena_bytes.len() != pools {
            return bad(format!("it reserves memory in {} pools; the host has {pools}", self.arena_bytes.len()));
        }
        if self.arena_bytes[0] > self.budget_bytes {
            return bad(format!(
                "its DRAM arena of {} bytes is over its own budget of {} bytes",
                self.arena_bytes[0], self.budget_bytes
            ));
        }
        for (t, spans) in self.spans.iter().enumerate() {
            let name = &model.tensors()[t].name;
            if spans.is_empty() || spans.windows(2).any(|w| w[0].from >= w[1].from) {
                return bad(format!("tensor '{name}' has no spans or spans out of order"));
            }
            for s in spans {
                let end = s.offset + reserved_bytes(model.tensors()[t].bytes);
                if s.pool.index() >= pools || end > self.arena_bytes[s.pool.index()] || s.from > steps {
                    return bad(format!("tensor '{name}' has a span outside its pool's arena or the schedule"));
                }
            }
        }
        if let Some(c) = &self.side_cache
            && (c.pool.index() >= pools || c.waits_ns.len() != steps)
        {
            return bad(format!("its memory-side cache has {} waits for {steps} steps", c.waits_ns.len()));
        }
        for m in &self.moves {
            let spans = self.spans.get(m.tensor.index()).map_or(0, Vec::len);
            let name = model.tensors().get(m.tensor.index()).map_or("?", |t| t.name.as_str());
            let returning = m.to_span == 0 && m.before_step == steps;
            let lands =
                m.to_span < spans && (returning || self.spans[m.tensor.index()][m.to_span].from == m.before_step);
            let overlaps_a_kernel = m.kind == CopyKind::Blocking || m.before_step >= 1;
            if !lands || !overlaps_a_kernel || m.before_step > steps || (returning && spans < 2) {
                return bad(format!(
                    "the move of tensor '{name}' before step {} matches none of its spans",
                    m.before_step
                ));
            }
        }
        Ok(())
    }
}
