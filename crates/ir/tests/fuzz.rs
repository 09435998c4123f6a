//! Fuzzing the model reader: valid fixtures, mutated at random (raw bytes and JSON
//! structure), must never make `parse_model` panic, and every problem it reports must
//! point inside the file. A model that does load must write out and read back unchanged.
//!
//! A failure found here is fixed in src and its input kept as a regular test in
//! bad_input.rs.

#![allow(clippy::unwrap_used)]

use placer_ir::parse_model;
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::Value;

const FIXTURES: [&str; 2] = [include_str!("data/mlp.json"), include_str!("data/convnet.json")];

/// Text that tends to break JSON readers or the checks behind them.
const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    ",",
    ":",
    "-1",
    "1e999",
    "-1e999",
    "null",
    "0",
    "-0",
    "true",
    "1.5",
    "-",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "1125899906842624",
    "\\",
    "\\u",
    "\\ud800",
    "\"\\ud800\"",
    "\"\\u0000\"",
    "é",
    "\u{1F600}",
    "\u{FFFD}",
    "\n",
    "\r\n",
    " ",
    "\t",
    "\"x\"",
    "[]",
    "{}",
    "\"schedule\": []",
    "\"updates\": []",
];

/// Interesting replacement numbers for structured mutations.
fn numbers() -> Vec<Value> {
    vec![
        Value::from(0),
        Value::from(1),
        Value::from(2),
        Value::from(3),
        Value::from(-1),
        Value::from(7),
        Value::from(64),
        Value::from(1u64 << 47),
        Value::from(1u64 << 50),
        Value::from(i64::MAX),
        Value::from(i64::MIN),
        Value::from(u64::MAX),
        Value::from(0.5),
        Value::from(1e300),
    ]
}

/// Interesting replacement strings (names, ops, dtypes, roles, nonsense).
const STRINGS: &[&str] = &[
    "",
    "x",
    "fc1",
    "relu1",
    "conv",
    "split",
    "missing",
    "matmul",
    "relu",
    "conv2d",
    "max_pool2d",
    "concat",
    "sgd_momentum",
    "bias_add",
    "f32",
    "i64",
    "u8",
    "bf16",
    "input",
    "weight",
    "activation",
    "gradient",
    "optimizer_state",
    "placer-model",
    "é\u{1F600}",
    "a\nb",
];

