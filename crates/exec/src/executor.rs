//! The executor: owns one buffer per tensor, placed in a pool, and runs the schedule.
//!
//! Every tensor is allocated once, before the first step, and kept for the whole run:
//! simple, and it keeps allocation out of the timed region. (Allocating at first use and
//! freeing at last use, so that a pool holds only live tensors, comes with plans.)

use crate::ExecError;
use crate::clock::ClockInfo;
use crate::data::{Fill, fill_bytes, fill_plan};
use crate::invoke::{invoke, scratch_bytes};
use crate::runner::SharedRunner;
use placer_ir::ops::{Traffic, node_traffic};
use placer_ir::{DType, Model, NodeId, Op, TensorId};
use placer_pools::{Buffer, PoolId, PoolSet, busy_wait_ns, busy_wait_until};
use rayon::prelude::*;
use serde::Serialize;
use std::time::{Duration, Instant};

/// The pool of every tensor, indexed by tensor id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolAssignment(pub Vec<PoolId>);

impl PoolAssignment {
    pub fn all_in(model: &Model, pool: PoolId) -> PoolAssignment {
        PoolAssignment(vec![pool; model.tensors().len()])
    }
}

#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    /// Untimed steps first: caches, page tables and branch predictors warm up.
    pub warmup: usize,
    pub iterations: usize,
    pub seed: u64,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { warmup: 2, iterations: 10, seed: 0x5EED }
    }
}

/// Times of one step.
#[derive(Debug, Clone, Serialize)]
pub struct StepTimes {
    /// Kernel time in ns of each node, indexed by position in the schedule.
    pub kernel_ns: Vec<f64>,
    /// Wall time of the whole step in ns, including the executor's own overhead.
    pub wall_ns: f64,
    /// Of the kernel time, ns spent waiting for emulated pools (0 when none is used).
    pub emulated_wait_ns: f64,
}

/// Everything measured by [`Executor::run`].
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub clock: ClockInfo,
    pub warmup: usize,
    /// Timed steps only.
    pub steps: Vec<StepTimes>,
    /// The loss after every step, warm-up included, when the model has one.
    pub losses: Vec<f32>,
    /// (pool name, peak bytes in use) for every pool.
    pub pool_peaks: Vec<(String, u64)>,
    pub scratch_bytes: u64,
    /// (pool, device model, tensors placed there) for every emulated pool that held a
    /// tensor: when not empty, these times are emulated, not measured on that device.
    pub emulated: Vec<EmulatedPoolUse>,
}

#[derive(Debug, Clone, Serialize)]
pub struct EmulatedPoolUse {
    pub pool: String,
    pub device: String,
    pub tensors: usize,
    /// Where the pool's data really is (`numa bind to node 2 (pmem, kmem-DAX dax0.0)`).
    pub location: String,
}

impl EmulatedPoolUse {
    pub(crate) fn new(pool: &placer_pools::Pool, emulation: &placer_pools::Emulation, tensors: usize) -> Self {
        EmulatedPoolUse { pool: pool.name.clone(), device: emulation.label(), tensors, location: pool.location() }
    }

    /// `'pmem' as optane-dcpmm:additive (10 tensors; data via numa bind to node 2 (...))`,
    /// as every timing line names an emulated pool.
    pub fn describe(&self) -> String {
        format!("'{}' as {} ({} tensors; data via {})", self.pool, self.device, self.tensors, self.location)
    }
}

#[derive(Debug)]
pub struct Executor<'m> {
    model: &'m Model,
    pools: PoolSet,
    buffers: Vec<Option<Buffer>>,
    scratch: Buffer,
    loss: Option<TensorId>,
    /// Compulsory bytes per operand of every node, indexed by node id: what the
    /// emulated tier charges for.
    traffic: Vec<Vec<(TensorId, Traffic)>>,
    /// What a `rayon::broadcast` round trip costs here, measured once; emulated waits
    /// subtract it so they last what the formula says, not that plus the hand-shake.
    broadcast_ns: f64,
    /// Wake every pool thread before each kernel, outside its timing (profiling).
    warm_pool: bool,
    /// Another framework's kernels, where it has them ([`KernelRunner`]).
    runner: Option<SharedRunner>,
    /// How each tensor starts ([`fill_plan`]), kept because `hold` refills some per
    /// kernel a profile times.
    fills: Vec<Fill>,
    /// Per node, operands written out of every cache level before it runs, untimed
    /// ([`Executor::set_cold_reads`]); empty: none.
    cold_reads: Vec<Vec<TensorId>>,
}

