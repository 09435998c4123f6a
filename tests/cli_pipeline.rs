//! End-to-end tests of `placer pipeline` and `placer run --plan`: profile, solve, run
//! the plan beside the baselines, the report on disk, and plans that do not fit.

mod common;
use common::{BUNDLED, path_str, placer, text, zoo_file};

#[test]
fn pipeline_profiles_solves_runs_and_reports_then_resumes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = zoo_file(dir.path(), "lenet-mnist", "8");
    let report = dir.path().join("report");
    let ckpt = dir.path().join("ckpt");
    let args = [
        "pipeline",
        path_str(&model),
        "--budget",
        "25%",
        "--rounds",
        "1",
        "--reps",
        "3",
        "-n",
        "3",
        "--warmup",
        "1",
        "--no-probe",
        "--checkpoint-dir",
        path_str(&ckpt),
        "-o",
        path_str(&report),
    ];
    let out = placer(&args);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    for needle in
        ["1/4 profile", "2/4 solve", "ilp (async)", "first-touch", "all-dram", "Where the plan stands", "EMULATED"]
    {
        assert!(stdout.contains(needle), "missing '{needle}' in:\n{stdout}");
    }
    for file in
        ["summary.md", "plan.json", "comparison.json", "measured.json", "dram.svg", "kernels.svg", "timeline.svg"]
    {
        let path = report.join(file);
        let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        assert!(bytes > 100, "{file} is missing or empty");
    }
    let summary = std::fs::read_to_string(report.join("summary.md")).expect("summary");
    // What the report says, in outline: its sections, tables and rows (the figures are
    // this run's; tests/snapshots/cli_pipeline__summary_outline.snap).
    // The capacity row appears where the kernel's figures disagree, which depends on the host.
    let outline = common::outline::outline(&summary);
    let outline: Vec<&str> = outline.lines().filter(|l| !l.starts_with("| capacity |")).collect();
    insta::assert_snapshot!("summary_outline", outline.join("\n"));
    assert!(summary.contains("**EMULATED.**") && summary.contains("| ilp (async) |"), "{summary}");
    // The host's memory before the runs, against the profile's checks of it.
    let memory = summary.lines().find(|l| l.starts_with("| host memory | Host memory ")).expect("a host memory row");
    assert!(memory.contains("ns/B before the runs") && memory.contains("through the profile (median of "), "{memory}");
    let comparison: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("comparison.json")).expect("json")).expect("parses");
    let rows = comparison["rows"].as_array().expect("rows");
    for row in rows {
        let (peak, budget) = (row["dram_peak_bytes"].as_u64(), row["budget_bytes"].as_u64());
        assert!(peak <= budget, "{row}");
    }
    // All-DRAM ran twice: A′ is the anchor, not a row, and every row is set against it.
    assert!(rows.iter().all(|r| r["name"] != "all-dram (A′)" && r["anchored_error"].is_f64()), "{comparison}");
    let anchor = &comparison["anchor"];
    let all_dram = rows.iter().find(|r| r["name"] == "all-dram").expect("all-DRAM's row");
    let shift = anchor["measured_ms"].as_f64().expect("A′") - anchor["predicted_ms"].as_f64().expect("predicted");
    assert!((anchor["shift_ms"].as_f64().expect("shift") - shift).abs() < 1e-9, "{anchor}");
    assert_eq!(anchor["predicted_ms"], all_dram["predicted_ms"], "A′ is all-DRAM's plan");
    if anchor["applied"] == false {
        assert!(rows.iter().all(|r| r["anchored_error"] == r["error"]), "a shift within the noise is not added");
    }
    assert!(summary.contains("| anchored |") && summary.contains("The host's pace: all-DRAM ran a second time"));

    // Again: the profile resumes and measures nothing twice.
    let out = placer(&args);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let line = stdout.lines().find(|l| l.contains("resumed from the checkpoint")).expect("profile line");
    // "...: N measurements, P passes of S steps (R resumed from the checkpoint), ...":
    // R must be P.
    let head = line.split(" passes of ").next().expect("passes");
    let passes = head.rsplit(' ').next().expect("pass count");
    assert!(line.contains(&format!("({passes} resumed")), "{line}");

    // The plan it wrote runs on its own, beside the baselines.
    let plan = report.join("plan.json");
    let out = placer(&[
        "run",
        path_str(&model),
        "--plan",
        path_str(&plan),
        "-n",
        "2",
        "--warmup",
        "1",
        "--compare-baselines",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    for needle in [
        "predicted",
        "measured by the arena",
        "kernels furthest",
        "side by side",
        "greedy",
        "anchored",
        "(A′)",
        "EMULATED",
    ] {
        assert!(stdout.contains(needle), "missing '{needle}' in:\n{stdout}");
    }
    // Every arena's pages are checked where they were bound (the NUMA guest check found
    // the plan's arenas reported without it): node 0 here, the emulated pool's too.
    let arenas: Vec<&str> = stdout.lines().filter(|l| l.trim_start().starts_with("pool ")).collect();
    assert!(!arenas.is_empty(), "{stdout}");
    for line in arenas {
        let verified = line.split("pages verified on node 0: ").nth(1).expect(line);
        let (found, of) = verified.split_once(" of ").expect(line);
        assert!(found == of.trim() && found != "0", "{line}");
    }

    // A plan edited so its DRAM arena is over its own budget: refused before running.
    let mut edited: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).expect("plan")).expect("json");
    let budget = edited["budget_bytes"].as_u64().expect("budget");
    edited["arena_bytes"][0] = serde_json::json!(budget + 4096);
    let over = dir.path().join("over.json");
    std::fs::write(&over, edited.to_string()).expect("write");
    let out = placer(&["run", path_str(&model), "--plan", path_str(&over), "-n", "1"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("over its own budget"), "{stderr}");

    // Another model's plan is refused with one line and exit 2.
    let other = zoo_file(dir.path(), "lenet-mnist", "16");
    let out = placer(&["run", path_str(&other), "--plan", path_str(&plan)]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("the plan is for model 'lenet-mnist-b8'") && stderr.lines().count() == 1, "{stderr}");

    // The first-run path: pipeline, then `solve --budget 25%` in the user's own words,
    // with no model argument. The checkpoint carries its model, so this works even once
    // the model file is gone.
    std::fs::remove_file(&model).expect("remove the model file");
    let solved = dir.path().join("solved.json");
    let out = placer(&[
        "solve",
        "--budget",
        "25%",
        "--checkpoint-dir",
        path_str(&ckpt),
        "--no-probe",
        "-o",
        path_str(&solved),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("lenet-mnist-b8 from the checkpoint (its file") && stdout.contains("is gone)"), "{stdout}");
    assert!(solved.is_file());
}

#[test]
fn bad_plans_and_options_are_clear_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = BUNDLED;
    let missing = dir.path().join("missing.json");
    let out = placer(&["run", model, "--plan", path_str(&missing)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("missing.json"), "{}", text(&out.stderr));

    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, "{\"format\": \"placer-plan\", \"version\": 2").expect("write");
    let out = placer(&["run", model, "--plan", path_str(&garbage)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).starts_with("error: plan "), "{}", text(&out.stderr));

    let out = placer(&["run", model, "--compare-baselines"]);
    assert_eq!(out.status.code(), Some(2), "--compare-baselines needs --plan");

    let out = placer(&["pipeline", model, "--budget", "150%", "--no-probe"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("budget '150%'"), "{}", text(&out.stderr));
}
