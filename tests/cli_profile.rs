//! End-to-end tests of `placer profile`: a whole profile, exports, refusing another
//! setting's checkpoint (in words) while still exporting it, refusing a second profiler
//! on one checkpoint, and resuming after SIGKILL (whose lock blocks nobody) with nothing
//! lost or measured twice.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{text, zoo_file};

/// `placer` with its own host cache, for tests that run several commands in a row.
fn placer(cache: &Path) -> Command {
    let mut cmd = common::command();
    cmd.env("PLACER_CACHE_DIR", cache);
    cmd
}

fn run(cache: &Path, args: &[&str]) -> Output {
    placer(cache).args(args).output().expect("placer runs")
}

/// `placer profile MODEL` into checkpoint directory `ckpt`: every configuration, REPS
/// timed steps per pass exactly, one warm-up step, every round; then `extra`.
fn profile_full(cache: &Path, model: &str, ckpt: &str, reps: &str, extra: &[&str]) -> Output {
    let base = ["profile", model, "--checkpoint-dir", ckpt, "--reps", reps, "--max-reps", reps, "--warmup", "1"];
    let fixed = ["--design", "full", "--round-noise", "0"];
    run(cache, &[&base[..], &fixed[..], extra].concat())
}

fn only_checkpoint(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("checkpoint dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "ckpt"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

#[test]
fn profile_measures_every_configuration_and_exports_them() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let model = zoo_file(tmp.path(), "mlp", "4");
    let ckpt = tmp.path().join("ckpt");
    let (m, c) = (model.to_str().expect("utf-8"), ckpt.to_str().expect("utf-8"));
    let out = profile_full(tmp.path(), m, c, "3", &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(
        s.contains("simultaneous (up to 64 per pass)") && s.contains("lower bound") && s.contains("EMULATED"),
        "{s}"
    );
    assert!(s.contains("live steps: 1 warm-up steps"), "the summary says what a step ran (a tiny step: live): {s}");

    let profile = placer_profile::load_checkpoint(&only_checkpoint(&ckpt)).expect("checkpoint loads");
    assert!(profile.is_complete() && profile.header.emulated);
    let model_ir = placer_ir::load_model(&model).expect("model");
    let tasks = placer_profile::enumerate_tasks(&model_ir, 2, &[], placer_profile::Rules::default()).expect("tasks");
    // Three rounds by default: every configuration measured once per round.
    assert_eq!(profile.header.protocol.rounds, 3);
    assert_eq!(profile.measurements.len(), 3 * tasks.tasks.len());
    assert_eq!(profile.merged().len(), tasks.tasks.len());
    assert!(profile.measurements.iter().all(|m| m.count == 3 && m.median_ns > 0.0));

    // Running again finds the finished checkpoint and measures nothing.
    let out = profile_full(tmp.path(), m, c, "3", &["--export", "csv"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let csv = text(&out.stdout);
    assert!(csv.starts_with("signature,node,op,config,pass,count,median_ns"));
    assert_eq!(csv.lines().count(), profile.measurements.len() + 1);
    assert!(csv.lines().nth(1).is_some_and(|l| l.ends_with(",true")), "emulated column");

    // Another wait model is another emulated device: its checkpoint is refused, naming
    // both, and `solve` will not put its times beside the other model's waits.
    let overlap = ["--emulate", "optane-dcpmm:overlap"];
    let out = profile_full(tmp.path(), m, c, "3", &overlap);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "pools differ: pmem EMULATED as optane-dcpmm:additive in the checkpoint, EMULATED as \
             optane-dcpmm:overlap now"
        ) && err.lines().count() == 1,
        "{err}"
    );
    let file = only_checkpoint(&ckpt);
    let solve = ["solve", m, "--budget", "50%", "--no-probe", "--profile", file.to_str().expect("utf-8")];
    let out = run(tmp.path(), &[&solve[..], &overlap[..]].concat());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "its pool 'pmem' was EMULATED as optane-dcpmm:additive, this host's is EMULATED as optane-dcpmm:overlap"
        ) && err.lines().count() == 1,
        "{err}"
    );

    // Another protocol on the same checkpoint is refused, unless --fresh.
    let out = profile_full(tmp.path(), m, c, "4", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("protocol differs: reps 3 in the checkpoint, 4 now; max reps 3 in the checkpoint, 4 now")
            && err.contains("--fresh")
            && err.lines().count() == 1,
        "{err}"
    );
    // Whole steps are another protocol too: their figures are not mixed with live ones.
    let out = profile_full(tmp.path(), m, c, "3", &["--steps", "whole"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("protocol differs: steps live in the checkpoint, whole now"), "{err}");
    let out = profile_full(tmp.path(), m, c, "4", &["--fresh"]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    // Picked steps: only the pass's kernels and their producers, on resident tensors.
    let picked = tmp.path().join("picked");
    let out =
        profile_full(tmp.path(), m, picked.to_str().expect("utf-8"), "2", &["--steps", "picked", "--rounds", "1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("picked steps: 1 warm-up steps"), "{}", text(&out.stdout));
    let profile = placer_profile::load_checkpoint(&only_checkpoint(&picked)).expect("checkpoint loads");
    assert_eq!(profile.header.protocol.steps, placer_profile::Steps::Picked);
    assert_eq!(profile.merged().len(), tasks.tasks.len());
    // What a step leaves in memory is evicted by this host's last-level cache, and the
    // summary says so, or says that the host does not tell its size.
    assert_eq!(profile.header.cache_bytes, placer_host::last_level_cache_bytes());
    let said = match profile.header.cache_bytes {
        Some(bytes) => format!("out of a {} MiB last-level cache is written out of it", bytes >> 20),
        None => "does not say its last-level cache size".to_string(),
    };
    assert!(text(&out.stdout).contains(&said), "{}", text(&out.stdout));
    // Other steps evict nothing of the kind.
    let live = placer_profile::load_checkpoint(&only_checkpoint(Path::new(c))).expect("checkpoint loads");
    assert_eq!(live.header.cache_bytes, None);

    // Kernels alone: the same measurements, and the summary sets their all-DRAM times
    // against the reference pass's whole steps.
    let alone = tmp.path().join("alone");
    let out =
        profile_full(tmp.path(), m, alone.to_str().expect("utf-8"), "2", &["--steps", "isolated", "--rounds", "1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(
        s.contains("isolated: each kernel alone, only its operands")
            && s.contains("isolated steps: 1 warm-up run(s) before each node's first configuration in a pass"),
        "{s}"
    );
    assert!(s.contains("alone vs step"), "{s}");
    let profile = placer_profile::load_checkpoint(&only_checkpoint(&alone)).expect("checkpoint loads");
    assert_eq!(profile.header.protocol.steps, placer_profile::Steps::Isolated);
    assert_eq!(profile.merged().len(), tasks.tasks.len());
    assert!(profile.measurements.iter().all(|m| m.count == 2 && m.median_ns > 0.0));
    let check = placer_profile::IsolationCheck::of(&model_ir, &profile).expect("pins resolve").expect("isolated");
    // One all-DRAM row per signature: the mlp's kernels each have their own.
    let base_rows = profile.merged().iter().filter(|m| m.config.iter().all(|&p| p == 0)).count();
    assert_eq!(check.rows.len(), base_rows, "{:?}", check.rows);
    assert!(check.rows.iter().all(|r| r.alone_ns > 0.0 && r.in_step_ns > 0.0 && model_ir.node_id(&r.node).is_some()));
    // The solver takes each signature's times on the step's level: its all-DRAM time
    // becomes the step's, and every other configuration keeps its difference from it.
    let anchor = placer_profile::Anchor::of(&model_ir, &profile).expect("anchor");
    for r in &check.rows {
        assert!((anchor.apply(r.signature, r.alone_ns) - r.in_step_ns).abs() < 1e-6 * r.in_step_ns, "{r:?}");
        let slower = r.alone_ns * 1.5;
        let moved = anchor.apply(r.signature, slower);
        assert!(
            moved >= r.in_step_ns && (moved - r.in_step_ns - 0.5 * r.alone_ns).abs() < 1e-6 * moved
                || (moved - 1.5 * r.in_step_ns).abs() < 1e-6 * moved,
            "{r:?}: {moved}"
        );
    }
    let not_alone = placer_profile::load_checkpoint(&only_checkpoint(&picked)).expect("checkpoint loads");
    assert!(placer_profile::Anchor::of(&model_ir, &not_alone).expect("anchor").is_empty());
    let file = only_checkpoint(&alone);
    let plan = tmp.path().join("plan.json");
    let (f, p) = (file.to_str().expect("utf-8"), plan.to_str().expect("utf-8"));
    let out = run(tmp.path(), &["solve", m, "--budget", "50%", "--no-probe", "--profile", f, "-o", p]);
    assert!(out.status.success() && plan.exists(), "{}", text(&out.stderr));
}

#[test]
fn another_protocol_is_refused_in_words_and_its_checkpoint_still_exports() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let model = zoo_file(tmp.path(), "mlp", "2");
    let ckpt = tmp.path().join("ckpt");
    let (m, c) = (model.to_str().expect("utf-8"), ckpt.to_str().expect("utf-8"));
    let out = profile_full(tmp.path(), m, c, "2", &["--rounds", "1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = only_checkpoint(&ckpt);
    let bytes = std::fs::read(&file).expect("checkpoint");
    let profile = placer_profile::load_checkpoint(&file).expect("checkpoint loads");
    assert!(profile.is_complete() && !profile.measurements.is_empty());

    // Three rounds on the same checkpoint: refused, on one line naming the field and both
    // values, and the checkpoint is left as it was.
    let out = profile_full(tmp.path(), m, c, "2", &["--rounds", "3"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: checkpoint {}: protocol differs: rounds 1 in the checkpoint, 3 now; use --fresh to start over \
             (it will be replaced)\n",
            file.display()
        )
    );
    assert_eq!(std::fs::read(&file).expect("checkpoint"), bytes);

    // Exporting needs no match: the checkpoint is exported as it is, measuring nothing.
    let out = profile_full(tmp.path(), m, c, "2", &["--rounds", "3", "--export", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(json["header"]["protocol"]["rounds"], 1);
    assert_eq!(json["header"]["model_hash"], profile.header.model_hash.as_str());
    assert_eq!(json["measurements"].as_array().map(Vec::len), Some(profile.measurements.len()));
    assert_eq!(std::fs::read(&file).expect("checkpoint"), bytes);

    // So is an unfinished one of other settings, with a note of what differs.
    let mut unfinished = profile.clone();
    unfinished.passes_total += 1;
    placer_profile::save_checkpoint(&file, &unfinished).expect("save");
    let bytes = std::fs::read(&file).expect("checkpoint");
    let out = profile_full(tmp.path(), m, c, "3", &["--rounds", "1", "--export", "csv"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        format!(
            "note: exporting checkpoint {} as it is ({} of {} passes measured), measuring nothing: protocol \
             differs: reps 2 in the checkpoint, 3 now; max reps 2 in the checkpoint, 3 now\n",
            file.display(),
            unfinished.passes_done,
            unfinished.passes_total
        )
    );
    assert_eq!(text(&out.stdout).lines().count(), profile.measurements.len() + 1);
    assert_eq!(std::fs::read(&file).expect("checkpoint"), bytes);
}

#[test]
fn profile_rejects_bad_options() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let model = zoo_file(tmp.path(), "mlp", "2");
    let m = model.to_str().expect("utf-8");
    for (args, expected) in [
        (vec!["--pin", "role=weight:hbm"], "unknown pool 'hbm'"),
        (vec!["--pin", "weight:dram"], "'weight:dram' for '--pin <RULE>': expected role=ROLE:POOL or tensor=NAME:POOL"),
        (vec!["--pin", "role=weights:dram"], "unknown role 'weights'"),
        // Unknown names are errors, never a default.
        (vec!["--design", "fractional"], "invalid value 'fractional' for '--design <DESIGN>'"),
        (vec!["--steps", "most"], "invalid value 'most' for '--steps <STEPS>'"),
        (vec!["--export", "xml"], "invalid value 'xml' for '--export <EXPORT>'"),
        (vec!["--reps", "9", "--max-reps", "3"], "--max-reps 3 is below --reps 9"),
        (vec!["--negligible", "1.5"], "expected a share in [0, 1), such as 0.001; got '1.5'"),
        (vec!["--topology", "configs/topologies/cxl-expander.xml"], "describes another machine"),
    ] {
        let mut all = vec!["profile", m, "--checkpoint-dir", tmp.path().to_str().expect("utf-8")];
        all.extend(args.iter().copied());
        let out = run(tmp.path(), &all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains(expected), "{args:?}: {}", text(&out.stderr));
    }
}

#[test]
fn a_killed_profile_resumes_with_nothing_lost_or_measured_twice() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let model = zoo_file(tmp.path(), "lenet-mnist", "8");
    let ckpt = tmp.path().join("ckpt");
    let args = [
        "profile",
        model.to_str().expect("utf-8"),
        "--checkpoint-dir",
        ckpt.to_str().expect("utf-8"),
        "--max-simultaneous",
        "1",
        "--reps",
        "3",
        "--max-reps",
        "3",
        "--warmup",
        "1",
        "--rounds",
        "2",
        "--design",
        "full",
        "--round-noise",
        "0",
    ];
    let mut child = placer(tmp.path()).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("starts");
    // Wait for a few passes to be saved, then SIGKILL: no chance to clean up.
    let deadline = Instant::now() + Duration::from_secs(120);
    let before = loop {
        assert!(Instant::now() < deadline, "no checkpoint appeared");
        assert!(child.try_wait().expect("status").is_none(), "profile finished before it could be killed");
        let saved = std::fs::read_dir(&ckpt).ok().and_then(|mut d| {
            d.find_map(|e| {
                let p = e.ok()?.path();
                (p.extension()? == "ckpt").then_some(p)
            })
        });
        if let Some(path) = saved
            && let Ok(p) = placer_profile::load_checkpoint(&path)
            && p.passes_done >= 3
        {
            break p;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // A second profiler on the same checkpoint is refused at once, naming the first, and
    // leaves the first's checkpoint alone.
    let started = Instant::now();
    let second = run(tmp.path(), &args);
    assert_eq!(second.status.code(), Some(2), "{}", text(&second.stderr));
    let said = text(&second.stderr);
    assert!(said.contains(&format!("being written by process {}", child.id())), "{said}");
    assert!(started.elapsed() < Duration::from_secs(10), "refused only after {:?}", started.elapsed());
    assert!(child.try_wait().expect("status").is_none(), "the first profile was disturbed");
    // SIGKILL: the kernel drops the lock with the process, so it blocks nobody after.
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let killed = placer_profile::load_checkpoint(&only_checkpoint(&ckpt)).expect("the checkpoint survives a kill");
    assert!(!killed.is_complete(), "killed mid-run");
    assert!(killed.passes_done >= before.passes_done);

    let out = run(tmp.path(), &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(&format!("resumed after {} passes", killed.passes_done)),
        "{}",
        text(&out.stdout)
    );
    let done = placer_profile::load_checkpoint(&only_checkpoint(&ckpt)).expect("loads");
    assert!(done.is_complete());
    // What was measured before the kill is kept exactly, and nothing is measured twice.
    assert_eq!(&done.measurements[..killed.measurements.len()], &killed.measurements[..]);
    // Single mode, two rounds: one measurement per pass, each configuration once a round.
    let per_round = done.passes_total / 2;
    let mut keys: Vec<_> =
        done.measurements.iter().map(|m| (m.signature, m.config.clone(), m.pass / per_round)).collect();
    let total = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), total, "a configuration was measured twice in one round");
    assert_eq!(total as u32, done.passes_total);
    assert_eq!(done.merged().len() as u32, per_round);
}

#[test]
fn skipped_calibrations_are_said_and_a_later_run_measures_them() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let model = zoo_file(tmp.path(), "mlp", "4");
    let ckpt = tmp.path().join("ckpt");
    let (m, c) = (model.to_str().expect("utf-8"), ckpt.to_str().expect("utf-8"));
    let quick = ["--rounds", "1", "--skip-calibrations"];
    let out = profile_full(tmp.path(), m, c, "1", &quick);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(
        s.contains("interference skipped (--skip-calibrations), step overhead skipped (--skip-calibrations); solve")
            && s.contains("until a run without the flag"),
        "{s}"
    );
    let file = only_checkpoint(&ckpt);
    let profile = placer_profile::load_checkpoint(&file).expect("checkpoint loads");
    assert!(profile.is_complete() && profile.interference.is_none() && profile.step_overhead.is_none());

    let solve = ["solve", m, "--budget", "50%", "--no-probe", "--profile", file.to_str().expect("utf-8")];
    let out = run(tmp.path(), &solve);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("not measured: the profile has no interference calibration"), "solve says so");

    // The flag is not part of the checkpoint's identity: a run without it resumes the
    // finished passes and measures only the calibrations.
    let out = profile_full(tmp.path(), m, c, "1", &quick[..2]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(
        s.contains("calibrations") && s.contains("signatures of their own), step overhead ") && !s.contains("skipped"),
        "{s}"
    );
    let after = placer_profile::load_checkpoint(&file).expect("checkpoint loads");
    assert!(after.interference.is_some() && after.step_overhead.is_some());
    assert_eq!(after.measurements.len(), profile.measurements.len(), "no pass measured twice");
}
