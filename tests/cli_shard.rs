//! End-to-end: `placer profile --shard I/N` on one host, one shard after another, then
//! `placer profile merge`: the merged profile holds exactly the keys of an unsharded
//! profile of the same plan, `solve` takes it, and shards that do not belong together
//! are refused in one line.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;

mod common;
use common::{path_str, text, zoo_file};

fn run(cache: &Path, args: &[&str]) -> Output {
    let mut cmd = common::command();
    cmd.env("PLACER_CACHE_DIR", cache);
    cmd.args(args).output().expect("placer runs")
}

/// Every configuration, one round, two timed steps per pass, into `dir`, then `extra`.
fn profile(cache: &Path, model: &str, dir: &str, extra: &[&str]) -> Output {
    let base = ["profile", model, "--checkpoint-dir", dir, "--design", "full", "--rounds", "1", "--reps", "2"];
    run(cache, &[&base[..], &["--max-reps", "2", "--warmup", "1"], extra].concat())
}

/// The (signature, configuration) keys of a checkpoint.
fn keys(path: &Path) -> BTreeSet<(u64, Vec<u16>)> {
    let p = placer_profile::load_checkpoint(path).expect("checkpoint loads");
    p.measurements.iter().map(|m| (m.signature, m.config.clone())).collect()
}

#[test]
fn shards_merge_into_the_unsharded_profiles_keys_and_solve_takes_them() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cache = tmp.path();
    let model = zoo_file(tmp.path(), "mlp", "4");
    let m = path_str(&model);
    let (whole, shards) = (tmp.path().join("whole"), tmp.path().join("shards"));
    let out = profile(cache, m, path_str(&whole), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let only = std::fs::read_dir(&whole)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "ckpt"));
    let only = only.expect("the whole profile's checkpoint");
    let name = only.file_name().and_then(|n| n.to_str()).expect("utf-8").to_string();
    let expected = keys(&whole.join(&name));

    for i in 1..=3 {
        let out = profile(cache, m, path_str(&shards), &["--shard", &format!("{i}/3")]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let s = text(&out.stdout);
        assert!(s.lines().any(|l| l.trim_start().starts_with("shard") && l.contains(&format!("{i}/3: "))), "{s}");
    }
    let shard = |i: u32| shards.join(name.replace(".ckpt", &format!("-shard{i}of3.ckpt")));
    let shard_keys: Vec<_> = (1..=3).map(|i| keys(&shard(i))).collect();
    assert!(shard_keys.iter().all(|k| !k.is_empty() && k.len() < expected.len()), "each shard measures a share");

    // Two of three: the missing shard's passes are named, nothing is written.
    let out = run(cache, &["profile", "merge", path_str(&shard(1)), path_str(&shard(3))]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("passes not measured by any shard") && err.contains("(shard 2/3 not given)"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!shards.join(&name).exists());

    // All three, in any order: the merged checkpoint goes beside them under the whole
    // profile's name, with exactly the unsharded profile's keys.
    let out = run(cache, &["profile", "merge", path_str(&shard(3)), path_str(&shard(1)), path_str(&shard(2))]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("from 3 shards into") && s.contains("ref. time") && s.contains("EMULATED"), "{s}");
    let merged = shards.join(&name);
    assert_eq!(keys(&merged), expected);

    // Resuming it measures only the interference calibration; then solve takes it.
    let out = profile(cache, m, path_str(&shards), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let p = placer_profile::load_checkpoint(&merged).expect("loads");
    assert!(placer_profile::is_finished(&p) && p.merged_from.len() == 3);
    assert_eq!(keys(&merged), expected);
    // compare takes it beside the unsharded profile: agreeing (0) or not (3) is the
    // host's noise, but every key is joined.
    let out = run(cache, &["compare", path_str(&merged), path_str(&whole.join(&name))]);
    assert!(matches!(out.status.code(), Some(0 | 3)), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(
        s.contains(&format!("over {} kernel(s) measured by both (0 only in A, 0 only in B)", expected.len())),
        "{s}"
    );
    let plan = tmp.path().join("plan.json");
    let out = run(
        cache,
        &["solve", m, "--profile", path_str(&merged), "--budget", "50%", "--no-probe", "-o", path_str(&plan)],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));

    // A shard of another protocol is refused by field, naming both files.
    let other = tmp.path().join("other");
    let out = profile(cache, m, path_str(&other), &["--shard", "2/3", "--precision", "0.05"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let other_shard = std::fs::read_dir(&other).expect("dir").next().expect("a file").expect("entry").path();
    let out = run(cache, &["profile", "merge", path_str(&shard(1)), path_str(&other_shard), path_str(&shard(3))]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("protocol differs: precision 0.02 in shard 1/3") && err.contains("0.05 in shard 2/3"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");

    // More shards than passes, and a malformed shard, are refused before measuring.
    let out = profile(cache, m, path_str(&other), &["--shard", "1/10000"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("too few for 10000 shards"), "{}", text(&out.stderr));
    let out = profile(cache, m, path_str(&other), &["--shard", "0/3"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}
