//! Plans executed for real on small zoo models: they compute exactly what the plain
//! executor computes, never use more DRAM than the budget, and bad plans are refused
//! with an error instead of a wrong run.

use placer_eval::{Contender, EvalError, MeasureOptions, run_interleaved};
use placer_exec::{Executor, PoolAssignment, RunOptions};
use placer_ir::Model;
use placer_pools::{Emulation, Pool, PoolId, PoolKind, PoolSet};
use placer_solve::{
    Budget, Costs, Formulation, IlpOptions, Plan, PoolFigures, SolvePools, SolveRequest, SolveResult, solve,
};

fn figures(name: &str, read: f64, write: f64) -> PoolFigures {
    PoolFigures {
        name: name.into(),
        kind: if name == "dram" { PoolKind::Dram } else { PoolKind::Pmem },
        capacity: 1 << 30,
        emulated_as: (name != "dram").then(|| "test-device".into()),
        read_gbps: read,
        write_gbps: write,
        source: "test".into(),
    }
}

/// Cheap moves, so plans move tensors (blocking and in the background).
fn solve_pools() -> SolvePools {
    SolvePools {
        pools: vec![figures("dram", 30.0, 25.0), figures("pmem", 10.0, 4.0)],
        move_ns_per_byte: vec![vec![0.0, 0.001], vec![0.001, 0.0]],
        moves_measured: true,
        copy_cpu_ns_per_byte: vec![vec![0.0, 0.0005], vec![0.0005, 0.0]],
        memcpy_source: "test".into(),
    }
}

/// DRAM and an emulated slow pool with a small extra cost, so steps stay fast.
fn pools() -> PoolSet {
    let slow = Emulation::from_bandwidths("test-device", 30e9, 25e9, 20e9, 15e9);
    PoolSet::new(vec![
        Pool::new("dram", PoolKind::Dram, 1 << 30),
        Pool::new("pmem", PoolKind::Pmem, 1 << 30).with_emulation(slow),
    ])
}

fn zoo(name: &str, batch: u64) -> Model {
    placer_zoo::build(name, batch).expect("zoo model")
}

fn solved(model: &Model, budget: &str, formulation: Formulation) -> SolveResult {
    let pools = solve_pools();
    let costs = Costs::new(model, &pools, &[]);
    let request = SolveRequest {
        model,
        costs: &costs,
        pools,
        budget: Budget::parse(budget).expect("budget"),
        pins: Vec::new(),
        // Solved to optimality: a plan within 1% of the step may keep the sync start.
        options: IlpOptions { formulation, time_limit: 60.0, gap: 0.0, ..IlpOptions::default() },
        profile: None,
        every_baseline: true,
    };
    let result = solve(&request, &mut |_| {}).expect("solved");
    assert!(result.check.ok(), "{:?}", result.check.problems);
    result
}

fn run(model: &Model, plans: Vec<(String, Plan)>, iterations: usize) -> Result<Vec<placer_eval::Measured>, EvalError> {
    let contenders: Vec<Contender> = plans.into_iter().map(|(name, plan)| Contender { name, plan }).collect();
    let options = MeasureOptions { warmup: 1, iterations, rewarm: 1, seed: 7, require_quiet: false };
    run_interleaved(model, &mut || Ok(pools()), &contenders, &options, &mut |_| {})
}

#[test]
fn plans_compute_what_the_plain_executor_computes_within_their_budget() {
    let model = zoo("lenet-mnist", 8);
    let mut plain = Executor::new(&model, pools(), &PoolAssignment::all_in(&model, PoolId(0)), 7).expect("executor");
    // Each plan's turn builds its executor afresh from the seed and runs an untimed step,
    // then a timed one: the same two steps, three times.
    let expected = plain.run(&RunOptions { warmup: 1, iterations: 1, seed: 7 }).expect("plain run").losses.repeat(3);
    assert_eq!(expected.len(), 6, "the plain run reports its untimed step's loss too");
    for formulation in [Formulation::Sync, Formulation::Async] {
        let result = solved(&model, "30%", formulation);
        let plan = &result.plan;
        assert!(!plan.moves.is_empty(), "{formulation:?}: the test wants a plan that moves tensors");
        let mut plans = vec![("ilp".to_string(), plan.clone())];
        for c in &result.baselines {
            if let Ok((p, check)) = &c.outcome
                && check.ok()
            {
                plans.push((c.name.clone(), p.clone()));
            }
        }
        plans.push(("all-dram".to_string(), result.all_dram.clone()));
        let measured = run(&model, plans, 3).expect("plans run");
        for m in &measured {
            // Same data, same kernels, same order: bit for bit the same losses.
            assert_eq!(m.report.losses, expected, "{formulation:?} {}: losses differ", m.name);
            let (reserved, peak) = (m.report.reserved_bytes[0], m.report.peak_bytes[0]);
            assert!(peak <= reserved && reserved <= m.budget_bytes, "{}: DRAM {peak}/{reserved}", m.name);
            assert_eq!(m.step_ns.count, 3);
        }
        let ilp = &measured[0];
        assert_eq!(ilp.report.blocking_moves + ilp.report.background_moves, plan.moves.len());
        assert!(ilp.report.peak_bytes[0] <= result.budget_bytes);
        if formulation == Formulation::Async {
            assert!(ilp.report.background_moves > 0, "the async plan should copy in the background");
        }
    }
}

#[test]
fn overlapping_offsets_are_refused_not_run() {
    let model = zoo("mlp", 8);
    let result = solved(&model, "30%", Formulation::Sync);
    let mut plan = result.plan.clone();
    // Put every DRAM span at offset 0: tensors live at once now share bytes.
    for t in &mut plan.tensors {
        for s in &mut t.placement {
            if s.pool == "dram" {
                s.offset = 0;
            }
        }
    }
    let err = run(&model, vec![("broken".into(), plan)], 1).expect_err("refused");
    let text = err.to_string();
    assert!(matches!(err, EvalError::Exec { .. }) && text.contains("overlap"), "{text}");
}

#[test]
fn a_plan_for_another_model_or_over_its_budget_is_refused() {
    let model = zoo("mlp", 8);
    let other = zoo("mlp", 16);
    let plan = solved(&model, "30%", Formulation::Static).plan;
    let err = run(&other, vec![("ilp".into(), plan.clone())], 1).expect_err("another model");
    assert!(err.to_string().contains("not 'mlp"), "{err}");
    let mut greedy = plan;
    greedy.arena_bytes[0] = greedy.inputs.budget_bytes + 4096;
    let err = run(&model, vec![("ilp".into(), greedy)], 1).expect_err("over budget");
    assert!(err.to_string().contains("over its own budget"), "{err}");
}
