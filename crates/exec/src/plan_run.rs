//! Executes a placement plan: every tensor in its planned pool at its planned arena
//! offset, allocated when it becomes live and freed after its last use, blocking copies
//! before the kernels that need them, background copies on a copy thread during the
//! kernels the plan names, and a wait before the kernel that consumes each of them.

use crate::ExecError;
use crate::clock::ClockInfo;
use crate::data::{fill_bytes, fill_plan};
use crate::executor::{EmulatedPoolUse, RunOptions, broadcast_cost_ns, charged_ns, wait_on_every_thread};
use crate::invoke::{invoke, scratch_bytes};
use crate::planned::{CopyKind, ExecPlan, PlannedMove, reserved_bytes};
use crate::runner::SharedRunner;
use placer_ir::ops::{Traffic, node_traffic};
use placer_ir::{DType, Model, NodeId, Op, TensorId};
use placer_pools::{Arenas, CopyTicket, PoolError, PoolId, PoolSet, Slot};
use rayon::prelude::*;
use serde::Serialize;
use std::time::Instant;

/// What happens around one kernel (or, at index `steps`, at the end of the step).
#[derive(Debug, Default, Clone)]
struct Events {
    /// Background copies that must be done before this kernel.
    joins: Vec<usize>,
    blocking: Vec<usize>,
    /// Tensors whose first span begins with this kernel's outputs.
    produced: Vec<TensorId>,
    /// Background copies that run during this kernel.
    launches: Vec<usize>,
    /// Tensors freed after this kernel.
    frees: Vec<TensorId>,
}

/// Times of one step of a plan.
#[derive(Debug, Clone, Serialize)]
pub struct PlanStepTimes {
    /// Per kernel: its time including emulated waits, ns.
    pub kernel_ns: Vec<f64>,
    /// Per kernel: time spent before it waiting for background copies, ns.
    pub copy_wait_ns: Vec<f64>,
    /// Blocking copies, ns (all of them, end of step included).
    pub blocking_ns: f64,
    pub wall_ns: f64,
    /// Per kernel: DRAM bytes placed while it ran (its scratch, outputs and copies in
    /// flight included), measured by the arena.
    pub dram_bytes: Vec<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlanRunReport {
    pub clock: ClockInfo,
    pub steps: Vec<PlanStepTimes>,
    pub losses: Vec<f32>,
    /// Bytes reserved in each pool's arena.
    pub reserved_bytes: Vec<u64>,
    /// The most bytes placed at once in each pool, measured by the arena.
    pub peak_bytes: Vec<u64>,
    pub blocking_moves: usize,
    pub background_moves: usize,
    /// Bytes copied per step.
    pub bytes_moved: u64,
    pub emulated: Vec<EmulatedPoolUse>,
    /// Per pool: where its arena's pages were found after the first touch
    /// (`move_pages`), against the nodes its backend binds to.
    pub pages: Vec<placer_pools::PageTally>,
    /// Per pool: the bytes of its arena on huge pages once reserved and touched
    /// ([`placer_pools::Arenas::huge_page_bytes`]); `None` where not measured. A host
    /// short of free huge pages backs the rest with small ones, and kernels on those run
    /// slower than the profile timed them.
    pub huge_page_bytes: Vec<Option<u64>>,
    /// The copy thread's memcpy time per byte over the background copies, ns, beside
    /// whatever kernels they overlapped; `None` without any.
    pub copy_memcpy_ns_per_byte: Option<f64>,
}

#[derive(Debug)]
pub struct PlanExecutor<'m> {
    model: &'m Model,
    plan: ExecPlan,
    events: Vec<Events>,
    traffic: Vec<Vec<(TensorId, Traffic)>>,
    /// Tensors no kernel produces and no step keeps (inputs): their bytes, refilled
    /// before every step, as a data loader would.
    inputs: Vec<(TensorId, Vec<u8>)>,
    /// The loss tensor and the step that computes it; its value is read right after
    /// that kernel, before its bytes are freed.
    loss: Option<(TensorId, usize)>,
    last_loss: Option<f32>,
    broadcast_ns: f64,
    /// Per move, the background copy in flight for it (launched, not yet joined).
    in_flight: Vec<Option<CopyTicket>>,
    /// Also runs the background copies, and waits for them before freeing any byte.
    arenas: Arenas,
    pools: PoolSet,
    /// Wake every pool thread before each kernel, outside its timing (profiling; see
    /// `Executor::set_warm_pool`).
    warm_pool: bool,
    /// See `Executor::set_runner`.
    runner: Option<SharedRunner>,
    /// Per pool, the pool whose arena holds its items' bytes: itself, or DRAM's for a
    /// pool that shares DRAM's memory in a plan of one packing (`ExecPlan::one_packing`;
    /// the DRAM in use a step reports then counts that pool's items too: only the
    /// profiler runs such plans, and it reads no DRAM peak).
    memory: Vec<PoolId>,
}

