//! What a background copy costs the kernels beside it, measured on the model's own
//! kernels, one op at a time.
//!
//! A plan's background copy runs on its own thread while kernels run. On a host with few
//! cores that thread takes CPU time (and memory bandwidth) from them, in two parts:
//!
//! - **a fixed part, paid per copy whatever its size**: waking the copy thread takes the
//!   core of one of the kernel's workers, and so does the copy's end (an emulated pool's
//!   wait is a sleep whose last stretch spins, [`placer_pools::sleep_until`]). A copy of
//!   no bytes cost BERT-tiny b8's parallel kernels 20-80 µs; a kernel running on one
//!   thread lost about 5 µs.
//! - **a share of the copy's CPU time**: a GEMM split evenly over every core waits for
//!   the core the memcpy took, a short memory-bound kernel barely notices.
//!
//! So the solver charges a copy beside a kernel
//!
//! ```text
//! fixed(op) + share(op) × min(the copy's CPU time, the kernel's all-DRAM time)
//! ```
//!
//! where the copy's CPU time is its bytes at the host's memcpy speed (the sleep costs
//! no CPU), and the cap says a kernel cannot lose more than it overlaps. Both are measured
//! here for every op of the model, each from pairs of a run of one of its kernels alone
//! and with a copy handed to a copy thread just before it (as the plan executor hands its
//! copies), alternating, [`PAIRS`] pairs. Every calibration copy carries an emulated wait
//! [`TAIL`] past its memcpy, as a copy to or from an emulated pool does, and the run
//! repeats the kernel until the copy has ended, so that both wake-ups fall inside it.
//!
//! - `fixed` on the op's shortest kernel of at least [`FIXED_MIN_NS`] (the short kernels
//!   are where it matters), with a copy of no bytes;
//! - `share` on the op's longest kernel, with a copy sized to take about half the
//!   kernel's time, where the loss is largest against the noise and below the cap, less
//!   the op's fixed part.

use crate::ProfileError;
use crate::engine::Engine;
use placer_exec::Stats;
use placer_ir::{Model, NodeId};
use placer_pools::CopyCores;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Alone/with pairs per op.
pub const PAIRS: usize = 11;
/// The copy thread's buffers; a longer copy repeats over them.
const BUFFER: usize = 16 << 20;
/// The smallest copy measured: smaller ones are timer noise.
const MIN_COPY: usize = 64 << 10;
/// The largest: a kernel of seconds gets a copy of about a second at most.
const MAX_COPY: usize = 64 * BUFFER;
/// The emulated wait every calibration copy carries past its memcpy: long enough that
/// the copy thread sleeps, then spins its last stretch, as a plan's copy does.
pub const TAIL: Duration = Duration::from_micros(150);
/// The shortest kernel the fixed part is measured on.
pub const FIXED_MIN_NS: f64 = 20e3;
/// The most repeats of a kernel in one timed run.
const MAX_RUN: usize = 16;

/// The calibration a profile records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interference {
    /// A copy thread's memcpy time per byte (DRAM to DRAM, [`BUFFER`]-sized copies
    /// alone, median): the CPU time of a copy whose pools are emulated.
    pub memcpy_ns_per_byte: f64,
    pub pairs: u32,
    pub ops: Vec<OpInterference>,
    pub seconds: f64,
}

/// One op's measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpInterference {
    pub op: String,
    /// The fixed part's run: a copy of no bytes beside the op's shortest kernel of at
    /// least [`FIXED_MIN_NS`] (its longest when none is).
    pub fixed_run: RunPairs,
    /// with − alone of `fixed_run`: what a copy costs this op whatever its size. Noise
    /// can make it negative; the solver charges no less than 0.
    pub fixed_ns: f64,
    /// The share's run: a copy of `copy_bytes` beside the op's longest kernel.
    pub share_run: RunPairs,
    pub copy_bytes: u64,
    /// (with − alone − `fixed_ns`) / min(`copy_bytes` × `memcpy_ns_per_byte`, the kernel
    /// alone) of `share_run`: the share of the copy's CPU time, as the solver estimates
    /// it, that the kernel lost past the fixed part. (A copy beside a kernel runs slower
    /// than alone, `copy_ns`; the share absorbs that, so the solver's charge reproduces
    /// this measurement.) Noise can make it negative; the solver charges no less than 0.
    pub share: f64,
}

