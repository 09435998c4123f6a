//! Bad model files: one test per class of problem. Each asserts the diagnostic's kind,
//! subject, exact line:column (and that the location points at the offending token), and
//! the meaningful part of its message. Most tests edit one spot of a valid fixture, so
//! every other line is known to be fine and the test also proves there is no cascade of
//! follow-on reports.
//!
//! Also here: positive tests (a valid MLP loads, round-trips, and hashes stably) and
//! regression tests for inputs that used to panic.

#![allow(clippy::unwrap_used)]

use placer_ir::{Diagnostic, DiagnosticKind as K, Location, Subject, parse_model};

/// A 2-layer MLP with forward, backward and SGD-momentum updates, written exactly as
/// `Model::to_json` writes it.
const MLP: &str = include_str!("data/mlp.json");
/// conv2d, max_pool2d, reshape, split, concat, transpose.
const CONVNET: &str = include_str!("data/convnet.json");

/// The MLP's nodes in file order.
const MLP_NODES: [&str; 17] = [
    "fc1.matmul",
    "fc1",
    "relu1",
    "fc2.matmul",
    "fc2",
    "loss",
    "loss.backward",
    "fc2.bias_grad",
    "fc2.weight_grad",
    "fc2.input_grad",
    "relu1.backward",
    "fc1.bias_grad",
    "fc1.weight_grad",
    "fc1.weight.sgd",
    "fc1.bias.sgd",
    "fc2.weight.sgd",
    "fc2.bias.sgd",
];

/// `src` with the single occurrence of `from` replaced by `to`.
#[track_caller]
fn edit(src: &str, from: &str, to: &str) -> String {
    assert_eq!(src.matches(from).count(), 1, "fixture must contain {from:?} exactly once");
    src.replacen(from, to, 1)
}

/// Every problem reported for `src`, which must fail to load.
#[track_caller]
fn problems(src: &str) -> Vec<Diagnostic> {
    match parse_model(src) {
        Ok(_) => panic!("model should have been rejected:\n{src}"),
        Err(d) => d.0,
    }
}

/// The single problem reported for `src`.
#[track_caller]
fn only_problem(src: &str) -> Diagnostic {
    let mut all = problems(src);
    assert_eq!(all.len(), 1, "expected exactly one problem, got:\n{}", listing(&all));
    all.remove(0)
}

fn listing(diags: &[Diagnostic]) -> String {
    diags.iter().map(|d| format!("  {:?}: {d}\n", d.kind)).collect()
}

/// The source text from a 1-based line and column (columns count characters) to the end
/// of that line.
fn text_at(src: &str, loc: Location) -> &str {
    let line = src.split('\n').nth(loc.line - 1).unwrap_or("");
    let start = line.char_indices().nth(loc.column - 1).map_or(line.len(), |(i, _)| i);
    &line[start..]
}

fn tensor(name: &str) -> Subject {
    Subject::Tensor(name.to_string())
}

fn node(name: &str) -> Subject {
    Subject::Node(name.to_string())
}

/// Checks one diagnostic completely: `at` is the expected (line, column) and `token` the
/// text that must start there (empty: the location is the end of the input).
#[track_caller]
fn check(src: &str, d: &Diagnostic, kind: K, subject: Subject, at: (usize, usize), token: &str, message: &str) {
    assert_eq!(d.kind, kind, "kind of: {d}");
    assert_eq!(d.subject, subject, "subject of: {d}");
    let loc = Location { line: at.0, column: at.1 };
    assert_eq!(d.location, Some(loc), "location of: {d}");
    let found = text_at(src, loc);
    if token.is_empty() {
        assert_eq!(found, "", "{d}: should point at the end of the input");
    } else {
        assert!(found.starts_with(token), "{d}: points at {found:?}, expected {token:?}");
    }
    assert!(d.message.contains(message), "message of {d:?} should contain {message:?}");
}

/// The MLP with an explicit schedule, one entry per line: entry `k` is at line 52 + k,
/// column 5.
fn mlp_with_schedule(order: &[&str]) -> String {
    let body = MLP.trim_end().strip_suffix('}').unwrap().trim_end();
    let entries: Vec<String> = order.iter().map(|n| format!("    \"{n}\"")).collect();
    format!("{body},\n  \"schedule\": [\n{}\n  ]\n}}\n", entries.join(",\n"))
}

fn schedule_line(step: usize) -> usize {
    52 + step
}

/// `value` as JSON with the fields of every object in reverse order (whatever order the
/// map keeps), one value per line, tab-indented.
fn reversed_fields(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Object(m) => {
            let fields: Vec<String> = m
                .iter()
                .rev()
                .map(|(k, v)| format!("\t{} :\n{}", Value::from(k.as_str()), reversed_fields(v)))
                .collect();
            format!("{{\n{}\n}}", fields.join(" ,\n"))
        }
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(reversed_fields).collect();
            format!("[\n{}\n]", items.join(",\n"))
        }
        other => other.to_string(),
    }
}

