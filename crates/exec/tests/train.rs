//! Training steps run for real: the loss falls, moves between pools keep data intact,
//! full pools are clear errors, and results are deterministic.

use placer_exec::{ExecError, ExecPlan, Executor, PlanExecutor, PoolAssignment, RunOptions};
use placer_ir::TensorId;
use placer_pools::{Pool, PoolId, PoolKind, PoolSet};

fn dram() -> PoolSet {
    PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 1 << 34)])
}

fn two_pools() -> PoolSet {
    PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 1 << 34), Pool::new("slow", PoolKind::Dram, 1 << 34)])
}

fn losses(model: &placer_ir::Model, steps: usize, seed: u64) -> Vec<f32> {
    let mut exec = Executor::new(model, dram(), &PoolAssignment::all_in(model, PoolId(0)), seed).expect("allocates");
    let report = exec.run(&RunOptions { warmup: 0, iterations: steps, seed }).expect("runs");
    report.losses
}

#[test]
fn sgd_steps_reduce_the_loss_of_a_small_model() {
    for (name, batch) in [("mlp", 32), ("lenet-mnist", 16)] {
        let model = placer_zoo::build(name, batch).expect("zoo");
        let l = losses(&model, 12, 1);
        assert_eq!(l.len(), 12);
        assert!(l.iter().all(|x| x.is_finite()), "{name}: {l:?}");
        // Ten classes: chance is ln(10) = 2.30; a random initialisation starts above it.
        assert!(l[0] > 2.0, "{name}: {l:?}");
        assert!(l[11] < 0.7 * l[0], "{name}: loss did not fall: {l:?}");
    }
}

#[test]
fn every_small_zoo_model_runs_a_step() {
    for (name, batch) in [("resnet18", 1), ("bert-tiny", 1)] {
        let model = placer_zoo::build(name, batch).expect("zoo");
        let l = losses(&model, 2, 3);
        assert!(l.iter().all(|x| x.is_finite() && *x > 0.0), "{name}: {l:?}");
    }
}

#[test]
fn the_same_seed_gives_the_same_numbers() {
    let model = placer_zoo::build("lenet-mnist", 4).expect("zoo");
    assert_eq!(losses(&model, 3, 9), losses(&model, 3, 9));
    assert_ne!(losses(&model, 1, 9), losses(&model, 1, 10));
}

#[test]
fn moving_tensors_between_pools_keeps_their_contents() {
    let model = placer_zoo::build("mlp", 8).expect("zoo");
    let run = |move_between_steps: bool| {
        let mut exec =
            Executor::new(&model, two_pools(), &PoolAssignment::all_in(&model, PoolId(0)), 5).expect("allocates");
        for _ in 0..3 {
            exec.step().expect("step");
            if move_between_steps {
                for t in 0..model.tensors().len() {
                    let id = TensorId(t as u32);
                    let to = if t % 2 == 0 { PoolId(1) } else { PoolId(0) };
                    exec.move_tensor(id, to).expect("fits");
                }
            }
        }
        let in_slow = exec.pools().pool(PoolId(1)).in_use();
        (exec.loss().expect("readable"), in_slow)
    };
    let (stay, none_moved) = run(false);
    let (moved, some_moved) = run(true);
    assert_eq!(stay, moved, "moves must not change results");
    assert_eq!(none_moved, 0);
    assert!(some_moved > 0);
}

#[test]
fn a_full_pool_is_a_clear_error_naming_the_tensor() {
    let model = placer_zoo::build("lenet-mnist", 256).expect("zoo");
    let tiny =
        PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 1 << 30), Pool::new("slow", PoolKind::Dram, 1 << 20)]);
    let mut placement = PoolAssignment::all_in(&model, PoolId(0));
    let big = model.tensor_id("conv1.conv").expect("tensor");
    placement.0[big.index()] = PoolId(1);
    let err = Executor::new(&model, tiny, &placement, 1).expect_err("4.6 MiB does not fit in 1 MiB");
    assert!(matches!(err, ExecError::Pool { .. }));
    assert!(err.to_string().starts_with("tensor 'conv1.conv': pool 'slow' is full"), "{err}");
}