impl<'m> PlanExecutor<'m> {
    /// Reserves the plan's arenas, places the weights where the plan starts them and
    /// fills them (and the inputs) deterministically from `seed`.
    pub fn new(model: &'m Model, mut pools: PoolSet, plan: ExecPlan, seed: u64) -> Result<Self, ExecError> {
        plan.validate(model, pools.pools().len())?;
        if let Some(t) =
            model.tensors().iter().find(|t| !matches!(t.dtype, DType::F32 | DType::I32 | DType::I64 | DType::U8))
        {
            return Err(ExecError::UnsupportedType { tensor: t.name.clone(), dtype: t.dtype });
        }
        let events = events(model, &plan)?;
        let memory: Vec<PoolId> = pools
            .ids()
            .map(|p| if plan.one_packing && pools.same_memory(p, PoolId(0)) { PoolId(0) } else { p })
            .collect();
        let mut reserve = vec![0u64; plan.arena_bytes.len()];
        for (p, &bytes) in plan.arena_bytes.iter().enumerate() {
            let into = memory[p].index();
            reserve[into] = reserve[into].max(bytes);
        }
        let arenas = Arenas::reserve(&mut pools, &reserve)
            .map_err(|source| ExecError::Pool { tensor: "(arena)".into(), error: source })?;
        let traffic = (0..model.nodes().len()).map(|n| node_traffic(model, NodeId(n as u32))).collect();
        let broadcast_ns = if pools.any_emulated() { broadcast_cost_ns() } else { 0.0 };
        let loss = model.schedule().iter().enumerate().find_map(|(step, &n)| {
            let node = model.node(n);
            (node.op == Op::SoftmaxCrossEntropy).then(|| (node.outputs[0], step))
        });
        let in_flight = (0..plan.moves.len()).map(|_| None).collect();
        let mut exec = PlanExecutor {
            model,
            plan,
            events,
            traffic,
            inputs: Vec::new(),
            loss,
            last_loss: None,
            broadcast_ns,
            in_flight,
            arenas,
            pools,
            warm_pool: false,
            runner: None,
            memory,
        };
        exec.fill(seed)?;
        Ok(exec)
    }

    fn fill(&mut self, seed: u64) -> Result<(), ExecError> {
        let model = self.model;
        let fills = fill_plan(model);
        for (i, tensor) in model.tensors().iter().enumerate() {
            let t = TensorId(i as u32);
            let persistent = tensor.role.is_persistent();
            if !persistent && model.producer(t).is_some() {
                continue;
            }
            let mut bytes = vec![0u8; tensor.bytes as usize];
            fill_bytes(fills[i], t, seed, &mut bytes, false);
            if persistent {
                let slot = self.placed(t, 0)?;
                self.arenas.views(&[], &[slot]).map_err(pool_err(self.model, t))?.1[0].copy_from_slice(&bytes);
            } else {
                self.inputs.push((t, bytes));
            }
        }
        Ok(())
    }

    /// Where tensor `t`'s span is in memory: its pool's arena, or DRAM's (`memory`).
    fn slot(&self, t: TensorId, span: usize) -> Slot {
        let slot = self.plan.slot(self.model, t, span);
        Slot { pool: self.memory[slot.pool.index()], ..slot }
    }

    /// Places tensor `t`'s span in its arena (whole pages, as planned); returns its slot.
    fn placed(&mut self, t: TensorId, span: usize) -> Result<Slot, ExecError> {
        let slot = self.slot(t, span);
        let reserved = Slot { len: reserved_bytes(slot.len), ..slot };
        self.arenas.place(reserved).map_err(pool_err(self.model, t))?;
        Ok(slot)
    }

    fn release(&mut self, t: TensorId, span: usize) -> Result<(), ExecError> {
        let slot = self.slot(t, span);
        self.arenas.release(slot).map_err(pool_err(self.model, t))
    }

    pub fn model(&self) -> &Model {
        self.model
    }

    /// As `Executor::set_warm_pool`: profiling times kernels this way in both executors.
    pub fn set_warm_pool(&mut self, warm: bool) {
        self.warm_pool = warm;
    }