// ---------------------------------------------------------------------------------------
// Positive tests
// ---------------------------------------------------------------------------------------

#[test]
fn valid_mlp_loads_with_the_file_order_as_schedule() {
    let model = parse_model(MLP).unwrap_or_else(|d| panic!("fixture must be valid:\n{d}"));
    assert_eq!(model.name(), "mlp-tiny");
    assert_eq!(model.tensors().len(), 24);
    assert_eq!(model.nodes().len(), MLP_NODES.len());
    assert!(!model.schedule_given());
    let order: Vec<&str> = model.schedule().iter().map(|&n| model.node(n).name.as_str()).collect();
    assert_eq!(order, MLP_NODES);

    let id = |name: &str| model.tensor_id(name).unwrap();
    assert_eq!(model.producer(id("x")), None);
    assert_eq!(model.producer(id("fc1.weight")), None);
    assert_eq!(model.producer(id("logits")), model.node_id("fc2"));
    assert_eq!(model.tensor(id("fc1.weight")).bytes, 4 * 3 * 4);
    assert_eq!(model.tensor(id("loss")).bytes, 4);
    let phases: Vec<&str> = (0..MLP_NODES.len()).map(|i| model.phase(placer_ir::NodeId(i as u32)).as_str()).collect();
    assert_eq!(phases[..6], ["forward"; 6]);
    assert_eq!(phases[6..13], ["backward"; 7]);
    assert_eq!(phases[13..], ["update"; 4]);
}

#[test]
fn a_given_schedule_in_another_valid_order_is_kept() {
    let mut order = MLP_NODES.to_vec();
    order.swap(13, 16); // updates of different weights may run in any order
    order.swap(7, 8); // so may the two gradients of fc2's parameters
    let model = parse_model(&mlp_with_schedule(&order)).unwrap_or_else(|d| panic!("{d}"));
    assert!(model.schedule_given());
    let got: Vec<&str> = model.schedule().iter().map(|&n| model.node(n).name.as_str()).collect();
    assert_eq!(got, order);
}

#[test]
fn to_json_round_trips_exactly() {
    let model = parse_model(MLP).unwrap_or_else(|d| panic!("{d}"));
    let json = model.to_json();
    // The fixture is written in the writer's own layout.
    assert_eq!(json, MLP);
    let again = parse_model(&json).unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(again.content_hash(), model.content_hash());
    assert_eq!(again.to_json(), json);
    assert_eq!(again.to_decl(), model.to_decl());

    let with_schedule = parse_model(&mlp_with_schedule(&MLP_NODES)).unwrap_or_else(|d| panic!("{d}"));
    let again = parse_model(&with_schedule.to_json()).unwrap_or_else(|d| panic!("{d}"));
    assert!(again.schedule_given());
    assert_eq!(again.to_json(), with_schedule.to_json());
    assert_eq!(again.content_hash(), with_schedule.content_hash());

    let convnet = parse_model(CONVNET).unwrap_or_else(|d| panic!("{d}"));
    let again = parse_model(&convnet.to_json()).unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(again.to_json(), convnet.to_json());
    assert_eq!(again.content_hash(), convnet.content_hash());
}

#[test]
fn content_hash_ignores_layout_field_order_and_name_but_not_shapes() {
    let hash = |src: &str| parse_model(src).unwrap_or_else(|d| panic!("{d}\n{src}")).content_hash();
    let base = hash(MLP);

    // Every object's fields in reverse order, laid out differently.
    let value: serde_json::Value = serde_json::from_str(MLP).unwrap();
    let reformatted = reversed_fields(&value);
    assert!(reformatted.find("\"version\"") < reformatted.find("\"format\""), "{reformatted}");
    assert_eq!(hash(&reformatted), base);
    // And everything on one line.
    assert_eq!(hash(&serde_json::to_string(&value).unwrap()), base);

    let renamed = edit(MLP, "\"name\": \"mlp-tiny\"", "\"name\": \"another name\"");
    let renamed = edit(&renamed, "\"batch\": \"2\"", "\"batch\": \"two\"");
    assert_eq!(hash(&renamed), base);

    // Hidden width 3 -> 5: every dimension 3 in the MLP is the hidden width, so the
    // result is still valid, with different shapes.
    let mut wider = value.clone();
    for t in wider["tensors"].as_array_mut().unwrap() {
        for d in t["shape"].as_array_mut().unwrap() {
            if d.as_u64() == Some(3) {
                *d = 5.into();
            }
        }
    }
    assert_ne!(hash(&serde_json::to_string(&wider).unwrap()), base);
}

// ---------------------------------------------------------------------------------------
// Malformed JSON
// ---------------------------------------------------------------------------------------

