//! The torch package (python/) as part of the test suite, with real PyTorch from PyPI:
//! scripts/torch/venv.sh installs torch, torchvision and transformers into a venv outside
//! the repository (once; ~5.7 GB, two minutes here) and builds placer_torch from this
//! checkout into it. Then:
//! - python/tests: capture's names, parameter counts and refusals; apply's unchanged
//!   losses, pools' charges, moves, DRAM peak and re-homed tensors' pages, on a plan this
//!   build's `placer` makes; the torch-kernel profile (each node's replayed aten calls
//!   against torch's own results, the checkpoint `compare` and `solve` read, resuming,
//!   refusals);
//! - python/examples/small_cnn.py: a training loop captured with one added line, which
//!   this build's `placer` then profiles, solves and runs under the plan.

mod common;

use common::{command, path_str, text};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The venv's python, with placer_torch built from this checkout.
fn python() -> &'static Path {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = Command::new(repo.join("scripts/torch/venv.sh")).output().expect("scripts/torch/venv.sh runs");
        assert!(out.status.success(), "scripts/torch/venv.sh failed:\n{}", text(&out.stderr));
        PathBuf::from(text(&out.stdout).trim())
    })
}

/// Runs the venv's python; `placer` there (the tests' PLACER_BIN, and placer_torch's
/// own opening of the host's pools) is this build's, with this process's host cache.
fn run_python(args: &[&str]) -> (String, String) {
    let out = Command::new(python())
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PLACER_BIN", env!("CARGO_BIN_EXE_placer"))
        .env("PLACER_CACHE_DIR", common::cache_dir())
        .output()
        .expect("python runs");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "python {args:?} failed:\n{stdout}\n{stderr}");
    (stdout, stderr)
}

#[test]
#[allow(clippy::print_stdout)]
fn the_python_tests_pass_with_real_torch() {
    let (_, stderr) = run_python(&["-m", "unittest", "discover", "-s", "python/tests", "-v"]);
    println!("{stderr}");
    // unittest reports on stderr; "OK" only when every test ran and passed, none skipped.
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default();
    assert_eq!(last, "OK", "{stderr}");
    assert!(!stderr.contains("skipped"), "{stderr}");
}

#[test]
fn a_captured_torch_loop_is_profiled_solved_and_run_under_its_plan() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = dir.path().join("small_cnn.json");
    let (stdout, _) = run_python(&["python/examples/small_cnn.py", path_str(&model)]);
    assert!(stdout.contains("parameters (torch: 5434)") && stdout.contains("captured"), "{stdout}");
    assert!(stdout.contains(" 5434 parameters"), "{stdout}");

    let ck = dir.path().join("checkpoints");
    let plan = dir.path().join("plan.json");
    let run = |args: &[&str]| {
        let out = command().env("PLACER_CHECKPOINT_DIR", &ck).args(args).output().expect("placer runs");
        assert!(out.status.success(), "placer {args:?}:\n{}\n{}", text(&out.stdout), text(&out.stderr));
        text(&out.stdout)
    };
    run(&["profile", path_str(&model)]);
    run(&["solve", "--budget", "50%", "-o", path_str(&plan)]);
    let report = run(&["run", path_str(&model), "--plan", path_str(&plan), "-n", "2"]);
    // The step ran under the plan, with torch's names for its kernels and tensors.
    assert!(report.contains("predicted") && report.contains("loss"), "{report}");
    let plan_text = std::fs::read_to_string(&plan).expect("plan written");
    assert!(plan_text.contains("\"0.weight\""), "the plan places torch's parameter '0.weight'");
}