/// The bytes one thread prepares at a time in [`Executor::as_in_a_step`]: a multiple
/// of the cache line, and large enough that handing it to a thread costs little.
const PREPARE_CHUNK: usize = 1 << 20;

impl<'m> Executor<'m> {
    /// Allocates every tensor in its pool and fills it deterministically from `seed`.
    pub fn new(model: &'m Model, pools: PoolSet, placement: &PoolAssignment, seed: u64) -> Result<Self, ExecError> {
        check_length(model, placement)?;
        let mut exec = Executor::holding_none(model, pools)?;
        for (t, &pool) in model.tensors().iter().zip(&placement.0) {
            let buffer = exec
                .pools
                .allocate(pool, t.bytes)
                .map_err(|source| ExecError::Pool { tensor: t.name.clone(), error: source })?;
            exec.buffers.push(Some(buffer));
        }
        exec.fill(seed)?;
        Ok(exec)
    }

    /// An executor holding none of `model`'s tensors (only the kernels' scratch) until
    /// [`Executor::hold`] allocates some: a kernel is then timed alone, in the memory its
    /// own operands take, however large the model's footprint.
    pub fn holding_none(model: &'m Model, mut pools: PoolSet) -> Result<Self, ExecError> {
        if let Some(t) =
            model.tensors().iter().find(|t| !matches!(t.dtype, DType::F32 | DType::I32 | DType::I64 | DType::U8))
        {
            return Err(ExecError::UnsupportedType { tensor: t.name.clone(), dtype: t.dtype });
        }
        let scratch_bytes = (0..model.nodes().len()).map(|n| scratch_bytes(model, NodeId(n as u32))).max().unwrap_or(0);
        let scratch = pools
            .allocate(PoolId(0), scratch_bytes)
            .map_err(|source| ExecError::Scratch { bytes: scratch_bytes, error: source })?;
        let loss = model.nodes().iter().find(|n| n.op == Op::SoftmaxCrossEntropy).map(|n| n.outputs[0]);
        let traffic = (0..model.nodes().len()).map(|n| node_traffic(model, NodeId(n as u32))).collect();
        let broadcast_ns = if pools.any_emulated() { broadcast_cost_ns() } else { 0.0 };
        Ok(Executor {
            model,
            pools,
            buffers: Vec::with_capacity(model.tensors().len()),
            scratch,
            loss,
            traffic,
            broadcast_ns,
            warm_pool: false,
            runner: None,
            fills: fill_plan(model),
            cold_reads: Vec::new(),
        })
    }

    /// Holds exactly `tensors`, each in its pool under `placement`; every other tensor's
    /// buffer is released, so the pools hold no more than these. A tensor already held in
    /// the same memory keeps its buffer and its contents, as between two repetitions of
    /// one kernel: consecutive picks of one node re-hold all of its operands, and
    /// refilling them was most of the time holding took. Another buffer held before, of
    /// the same length and in the same memory, is refilled from `seed` (as
    /// [`Executor::new`] fills it) instead of a fresh one being mapped, which the kernel
    /// would zero page by page; the rest are allocated and filled.
    pub fn hold(&mut self, tensors: &[TensorId], placement: &PoolAssignment, seed: u64) -> Result<(), ExecError> {
        check_length(self.model, placement)?;
        let mut tensors = tensors.to_vec();
        tensors.sort_unstable();
        tensors.dedup();
        let held = std::mem::take(&mut self.buffers);
        self.buffers.resize_with(self.model.tensors().len(), || None);
        // (tensor, buffer, whether its contents are another tensor's)
        let mut kept: Vec<(TensorId, Buffer, bool)> = Vec::new();
        let mut spare: Vec<Buffer> = Vec::new();
        for (i, buffer) in held.into_iter().enumerate() {
            let Some(buffer) = buffer else { continue };
            let t = TensorId(i as u32);
            if tensors.binary_search(&t).is_ok() && self.pools.same_memory(buffer.pool(), placement.0[i]) {
                kept.push((t, buffer, false));
            } else {
                spare.push(buffer);
            }
        }
        for &t in &tensors {
            if kept.iter().any(|(k, ..)| *k == t) {
                continue;
            }
            let (pool, bytes) = (placement.0[t.index()], self.model.tensor(t).bytes);
            let pools = &self.pools;
            if let Some(i) =
                spare.iter().position(|b| b.len_bytes() as u64 == bytes && pools.same_memory(b.pool(), pool))
            {
                kept.push((t, spare.swap_remove(i), true));
            }
        }
        // Through the pools, so their accounting (and a pool's capacity) sees them go,
        // before anything new is allocated.
        for buffer in spare {
            self.pools.free(buffer);
        }
        let mut refill = Vec::with_capacity(kept.len());
        let mut kept = kept.into_iter();
        while let Some((t, buffer, foreign)) = kept.next() {
            match self.pools.retag(buffer, placement.0[t.index()]) {
                Ok(buffer) => self.buffers[t.index()] = Some(buffer),
                Err((buffer, source)) => {
                    self.pools.free(buffer);
                    kept.for_each(|(_, b, _)| self.pools.free(b));
                    return Err(ExecError::Pool { tensor: self.model.tensor(t).name.clone(), error: source });
                }
            }
            if foreign {
                refill.push(t);
            }
        }
        let mut fresh = Vec::with_capacity(tensors.len());
        for &t in &tensors {
            if self.buffers[t.index()].is_some() {
                continue;
            }
            let tensor = self.model.tensor(t);
            let buffer = self
                .pools
                .allocate(placement.0[t.index()], tensor.bytes)
                .map_err(|source| ExecError::Pool { tensor: tensor.name.clone(), error: source })?;
            self.buffers[t.index()] = Some(buffer);
            fresh.push(t);
        }
        self.fill_tensors(&refill, seed, true)?;
        self.fill_tensors(&fresh, seed, false)
    }