/// Checks everything `parse_model` promises for one input.
fn check(src: &str) -> Result<(), TestCaseError> {
    let lines = src.lines().count();
    match parse_model(src) {
        Ok(model) => {
            // What loads must write out and read back as the same model.
            let json = model.to_json();
            let again = parse_model(&json);
            prop_assert!(again.is_ok(), "written model does not load: {:?}\n{json}", again.err());
            let again = again.unwrap();
            prop_assert_eq!(again.content_hash(), model.content_hash());
            prop_assert_eq!(again.to_json(), json);
        }
        Err(diags) => {
            prop_assert!(!diags.is_empty(), "Err without a diagnostic");
            let _ = diags.to_string();
            let mut previous = None;
            for d in diags.iter() {
                let Some(loc) = d.location else {
                    previous = Some((usize::MAX, 0));
                    continue;
                };
                prop_assert!(loc.line >= 1 && loc.column >= 1, "{d}");
                prop_assert!(loc.line <= lines + 1, "{d}: line beyond the {lines} lines of the file");
                let width = src.split('\n').nth(loc.line - 1).map_or(0, |l| l.chars().count());
                prop_assert!(loc.column <= width + 1, "{d}: column beyond the {width} characters of its line");
                // Sorted by position; problems without a location come last.
                let here = (loc.line, loc.column);
                prop_assert!(previous.is_none_or(|p| p <= here), "{d}: not in file order\n{diags}");
                previous = Some(here);
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Byte-level mutations
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum ByteMutation {
    Flip(Index, u8),
    Truncate(Index),
    Delete(Index, usize),
    Duplicate(Index, usize, Index),
    Insert(Index, Index),
}

fn byte_mutation() -> impl Strategy<Value = ByteMutation> {
    prop_oneof![
        (any::<Index>(), 1..=255u8).prop_map(|(i, m)| ByteMutation::Flip(i, m)),
        any::<Index>().prop_map(ByteMutation::Truncate),
        (any::<Index>(), 1..200usize).prop_map(|(i, n)| ByteMutation::Delete(i, n)),
        (any::<Index>(), 1..200usize, any::<Index>()).prop_map(|(i, n, j)| ByteMutation::Duplicate(i, n, j)),
        (any::<Index>(), any::<Index>()).prop_map(|(i, t)| ByteMutation::Insert(i, t)),
    ]
}

fn apply_bytes(bytes: &mut Vec<u8>, m: &ByteMutation) {
    let len = bytes.len();
    match m {
        ByteMutation::Flip(i, mask) if len > 0 => bytes[i.index(len)] ^= mask,
        ByteMutation::Truncate(i) => bytes.truncate(i.index(len + 1)),
        ByteMutation::Delete(i, n) if len > 0 => {
            let start = i.index(len);
            bytes.drain(start..(start + n).min(len));
        }
        ByteMutation::Duplicate(i, n, at) if len > 0 => {
            let start = i.index(len);
            let piece = bytes[start..(start + n).min(len)].to_vec();
            let at = at.index(len + 1);
            bytes.splice(at..at, piece);
        }
        ByteMutation::Insert(i, t) => {
            let at = i.index(len + 1);
            bytes.splice(at..at, TOKENS[t.index(TOKENS.len())].bytes());
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------
// Structured mutations
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Mutation {
    /// Replace a number somewhere in the document.
    Number(Index, Index),
    /// Replace a string somewhere (a name, a reference, an op, a dtype, a role...).
    Str(Index, Index),
    /// Point an operand or schedule entry at another tensor or node, or at none.
    Rename(Index, Index),
    /// Remove a member of some object.
    DropField(Index),
    /// Remove, duplicate or swap array elements.
    DropElement(Index),
    DuplicateElement(Index),
    SwapElements(Index, Index),
    /// Replace any value by one of another type.
    Retype(Index, Index),
    /// Add an explicit schedule: the nodes in file order, rotated, or reversed.
    Schedule(Index),
    /// Set an attribute of a node (node, name, shape of value, two integers): attributes
    /// feed the shape arithmetic, so they get boundary values on purpose.
    Attr(Index, Index, u8, Index, Index),
}

/// Every attribute name some op reads, and one no op knows.
const ATTR_NAMES: &[&str] = &[
    "stride",
    "padding",
    "dilation",
    "groups",
    "kernel",
    "count_include_pad",
    "transpose_a",
    "transpose_b",
    "alpha",
    "axis",
    "sizes",
    "perm",
    "epsilon",
    "lr",
    "momentum",
    "weight_decay",
    "bogus",
];

/// Boundary integers for attributes.
const ATTR_INTS: &[i64] = &[0, 1, 2, 3, -1, -2, 1 << 32, 1 << 62, i64::MAX - 1, i64::MAX, i64::MIN];

fn attr_value(kind: u8, a: i64, b: i64) -> Value {
    match kind {
        0 => Value::from(a),
        1 | 2 => serde_json::json!([a, b]),
        3 => serde_json::json!([a]),
        4 => serde_json::json!([a, b, a]),
        5 => Value::Bool(a > 0),
        _ => Value::from(0.5),
    }
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let i = any::<Index>;
    prop_oneof![
        3 => (i(), i()).prop_map(|(a, b)| Mutation::Number(a, b)),
        2 => (i(), i()).prop_map(|(a, b)| Mutation::Str(a, b)),
        3 => (i(), i()).prop_map(|(a, b)| Mutation::Rename(a, b)),
        2 => i().prop_map(Mutation::DropField),
        1 => i().prop_map(Mutation::DropElement),
        1 => i().prop_map(Mutation::DuplicateElement),
        1 => (i(), i()).prop_map(|(a, b)| Mutation::SwapElements(a, b)),
        1 => (i(), i()).prop_map(|(a, b)| Mutation::Retype(a, b)),
        1 => i().prop_map(Mutation::Schedule),
        3 => (i(), i(), 0..7u8, i(), i()).prop_map(|(n, a, k, x, y)| Mutation::Attr(n, a, k, x, y)),
    ]
}

/// A path from the root to a value: object keys and array indices.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    At(usize),
}

/// Paths to every value in the document (the root excluded) for which `keep` holds,
/// given the value and the key or index that leads to it.
fn paths(root: &Value, keep: &dyn Fn(&Value, &Step) -> bool) -> Vec<Vec<Step>> {
    fn walk(v: &Value, path: &mut Vec<Step>, keep: &dyn Fn(&Value, &Step) -> bool, out: &mut Vec<Vec<Step>>) {
        let children: Vec<(Step, &Value)> = match v {
            Value::Object(m) => m.iter().map(|(k, c)| (Step::Key(k.clone()), c)).collect(),
            Value::Array(a) => a.iter().enumerate().map(|(i, c)| (Step::At(i), c)).collect(),
            _ => return,
        };
        for (step, child) in children {
            if keep(child, &step) {
                out.push(path.iter().cloned().chain([step.clone()]).collect());
            }
            path.push(step);
            walk(child, path, keep, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(root, &mut Vec::new(), keep, &mut out);
    out
}

fn get<'v>(root: &'v Value, path: &[Step]) -> Option<&'v Value> {
    path.iter().try_fold(root, |v, step| match step {
        Step::Key(k) => v.get(k.as_str()),
        Step::At(i) => v.get(*i),
    })
}

fn get_mut<'v>(root: &'v mut Value, path: &[Step]) -> Option<&'v mut Value> {
    path.iter().try_fold(root, |v, step| match step {
        Step::Key(k) => v.get_mut(k.as_str()),
        Step::At(i) => v.get_mut(*i),
    })
}

fn pick<'p>(paths: &'p [Vec<Step>], i: &Index) -> Option<&'p [Step]> {
    (!paths.is_empty()).then(|| paths[i.index(paths.len())].as_slice())
}

/// Names of the document's tensors and nodes, plus some that do not exist.
fn names(doc: &Value) -> Vec<String> {
    let mut out: Vec<String> = ["tensors", "nodes"]
        .iter()
        .filter_map(|k| doc.get(k).and_then(Value::as_array))
        .flatten()
        .filter_map(|item| item.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    out.extend(["nobody".to_string(), String::new()]);
    out
}

fn apply(doc: &mut Value, m: &Mutation) {
    let is_list = |step: &Step| matches!(step, Step::Key(k) if ["inputs", "outputs", "updates", "schedule"].contains(&k.as_str()));
    match m {
        Mutation::Number(at, with) => {
            let all = paths(doc, &|v, _| v.is_number());
            if let Some(p) = pick(&all, at) {
                let nums = numbers();
                *get_mut(doc, p).unwrap() = nums[with.index(nums.len())].clone();
            }
        }
        Mutation::Str(at, with) => {
            let all = paths(doc, &|v, _| v.is_string());
            if let Some(p) = pick(&all, at) {
                *get_mut(doc, p).unwrap() = Value::from(STRINGS[with.index(STRINGS.len())]);
            }
        }
        Mutation::Rename(at, with) => {
            let lists = paths(doc, &|v, step| v.is_array() && is_list(step));
            let entries: Vec<Vec<Step>> = lists
                .iter()
                .flat_map(|p| {
                    let len = get(doc, p).and_then(Value::as_array).map_or(0, Vec::len);
                    (0..len).map(move |i| p.iter().cloned().chain([Step::At(i)]).collect::<Vec<_>>())
                })
                .collect();
            if let Some(p) = pick(&entries, at) {
                let names = names(doc);
                *get_mut(doc, p).unwrap() = Value::from(names[with.index(names.len())].clone());
            }
        }
        Mutation::DropField(at) => {
            let all = paths(doc, &|_, step| matches!(step, Step::Key(_)));
            if let Some((Step::Key(k), parent)) = pick(&all, at).and_then(<[Step]>::split_last)
                && let Some(Value::Object(m)) = get_mut(doc, parent)
            {
                m.remove(k);
            }
        }
        Mutation::DropElement(at) | Mutation::DuplicateElement(at) => {
            let all = paths(doc, &|_, step| matches!(step, Step::At(_)));
            if let Some((Step::At(i), parent)) = pick(&all, at).and_then(<[Step]>::split_last)
                && let Some(Value::Array(a)) = get_mut(doc, parent)
            {
                if matches!(m, Mutation::DropElement(_)) {
                    a.remove(*i);
                } else {
                    let copy = a[*i].clone();
                    a.insert(*i, copy);
                }
            }
        }
        Mutation::SwapElements(at, other) => {
            let all = paths(doc, &|v, _| v.as_array().is_some_and(|a| a.len() > 1));
            if let Some(p) = pick(&all, at)
                && let Some(Value::Array(a)) = get_mut(doc, p)
            {
                let len = a.len();
                let i = other.index(len);
                a.swap(i, (i + 1) % len);
            }
        }
        Mutation::Retype(at, with) => {
            let all = paths(doc, &|_, _| true);
            if let Some(p) = pick(&all, at) {
                let replacements = [
                    Value::Null,
                    Value::Bool(true),
                    Value::from("x"),
                    Value::from(1),
                    Value::Array(Vec::new()),
                    Value::Object(serde_json::Map::new()),
                    serde_json::json!([1, 2]),
                    serde_json::json!({"name": "x"}),
                ];
                *get_mut(doc, p).unwrap() = replacements[with.index(replacements.len())].clone();
            }
        }
        Mutation::Schedule(how) => {
            let mut order: Vec<Value> = doc
                .get("nodes")
                .and_then(Value::as_array)
                .map(|nodes| nodes.iter().filter_map(|n| n.get("name").cloned()).collect())
                .unwrap_or_default();
            if !order.is_empty() {
                let k = how.index(order.len() + 1);
                if k == order.len() {
                    order.reverse();
                } else {
                    order.rotate_left(k);
                }
            }
            if let Value::Object(m) = doc {
                m.insert("schedule".to_string(), Value::Array(order));
            }
        }
        Mutation::Attr(at, name, kind, a, b) => {
            let Some(Value::Array(nodes)) = doc.get_mut("nodes") else { return };
            if nodes.is_empty() {
                return;
            }
            let len = nodes.len();
            let Value::Object(node) = &mut nodes[at.index(len)] else { return };
            let attrs = node.entry("attrs").or_insert_with(|| Value::Object(serde_json::Map::new()));
            if let Value::Object(attrs) = attrs {
                let int = |i: &Index| ATTR_INTS[i.index(ATTR_INTS.len())];
                let value = attr_value(*kind, int(a), int(b));
                attrs.insert(ATTR_NAMES[name.index(ATTR_NAMES.len())].to_string(), value);
            }
        }
    }
}

/// 512 cases per property by default (a second or two in a debug build); set
/// PROPTEST_CASES higher for a longer fuzzing run.
fn config() -> ProptestConfig {
    let default = ProptestConfig::default();
    ProptestConfig {
        cases: default.cases.max(512),
        // Failures become regular tests in bad_input.rs instead.
        failure_persistence: None,
        ..default
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn byte_mutations_never_panic_and_locate_inside_the_file(
        fixture in any::<Index>(),
        mutations in prop::collection::vec(byte_mutation(), 1..5),
    ) {
        let mut bytes = FIXTURES[fixture.index(FIXTURES.len())].as_bytes().to_vec();
        for m in &mutations {
            apply_bytes(&mut bytes, m);
        }
        // parse_model takes text: invalid UTF-8 becomes U+FFFD, which also tests that
        // columns count characters.
        check(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn structured_mutations_never_panic_and_locate_inside_the_file(
        fixture in any::<Index>(),
        mutations in prop::collection::vec(mutation(), 1..4),
        pretty in any::<bool>(),
        then_bytes in prop::option::weighted(0.2, byte_mutation()),
    ) {
        let mut doc: Value = serde_json::from_str(FIXTURES[fixture.index(FIXTURES.len())]).unwrap();
        for m in &mutations {
            apply(&mut doc, m);
        }
        let text = if pretty { serde_json::to_string_pretty(&doc) } else { serde_json::to_string(&doc) }.unwrap();
        let mut bytes = text.into_bytes();
        if let Some(m) = &then_bytes {
            apply_bytes(&mut bytes, m);
        }
        check(&String::from_utf8_lossy(&bytes))?;
    }
}

#[test]
fn fixtures_are_valid_and_pass_the_checks() {
    for src in FIXTURES {
        assert!(parse_model(src).is_ok());
        check(src).unwrap();
    }
}

#[test]
fn every_single_truncation_of_a_fixture_is_handled() {
    // Exhaustive over cut points: cheap, and covers every "ends in the middle of X".
    let src = FIXTURES[1];
    for end in (0..src.len()).filter(|&i| src.is_char_boundary(i)) {
        check(&src[..end]).unwrap_or_else(|e| panic!("cut at {end}: {e}"));
    }
}
