//! Configurations, dedupe and pass packing on small zoo models.

use placer_ir::{Model, NodeId, Role, TensorId};
use placer_profile::Pin;
use proptest::prelude::*;
use std::collections::{BTreeSet, HashMap};

fn model(name: &str, batch: u64) -> Model {
    placer_zoo::build(name, batch).expect("zoo")
}

#[test]
fn every_node_contributes_pools_to_the_power_of_its_operands() {
    let m = model("mlp", 2);
    let list = placer_profile::enumerate_tasks(&m, 2, &[], placer_profile::Rules::default()).expect("enumerates");
    let expected: u128 = m.nodes().iter().map(|n| 1u128 << n.operands().len()).sum();
    assert_eq!(list.counts.per_node, expected);
    let updates: u128 = m
        .nodes()
        .iter()
        .map(|n| (1u128 << (n.operands().len() + n.updates.len())) - (1u128 << n.operands().len()))
        .sum();
    assert_eq!(list.counts.in_place, updates, "an in-place tensor is one location, not a read and a write");
    assert_eq!(list.counts.naive, expected + updates);
    assert_eq!(list.counts.max_per_node, m.nodes().iter().map(|n| 1u128 << n.operands().len()).max().expect("nodes"));
    // Three pools: 3^k per node.
    let three = placer_profile::enumerate_tasks(&m, 3, &[], placer_profile::Rules::default()).expect("enumerates");
    assert_eq!(three.counts.per_node, m.nodes().iter().map(|n| 3u128.pow(n.operands().len() as u32)).sum());
}

#[test]
fn identical_kernels_are_measured_once() {
    // ResNet-18 repeats its basic blocks: many nodes share a signature.
    let m = model("resnet18", 1);
    let list = placer_profile::enumerate_tasks(&m, 2, &[], placer_profile::Rules::default()).expect("enumerates");
    assert!(list.counts.unique < list.counts.per_node as usize, "{:?}", list.counts);
    let distinct: BTreeSet<u64> = list.signatures.iter().copied().collect();
    assert!(distinct.len() < m.nodes().len());
    // Every task's instances really have its signature.
    for t in &list.tasks {
        assert!(t.instances.iter().all(|n| list.signatures[n.index()] == t.signature));
    }
}

#[test]
fn pins_fix_tensors_and_are_checked() {
    let m = model("mlp", 2);
    let pools = ["dram".to_string(), "pmem".to_string()];
    let pin = Pin::parse("role=weight:dram", &m, &pools).expect("valid pin");
    let pinned = placer_profile::enumerate_tasks(&m, 2, &[pin], placer_profile::Rules::default()).expect("enumerates");
    let free = placer_profile::enumerate_tasks(&m, 2, &[], placer_profile::Rules::default()).expect("enumerates");
    assert_eq!(pinned.counts.per_node + pinned.counts.pinned, free.counts.per_node);
    let weights: BTreeSet<_> =
        m.tensors().iter().enumerate().filter(|(_, t)| t.role == Role::Weight).map(|(i, _)| i).collect();
    for t in &pinned.tasks {
        let node = m.node(t.instances[0]);
        for (op, &pool) in node.operands().iter().zip(&t.config) {
            if weights.contains(&op.index()) {
                assert_eq!(pool, 0, "weights stay in dram");
            }
        }
    }
    for (bad, expected) in [
        ("role=weights:dram", "unknown role 'weights'"),
        ("role=weight:hbm", "unknown pool 'hbm'"),
        ("tensor=nope:dram", "no tensor 'nope'"),
        ("weight:dram", "expected role=ROLE:POOL"),
    ] {
        let err = Pin::parse(bad, &m, &pools).expect_err(bad).to_string();
        assert!(err.contains(expected) && err.starts_with(&format!("--pin {bad}")), "{err}");
    }
}

