//! End-to-end tests of screening designs: a designed profile measures or predicts every
//! configuration exactly once, is solved with its predictions, and is compared with a
//! full profile on the configurations it predicted.

mod common;
use common::{path_str, placer, text, zoo_file};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A quick profile of `model` with `--design DESIGN` into `dir`; returns its checkpoint.
fn profile(model: &Path, design: &str, dir: &Path) -> (PathBuf, String) {
    let out = placer(&[
        "profile",
        path_str(model),
        "--design",
        design,
        "--rounds",
        "1",
        "--reps",
        "3",
        "--max-reps",
        "3",
        "--warmup",
        "1",
        "--checkpoint-dir",
        path_str(dir),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ckpt = std::fs::read_dir(dir).expect("checkpoints").flatten().map(|e| e.path()).next().expect("one");
    (ckpt, text(&out.stdout))
}

#[test]
fn a_screened_profile_measures_or_predicts_every_configuration_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = zoo_file(dir.path(), "lenet-mnist", "8");
    let ckpt_dir = dir.path().join("ckpt");
    let (ckpt, summary) = profile(&model, "screen", &ckpt_dir);
    assert!(path_str(&ckpt).ends_with("-sim64-screen.ckpt"), "{}", ckpt.display());
    for row in ["screening design", "validation", "measured in full", "predicted", "stages"] {
        assert!(summary.contains(row), "{row}: {summary}");
    }

    let p = placer_profile::load_checkpoint(&ckpt).expect("loads");
    assert!(p.is_complete());
    let record = p.design.as_ref().expect("a screening design records its verdicts");
    let ir = placer_ir::load_model(&model).expect("model");
    let full: BTreeSet<(u64, Vec<u16>)> =
        placer_profile::enumerate_tasks(&ir, 2, &[], placer_profile::Rules::default())
            .expect("tasks")
            .tasks
            .into_iter()
            .map(|t| (t.signature, t.config))
            .collect();
    let measured: BTreeSet<(u64, Vec<u16>)> = p.merged().into_iter().map(|m| (m.signature, m.config)).collect();
    let predicted: BTreeSet<(u64, Vec<u16>)> =
        p.predictions().iter().map(|x| (x.signature, x.config.clone())).collect();
    assert_eq!(predicted.len(), p.predictions().len(), "each configuration predicted once");
    assert!(measured.is_disjoint(&predicted), "nothing is both measured and predicted");
    assert_eq!(measured.union(&predicted).cloned().collect::<BTreeSet<_>>(), full, "and nothing is left out");
    assert!(!predicted.is_empty() && measured.len() < full.len());
    // Every prediction carries its family's validation error.
    for x in p.predictions() {
        let family = record.families.iter().find(|f| f.signature == x.signature).expect("family");
        assert!(family.predicts() && x.validation_error == family.worst_error());
        assert!(!family.validation.is_empty(), "a screened family was validated");
    }

    // A second run finds the finished checkpoint: nothing measured, the same verdicts.
    let (_, again) = profile(&model, "screen", &ckpt_dir);
    assert!(again.contains("resumed after"), "{again}");
    assert_eq!(placer_profile::load_checkpoint(&ckpt).expect("loads"), p);
}

#[test]
fn a_screened_profile_is_solved_with_its_predictions() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = zoo_file(dir.path(), "lenet-mnist", "8");
    let (ckpt, _) = profile(&model, "screen", &dir.path().join("ckpt"));
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
        "--no-probe",
        "-o",
        path_str(&plan_path),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("predicted by its screening design") && s.contains("predicted by the profile's design"), "{s}");
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan_path).expect("plan")).expect("json");
    let sources: Vec<&str> =
        plan["kernels"].as_array().expect("kernels").iter().map(|k| k["source"].as_str().expect("source")).collect();
    let predicted = sources.iter().filter(|s| **s == "predicted").count();
    assert!(predicted > 0, "{sources:?}");
    assert_eq!(plan["predicted"]["predicted_kernels"].as_u64(), Some(predicted as u64));
    assert!(sources.iter().all(|s| ["measured", "predicted", "estimated"].contains(s)));
}

#[test]
fn a_screened_profile_is_compared_with_a_full_one_on_what_it_predicted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = zoo_file(dir.path(), "lenet-mnist", "8");
    let (screened, _) = profile(&model, "screen", &dir.path().join("screen"));
    let (full, _) = profile(&model, "full", &dir.path().join("full"));
    let out = placer(&["compare", path_str(&screened), path_str(&full), "--min-us", "0", "--json"]);
    // LeNet at batch 8 has only µs kernels, so agreement is not the point here: the
    // join is. Exit 0 or 3 (disagreement), never a usage error.
    assert!(matches!(out.status.code(), Some(0 | 3)), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_str(&text(&out.stdout)).expect("json");
    let screened_profile = placer_profile::load_checkpoint(&screened).expect("loads");
    let rows = report["predicted_rows"].as_array().expect("predicted rows");
    assert_eq!(rows.len(), screened_profile.predictions().len(), "every prediction met its full measurement");
    assert_eq!(report["predicted"]["rows"].as_u64(), Some(rows.len() as u64));
    assert!(rows.iter().all(|r| r["a_count"] == 0 && r["b_count"].as_u64() > Some(0)), "A predicted, B measured");
    assert!(report["verdict"].as_str().expect("verdict").contains("predicted configurations"));

    let out = placer(&["compare", path_str(&screened), path_str(&full), "--min-us", "0"]);
    assert!(text(&out.stdout).contains("predicted by a design vs measured"), "{}", text(&out.stdout));
}