/// One timed run's pairs: a kernel repeated `repeats` times, alone and beside a copy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunPairs {
    /// The node, repeated until the copy has ended.
    pub node: String,
    pub repeats: u32,
    /// Medians over the pairs: the run alone and beside the copy (each timed from where
    /// the copy is handed over, or would be, to the run's end), and the copy.
    pub alone_ns: f64,
    pub with_ns: f64,
    pub copy_ns: f64,
}

impl Interference {
    /// Each op's share, by op name.
    pub fn shares(&self) -> BTreeMap<&str, f64> {
        self.ops.iter().map(|o| (o.op.as_str(), o.share)).collect()
    }

    /// Each op's fixed part, by op name.
    pub fn fixed_ns(&self) -> BTreeMap<&str, f64> {
        self.ops.iter().map(|o| (o.op.as_str(), o.fixed_ns)).collect()
    }
}

/// Measures every op of `model` on `engine` (a resident engine, base placement), each
/// op's longest node by `reference_ns`.
pub fn measure(engine: &mut Engine<'_>, model: &Model, reference_ns: &[f64]) -> Result<Interference, ProfileError> {
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
        let alone: Vec<f64> = (0..5)
            .map(|_| copier.copy(BUFFER, Duration::ZERO).map(|d| d.as_nanos() as f64 / BUFFER as f64))
            .collect::<Result<_, _>>()?;
        let memcpy_ns_per_byte = median(&alone);
        let mut ops = Vec::with_capacity(nodes.len());
        for (op, &(longest, short)) in &nodes {
            let short = short.unwrap_or(longest);
            ops.push(measure_op(engine, model, op, [longest, short], memcpy_ns_per_byte, &copier)?);
        }
        Ok::<_, ProfileError>((memcpy_ns_per_byte, ops))
    });
    engine.set_warm_pool(true);
    let (memcpy_ns_per_byte, ops) = measured?;
    Ok(Interference { memcpy_ns_per_byte, pairs: PAIRS as u32, ops, seconds: started.elapsed().as_secs_f64() })
}

/// A copy thread with two DRAM buffers of its own that memcpys, then waits out an
/// emulated wait as a plan's copy thread does ([`placer_pools::sleep_until`]), kept off
/// the launcher's core as a plan's is. Copies longer than its buffers repeat over them.
/// Dropping it stops the thread.
#[derive(Debug)]
pub struct CopyBench {
    jobs: Option<Sender<(usize, Duration)>>,
    finished: Receiver<Duration>,
    thread: Option<JoinHandle<()>>,
}