fn check_plan(m: &Model, max: usize, two_hop: bool) {
    let list = placer_profile::enumerate_tasks(m, 2, &[], placer_profile::Rules::default()).expect("enumerates");
    let plan = placer_profile::schedule_passes(m, &list.tasks, max, two_hop);
    let conflicts = placer_profile::conflicts(m, two_hop);
    let mut seen = vec![0usize; list.tasks.len()];
    for pass in &plan {
        assert!(!pass.is_empty() && pass.len() <= max.max(1));
        for (i, a) in pass.iter().enumerate() {
            for b in &pass[i + 1..] {
                assert_ne!(a.node, b.node, "a node is measured once per pass");
                if two_hop {
                    assert!(!conflicts[a.node.index()].contains(&b.node), "{a:?} and {b:?} conflict");
                }
            }
        }
        // Whatever two picks touch, they want it in the same pool.
        let mut pool_of: HashMap<TensorId, u16> = HashMap::new();
        for p in pass {
            for (t, &pool) in m.node(p.node).operands().into_iter().zip(&list.tasks[p.task].config) {
                assert_eq!(
                    *pool_of.entry(t).or_insert(pool),
                    pool,
                    "{p:?} moves {t:?}, which another pick wants elsewhere"
                );
            }
        }
        for p in pass {
            seen[p.task] += 1;
            assert!(list.tasks[p.task].instances.contains(&p.node));
        }
    }
    assert!(seen.iter().all(|&s| s == 1), "every task exactly once");
    assert!(plan.len() >= placer_profile::lower_bound(m, &list.tasks, max, two_hop), "below the lower bound");
    if max == 1 {
        assert_eq!(plan.len(), list.tasks.len());
    }
}

#[test]
fn passes_are_conflict_free_and_cover_every_task_once() {
    let m = model("lenet-mnist", 4);
    for max in [1, 2, 8, 64] {
        check_plan(&m, max, false);
        check_plan(&m, max, true);
    }
    let list = placer_profile::enumerate_tasks(&m, 2, &[], placer_profile::Rules::default()).expect("enumerates");
    let single = placer_profile::schedule_passes(&m, &list.tasks, 1, false).len();
    let batched = placer_profile::schedule_passes(&m, &list.tasks, 64, false).len();
    let two_hop = placer_profile::schedule_passes(&m, &list.tasks, 64, true).len();
    assert!(batched * 4 < single, "{batched} passes against {single}");
    assert!(two_hop >= batched);
    assert!(batched as u128 >= list.counts.max_per_node / 4, "cannot beat the bound by more than sharing allows");
}

#[test]
fn neighbours_that_agree_on_their_shared_tensors_share_a_pass() {
    let m = model("mlp", 2);
    let list = placer_profile::enumerate_tasks(&m, 2, &[], placer_profile::Rules::default()).expect("enumerates");
    let all_dram: Vec<_> = list.tasks.iter().filter(|t| t.config.iter().all(|&p| p == 0)).cloned().collect();
    assert!(all_dram.len() > 1 && all_dram.len() <= 64);
    assert_eq!(
        placer_profile::schedule_passes(&m, &all_dram, 64, false).len(),
        1,
        "nothing disagrees, so one pass holds them all"
    );
    assert!(
        placer_profile::schedule_passes(&m, &all_dram, 64, true).len() > 1,
        "two-hop packing keeps neighbours apart"
    );
    // Two configurations of one node never share a pass, even at another instance.
    let one_node: Vec<_> = list.tasks.iter().filter(|t| t.signature == list.tasks[0].signature).cloned().collect();
    let instances = one_node[0].instances.len();
    assert_eq!(placer_profile::schedule_passes(&m, &one_node, 64, false).len(), one_node.len().div_ceil(instances));
}