    /// With `false`, background copies take their emulated wait but move no bytes (the
    /// tensors they move keep stale contents, so the step computes nonsense): for
    /// measuring what their memcpys cost the kernels beside them, beside this plan run
    /// as it is (`crates/eval/examples/copies_in_plan.rs`).
    pub fn set_background_memcpy(&mut self, on: bool) {
        self.arenas.set_copies_move_bytes(on);
    }

    /// As `Executor::set_runner`.
    pub fn set_runner(&mut self, runner: Option<SharedRunner>) {
        self.runner = runner;
    }

    pub fn pools(&self) -> &PoolSet {
        &self.pools
    }

    /// The move's source and destination spans.
    fn move_spans(&self, m: &PlannedMove) -> (usize, usize) {
        let last = self.plan.spans[m.tensor.index()].len() - 1;
        if m.to_span == 0 { (last, 0) } else { (m.to_span - 1, m.to_span) }
    }

    fn blocking_copy(&mut self, index: usize) -> Result<f64, ExecError> {
        let m = self.plan.moves[index];
        let (src, dst) = self.move_spans(&m);
        let start = Instant::now();
        let to = self.placed(m.tensor, dst)?;
        let from = self.slot(m.tensor, src);
        let (r, mut w) = self.arenas.views(&[from], &[to]).map_err(pool_err(self.model, m.tensor))?;
        // The probe measured copies with every thread; a blocking copy has the machine.
        let chunk = (r[0].len() / rayon::current_num_threads()).max(1 << 16);
        w[0].par_chunks_mut(chunk).zip(r[0].par_chunks(chunk)).for_each(|(d, s)| d.copy_from_slice(s));
        wait_on_every_thread(self.pools.copy_extra_ns(from.pool, to.pool, from.len), self.broadcast_ns);
        self.release(m.tensor, src)?;
        Ok(start.elapsed().as_nanos() as f64)
    }

    fn launch(&mut self, index: usize) -> Result<(), ExecError> {
        let m = self.plan.moves[index];
        let (src, dst) = self.move_spans(&m);
        let to = self.placed(m.tensor, dst)?;
        let from = self.slot(m.tensor, src);
        let extra = self.pools.copy_extra_ns(from.pool, to.pool, from.len);
        let ticket = self.arenas.start_copy(from, to, extra).map_err(copy_err(self.model, m.tensor))?;
        self.in_flight[index] = Some(ticket);
        Ok(())
    }

    fn join(&mut self, index: usize) -> Result<(), ExecError> {
        let m = self.plan.moves[index];
        let ticket = self.in_flight[index].take().ok_or_else(|| ExecError::Copy {
            reason: format!("the move of '{}' was never launched", self.model.tensor(m.tensor).name),
        })?;
        self.arenas.finish_copy(ticket).map_err(copy_err(self.model, m.tensor))?;
        let (src, _) = self.move_spans(&m);
        self.release(m.tensor, src)
    }

    /// The emulated wait for node `n` at `step` that took `kernel_ns`: each operand at
    /// its planned pool, except that a memory-side cache charges for the pool behind it.
    fn emulated_ns(&self, n: NodeId, step: usize, kernel_ns: f64) -> f64 {
        let traffic = self.traffic[n.index()].iter().map(|(t, traffic)| (*t, traffic.read, traffic.written));
        self.plan.kernel_wait_ns(&self.pools, traffic, step, kernel_ns)
    }

