//! The analyses against hand-derived facts and against brute-force reference
//! implementations on the MLP fixture.

use placer_ir::analysis::{config_count, conflict_graph, footprint_bytes};
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