    /// Puts node `n`'s operands in the cache state a training step leaves them in just
    /// before it runs `n`: what a kernel of the step wrote (an input with a producer) is
    /// rewritten line by line, so the caches hold what fits of it, as its producer leaves
    /// it; everything else (weights, the step's inputs, optimizer state, the outputs and
    /// in-place updates, whose bytes an arena hands out cold) is written out of every
    /// cache level. False where this architecture cannot evict.
    pub fn as_in_a_step(&mut self, n: NodeId) -> Result<bool, ExecError> {
        let model = self.model;
        let node = model.node(n);
        let (fresh, cold): (Vec<TensorId>, Vec<TensorId>) = node
            .operands()
            .into_iter()
            .partition(|&t| node.inputs.contains(&t) && !node.updates.contains(&t) && model.producer(t).is_some());
        // Both cores prepare a large operand, as both wrote it in the step: one thread
        // left half its time idle, and its lines in one core's cache.
        let done = self.evict(&cold)?;
        for &t in &fresh {
            self.buffer_mut(t)?.bytes_mut().par_chunks_mut(PREPARE_CHUNK).for_each(|chunk| {
                // One store per cache line brings the line in, dirty, as a producer's
                // write does; black_box keeps the store of an unchanged byte from being
                // elided.
                for i in (0..chunk.len()).step_by(64) {
                    chunk[i] = std::hint::black_box(chunk[i]);
                }
            });
        }
        Ok(done)
    }

    /// Writes `tensors` out of every cache level, both cores at once; false where this
    /// architecture cannot.
    fn evict(&self, tensors: &[TensorId]) -> Result<bool, ExecError> {
        let mut done = true;
        for &t in tensors {
            let buffer = self.buffers[t.index()].as_ref().ok_or_else(|| missing(&self.model.tensor(t).name))?;
            done &= buffer
                .bytes()
                .par_chunks(PREPARE_CHUNK)
                .map(placer_pools::evict_from_cache)
                .reduce(|| true, |a, b| a && b);
        }
        Ok(done)
    }

    /// Before each kernel that [`Executor::step_nodes`] runs, untimed, writes
    /// `cold[node]` out of every cache level: the operands a training step leaves in
    /// memory ([`placer_ir::analysis::cold_reads`]), which a step of a few picked kernels
    /// would otherwise find in cache. Empty: none.
    pub fn set_cold_reads(&mut self, cold: Vec<Vec<TensorId>>) {
        self.cold_reads = cold;
    }

    fn fill(&mut self, seed: u64) -> Result<(), ExecError> {
        let all: Vec<TensorId> = (0..self.model.tensors().len()).map(|i| TensorId(i as u32)).collect();
        self.fill_tensors(&all, seed, false)
    }

    /// Each tensor draws from its own generator (seeded from `seed` and its index), so a
    /// subset can be refilled to exactly its starting contents.
    fn fill_tensors(&mut self, tensors: &[TensorId], seed: u64, write_zeros: bool) -> Result<(), ExecError> {
        for &t in tensors {
            let fill = self.fills[t.index()];
            fill_bytes(fill, t, seed, self.buffer_mut(t)?.bytes_mut(), write_zeros);
        }
        Ok(())
    }