    /// Runs kernel `step`; returns its time in ns and the DRAM bytes placed meanwhile.
    fn run_kernel(&mut self, step: usize) -> Result<(f64, u64), ExecError> {
        let model = self.model;
        let n = model.schedule()[step];
        let node = model.node(n);
        let at = |t: &TensorId| self.slot(*t, self.plan.span_at(*t, step));
        let reads: Vec<Slot> = node.inputs.iter().map(at).collect();
        let mut writes: Vec<Slot> = node.updates.iter().chain(&node.outputs).map(at).collect();
        let scratch_len = scratch_bytes(model, n);
        let scratch = Slot { pool: PoolId(0), offset: self.plan.scratch_offsets[step], len: scratch_len };
        if scratch_len > 0 {
            self.arenas
                .place(Slot { len: reserved_bytes(scratch_len), ..scratch })
                .map_err(|source| ExecError::Scratch { bytes: scratch_len, error: source })?;
            writes.push(scratch);
        }
        let dram = self.arenas.in_use_of(PoolId(0));
        // Another framework's kernels do not run on this pool: woken, its threads would
        // only spin beside them.
        if self.warm_pool && self.runner.is_none() {
            rayon::broadcast(|_| ());
        }
        let start = Instant::now();
        let (inputs, mut outs) = self
            .arenas
            .views(&reads, &writes)
            .map_err(|source| ExecError::Pool { tensor: format!("an operand of '{}'", node.name), error: source })?;
        let mut scratch_view: &mut [f32] = &mut [];
        if scratch_len > 0 {
            let bytes = outs.pop().unwrap_or_default();
            let len = bytes.len();
            scratch_view = bytemuck::try_cast_slice_mut(bytes).map_err(|_| ExecError::Scratch {
                bytes: scratch_len,
                error: PoolError::BadView { len, what: "f32" },
            })?;
        }
        let kernel_ns = invoke(model, n, &inputs, outs, scratch_view, self.runner.as_ref())?;
        let wait = wait_on_every_thread(self.emulated_ns(n, step, kernel_ns), self.broadcast_ns);
        let total = charged_ns(start, kernel_ns, wait, self.runner.is_some());
        if scratch_len > 0 {
            self.arenas.release(scratch).map_err(|source| ExecError::Scratch { bytes: scratch_len, error: source })?;
        }
        Ok((total, dram))
    }

    /// Refills the inputs and places them (untimed: a data loader's work).
    fn load_inputs(&mut self) -> Result<(), ExecError> {
        for i in 0..self.inputs.len() {
            let t = self.inputs[i].0;
            let slot = self.placed(t, 0)?;
            let (_, mut w) = self.arenas.views(&[], &[slot]).map_err(pool_err(self.model, t))?;
            w[0].copy_from_slice(&self.inputs[i].1);
        }
        Ok(())
    }

    /// The copies and frees around kernel `step`, or at the end of the step when
    /// `step` is the schedule's length.
    fn moves_before(&mut self, step: usize, times: &mut PlanStepTimes) -> Result<(), ExecError> {
        let start = Instant::now();
        for i in 0..self.events[step].joins.len() {
            self.join(self.events[step].joins[i])?;
        }
        if let Some(w) = times.copy_wait_ns.get_mut(step) {
            *w = start.elapsed().as_nanos() as f64;
        }
        for i in 0..self.events[step].blocking.len() {
            times.blocking_ns += self.blocking_copy(self.events[step].blocking[i])?;
        }
        Ok(())
    }

    /// Runs the whole schedule once.
    pub fn step(&mut self) -> Result<PlanStepTimes, ExecError> {
        let steps = self.model.schedule().len();
        self.load_inputs()?;
        let mut times = PlanStepTimes {
            kernel_ns: vec![0.0; steps],
            copy_wait_ns: vec![0.0; steps],
            blocking_ns: 0.0,
            wall_ns: 0.0,
            dram_bytes: vec![0; steps],
        };
        let start = Instant::now();
        crate::as_launcher(|launcher| {
            self.arenas.keep_copies_off(launcher);
            for s in 0..steps {
                self.moves_before(s, &mut times)?;
                for i in 0..self.events[s].produced.len() {
                    self.placed(self.events[s].produced[i], 0)?;
                }
                for i in 0..self.events[s].launches.len() {
                    self.launch(self.events[s].launches[i])?;
                }
                (times.kernel_ns[s], times.dram_bytes[s]) = self.run_kernel(s)?;
                if let Some((t, at)) = self.loss
                    && at == s
                {
                    self.last_loss = self.read_f32(t, s)?;
                }
                for i in 0..self.events[s].frees.len() {
                    let t = self.events[s].frees[i];
                    self.release(t, self.plan.spans[t.index()].len() - 1)?;
                }
            }
            self.moves_before(steps, &mut times)
        })?;
        times.wall_ns = start.elapsed().as_nanos() as f64;
        Ok(times)
    }

    /// The model's loss after the last step, if it has one.
    pub fn loss(&self) -> Option<f32> {
        self.last_loss
    }

    fn read_f32(&mut self, t: TensorId, step: usize) -> Result<Option<f32>, ExecError> {
        let slot = self.slot(t, self.plan.span_at(t, step));
        let (r, _) = self.arenas.views(&[slot], &[]).map_err(pool_err(self.model, t))?;
        Ok(bytemuck::try_cast_slice::<u8, f32>(r[0]).ok().and_then(|v| v.first().copied()))
    }

