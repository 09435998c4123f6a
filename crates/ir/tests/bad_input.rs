//! Bad model files, as a table: one row per class of problem, each run as its own test so
//! a failure names the case. A row says how to build the input (most edit one spot of a
//! valid fixture, so every other line is known to be fine and the row also proves there
//! is no cascade of follow-on reports) and every diagnostic expected, in order: its kind,
//! subject, exact line:column, the token that must start there (so the location points
//! at the offending text), and the meaningful parts of its message.
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

/// The MLP with an explicit schedule, one entry per line: entry `k` is at line 52 + k,
/// column 5.
fn mlp_with_schedule(order: &[&str]) -> String {
    let body = MLP.trim_end().strip_suffix('}').unwrap().trim_end();
    let entries: Vec<String> = order.iter().map(|n| format!(r#"    "{n}""#)).collect();
    format!("{body},\n  \"schedule\": [\n{}\n  ]\n}}\n", entries.join(",\n"))
}

fn schedule_line(step: usize) -> usize {
    52 + step
}

fn tensor(name: &str) -> Subject {
    Subject::Tensor(name.to_string())
}

fn node(name: &str) -> Subject {
    Subject::Node(name.to_string())
}

/// How a row builds its input.
enum Input {
    /// The MLP fixture with each `(from, to)` applied in turn; `from` must occur once.
    Mlp(&'static [(&'static str, &'static str)]),
    /// The convnet fixture, edited the same way.
    Convnet(&'static [(&'static str, &'static str)]),
    /// The MLP with an explicit schedule: its nodes in file order, then changed.
    Schedule(fn(&mut Vec<&'static str>)),
    /// A whole file.
    Text(&'static str),
    /// A file computed from the fixtures.
    Built(fn() -> String),
}

impl Input {
    fn source(&self) -> String {
        let edited = |fixture: &str, edits: &[(&str, &str)]| {
            edits.iter().fold(fixture.to_string(), |src, (from, to)| edit(&src, from, to))
        };
        match self {
            Mlp(edits) => edited(MLP, edits),
            Convnet(edits) => edited(CONVNET, edits),
            Schedule(change) => {
                let mut order = MLP_NODES.to_vec();
                change(&mut order);
                mlp_with_schedule(&order)
            }
            Text(src) => (*src).to_string(),
            Built(make) => make(),
        }
    }
}

/// One expected diagnostic. `at` is the (line, column) and `token` the text that must
/// start there (empty: the location is the end of the input); the message must contain
/// every fragment of `message`.
struct Want {
    kind: K,
    subject: Subject,
    at: (usize, usize),
    token: &'static str,
    message: &'static [&'static str],
}

/// Every problem reported for `src`, which must fail to load.
fn problems(src: &str) -> Vec<Diagnostic> {
    match parse_model(src) {
        Ok(_) => panic!("model should have been rejected:\n{src}"),
        Err(d) => d.0,
    }
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

/// Checks one diagnostic completely.
fn check(src: &str, d: &Diagnostic, want: &Want) {
    assert_eq!(d.kind, want.kind, "kind of: {d}");
    assert_eq!(d.subject, want.subject, "subject of: {d}");
    let loc = Location { line: want.at.0, column: want.at.1 };
    assert_eq!(d.location, Some(loc), "location of: {d}");
    let found = text_at(src, loc);
    if want.token.is_empty() {
        assert_eq!(found, "", "{d}: should point at the end of the input");
    } else {
        assert!(found.starts_with(want.token), "{d}: points at {found:?}, expected {:?}", want.token);
    }
    for message in want.message {
        assert!(d.message.contains(message), "message of {d:?} should contain {message:?}");
    }
}

/// Loads `input`, which must fail with exactly the diagnostics `wants`, in that order.
fn run(input: Input, wants: &[Want]) {
    let src = input.source();
    let all = problems(&src);
    assert_eq!(all.len(), wants.len(), "expected {} problem(s), got:\n{}", wants.len(), listing(&all));
    for (d, want) in all.iter().zip(wants) {
        check(&src, d, want);
    }
}

/// `name: input => [(kind, subject, (line, column), token, message fragments...), ...];`
/// becomes `#[test] fn name`, which runs the input and checks every diagnostic.
macro_rules! bad_input {
    ($(
        $name:ident: $input:expr => [
            $(($kind:ident, $subject:expr, $at:expr, $token:expr $(, $message:expr)+ $(,)?)),+ $(,)?
        ];
    )+) => {$(
        #[test]
        fn $name() {
            run(
                $input,
                &[$(Want { kind: K::$kind, subject: $subject, at: $at, token: $token, message: &[$($message),+] }),+],
            );
        }
    )+};
}

use Input::{Built, Convnet, Mlp, Schedule, Text};

// ---------------------------------------------------------------------------------------
// Malformed JSON
// ---------------------------------------------------------------------------------------

bad_input! {
    // Cut after line 10: the tensors array ends with a comma and then nothing.
    truncated_file_is_a_syntax_error_at_the_end: Built(|| MLP.split_inclusive('\n').take(10).collect()) => [
        (Syntax, Subject::Model, (11, 1), "", "malformed JSON: expected a value, found end of input"),
    ];
    // Cut inside a string: the error points at its opening quote.
    truncated_string_is_reported_at_its_opening_quote:
        Built(|| MLP[..MLP.find(r#""labels""#).unwrap() + 4].to_string()) => [
        (Syntax, Subject::Model, (8, 14), r#""lab"#, "string is never closed"),
    ];
    trailing_comma_is_a_syntax_error_at_the_closing_bracket: Mlp(&[(
        "\"weight_gradient\"}\n  ],",
        "\"weight_gradient\"},\n  ],",
    )]) => [
        (Syntax, Subject::Model, (31, 3), "],", "expected a value, found ']'"),
    ];
    trailing_comma_in_an_object_is_a_syntax_error_at_the_closing_brace: Mlp(&[(
        r#""dtype": "i32", "role": "input"}"#,
        r#""dtype": "i32", "role": "input",}"#,
    )]) => [
        (Syntax, Subject::Model, (8, 70), "}", "expected a quoted field name, found '}'"),
    ];
}

// ---------------------------------------------------------------------------------------
// Fields
// ---------------------------------------------------------------------------------------

bad_input! {
    unknown_field_at_top_level: Mlp(&[(r#""meta": {"#, r#""metadata": {"#)]) => [
        (UnknownField, Subject::Model, (5, 3), r#""metadata""#,
            r#"unknown field "metadata" in the model"#, "expected one of: format, version, name, meta"),
    ];
    unknown_field_in_a_tensor_names_the_tensor: Mlp(&[(
        r#""dtype": "i32", "role": "input"}"#,
        r#""dtype": "i32", "role": "input", "layout": "nchw"}"#,
    )]) => [
        (UnknownField, tensor("labels"), (8, 71), r#""layout""#,
            r#"unknown field "layout" in a tensor"#, "expected one of: name, shape, dtype, role"),
    ];
    unknown_field_in_a_node_names_the_node: Mlp(&[(
        r#"{"name": "relu1", "op": "relu","#,
        r#"{"name": "relu1", "op": "relu", "device": 0,"#,
    )]) => [
        (UnknownField, node("relu1"), (35, 37), r#""device""#, r#"unknown field "device" in a node"#),
    ];
    missing_required_field_points_at_the_enclosing_object: Mlp(&[(
        r#""dtype": "i32", "role": "input"}"#,
        r#""dtype": "i32"}"#,
    )]) => [
        (MissingField, tensor("labels"), (8, 5), r#"{"name": "labels""#, r#"a tensor has no "role" field"#),
    ];
    missing_op_points_at_the_enclosing_node: Mlp(&[(r#"{"name": "relu1", "op": "relu","#, r#"{"name": "relu1","#)]) => [
        (MissingField, node("relu1"), (35, 5), r#"{"name": "relu1""#, r#"a node has no "op" field"#),
    ];
    // A tensor without a name is called by its index; the nodes that refer to it by the
    // name it lost are (rightly) told that no such tensor is declared.
    a_tensor_without_a_name_is_called_by_its_index: Mlp(&[(r#"{"name": "labels", "shape""#, r#"{"shape""#)]) => [
        (MissingField, tensor("#1"), (8, 5), r#"{"shape": [2]"#, r#"a tensor has no "name" field"#),
        (UnknownName, node("loss"), (38, 74), r#""labels""#, "uses tensor 'labels', which is not declared"),
        (UnknownName, node("loss.backward"), (39, 91), r#""labels""#, "uses tensor 'labels', which is not declared"),
    ];
    // Nothing after the format is read: this is some other kind of file.
    wrong_format_name_stops_reading: Mlp(&[
        (r#""format": "placer-model""#, r#""format": "onnx-model""#),
        (r#""op": "relu""#, r#""op": "no_such_op""#),
    ]) => [
        (BadValue, Subject::Model, (2, 13), r#""onnx-model""#,
            r#""format" must be "placer-model""#, "not a placer model file"),
    ];
    newer_format_version_asks_for_an_upgrade: Mlp(&[(r#""version": 1,"#, r#""version": 2,"#)]) => [
        (BadValue, Subject::Model, (3, 14), "2,",
            "format version 2 is newer than this placer understands (1)", "upgrade placer"),
    ];
}

// ---------------------------------------------------------------------------------------
// Names and values
// ---------------------------------------------------------------------------------------

bad_input! {
    unknown_op: Mlp(&[(r#""op": "relu""#, r#""op": "leaky_relu""#)]) => [
        (BadValue, node("relu1"), (35, 29), r#""leaky_relu""#, r#"unknown op "leaky_relu"; expected one of: matmul,"#),
    ];
    unknown_dtype: Mlp(&[(r#""dtype": "i32""#, r#""dtype": "int32""#)]) => [
        (BadValue, tensor("labels"), (8, 47), r#""int32""#,
            r#"unknown dtype "int32"; expected one of: f32, f16, bf16, i32, i64, u8"#),
    ];
    unknown_role: Mlp(&[(
        r#""name": "probs", "shape": [2, 2], "dtype": "f32", "role": "activation""#,
        r#""name": "probs", "shape": [2, 2], "dtype": "f32", "role": "scratch""#,
    )]) => [
        (BadValue, tensor("probs"), (23, 64), r#""scratch""#,
            r#"unknown role "scratch"; expected one of: input, weight,"#),
    ];
    // Only the unknown name is reported: relu1 still counts as relu1.out's producer.
    operand_that_is_not_declared: Mlp(&[(
        r#""inputs": ["fc1.out"], "outputs": ["relu1.out"]"#,
        r#""inputs": ["fc1.output"], "outputs": ["relu1.out"]"#,
    )]) => [
        (UnknownName, node("relu1"), (35, 48), r#""fc1.output""#,
            r#"uses tensor 'fc1.output', which is not declared in "tensors""#),
    ];
    // The unknown input and the second producer of relu1.out are independent problems.
    node_with_an_undeclared_operand_is_still_checked_as_a_producer: Mlp(&[(
        "\"outputs\": [\"relu1.out\"]},\n",
        "\"outputs\": [\"relu1.out\"]},\n    {\"name\": \"relu1.again\", \"op\": \"relu\", \"inputs\": [\"nowhere\"], \"outputs\": [\"relu1.out\"]},\n",
    )]) => [
        (UnknownName, node("relu1.again"), (36, 54), r#""nowhere""#, "uses tensor 'nowhere', which is not declared"),
        (ProducedTwice, node("relu1.again"), (36, 78), r#""relu1.out""#, "which node 'relu1' already produces"),
    ];
    // A second, otherwise identical declaration: reported once, as a duplicate.
    duplicate_tensor_name: Mlp(&[(
        "\"role\": \"weight_gradient\"}\n  ],",
        "\"role\": \"weight_gradient\"},\n    {\"name\": \"fc1.mm\", \"shape\": [2, 3], \"dtype\": \"f32\", \"role\": \"activation\"}\n  ],",
    )]) => [
        (DuplicateName, tensor("fc1.mm"), (31, 14), r#""fc1.mm""#, "tensor name is used twice (first by tensor #10)"),
    ];
    duplicate_node_name: Mlp(&[(r#"{"name": "fc2", "op""#, r#"{"name": "fc1", "op""#)]) => [
        (DuplicateName, node("fc1"), (37, 14), r#""fc1""#, "node name is used twice (first by node #1)"),
    ];
}

// ---------------------------------------------------------------------------------------
// Graph structure
// ---------------------------------------------------------------------------------------

bad_input! {
    tensor_used_but_never_produced: Mlp(&[
        (
            "\"role\": \"weight_gradient\"}\n  ],",
            "\"role\": \"weight_gradient\"},\n    {\"name\": \"ghost\", \"shape\": [2, 3], \"dtype\": \"f32\", \"role\": \"activation\"}\n  ],",
        ),
        (
            r#""inputs": ["fc1.out"], "outputs": ["relu1.out"]"#,
            r#""inputs": ["ghost"], "outputs": ["relu1.out"]"#,
        ),
    ]) => [
        (NeverProduced, tensor("ghost"), (31, 14), r#""ghost""#,
            "is used but never produced (role activation needs a producing node)"),
    ];
    tensor_produced_twice: Mlp(&[(
        "\"outputs\": [\"relu1.out\"]},\n",
        "\"outputs\": [\"relu1.out\"]},\n    {\"name\": \"relu1.again\", \"op\": \"relu\", \"inputs\": [\"fc1.out\"], \"outputs\": [\"relu1.out\"]},\n",
    )]) => [
        (ProducedTwice, node("relu1.again"), (36, 78), r#""relu1.out""#,
            "produces tensor 'relu1.out', which node 'relu1' already produces"),
    ];
    two_nodes_feeding_each_other_are_a_cycle: Text(r#"{
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
"#) => [
        (Cycle, node("p"), (11, 14), r#""p""#, "is part of a dependency cycle of 2 nodes: p, q"),
    ];
    node_reading_its_own_output: Mlp(&[(
        r#""inputs": ["fc1.out"], "outputs": ["relu1.out"]"#,
        r#""inputs": ["relu1.out"], "outputs": ["relu1.out"]"#,
    )]) => [
        (Cycle, node("relu1"), (35, 74), r#""relu1.out"]"#, "reads tensor 'relu1.out', which it also produces"),
    ];
    weight_produced_by_a_node: Mlp(&[(
        r#"{"name": "fc1.mm", "shape": [2, 3], "dtype": "f32", "role": "activation"}"#,
        r#"{"name": "fc1.mm", "shape": [2, 3], "dtype": "f32", "role": "weight"}"#,
    )]) => [
        (Role, tensor("fc1.mm"), (17, 14), r#""fc1.mm""#, "has role weight but node 'fc1.matmul' produces it"),
    ];
}

// ---------------------------------------------------------------------------------------
// Given schedules
// ---------------------------------------------------------------------------------------

bad_input! {
    schedule_that_breaks_a_dependency: Schedule(|order| order.swap(0, 1)) => [
        (ScheduleOrder, node("fc1"), (schedule_line(0), 5), r#""fc1""#,
            "runs at step 0 and reads tensor 'fc1.mm', which is produced by node 'fc1.matmul' at step 1"),
    ];
    // Pointed at the node's declaration: there is no schedule entry to point at.
    schedule_that_misses_a_node: Schedule(|order| order.retain(|&n| n != "relu1")) => [
        (ScheduleOrder, node("relu1"), (35, 14), r#""relu1""#, "is missing from the schedule"),
    ];
    schedule_that_names_an_unknown_node: Schedule(|order| order.insert(3, "relu9")) => [
        (UnknownName, Subject::Model, (schedule_line(3), 5), r#""relu9""#,
            "schedule names node 'relu9', which does not exist"),
    ];
    // The second occurrence is the one reported.
    schedule_that_repeats_a_node: Schedule(|order| order.insert(3, "fc1")) => [
        (ScheduleOrder, node("fc1"), (schedule_line(3), 5), r#""fc1""#, "appears twice in the schedule"),
    ];
    // fc2.weight.sgd right after fc2.weight's gradient is computed, but before
    // fc2.input_grad has read fc2.weight.
    in_place_update_scheduled_before_a_reader: Schedule(|order| {
        let sgd = order.remove(15);
        assert_eq!(sgd, "fc2.weight.sgd");
        order.insert(9, sgd);
    }) => [
        (ScheduleOrder, node("fc2.weight.sgd"), (schedule_line(9), 5), r#""fc2.weight.sgd""#,
            "runs at step 9 and updates tensor 'fc2.weight' in place, which must first be read by node 'fc2.input_grad' at step 10"),
    ];
}

// ---------------------------------------------------------------------------------------
// Shapes, attributes, arity
// ---------------------------------------------------------------------------------------

bad_input! {
    // x [2, 4] times fc1.weight [4, 3] transposed: 4 against 3.
    matmul_inner_dimension_mismatch: Mlp(&[(
        r#"{"name": "fc1.matmul", "op": "matmul","#,
        r#"{"name": "fc1.matmul", "op": "matmul", "attrs": {"transpose_b": true},"#,
    )]) => [
        (Shape, node("fc1.matmul"), (33, 34), r#""matmul""#,
            "matmul: inner dimensions differ (4 and 3) for [2, 4] x [4, 3]"),
    ];
    conv_channel_mismatch: Convnet(&[(r#""shape": [4, 3, 3, 3]"#, r#""shape": [4, 2, 3, 3]"#)]) => [
        (Shape, node("conv"), (18, 28), r#""conv2d""#,
            "input [1, 3, 8, 8] and filter [4, 2, 3, 3] do not agree on channels with 1 group(s)"),
    ];
    wrong_output_shape: Mlp(&[(r#"{"name": "loss", "shape": []"#, r#"{"name": "loss", "shape": [1]"#)]) => [
        (Shape, node("loss"), (38, 28), r#""softmax_cross_entropy""#, "loss has shape [1] but the op needs []"),
    ];
    unknown_attribute: Mlp(&[(
        r#""op": "bias_grad", "attrs": {"axis": 1}, "inputs": ["logits.grad"]"#,
        r#""op": "bias_grad", "attrs": {"axis": 1, "keepdims": true}, "inputs": ["logits.grad"]"#,
    )]) => [
        (Attribute, node("fc2.bias_grad"), (40, 83), "true}",
            "op bias_grad has no attribute 'keepdims' (expected: axis)"),
    ];
    attribute_of_the_wrong_kind: Mlp(&[(
        r#""op": "bias_grad", "attrs": {"axis": 1}, "inputs": ["logits.grad"]"#,
        r#""op": "bias_grad", "attrs": {"axis": "1"}, "inputs": ["logits.grad"]"#,
    )]) => [
        (Attribute, node("fc2.bias_grad"), (40, 68), r#""1"}"#, "attribute 'axis' must be an integer, got a string"),
    ];
    pair_attribute_with_three_entries: Convnet(&[(r#""padding": [1, 1]"#, r#""padding": [1, 1, 1]"#)]) => [
        (Attribute, node("conv"), (18, 92), "[1, 1, 1]",
            "attribute 'padding' must be a list of 2 integers, got a list of integers"),
    ];
    attribute_value_no_attribute_can_have: Mlp(&[(
        r#""op": "bias_grad", "attrs": {"axis": 1}, "inputs": ["logits.grad"]"#,
        r#""op": "bias_grad", "attrs": {"axis": null}, "inputs": ["logits.grad"]"#,
    )]) => [
        (Attribute, node("fc2.bias_grad"), (40, 68), "null}",
            r#"attribute "axis" must be a number, a boolean, a string or a list of integers"#),
    ];
    missing_required_attribute: Mlp(&[(
        r#""op": "bias_grad", "attrs": {"axis": 1}, "inputs": ["logits.grad"]"#,
        r#""op": "bias_grad", "inputs": ["logits.grad"]"#,
    )]) => [
        (Attribute, node("fc2.bias_grad"), (40, 37), r#""bias_grad""#, "op bias_grad needs attribute 'axis'"),
    ];
    wrong_number_of_inputs: Mlp(&[(
        r#""inputs": ["fc1.out"], "outputs": ["relu1.out"]"#,
        r#""inputs": ["fc1.out", "fc1.mm"], "outputs": ["relu1.out"]"#,
    )]) => [
        (Arity, node("relu1"), (35, 29), r#""relu""#, "op relu takes 1 inputs, got 2"),
    ];
}

// ---------------------------------------------------------------------------------------
// Sizes
// ---------------------------------------------------------------------------------------

bad_input! {
    zero_sized_dimension: Mlp(&[(r#"{"name": "fc1.bias", "shape": [3]"#, r#"{"name": "fc1.bias", "shape": [0]"#)]) => [
        (Size, tensor("fc1.bias"), (10, 35), "[0]", "shape [0] has a zero dimension"),
    ];
    absurdly_large_tensor: Mlp(&[(
        r#"{"name": "fc1.bias", "shape": [3]"#,
        r#"{"name": "fc1.bias", "shape": [1000000000, 1000000000, 1000000]"#,
    )]) => [
        (Size, tensor("fc1.bias"), (10, 35), "[1000000000,",
            "shape [1000000000, 1000000000, 1000000] is absurdly large (over 1 PiB)"),
    ];
    // Larger than 64 bits can count: the product overflows.
    tensor_whose_size_overflows_64_bits: Mlp(&[(
        r#"{"name": "fc1.bias", "shape": [3]"#,
        r#"{"name": "fc1.bias", "shape": [4294967296, 4294967296]"#,
    )]) => [
        (Size, tensor("fc1.bias"), (10, 35), "[4294967296,", "is absurdly large"),
    ];
    // A single dimension that does not fit in 64 bits.
    dimension_that_does_not_fit_in_64_bits: Mlp(&[(
        r#"{"name": "fc1.bias", "shape": [3]"#,
        r#"{"name": "fc1.bias", "shape": [18446744073709551616]"#,
    )]) => [
        (Size, tensor("fc1.bias"), (10, 36), "18446744073709551616]",
            "dimension 18446744073709551616 is not a non-negative integer that fits in 64 bits"),
    ];
    negative_dimension: Mlp(&[(r#"{"name": "fc1.bias", "shape": [3]"#, r#"{"name": "fc1.bias", "shape": [-3]"#)]) => [
        (Size, tensor("fc1.bias"), (10, 36), "-3]", "dimension -3 is not a non-negative integer"),
    ];
}

// ---------------------------------------------------------------------------------------
// Several problems at once
// ---------------------------------------------------------------------------------------

bad_input! {
    // The edits are listed out of line order on purpose; the report is in line order.
    several_independent_problems_are_all_reported_in_line_order: Mlp(&[
        (r#""op": "relu""#, r#""op": "leaky_relu""#), // line 35
        (r#""meta": {"#, r#""metadata": {"#), // line 5
        (r#"{"name": "fc1.bias", "shape": [3]"#, r#"{"name": "fc1.bias", "shape": [0]"#), // line 10
        (r#""attrs": {"transpose_b": true}"#, r#""attrs": {"transpose_c": true}"#), // line 42
        (r#""dtype": "i32""#, r#""dtype": "int32""#), // line 8
        // line 33: fc1.weight transposed no longer fits x
        (
            r#"{"name": "fc1.matmul", "op": "matmul","#,
            r#"{"name": "fc1.matmul", "op": "matmul", "attrs": {"transpose_b": true},"#,
        ),
    ]) => [
        (UnknownField, Subject::Model, (5, 3), r#""metadata""#, r#"unknown field "metadata""#),
        (BadValue, tensor("labels"), (8, 47), r#""int32""#, r#"unknown dtype "int32""#),
        (Size, tensor("fc1.bias"), (10, 35), "[0]", "zero dimension"),
        (Shape, node("fc1.matmul"), (33, 34), r#""matmul""#, "inner dimensions differ (4 and 3)"),
        (BadValue, node("relu1"), (35, 29), r#""leaky_relu""#, r#"unknown op "leaky_relu""#),
        (Attribute, node("fc2.input_grad"), (42, 73), "true}", "op matmul has no attribute 'transpose_c'"),
    ];
}

// ---------------------------------------------------------------------------------------
// Regressions: inputs that used to panic (arithmetic overflow on file-controlled values)
// ---------------------------------------------------------------------------------------

/// 2^14 copies of a 2^50-element u8 tensor (each 1 PiB, the largest allowed).
fn concat_of_huge_inputs() -> String {
    let inputs = vec![r#""x""#; 1 << 14].join(", ");
    format!(
        r#"{{"format": "placer-model", "version": 1, "name": "concat",
 "tensors": [{{"name": "x", "shape": [1125899906842624], "dtype": "u8", "role": "input"}},
  {{"name": "y", "shape": [1], "dtype": "u8", "role": "activation"}}],
 "nodes": [{{"name": "c", "op": "concat", "attrs": {{"axis": 0}}, "inputs": [{inputs}], "outputs": ["y"]}}]}}"#
    )
}

bad_input! {
    regression_conv_padding_near_i64_max_does_not_overflow: Convnet(&[
        (r#""padding": [1, 1]"#, r#""padding": [9223372036854775807, 1]"#),
    ]) => [
        (Shape, node("conv"), (18, 28), r#""conv2d""#, "conv2d: padding 9223372036854775807 is too large"),
    ];
    // (kernel - 1) * dilation + 1 with a 4x4 filter.
    regression_conv_dilation_near_i64_max_does_not_overflow: Convnet(&[
        (r#""dilation": [1, 1]"#, r#""dilation": [9223372036854775807, 1]"#),
        (r#""shape": [4, 3, 3, 3]"#, r#""shape": [4, 3, 4, 4]"#),
    ]) => [
        (Shape, node("conv"), (18, 28), r#""conv2d""#,
            "kernel 4 with dilation 9223372036854775807 spans more than 2^64 elements"),
    ];
    regression_split_sizes_that_overflow_when_added: Convnet(&[
        (r#""sizes": [16, 48]"#, r#""sizes": [9223372036854775807, 9223372036854775807]"#),
    ]) => [
        (Shape, node("split"), (21, 29), r#""split""#,
            "sizes [9223372036854775807, 9223372036854775807] must be positive and add up to 64"),
    ];
    regression_concat_total_that_overflows: Built(concat_of_huge_inputs) => [
        (Shape, node("c"), (4, 32), r#""concat""#, "concat: inputs add up to more than 2^64 elements along axis 0"),
    ];
}

/// `name: source => kind (or None for any), message fragment;` becomes `#[test] fn name`:
/// `source` must be refused, with at least one diagnostic of that kind whose message
/// contains the fragment. For problems whose exact location is not the point.
macro_rules! refused {
    ($($name:ident: $src:expr => $kind:expr, $message:expr;)+) => {$(
        #[test]
        fn $name() {
            let kind: Option<K> = $kind;
            let diags = parse_model($src).expect_err("must be refused");
            assert!(
                diags.iter().any(|d| kind.is_none_or(|k| d.kind == k) && d.message.contains($message)),
                "{diags}"
            );
        }
    )+};
}

refused! {
    // Found while documenting: a tensor listed twice in `updates` made the node depend on
    // itself, and the derived schedule silently left it out.
    a_tensor_updated_twice_by_one_node_is_refused: r#"{"format": "placer-model", "version": 1, "name": "m",
  "tensors": [
    {"name": "w", "shape": [4], "role": "weight"},
    {"name": "v", "shape": [4], "role": "optimizer_state"},
    {"name": "g", "shape": [4], "role": "input"}
  ],
  "nodes": [
    {"name": "sgd", "op": "sgd_momentum", "attrs": {"lr": 0.1, "momentum": 0.9}, "inputs": ["g"], "updates": ["w", "w"], "outputs": []}
  ]
}"# => Some(K::Arity), r#"twice in "updates""#;
    // Found while documenting: a model with no nodes validated, then the memory profile
    // indexed past its end.
    a_model_without_nodes_is_refused: r#"{"format": "placer-model", "version": 1, "name": "m",
  "tensors": [{"name": "w", "shape": [4], "role": "weight"}], "nodes": []}"# => None, "has no nodes";
    pooling_integer_tensors_is_refused: r#"{"format": "placer-model", "version": 1, "name": "m",
  "tensors": [
    {"name": "x", "shape": [1, 1, 4, 4], "dtype": "i32", "role": "input"},
    {"name": "y", "shape": [1, 1, 2, 2], "dtype": "i32", "role": "activation"},
    {"name": "i", "shape": [1, 1, 2, 2], "dtype": "i32", "role": "workspace"}
  ],
  "nodes": [{"name": "p", "op": "max_pool2d", "attrs": {"kernel": [2, 2]}, "inputs": ["x"], "outputs": ["y", "i"]}]
}"# => None, "expected a floating-point tensor";
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

// ---------------------------------------------------------------------------------------
// Positive tests
// ---------------------------------------------------------------------------------------

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
    assert!(reformatted.find(r#""version""#) < reformatted.find(r#""format""#), "{reformatted}");
    assert_eq!(hash(&reformatted), base);
    // And everything on one line.
    assert_eq!(hash(&serde_json::to_string(&value).unwrap()), base);

    let renamed = edit(MLP, r#""name": "mlp-tiny""#, r#""name": "another name""#);
    let renamed = edit(&renamed, r#""batch": "2""#, r#""batch": "two""#);
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
