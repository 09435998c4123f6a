//! The builder's newer ops end to end: a small graph with a broadcast scale and bias,
//! RMS norm, sigmoid, clip, dropout, hard swish and hard sigmoid is differentiated,
//! validated, and has exactly the backward nodes, saved tensors and gradients the rules
//! in docs/ops.md describe.

use placer_ir::{AttrValue, DType, Model, Op, Role};
use placer_zoo::{GraphBuilder, Optimizer, ZooError};
use std::collections::BTreeMap;

/// x [4, 8] → matmul → · scale [16] → RMS norm → sigmoid → clip → dropout → + bias [16]
/// → · gate (same shape) → hard swish → · its hard sigmoid → matmul → loss.
fn tiny(g: &mut GraphBuilder) -> placer_zoo::T {
    let x = g.input("x", &[4, 8], DType::F32);
    let labels = g.input("labels", &[4], DType::I32);
    let w1 = g.weight("fc1.weight", &[8, 16]);
    let h = g.matmul("fc1", x, w1, false, 1.0).expect("shapes fit");
    let s = g.weight("scale", &[16]);
    let h = g.mul("scaled", h, s);
    let gamma = g.weight("norm.gamma", &[16]);
    let h = g.rms_norm_with("norm", h, gamma, 1e-6);
    let gate = g.sigmoid("gate", h);
    let h = g.clip("relu6", h, 0.0, 6.0);
    let h = g.dropout("drop", h, 0.25);
    let b = g.weight("bias", &[16]);
    let h = g.add("biased", h, b);
    let h = g.mul("gated", h, gate);
    let h = g.hard_swish("hswish", h);
    let hgate = g.hard_sigmoid("hgate", h, 1.0 / 6.0, 0.5);
    let h = g.mul("hgated", h, hgate);
    let w2 = g.weight("fc2.weight", &[16, 10]);
    let logits = g.matmul("fc2", h, w2, false, 1.0).expect("shapes fit");
    g.softmax_cross_entropy("loss", logits, labels)
}

fn build() -> Model {
    let mut g = GraphBuilder::new();
    let loss = tiny(&mut g);
    g.finish("tiny", BTreeMap::new(), loss, Optimizer::default()).expect("valid")
}

fn node<'m>(model: &'m Model, name: &str) -> &'m placer_ir::Node {
    model.node(model.node_id(name).unwrap_or_else(|| panic!("no node {name}")))
}

fn names(model: &Model, ids: &[placer_ir::TensorId]) -> Vec<String> {
    ids.iter().map(|&t| model.tensor(t).name.clone()).collect()
}

#[test]
fn the_backward_pass_has_a_rule_for_every_new_op() {
    let model = build();
    let op_of = |name: &str| node(&model, name).op;
    let inputs_of = |name: &str| names(&model, &node(&model, name).inputs);
    let outputs_of = |name: &str| names(&model, &node(&model, name).outputs);

    // Sigmoid saves its output, clip its input (with its bounds), dropout its mask.
    assert_eq!(op_of("gate.bwd"), Op::SigmoidBackward);
    assert_eq!(inputs_of("gate.bwd")[1], "gate");
    assert_eq!(op_of("relu6.bwd"), Op::ClipBackward);
    assert_eq!(inputs_of("relu6.bwd")[1], "norm");
    assert_eq!(node(&model, "relu6.bwd").attrs, node(&model, "relu6").attrs);
    assert_eq!(op_of("drop.bwd"), Op::DropoutBackward);
    assert_eq!(inputs_of("drop.bwd"), ["biased.grad.from.gated", "drop.mask"]);
    assert_eq!(node(&model, "drop.bwd").attrs.get("ratio"), Some(&AttrValue::Float(0.25)));
    assert!(!node(&model, "drop.bwd").attrs.contains_key("seed"));

    // Hard swish and hard sigmoid save their input; hard sigmoid's backward has its
    // alpha and beta. Hard swish's output is read twice, so its gradient is a sum.
    assert_eq!(op_of("hswish.bwd"), Op::HardSwishBackward);
    assert_eq!(inputs_of("hswish.bwd"), ["hswish.grad.sum1", "gated"]);
    assert!(node(&model, "hswish.bwd").attrs.is_empty());
    assert_eq!(op_of("hgate.bwd"), Op::HardSigmoidBackward);
    assert_eq!(inputs_of("hgate.bwd"), ["hgate.grad.from.hgated", "hswish"]);
    assert_eq!(node(&model, "hgate.bwd").attrs, node(&model, "hgate").attrs);
    assert_eq!(node(&model, "hgate").attrs.get("alpha"), Some(&AttrValue::Float(1.0 / 6.0)));
    assert_eq!(outputs_of("hgate.bwd"), ["hswish.grad.from.hgate"]);

    // RMS norm: gradients of x and the scale from x, the scale and the saved inverse RMS.
    assert_eq!(op_of("norm.bwd"), Op::RmsNormBackward);
    assert_eq!(inputs_of("norm.bwd")[1..], ["scaled", "norm.gamma", "norm.rrms"]);
    assert_eq!(outputs_of("norm.bwd"), ["scaled.grad.from.norm", "norm.gamma.grad.from.norm"]);

    // A broadcast bias: its gradient is dy summed to its shape; the other operand gets dy.
    assert_eq!(op_of("biased.bwd_b"), Op::SumTo);
    assert_eq!(outputs_of("biased.bwd_b"), ["bias.grad"]);
    assert_eq!(model.tensor(node(&model, "biased.bwd_b").outputs[0]).shape, [16]);
    // A broadcast scale: dy · scale for the activation; dy · a at full shape, then summed.
    assert_eq!(
        (op_of("scaled.bwd_a"), inputs_of("scaled.bwd_a")),
        (Op::Mul, vec!["scaled.grad.from.norm".into(), "scale".into()])
    );
    assert_eq!(op_of("scaled.bwd_b"), Op::Mul);
    assert_eq!(inputs_of("scaled.bwd_b")[1], "fc1");
    assert_eq!(model.tensor(node(&model, "scaled.bwd_b").outputs[0]).shape, [4, 16]);
    assert_eq!(op_of("scaled.bwd_b.sum"), Op::SumTo);
    assert_eq!(outputs_of("scaled.bwd_b.sum"), ["scale.grad"]);
    // Two same-shape activations: each gradient is dy times the other, no reduction.
    assert_eq!((op_of("gated.bwd_a"), op_of("gated.bwd_b")), (Op::Mul, Op::Mul));
    assert!(model.node_id("gated.bwd_b.sum").is_none());

    // Every weight is updated once from a gradient of its own shape.
    for w in ["fc1.weight", "scale", "norm.gamma", "bias", "fc2.weight"] {
        let sgd = node(&model, &format!("{w}.sgd"));
        assert_eq!(sgd.op, Op::SgdMomentum);
        assert_eq!(model.tensor(sgd.inputs[0]).shape, model.tensor(model.tensor_id(w).expect("weight")).shape);
    }
}

