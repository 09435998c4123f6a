//! The zoo's graphs against published facts about the networks they claim to be.

use placer_ir::analysis::{forward_cost, role_totals};
use placer_ir::{Phase, Role};

fn params(name: &str) -> u64 {
    let model = placer_zoo::build(name, 1).expect("zoo model builds");
    role_totals(&model, Role::Weight).1
}

/// Parameter counts of the reference implementations the zoo follows
/// (torchvision's `sum(p.numel() for p in model.parameters())`).
#[test]
fn parameter_counts_match_the_reference_implementations() {
    for (name, expected) in [
        ("resnet18", 11_689_512),
        ("resnet50", 25_557_032),
        ("vgg16", 138_357_544),
        ("vgg19", 143_667_240),
        ("densenet121", 7_978_856),
        // torchvision inception_v3 has 27,161,264 including the auxiliary head
        // (3,326,696: 1x1 conv 768->128 + BN, 5x5 conv 128->768 + BN, fc 768->1000).
        ("inception-v3", 27_161_264 - 3_326_696),
        ("lenet-mnist", 61_706),
        // Flux's model-zoo MNIST convnet: 3x3 convs 1->16, 16->32, 32->32 (160 + 4,640 +
        // 9,248) and dense 288->10 (2,890).
        ("autotm-mnist", 160 + 4_640 + 9_248 + 2_890),
    ] {
        assert_eq!(params(name), expected, "{name}");
    }
}

#[test]
fn bert_base_has_about_110m_parameters() {
    // Embeddings 23,837,184 + 12 layers x 7,087,872 + classifier 768x2+2; the published
    // 110M (109,482,240 in the reference code) also counts the 590,592-parameter pooler.
    let p = params("bert-base");
    assert_eq!(p, 23_837_184 + 12 * 7_087_872 + 1_538);
    assert!((p as f64 / 110e6 - 1.0).abs() < 0.02, "{p}");
}

#[test]
fn resnet50_forward_is_about_4_1_gmacs_per_image() {
    // He et al. report 3.8 G and torchvision 4.09 G "FLOPs" per 224x224 image; both
    // count multiply-accumulates of convolutions and the classifier.
    for batch in [1, 4] {
        let model = placer_zoo::build("resnet50", batch).expect("builds");
        let per_image = forward_cost(&model).macs as f64 / batch as f64;
        assert!((4.0e9..4.2e9).contains(&per_image), "{per_image}");
    }
}

#[test]
fn vgg16_forward_is_about_15_5_gmacs_per_image() {
    let model = placer_zoo::build("vgg16", 1).expect("builds");
    let macs = forward_cost(&model).macs as f64;
    assert!((15.3e9..15.6e9).contains(&macs), "{macs}");
}

#[test]
fn every_model_is_a_training_step() {
    for entry in placer_zoo::entries() {
        let model = placer_zoo::build(entry.name, 2).expect("builds");
        let weights = model.tensors().iter().filter(|t| t.role == Role::Weight).count();
        let phases: Vec<Phase> = (0..model.nodes().len()).map(|i| model.phase(placer_ir::NodeId(i as u32))).collect();
        let updates = phases.iter().filter(|&&p| p == Phase::Update).count();
        assert_eq!(updates, weights, "{}: one update per weight", entry.name);
        assert!(phases.contains(&Phase::Backward), "{}", entry.name);
        // Updates come after the forward pass and the loss.
        let first_update = model.schedule().iter().position(|&n| model.phase(n) == Phase::Update);
        let last_forward = model.schedule().iter().rposition(|&n| model.phase(n) == Phase::Forward);
        assert!(first_update > last_forward, "{}", entry.name);
    }
}

#[test]
fn batch_size_scales_activations_not_weights() {
    let small = placer_zoo::build("resnet18", 2).expect("builds");
    let large = placer_zoo::build("resnet18", 8).expect("builds");
    assert_eq!(role_totals(&small, Role::Weight), role_totals(&large, Role::Weight));
    // Every activation scales with the batch except the scalar loss (4 bytes).
    let act = |m| role_totals(m, Role::Activation).0 - 4;
    assert_eq!(act(&large), 4 * act(&small));
}

#[test]
fn unknown_model_and_bad_batch_are_errors() {
    let err = placer_zoo::build("resnet51", 1).expect_err("unknown");
    assert!(err.to_string().contains("available: lenet-mnist"), "{err}");
    assert!(placer_zoo::build("mlp", 0).is_err());
    assert!(placer_zoo::build("mlp", u64::MAX).is_err());
}

/// Every zoo schedule runs each node once, after the producers of everything it reads
/// and before anything updates what it reads in place.
#[test]
fn every_schedule_respects_its_dependencies() {
    for entry in placer_zoo::entries() {
        let model = placer_zoo::build(entry.name, 1).expect("builds");
        let live = placer_ir::Liveness::new(&model);
        let mut seen = vec![false; model.nodes().len()];
        for &n in model.schedule() {
            assert!(!std::mem::replace(&mut seen[n.index()], true), "{}: node twice", entry.name);
            let node = model.node(n);
            for &t in node.inputs.iter().chain(&node.updates) {
                if let Some(p) = model.producer(t) {
                    assert!(live.step_of[p.index()] < live.step_of[n.index()], "{}: {}", entry.name, node.name);
                }
            }
        }
        assert!(seen.iter().all(|&s| s), "{}: every node scheduled", entry.name);
        let mut last_read = vec![0; model.tensors().len()];
        for (i, node) in model.nodes().iter().enumerate() {
            for &t in &node.inputs {
                last_read[t.index()] = last_read[t.index()].max(live.step_of[i]);
            }
        }
        for (i, node) in model.nodes().iter().enumerate() {
            for &w in &node.updates {
                assert!(live.step_of[i] > last_read[w.index()], "{}: {} reads after an update", entry.name, node.name);
            }
        }
    }
}