#[test]
fn a_failed_move_leaves_the_tensor_where_it_was() {
    let model = placer_zoo::build("mlp", 8).expect("zoo");
    let pools = PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 1 << 30), Pool::new("slow", PoolKind::Dram, 64)]);
    let mut exec = Executor::new(&model, pools, &PoolAssignment::all_in(&model, PoolId(0)), 1).expect("allocates");
    exec.step().expect("step");
    let w = model.tensor_id("fc1.weight").expect("tensor");
    let before = exec.read_f32(w).expect("readable").to_vec();
    assert!(exec.move_tensor(w, PoolId(1)).is_err());
    assert_eq!(exec.read_f32(w).expect("still readable"), &before[..]);
    exec.step().expect("still runs");
}

#[test]
fn reset_state_replays_the_same_steps_and_placements_can_change_between_them() {
    let model = placer_zoo::build("mlp", 8).expect("zoo");
    let mut exec =
        Executor::new(&model, two_pools(), &PoolAssignment::all_in(&model, PoolId(0)), 5).expect("allocates");
    let run = |exec: &mut Executor<'_>| -> Vec<f32> {
        (0..3)
            .map(|_| {
                exec.step().expect("step");
                exec.loss().expect("loss").expect("has a loss")
            })
            .collect()
    };
    let first = run(&mut exec);
    exec.reset_state(5).expect("reset");
    // Moving every tensor to the other pool (a copy: the pools do not share memory)
    // changes nothing about the numbers.
    let moved = exec.set_placement(&PoolAssignment::all_in(&model, PoolId(1))).expect("moves");
    assert_eq!(moved, model.tensors().len());
    assert_eq!(run(&mut exec), first, "bit-identical after a reset");
    assert!(exec.pools().pool(PoolId(0)).in_use() <= exec.pools().pool(PoolId(0)).peak());
}

#[test]
fn a_step_of_some_nodes_runs_those_nodes_only() {
    let model = placer_zoo::build("mlp", 4).expect("zoo");
    let mut exec = Executor::new(&model, dram(), &PoolAssignment::all_in(&model, PoolId(0)), 2).expect("allocates");
    let loss_node = model.schedule().iter().copied().find(|&n| model.node(n).op == placer_ir::Op::SoftmaxCrossEntropy);
    let loss_node = loss_node.expect("mlp has a loss");
    let first = model.schedule()[0];
    let times = exec.step_nodes(&[first]).expect("runs one node");
    assert_eq!(times.kernel_ns.len(), 1);
    assert!(times.kernel_ns[0] > 0.0);
    assert_eq!(exec.loss().expect("reads"), Some(0.0), "the loss kernel did not run: its output is still zero");
    let times = exec.step_nodes(&[loss_node]).expect("runs the loss alone, on whatever its inputs hold");
    assert_eq!(times.kernel_ns.len(), 1);
    assert!(exec.loss().expect("reads").is_some_and(|l| l > 0.0));
    assert_eq!(exec.step().expect("whole step").kernel_ns.len(), model.schedule().len());
}

#[test]
fn a_resident_plan_holds_only_live_tensors_and_computes_the_same_steps() {
    let model = placer_zoo::build("lenet-mnist", 64).expect("zoo");
    let footprint: u64 = model.tensors().iter().map(|t| t.bytes).sum();
    let peak = placer_ir::MemoryProfile::new(&model, &placer_ir::Liveness::new(&model)).peak_bytes;
    // Every other tensor in the second pool: each tensor keeps the offset it has when
    // all are in the first, and no arena is larger than that one packing.
    let placement = PoolAssignment((0..model.tensors().len()).map(|i| PoolId((i % 2) as u16)).collect());
    let plan = ExecPlan::resident(&model, &placement, 2);
    plan.validate(&model, 2).expect("a valid plan");
    assert!(plan.moves.is_empty());
    let one = ExecPlan::resident(&model, &PoolAssignment::all_in(&model, PoolId(0)), 2);
    let packing = one.arena_bytes[0];
    assert!(
        packing >= peak && packing < footprint * 3 / 4,
        "packing {packing}, peak live {peak}, footprint {footprint}"
    );
    assert_eq!(one.arena_bytes[1], 0, "an unused pool reserves nothing");
    assert!(plan.arena_bytes.iter().all(|&a| a > 0 && a <= packing), "{:?} against {packing}", plan.arena_bytes);
    for (t, (spans, base)) in plan.spans.iter().zip(&one.spans).enumerate() {
        assert_eq!(spans[0].offset, base[0].offset, "{}", model.tensors()[t].name);
        assert_eq!(spans[0].pool, placement.0[t]);
    }
    let mut live = PlanExecutor::new(&model, two_pools(), plan, 9).expect("reserves");
    let mut resident = Executor::new(&model, two_pools(), &placement, 9).expect("allocates");
    for _ in 0..3 {
        live.step().expect("live step");
        resident.step().expect("resident step");
        assert_eq!(live.loss(), resident.loss().expect("loss"), "tensors that share bytes never meet");
    }
    // The two pools share memory (both the heap), so the second's tensors sit in the
    // first's arena, at the bytes they have when all are there: step by step, the first
    // pool holds as much as it does with every tensor in it.
    let mut all_in_first = PlanExecutor::new(&model, two_pools(), one, 9).expect("reserves");
    let (split, whole) = (live.step().expect("live step"), all_in_first.step().expect("step"));
    assert_eq!(split.dram_bytes, whole.dram_bytes, "one packing, one arena for memory the pools share");
}

