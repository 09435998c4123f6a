//! A plan as placer_torch applies it to torch's own tensors: where each of the model's
//! tensors is at each step, the moves, and what the emulated pools charge. The charges
//! come from the same `ExecPlan::kernel_wait_ns` placer's executor uses, with the host's
//! pools opened as `placer run` opens them, so a torch step under a plan waits exactly
//! what placer's executor would wait for the same bytes.

use crate::ModelError;
use placer_exec::ExecPlan;
use placer_ir::ops::node_traffic;
use placer_ir::{Model, TensorId};
use placer_pools::PoolSet;
use placer_solve::{MoveKind, Plan};
use pyo3::prelude::*;
use std::collections::HashMap;
use std::path::PathBuf;

fn err(e: impl std::fmt::Display) -> PyErr {
    ModelError::new_err(e.to_string())
}

/// A plan resolved against its model and this host's pools.
#[pyclass(module = "placer_torch._core", frozen)]
pub struct Placement {
    model: Model,
    plan: Plan,
    exec: ExecPlan,
    pools: PoolSet,
    tensors: HashMap<String, TensorId>,
}

impl std::fmt::Debug for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placement").field("model", &self.model.name()).finish_non_exhaustive()
    }
}

impl Placement {
    pub(crate) fn pool_set(&self) -> &PoolSet {
        &self.pools
    }

    fn tensor(&self, name: &str) -> PyResult<TensorId> {
        self.tensors.get(name).copied().ok_or_else(|| err(format!("the model has no tensor '{name}'")))
    }

    /// What the emulated pools charge a kernel at `step` that took `kernel_ns`, for
    /// (tensor, bytes read, bytes written) operands; None when a tensor or the step is
    /// not the model's.
    pub(crate) fn wait_of(
        &self,
        operands: impl Iterator<Item = (TensorId, u64, u64)> + Clone,
        step: usize,
        kernel_ns: f64,
    ) -> Option<f64> {
        let tensors = self.model.tensors().len();
        if step >= self.model.schedule().len() || operands.clone().any(|(t, _, _)| t.0 as usize >= tensors) {
            return None;
        }
        Some(self.exec.kernel_wait_ns(&self.pools, operands, step, kernel_ns))
    }
}

#[pymethods]
impl Placement {
    /// Loads `model` (model.json) and `plan` (plan.json) and opens this host's pools as
    /// `placer run` does (the same cache directory, PLACER_CACHE_DIR).
    #[new]
    fn new(model: PathBuf, plan: PathBuf) -> PyResult<Placement> {
        let model = placer_ir::load_model(&model).map_err(err)?;
        let plan = Plan::load(&plan).map_err(err)?;
        let mut host = crate::open_host()?;
        let pools = host.pool_set().map_err(|e| err(format!("cannot open the memory pools: {e}")))?;
        let exec = placer_solve::exec_plan(&plan, &model, &pools).map_err(err)?;
        let tensors = model.tensors().iter().enumerate().map(|(i, t)| (t.name.clone(), TensorId(i as u32))).collect();
        Ok(Placement { model, plan, exec, pools, tensors })
    }

    /// The plan's kernels in schedule order: the model's node names.
    fn schedule(&self) -> Vec<String> {
        self.model.schedule().iter().map(|&n| self.model.node(n).name.clone()).collect()
    }

    /// The pool tensor `name` is in during step `step`.
    fn pool_at(&self, name: &str, step: usize) -> PyResult<String> {
        let t = self.tensor(name)?;
        if step >= self.model.schedule().len() {
            return Err(err(format!("step {step} is past the schedule's {} steps", self.model.schedule().len())));
        }
        Ok(self.pools.pool(self.exec.pool_at(t, step)).name.clone())
    }

    /// Every tensor's spans: name -> [(first step, pool)], in order.
    fn spans(&self) -> HashMap<String, Vec<(usize, String)>> {
        self.model
            .tensors()
            .iter()
            .zip(&self.exec.spans)
            .map(|(t, spans)| {
                (t.name.clone(), spans.iter().map(|s| (s.from, self.pools.pool(s.pool).name.clone())).collect())
            })
            .collect()
    }

