//! `placer profile` with torch's kernels: the profiler's passes, design, checkpoints and
//! round checks exactly as the CLI runs them, with each node timed by a Python callable
//! (placer_torch's aten runner) instead of placer's own kernel where it has one.

use crate::{ProfileError, open_host};
use placer_exec::{KernelRunner, SharedRunner};
use placer_ir::NodeId;
use placer_profile::{DesignSpec, Foreign, KernelSource, ProfileOptions};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

/// Operands as the Python runner takes them: (address, bytes) each.
type Operands = Vec<(usize, usize)>;

/// What the profiling thread asks of the Python thread.
enum Ask {
    Kernel(usize, Operands, Operands),
    /// One whole step of the user's own loop, timed.
    Step,
    Progress(usize, usize),
    Done(Result<placer_profile::ProfileOutcome, String>),
}

/// The kernel runner the executor calls (on its launching thread): it hands each node to
/// the thread that called `profile`, which runs the Python callable `run(node, inputs,
/// written)` and answers. torch's ops thus run on the thread the user's loop runs them
/// on, with its CPUs and its OpenMP team: from the executor's launcher, pinned to one
/// core, they ran up to twice as slow. Each operand is `(address, bytes)` of memory the
/// executor owns, valid only until the answer; the callable keeps no view of it.
struct PyRunner {
    ask: Sender<Ask>,
    answers: Receiver<Result<Option<f64>, String>>,
}

impl std::fmt::Debug for PyRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PyRunner")
    }
}

impl KernelRunner for PyRunner {
    fn run(&mut self, n: NodeId, inputs: &[&[u8]], written: &mut [&mut [u8]]) -> Result<Option<f64>, String> {
        let ins = inputs.iter().map(|b| (b.as_ptr() as usize, b.len())).collect();
        let outs = written.iter_mut().map(|b| (b.as_mut_ptr() as usize, b.len())).collect();
        let gone = || "the Python thread running torch's kernels has stopped".to_string();
        self.ask.send(Ask::Kernel(n.index(), ins, outs)).map_err(|_| gone())?;
        self.answers.recv().map_err(|_| gone())?
    }

    fn whole_step(&mut self) -> Result<Option<f64>, String> {
        let gone = || "the Python thread running torch's steps has stopped".to_string();
        self.ask.send(Ask::Step).map_err(|_| gone())?;
        self.answers.recv().map_err(|_| gone())?
    }
}

/// A Python exception as the one line the profile's error carries.
fn one_line(py: Python<'_>, e: &PyErr) -> String {
    let text = e.value(py).to_string();
    let first = text.lines().next().unwrap_or_default();
    let kind = e.get_type(py).name().map(|n| n.to_string()).unwrap_or_else(|_| "error".into());
    if first.is_empty() { kind } else { format!("{kind}: {first}") }
}

