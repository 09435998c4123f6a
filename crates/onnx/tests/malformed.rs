//! Hand-built ONNX graphs: the importer's happy path on a tiny CNN, and every way a
//! file can be wrong (truncated, not protobuf, too new, cyclic, unsupported ops) ending
//! in one clear error and never a panic.

use placer_onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto,
    ValueInfoProto, tensor_shape_proto::Dimension, tensor_shape_proto::dimension, type_proto,
};
use placer_onnx::{GraphKind, ImportOptions, OnnxError, import_bytes};
use proptest::prelude::*;
use prost::Message;
use std::path::Path;

fn value(name: &str, dims: &[Option<i64>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Some(v) => dimension::Value::DimValue(*v),
                None => dimension::Value::DimParam("N".into()),
            }),
            ..Default::default()
        })
        .collect();
    let tensor = type_proto::Tensor { elem_type: Some(1), shape: Some(TensorShapeProto { dim }) };
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto { value: Some(type_proto::Value::TensorType(tensor)), ..Default::default() }),
        ..Default::default()
    }
}

/// A float initializer known by shape only: its payload is absent, as in a file whose
/// weights live elsewhere.
fn weight(name: &str, dims: &[i64]) -> TensorProto {
    TensorProto { name: Some(name.into()), dims: dims.to_vec(), data_type: Some(1), ..Default::default() }
}

fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto { name: Some(name.into()), ints: v.to_vec(), r#type: Some(7), ..Default::default() }
}

fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        name: Some(format!("{op}:{}", outputs.first().copied().unwrap_or_default())),
        attribute: attrs,
        ..Default::default()
    }
}

/// x [N,3,8,8] → Conv 3x3 pad 1 → Relu → GlobalAveragePool → Flatten → Gemm → logits.
fn tiny_cnn(opset: i64, nodes: Vec<NodeProto>) -> ModelProto {
    let graph = GraphProto {
        name: Some("tiny".into()),
        node: nodes,
        input: vec![value("x", &[None, Some(3), Some(8), Some(8)])],
        output: vec![value("logits", &[None, Some(10)])],
        initializer: vec![weight("w", &[4, 3, 3, 3]), weight("fc_w", &[10, 4]), weight("fc_b", &[10])],
        ..Default::default()
    };
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(opset) }],
        graph: Some(graph),
        ..Default::default()
    }
}