#[test]
fn truncated_file_is_a_syntax_error_at_the_end() {
    // Cut after line 10: the tensors array ends with a comma and then nothing.
    let cut: String = MLP.split_inclusive('\n').take(10).collect();
    let d = only_problem(&cut);
    check(&cut, &d, K::Syntax, Subject::Model, (11, 1), "", "malformed JSON: expected a value, found end of input");

    // Cut inside a string: the error points at its opening quote.
    let cut = &MLP[..MLP.find("\"labels\"").unwrap() + 4];
    let d = only_problem(cut);
    check(cut, &d, K::Syntax, Subject::Model, (8, 14), "\"lab", "string is never closed");
}

#[test]
fn trailing_comma_is_a_syntax_error_at_the_closing_bracket() {
    let src = edit(MLP, "\"weight_gradient\"}\n  ],", "\"weight_gradient\"},\n  ],");
    let d = only_problem(&src);
    check(&src, &d, K::Syntax, Subject::Model, (31, 3), "],", "expected a value, found ']'");

    let src = edit(MLP, "\"dtype\": \"i32\", \"role\": \"input\"}", "\"dtype\": \"i32\", \"role\": \"input\",}");
    let d = only_problem(&src);
    check(&src, &d, K::Syntax, Subject::Model, (8, 70), "}", "expected a quoted field name, found '}'");
}

// ---------------------------------------------------------------------------------------
// Fields
// ---------------------------------------------------------------------------------------

#[test]
fn unknown_field_at_top_level() {
    let src = edit(MLP, "\"meta\": {", "\"metadata\": {");
    let d = only_problem(&src);
    check(&src, &d, K::UnknownField, Subject::Model, (5, 3), "\"metadata\"", "unknown field \"metadata\" in the model");
    assert!(d.message.contains("expected one of: format, version, name, meta"), "{d}");
}

#[test]
fn unknown_field_in_a_tensor_names_the_tensor() {
    let src = edit(
        MLP,
        "\"dtype\": \"i32\", \"role\": \"input\"}",
        "\"dtype\": \"i32\", \"role\": \"input\", \"layout\": \"nchw\"}",
    );
    let d = only_problem(&src);
    check(&src, &d, K::UnknownField, tensor("labels"), (8, 71), "\"layout\"", "unknown field \"layout\" in a tensor");
    assert!(d.message.contains("expected one of: name, shape, dtype, role"), "{d}");
}

#[test]
fn unknown_field_in_a_node_names_the_node() {
    let src =
        edit(MLP, "{\"name\": \"relu1\", \"op\": \"relu\",", "{\"name\": \"relu1\", \"op\": \"relu\", \"device\": 0,");
    let d = only_problem(&src);
    check(&src, &d, K::UnknownField, node("relu1"), (35, 37), "\"device\"", "unknown field \"device\" in a node");
}

#[test]
fn missing_required_field_points_at_the_enclosing_object() {
    let src = edit(MLP, "\"dtype\": \"i32\", \"role\": \"input\"}", "\"dtype\": \"i32\"}");
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::MissingField,
        tensor("labels"),
        (8, 5),
        "{\"name\": \"labels\"",
        "a tensor has no \"role\" field",
    );

    let src = edit(MLP, "{\"name\": \"relu1\", \"op\": \"relu\",", "{\"name\": \"relu1\",");
    let d = only_problem(&src);
    check(&src, &d, K::MissingField, node("relu1"), (35, 5), "{\"name\": \"relu1\"", "a node has no \"op\" field");

    // A tensor without a name is called by its index; the nodes that refer to it by the
    // name it lost are (rightly) told that no such tensor is declared.
    let src = edit(MLP, "{\"name\": \"labels\", \"shape\"", "{\"shape\"");
    let all = problems(&src);
    assert_eq!(all.len(), 3, "{}", listing(&all));
    check(&src, &all[0], K::MissingField, tensor("#1"), (8, 5), "{\"shape\": [2]", "a tensor has no \"name\" field");
    check(
        &src,
        &all[1],
        K::UnknownName,
        node("loss"),
        (38, 74),
        "\"labels\"",
        "uses tensor 'labels', which is not declared",
    );
    check(
        &src,
        &all[2],
        K::UnknownName,
        node("loss.backward"),
        (39, 91),
        "\"labels\"",
        "uses tensor 'labels', which is not declared",
    );
}

#[test]
fn wrong_format_name_stops_reading() {
    // Nothing after the format is read: this is some other kind of file.
    let src = edit(MLP, "\"format\": \"placer-model\"", "\"format\": \"onnx-model\"");
    let src = edit(&src, "\"op\": \"relu\"", "\"op\": \"no_such_op\"");
    let d = only_problem(&src);
    check(&src, &d, K::BadValue, Subject::Model, (2, 13), "\"onnx-model\"", "\"format\" must be \"placer-model\"");
    assert!(d.message.contains("not a placer model file"), "{d}");
}