#[test]
fn samples_are_deterministic_subsets() {
    let m = model("lenet-mnist", 4);
    let list = placer_profile::enumerate_tasks(&m, 2, &[], placer_profile::Rules::default()).expect("enumerates");
    let a = placer_profile::sample_tasks(list.tasks.clone(), 50, 7);
    let b = placer_profile::sample_tasks(list.tasks.clone(), 50, 7);
    let c = placer_profile::sample_tasks(list.tasks.clone(), 50, 8);
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(a.len(), 50);
    assert!(a.iter().all(|t| list.tasks.contains(t)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn packing_invariants_hold_for_any_limit(max in 1usize..40, two_hop in any::<bool>(), batch in 1u64..4) {
        check_plan(&model("mlp", batch), max, two_hop);
    }
}

#[test]
fn wide_concatenations_move_their_inputs_as_one_group() {
    let m = model("densenet121", 1);
    let list = placer_profile::enumerate_tasks(&m, 2, &[], placer_profile::Rules::default())
        .expect("grouping keeps every node under the limit");
    assert!(!list.counts.grouped_nodes.is_empty());
    assert!(list.counts.max_per_node <= placer_profile::MAX_CONFIGS_PER_NODE);
    for t in &list.tasks {
        let node = m.node(t.instances[0]);
        if list.counts.grouped_nodes.contains(&node.name) {
            let inputs = &t.config[..node.inputs.len()];
            assert!(inputs.iter().all(|&p| p == inputs[0]), "{}: {:?}", node.name, t.config);
        }
    }
}

#[test]
fn negligible_operands_stay_in_the_default_pool() {
    // Batch-norm's scale, shift and statistics are a few hundred floats beside
    // activations of 64x56x56 per image.
    let m = model("resnet18", 2);
    let strict = placer_profile::Rules { negligible: 0.0, ..placer_profile::Rules::default() };
    let all = placer_profile::enumerate_tasks(&m, 2, &[], strict).expect("enumerates");
    let list = placer_profile::enumerate_tasks(&m, 2, &[], placer_profile::Rules::default()).expect("enumerates");
    assert_eq!(all.counts.negligible, 0, "no kernel of the op set leaves an operand untouched");
    assert_eq!(list.counts.per_node + list.counts.negligible, all.counts.per_node);
    // The stem's: the largest activations (at the last layers, the scale is over 0.1%).
    let bn = (0..m.nodes().len())
        .filter(|&i| m.node(NodeId(i as u32)).op.to_string() == "batch_norm_backward")
        .max_by_key(|&i| m.tensor(m.node(NodeId(i as u32)).inputs[0]).bytes)
        .expect("a batch-norm backward");
    let node = m.node(NodeId(bn as u32));
    let negligible = placer_profile::negligible_operands(&m, NodeId(bn as u32), placer_profile::NEGLIGIBLE_SHARE);
    let large: Vec<bool> = node.operands().iter().map(|&t| m.tensor(t).shape.iter().product::<u64>() > 1024).collect();
    assert_eq!(negligible, large.iter().map(|l| !l).collect::<Vec<_>>(), "exactly the small operands");
    let ours = list.tasks.iter().filter(|t| t.instances.contains(&NodeId(bn as u32))).count();
    assert_eq!(ours, 1 << large.iter().filter(|&&l| l).count(), "2^(large operands) configurations");
    for t in list.tasks.iter().filter(|t| t.instances.contains(&NodeId(bn as u32))) {
        assert!(t.config.iter().zip(&negligible).all(|(&p, &n)| !n || p == 0), "{:?}", t.config);
    }
}

#[test]
fn kernels_timed_alone_fill_every_pass_and_take_one_instance_a_pass_in_turn() {
    let m = model("resnet18", 1);
    let list = placer_profile::enumerate_tasks(&m, 2, &[], placer_profile::Rules::default()).expect("enumerates");
    let alone = placer_profile::schedule_alone(&list.tasks, 64);
    assert_eq!(alone.len(), list.tasks.len().div_ceil(64), "every pass but the last is full");
    let picked: Vec<usize> = alone.iter().flatten().map(|p| p.task).collect();
    assert_eq!(picked, (0..list.tasks.len()).collect::<Vec<_>>(), "each task once, in order");
    assert!(alone.iter().flatten().all(|p| list.tasks[p.task].instances.contains(&p.node)));
    // Shared steps need more passes: a node is picked once a pass, and picks agree on
    // shared tensors' pools. Alone, a node appears in a pass once per configuration.
    let shared = placer_profile::schedule_passes(&m, &list.tasks, 64, false);
    assert!(alone.len() < shared.len(), "{} alone against {} shared", alone.len(), shared.len());
    assert!(alone.iter().any(|pass| {
        let nodes: BTreeSet<NodeId> = pass.iter().map(|p| p.node).collect();
        nodes.len() < pass.len()
    }));
    // Within a pass, a signature's tasks that share their instances take one node, so
    // its operands stay held from one configuration to the next.
    for pass in &alone {
        let mut node_of: HashMap<(u64, &[NodeId]), NodeId> = HashMap::new();
        for p in pass {
            let t = &list.tasks[p.task];
            let node = *node_of.entry((t.signature, t.instances.as_slice())).or_insert(p.node);
            assert_eq!(node, p.node, "one node per signature and pass");
        }
    }
    // Across passes (small ones here), a signature with several instances and several
    // tasks is measured at several nodes.
    let small = placer_profile::schedule_alone(&list.tasks, 2);
    let mut nodes_of: HashMap<u64, BTreeSet<NodeId>> = HashMap::new();
    for p in small.iter().flatten() {
        nodes_of.entry(list.tasks[p.task].signature).or_default().insert(p.node);
    }
    let (&sig, _) = nodes_of.iter().max_by_key(|(_, n)| n.len()).expect("signatures");
    let t = list.tasks.iter().find(|t| t.signature == sig).expect("a task");
    assert!(t.instances.len() >= 2 && nodes_of[&sig].len() >= 2, "{:?}", nodes_of[&sig]);
}
