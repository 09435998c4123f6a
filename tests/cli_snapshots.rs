//! What a user reads, pinned as snapshots in tests/snapshots/: the CLI's tables and its
//! error lines, each with the command and its exit code. A change to any of them fails
//! here and shows as the diff of a `.snap` file, to be read and committed with the change
//! that made it (`INSTA_UPDATE=always cargo test --test cli_snapshots`, then
//! `git diff tests/snapshots`; no cargo-insta needed).
//!
//! Only output that is the same on every run and every machine of a kind is pinned: the
//! bundled model, hwloc XML exports instead of this machine's topology, synthetic
//! profiles, nothing measured. What varies between runs or machines (temporary
//! directories, the host fingerprint, which hashes the host name) is redacted.

mod common;
use common::profiles::{A_US, checkpoints, profile, save_pair};
use common::{BUNDLED, MODEL_WITH_PROBLEMS, command, path_str};
use std::path::Path;
use std::process::Command;

/// What a snapshot shows of a run besides the command and its exit code.
#[derive(Clone, Copy)]
enum Show {
    /// Stdout and stderr.
    All,
    /// Stderr only: what a failing command prints on stdout before it fails (solve's
    /// table of this host's pools) can differ between machines.
    Stderr,
}

/// `$ placer ARGS`, the exit code, then what `show` says when not empty, redacted. `cmd`
/// is `placer` with its working directory and host cache set.
fn shown(cmd: &mut Command, args: &[&str], scratch: &Path, show: Show) -> String {
    let out = cmd.args(args).output().expect("placer runs");
    let mut shown = format!("$ placer {}\nexit {}\n", args.join(" "), out.status.code().map_or(-1, i64::from));
    let stdout = match show {
        Show::All => &out.stdout[..],
        Show::Stderr => &[],
    };
    for (name, bytes) in [("stdout", stdout), ("stderr", &out.stderr[..])] {
        if !bytes.is_empty() {
            shown.push_str(&format!("--- {name}\n{}", String::from_utf8_lossy(bytes)));
        }
    }
    redact(&shown, scratch)
}

/// `placer ARGS` run from the repository root, all of it shown.
fn session(args: &[&str], scratch: &Path) -> String {
    shown(&mut command(), args, scratch, Show::All)
}

/// Several runs from the repository root, one after the other.
fn sessions(cases: &[&[&str]], scratch: &Path, show: Show) -> String {
    cases.iter().map(|args| shown(&mut command(), args, scratch, show)).collect::<Vec<_>>().join("\n")
}