/// x → matmul → · scale → RMS norm → sigmoid, clip → dropout → + bias → · gate →
/// hard swish → · its hard sigmoid → matmul → loss: every newer op (broadcast operands,
/// a u8 mask, the hard activations) in one graph.
fn newer_ops_model(batch: u64) -> placer_ir::Model {
    use placer_ir::DType;
    let mut g = placer_zoo::GraphBuilder::new();
    let x = g.input("x", &[batch, 8], DType::F32);
    let labels = g.input("labels", &[batch], DType::I32);
    let w1 = g.weight("fc1.weight", &[8, 32]);
    let h = g.matmul("fc1", x, w1, false, 1.0).expect("shapes fit");
    let s = g.weight("scale", &[32]);
    let h = g.mul("scaled", h, s);
    let h = g.rms_norm("norm", h, 1e-6);
    let gate = g.sigmoid("gate", h);
    let h = g.clip("relu6", h, 0.0, 6.0);
    let h = g.dropout("drop", h, 0.25);
    let b = g.weight("bias", &[32]);
    let h = g.add("biased", h, b);
    let h = g.mul("gated", h, gate);
    let h = g.hard_swish("hswish", h);
    let hgate = g.hard_sigmoid("hgate", h, 1.0 / 6.0, 0.5);
    let h = g.mul("hgated", h, hgate);
    let w2 = g.weight("fc2.weight", &[32, 10]);
    let logits = g.matmul("fc2", h, w2, false, 1.0).expect("shapes fit");
    let loss = g.softmax_cross_entropy("loss", logits, labels);
    let opt = placer_zoo::Optimizer { lr: 0.1, momentum: 0.9 };
    g.finish("newer-ops", Default::default(), loss, opt).expect("valid")
}

#[test]
fn newer_ops_train_and_plans_run_them_alike() {
    let model = newer_ops_model(16);
    let l = losses(&model, 12, 4);
    assert!(l.iter().all(|x| x.is_finite()), "{l:?}");
    assert!(l[11] < 0.8 * l[0], "loss did not fall: {l:?}");
    assert_eq!(losses(&model, 3, 4), l[..3], "deterministic, the dropout mask included");

    let mask = model.tensor_id("drop.mask").expect("mask");
    let mut exec = Executor::new(&model, dram(), &PoolAssignment::all_in(&model, PoolId(0)), 4).expect("allocates");
    exec.step().expect("step");
    let kept = exec.read_bytes(mask).expect("mask bytes");
    assert_eq!(kept.len(), 16 * 32);
    assert!(kept.iter().all(|&m| m <= 1) && kept.contains(&0) && kept.contains(&1));

    // The same steps from a plan whose arenas hold the u8 mask between f32 tensors.
    let placement = PoolAssignment((0..model.tensors().len()).map(|i| PoolId((i % 2) as u16)).collect());
    let plan = ExecPlan::resident(&model, &placement, 2);
    plan.validate(&model, 2).expect("a valid plan");
    let mut live = PlanExecutor::new(&model, two_pools(), plan, 4).expect("reserves");
    let mut resident = Executor::new(&model, two_pools(), &placement, 4).expect("allocates");
    for _ in 0..3 {
        live.step().expect("live step");
        resident.step().expect("resident step");
        assert_eq!(live.loss(), resident.loss().expect("loss"));
    }
}