#[test]
fn newer_format_version_asks_for_an_upgrade() {
    let src = edit(MLP, "\"version\": 1,", "\"version\": 2,");
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::BadValue,
        Subject::Model,
        (3, 14),
        "2,",
        "format version 2 is newer than this placer understands (1)",
    );
    assert!(d.message.contains("upgrade placer"), "{d}");
}

// ---------------------------------------------------------------------------------------
// Names and values
// ---------------------------------------------------------------------------------------

#[test]
fn unknown_op() {
    let src = edit(MLP, "\"op\": \"relu\"", "\"op\": \"leaky_relu\"");
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::BadValue,
        node("relu1"),
        (35, 29),
        "\"leaky_relu\"",
        "unknown op \"leaky_relu\"; expected one of: matmul,",
    );
}

#[test]
fn unknown_dtype() {
    let src = edit(MLP, "\"dtype\": \"i32\"", "\"dtype\": \"int32\"");
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::BadValue,
        tensor("labels"),
        (8, 47),
        "\"int32\"",
        "unknown dtype \"int32\"; expected one of: f32, f16, bf16, i32, i64, u8",
    );
}

#[test]
fn unknown_role() {
    let src = edit(
        MLP,
        "\"name\": \"probs\", \"shape\": [2, 2], \"dtype\": \"f32\", \"role\": \"activation\"",
        "\"name\": \"probs\", \"shape\": [2, 2], \"dtype\": \"f32\", \"role\": \"scratch\"",
    );
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::BadValue,
        tensor("probs"),
        (23, 64),
        "\"scratch\"",
        "unknown role \"scratch\"; expected one of: input, weight,",
    );
}

#[test]
fn operand_that_is_not_declared() {
    // Only the unknown name is reported: relu1 still counts as relu1.out's producer.
    let src = edit(
        MLP,
        "\"inputs\": [\"fc1.out\"], \"outputs\": [\"relu1.out\"]",
        "\"inputs\": [\"fc1.output\"], \"outputs\": [\"relu1.out\"]",
    );
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::UnknownName,
        node("relu1"),
        (35, 48),
        "\"fc1.output\"",
        "uses tensor 'fc1.output', which is not declared in \"tensors\"",
    );
}

#[test]
fn node_with_an_undeclared_operand_is_still_checked_as_a_producer() {
    // The unknown input and the second producer of relu1.out are independent problems.
    let src = edit(
        MLP,
        "\"outputs\": [\"relu1.out\"]},\n",
        "\"outputs\": [\"relu1.out\"]},\n    {\"name\": \"relu1.again\", \"op\": \"relu\", \"inputs\": [\"nowhere\"], \"outputs\": [\"relu1.out\"]},\n",
    );
    let all = problems(&src);
    assert_eq!(all.len(), 2, "{}", listing(&all));
    check(
        &src,
        &all[0],
        K::UnknownName,
        node("relu1.again"),
        (36, 54),
        "\"nowhere\"",
        "uses tensor 'nowhere', which is not declared",
    );
    check(
        &src,
        &all[1],
        K::ProducedTwice,
        node("relu1.again"),
        (36, 78),
        "\"relu1.out\"",
        "which node 'relu1' already produces",
    );
}

#[test]
fn duplicate_tensor_name() {
    // A second, otherwise identical declaration: reported once, as a duplicate.
    let src = edit(
        MLP,
        "\"role\": \"weight_gradient\"}\n  ],",
        "\"role\": \"weight_gradient\"},\n    {\"name\": \"fc1.mm\", \"shape\": [2, 3], \"dtype\": \"f32\", \"role\": \"activation\"}\n  ],",
    );
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::DuplicateName,
        tensor("fc1.mm"),
        (31, 14),
        "\"fc1.mm\"",
        "tensor name is used twice (first by tensor #10)",
    );
}

#[test]
fn duplicate_node_name() {
    let src = edit(MLP, "{\"name\": \"fc2\", \"op\"", "{\"name\": \"fc1\", \"op\"");
    let d = only_problem(&src);
    check(&src, &d, K::DuplicateName, node("fc1"), (37, 14), "\"fc1\"", "node name is used twice (first by node #1)");
}

// ---------------------------------------------------------------------------------------
// Graph structure
// ---------------------------------------------------------------------------------------

#[test]
fn tensor_used_but_never_produced() {
    let src = edit(
        MLP,
        "\"role\": \"weight_gradient\"}\n  ],",
        "\"role\": \"weight_gradient\"},\n    {\"name\": \"ghost\", \"shape\": [2, 3], \"dtype\": \"f32\", \"role\": \"activation\"}\n  ],",
    );
    let src = edit(
        &src,
        "\"inputs\": [\"fc1.out\"], \"outputs\": [\"relu1.out\"]",
        "\"inputs\": [\"ghost\"], \"outputs\": [\"relu1.out\"]",
    );
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::NeverProduced,
        tensor("ghost"),
        (31, 14),
        "\"ghost\"",
        "is used but never produced (role activation needs a producing node)",
    );
}

