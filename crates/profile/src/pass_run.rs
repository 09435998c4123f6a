//! One pass: put the picked nodes' operands where their configurations say (every
//! other tensor in the default pool, or its pin), restore the model's starting state,
//! run warm-up steps, then timed steps until every picked kernel's median is known to
//! the precision or the cap is reached.
//!
//! Both modes use exactly this, so their numbers compare. A timed step is the whole
//! schedule (`Steps::Whole`, `Steps::Live`: each picked kernel's inputs were just
//! written by their producers, and the emulated waits of other kernels happen where
//! they would) or only the picks still short of their precision and a few reference
//! kernels, each after the producers of its inputs (`Steps::Picked`), on tensors the
//! reference pass's whole steps filled. The host's drift is measured per step against
//! a reference pass (see `Profile::reference_ns`) and recorded; what spreads its effect
//! out is measuring each configuration in several rounds, minutes apart
//! (`Protocol::rounds`).

use crate::ProfileError;
use crate::engine::Engine;
use crate::passes::Pick;
use crate::record::{Measurement, PRECISION_FLOOR_NS, Protocol, Steps};
use crate::tasks::{Pin, Task};
use placer_exec::{PoolAssignment, Stats};
use placer_ir::{Model, NodeId};

/// The placement every pass starts from: pool 0, except pinned tensors.
pub fn base_placement(model: &Model, pins: &[Pin]) -> PoolAssignment {
    let mut placement = PoolAssignment(vec![placer_pools::PoolId(0); model.tensors().len()]);
    for (i, slot) in placement.0.iter_mut().enumerate() {
        let t = placer_ir::TensorId(i as u32);
        if let Some(pin) = pins.iter().rev().find(|p| p.applies_to(model, t)) {
            *slot = placer_pools::PoolId(pin.pool);
        }
    }
    placement
}

/// Reference nodes shorter than this are left out of drift factors: their times are
/// mostly timer and launch overhead.
const DRIFT_MIN_NS: f64 = 10_000.0;

/// Every node's median time over `protocol.reps` whole steps in placement `base`,
/// after the usual warm-up: the reference that drift is measured against.
pub fn reference_pass(
    engine: &mut Engine<'_>,
    model: &Model,
    base: &PoolAssignment,
    protocol: &Protocol,
) -> Result<Vec<f64>, ProfileError> {
    engine.start(base)?;
    for _ in 0..protocol.warmup {
        engine.step(model.schedule())?;
    }
    let mut per_node: Vec<Vec<f64>> = vec![Vec::new(); model.nodes().len()];
    for _ in 0..protocol.reps.max(3) {
        let times = engine.step(model.schedule())?;
        for (&n, &t) in model.schedule().iter().zip(&times) {
            per_node[n.index()].push(t);
        }
    }
    Ok(per_node.iter().map(|s| Stats::of(s).map_or(0.0, |s| s.median)).collect())
}

/// Whether the median of `samples` is known precisely enough: its standard error,
/// estimated from the MAD (1.2533·1.4826·MAD/√n), is within `precision` of the median
/// or within [`PRECISION_FLOOR_NS`].
fn settled(samples: &[f64], precision: f64) -> bool {
    Stats::of(samples).is_some_and(|s| {
        let se = 1.2533 * 1.4826 * s.mad / (s.count as f64).sqrt();
        se <= (precision * s.median).max(PRECISION_FLOOR_NS)
    })
}

/// The unpicked nodes a picked-only step also runs, so that it has a drift factor:
/// the longest candidates (schedule position, reference ns) that together take no more
/// than a tenth of the picks' time, or the shortest candidate when none fits. A drift
/// factor needs only a few kernels, and every one of them costs a timed step its time.
fn drift_reference(candidates: &[(usize, f64)], picked_ns: f64) -> Vec<(usize, f64)> {
    let budget = 0.1 * picked_ns;
    let mut by_time = candidates.to_vec();
    by_time.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut chosen = Vec::new();
    let mut total = 0.0;
    for &(pos, t) in &by_time {
        if total + t <= budget {
            chosen.push((pos, t));
            total += t;
        }
    }
    if chosen.is_empty() {
        chosen.extend(by_time.last().copied());
    }
    chosen
}

