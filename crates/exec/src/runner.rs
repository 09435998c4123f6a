//! Kernels other than placer's own: a [`KernelRunner`] runs a node on its operands'
//! bytes, wherever the executor placed them, and times it itself. `placer_torch`
//! profiles torch's aten ops through one, so the solver's weights are the times of the
//! kernels the user's loop will run.

use std::sync::{Arc, Mutex};

use placer_ir::NodeId;

/// Runs nodes with another framework's kernels.
pub trait KernelRunner: Send + std::fmt::Debug {
    /// Runs node `n` on its operands' bytes (`inputs` in `node.inputs` order, `written`
    /// as the node's updates then its outputs) and returns the kernel's own time in ns;
    /// `None` when the runner has no kernel for `n` and placer's own must run (the
    /// runner says which nodes those are, in whatever it reports).
    fn run(&mut self, n: NodeId, inputs: &[&[u8]], written: &mut [&mut [u8]]) -> Result<Option<f64>, String>;

    /// Runs one whole training step as the framework runs it by itself (its tensors
    /// where it puts them) and returns its wall time in ns; `None` when the runner has
    /// no step to run. What a step costs beyond the runner's kernels (the framework's
    /// own time between them) is this less their medians.
    fn whole_step(&mut self) -> Result<Option<f64>, String> {
        Ok(None)
    }
}

/// One runner, shared by the executors a profile makes one after another.
pub type SharedRunner = Arc<Mutex<dyn KernelRunner>>;
