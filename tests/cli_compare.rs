//! End-to-end tests of `placer compare` on synthetic checkpoints.

use common::profiles::{A_US, checkpoints, profile};
use common::{path_str, placer, text};

mod common;

#[test]
fn agreeing_profiles_print_tables_and_exit_0() {
    let (_dir, a, b) = checkpoints(&[121.0, 252.0, 790.0, 1500.0, 4050.0, 14.0]);
    let out = placer(&["compare", path_str(&a), path_str(&b)]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}{stdout}", text(&out.stderr));
    for needle in [
        "model toy-b2",
        "EMULATED",
        "single",
        "simultaneous (up to 4 per pass)",
        "0.25x A",
        "≥ 50 µs",
        "< 50 µs (tiny)",
        "worst 5 kernel(s)",
        "conv4",
        "pmem,dram",
    ] {
        assert!(stdout.contains(needle), "{needle} missing from\n{stdout}");
    }
    let last = stdout.lines().last().expect("verdict");
    assert!(last.starts_with("profiles agree: 100.0% of 5"), "{last}");
    assert!(last.contains("EMULATED"), "{last}");
}

#[test]
fn disagreeing_profiles_exit_3_with_a_one_line_error() {
    let (_dir, a, b) = checkpoints(&[150.0, 250.0, 800.0, 3000.0, 4000.0, 10.0]);
    let out = placer(&["compare", path_str(&a), path_str(&b), "--top", "2"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_eq!(err.lines().count(), 1, "one-line error: {err}");
    assert!(err.starts_with("error: profiles disagree: 60.0% of 5"), "{err}");
    assert!(err.contains("worst 2.00x (conv2d conv3 pmem,dram)"), "{err}");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("worst 2 kernel(s)"), "{stdout}");

    // A looser bar passes the same pair.
    let out = placer(&["compare", path_str(&a), path_str(&b), "--share", "0.6"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn a_repeat_as_noisy_as_b_is_the_floor_b_is_judged_by() {
    let (dir, a, b) = checkpoints(&[150.0, 250.0, 800.0, 3000.0, 4000.0, 10.0]);
    let out = placer(&["compare", path_str(&a), path_str(&b)]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("; no noise floor"), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("no noise floor: these figures are not judged"), "{}", text(&out.stdout));
    // A measured again, 60% of it within ±5% of A: B's 60% is all the host allows.
    let repeat = dir.path().join("repeat.ckpt");
    placer_profile::save_checkpoint(&repeat, &profile("toy-b2", 1, 40.0, &[96.0, 250.0, 800.0, 750.0, 4000.0, 10.0]))
        .expect("save");
    let out = placer(&["compare", path_str(&a), path_str(&b), "--repeat", path_str(&repeat)]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}{stdout}", text(&out.stderr));
    assert!(stdout.contains("noise floor: A vs repeat, ≥ 50 µs"), "{stdout}");
    let last = stdout.lines().last().expect("verdict");
    assert!(
        last.starts_with(
            "profiles agree: 60.0% of 5 kernel(s) of at least 50 µs within ±5.0% (needed 60.0%, the floor's)"
        ),
        "{last}"
    );
    // A repeat of another model is refused in one line.
    let other = dir.path().join("other.ckpt");
    placer_profile::save_checkpoint(&other, &profile("another-model-b2", 1, 10.0, &A_US)).expect("save");
    let out = placer(&["compare", path_str(&a), path_str(&b), "--repeat", path_str(&other)]);
    let err = text(&out.stderr);
    assert_eq!((out.status.code(), err.lines().count()), (Some(2), 1), "{err}");
    assert!(err.contains("repeat(s)") && err.contains("different models"), "{err}");
}

#[test]
fn with_a_repeat_of_b_the_floor_is_both_profiles_noise() {
    let (dir, a, b) = checkpoints(&[150.0, 250.0, 800.0, 3000.0, 4000.0, 10.0]);
    // A repeats exactly, so A's floor alone asks for 95%.
    let a_again = dir.path().join("a2.ckpt");
    placer_profile::save_checkpoint(&a_again, &profile("toy-b2", 1, 10.0, &A_US)).expect("save");
    let out = placer(&["compare", path_str(&a), path_str(&b), "--repeat", path_str(&a_again)]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    // B's repeat strays on the two kernels where B/A does.
    let b_again = dir.path().join("b2.ckpt");
    placer_profile::save_checkpoint(&b_again, &profile("toy-b2", 4, 2.5, &A_US)).expect("save");
    let args =
        ["compare", path_str(&a), path_str(&b), "--repeat", path_str(&a_again), "--repeat-b", path_str(&b_again)];
    let out = placer(&args);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}{stdout}", text(&out.stderr));
    for needle in [
        "A vs its repeat, ≥ 50 µs",
        "B vs its repeat, ≥ 50 µs",
        "noise floor: both repeats, ≥ 50 µs",
        "B agrees with its repeat on 60.0% of kernels, A with its on 100.0%",
    ] {
        assert!(stdout.contains(needle), "{needle} missing from\n{stdout}");
    }
    let last = stdout.lines().last().expect("verdict");
    assert!(last.starts_with("profiles agree: 60.0% of 5") && last.contains("(needed 60.0%, the floor's)"), "{last}");
    // A repeat of B alone is refused: it says nothing of A's noise.
    let out = placer(&["compare", path_str(&a), path_str(&b), "--repeat-b", path_str(&b_again)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--repeat"), "{}", text(&out.stderr));
}

#[test]
fn json_has_the_summary_and_every_row() {
    let (_dir, a, b) = checkpoints(&[132.0, 250.0, 800.0, 1500.0, 4000.0, 10.0]);
    let out = placer(&["compare", path_str(&a), path_str(&b), "--json", "--tolerance", "0.1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json["meets"], true);
    assert_eq!(json["emulated"], true);
    assert_eq!(json["matched"], 6);
    assert_eq!(json["non_tiny"]["rows"], 5);
    assert_eq!(json["tiny"]["rows"], 1);
    assert_eq!(json["non_tiny"]["within_5"], 0.8);
    assert_eq!(json["non_tiny"]["within_tolerance"], 1.0);
    assert_eq!(json["a"]["mode"], "single");
    assert_eq!(json["wall_ratio"], 0.25);
    assert_eq!(json["rows"].as_array().expect("rows").len(), 6);
    assert_eq!(json["worst"][0]["node"], "conv0");
    assert!(json["verdict"].as_str().expect("verdict").starts_with("profiles agree"));
}

#[test]
fn svg_is_written() {
    let (dir, a, b) = checkpoints(&A_US);
    let svg = dir.path().join("scatter.svg");
    let out = placer(&["compare", path_str(&a), path_str(&b), "--svg", path_str(&svg)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let body = std::fs::read_to_string(&svg).expect("svg written");
    assert!(body.starts_with("<svg") && body.contains("log10 µs"), "{body}");
    assert!(text(&out.stderr).contains("wrote scatter plot"));
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporary file left behind: {left:?}");
}

#[test]
fn garbage_and_missing_checkpoints_are_bad_input() {
    let (dir, a, _b) = checkpoints(&A_US);
    let garbage = dir.path().join("garbage.ckpt");
    std::fs::write(&garbage, b"this is not a checkpoint").expect("write");
    let out = placer(&["compare", path_str(&a), path_str(&garbage)]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "one-line error: {err}");
    assert!(err.starts_with(&format!("error: checkpoint {}:", garbage.display())), "{err}");

    let missing = dir.path().join("missing.ckpt");
    let out = placer(&["compare", path_str(&missing), path_str(&a)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(&format!("checkpoint {}:", missing.display())));
}

#[test]
fn profiles_of_different_models_are_refused() {
    let (dir, a, _b) = checkpoints(&A_US);
    let other = dir.path().join("other.ckpt");
    placer_profile::save_checkpoint(&other, &profile("another-model-b2", 4, 10.0, &A_US)).expect("save");
    let out = placer(&["compare", path_str(&a), path_str(&other)]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "one-line error: {err}");
    assert!(err.contains("different models") && err.contains("toy-b2") && err.contains("another-model-b2"), "{err}");
}

#[test]
fn bad_options_are_bad_input() {
    let (_dir, a, b) = checkpoints(&A_US);
    let out = placer(&["compare", path_str(&a), path_str(&b), "--share", "2"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn a_profile_is_judged_against_the_kernels_as_they_ran_in_its_plan() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = common::zoo_file(dir.path(), "lenet-mnist", "8");
    let ckpts = dir.path().join("ckpt");
    let ok = |args: &[&str]| {
        let out = placer(args);
        assert!(out.status.success(), "placer {args:?}: {}", text(&out.stderr));
        out
    };
    ok(&["profile", path_str(&model), "--rounds", "1", "--reps", "3", "--checkpoint-dir", path_str(&ckpts)]);
    let ckpt = std::fs::read_dir(&ckpts)
        .expect("checkpoints")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|x| x == "ckpt"))
        .expect("a checkpoint");
    let plan = dir.path().join("plan.json");
    ok(&[
        "solve",
        path_str(&model),
        "--budget",
        "50%",
        "--profile",
        path_str(&ckpt),
        "--no-probe",
        "-o",
        path_str(&plan),
    ]);
    let (run1, run2) = (dir.path().join("run1.json"), dir.path().join("run2.json"));
    let mut run_out = String::new();
    for run in [&run1, &run2] {
        let out = ok(&[
            "run",
            path_str(&model),
            "--plan",
            path_str(&plan),
            "-n",
            "3",
            "--warmup",
            "1",
            "--in-situ",
            path_str(run),
        ]);
        assert!(text(&out.stderr).contains("wrote each kernel's time in the plan"), "{}", text(&out.stderr));
        run_out = text(&out.stdout);
    }
    // All-DRAM ran twice beside the plan (A and A′): the plan's error at the run's pace,
    // with the floor under it, in the side-by-side table.
    assert!(run_out.contains("The host's pace: all-DRAM ran a second time"), "{run_out}");
    assert!(run_out.contains("All-DRAM against A′ differ by"), "{run_out}");
    // The first row after the header is the plan's: its error, then its anchored error.
    let table = run_out.split("side by side, interleaved").nth(1).expect("the side-by-side table");
    let plan_row = table.lines().skip_while(|l| !l.trim_start().starts_with("strategy")).nth(1).expect("a row");
    assert!(plan_row.matches('%').count() >= 2, "no anchored error in {plan_row}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&run1).expect("record")).expect("json");
    assert_eq!(record["format"], "placer-in-situ");
    let plan_doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).expect("plan")).expect("json");
    // One entry per kernel of the plan, each timed in every timed step, in its planned pools.
    let kernels = record["kernels"].as_array().expect("kernels");
    let planned = plan_doc["kernels"].as_array().expect("plan kernels");
    assert_eq!(kernels.len(), planned.len());
    // All-DRAM ran beside the plan: every node's time with every tensor in DRAM.
    let reference = record["reference_ns"].as_object().expect("all-DRAM beside the plan");
    assert_eq!(reference.len(), planned.len());
    assert!(planned.iter().all(|p| reference[p["node"].as_str().expect("node")].as_f64().is_some_and(|t| t > 0.0)));
    let again = record["reference_again_ns"].as_object().expect("all-DRAM again beside the plan");
    assert_eq!(again.len(), planned.len());
    let pools: Vec<&str> =
        record["pools"].as_array().expect("pools").iter().map(|p| p["name"].as_str().expect("name")).collect();
    for (k, p) in kernels.iter().zip(planned) {
        assert_eq!((&k["node"], k["count"].as_u64()), (&p["node"], Some(3)), "{k}");
        let named: Vec<&str> =
            k["config"].as_array().expect("config").iter().map(|i| pools[i.as_u64().expect("pool") as usize]).collect();
        assert_eq!(serde_json::json!(named), p["config"], "{k}");
        assert!(k["median_ns"].as_f64().expect("median") > 0.0, "{k}");
    }

    // The profile against the run, with the run again as the floor: tables, and a verdict
    // either way (this host decides which); only a usage error would be exit 2.
    let out = placer(&["compare", path_str(&run1), path_str(&ckpt), "--repeat", path_str(&run2)]);
    let stdout = text(&out.stdout);
    assert!(matches!(out.status.code(), Some(0 | 3)), "{stdout}{}", text(&out.stderr));
    for needle in [
        "A: the run (each kernel in the plan)",
        "≥ 50 µs, measured by the profile",
        "noise floor: run vs repeat",
        "per op, kernels of at least 50 µs",
        "per pools of its operands",
        "host's pace  all-DRAM, run beside the plan",
        "divided by the pace's",
        "judged: ≥ 50 µs, the profile plus the charge, at the pace's",
        "per op, kernels of at least 50 µs, the prediction over the run at the pace's",
        "run µs at pace",
        "at the repeat's pace",
        "all-DRAM, run beside the plan, as a second reference",
        "the profile / all-DRAM's run, at the pace",
        "the plan's kernels all in DRAM / all-DRAM's, apart from copies",
        "all-DRAM run again (A′) / all-DRAM's, the floor",
        "EMULATED",
    ] {
        assert!(stdout.contains(needle), "{needle} missing from\n{stdout}");
    }
    let verdict =
        if out.status.code() == Some(0) { stdout.lines().last().unwrap_or("").to_string() } else { text(&out.stderr) };
    assert!(verdict.contains("of the run (needed") && verdict.contains("floor"), "{verdict}");
    assert!(verdict.contains("the solver's predictions (the profile plus each copy's charge) at the host's pace"));

    // A run as B, or a repeat of another plan: one-line errors, exit 2.
    let out = placer(&["compare", path_str(&run1), path_str(&run2)]);
    let err = text(&out.stderr);
    assert_eq!((out.status.code(), err.lines().count()), (Some(2), 1), "{err}");
    assert!(err.contains("B must be a profile"), "{err}");
    let mut other: serde_json::Value = record.clone();
    other["plan_digest"] = serde_json::json!("0123456789abcdef");
    let other_path = dir.path().join("other-plan.json");
    std::fs::write(&other_path, other.to_string()).expect("write");
    let out = placer(&["compare", path_str(&run1), path_str(&ckpt), "--repeat", path_str(&other_path)]);
    let err = text(&out.stderr);
    assert_eq!((out.status.code(), err.lines().count()), (Some(2), 1), "{err}");
    assert!(err.contains("the repeat is a run of another plan"), "{err}");
    // A damaged record is named with what is wrong.
    std::fs::write(&other_path, "{\"format\": \"placer-in-situ\", \"version\": 99}").expect("write");
    let out = placer(&["compare", path_str(&other_path), path_str(&ckpt)]);
    let err = text(&out.stderr);
    assert_eq!((out.status.code(), err.lines().count()), (Some(2), 1), "{err}");
    assert!(err.contains("other-plan.json: version 99"), "{err}");
}