/// Profiles the model at `model` into `checkpoint_dir` with `call`'s kernels, as
/// `placer profile MODEL` does with its defaults (`rounds` and `fresh` as its flags),
/// and returns where the checkpoint is and what it holds. `on_pass(done, total)` is
/// called after every pass. The source's label, tag and node lists are recorded in the
/// checkpoint. `step()`, when given, runs one whole training step of the user's own loop;
/// timed against the kernels, it gives the step overhead (what torch spends between its
/// kernels) that every prediction then adds.
#[pyfunction]
#[pyo3(signature = (model, checkpoint_dir, call, label, tag, placer_nodes, folded_nodes, *, rounds=3, fresh=false, full_design=false, skip_calibrations=false, on_pass=None, step=None))]
#[allow(clippy::too_many_arguments)] // a Python keyword signature
pub fn profile<'py>(
    py: Python<'py>,
    model: PathBuf,
    checkpoint_dir: PathBuf,
    call: Py<PyAny>,
    label: String,
    tag: String,
    placer_nodes: Vec<String>,
    folded_nodes: Vec<String>,
    rounds: u32,
    fresh: bool,
    full_design: bool,
    skip_calibrations: bool,
    on_pass: Option<Py<PyAny>>,
    step: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let err = |e: &dyn std::fmt::Display| ProfileError::new_err(e.to_string());
    if rounds == 0 {
        return Err(err(&"rounds must be at least 1"));
    }
    let loaded = placer_ir::load_model(&model).map_err(|e| err(&e))?;
    let mut options = ProfileOptions::pipeline(3, rounds).with_steps(placer_profile::default_steps(&loaded));
    options.model_source = Some(std::path::absolute(&model).unwrap_or(model.clone()));
    options.skip_calibrations = skip_calibrations;
    if full_design {
        options.mode.design = DesignSpec::full();
    }
    let (ask, asked) = mpsc::channel::<Ask>();
    let (answer, answers) = mpsc::channel();
    let runner: SharedRunner = Arc::new(Mutex::new(PyRunner { ask: ask.clone(), answers }));
    options.foreign = Some(Foreign { runner, source: KernelSource { label, tag, placer_nodes, folded_nodes } });
    let mut host = open_host()?;
    let pools = host.pool_set().map_err(|e| err(&format!("cannot open the memory pools: {e}")))?;
    let plan = placer_profile::schedule_profile(&loaded, &pools, &host.fingerprint, &options).map_err(|e| err(&e))?;
    let name = placer_profile::checkpoint_name(&loaded, &options.mode, None, options.foreign.as_ref());
    std::fs::create_dir_all(&checkpoint_dir)
        .map_err(|e| err(&format!("cannot create {}: {e}", checkpoint_dir.display())))?;
    let path = checkpoint_dir.join(name);
    // The profile runs on a thread of its own; this thread (the caller's, holding the
    // GIL only while it runs Python) answers its kernels until it is done.
    let worker = std::thread::spawn(move || {
        let progress = ask.clone();
        let outcome = placer_profile::run_to_checkpoint(&loaded, pools, &plan, &path, fresh, &mut |p| {
            let _ = progress.send(Ask::Progress(p.passes_done, p.passes_total));
        });
        let _ = ask.send(Ask::Done(outcome.map_err(|e| format!("{e:#}"))));
    });
    let mut interrupted: Option<PyErr> = None;
    // A Mutex only to make the receiver Sync, as waiting without the GIL needs.
    let asked = Mutex::new(asked);
    let outcome = loop {
        let Some(next) = py.detach(|| asked.lock().ok().and_then(|r| r.recv().ok())) else {
            break Err("the profiling thread stopped without a result".to_string());
        };
        match next {
            Ask::Kernel(n, ins, outs) => {
                let got = match &interrupted {
                    Some(e) => Err(one_line(py, e)),
                    None => runner_call(py, &call, n, ins, outs),
                };
                if answer.send(got).is_err() {
                    break Err("the profiling thread stopped".to_string());
                }
            }
            Ask::Step => {
                let got = match (&interrupted, &step) {
                    (Some(e), _) => Err(one_line(py, e)),
                    (None, None) => Ok(None),
                    (None, Some(f)) => {
                        let start = std::time::Instant::now();
                        f.call0(py).map(|_| Some(start.elapsed().as_nanos() as f64)).map_err(|e| one_line(py, &e))
                    }
                };
                if answer.send(got).is_err() {
                    break Err("the profiling thread stopped".to_string());
                }
            }
            Ask::Progress(done, total) => {
                if let Some(f) = &on_pass {
                    // Progress only: a failing callback does not stop the measuring.
                    drop(f.call1(py, (done, total)));
                }
            }
            Ask::Done(outcome) => break outcome,
        }
        // Ctrl-C: every later kernel fails with it, so the profile stops at the next
        // one, keeping the passes it saved.
        if interrupted.is_none()
            && let Err(e) = py.check_signals()
        {
            interrupted = Some(e);
        }
    };
    let _ = worker.join();
    if let Some(e) = interrupted {
        return Err(e);
    }
    let outcome = outcome.map_err(|e| err(&e))?;
    let d = PyDict::new(py);
    d.set_item("checkpoint", outcome.path.display().to_string())?;
    d.set_item("passes", outcome.profile.passes_done)?;
    d.set_item("resumed", outcome.resumed)?;
    d.set_item("measurements", outcome.profile.measurements.len())?;
    d.set_item("wall_seconds", outcome.profile.wall_seconds)?;
    d.set_item("emulated", outcome.profile.header.emulated)?;
    let overhead = outcome.profile.step_overhead.as_ref();
    d.set_item("step_overhead_ns", overhead.map(|o| o.step_ns()))?;
    d.set_item("whole_step_ns", overhead.map(|o| o.wall_ns))?;
    // The same step beside a copy thread, where there is a pool to copy to.
    d.set_item("copy_loss_ns_per_byte", overhead.and_then(|o| o.copy_loss_ns_per_byte()))?;
    d.set_item("memcpy_beside_ns_per_byte", overhead.and_then(|o| o.copies.as_ref()).map(|c| c.memcpy_ns_per_byte))?;
    Ok(d)
}

/// One kernel through the Python callable: its time, `None` for placer's kernel, or its
/// exception in one line.
fn runner_call(
    py: Python<'_>,
    call: &Py<PyAny>,
    n: usize,
    ins: Operands,
    outs: Operands,
) -> Result<Option<f64>, String> {
    let got = call.call1(py, (n, ins, outs)).map_err(|e| one_line(py, &e))?;
    got.extract::<Option<f64>>(py).map_err(|e| one_line(py, &e))
}