/// `text` with the scratch directory shown as `[TMP]` and every host fingerprint (16
/// hex digits after the word) as `[FINGERPRINT]`.
fn redact(text: &str, scratch: &Path) -> String {
    let text = text.replace(path_str(scratch), "[TMP]");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find("fingerprint ") {
        let (head, tail) = rest.split_at(at + "fingerprint ".len());
        out.push_str(head);
        let digits = tail.bytes().take_while(u8::is_ascii_hexdigit).count();
        if digits == 16 {
            out.push_str("[FINGERPRINT]");
            rest = &tail[digits..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

// ---------------------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------------------

#[test]
fn zoo_list() {
    let dir = scratch();
    insta::assert_snapshot!(session(&["zoo", "--list"], dir.path()));
}

#[test]
fn inspect_the_bundled_model() {
    let dir = scratch();
    insta::assert_snapshot!(sessions(
        &[&["inspect", BUNDLED], &["inspect", BUNDLED, "--pools", "3", "--top", "3"]],
        dir.path(),
        Show::All
    ));
}

/// Every exported host in configs/topologies, one snapshot each.
#[test]
fn topo_of_exported_hosts() {
    let dir = scratch();
    for name in [
        "cxl-expander",
        "this-machine",
        "three-tier",
        "two-level-memory",
        "two-socket-optane",
        "xeon-max-flat",
        "xeon-max-9462-snc4-flat",
        "knl-snc4-flat",
    ] {
        let path = format!("configs/topologies/{name}.xml");
        insta::assert_snapshot!(format!("topo_{name}"), session(&["topo", "--topology", &path], dir.path()));
    }
}

/// The pass plan on this host's pools (DRAM and the emulated tier any one-node machine
/// gets), in both modes; nothing is measured.
#[test]
fn profile_plan_only() {
    let dir = scratch();
    let ckpt = path_str(dir.path());
    insta::assert_snapshot!(sessions(
        &[
            &["profile", BUNDLED, "--plan-only", "--checkpoint-dir", ckpt],
            &["profile", BUNDLED, "--plan-only", "--checkpoint-dir", ckpt, "--max-simultaneous", "1"],
        ],
        dir.path(),
        Show::All
    ));
}

/// Run inside the checkpoints' directory, so the file column's width does not depend on
/// where temporary directories live.
#[test]
fn compare_synthetic_profiles() {
    let compare = |b_us: &[f64], extra: &[&str]| {
        let (dir, _, _) = checkpoints(b_us);
        let args = [&["compare", "single.ckpt", "simultaneous.ckpt"], extra].concat();
        shown(command().current_dir(dir.path()), &args, dir.path(), Show::All)
    };
    insta::assert_snapshot!("compare_agreeing", compare(&[121.0, 252.0, 790.0, 1500.0, 4050.0, 14.0], &[]));
    insta::assert_snapshot!(
        "compare_disagreeing",
        compare(&[150.0, 250.0, 800.0, 3000.0, 4000.0, 10.0], &["--top", "2"])
    );
}

// ---------------------------------------------------------------------------------------
// Bad input: the error lines and exit codes
// ---------------------------------------------------------------------------------------

#[test]
fn errors_of_bad_models() {
    let dir = scratch();
    let truncated = dir.path().join("truncated.json");
    std::fs::write(&truncated, "{\"format\": \"placer-model\", \"version\": 1,\n  \"tensors\": [").expect("write");
    let problems = dir.path().join("problems.json");
    std::fs::write(&problems, MODEL_WITH_PROBLEMS).expect("write");
    let f16 = dir.path().join("f16.json");
    let f16_model = r#"{"format": "placer-model", "version": 1, "name": "h",
  "tensors": [{"name": "x", "shape": [4], "dtype": "f16", "role": "input"},
              {"name": "y", "shape": [4], "dtype": "f16", "role": "activation"}],
  "nodes": [{"name": "r", "op": "relu", "inputs": ["x"], "outputs": ["y"]}]}"#;
    std::fs::write(&f16, f16_model).expect("write");
    insta::assert_snapshot!(sessions(
        &[
            &["inspect", path_str(&truncated)],
            &["inspect", path_str(&problems)],
            &["inspect", "no/such/model.json"],
            &["run", path_str(&f16)],
        ],
        dir.path(),
        Show::Stderr
    ));
}

#[test]
fn errors_of_bad_options() {
    let dir = scratch();
    let ckpt = path_str(dir.path());
    insta::assert_snapshot!(sessions(
        &[
            &["zoo", "resnet51"],
            &["zoo", "mlp", "--batch", "0"],
            &["inspect", BUNDLED, "--pools", "0"],
            &["run", BUNDLED, "-n", "1", "--place", "activation=hbm"],
            &["run", BUNDLED, "-n", "1", "--place", "activations=pmem"],
            &["run", BUNDLED, "-n", "1", "--place", "pmem"],
            &["run", BUNDLED, "--compare-baselines"],
            &["profile", BUNDLED, "--checkpoint-dir", ckpt, "--pin", "role=weight:hbm"],
            &["profile", BUNDLED, "--checkpoint-dir", ckpt, "--reps", "9", "--max-reps", "3"],
        ],
        dir.path(),
        Show::Stderr
    ));
}

#[test]
fn errors_of_bad_hosts() {
    let dir = scratch();
    let broken = dir.path().join("broken.xml");
    std::fs::write(&broken, "<topology version=\"2.0\"><object").expect("write");
    insta::assert_snapshot!(sessions(
        &[
            &["topo", "--topology", path_str(&broken)],
            &["topo", "--topology", "no/such.xml"],
            &["topo", "--host", "no/such.json"],
            &["topo", "--emulate", "optane-v9"],
            &["topo", "--topology", "configs/topologies/three-tier.xml", "--probe"],
            &["run", BUNDLED, "-n", "1", "--topology", "configs/topologies/cxl-expander.xml"],
        ],
        dir.path(),
        Show::Stderr
    ));
}

#[test]
fn errors_of_bad_budgets_and_profiles() {
    let dir = scratch();
    let (a, b) = save_pair(dir.path(), &A_US);
    let other = dir.path().join("other.ckpt");
    placer_profile::save_checkpoint(&other, &profile("another-model-b2", 4, 10.0, &A_US)).expect("save");
    let garbage = dir.path().join("garbage.ckpt");
    std::fs::write(&garbage, b"this is not a checkpoint").expect("write");
    let (a, b, other, garbage) = (path_str(&a), path_str(&b), path_str(&other), path_str(&garbage));
    insta::assert_snapshot!(sessions(
        &[
            &["solve", BUNDLED, "--budget", "64 GBs", "--no-probe", "-o", "/dev/null"],
            &["solve", BUNDLED, "--budget", "150%", "--no-probe", "-o", "/dev/null"],
            &["solve", BUNDLED, "--budget", "64KiB", "--pin", "role=weight:dram", "--no-probe", "-o", "/dev/null"],
            &["solve", BUNDLED, "--budget", "25%", "--pin", "role=weight:nowhere", "--no-probe", "-o", "/dev/null"],
            // A profile of another model.
            &["solve", BUNDLED, "--budget", "25%", "--profile", a, "--no-probe", "-o", "/dev/null"],
            &["compare", a, garbage],
            &["compare", a, other],
            &["compare", a, b, "--share", "2"],
        ],
        dir.path(),
        Show::Stderr
    ));
}

// ---------------------------------------------------------------------------------------
// Solving and running: the tables users read most
// ---------------------------------------------------------------------------------------

/// `solve` on an exported host with no profile (every kernel time from the cost model):
/// the summary and every baseline beside the plan. The solver's wall times are shown
/// as N; everything else (the ILP stops at its gap limit) is the same on every run.
#[test]
fn solve_with_baselines_on_an_exported_host() {
    let dir = scratch();
    let ckpt = path_str(dir.path());
    let args = [
        "solve",
        BUNDLED,
        "--topology",
        "configs/topologies/two-socket-optane.xml",
        "--budget",
        "25%",
        "--no-probe",
        "--baselines",
        "--checkpoint-dir",
        ckpt,
        "-o",
        "/dev/null",
    ];
    insta::assert_snapshot!(common::outline::durations(&session(&args, dir.path())));
}

/// `run --plan --compare-baselines`: what it measures differs on every run, so its
/// outline is pinned: the sections, each line's label and every strategy's row.
#[test]
fn run_compare_baselines_outline() {
    let dir = scratch();
    let model = common::zoo_file(dir.path(), "mlp", "4");
    let plan = dir.path().join("plan.json");
    let ckpt = path_str(dir.path());
    let solve = ["solve", path_str(&model), "--budget", "50%", "--no-probe", "--checkpoint-dir", ckpt, "-o"];
    let out = command().args(solve).arg(&plan).output().expect("placer runs");
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let run = ["run", path_str(&model), "--plan", path_str(&plan), "--compare-baselines", "-n", "2"];
    let out = command().args(run).output().expect("placer runs");
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    insta::assert_snapshot!(common::outline::text_outline(&common::text(&out.stdout)));
}