/// What a timed step runs, and where its times are read.
struct StepLayout {
    /// The nodes, in schedule order.
    run: Vec<NodeId>,
    /// Per pick, its index in `run` (none for a pick that left the pass).
    picks: Vec<Option<usize>>,
    /// The reference kernels: index in `run`, reference time.
    reference: Vec<(usize, f64)>,
}

/// A picked-only step: the `active` picks (schedule positions `position`) and the
/// reference kernels `chosen`, each right after the producers of its inputs (untimed),
/// so each reads inputs as fresh in cache as a training step leaves them (the reference
/// kernels ran that way in the reference pass).
fn picked_step(
    model: &Model,
    schedule_at: &[usize],
    position: &[usize],
    active: &[bool],
    chosen: &[(usize, f64)],
) -> StepLayout {
    let picked = position.iter().zip(active).filter(|(_, a)| **a).map(|(&pos, _)| pos);
    let timed: Vec<usize> = picked.chain(chosen.iter().map(|&(pos, _)| pos)).collect();
    let producers = timed
        .iter()
        .flat_map(|&pos| model.node(model.schedule()[pos]).inputs.iter())
        .filter_map(|&t| model.producer(t))
        .map(|n| schedule_at[n.index()]);
    let mut run: Vec<usize> = timed.iter().copied().chain(producers).collect();
    run.sort_unstable();
    run.dedup();
    let mut at = vec![usize::MAX; model.schedule().len()];
    for (i, &pos) in run.iter().enumerate() {
        at[pos] = i;
    }
    let picks = position.iter().zip(active).map(|(&pos, &a)| a.then_some(at[pos])).collect();
    let reference = chosen.iter().map(|&(pos, t)| (at[pos], t)).collect();
    StepLayout { run: run.iter().map(|&pos| model.schedule()[pos]).collect(), picks, reference }
}

/// What one pass measured.
#[derive(Debug)]
pub struct PassResult {
    pub measurements: Vec<Measurement>,
    /// Median over the pass's timed steps of the drift factor (1.0 when no node could
    /// serve as a reference).
    pub drift: f64,
}

#[derive(Debug, Clone, Copy)]
pub struct PassContext<'a> {
    pub model: &'a Model,
    pub tasks: &'a [Task],
    pub base: &'a PoolAssignment,
    pub protocol: &'a Protocol,
    pub conflicts: &'a [Vec<NodeId>],
    pub reference_ns: &'a [f64],
}

pub fn run_pass(
    engine: &mut Engine<'_>,
    cx: &PassContext<'_>,
    picks: &[Pick],
    pass: u32,
) -> Result<PassResult, ProfileError> {
    let PassContext { model, tasks, base, protocol, conflicts, reference_ns } = *cx;
    if protocol.steps == Steps::Isolated {
        return run_alone(engine, cx, picks, pass);
    }
    let mut placement = base.clone();
    for pick in picks {
        place(model, &mut placement, pick, &tasks[pick.task]);
    }
    engine.start(&placement)?;
    let mut schedule_at = vec![usize::MAX; model.nodes().len()];
    for (i, &n) in model.schedule().iter().enumerate() {
        schedule_at[n.index()] = i;
    }
    let position: Vec<usize> = picks.iter().map(|p| schedule_at[p.node.index()]).collect();
    // Reference nodes run exactly as in the reference pass: not picked, and sharing no
    // tensor with a picked node (whose operands may have moved).
    let mut disturbed = vec![false; model.nodes().len()];
    for pick in picks {
        disturbed[pick.node.index()] = true;
        for c in &conflicts[pick.node.index()] {
            disturbed[c.index()] = true;
        }
    }
    let candidates: Vec<(usize, f64)> = model
        .schedule()
        .iter()
        .enumerate()
        .filter(|(_, n)| !disturbed[n.index()] && reference_ns[n.index()] >= DRIFT_MIN_NS)
        .map(|(pos, n)| (pos, reference_ns[n.index()]))
        .collect();
    // Picked steps run only the picks whose median is not known well enough yet (and a
    // few reference kernels); whole steps run everything anyway, so every pick and
    // every candidate reference kernel keeps its place in them.
    let picked = protocol.steps == Steps::Picked;
    let chosen = if picked {
        drift_reference(&candidates, picks.iter().map(|p| reference_ns[p.node.index()]).sum())
    } else {
        candidates
    };
    let reference_total: f64 = chosen.iter().map(|(_, t)| t).sum();
    let layout = |active: &[bool]| {
        if picked {
            picked_step(model, &schedule_at, &position, active, &chosen)
        } else {
            StepLayout {
                run: model.schedule().to_vec(),
                picks: position.iter().map(|&p| Some(p)).collect(),
                reference: chosen.clone(),
            }
        }
    };
    let mut active = vec![true; picks.len()];
    let mut step = layout(&active);
    for _ in 0..protocol.warmup {
        engine.step(&step.run)?;
    }
    let mut kept = Kept::new(picks.len());
    let mut drifts = Vec::new();
    loop {
        let times = engine.step(&step.run)?;
        let drift = if reference_total > 0.0 {
            step.reference.iter().map(|&(pos, _)| times[pos]).sum::<f64>() / reference_total
        } else {
            1.0
        };
        drifts.push(drift);
        if kept.record(&times, &step.picks, drift, protocol) {
            break;
        }
        if picked && kept.finished.iter().zip(&active).any(|(&d, &a)| d && a) {
            active = kept.finished.iter().map(|&d| !d).collect();
            step = layout(&active);
        }
    }
    let Kept { raw, corrected, .. } = kept;
    let measurements = picks
        .iter()
        .zip(corrected)
        .zip(raw)
        .filter_map(|((pick, c), r)| measurement(model, &tasks[pick.task], pick.node, &r, &c, pass))
        .collect();
    Ok(PassResult { measurements, drift: Stats::of(&drifts).map_or(1.0, |s| s.median) })
}

