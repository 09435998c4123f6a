//! What a background copy costs the kernels beside it, measured on the model's own
//! kernels, one op at a time.
//!
//! A plan's background copy runs on its own thread while kernels run. On a host with few
//! cores that thread takes CPU time (and memory bandwidth) from them, in two parts:
//!
//! - **a fixed part, paid per copy whatever its size**: waking the copy thread takes the
//!   core of one of the kernel's workers. A copy of no bytes cost BERT-tiny b8's parallel
//!   kernels 12-80 µs; a kernel running on one thread lost about 5 µs.
//! - **a share of the copy's CPU time**: a GEMM split evenly over every core waits for
//!   the core the memcpy took, a short memory-bound kernel barely notices.
//!
//! So the solver charges a copy beside a kernel
//!
//! ```text
//! fixed(op) + share(op) × min(the copy's CPU time, the kernel's all-DRAM time)
//! ```
//!
//! where the copy's CPU time is its bytes at the host's memcpy speed from memory to memory
//! (an emulated pool's wait is a sleep and costs no CPU), and the cap says a kernel cannot lose more than it
//! overlaps. Both are measured here for every op of the model from pairs of one of its
//! kernels alone and with a copy handed to a copy thread just before it (as the plan
//! executor hands its copies), alternating:
//!
//! - `fixed` on the op's shortest kernel of at least [`FIXED_MIN_NS`] (the short kernels
//!   are where it matters), with a copy of no bytes, [`FIXED_PAIRS`] pairs;
//! - `share` on the op's longest kernel, with a copy sized to take about half the
//!   kernel's time, where the loss is largest against the noise and below the cap, less
//!   the op's fixed part, [`PAIRS`] pairs;
//! - the same share again for each other signature of the model's longest-running
//!   kernels ([`SIGNATURE_MIN_NS`], [`MAX_SIGNATURES`]), which the solver charges in
//!   place of its op's. Kernels of one op split their work differently: BERT-base's
//!   attention products run one small product per task, and lost 0.2-0.55 of a copy's
//!   CPU time beside it where the op's longest product, split evenly over the cores,
//!   lost all of it; charged the op's share, those kernels were predicted 18-27% over
//!   their time in the plan.
//!
//! Every measured copy streams from and to memory, its buffers evicted from the caches
//! beforehand (untimed), as a plan's tensor is when it moves: a copy over cached buffers
//! takes the core but leaves the memory bus to the kernel, and on this project's VM it
//! cost torch's kernels half what the plan's real copies did.
//!
//! A plan's copy to or from an emulated pool wakes its thread a second time, when the
//! emulated wait ends, often beside a later kernel; that is not measured here.

use crate::ProfileError;
use crate::engine::Engine;
use crate::record::{Interference, KernelPairs, OpInterference, SignatureInterference};
use crate::tasks::signature;
use placer_exec::{PoolAssignment, Stats};
use placer_ir::{Model, NodeId};
use placer_pools::{CopyCores, evict_from_cache};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Alone/with pairs per op.
pub const PAIRS: usize = 11;
/// The copy that times the host's memcpy: well past any last-level cache this project
/// has met once its buffers are evicted.
const SPEED_COPY: usize = 64 << 20;
/// The copy thread's largest buffers; a longer copy repeats over them.
const MAX_BUFFER: usize = 128 << 20;
/// The smallest copy measured: smaller ones are timer noise.
const MIN_COPY: usize = 64 << 10;
/// The largest: a kernel of seconds gets a copy of about a second at most.
const MAX_COPY: usize = 8 * MAX_BUFFER;
/// The shortest kernel the fixed part is measured on.
pub const FIXED_MIN_NS: f64 = 20e3;
/// Alone/with pairs for the fixed part: it is tens of µs, about the noise of one pair,
/// and its kernel is short.
pub const FIXED_PAIRS: usize = 31;