#[test]
fn tensor_produced_twice() {
    let src = edit(
        MLP,
        "\"outputs\": [\"relu1.out\"]},\n",
        "\"outputs\": [\"relu1.out\"]},\n    {\"name\": \"relu1.again\", \"op\": \"relu\", \"inputs\": [\"fc1.out\"], \"outputs\": [\"relu1.out\"]},\n",
    );
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::ProducedTwice,
        node("relu1.again"),
        (36, 78),
        "\"relu1.out\"",
        "produces tensor 'relu1.out', which node 'relu1' already produces",
    );
}

#[test]
fn two_nodes_feeding_each_other_are_a_cycle() {
    let src = r#"{
  "format": "placer-model",
  "version": 1,
  "name": "cycle",
  "tensors": [
    {"name": "x", "shape": [4], "dtype": "f32", "role": "input"},
    {"name": "a", "shape": [4], "dtype": "f32", "role": "activation"},
    {"name": "b", "shape": [4], "dtype": "f32", "role": "activation"}
  ],
  "nodes": [
    {"name": "p", "op": "add", "inputs": ["x", "b"], "outputs": ["a"]},
    {"name": "q", "op": "relu", "inputs": ["a"], "outputs": ["b"]}
  ]
}
"#;
    let d = only_problem(src);
    check(src, &d, K::Cycle, node("p"), (11, 14), "\"p\"", "is part of a dependency cycle of 2 nodes: p, q");
}

#[test]
fn node_reading_its_own_output() {
    let src = edit(
        MLP,
        "\"inputs\": [\"fc1.out\"], \"outputs\": [\"relu1.out\"]",
        "\"inputs\": [\"relu1.out\"], \"outputs\": [\"relu1.out\"]",
    );
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::Cycle,
        node("relu1"),
        (35, 74),
        "\"relu1.out\"]",
        "reads tensor 'relu1.out', which it also produces",
    );
}

#[test]
fn weight_produced_by_a_node() {
    let src = edit(
        MLP,
        "{\"name\": \"fc1.mm\", \"shape\": [2, 3], \"dtype\": \"f32\", \"role\": \"activation\"}",
        "{\"name\": \"fc1.mm\", \"shape\": [2, 3], \"dtype\": \"f32\", \"role\": \"weight\"}",
    );
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::Role,
        tensor("fc1.mm"),
        (17, 14),
        "\"fc1.mm\"",
        "has role weight but node 'fc1.matmul' produces it",
    );
}

// ---------------------------------------------------------------------------------------
// Given schedules
// ---------------------------------------------------------------------------------------

#[test]
fn schedule_that_breaks_a_dependency() {
    let mut order = MLP_NODES.to_vec();
    order.swap(0, 1);
    let src = mlp_with_schedule(&order);
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::ScheduleOrder,
        node("fc1"),
        (schedule_line(0), 5),
        "\"fc1\"",
        "runs at step 0 and reads tensor 'fc1.mm', which is produced by node 'fc1.matmul' at step 1",
    );
}

#[test]
fn schedule_that_misses_a_node() {
    let mut order = MLP_NODES.to_vec();
    order.retain(|&n| n != "relu1");
    let src = mlp_with_schedule(&order);
    let d = only_problem(&src);
    // Pointed at the node's declaration: there is no schedule entry to point at.
    check(&src, &d, K::ScheduleOrder, node("relu1"), (35, 14), "\"relu1\"", "is missing from the schedule");
}

#[test]
fn schedule_that_names_an_unknown_node() {
    let mut order = MLP_NODES.to_vec();
    order.insert(3, "relu9");
    let src = mlp_with_schedule(&order);
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::UnknownName,
        Subject::Model,
        (schedule_line(3), 5),
        "\"relu9\"",
        "schedule names node 'relu9', which does not exist",
    );
}

#[test]
fn schedule_that_repeats_a_node() {
    let mut order = MLP_NODES.to_vec();
    order.insert(3, "fc1");
    let src = mlp_with_schedule(&order);
    let d = only_problem(&src);
    // The second occurrence is the one reported.
    check(&src, &d, K::ScheduleOrder, node("fc1"), (schedule_line(3), 5), "\"fc1\"", "appears twice in the schedule");
}

#[test]
fn in_place_update_scheduled_before_a_reader() {
    // fc2.weight.sgd right after fc2.weight's gradient is computed, but before
    // fc2.input_grad has read fc2.weight.
    let mut order = MLP_NODES.to_vec();
    let sgd = order.remove(15);
    assert_eq!(sgd, "fc2.weight.sgd");
    order.insert(9, sgd);
    let src = mlp_with_schedule(&order);
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::ScheduleOrder,
        node("fc2.weight.sgd"),
        (schedule_line(9), 5),
        "\"fc2.weight.sgd\"",
        "runs at step 9 and updates tensor 'fc2.weight' in place, which must first be read by node 'fc2.input_grad' at step 10",
    );
}

