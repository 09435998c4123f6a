//! Another framework's kernels through a `KernelRunner`: the executors hand it each
//! node's operand bytes, take its time and what it wrote, run placer's own kernel where
//! it has none, and stop with the node named when it fails.

use placer_exec::{ExecError, ExecPlan, Executor, KernelRunner, PlanExecutor, PoolAssignment, SharedRunner};
use placer_ir::{Model, NodeId, Op};
use placer_pools::{Pool, PoolId, PoolKind, PoolSet};
use std::sync::{Arc, Mutex};

fn dram() -> PoolSet {
    PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 1 << 34)])
}

/// Runs the loss node only: writes 42.0 as the loss and says it took 5 µs. Records the
/// operand lengths of every node it was offered.
#[derive(Debug, Default)]
struct LossOnly {
    loss: Option<NodeId>,
    offered: Vec<(NodeId, Vec<usize>, Vec<usize>)>,
    fail: bool,
}

impl KernelRunner for LossOnly {
    fn run(&mut self, n: NodeId, inputs: &[&[u8]], written: &mut [&mut [u8]]) -> Result<Option<f64>, String> {
        self.offered.push((n, inputs.iter().map(|b| b.len()).collect(), written.iter().map(|b| b.len()).collect()));
        if Some(n) != self.loss {
            return Ok(None);
        }
        if self.fail {
            return Err("RuntimeError: boom".into());
        }
        written[0][..4].copy_from_slice(&42.0f32.to_le_bytes());
        Ok(Some(5000.0))
    }
}

fn setup() -> (Model, NodeId, usize) {
    let model = placer_zoo::build("mlp", 8).expect("zoo");
    let loss = (0..model.nodes().len())
        .map(|i| NodeId(i as u32))
        .find(|&n| model.node(n).op == Op::SoftmaxCrossEntropy)
        .expect("a loss");
    let at = model.schedule().iter().position(|&n| n == loss).expect("scheduled");
    (model, loss, at)
}

fn shared(runner: LossOnly) -> (Arc<Mutex<LossOnly>>, SharedRunner) {
    let runner = Arc::new(Mutex::new(runner));
    let dyn_runner: SharedRunner = runner.clone();
    (runner, dyn_runner)
}

#[test]
fn the_runners_kernel_and_time_stand_and_placers_kernels_run_the_rest() {
    let (model, loss, at) = setup();
    let placement = PoolAssignment::all_in(&model, PoolId(0));
    let (runner, dyn_runner) = shared(LossOnly { loss: Some(loss), ..LossOnly::default() });
    let mut exec = Executor::new(&model, dram(), &placement, 3).expect("allocates");
    exec.set_runner(Some(dyn_runner.clone()));
    let times = exec.step().expect("a step");
    assert_eq!(times.kernel_ns[at], 5000.0, "no emulated pool: the runner's own time");
    assert_eq!(exec.loss().expect("reads the loss"), Some(42.0), "what the runner wrote is the loss");
    let offered = std::mem::take(&mut runner.lock().expect("runner").offered);
    assert_eq!(offered.len(), model.nodes().len(), "every node is offered once");
    for (n, ins, outs) in &offered {
        let node = model.node(*n);
        let bytes = |ids: &mut dyn Iterator<Item = &placer_ir::TensorId>| {
            ids.map(|&t| model.tensor(t).bytes as usize).collect::<Vec<_>>()
        };
        assert_eq!(ins, &bytes(&mut node.inputs.iter()), "{}", node.name);
        assert_eq!(outs, &bytes(&mut node.updates.iter().chain(&node.outputs)), "{}", node.name);
    }
    // The plan executor, on a resident plan, does the same.
    let plan = ExecPlan::resident(&model, &placement, 1);
    let mut planned = PlanExecutor::new(&model, dram(), plan, 3).expect("reserves");
    planned.set_runner(Some(dyn_runner));
    let times = planned.step().expect("a planned step");
    assert_eq!(times.kernel_ns[at], 5000.0);
    assert_eq!(planned.loss(), Some(42.0));
}

#[test]
fn a_failing_runner_stops_the_step_naming_the_node() {
    let (model, loss, _) = setup();
    let (_, dyn_runner) = shared(LossOnly { loss: Some(loss), fail: true, ..LossOnly::default() });
    let mut exec = Executor::new(&model, dram(), &PoolAssignment::all_in(&model, PoolId(0)), 3).expect("allocates");
    exec.set_runner(Some(dyn_runner));
    let err = exec.step().expect_err("the runner fails");
    assert!(matches!(err, ExecError::Runner { .. }), "{err:?}");
    assert_eq!(err.to_string(), format!("node '{}': RuntimeError: boom", model.node(loss).name));
}