#[test]
fn a_kernel_held_alone_computes_what_it_computes_in_the_step_in_only_its_operands_memory() {
    let model = placer_zoo::build("mlp", 4).expect("zoo");
    let placement = PoolAssignment::all_in(&model, PoolId(1));
    let n = model.schedule()[0];
    let operands = model.node(n).operands();
    // The whole executor: the first kernel's output after one run of it.
    let mut whole = Executor::new(&model, two_pools(), &placement, 9).expect("allocates");
    whole.step_nodes(&[n]).expect("runs");
    let out = model.node(n).outputs[0];
    let expected = whole.read_f32(out).expect("output").to_vec();

    let mut alone = Executor::holding_none(&model, two_pools()).expect("scratch only");
    assert_eq!(alone.pools().pool(PoolId(1)).in_use(), 0);
    alone.hold(&operands, &placement, 9).expect("holds");
    let held: u64 = operands.iter().map(|&t| model.tensor(t).bytes).sum();
    assert!(alone.pools().pool(PoolId(1)).in_use() >= held, "the operands are in their pool");
    assert!(alone.pools().pool(PoolId(1)).in_use() < held + (1 << 20), "and nothing else is");
    assert_eq!(alone.as_in_a_step(n).expect("held"), cfg!(target_arch = "x86_64"));
    let times = alone.step_nodes(&[n]).expect("runs alone");
    assert!(times.kernel_ns[0] > 0.0);
    assert_eq!(alone.read_f32(out).expect("output"), expected.as_slice(), "the same inputs, the same output");

    // A kernel whose operands are not held is refused, naming the tensor.
    let other = model.schedule()[1];
    let not_held: Vec<_> = model.node(other).operands().into_iter().filter(|t| !operands.contains(t)).collect();
    let missing = *not_held.first().expect("another tensor");
    let err = alone.step_nodes(&[other]).expect_err("not held").to_string();
    assert!(
        err.contains("not held by this executor") && not_held.iter().any(|&t| err.contains(&model.tensor(t).name)),
        "{err}"
    );
    // Holding another set releases the first.
    alone.hold(&[missing], &placement, 9).expect("holds");
    let in_use = alone.pools().pool(PoolId(1)).in_use();
    assert!(in_use >= model.tensor(missing).bytes && in_use < model.tensor(missing).bytes + (1 << 20), "{in_use}");
}

#[test]
fn holding_again_keeps_what_a_tensor_holds_and_refills_a_buffer_another_had() {
    let model = placer_zoo::build("mlp", 4).expect("zoo");
    let n = model.schedule()[0];
    let operands = model.node(n).operands();
    let out = model.node(n).outputs[0];
    let read = |e: &Executor<'_>| -> Vec<Vec<f32>> {
        operands.iter().map(|&t| e.read_f32(t).expect("f32").to_vec()).collect()
    };
    let mut alone = Executor::holding_none(&model, two_pools()).expect("scratch only");
    alone.hold(&operands, &PoolAssignment::all_in(&model, PoolId(1)), 9).expect("holds");
    let start = read(&alone);
    alone.step_nodes(&[n]).expect("runs alone");
    let after = read(&alone);
    let at = operands.iter().position(|&t| t == out).expect("the output is an operand");
    assert_ne!(after[at], start[at], "the kernel wrote its output");
    // The same operands again, in the other pool (the same memory here): each keeps its
    // buffer and what the kernel left in it, as between two repetitions.
    alone.hold(&operands, &PoolAssignment::all_in(&model, PoolId(0)), 9).expect("holds again");
    assert_eq!(read(&alone), after);
    let held: u64 = operands.iter().map(|&t| model.tensor(t).bytes).sum();
    assert_eq!(alone.pools().pool(PoolId(1)).in_use(), 0, "nothing left in the first pool");
    assert!(alone.pools().pool(PoolId(0)).in_use() >= held);
    // A tensor as long as the output takes the output's buffer, refilled to its own
    // starting contents, as a fresh executor fills it.
    let bytes = model.tensor(out).bytes;
    let other = (0..model.tensors().len() as u32)
        .map(TensorId)
        .find(|&t| !operands.contains(&t) && model.tensor(t).bytes == bytes)
        .expect("the next layer's tensors are as long");
    let dram = PoolAssignment::all_in(&model, PoolId(0));
    alone.hold(&[other], &dram, 9).expect("holds another");
    let mut fresh = Executor::holding_none(&model, two_pools()).expect("scratch only");
    fresh.hold(&[other], &dram, 9).expect("holds");
    assert_eq!(alone.read_f32(other).expect("f32"), fresh.read_f32(other).expect("f32"));
    assert_eq!(alone.pools().pool(PoolId(0)).in_use(), fresh.pools().pool(PoolId(0)).in_use());
}
