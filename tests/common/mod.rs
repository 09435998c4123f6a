//! Helpers shared by the end-to-end tests of the `placer` binary.

#![allow(dead_code)] // each test file uses a different subset

pub mod outline;
pub mod profiles;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The model bundled in configs/models (`placer zoo lenet-mnist --batch 256`).
pub const BUNDLED: &str = "configs/models/lenet-mnist-b256.json";

/// A model file with three independent problems on lines 5 and 9: an unknown field, an
/// undeclared input, and a tensor produced twice.
pub const MODEL_WITH_PROBLEMS: &str = r#"{"format": "placer-model", "version": 1, "name": "bad",
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

/// One host cache per test process, so tests never touch the user's ~/.cache.
pub fn cache_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("temp dir")).path()
}

/// One empty checkpoint directory per test process: `placer solve MODEL` without
/// `--profile` looks there, never in the repository's `checkpoints/` (which a
/// `placer pipeline` run fills).
pub fn checkpoint_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("temp dir")).path()
}

/// `placer` run from the repository root with this process's host cache and checkpoint
/// directory.
pub fn command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_placer"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PLACER_CACHE_DIR", cache_dir())
        .env("PLACER_CHECKPOINT_DIR", checkpoint_dir());
    cmd
}

pub fn placer(args: &[&str]) -> Output {
    command().args(args).output().expect("placer runs")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A path as the argument the CLI takes.
pub fn path_str(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// `placer zoo NAME --batch BATCH` written to `DIR/NAME-BATCH.json`; it must succeed.
pub fn zoo_file(dir: &Path, name: &str, batch: &str) -> PathBuf {
    let path = dir.join(format!("{name}-{batch}.json"));
    let out = placer(&["zoo", name, "--batch", batch, "-o", path_str(&path)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    path
}

/// The ONNX test files (the onnx wheel's light models, a BERT-like export, an
/// onnxruntime-training graph), generated once per target directory by
/// scripts/onnx/testdata.sh from PyPI packages. Nothing of it is committed.
pub fn onnx_testdata() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("onnx-testdata");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/onnx/testdata.sh");
        let out = Command::new("bash").arg(&script).arg(&dir).output().expect("bash runs");
        assert!(out.status.success(), "scripts/onnx/testdata.sh failed:\n{}", text(&out.stderr));
        dir
    })
}

/// Runs a check script of scripts/ with `--placer` this build's binary, prints its
/// report (the test's evidence), and requires its success and its closing line `done`,
/// with no FAIL line.
#[allow(clippy::print_stdout)]
pub fn script_check(script: &str, done: &str) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(repo.join(script))
        .args(["--placer", env!("CARGO_BIN_EXE_placer")])
        .output()
        .unwrap_or_else(|e| panic!("{script} runs: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "{script} failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains(done), "{stdout}");
    assert!(!stdout.contains("FAIL"), "{stdout}");
}