    /// The pools: (name, emulation label or None).
    fn pools(&self) -> Vec<(String, Option<String>)> {
        self.pools.pools().iter().map(|p| (p.name.clone(), p.emulation.as_ref().map(|e| e.label()))).collect()
    }

    /// The model's tensor names, in the order of their ids (the op hook's numbering).
    fn names(&self) -> Vec<String> {
        self.model.tensors().iter().map(|t| t.name.clone()).collect()
    }

    /// Every tensor's bytes, in the order of their ids: the sizes the op hook's CPU
    /// allocator places at birth.
    fn sizes(&self) -> Vec<u64> {
        self.model.tensors().iter().map(|t| t.bytes).collect()
    }

    /// This object's address, for the op hook's calls into `kernel_wait_ns` (hook.rs);
    /// valid while the object lives.
    fn address(&self) -> usize {
        self as *const Placement as usize
    }

    /// The extra ns an emulated pool charges for copying `bytes` from pool `src` to
    /// `dst` (on top of the memcpy itself), as placer's executor charges a move.
    fn copy_extra_ns(&self, src: &str, dst: &str, bytes: u64) -> PyResult<f64> {
        let (s, d) = (self.pools.find(src).map_err(err)?, self.pools.find(dst).map_err(err)?);
        Ok(self.pools.copy_extra_ns(s, d, bytes))
    }

    /// The moves: (tensor, from, to, bytes, background, before_step).
    fn moves(&self) -> Vec<(String, String, String, u64, bool, usize)> {
        self.plan
            .moves
            .iter()
            .map(|m| {
                (m.tensor.clone(), m.from.clone(), m.to.clone(), m.bytes, m.kind == MoveKind::Async, m.before_step)
            })
            .collect()
    }

    #[getter]
    fn budget_bytes(&self) -> u64 {
        self.plan.inputs.budget_bytes
    }

    #[getter]
    fn predicted_step_ns(&self) -> f64 {
        self.plan.predicted.step_ns
    }

    #[getter]
    fn strategy(&self) -> String {
        self.plan.provenance.strategy.to_string()
    }

    /// What the emulated pools charge each of the plan's kernels, step by step, for its
    /// operands as the model counts their traffic (`placer_ir::ops::node_traffic`), at
    /// the plan's time for the kernel: the waits placer's executor charges this plan. The
    /// op hook charges torch's ops for torch's operands instead; the two are set side by
    /// side per kernel (`Placed.report`). Exact for the additive wait model; the overlap
    /// model hides reads behind the kernel's DRAM time, which the plan's time overstates.
    fn planned_waits_ns(&self) -> Vec<f64> {
        let schedule = self.model.schedule();
        schedule
            .iter()
            .enumerate()
            .map(|(step, &n)| {
                let traffic = node_traffic(&self.model, n);
                let kernel_ns = self.plan.kernels.get(step).map_or(0.0, |k| k.time_ns);
                self.exec.kernel_wait_ns(
                    &self.pools,
                    traffic.iter().map(|(t, tr)| (*t, tr.read, tr.written)),
                    step,
                    kernel_ns,
                )
            })
            .collect()
    }

    /// Predicted DRAM bytes in use at each step.
    #[getter]
    fn dram_bytes(&self) -> Vec<u64> {
        self.plan.dram_bytes.clone()
    }
}

/// Spins for `ns` nanoseconds with the GIL released (an emulated device's time).
#[pyfunction]
pub fn busy_wait(py: Python<'_>, ns: f64) -> f64 {
    py.detach(|| placer_pools::busy_wait_ns(ns).as_nanos() as f64)
}

/// Sleeps for `ns` nanoseconds with the GIL released, spinning only the last 50 µs: an
/// emulated device's time beside running kernels, as the plan executor's copy thread
/// waits it, so that the wait keeps no core from them. Returns the time waited.
#[pyfunction]
pub fn sleep_wait(py: Python<'_>, ns: f64) -> f64 {
    py.detach(|| {
        let start = std::time::Instant::now();
        if ns > 0.0 {
            placer_pools::sleep_until(start + std::time::Duration::from_nanos(ns as u64));
        }
        start.elapsed().as_nanos() as f64
    })
}