/// The samples a pass keeps of each pick, as timed and divided by their step's drift.
///
/// A pick keeps no samples once its median is known, whether or not its step still
/// runs it (whole and live steps run every kernel), so its samples are the same steps
/// after the warm-up whatever else the pass picked. When every pick kept samples until
/// the pass's last one was known, a simultaneous pass's kernels got up to the cap and a
/// single pass's as few as `reps`: the two modes' medians then differed by however the
/// steps' times trended over a pass.
struct Kept {
    raw: Vec<Vec<f64>>,
    corrected: Vec<Vec<f64>>,
    finished: Vec<bool>,
}

impl Kept {
    fn new(picks: usize) -> Kept {
        Kept { raw: vec![Vec::new(); picks], corrected: vec![Vec::new(); picks], finished: vec![false; picks] }
    }

    /// Takes one step's times (`positions`: each pick's place in the step, `None` when
    /// the step did not run it); whether every pick is done.
    fn record(&mut self, times: &[f64], positions: &[Option<usize>], drift: f64, protocol: &Protocol) -> bool {
        for (i, pos) in positions.iter().enumerate() {
            if let (Some(pos), false) = (*pos, self.finished[i]) {
                self.raw[i].push(times[pos]);
                self.corrected[i].push(times[pos] / drift);
                self.finished[i] = done(&self.raw[i], protocol);
            }
        }
        self.finished.iter().all(|&d| d)
    }
}

/// A pick is done once its median is known to the precision, or at the cap.
fn done(samples: &[f64], protocol: &Protocol) -> bool {
    let n = samples.len() as u32;
    n >= protocol.max_reps || (n >= protocol.reps && settled(samples, protocol.precision))
}

/// Puts `pick`'s operands where its configuration says.
fn place(model: &Model, placement: &mut PoolAssignment, pick: &Pick, task: &Task) {
    for (&t, &pool) in model.node(pick.node).operands().iter().zip(&task.config) {
        placement.0[t.index()] = placer_pools::PoolId(pool);
    }
}

/// What `raw` samples of `node` in `task`'s configuration say, with `corrected` the
/// same samples divided by their steps' drift.
fn measurement(
    model: &Model,
    task: &Task,
    node: NodeId,
    raw: &[f64],
    corrected: &[f64],
    pass: u32,
) -> Option<Measurement> {
    let stats = Stats::of(raw)?;
    let corrected = Stats::of(corrected)?.median;
    Some(Measurement {
        signature: task.signature,
        config: task.config.clone(),
        node: model.node(node).name.clone(),
        op: model.node(node).op.to_string(),
        pass,
        count: stats.count as u32,
        median_ns: stats.median,
        drift_corrected_ns: corrected,
        mad_ns: stats.mad,
        min_ns: stats.min,
        max_ns: stats.max,
        cv: if stats.median > 0.0 { 1.4826 * stats.mad / stats.median } else { 0.0 },
    })
}

