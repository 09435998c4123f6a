//! One pass: put the picked nodes' operands where their configurations say (every
//! other tensor in the default pool, or its pin), restore the model's starting state,
//! run warm-up steps, then timed whole steps until every picked kernel's spread is
//! small enough or the cap is reached.
//!
//! Both modes use exactly this, so their numbers compare. Each picked kernel runs inside
//! a real step: its inputs were just written by their producers and are as warm in
//! cache as in training, and the emulated waits of other kernels happen where they
//! would. What is not controlled: the host's drift between passes (see `compare`).

use crate::passes::Pick;
use crate::record::{Measurement, Protocol};
use crate::tasks::{Pin, Task};
use crate::ProfileError;
use placer_exec::{Executor, Placement, Stats};
use placer_ir::{Model, NodeId};

/// The placement every pass starts from: pool 0, except pinned tensors.
pub fn base_placement(model: &Model, pins: &[Pin]) -> Placement {
    let mut placement = Placement(vec![placer_pools::PoolId(0); model.tensors().len()]);
    for (i, slot) in placement.0.iter_mut().enumerate() {
        let t = placer_ir::TensorId(i as u32);
        if let Some(pin) = pins.iter().rev().find(|p| p.applies_to(model, t)) {
            *slot = placer_pools::PoolId(pin.pool);
        }
    }
    placement
}

/// MAD-based coefficient of variation: robust to the odd slow step.
fn robust_cv(samples: &[f64]) -> f64 {
    Stats::of(samples).map_or(f64::INFINITY, |s| if s.median > 0.0 { 1.4826 * s.mad / s.median } else { 0.0 })
}

pub fn run_pass(
    exec: &mut Executor<'_>,
    model: &Model,
    tasks: &[Task],
    picks: &[Pick],
    base: &Placement,
    protocol: &Protocol,
    pass: u32,
) -> Result<Vec<Measurement>, ProfileError> {
    let mut placement = base.clone();
    for pick in picks {
        for (&t, &pool) in model.node(pick.node).operands().iter().zip(&tasks[pick.task].config) {
            placement.0[t.index()] = placer_pools::PoolId(pool);
        }
    }
    exec.set_placement(&placement)?;
    exec.reset_state(protocol.seed)?;
    let position: Vec<usize> = {
        let mut at = vec![usize::MAX; model.nodes().len()];
        for (i, &n) in model.schedule().iter().enumerate() {
            at[n.index()] = i;
        }
        picks.iter().map(|p| at[p.node.index()]).collect()
    };
    for _ in 0..protocol.warmup {
        exec.step()?;
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); picks.len()];
    loop {
        let times = exec.step()?;
        for (s, &pos) in samples.iter_mut().zip(&position) {
            s.push(times.kernel_ns[pos]);
        }
        let count = samples.first().map_or(0, Vec::len) as u32;
        let settled = samples.iter().all(|s| robust_cv(s) <= protocol.cv_target);
        if count >= protocol.max_reps || (count >= protocol.reps && settled) {
            break;
        }
    }
    Ok(picks
        .iter()
        .zip(samples)
        .filter_map(|(pick, s)| {
            let stats = Stats::of(&s)?;
            let node: NodeId = pick.node;
            let task = &tasks[pick.task];
            Some(Measurement {
                signature: task.signature,
                config: task.config.clone(),
                node: model.node(node).name.clone(),
                op: model.node(node).op.to_string(),
                pass,
                count: stats.count as u32,
                median_ns: stats.median,
                mad_ns: stats.mad,
                min_ns: stats.min,
                max_ns: stats.max,
                cv: if stats.median > 0.0 { 1.4826 * stats.mad / stats.median } else { 0.0 },
            })
        })
        .collect())
}