// ---------------------------------------------------------------------------------------
// Shapes, attributes, arity
// ---------------------------------------------------------------------------------------

#[test]
fn matmul_inner_dimension_mismatch() {
    // x [2, 4] times fc1.weight [4, 3] transposed: 4 against 3.
    let src = edit(
        MLP,
        "{\"name\": \"fc1.matmul\", \"op\": \"matmul\",",
        "{\"name\": \"fc1.matmul\", \"op\": \"matmul\", \"attrs\": {\"transpose_b\": true},",
    );
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::Shape,
        node("fc1.matmul"),
        (33, 34),
        "\"matmul\"",
        "matmul: inner dimensions differ (4 and 3) for [2, 4] x [4, 3]",
    );
}

#[test]
fn conv_channel_mismatch() {
    let src = edit(CONVNET, "\"shape\": [4, 3, 3, 3]", "\"shape\": [4, 2, 3, 3]");
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::Shape,
        node("conv"),
        (18, 28),
        "\"conv2d\"",
        "input [1, 3, 8, 8] and filter [4, 2, 3, 3] do not agree on channels with 1 group(s)",
    );
}

#[test]
fn wrong_output_shape() {
    let src = edit(MLP, "{\"name\": \"loss\", \"shape\": []", "{\"name\": \"loss\", \"shape\": [1]");
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::Shape,
        node("loss"),
        (38, 28),
        "\"softmax_cross_entropy\"",
        "loss has shape [1] but the op needs []",
    );
}

#[test]
fn unknown_attribute() {
    let src = edit(
        MLP,
        "\"op\": \"bias_grad\", \"attrs\": {\"axis\": 1}, \"inputs\": [\"logits.grad\"]",
        "\"op\": \"bias_grad\", \"attrs\": {\"axis\": 1, \"keepdims\": true}, \"inputs\": [\"logits.grad\"]",
    );
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::Attribute,
        node("fc2.bias_grad"),
        (40, 83),
        "true}",
        "op bias_grad has no attribute 'keepdims' (expected: axis)",
    );
}

#[test]
fn attribute_of_the_wrong_kind() {
    let src = edit(
        MLP,
        "\"op\": \"bias_grad\", \"attrs\": {\"axis\": 1}, \"inputs\": [\"logits.grad\"]",
        "\"op\": \"bias_grad\", \"attrs\": {\"axis\": \"1\"}, \"inputs\": [\"logits.grad\"]",
    );
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::Attribute,
        node("fc2.bias_grad"),
        (40, 68),
        "\"1\"}",
        "attribute 'axis' must be an integer, got a string",
    );

    // A pair attribute with three entries.
    let src = edit(CONVNET, "\"padding\": [1, 1]", "\"padding\": [1, 1, 1]");
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::Attribute,
        node("conv"),
        (18, 92),
        "[1, 1, 1]",
        "attribute 'padding' must be a list of 2 integers, got a list of integers",
    );

    // A value no attribute can have.
    let src = edit(
        MLP,
        "\"op\": \"bias_grad\", \"attrs\": {\"axis\": 1}, \"inputs\": [\"logits.grad\"]",
        "\"op\": \"bias_grad\", \"attrs\": {\"axis\": null}, \"inputs\": [\"logits.grad\"]",
    );
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::Attribute,
        node("fc2.bias_grad"),
        (40, 68),
        "null}",
        "attribute \"axis\" must be a number, a boolean, a string or a list of integers",
    );
}

#[test]
fn missing_required_attribute() {
    let src = edit(
        MLP,
        "\"op\": \"bias_grad\", \"attrs\": {\"axis\": 1}, \"inputs\": [\"logits.grad\"]",
        "\"op\": \"bias_grad\", \"inputs\": [\"logits.grad\"]",
    );
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::Attribute,
        node("fc2.bias_grad"),
        (40, 37),
        "\"bias_grad\"",
        "op bias_grad needs attribute 'axis'",
    );
}

#[test]
fn wrong_number_of_inputs() {
    let src = edit(
        MLP,
        "\"inputs\": [\"fc1.out\"], \"outputs\": [\"relu1.out\"]",
        "\"inputs\": [\"fc1.out\", \"fc1.mm\"], \"outputs\": [\"relu1.out\"]",
    );
    let d = only_problem(&src);
    check(&src, &d, K::Arity, node("relu1"), (35, 29), "\"relu\"", "op relu takes 1 inputs, got 2");
}

// ---------------------------------------------------------------------------------------
// Sizes
// ---------------------------------------------------------------------------------------

#[test]
fn zero_sized_dimension() {
    let src = edit(MLP, "{\"name\": \"fc1.bias\", \"shape\": [3]", "{\"name\": \"fc1.bias\", \"shape\": [0]");
    let d = only_problem(&src);
    check(&src, &d, K::Size, tensor("fc1.bias"), (10, 35), "[0]", "shape [0] has a zero dimension");
}