    /// Warm-up steps, then timed steps.
    pub fn run(&mut self, options: &RunOptions) -> Result<PlanRunReport, ExecError> {
        if options.iterations == 0 {
            return Err(ExecError::NoIterations);
        }
        let clock = ClockInfo::measure();
        let mut steps = Vec::with_capacity(options.iterations);
        let mut losses = Vec::new();
        for i in 0..options.warmup + options.iterations {
            let times = self.step()?;
            losses.extend(self.loss());
            if i >= options.warmup {
                steps.push(times);
            }
        }
        Ok(self.report(clock, steps, losses))
    }

    /// The report on `steps`, measured by the caller with [`Self::step`].
    pub fn report(&self, clock: ClockInfo, steps: Vec<PlanStepTimes>, losses: Vec<f32>) -> PlanRunReport {
        let blocking = self.plan.moves.iter().filter(|m| m.kind == CopyKind::Blocking).count();
        PlanRunReport {
            clock,
            steps,
            losses,
            reserved_bytes: self.arenas.reserved(),
            peak_bytes: self.arenas.peaks(),
            blocking_moves: blocking,
            background_moves: self.plan.moves.len() - blocking,
            bytes_moved: self.plan.moves.iter().map(|m| self.model.tensor(m.tensor).bytes).sum(),
            emulated: self.emulated_pools_used(),
            pages: self.pools.pools().iter().map(placer_pools::Pool::page_tally).collect(),
            huge_page_bytes: self.arenas.huge_page_bytes(),
            copy_memcpy_ns_per_byte: self.arenas.memcpy_ns_per_byte(),
        }
    }

    fn emulated_pools_used(&self) -> Vec<EmulatedPoolUse> {
        self.pools
            .ids()
            .filter_map(|id| {
                let pool = self.pools.pool(id);
                let emulation = pool.emulation.as_ref()?;
                let tensors = self.plan.spans.iter().filter(|s| s.iter().any(|s| s.pool == id)).count();
                (tensors > 0).then(|| EmulatedPoolUse::new(pool, emulation, tensors))
            })
            .collect()
    }
}

fn pool_err(model: &Model, t: TensorId) -> impl FnOnce(PoolError) -> ExecError + '_ {
    move |source| ExecError::Pool { tensor: model.tensor(t).name.clone(), error: source }
}

/// As [`pool_err`], but the copy thread's own failures stay copy errors.
fn copy_err(model: &Model, t: TensorId) -> impl FnOnce(PoolError) -> ExecError + '_ {
    move |source| match source {
        PoolError::Copy { reason } => ExecError::Copy { reason },
        other => pool_err(model, t)(other),
    }
}

/// Sorts the plan into per-kernel events; every span after the first must be entered
/// by exactly one move.
fn events(model: &Model, plan: &ExecPlan) -> Result<Vec<Events>, ExecError> {
    let steps = model.schedule().len();
    let mut events = vec![Events::default(); steps + 1];
    let mut entered: Vec<Vec<bool>> = plan.spans.iter().map(|s| vec![false; s.len()]).collect();
    for (i, m) in plan.moves.iter().enumerate() {
        let slot = &mut entered[m.tensor.index()][m.to_span];
        if std::mem::replace(slot, true) && m.to_span != 0 {
            return Err(ExecError::Plan {
                reason: format!("two moves enter a span of '{}'", model.tensor(m.tensor).name),
            });
        }
        match m.kind {
            CopyKind::Blocking => events[m.before_step].blocking.push(i),
            CopyKind::Background => {
                events[m.before_step - 1].launches.push(i);
                events[m.before_step].joins.push(i);
            }
        }
    }
    // Blocking copies out of DRAM go first, each source freed once copied, so DRAM is
    // emptied before it is filled: the plan's layout counts on that order.
    for e in &mut events {
        e.blocking.sort_by_key(|&i| {
            let m = &plan.moves[i];
            let spans = &plan.spans[m.tensor.index()];
            let from = if m.to_span == 0 { spans.len() - 1 } else { m.to_span - 1 };
            spans[from].pool.index() != 0
        });
    }
    let liveness = placer_ir::Liveness::new(model);
    for (i, tensor) in model.tensors().iter().enumerate() {
        let t = TensorId(i as u32);
        if let Some(j) = entered[i].iter().skip(1).position(|e| !e) {
            return Err(ExecError::Plan { reason: format!("no move enters span {} of '{}'", j + 1, tensor.name) });
        }
        if tensor.role.is_persistent() {
            continue;
        }
        let range = liveness.ranges[i];
        if model.producer(t).is_some() {
            events[range.first].produced.push(t);
        }
        events[range.last].frees.push(t);
    }
    Ok(events)
}