impl CopyBench {
    /// Starts the thread, kept off core `launcher` (from [`placer_exec::as_launcher`]).
    pub fn start(launcher: Option<usize>) -> Result<CopyBench, ProfileError> {
        let (jobs, inbox) = channel::<(usize, Duration)>();
        let (done, finished) = channel::<Duration>();
        let thread = std::thread::Builder::new()
            .name("placer-copy-bench".into())
            .spawn(move || {
                CopyCores::of_this_thread().keep_off(launcher);
                let (src, mut dst) = (vec![1u8; BUFFER], vec![0u8; BUFFER]);
                for (bytes, wait) in inbox {
                    let start = Instant::now();
                    let mut left = bytes;
                    while left > 0 {
                        let n = left.min(BUFFER);
                        dst[..n].copy_from_slice(&src[..n]);
                        black_box(&dst[..n]);
                        left -= n;
                    }
                    placer_pools::sleep_until(start + wait);
                    if done.send(start.elapsed()).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| ProfileError::Usage { reason: format!("cannot start a copy thread: {e}") })?;
        Ok(CopyBench { jobs: Some(jobs), finished, thread: Some(thread) })
    }

    /// Hands the thread a copy of `bytes` that ends no sooner than `wait` after it
    /// starts (an emulated pool's wait), and returns at once.
    pub fn hand(&self, bytes: usize, wait: Duration) -> Result<(), ProfileError> {
        self.jobs.as_ref().ok_or_else(thread_gone)?.send((bytes, wait)).map_err(|_| thread_gone())
    }

    /// Waits for the oldest copy handed over, and says how long it took.
    pub fn done(&self) -> Result<Duration, ProfileError> {
        self.finished.recv().map_err(|_| thread_gone())
    }

    /// A copy of `bytes` with `wait`, start to finish.
    pub fn copy(&self, bytes: usize, wait: Duration) -> Result<Duration, ProfileError> {
        self.hand(bytes, wait)?;
        self.done()
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

/// One op's two runs, `[longest, short]`, their copies handed to `copier`.
fn measure_op(
    engine: &mut Engine<'_>,
    model: &Model,
    op: &str,
    [longest, short]: [NodeId; 2],
    memcpy_ns_per_byte: f64,
    copier: &CopyBench,
) -> Result<OpInterference, ProfileError> {
    let fixed_run = run_pairs(engine, model, short, 0, copier)?;
    let fixed_ns = fixed_run.with_ns - fixed_run.alone_ns;
    let kernel_ns = median_of(engine, longest, 4)?;
    let bytes = ((kernel_ns / 2.0 / memcpy_ns_per_byte) as usize).clamp(MIN_COPY, MAX_COPY);
    let share_run = run_pairs(engine, model, longest, bytes, copier)?;
    let cpu_ns = (bytes as f64 * memcpy_ns_per_byte).min(share_run.alone_ns / f64::from(share_run.repeats));
    Ok(OpInterference {
        op: op.to_string(),
        share: (share_run.with_ns - share_run.alone_ns - fixed_ns) / cpu_ns.max(1.0),
        fixed_run,
        fixed_ns,
        share_run,
        copy_bytes: bytes as u64,
    })
}

/// The median of `n`'s time over `runs` runs, the first dropped as a warm-up.
fn median_of(engine: &mut Engine<'_>, n: NodeId, runs: usize) -> Result<f64, ProfileError> {
    let times: Vec<f64> = (0..runs).map(|_| engine.step(&[n]).map(|t| t[0])).collect::<Result<_, _>>()?;
    Ok(median(&times[1..]))
}

/// [`PAIRS`] pairs of `n` repeated until a copy of `bytes` plus [`TAIL`] has ended, alone
/// and beside that copy, alternating.
fn run_pairs(
    engine: &mut Engine<'_>,
    model: &Model,
    n: NodeId,
    bytes: usize,
    copier: &CopyBench,
) -> Result<RunPairs, ProfileError> {
    let copy_alone = copier.copy(bytes, Duration::ZERO)?;
    let wait = copy_alone + TAIL;
    let kernel_ns = median_of(engine, n, 4)?.max(1.0);
    let repeats = ((wait.as_nanos() as f64 / kernel_ns).ceil() as usize + 1).clamp(1, MAX_RUN);
    let run = vec![n; repeats];
    // Timed from before the hand-over to the run's end, as a plan's step pays for
    // whatever the hand-over costs the launcher.
    let (mut alone, mut with, mut copies) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..PAIRS {
        let start = Instant::now();
        engine.step(&run)?;
        alone.push(start.elapsed().as_nanos() as f64);
        let start = Instant::now();
        copier.hand(bytes, wait)?;
        engine.step(&run)?;
        with.push(start.elapsed().as_nanos() as f64);
        copies.push(copier.done()?.as_nanos() as f64);
    }
    Ok(RunPairs {
        node: model.node(n).name.clone(),
        repeats: repeats as u32,
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