#[test]
fn the_mask_is_a_byte_workspace_without_a_gradient() {
    let model = build();
    let mask = model.tensor(model.tensor_id("drop.mask").expect("mask"));
    assert_eq!((mask.dtype, mask.role, &mask.shape[..], mask.bytes), (DType::U8, Role::Workspace, &[4u64, 16][..], 64));
    assert!(model.tensors().iter().all(|t| !t.name.starts_with("drop.mask.grad")));
    let rrms = model.tensor(model.tensor_id("norm.rrms").expect("statistic"));
    assert_eq!((rrms.role, &rrms.shape[..]), (Role::Workspace, &[4u64][..]));
    // The seed is the node's own and does not change from build to build.
    let seed = node(&model, "drop").attrs.get("seed").cloned();
    assert!(matches!(seed, Some(AttrValue::Int(s)) if s >= 0), "{seed:?}");
    assert_eq!(build().content_hash(), model.content_hash());
}

#[test]
fn the_graph_round_trips_through_model_json() {
    let model = build();
    let again = placer_ir::parse_model(&model.to_json()).expect("loads");
    assert_eq!(again.content_hash(), model.content_hash());
}

#[test]
fn what_cannot_be_differentiated_or_validated_is_refused() {
    // sum_to on the tape has no backward rule.
    let mut g = GraphBuilder::new();
    let x = g.input("x", &[4, 10], DType::F32);
    let labels = g.input("labels", &[4], DType::I32);
    let w = g.weight("w", &[4, 10]);
    let h = g.mul("h", x, w);
    let h = g.sum_to("reduced", h, &[1, 10]);
    let h = g.add("back", x, h);
    let loss = g.softmax_cross_entropy("loss", h, labels);
    let err = g.finish("t", BTreeMap::new(), loss, Optimizer::default()).expect_err("no rule");
    assert!(matches!(err, ZooError::Shape(_)), "{err}");
    assert!(err.to_string().contains("reduced: no backward rule for sum_to"), "{err}");

    // A ratio of 1, reversed clip bounds, a NaN slope, a bias that does not broadcast:
    // validation says so.
    type Case = fn(&mut GraphBuilder, placer_zoo::T) -> placer_zoo::T;
    let cases: [(Case, &str); 4] = [
        (|g, x| g.dropout("d", x, 1.0), "dropout: ratio 1 must be in [0, 1)"),
        (|g, x| g.clip("c", x, 6.0, 0.0), "clip: min 6 is greater than max 0"),
        (|g, x| g.hard_sigmoid("h", x, f64::NAN, 0.5), "hard_sigmoid: alpha NaN and beta 0.5 must both be finite"),
        (
            |g, x| {
                let b = g.weight("b", &[4]);
                g.add("a", x, b)
            },
            "add: second input [4] does not broadcast to the first",
        ),
    ];
    for (make, message) in cases {
        let mut g = GraphBuilder::new();
        let x = g.input("x", &[4, 10], DType::F32);
        let labels = g.input("labels", &[4], DType::I32);
        let w = g.weight("w", &[10]);
        let x = g.mul("x.scaled", x, w);
        let y = make(&mut g, x);
        let loss = g.softmax_cross_entropy("loss", y, labels);
        let err = g.finish("t", BTreeMap::new(), loss, Optimizer::default()).expect_err(message);
        assert!(matches!(err, ZooError::Invalid(_)), "{err}");
        assert!(err.to_string().contains(message), "{err}");
    }
}