/// A pass of kernels timed alone ([`Steps::Isolated`]): each pick in turn holds only its
/// own operands, in its configuration's pools (every other tensor is not allocated),
/// runs its warm-up when its node's last configuration did not just run
/// ([`warms_up`]), then timed repetitions until its median is known to the precision,
/// each after its operands were put in the cache state a step leaves them in. No kernel
/// runs beside it, so there is no drift factor: the rounds spread the host's drift
/// instead.
fn run_alone(
    engine: &mut Engine<'_>,
    cx: &PassContext<'_>,
    picks: &[Pick],
    pass: u32,
) -> Result<PassResult, ProfileError> {
    let mut measurements = Vec::with_capacity(picks.len());
    for (i, pick) in picks.iter().enumerate() {
        let task = &cx.tasks[pick.task];
        let mut placement = cx.base.clone();
        place(cx.model, &mut placement, pick, task);
        engine.isolate(pick.node, &placement)?;
        if warms_up(picks, i) {
            for _ in 0..cx.protocol.warmup {
                engine.run_alone()?;
            }
        }
        let mut raw = Vec::new();
        while !done(&raw, cx.protocol) {
            raw.push(engine.run_alone()?);
        }
        measurements.extend(measurement(cx.model, task, pick.node, &raw, &raw, pass));
    }
    Ok(PassResult { measurements, drift: 1.0 })
}

/// Whether pick `i` of a pass of kernels alone runs its warm-up: only where the pick
/// before it timed another node. Consecutive configurations of one node keep its
/// operands ([`placer_exec::Executor::hold`]) and its code and scratch warm, so a
/// second warm-up repeats what the last timed runs did. On DenseNet-264 b32, 2,591
/// picks of ≥ 1 ms that followed their own node: the warm-up ran at the median of the
/// timed runs (p90 1.075×), and timing it as the first repetition moved no median
/// (median ratio 1.000, p90 2.9%) while cutting their runs by 24%. A node's first
/// configuration still needs it: its warm-up ran 1.070× the median (p90 1.57×), and
/// timed, it would have moved medians by +0.6% (docs/BENCHMARKS.md).
fn warms_up(picks: &[Pick], i: usize) -> bool {
    i == 0 || picks[i - 1].node != picks[i].node
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_of_kernels_alone_warms_up_each_run_of_one_node_once() {
        let pick = |task, node| Pick { task, node: NodeId(node) };
        // Node 7's three configurations, then node 3, then node 7 again.
        let picks = [pick(0, 7), pick(1, 7), pick(2, 7), pick(3, 3), pick(4, 7)];
        let warm: Vec<bool> = (0..picks.len()).map(|i| warms_up(&picks, i)).collect();
        assert_eq!(warm, [true, false, false, true, true]);
    }

    #[test]
    fn a_pick_keeps_no_samples_once_its_median_is_known() {
        let protocol = Protocol {
            warmup: 1,
            reps: 3,
            max_reps: 5,
            precision: 0.02,
            seed: 0,
            rounds: 1,
            round_noise: 0.0,
            steps: Steps::Live,
        };
        let mut kept = Kept::new(3);
        // Pick 0 repeats exactly and is known after `reps`; pick 1 cycles through 1, 2, 3 ms
        // and runs to the cap; pick 2 is not in the step (a picked step dropped it), so
        // the pass is never done.
        let positions = [Some(0), Some(1), None];
        for i in 0..7 {
            let slow = [1e6, 2e6, 3e6][i % 3];
            assert!(!kept.record(&[2e6, slow], &positions, 2.0, &protocol));
        }
        assert_eq!(kept.raw[0], vec![2e6; 3], "a known median takes no more samples, whatever its neighbours need");
        assert_eq!(kept.corrected[0], vec![1e6; 3]);
        assert_eq!(kept.raw[1].len(), 5, "an unsettled pick runs to the cap");
        assert!(kept.raw[2].is_empty());
        assert_eq!(kept.finished, vec![true, true, false]);
        let last = Protocol { reps: 1, ..protocol };
        assert!(kept.record(&[2e6, 1e6, 5e6], &[Some(0), Some(1), Some(2)], 1.0, &last), "every pick is done");
        assert_eq!((kept.raw[0].len(), kept.raw[1].len(), kept.raw[2].len()), (3, 5, 1));
    }
}