#[test]
fn absurdly_large_tensor() {
    let src = edit(
        MLP,
        "{\"name\": \"fc1.bias\", \"shape\": [3]",
        "{\"name\": \"fc1.bias\", \"shape\": [1000000000, 1000000000, 1000000]",
    );
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::Size,
        tensor("fc1.bias"),
        (10, 35),
        "[1000000000,",
        "shape [1000000000, 1000000000, 1000000] is absurdly large (over 1 PiB)",
    );

    // Larger than 64 bits can count: the product overflows.
    let src = edit(
        MLP,
        "{\"name\": \"fc1.bias\", \"shape\": [3]",
        "{\"name\": \"fc1.bias\", \"shape\": [4294967296, 4294967296]",
    );
    let d = only_problem(&src);
    check(&src, &d, K::Size, tensor("fc1.bias"), (10, 35), "[4294967296,", "is absurdly large");

    // A single dimension that does not fit in 64 bits.
    let src = edit(
        MLP,
        "{\"name\": \"fc1.bias\", \"shape\": [3]",
        "{\"name\": \"fc1.bias\", \"shape\": [18446744073709551616]",
    );
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::Size,
        tensor("fc1.bias"),
        (10, 36),
        "18446744073709551616]",
        "dimension 18446744073709551616 is not a non-negative integer that fits in 64 bits",
    );
}

#[test]
fn negative_dimension() {
    let src = edit(MLP, "{\"name\": \"fc1.bias\", \"shape\": [3]", "{\"name\": \"fc1.bias\", \"shape\": [-3]");
    let d = only_problem(&src);
    check(&src, &d, K::Size, tensor("fc1.bias"), (10, 36), "-3]", "dimension -3 is not a non-negative integer");
}

// ---------------------------------------------------------------------------------------
// Several problems at once
// ---------------------------------------------------------------------------------------

#[test]
fn several_independent_problems_are_all_reported_in_line_order() {
    let mut src = MLP.to_string();
    // Listed out of line order on purpose.
    for (from, to) in [
        ("\"op\": \"relu\"", "\"op\": \"leaky_relu\""), // line 35
        ("\"meta\": {", "\"metadata\": {"),             // line 5
        ("{\"name\": \"fc1.bias\", \"shape\": [3]", "{\"name\": \"fc1.bias\", \"shape\": [0]"), // line 10
        ("\"attrs\": {\"transpose_b\": true}", "\"attrs\": {\"transpose_c\": true}"), // line 42
        ("\"dtype\": \"i32\"", "\"dtype\": \"int32\""), // line 8
        // line 33: fc1.weight transposed no longer fits x
        (
            "{\"name\": \"fc1.matmul\", \"op\": \"matmul\",",
            "{\"name\": \"fc1.matmul\", \"op\": \"matmul\", \"attrs\": {\"transpose_b\": true},",
        ),
    ] {
        src = edit(&src, from, to);
    }
    let all = problems(&src);
    let summary: Vec<(K, usize)> = all.iter().map(|d| (d.kind, d.location.map_or(0, |l| l.line))).collect();
    assert_eq!(
        summary,
        [(K::UnknownField, 5), (K::BadValue, 8), (K::Size, 10), (K::Shape, 33), (K::BadValue, 35), (K::Attribute, 42),],
        "\n{}",
        listing(&all)
    );
    check(&src, &all[0], K::UnknownField, Subject::Model, (5, 3), "\"metadata\"", "unknown field \"metadata\"");
    check(&src, &all[1], K::BadValue, tensor("labels"), (8, 47), "\"int32\"", "unknown dtype \"int32\"");
    check(&src, &all[2], K::Size, tensor("fc1.bias"), (10, 35), "[0]", "zero dimension");
    check(&src, &all[3], K::Shape, node("fc1.matmul"), (33, 34), "\"matmul\"", "inner dimensions differ (4 and 3)");
    check(&src, &all[4], K::BadValue, node("relu1"), (35, 29), "\"leaky_relu\"", "unknown op \"leaky_relu\"");
    check(
        &src,
        &all[5],
        K::Attribute,
        node("fc2.input_grad"),
        (42, 73),
        "true}",
        "op matmul has no attribute 'transpose_c'",
    );
}

// ---------------------------------------------------------------------------------------
// Regressions: inputs that used to panic (arithmetic overflow on file-controlled values)
// ---------------------------------------------------------------------------------------

#[test]
fn regression_conv_padding_near_i64_max_does_not_overflow() {
    let src = edit(CONVNET, "\"padding\": [1, 1]", "\"padding\": [9223372036854775807, 1]");
    let d = only_problem(&src);
    check(&src, &d, K::Shape, node("conv"), (18, 28), "\"conv2d\"", "conv2d: padding 9223372036854775807 is too large");
}