fn cnn_nodes() -> Vec<NodeProto> {
    let trans_b = AttributeProto { name: Some("transB".into()), i: Some(1), r#type: Some(2), ..Default::default() };
    vec![
        node("Conv", &["x", "w"], &["c"], vec![ints("pads", &[1, 1, 1, 1]), ints("kernel_shape", &[3, 3])]),
        node("Relu", &["c"], &["r"], vec![]),
        node("GlobalAveragePool", &["r"], &["p"], vec![]),
        node("Flatten", &["p"], &["f"], vec![]),
        node("Gemm", &["f", "fc_w", "fc_b"], &["logits"], vec![trans_b]),
    ]
}

fn bytes(m: &ModelProto) -> Vec<u8> {
    m.encode_to_vec()
}

fn run(b: Vec<u8>) -> Result<placer_onnx::Imported, OnnxError> {
    import_bytes(Path::new("test.onnx"), b, &ImportOptions { batch: Some(2), ..Default::default() })
}

#[test]
fn a_tiny_cnn_becomes_a_training_graph() {
    let imported = run(bytes(&tiny_cnn(13, cnn_nodes()))).expect("imports");
    assert_eq!(imported.kind, GraphKind::Forward);
    let ops: Vec<&str> = imported.model.nodes().iter().map(|n| n.op.as_str()).collect();
    for op in [
        "conv2d",
        "relu",
        "global_avg_pool",
        "matmul",
        "bias_add",
        "softmax_cross_entropy",
        "conv2d_backward_filter",
        "sgd_momentum",
    ] {
        assert!(ops.contains(&op), "{op} missing from {ops:?}");
    }
    // The first convolution reads the input, which needs no gradient.
    assert!(!ops.contains(&"conv2d_backward_data"));
    assert_eq!(imported.model.tensors().iter().filter(|t| t.role == placer_ir::Role::Weight).count(), 3);
}

/// Where(mask, relu, sigmoid) between two activations, as a gate of two branches: both
/// branches reach the loss, and each gets a gradient.
#[test]
fn where_between_two_activations_routes_both_branches() {
    let mut nodes = cnn_nodes();
    nodes.splice(
        1..2,
        [
            node("Relu", &["c"], &["a"], vec![]),
            node("Sigmoid", &["c"], &["s"], vec![]),
            node("Where", &["gate", "a", "s"], &["r"], vec![]),
        ],
    );
    let mut model = tiny_cnn(17, nodes);
    let gate =
        TensorProto { name: Some("gate".into()), dims: vec![1, 4, 1, 1], data_type: Some(9), ..Default::default() };
    model.graph.as_mut().expect("graph").initializer.push(gate);
    let imported = run(bytes(&model)).expect("imports");
    let model = &imported.model;
    let ops: Vec<&str> = model.nodes().iter().map(|n| n.op.as_str()).collect();
    for op in ["relu", "sigmoid", "mul", "add", "relu_backward", "sigmoid_backward"] {
        assert!(ops.contains(&op), "{op} missing from {ops:?}");
    }
    assert!(imported.notes.keys().any(|n| n.contains("x·mask + y·(1 − mask)")), "{:?}", imported.notes);
}

/// The dynamo exporter's `as_strided` after a flatten: a Gather of the flat pooled
/// features by every position in order, an index it stores beside the weights in
/// `NAME.onnx.data`. It imports as a view, at the file's batch and at another; a
/// missing data file leaves the index unknown, and the Gather is refused by name.
#[test]
fn a_gather_by_every_position_in_order_from_external_data_is_a_view() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut nodes = cnn_nodes();
    nodes.splice(
        3..4,
        [
            node("Reshape", &["p", "flat_shape"], &["flat"], vec![]),
            node("Gather", &["flat", "positions"], &["strided"], vec![]),
            node("Flatten", &["strided"], &["f"], vec![]),
        ],
    );
    let mut model = tiny_cnn(20, nodes);
    let graph = model.graph.as_mut().expect("graph");
    graph.input = vec![value("x", &[Some(2), Some(3), Some(8), Some(8)])];
    graph.initializer.push(TensorProto {
        name: Some("flat_shape".into()),
        dims: vec![1],
        data_type: Some(7),
        int64_data: vec![-1],
        ..Default::default()
    });
    let entry =
        |k: &str, v: &str| placer_onnx::proto::StringStringEntryProto { key: Some(k.into()), value: Some(v.into()) };
    graph.initializer.push(TensorProto {
        name: Some("positions".into()),
        dims: vec![2, 4, 1, 1],
        data_type: Some(7),
        data_location: Some(placer_onnx::proto::tensor_proto::DataLocation::External as i32),
        external_data: vec![entry("location", "m.onnx.data"), entry("offset", "16"), entry("length", "64")],
        ..Default::default()
    });
    let path = dir.path().join("m.onnx");
    std::fs::write(&path, bytes(&model)).expect("write");
    let import = |batch| placer_onnx::import(&path, &ImportOptions { batch: Some(batch), ..Default::default() });

    let err = import(2).expect_err("no data file: the index is unknown");
    assert!(err.to_string().contains("Gather other than an embedding lookup ([8] by [2, 4, 1, 1])"), "{err}");

    let mut data = vec![0xAB_u8; 16];
    data.extend((0..8_i64).flat_map(i64::to_le_bytes));
    std::fs::write(dir.path().join("m.onnx.data"), &data).expect("write");
    for batch in [2, 3] {
        let imported = import(batch).expect("imports");
        let pooled = imported.model.tensors().iter().find(|t| t.name.starts_with("strided")).map(|t| t.shape.clone());
        let logits = imported.model.tensors().iter().find(|t| t.name == "logits").map(|t| t.shape.clone());
        assert_eq!(logits, Some(vec![batch, 10]), "{pooled:?}");
    }

    // Positions out of order are not a view: refused, not reordered silently.
    data[16..24].copy_from_slice(&1_i64.to_le_bytes());
    std::fs::write(dir.path().join("m.onnx.data"), &data).expect("write");
    assert!(import(2).expect_err("a permutation").to_string().contains("Gather other than"));
}

