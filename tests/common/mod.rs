//! Helpers shared by the end-to-end tests of the `placer` binary.

#![allow(dead_code)] // each test file uses a different subset

use std::path::Path;
use std::process::{Command, Output};
use std::sync::OnceLock;

/// One host cache per test process, so tests never touch the user's ~/.cache.
pub fn cache_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("temp dir")).path()
}

/// `placer` run from the repository root with this process's host cache.
pub fn command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_placer"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR")).env("PLACER_CACHE_DIR", cache_dir());
    cmd
}

pub fn placer(args: &[&str]) -> Output {
    command().args(args).output().expect("placer runs")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The ONNX test files (the onnx wheel's light models, a BERT-like export, an
/// onnxruntime-training graph), generated once per target directory by
/// scripts/onnx/testdata.sh from PyPI packages. Nothing of it is committed.
pub fn onnx_testdata() -> &'static Path {
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("onnx-testdata");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/onnx/testdata.sh");
        let out = Command::new("bash").arg(&script).arg(&dir).output().expect("bash runs");
        assert!(out.status.success(), "scripts/onnx/testdata.sh failed:\n{}", text(&out.stderr));
        dir
    })
}
