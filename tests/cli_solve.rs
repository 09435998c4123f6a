//! End-to-end tests of `placer solve`: a real (short) profile in, a checked plan out,
//! and the ways a budget or a profile can be wrong.

mod common;
use common::{BUNDLED, path_str, placer, text, zoo_file};

#[test]
fn solve_turns_a_profile_into_a_checked_plan() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = zoo_file(dir.path(), "lenet-mnist", "8");
    let ckpt_dir = dir.path().join("ckpt");
    let out = placer(&[
        "profile",
        path_str(&model),
        "--rounds",
        "1",
        "--reps",
        "3",
        "--max-reps",
        "3",
        "--warmup",
        "1",
        "--checkpoint-dir",
        path_str(&ckpt_dir),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ckpt = std::fs::read_dir(&ckpt_dir).expect("checkpoints").flatten().map(|e| e.path()).next().expect("one");
    let plan_path = dir.path().join("plan.json");
    let out = placer(&[
        "solve",
        path_str(&model),
        "--budget",
        "25%",
        "--profile",
        path_str(&ckpt),
        "--formulation",
        "async",
        "--baselines",
        "--no-probe",
        "-o",
        path_str(&plan_path),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    for needle in ["HiGHS", "check ", "ok: capacity at every step", "first-touch", "all-slow", "EMULATED", "wrote"] {
        assert!(stdout.contains(needle), "missing '{needle}' in:\n{stdout}");
    }
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan_path).expect("plan")).expect("json");
    assert_eq!(plan["strategy"], "ilp");
    assert_eq!(plan["formulation"], "async");
    assert_eq!(plan["emulated"], true);
    let kernels = plan["kernels"].as_array().expect("kernels");
    let measured = kernels.iter().filter(|k| k["source"] == "measured").count();
    assert!(measured * 2 > kernels.len(), "only {measured} of {} kernel times measured", kernels.len());
    let budget = plan["budget_bytes"].as_u64().expect("budget");
    assert!(plan["dram_bytes"].as_array().expect("dram").iter().all(|b| b.as_u64().is_some_and(|b| b <= budget)));

    // The same profile does not fit another model.
    let other = zoo_file(dir.path(), "lenet-mnist", "16");
    let out = placer(&[
        "solve",
        path_str(&other),
        "--budget",
        "25%",
        "--profile",
        path_str(&ckpt),
        "--no-probe",
        "-o",
        path_str(&plan_path),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("measured on model"), "{}", text(&out.stderr));

    // `placer solve --budget B` as a user types it: the most recent checkpoint names
    // its model file.
    let solve_in = |model: Option<&std::path::Path>, dir: &std::path::Path| {
        let mut args = vec!["solve"];
        args.extend(model.map(path_str));
        args.extend(["--budget", "25%", "--checkpoint-dir", path_str(dir), "--no-probe", "-o", path_str(&plan_path)]);
        placer(&args)
    };
    let no_model = |dir: &std::path::Path| solve_in(None, dir);
    let out = no_model(&ckpt_dir);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let chosen =
        format!("solving lenet-mnist-b8 from {}, as checkpoint {} (the most recent)", model.display(), ckpt.display());
    assert!(stdout.contains(&chosen), "missing '{chosen}' in:\n{stdout}");
    assert!(stdout.contains("wrote"), "{stdout}");

    // A named model without `--profile`: its most recent checkpoint there, if any.
    let named = |dir: &std::path::Path| solve_in(Some(&model), dir);
    let out = named(&ckpt_dir);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let chosen = format!(
        "solving lenet-mnist-b8 with checkpoint {} (the most recent of this model in {})",
        ckpt.display(),
        ckpt_dir.display()
    );
    assert!(stdout.contains(&chosen), "missing '{chosen}' in:\n{stdout}");
    let solo = dir.path().join("solo");
    std::fs::create_dir(&solo).expect("dir");
    // Another model's checkpoint, and a file that is no checkpoint at all, are not its.
    std::fs::write(solo.join("notes.ckpt"), b"not a checkpoint").expect("write");
    let other_ckpt = solo.join("other.ckpt");
    placer_profile::save_checkpoint(&other_ckpt, &common::profiles::profile("toy-b2", 4, 1.0, &[10.0])).expect("save");
    let out = named(&solo);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let none = format!("no profile (no checkpoint of this model in {})", solo.display());
    assert!(stdout.contains(&none), "missing '{none}' in:\n{stdout}");
    // A file named as this model's checkpoint that cannot be read stops the solve.
    let name = ckpt.file_name().expect("name").to_str().expect("utf-8");
    let damaged = solo.join(name.replace("sim", "damaged-sim"));
    std::fs::write(&damaged, b"truncated").expect("write");
    let out = named(&solo);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&damaged.display().to_string()), "{stderr}");

    // Nothing profiled yet: one line, exit 2, what to run.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("dir");
    let out = no_model(&empty);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no checkpoint in"), "{stderr}");
    // A model file that has moved: the checkpoint carries the model it profiled, so the
    // solve goes on, and says where the model came from.
    std::fs::rename(&model, dir.path().join("moved.json")).expect("move");
    let out = no_model(&ckpt_dir);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let said = format!("lenet-mnist-b8 from the checkpoint (its file {} is gone)", model.display());
    assert!(stdout.contains(&said), "missing '{said}' in:\n{stdout}");
}

#[test]
fn bad_budgets_are_refused_with_the_accepted_forms() {
    for budget in ["64 GBs", "-1GB", "0", "150%", "64"] {
        let out = placer(&["solve", BUNDLED, "--budget", budget, "--no-probe", "-o", "/dev/null"]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{budget}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{budget}: {stderr}");
        assert!(
            stderr.contains(&format!("budget '{budget}'")) && stderr.contains("64GiB") && stderr.contains("25%"),
            "{stderr}"
        );
    }
}

#[test]
fn an_impossible_budget_names_the_step_tensors_and_smallest_budget() {
    let out =
        placer(&["solve", BUNDLED, "--budget", "64KiB", "--pin", "role=weight:dram", "--no-probe", "-o", "/dev/null"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("at step") && stderr.contains("weight") && stderr.contains("smallest feasible budget"),
        "{stderr}"
    );
    let out =
        placer(&["solve", BUNDLED, "--budget", "25%", "--pin", "role=weight:nowhere", "--no-probe", "-o", "/dev/null"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("unknown pool 'nowhere'"), "{}", text(&out.stderr));
}

#[test]
fn a_budget_above_peak_needs_no_placement() {
    let dir = tempfile::tempdir().expect("temp dir");
    let plan = dir.path().join("plan.json");
    let out = placer(&["solve", BUNDLED, "--budget", "64GiB", "--no-probe", "-o", path_str(&plan)]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("every tensor stays in DRAM"), "{stdout}");
    assert!(plan.exists());
}