    /// Puts every tensor that a step updates in place (weights, optimiser state) back to
    /// its starting contents, so repeated runs (profiling passes) compute on the same
    /// data instead of a model that has trained for hundreds of steps.
    pub fn reset_state(&mut self, seed: u64) -> Result<(), ExecError> {
        let mut updated: Vec<TensorId> = self.model.nodes().iter().flat_map(|n| n.updates.iter().copied()).collect();
        updated.sort_unstable();
        updated.dedup();
        self.fill_tensors(&updated, seed, true)
    }

    /// Moves every tensor whose pool differs from `placement`; returns how many moved.
    /// Between pools that share memory (an emulated pool and the DRAM it lives in) only
    /// the accounting moves, so the bytes keep their addresses. On failure the tensors
    /// moved so far stay moved and the error names the tensor.
    pub fn set_placement(&mut self, placement: &PoolAssignment) -> Result<usize, ExecError> {
        check_length(self.model, placement)?;
        let mut moved = 0;
        for (i, &pool) in placement.0.iter().enumerate() {
            let t = TensorId(i as u32);
            let Some(current) = self.buffers[i].as_ref().map(Buffer::pool) else {
                return Err(missing(&self.model.tensor(t).name));
            };
            if current == pool {
                continue;
            }
            if self.pools.same_memory(current, pool) {
                self.retag_tensor(t, pool)?;
            } else {
                self.move_tensor(t, pool)?;
            }
            moved += 1;
        }
        Ok(moved)
    }

    fn buffer_mut(&mut self, t: TensorId) -> Result<&mut Buffer, ExecError> {
        let name = &self.model.tensor(t).name;
        self.buffers[t.index()].as_mut().ok_or_else(|| missing(name))
    }

    pub fn model(&self) -> &Model {
        self.model
    }

    pub fn pools(&self) -> &PoolSet {
        &self.pools
    }

    /// The current contents of an f32 tensor.
    pub fn read_f32(&self, t: TensorId) -> Result<&[f32], ExecError> {
        let tensor = self.model.tensor(t);
        let buffer = self.buffers[t.index()].as_ref().ok_or_else(|| missing(&tensor.name))?;
        buffer.as_f32().map_err(|source| ExecError::Pool { tensor: tensor.name.clone(), error: source })
    }

    /// The current contents of a tensor as bytes (a u8 mask, or any tensor's raw data).
    pub fn read_bytes(&self, t: TensorId) -> Result<&[u8], ExecError> {
        let tensor = self.model.tensor(t);
        let buffer = self.buffers[t.index()].as_ref().ok_or_else(|| missing(&tensor.name))?;
        Ok(&buffer.bytes()[..tensor.bytes as usize])
    }

    /// The model's loss after the last step, if it has one.
    pub fn loss(&self) -> Result<Option<f32>, ExecError> {
        match self.loss {
            Some(t) => Ok(self.read_f32(t)?.first().copied()),
            None => Ok(None),
        }
    }

    fn retag_tensor(&mut self, t: TensorId, to: PoolId) -> Result<(), ExecError> {
        let name = self.model.tensor(t).name.clone();
        let buffer = self.buffers[t.index()].take().ok_or_else(|| missing(&name))?;
        match self.pools.retag(buffer, to) {
            Ok(b) => {
                self.buffers[t.index()] = Some(b);
                Ok(())
            }
            Err((original, source)) => {
                self.buffers[t.index()] = Some(original);
                Err(ExecError::Pool { tensor: name, error: source })
            }
        }
    }

    /// Moves a tensor to another pool between kernels; returns how long the copy took.
    pub fn move_tensor(&mut self, t: TensorId, to: PoolId) -> Result<Duration, ExecError> {
        let name = self.model.tensor(t).name.clone();
        let buffer = self.buffers[t.index()].take().ok_or_else(|| missing(&name))?;
        let start = Instant::now();
        match self.pools.move_to(buffer, to) {
            Ok(moved) => {
                self.buffers[t.index()] = Some(moved);
                Ok(start.elapsed())
            }
            Err((original, source)) => {
                self.buffers[t.index()] = Some(original);
                Err(ExecError::Pool { tensor: name, error: source })
            }
        }
    }

