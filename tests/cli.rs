//! End-to-end tests of the `placer` binary: one per verb, plus its bad-input paths.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BUNDLED: &str = "configs/models/lenet-mnist-b256.json";

fn placer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_placer"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("placer runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn scratch(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(name);
    (dir, path)
}

#[test]
fn zoo_regenerates_the_bundled_default_model_exactly() {
    let out = placer(&["zoo", "lenet-mnist", "--batch", "256"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let bundled = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(BUNDLED)).expect("bundled model");
    assert_eq!(text(&out.stdout), bundled, "configs/models is stale: regenerate it with placer zoo");
}

#[test]
fn zoo_writes_a_file_that_loads_and_lists_its_networks() {
    let (_dir, path) = scratch("resnet18.json");
    let out = placer(&["zoo", "resnet18", "--batch", "2", "-o", path.to_str().expect("utf-8 path")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("wrote resnet18-b2"));
    let model = placer_ir::load_model(&path).expect("valid model");
    assert_eq!(model.name(), "resnet18-b2");

    let list = text(&placer(&["zoo", "--list"]).stdout);
    for name in [
        "lenet-mnist",
        "mlp",
        "vgg16",
        "vgg19",
        "resnet18",
        "resnet50",
        "resnet200",
        "densenet121",
        "densenet264",
        "inception-v3",
        "bert-base",
    ] {
        assert!(list.lines().any(|l| l.starts_with(name)), "{name} missing from --list");
    }
}

#[test]
fn zoo_rejects_unknown_networks_and_bad_batches() {
    let out = placer(&["zoo", "resnet51"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("unknown model 'resnet51'") && err.contains("resnet50"), "{err}");
    assert_eq!(err.lines().count(), 1, "one-line error: {err}");

    let out = placer(&["zoo", "mlp", "--batch", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("batch size must be between 1"));

    let out = placer(&["zoo", "mlp", "--batch", "-3"]);
    assert_eq!(out.status.code(), Some(2), "clap rejects a negative batch");
}

#[test]
fn zoo_reports_an_unwritable_output_and_leaves_nothing_behind() {
    let (dir, _) = scratch("unused");
    let target = dir.path().join("no-such-dir").join("m.json");
    let out = placer(&["zoo", "mlp", "-o", target.to_str().expect("utf-8 path")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("cannot write model"), "{}", text(&out.stderr));
    assert!(!target.exists());
}

#[test]
fn inspect_summarises_the_bundled_model() {
    let out = placer(&["inspect", BUNDLED]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("parameters      61,706"), "{s}");
    assert!(s.contains("nodes           50 (forward 18, backward 22, update 10)"), "{s}");
    assert!(s.contains("peak live"), "{s}");
    assert!(s.contains("memory configurations per node over 2 pools"), "{s}");
}

#[test]
fn inspect_json_agrees_with_the_library() {
    let out = placer(&["inspect", BUNDLED, "--json", "--pools", "3", "--top", "3"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    let model = placer_ir::load_model(&Path::new(env!("CARGO_MANIFEST_DIR")).join(BUNDLED)).expect("loads");
    let expected = placer_ir::Summary::new(&model, 3, 3);
    assert_eq!(json["peak_live_bytes"], expected.peak_live_bytes);
    assert_eq!(json["content_hash"], expected.content_hash.as_str());
    assert_eq!(json["largest_tensors"].as_array().map(Vec::len), Some(3));
    assert_eq!(json["configs"]["pools"], 3);
    // A 3-operand node over 3 pools has 27 configurations.
    assert!(json["configs"]["min"].as_f64().is_some_and(|m| m >= 9.0));
}

#[test]
fn inspect_draws_live_memory() {
    let (_dir, path) = scratch("live.svg");
    let out = placer(&["inspect", BUNDLED, "--svg", path.to_str().expect("utf-8 path")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let svg = std::fs::read_to_string(&path).expect("svg written");
    assert!(svg.starts_with("<svg") && svg.contains("<polyline") && svg.contains("peak 15.0 MiB"), "{svg}");
}

#[test]
fn inspect_reports_every_problem_with_its_location() {
    let (_dir, path) = scratch("bad.json");
    let bad = r#"{"format": "placer-model", "version": 1, "name": "bad",
  "tensors": [
    {"name": "x", "shape": [2, 3], "role": "input"},
    {"name": "w", "shape": [4, 5], "role": "weight"},
    {"name": "y", "shape": [2, 5], "role": "activation", "colour": "red"}
  ],
  "nodes": [
    {"name": "mm", "op": "matmul", "inputs": ["x", "w"], "outputs": ["y"]},
    {"name": "r", "op": "relu", "inputs": ["z"], "outputs": ["y"]}
  ]
}"#;
    std::fs::write(&path, bad).expect("write fixture");
    let p = path.to_str().expect("utf-8 path");
    let out = placer(&["inspect", p]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines.contains(
            &format!(
                "{p}:5:58: tensor 'y': unknown field \"colour\" in a tensor; expected one of: name, shape, dtype, role"
            )
            .as_str()
        ),
        "{err}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with(&format!("{p}:9:")) && l.contains("tensor 'z', which is not declared")),
        "{err}"
    );
    assert!(lines.iter().any(|l| l.contains("which node 'mm' already produces")), "{err}");
    assert_eq!(lines.last().copied(), Some(format!("error: {} problem(s) in {p}", lines.len() - 1).as_str()));
}

#[test]
fn inspect_rejects_missing_files_and_bad_options() {
    let out = placer(&["inspect", "no/such/model.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("error: cannot read model no/such/model.json"));

    let out = placer(&["inspect", BUNDLED, "--pools", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn run_times_a_training_step_of_the_bundled_model() {
    let out = placer(&["run", BUNDLED, "--iterations", "2", "--warmup", "1", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    assert_eq!(json["iterations"], 2);
    assert!(json["step_ms"]["median"].as_f64().is_some_and(|ms| ms > 0.0));
    assert!(json["clock"]["resolution_ns"].as_f64().is_some_and(|ns| ns > 0.0 && ns < 1e3));
    // Every op of the model appears in the per-op table.
    assert_eq!(json["by_op"].as_array().map(Vec::len), Some(14));
    // The loss after three SGD steps is below the first one.
    let (first, last) = (json["first_loss"].as_f64(), json["last_loss"].as_f64());
    assert!(matches!((first, last), (Some(f), Some(l)) if l < f), "{first:?} {last:?}");

    let table = placer(&["run", BUNDLED, "-n", "1", "--warmup", "0"]);
    assert!(table.status.success());
    let s = text(&table.stdout);
    assert!(s.contains("real host memory (not emulated)") && s.contains("slowest") && s.contains("GFLOP/s"), "{s}");
}

#[test]
fn run_rejects_bad_options_and_models() {
    assert_eq!(placer(&["run", BUNDLED, "--iterations", "0"]).status.code(), Some(2));
    let (_dir, path) = scratch("f16.json");
    let f16 = r#"{"format": "placer-model", "version": 1, "name": "h",
  "tensors": [{"name": "x", "shape": [4], "dtype": "f16", "role": "input"},
              {"name": "y", "shape": [4], "dtype": "f16", "role": "activation"}],
  "nodes": [{"name": "r", "op": "relu", "inputs": ["x"], "outputs": ["y"]}]}"#;
    std::fs::write(&path, f16).expect("write fixture");
    let out = placer(&["run", path.to_str().expect("utf-8 path")]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("tensor 'x' has element type f16, which the CPU kernels do not support"), "{err}");
}
