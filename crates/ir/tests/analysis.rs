//! The analyses against hand-derived facts and against brute-force reference
//! implementations on the MLP fixture.

use placer_ir::analysis::{cold_reads, config_count, conflict_graph, footprint_bytes};
use placer_ir::{Liveness, MemoryProfile, Model, NodeId, parse_model};

fn mlp() -> Model {
    parse_model(include_str!("data/mlp.json")).expect("fixture is valid")
}

fn range(model: &Model, live: &Liveness, name: &str) -> (usize, usize) {
    let r = live.ranges[model.tensor_id(name).expect("tensor exists").index()];
    (r.first, r.last)
}

#[test]
fn live_ranges_follow_the_documented_rules() {
    let model = mlp();
    let live = Liveness::new(&model);
    let last = model.schedule().len() - 1;
    assert_eq!(range(&model, &live, "fc1.weight"), (0, last), "weights persist");
    assert_eq!(range(&model, &live, "fc2.bias.velocity"), (0, last), "optimizer state persists");
    assert_eq!(range(&model, &live, "x"), (0, 12), "inputs live from step 0 to their last reader");
    assert_eq!(range(&model, &live, "logits.grad"), (6, 9), "producer to last reader");
    assert_eq!(range(&model, &live, "loss"), (5, 5), "an unread output lives at its producer only");
    assert_eq!(range(&model, &live, "fc1.weight.grad"), (12, 13), "read by its update");
}

#[test]
fn live_bytes_match_a_brute_force_count() {
    let model = mlp();
    let live = Liveness::new(&model);
    let profile = MemoryProfile::new(&model, &live);
    let brute: Vec<u64> = (0..model.schedule().len())
        .map(|step| {
            model
                .tensors()
                .iter()
                .zip(&live.ranges)
                .filter(|(_, r)| r.first <= step && step <= r.last)
                .map(|(t, _)| t.bytes)
                .sum()
        })
        .collect();
    assert_eq!(profile.live_bytes, brute);
    let peak = *brute.iter().max().expect("steps");
    assert_eq!(profile.peak_bytes, peak);
    assert_eq!(brute.iter().position(|&b| b == peak), Some(profile.peak_step));
    assert!(profile.peak_bytes <= footprint_bytes(&model));
    assert_eq!(footprint_bytes(&model), model.tensors().iter().map(|t| t.bytes).sum::<u64>());
}

#[test]
fn conflicts_are_exactly_the_nodes_that_share_a_tensor() {
    let model = mlp();
    let graph = conflict_graph(&model);
    for (a, na) in model.nodes().iter().enumerate() {
        let mut expected: Vec<NodeId> = model
            .nodes()
            .iter()
            .enumerate()
            .filter(|&(b, nb)| b != a && na.operands().iter().any(|t| nb.operands().contains(t)))
            .map(|(b, _)| NodeId(b as u32))
            .collect();
        expected.sort_unstable();
        assert_eq!(graph[a], expected, "node {}", na.name);
    }
    let id = |name: &str| model.node_id(name).expect("node exists");
    // The weight links its forward use, its gradient's consumer and its update.
    assert!(graph[id("fc1.matmul").index()].contains(&id("fc1.weight.sgd")));
    assert!(!graph[id("fc1.matmul").index()].contains(&id("fc2.matmul")));
}

#[test]
fn configurations_grow_as_pools_to_the_operand_count() {
    let model = mlp();
    let id = |name: &str| model.node_id(name).expect("node exists");
    // matmul: x, weight, output
    assert_eq!(config_count(&model, id("fc1.matmul"), 2), 8);
    assert_eq!(config_count(&model, id("fc1.matmul"), 3), 27);
    // softmax_cross_entropy: logits, labels, loss, probs
    assert_eq!(config_count(&model, id("loss"), 2), 16);
    // sgd_momentum: gradient plus the two tensors it updates in place
    assert_eq!(config_count(&model, id("fc2.bias.sgd"), 4), 64);
    assert_eq!(config_count(&model, id("fc2.bias.sgd"), 1), 1);
}

/// The tensors touched strictly between `t`'s last touch before schedule position `pos`
/// (in this step, else the step before) and `pos`, `t` left out: by set, not by walk.
fn touched_since(model: &Model, t: placer_ir::TensorId, pos: usize) -> u64 {
    let steps = model.schedule().len();
    let touches = |p: usize| model.node(model.schedule()[p]).operands().contains(&t);
    let back = (1..steps).find(|&b| touches((pos + steps - b) % steps)).unwrap_or(steps);
    let mut between: Vec<placer_ir::TensorId> = (1..back)
        .flat_map(|b| model.node(model.schedule()[(pos + steps - b) % steps]).operands())
        .filter(|&u| u != t)
        .collect();
    between.sort_unstable();
    between.dedup();
    between.iter().map(|&u| model.tensor(u).bytes).sum()
}

#[test]
fn cold_reads_are_the_reads_a_cache_of_that_size_has_lost_by_a_brute_force_count() {
    let model = mlp();
    let largest = model.tensors().iter().map(|t| t.bytes).max().expect("tensors");
    for cache in [0, 1, largest / 2, largest, 4 * largest, footprint_bytes(&model), u64::MAX] {
        let cold = cold_reads(&model, cache);
        assert_eq!(cold.len(), model.nodes().len());
        for (pos, &n) in model.schedule().iter().enumerate() {
            let node = model.node(n);
            let mut expected: Vec<_> = node
                .inputs
                .iter()
                .chain(&node.updates)
                .copied()
                .filter(|&t| touched_since(&model, t, pos) > cache)
                .collect();
            expected.dedup();
            let mut got = cold[n.index()].clone();
            got.sort_unstable();
            expected.sort_unstable();
            assert_eq!(got, expected, "{} at a cache of {cache} B", node.name);
        }
    }
    // Nothing is lost from a cache that holds every tensor; a weight read first in the
    // step is lost from one smaller than the rest of the step.
    assert!(cold_reads(&model, footprint_bytes(&model)).iter().all(Vec::is_empty));
    let fc1 = model.nodes().iter().position(|n| n.inputs.contains(&model.tensor_id("fc1.weight").expect("w")));
    let fc1 = fc1.expect("a reader of fc1.weight");
    assert!(cold_reads(&model, 0)[fc1].contains(&model.tensor_id("fc1.weight").expect("w")));
}