    /// The wait the emulated pools charge for one run of node `n` that took `kernel_ns`
    /// (docs/hosts.md, emulated tiers): each operand's bytes read and written, at its
    /// pool's wait model.
    pub fn emulated_ns(&self, n: NodeId, kernel_ns: f64) -> f64 {
        let operands = self.traffic[n.index()].iter().filter_map(|(t, traffic)| {
            let pool = self.buffers[t.index()].as_ref()?.pool();
            Some((pool, traffic.read, traffic.written))
        });
        self.pools.kernel_wait_ns(operands, kernel_ns)
    }

    /// With `true`, every pool thread is woken before each kernel, outside the kernel's
    /// timing, so a parallel kernel never pays for waking threads that parked during its
    /// predecessor. Profiling sets it: a kernel's time should not depend on what ran
    /// before it (a short serial kernel, an emulated wait), which differs between a
    /// single-config and a simultaneous pass.
    pub fn set_warm_pool(&mut self, warm: bool) {
        self.warm_pool = warm;
    }

    /// Runs nodes with `runner`'s kernels where it has one, placer's elsewhere.
    pub fn set_runner(&mut self, runner: Option<SharedRunner>) {
        self.runner = runner;
    }

    /// Runs one node's kernel, then waits what emulated pools charge for it; returns
    /// (kernel time including the wait, the wait), in ns.
    fn run_node(&mut self, n: NodeId) -> Result<(f64, f64), ExecError> {
        let model = self.model;
        let node = model.node(n);
        // Outputs and in-place updates are lent out mutably; validation guarantees they
        // are distinct from the inputs, which stay borrowed immutably.
        let mut written: Vec<(TensorId, Buffer)> = Vec::with_capacity(node.updates.len() + node.outputs.len());
        for &t in node.updates.iter().chain(&node.outputs) {
            let buffer = self.buffers[t.index()].take().ok_or_else(|| missing(&model.tensor(t).name))?;
            written.push((t, buffer));
        }
        // Another framework's kernels do not run on this pool: woken, its threads would
        // only spin beside them.
        if self.warm_pool && self.runner.is_none() {
            rayon::broadcast(|_| ());
        }
        let start = Instant::now();
        let result = self.invoke(n, &mut written);
        for (t, buffer) in written {
            self.buffers[t.index()] = Some(buffer);
        }
        let kernel_ns = result?;
        let wait = wait_on_every_thread(self.emulated_ns(n, kernel_ns), self.broadcast_ns);
        let total = charged_ns(start, kernel_ns, wait, self.runner.is_some());
        Ok((total, wait))
    }

    fn invoke(&mut self, n: NodeId, written: &mut [(TensorId, Buffer)]) -> Result<f64, ExecError> {
        let model = self.model;
        let inputs = model
            .node(n)
            .inputs
            .iter()
            .map(|&t| self.buffers[t.index()].as_ref().map(Buffer::bytes).ok_or_else(|| missing(&model.tensor(t).name)))
            .collect::<Result<Vec<_>, _>>()?;
        let outs = written.iter_mut().map(|(_, b)| b.bytes_mut()).collect();
        let scratch_bytes = self.scratch.len_bytes() as u64;
        let scratch =
            self.scratch.as_f32_mut().map_err(|source| ExecError::Scratch { bytes: scratch_bytes, error: source })?;
        invoke(model, n, &inputs, outs, scratch, self.runner.as_ref())
    }

    /// Runs the whole schedule once.
    pub fn step(&mut self) -> Result<StepTimes, ExecError> {
        let model = self.model;
        self.step_nodes(model.schedule())
    }

    /// Runs only `nodes`, in the order given, on whatever their operands hold now;
    /// `kernel_ns` is indexed by position in `nodes`. The profiler times a pass's picked
    /// kernels this way once a whole step has filled every tensor with what training
    /// computes: the other kernels' work would only be thrown away.
    pub fn step_nodes(&mut self, nodes: &[NodeId]) -> Result<StepTimes, ExecError> {
        let start = Instant::now();
        let mut kernel_ns = Vec::with_capacity(nodes.len());
        let mut emulated_wait_ns = 0.0;
        // The schedule runs on a worker of the kernels' thread pool, so a parallel
        // kernel starts on this thread at once instead of handing off to the pool and
        // sleeping until it is done; pinned to its core, as a plan's steps run, so a
        // profile times kernels as runs launch them.
        crate::as_launcher(|_| {
            for &n in nodes {
                if let Some(cold) = self.cold_reads.get(n.index()).filter(|c| !c.is_empty()) {
                    self.evict(cold)?;
                }
                let (ns, wait) = self.run_node(n)?;
                kernel_ns.push(ns);
                emulated_wait_ns += wait;
            }
            Ok::<(), ExecError>(())
        })?;
        Ok(StepTimes { kernel_ns, wall_ns: start.elapsed().as_nanos() as f64, emulated_wait_ns })
    }