/// Kernels shorter than this keep their op's share: beside them a copy costs mostly the
/// fixed part.
pub const SIGNATURE_MIN_NS: f64 = 250e3;
/// At most this many signatures get a share of their own, those with the most time in a
/// step first: the calibration of a net with hundreds of shapes (DenseNet-264) stays
/// within about a minute.
pub const MAX_SIGNATURES: usize = 48;

/// Measures every op of `model` on `engine` in the placement `base`, each op's longest
/// node by `reference_ns`, then the longest-running other signatures of at least
/// [`SIGNATURE_MIN_NS`] (up to [`MAX_SIGNATURES`]). The engine holds every tensor
/// (resident), or each measured kernel's operands alone (isolated) when the footprint
/// does not fit: a kernel repeated alone leaves its operands in cache as a repeated
/// resident kernel does.
pub fn measure(
    engine: &mut Engine<'_>,
    model: &Model,
    base: &PoolAssignment,
    reference_ns: &[f64],
) -> Result<Interference, ProfileError> {
    let started = Instant::now();
    let time_of = |n: NodeId| reference_ns.get(n.index()).copied().unwrap_or(0.0);
    // Per op: its longest node, and its shortest of at least FIXED_MIN_NS.
    let mut nodes: BTreeMap<String, (NodeId, Option<NodeId>)> = BTreeMap::new();
    for &n in model.schedule() {
        let entry = nodes.entry(model.node(n).op.to_string()).or_insert((n, None));
        if time_of(n) > time_of(entry.0) {
            entry.0 = n;
        }
        if time_of(n) >= FIXED_MIN_NS && entry.1.is_none_or(|s| time_of(n) < time_of(s)) {
            entry.1 = Some(n);
        }
    }
    // As a plan runs: the pool threads are not woken before each kernel, since that
    // wake-up (outside the timing) would wait for the core the copy holds and hide part
    // of the loss. And as a plan's step runs (`placer_exec::PlanExecutor::step`): the
    // kernels launched from a worker of the pool pinned to its core, the copy thread kept
    // off that core.
    engine.set_warm_pool(false);
    let measured = placer_exec::as_launcher(|launcher| {
        let copier = CopyBench::start(launcher)?;
        // An untimed copy grows the buffers and faults them in.
        copier.copy(SPEED_COPY)?;
        let alone: Vec<f64> = (0..5)
            .map(|_| {
                copier.evict()?;
                copier.copy(SPEED_COPY).map(|d| d.as_nanos() as f64 / SPEED_COPY as f64)
            })
            .collect::<Result<_, _>>()?;
        let memcpy_ns_per_byte = median(&alone);
        let mut ops = Vec::with_capacity(nodes.len());
        for (op, &(longest, short)) in &nodes {
            let short = short.unwrap_or(longest);
            ops.push(measure_op(engine, model, base, op, [longest, short], memcpy_ns_per_byte, &copier)?);
        }
        let mut signatures = Vec::new();
        let longest: Vec<NodeId> = nodes.values().map(|&(n, _)| n).collect();
        for (signature, n) in heavy_signatures(model, reference_ns, &longest) {
            let op = model.node(n).op.to_string();
            let fixed_ns = ops.iter().find(|o| o.op == op).map_or(0.0, |o| o.fixed_ns);
            let (share_pairs, copy_bytes, share) =
                share_of(engine, model, base, n, fixed_ns, memcpy_ns_per_byte, &copier)?;
            signatures.push(SignatureInterference { signature, op, share_pairs, copy_bytes, share });
        }
        Ok::<_, ProfileError>((memcpy_ns_per_byte, ops, signatures))
    });
    engine.set_warm_pool(true);
    let (memcpy_ns_per_byte, ops, signatures) = measured?;
    Ok(Interference {
        memcpy_ns_per_byte,
        pairs: PAIRS as u32,
        ops,
        signatures,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The signatures that get a share of their own, each with its first node in the
/// schedule: kernels of at least [`SIGNATURE_MIN_NS`] whose signature is not that of an
/// op's longest node (`longest`, measured with its op), by their total time in a step,
/// most first, at most [`MAX_SIGNATURES`].
fn heavy_signatures(model: &Model, reference_ns: &[f64], longest: &[NodeId]) -> Vec<(u64, NodeId)> {
    let time_of = |n: NodeId| reference_ns.get(n.index()).copied().unwrap_or(0.0);
    let measured: Vec<u64> = longest.iter().map(|&n| signature(model, n)).collect();
    // signature -> (first node, total ns)
    let mut by_signature: BTreeMap<u64, (NodeId, f64)> = BTreeMap::new();
    for &n in model.schedule() {
        if time_of(n) < SIGNATURE_MIN_NS {
            continue;
        }
        let s = signature(model, n);
        if !measured.contains(&s) {
            by_signature.entry(s).or_insert((n, 0.0)).1 += time_of(n);
        }
    }
    let mut heavy: Vec<(u64, NodeId, f64)> = by_signature.into_iter().map(|(s, (n, t))| (s, n, t)).collect();
    heavy.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
    heavy.into_iter().take(MAX_SIGNATURES).map(|(s, n, _)| (s, n)).collect()
}

/// What the copy thread is handed.
#[derive(Debug, Clone, Copy)]
enum Job {
    /// A memcpy of this many bytes.
    Copy(usize),
    /// Write the buffers back and out of the caches, so that the next copy streams
    /// from and to memory.
    Evict,
}

/// A copy thread with two DRAM buffers of its own, as a plan's copy thread memcpys
/// before it sleeps an emulated pool's wait, kept off the launcher's core as a plan's is.
///
/// A plan's copy moves a tensor written or read long before, which is in memory rather
/// than in cache, so its memcpy loads the memory bus as well as the core: on this
/// project's VM, a cached copy cost torch's kernels half what the plan's real copies did.
/// So the buffers grow to the largest copy handed over (up to [`MAX_BUFFER`] each;
/// longer copies repeat over them), and [`CopyBench::evict`] empties the caches of them
/// between measurements. Dropping it stops the thread.
#[derive(Debug)]
pub struct CopyBench {
    jobs: Option<Sender<Job>>,
    finished: Receiver<Duration>,
    thread: Option<JoinHandle<()>>,
}

impl CopyBench {
    /// Starts the thread, kept off core `launcher` (from [`placer_exec::as_launcher`]).
    pub fn start(launcher: Option<usize>) -> Result<CopyBench, ProfileError> {
        let (jobs, inbox) = channel::<Job>();
        let (done, finished) = channel::<Duration>();
        let thread = std::thread::Builder::new()
            .name("placer-copy-bench".into())
            .spawn(move || {
                CopyCores::of_this_process().keep_off(launcher);
                let (mut src, mut dst): (Vec<u8>, Vec<u8>) = (Vec::new(), Vec::new());
                // How much of the buffers the copies since the last eviction touched.
                let mut touched = 0;
                for job in inbox {
                    let start = Instant::now();
                    match job {
                        Job::Copy(bytes) => {
                            let wanted = bytes.min(MAX_BUFFER);
                            if src.len() < wanted {
                                // Callers grow the buffers with an untimed copy first.
                                (src, dst) = (vec![1u8; wanted], vec![0u8; wanted]);
                            }
                            touched = touched.max(wanted);
                            let mut left = bytes;
                            while left > 0 {
                                let n = left.min(src.len());
                                dst[..n].copy_from_slice(&src[..n]);
                                black_box(&dst[..n]);
                                left -= n;
                            }
                        }
                        Job::Evict => {
                            evict_from_cache(&src[..touched]);
                            evict_from_cache(&dst[..touched]);
                            touched = 0;
                        }
                    }
                    if done.send(start.elapsed()).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| ProfileError::Usage { reason: format!("cannot start a copy thread: {e}") })?;
        Ok(CopyBench { jobs: Some(jobs), finished, thread: Some(thread) })
    }

    /// Hands the thread a copy of `bytes` and returns at once.
    pub fn hand(&self, bytes: usize) -> Result<(), ProfileError> {
        self.send(Job::Copy(bytes))
    }

    /// Waits for the oldest copy handed over, and says how long it took.
    pub fn done(&self) -> Result<Duration, ProfileError> {
        self.finished.recv().map_err(|_| thread_gone())
    }

    /// A copy of `bytes`, start to finish.
    pub fn copy(&self, bytes: usize) -> Result<Duration, ProfileError> {
        self.hand(bytes)?;
        self.done()
    }

    /// Empties the caches of the thread's buffers, and waits until that is done, so that
    /// the next copy starts from memory as a plan's does. Call it outside any timing: it
    /// takes the copy thread's core for about as long as a copy.
    pub fn evict(&self) -> Result<(), ProfileError> {
        self.send(Job::Evict)?;
        self.done().map(drop)
    }

    /// Grows the buffers to a copy of `bytes` and empties the caches of them, untimed,
    /// before copies of that size are timed.
    pub fn prepare(&self, bytes: usize) -> Result<(), ProfileError> {
        if bytes > 0 {
            self.copy(bytes.min(MAX_BUFFER))?;
            self.evict()?;
        }
        Ok(())
    }

    /// One run of `kernel`, beside a copy of `bytes` handed over just before it when
    /// `beside`: its time from the hand-over, or where it would be, to the kernel's end
    /// (as a plan's step pays for whatever the hand-over costs the launcher), and the
    /// copy's time. The copy's buffers are then emptied of the caches, untimed, so that
    /// the next copy starts from memory.
    pub fn time<E: From<ProfileError>>(
        &self,
        bytes: usize,
        beside: bool,
        kernel: impl FnOnce() -> Result<(), E>,
    ) -> Result<(f64, Option<f64>), E> {
        let start = Instant::now();
        if beside {
            self.hand(bytes)?;
        }
        kernel()?;
        let ns = start.elapsed().as_nanos() as f64;
        if !beside {
            return Ok((ns, None));
        }
        let copy_ns = self.done()?.as_nanos() as f64;
        if bytes > 0 {
            self.evict()?;
        }
        Ok((ns, Some(copy_ns)))
    }

    /// Medians of `rounds` triples of `kernel` ([`CopyBench::time`]): alone, beside a
    /// copy of `bytes`, and alone again (the noise floor). `before` runs, untimed, before
    /// each timing. For the examples that check the calibration against kernels and
    /// copies it did not measure.
    pub fn triples<E: From<ProfileError>>(
        &self,
        bytes: usize,
        rounds: usize,
        mut before: impl FnMut(),
        mut kernel: impl FnMut() -> Result<(), E>,
    ) -> Result<[f64; 3], E> {
        self.prepare(bytes)?;
        let mut samples = [Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..rounds {
            for (k, beside) in [false, true, false].into_iter().enumerate() {
                before();
                samples[k].push(self.time(bytes, beside, &mut kernel)?.0);
            }
        }
        Ok(samples.map(|s| median(&s)))
    }

    fn send(&self, job: Job) -> Result<(), ProfileError> {
        self.jobs.as_ref().ok_or_else(thread_gone)?.send(job).map_err(|_| thread_gone())
    }
}

impl Drop for CopyBench {
    fn drop(&mut self) {
        // Closing the queue stops the thread after the copies handed over.
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One op's two measurements, `[longest, short]`, their copies handed to `copier`.
fn measure_op(
    engine: &mut Engine<'_>,
    model: &Model,
    base: &PoolAssignment,
    op: &str,
    [longest, short]: [NodeId; 2],
    memcpy_ns_per_byte: f64,
    copier: &CopyBench,
) -> Result<OpInterference, ProfileError> {
    engine.ready(short, base)?;
    let fixed_pairs = pairs_of(engine, model, short, 0, FIXED_PAIRS, copier)?;
    let fixed_ns = fixed_pairs.with_ns - fixed_pairs.alone_ns;
    let (share_pairs, copy_bytes, share) =
        share_of(engine, model, base, longest, fixed_ns, memcpy_ns_per_byte, copier)?;
    Ok(OpInterference { op: op.to_string(), share, fixed_pairs, fixed_ns, share_pairs, copy_bytes })
}

/// Node `n` beside a copy sized to take about half its time, where the loss is largest
/// against the noise and below the cap: its pairs, the copy's bytes, and the share of the
/// copy's CPU time it lost past the op's fixed part `fixed_ns`.
fn share_of(
    engine: &mut Engine<'_>,
    model: &Model,
    base: &PoolAssignment,
    n: NodeId,
    fixed_ns: f64,
    memcpy_ns_per_byte: f64,
    copier: &CopyBench,
) -> Result<(KernelPairs, u64, f64), ProfileError> {
    engine.ready(n, base)?;
    let warm: Vec<f64> = (0..4).map(|_| engine.step(&[n]).map(|t| t[0])).collect::<Result<_, _>>()?;
    let bytes = ((median(&warm[1..]) / 2.0 / memcpy_ns_per_byte) as usize).clamp(MIN_COPY, MAX_COPY);
    let pairs = pairs_of(engine, model, n, bytes, PAIRS, copier)?;
    let cpu_ns = (bytes as f64 * memcpy_ns_per_byte).min(pairs.alone_ns);
    let share = (pairs.with_ns - pairs.alone_ns - fixed_ns.max(0.0)) / cpu_ns.max(1.0);
    Ok((pairs, bytes as u64, share))
}

/// `pairs` pairs of `n` alone and beside a copy of `bytes`, alternating.
fn pairs_of(
    engine: &mut Engine<'_>,
    model: &Model,
    n: NodeId,
    bytes: usize,
    pairs: usize,
    copier: &CopyBench,
) -> Result<KernelPairs, ProfileError> {
    let nodes = [n];
    engine.step(&nodes)?;
    copier.prepare(bytes)?;
    let (mut alone, mut with, mut copies) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..pairs {
        alone.push(copier.time(bytes, false, || engine.step(&nodes).map(drop))?.0);
        let (ns, copy_ns) = copier.time(bytes, true, || engine.step(&nodes).map(drop))?;
        with.push(ns);
        copies.extend(copy_ns);
    }
    Ok(KernelPairs {
        node: model.node(n).name.clone(),
        pairs: pairs as u32,
        alone_ns: median(&alone),
        with_ns: median(&with),
        copy_ns: median(&copies),
    })
}

fn median(samples: &[f64]) -> f64 {
    Stats::of(samples).map_or(f64::NAN, |s| s.median)
}

fn thread_gone() -> ProfileError {
    ProfileError::Usage { reason: "the interference calibration's copy thread stopped".into() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Protocol, Steps};
    use placer_pools::{Pool, PoolKind, PoolSet};

    /// A model too big to keep resident is calibrated on an engine that holds one
    /// kernel's operands at a time: every op gets its row, from its own nodes.
    #[test]
    fn an_isolated_engine_calibrates_every_op_one_kernel_at_a_time() {
        let model = placer_zoo::build("mlp", 2).expect("zoo");
        let pools =
            PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 1 << 30), Pool::new("slow", PoolKind::Dram, 1 << 30)]);
        let base = crate::pass_run::base_placement(&model, &[]);
        let protocol = Protocol { steps: Steps::Isolated, ..crate::ProfileOptions::pipeline(1, 1).protocol };
        let mut engine = Engine::new(&model, pools, &base, &protocol, None, None).expect("engine");
        // Before a kernel is held there is nothing it can run alone.
        assert!(engine.step(&model.schedule()[..1]).is_err());
        // Node i "took" 20·i µs: each op's longest is its last node, its short one its
        // first of at least FIXED_MIN_NS, and the nodes from the 13th on are long enough
        // for a share of their own.
        let reference_ns: Vec<f64> = (0..model.nodes().len()).map(|i| i as f64 * 20e3).collect();
        let calibration = measure(&mut engine, &model, &base, &reference_ns).expect("measures");
        let mut ops: Vec<String> = model.schedule().iter().map(|&n| model.node(n).op.to_string()).collect();
        ops.sort();
        ops.dedup();
        assert_eq!(calibration.ops.iter().map(|o| o.op.clone()).collect::<Vec<_>>(), ops);
        for o in &calibration.ops {
            let last = model.schedule().iter().rev().find(|&&n| model.node(n).op.to_string() == o.op).expect("node");
            assert_eq!(o.share_pairs.node, model.node(*last).name, "{o:?}");
            assert!(o.share_pairs.alone_ns > 0.0 && o.share_pairs.with_ns > 0.0 && o.share.is_finite(), "{o:?}");
        }
        // The other long signatures, each measured on a node of its own signature.
        assert!(!calibration.signatures.is_empty(), "{calibration:?}");
        for s in &calibration.signatures {
            let n = model.schedule().iter().copied().find(|&n| model.node(n).name == s.share_pairs.node).expect("node");
            assert_eq!((signature(&model, n), model.node(n).op.to_string()), (s.signature, s.op.clone()), "{s:?}");
            assert!(s.share_pairs.alone_ns > 0.0 && s.share.is_finite() && s.copy_bytes >= MIN_COPY as u64, "{s:?}");
        }
        // The engine holds the last kernel measured and refuses to run another.
        let held = &calibration.signatures.last().expect("signatures").share_pairs.node;
        let held = model.schedule().iter().copied().find(|&n| &model.node(n).name == held).expect("held node");
        let other = model.schedule().iter().copied().find(|&n| n != held).expect("another node");
        assert!(engine.step(&[held]).is_ok_and(|t| t.len() == 1 && t[0] > 0.0));
        assert!(engine.step(&[other]).is_err());
    }

    /// The signatures measured on their own: those of kernels of at least
    /// SIGNATURE_MIN_NS, other than an op's longest, by total time, at most
    /// MAX_SIGNATURES, each on its first node; against a count made by hand.
    #[test]
    fn the_longest_running_other_signatures_get_a_share_of_their_own() {
        let model = placer_zoo::build("densenet121", 1).expect("zoo");
        // Repeated shapes share signatures; times vary by node so totals differ.
        let reference_ns: Vec<f64> = (0..model.nodes().len()).map(|i| ((i * 7919) % 1000) as f64 * 1e3).collect();
        let time_of = |n: NodeId| reference_ns[n.index()];
        let longest: Vec<NodeId> = {
            let mut by_op: BTreeMap<String, NodeId> = BTreeMap::new();
            for &n in model.schedule() {
                let e = by_op.entry(model.node(n).op.to_string()).or_insert(n);
                if time_of(n) > time_of(*e) {
                    *e = n;
                }
            }
            by_op.into_values().collect()
        };
        let got = heavy_signatures(&model, &reference_ns, &longest);
        let excluded: Vec<u64> = longest.iter().map(|&n| signature(&model, n)).collect();
        let mut want: Vec<(u64, NodeId, f64)> = Vec::new();
        for &n in model.schedule() {
            let s = signature(&model, n);
            if time_of(n) < SIGNATURE_MIN_NS || excluded.contains(&s) {
                continue;
            }
            match want.iter_mut().find(|w| w.0 == s) {
                Some(w) => w.2 += time_of(n),
                None => want.push((s, n, time_of(n))),
            }
        }
        assert!(want.len() > MAX_SIGNATURES, "the test model has more long signatures than are kept: {}", want.len());
        want.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
        let want: Vec<(u64, NodeId)> = want.into_iter().take(MAX_SIGNATURES).map(|(s, n, _)| (s, n)).collect();
        assert_eq!(got, want);
    }
}