/// Integer initializers whose dims multiply past 64 bits, stored in the file or beside
/// it, are known by shape and never read: the import goes on, no overflow panics.
#[test]
fn integer_initializers_with_huge_dims_are_not_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = tiny_cnn(17, cnn_nodes());
    let huge = vec![1 << 40, 1 << 40];
    let graph = model.graph.as_mut().expect("graph");
    graph.initializer.push(TensorProto {
        name: Some("inline".into()),
        dims: huge.clone(),
        data_type: Some(7),
        ..Default::default()
    });
    let entry =
        |k: &str, v: &str| placer_onnx::proto::StringStringEntryProto { key: Some(k.into()), value: Some(v.into()) };
    graph.initializer.push(TensorProto {
        name: Some("external".into()),
        dims: huge,
        data_type: Some(7),
        data_location: Some(placer_onnx::proto::tensor_proto::DataLocation::External as i32),
        external_data: vec![entry("location", "m.onnx.data")],
        ..Default::default()
    });
    let path = dir.path().join("m.onnx");
    std::fs::write(&path, bytes(&model)).expect("write");
    placer_onnx::import(&path, &ImportOptions { batch: Some(2), ..Default::default() }).expect("imports");
}

/// torch.split as the dynamo exporter writes it unoptimised: SplitToSequence read by
/// SequenceAt at constant positions is a split; a position outside the parts is refused
/// by name, never taken as another part.
#[test]
fn split_to_sequence_is_a_split_and_a_position_outside_it_is_refused() {
    let with_positions = |first: i64, second: i64| {
        let axis = AttributeProto { name: Some("axis".into()), i: Some(1), r#type: Some(2), ..Default::default() };
        let mut nodes = cnn_nodes();
        nodes.splice(
            2..2,
            [
                node("SplitToSequence", &["r", "two"], &["seq"], vec![axis]),
                node("SequenceAt", &["seq", "first"], &["a"], vec![]),
                node("SequenceAt", &["seq", "second"], &["b"], vec![]),
                node("Add", &["a", "b"], &["ab"], vec![]),
            ],
        );
        // The pooling reads the sum of the two halves instead of the ReLU.
        nodes[6].input[0] = "ab".into();
        let mut model = tiny_cnn(17, nodes);
        let graph = model.graph.as_mut().expect("graph");
        let scalar = |name: &str, v: i64| TensorProto {
            name: Some(name.into()),
            dims: vec![],
            data_type: Some(7),
            int64_data: vec![v],
            ..Default::default()
        };
        graph.initializer.extend([scalar("two", 2), scalar("first", first), scalar("second", second)]);
        graph.initializer[1] = weight("fc_w", &[10, 2]);
        run(bytes(&model))
    };
    let imported = with_positions(0, -1).expect("imports");
    assert_eq!(imported.model.nodes().iter().filter(|n| n.op == placer_ir::Op::Split).count(), 1);
    let err = with_positions(1, -100).expect_err("a position outside the parts").to_string();
    assert!(err.contains("SplitToSequence with a part read twice or out of range"), "{err}");
}

#[test]
fn a_symbolic_batch_needs_a_size() {
    let err = import_bytes(Path::new("t.onnx"), bytes(&tiny_cnn(13, cnn_nodes())), &ImportOptions::default())
        .expect_err("no batch");
    assert!(err.to_string().contains("--batch"), "{err}");
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let whole = bytes(&tiny_cnn(13, cnn_nodes()));
    for len in 0..whole.len() {
        let err = run(whole[..len].to_vec()).expect_err("a truncated model");
        assert_eq!(err.to_string().lines().count(), 1, "{err}");
    }
}

#[test]
fn files_that_are_not_onnx_say_so() {
    for junk in [&b"{\"format\": \"placer-model\"}"[..], b"PK\x03\x04zip", b"\x89PNG\r\n\x1a\n", b"", b"\x08"] {
        match run(junk.to_vec()) {
            Err(OnnxError::NotOnnx { reason, .. }) => assert!(!reason.is_empty()),
            other => panic!("{junk:?}: {other:?}"),
        }
    }
}

#[test]
fn opsets_outside_9_to_20_are_refused() {
    for opset in [8, 21, 99] {
        match run(bytes(&tiny_cnn(opset, cnn_nodes()))) {
            Err(e @ OnnxError::Opset { .. }) => assert!(e.to_string().contains("opsets 9 to 20"), "{e}"),
            other => panic!("opset {opset}: {other:?}"),
        }
    }
}

#[test]
fn a_cycle_is_named() {
    let mut nodes = cnn_nodes();
    nodes[1] = node("Add", &["c", "f"], &["r"], vec![]);
    match run(bytes(&tiny_cnn(13, nodes))) {
        Err(e @ OnnxError::Cycle { .. }) => assert!(e.to_string().contains("Add:r"), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unsupported_ops_are_listed_together_with_counts() {
    let mut nodes = cnn_nodes();
    nodes.insert(1, node("LRN", &["c"], &["c1"], vec![]));
    nodes.insert(2, node("LRN", &["c1"], &["c2"], vec![]));
    nodes.insert(3, node("Mish", &["c2"], &["c3"], vec![]));
    nodes[4] = node("Relu", &["c3"], &["r"], vec![]);
    let err = run(bytes(&tiny_cnn(13, nodes))).expect_err("unsupported ops");
    let text = err.to_string();
    assert!(matches!(err, OnnxError::Unsupported { count: 3, .. }), "{text}");
    assert!(text.contains("LRN ×2") && text.contains("Mish ×1"), "{text}");
}

#[test]
fn reading_a_value_nobody_writes_is_malformed() {
    let mut nodes = cnn_nodes();
    nodes[1] = node("Relu", &["nowhere"], &["r"], vec![]);
    let err = run(bytes(&tiny_cnn(13, nodes))).expect_err("dangling input");
    assert!(err.to_string().contains("'nowhere'"), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Overwriting bytes of a valid model yields a model or an error, never a panic.
    #[test]
    fn corrupted_models_never_panic(flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let mut b = bytes(&tiny_cnn(13, cnn_nodes()));
        for (at, byte) in flips {
            let i = at.index(b.len());
            b[i] = byte;
        }
        if let Err(e) = run(b) {
            prop_assert_eq!(e.to_string().lines().count(), 1);
        }
    }
}

#[test]
fn options_that_name_nothing_are_refused() {
    let model = bytes(&tiny_cnn(13, cnn_nodes()));
    let opts = ImportOptions { batch: Some(2), drop_inputs: vec!["mask".into()], ..Default::default() };
    let err = import_bytes(Path::new("t.onnx"), model.clone(), &opts).expect_err("no such input");
    assert!(err.to_string().contains("--drop-input mask") && err.to_string().contains("inputs: x"), "{err}");
    let opts = ImportOptions { batch: Some(2), output: Some("probs".into()), ..Default::default() };
    let err = import_bytes(Path::new("t.onnx"), model, &opts).expect_err("no such output");
    assert!(err.to_string().contains("no output 'probs'") && err.to_string().contains("logits"), "{err}");
}

#[test]
fn a_branch_the_loss_does_not_need_is_left_out() {
    let mut nodes = cnn_nodes();
    // An unsupported op on a side branch no longer blocks the import.
    nodes.push(node("LRN", &["r"], &["side"], vec![]));
    let mut model = tiny_cnn(13, nodes);
    if let Some(g) = model.graph.as_mut() {
        g.output.push(value("side", &[None, Some(4), Some(8), Some(8)]));
    }
    let imported = run(bytes(&model)).expect("imports");
    assert!(
        imported.notes.keys().any(|n| n.contains("1 node(s) that the loss does not depend on")),
        "{:?}",
        imported.notes
    );
}