    /// Warm-up steps, then timed steps; the loss is read after every step.
    pub fn run(&mut self, options: &RunOptions) -> Result<RunReport, ExecError> {
        if options.iterations == 0 {
            return Err(ExecError::NoIterations);
        }
        let clock = ClockInfo::measure();
        let mut losses = Vec::new();
        let mut steps = Vec::with_capacity(options.iterations);
        for i in 0..options.warmup + options.iterations {
            let times = self.step()?;
            if let Some(loss) = self.loss()? {
                losses.push(loss);
            }
            if i >= options.warmup {
                steps.push(times);
            }
        }
        Ok(RunReport {
            clock,
            warmup: options.warmup,
            steps,
            losses,
            pool_peaks: self.pools.pools().iter().map(|p| (p.name.clone(), p.peak())).collect(),
            scratch_bytes: self.scratch.len_bytes() as u64,
            emulated: self.emulated_pools_in_use(),
        })
    }

    /// Emulated pools holding at least one tensor now.
    pub fn emulated_pools_in_use(&self) -> Vec<EmulatedPoolUse> {
        self.pools
            .ids()
            .filter_map(|id| {
                let pool = self.pools.pool(id);
                let emulation = pool.emulation.as_ref()?;
                let tensors = self.buffers.iter().flatten().filter(|b| b.pool() == id).count();
                (tensors > 0).then(|| EmulatedPoolUse::new(pool, emulation, tensors))
            })
            .collect()
    }
}

/// A kernel's time with its emulated `wait`. With a wait, placer's own kernels are timed
/// over the whole span, so the figure is what the kernel would take on the slow device;
/// without one, the kernel's own tight timing stands. A runner's kernel adds the wait to
/// the time it measured itself: the span would also hold its calling overhead (handing
/// the node to the framework's thread, building its tensors over the operands), which
/// its kernels never pay in training.
pub(crate) fn charged_ns(start: Instant, kernel_ns: f64, wait: f64, runner: bool) -> f64 {
    match (wait > 0.0, runner) {
        (false, _) => kernel_ns,
        (true, false) => start.elapsed().as_nanos() as f64,
        (true, true) => kernel_ns + wait,
    }
}

/// Busy-waits `ns` on every thread of the kernels' pool (all of them, this one
/// included, in one synchronous broadcast); returns the ns waited. A slow device stalls
/// every thread of a parallel kernel, and keeping the pool busy also keeps it awake, as
/// back-to-back kernels would: parked threads would charge the next kernel for waking
/// them, which real slow memory does not. Waits shorter than the broadcast itself spin
/// on this thread only. (An asynchronous `spawn_broadcast` was tried first: its leftover
/// jobs made later parallel kernels up to 2x slower.)
pub(crate) fn wait_on_every_thread(ns: f64, broadcast_ns: f64) -> f64 {
    if ns <= 0.0 {
        return 0.0;
    }
    if ns <= 2.0 * broadcast_ns {
        return busy_wait_ns(ns).as_nanos() as f64;
    }
    let start = Instant::now();
    let deadline = start + Duration::from_nanos((ns - broadcast_ns) as u64);
    rayon::broadcast(|_| busy_wait_until(deadline));
    start.elapsed().as_nanos() as f64
}

/// Median cost of an empty broadcast issued from inside the pool, as steps issue them.
pub(crate) fn broadcast_cost_ns() -> f64 {
    rayon::scope(|_| {
        let mut samples: Vec<f64> = (0..64)
            .map(|_| {
                let start = Instant::now();
                rayon::broadcast(|_| ());
                start.elapsed().as_nanos() as f64
            })
            .collect();
        samples.sort_by(f64::total_cmp);
        samples[samples.len() / 2]
    })
}

fn check_length(model: &Model, placement: &PoolAssignment) -> Result<(), ExecError> {
    if placement.0.len() != model.tensors().len() {
        return Err(ExecError::AssignmentLength { given: placement.0.len(), expected: model.tensors().len() });
    }
    Ok(())
}

fn missing(name: &str) -> ExecError {
    ExecError::NoBuffer { tensor: name.to_string() }
}