#[test]
fn regression_conv_dilation_near_i64_max_does_not_overflow() {
    // (kernel - 1) * dilation + 1 with a 4x4 filter.
    let src = edit(CONVNET, "\"dilation\": [1, 1]", "\"dilation\": [9223372036854775807, 1]");
    let src = edit(&src, "\"shape\": [4, 3, 3, 3]", "\"shape\": [4, 3, 4, 4]");
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::Shape,
        node("conv"),
        (18, 28),
        "\"conv2d\"",
        "kernel 4 with dilation 9223372036854775807 spans more than 2^64 elements",
    );
}

#[test]
fn regression_split_sizes_that_overflow_when_added() {
    let src = edit(CONVNET, "\"sizes\": [16, 48]", "\"sizes\": [9223372036854775807, 9223372036854775807]");
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::Shape,
        node("split"),
        (21, 29),
        "\"split\"",
        "sizes [9223372036854775807, 9223372036854775807] must be positive and add up to 64",
    );
}

#[test]
fn regression_concat_total_that_overflows() {
    // 2^14 copies of a 2^50-element u8 tensor (each 1 PiB, the largest allowed).
    let inputs = vec!["\"x\""; 1 << 14].join(", ");
    let src = format!(
        r#"{{"format": "placer-model", "version": 1, "name": "concat",
 "tensors": [{{"name": "x", "shape": [1125899906842624], "dtype": "u8", "role": "input"}},
  {{"name": "y", "shape": [1], "dtype": "u8", "role": "activation"}}],
 "nodes": [{{"name": "c", "op": "concat", "attrs": {{"axis": 0}}, "inputs": [{inputs}], "outputs": ["y"]}}]}}"#
    );
    let d = only_problem(&src);
    check(
        &src,
        &d,
        K::Shape,
        node("c"),
        (4, 32),
        "\"concat\"",
        "concat: inputs add up to more than 2^64 elements along axis 0",
    );
}

/// Found while documenting: a tensor listed twice in `updates` made the node depend on
/// itself, and the derived schedule silently left it out.
#[test]
fn a_tensor_updated_twice_by_one_node_is_refused() {
    let src = r#"{"format": "placer-model", "version": 1, "name": "m",
  "tensors": [
    {"name": "w", "shape": [4], "role": "weight"},
    {"name": "v", "shape": [4], "role": "optimizer_state"},
    {"name": "g", "shape": [4], "role": "input"}
  ],
  "nodes": [
    {"name": "sgd", "op": "sgd_momentum", "attrs": {"lr": 0.1, "momentum": 0.9}, "inputs": ["g"], "updates": ["w", "w"], "outputs": []}
  ]
}"#;
    let diags = parse_model(src).expect_err("must be refused");
    assert!(diags.iter().any(|d| d.kind == K::Arity && d.message.contains("twice in \"updates\"")), "{diags}");
}

/// Found while documenting: a model with no nodes validated, then the memory profile
/// indexed past its end.
#[test]
fn a_model_without_nodes_is_refused() {
    let src = r#"{"format": "placer-model", "version": 1, "name": "m",
  "tensors": [{"name": "w", "shape": [4], "role": "weight"}], "nodes": []}"#;
    let diags = parse_model(src).expect_err("must be refused");
    assert!(diags.iter().any(|d| d.message.contains("has no nodes")), "{diags}");
}

/// Found while documenting: absurd but well-formed pooling windows overflowed the cost.
#[test]
fn costs_saturate_instead_of_overflowing() {
    use placer_ir::ops::{Op, Operand, cost};
    use placer_ir::{AttrValue, Attrs, DType};
    let attrs = Attrs::from([("kernel".to_string(), AttrValue::Ints(vec![1 << 32, 1 << 32]))]);
    let shape = [1u64 << 20, 1 << 20];
    let x = Operand { shape: &shape, dtype: DType::F32 };
    assert_eq!(cost(Op::MaxPool2d, &attrs, &[x], &[x]).flops, u64::MAX);
}

#[test]
fn pooling_integer_tensors_is_refused() {
    let src = r#"{"format": "placer-model", "version": 1, "name": "m",
  "tensors": [
    {"name": "x", "shape": [1, 1, 4, 4], "dtype": "i32", "role": "input"},
    {"name": "y", "shape": [1, 1, 2, 2], "dtype": "i32", "role": "activation"},
    {"name": "i", "shape": [1, 1, 2, 2], "dtype": "i32", "role": "workspace"}
  ],
  "nodes": [{"name": "p", "op": "max_pool2d", "attrs": {"kernel": [2, 2]}, "inputs": ["x"], "outputs": ["y", "i"]}]
}"#;
    let diags = parse_model(src).expect_err("must be refused");
    assert!(diags.iter().any(|d| d.message.contains("expected a floating-point tensor")), "{diags}");
}
