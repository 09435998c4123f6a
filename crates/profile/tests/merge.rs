//! `placer profile merge` as a library: shards of one plan become one profile with
//! every pass's measurements renumbered into the whole plan; shards that do not belong
//! together are refused in one line that names the field and both shards.

mod common;

use placer_profile::{Profile, ProfileError, merge_files, merge_shards as merge};
use std::collections::BTreeSet;
use std::path::PathBuf;

fn named(shards: Vec<Profile>) -> Vec<(PathBuf, Profile)> {
    shards.into_iter().enumerate().map(|(i, p)| (PathBuf::from(format!("s{}.ckpt", i + 1)), p)).collect()
}

/// The merge's refusal, as the one line a user reads.
fn refused(shards: Vec<(PathBuf, Profile)>, mixed_hosts: bool) -> String {
    match merge(shards, mixed_hosts) {
        Err(e @ ProfileError::Merge { .. }) => {
            let text = e.to_string();
            assert!(!text.contains('\n'), "{text}");
            text
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn shards_merge_into_every_pass_of_the_plan_once() {
    let shards = common::shards(3, 8, 5, 0, 1.0);
    let keys: BTreeSet<(u64, Vec<u16>)> =
        shards.iter().flat_map(|p| p.measurements.iter().map(|m| (m.signature, m.config.clone()))).collect();
    let merged = merge(named(shards), false).expect("merges").profile;
    assert_eq!(merged.header.shard, None);
    assert_eq!(merged.measurements.len(), 8 * 5);
    let merged_keys: BTreeSet<(u64, Vec<u16>)> =
        merged.measurements.iter().map(|m| (m.signature, m.config.clone())).collect();
    assert_eq!(merged_keys, keys);
    // Renumbered into the plan's passes: pass g measured keys g*5 .. g*5+4.
    for m in &merged.measurements {
        assert_eq!(m.pass as u64, m.signature / 5, "{m:?}");
    }
    assert!(merged.is_complete());
    assert_eq!((merged.passes_done, merged.passes_total), (8, 8));
    assert_eq!(merged.merged_from.len(), 3);
    assert_eq!(merged.merged_from.iter().map(|s| s.passes).sum::<u32>(), 8);
    assert_eq!(merged.pass_drift.len(), 8);
    assert!((merged.wall_seconds - 30.0).abs() < 1e-9);
    for s in &merged.merged_from {
        assert!((s.relative_time - 1.0).abs() < 1e-12, "{s:?}");
    }
}

#[test]
fn a_host_slower_than_its_noise_is_named_and_its_speed_recorded() {
    let merged = merge(named(common::shards(3, 6, 2, 2, 1.25)), false).expect("merges");
    let slow = &merged.profile.merged_from[1];
    assert!((slow.relative_time - 1.25).abs() < 1e-9, "{slow:?}");
    assert_eq!(merged.profile.merged_from[0].relative_time, 1.0);
    assert_eq!(merged.disagreements.len(), 1, "{:?}", merged.disagreements);
    assert!(merged.disagreements[0].contains("shard 2/3 (s2.ckpt)"), "{:?}", merged.disagreements);
    assert!(merged.disagreements[0].contains("1.250x"), "{:?}", merged.disagreements);
    // Two shards: each against the other, so both are named.
    let two = merge(named(common::shards(2, 6, 2, 2, 1.25)), false).expect("merges");
    assert_eq!(two.disagreements.len(), 2, "{:?}", two.disagreements);
    assert!((two.profile.merged_from[0].relative_time - 0.8).abs() < 1e-9);
    // Within the noise: nothing said.
    let quiet = merge(named(common::shards(2, 6, 2, 2, 1.005)), false).expect("merges");
    assert!(quiet.disagreements.is_empty(), "{:?}", quiet.disagreements);
}

#[test]
fn each_header_field_that_differs_is_refused_by_name() {
    type Change = fn(&mut Profile);
    let cases: Vec<(Change, &str)> = vec![
        (
            |p| p.header.model_hash = "cd".repeat(32),
            "the shards do not belong together: model differs: m (hash abababababab) in shard 1/2 (s1.ckpt), m \
             (hash cdcdcdcdcdcd) in shard 2/2 (s2.ckpt)",
        ),
        (
            |p| p.header.protocol.reps = 5,
            "the shards do not belong together: protocol differs: reps 3 in shard 1/2 (s1.ckpt), 5 in shard 2/2 \
             (s2.ckpt)",
        ),
        (
            |p| p.header.mode.design = placer_profile::DesignSpec::screen(),
            "the shards do not belong together: mode differs: design full in shard 1/2 (s1.ckpt), screen in shard \
             2/2 (s2.ckpt)",
        ),
        (
            |p| p.header.pools[1].emulated_as = None,
            "the shards do not belong together: pools differ: pmem EMULATED as optane-dcpmm in shard 1/2 (s1.ckpt), \
             not emulated in shard 2/2 (s2.ckpt)",
        ),
        (
            |p| p.header.plan_hash = "beef".into(),
            "the shards do not belong together: pass plan differs: digest cafe in shard 1/2 (s1.ckpt), beef in shard \
             2/2 (s2.ckpt) (the same settings planned other passes)",
        ),
        (
            |p| p.header.host_fingerprint = "0ther".into(),
            "the shards do not belong together: host differs: fingerprint f00d in shard 1/2 (s1.ckpt), 0ther in \
             shard 2/2 (s2.ckpt) (shards measured on other hosts merge with --mixed-hosts)",
        ),
        (
            |p| p.header.pins = vec!["role=weight:dram".parse().expect("a rule")],
            "the shards do not belong together: pins differ: none in shard 1/2 (s1.ckpt), role=weight:dram in shard \
             2/2 (s2.ckpt)",
        ),
    ];
    for (change, expected) in cases {
        let mut shards = common::shards(2, 4, 3, 0, 1.0);
        change(&mut shards[1]);
        assert_eq!(refused(named(shards), false), expected);
    }
}

#[test]
fn other_hosts_merge_with_the_flag() {
    let mut shards = common::shards(2, 4, 3, 0, 1.0);
    shards[1].header.host_fingerprint = "0ther".into();
    let merged = merge(named(shards), true).expect("merges with --mixed-hosts").profile;
    let hosts: Vec<&str> = merged.merged_from.iter().map(|s| s.host_fingerprint.as_str()).collect();
    assert_eq!(hosts, ["f00d", "0ther"]);
}

#[test]
fn shard_sets_that_do_not_cover_the_plan_once_are_refused() {
    // Shards of another count.
    let mut shards = common::shards(2, 6, 1, 0, 1.0);
    shards.push(common::shards(3, 6, 1, 0, 1.0).remove(2));
    assert_eq!(
        refused(named(shards), false),
        "the shards do not belong together: shard count 2 in shard 1/2 (s1.ckpt), 3 in shard 3/3 (s3.ckpt)"
    );
    // A shard left out: its passes are named.
    let mut shards = common::shards(3, 7, 1, 0, 1.0);
    shards.remove(1);
    assert_eq!(
        refused(named(shards), false),
        "2 of 7 passes not measured by any shard: pass(es) 2, 5 (shard 2/3 not given)"
    );
    // A shard given twice: its passes are measured twice.
    let mut shards = common::shards(3, 7, 1, 0, 1.0);
    shards.push(shards[0].clone());
    assert_eq!(
        refused(named(shards), false),
        "pass(es) 1, 4, 7 measured twice: pass 1 by shard 1/3 (s1.ckpt) and shard 1/3 (s4.ckpt)"
    );
    // A pass a shard never measured (its checkpoint lost it).
    let mut shards = common::shards(2, 4, 2, 0, 1.0);
    shards[1].measurements.retain(|m| m.pass != 1);
    assert_eq!(refused(named(shards), false), "1 of 4 passes not measured by any shard: pass(es) 4");
}

#[test]
fn incomplete_shards_and_whole_profiles_are_refused() {
    let mut shards = common::shards(2, 4, 2, 0, 1.0);
    shards[0].passes_done = 1;
    assert_eq!(
        refused(named(shards), false),
        "shard 1/2 (s1.ckpt) is incomplete (1 of 2 passes): resume it with the same placer profile --shard 1/2 \
         command"
    );
    let mut shards = common::shards(2, 4, 2, 0, 1.0);
    shards[1].header.shard = None;
    assert_eq!(
        refused(named(shards), false),
        "s2.ckpt is not a shard (it was profiled without --shard); merge takes shards only"
    );
    assert_eq!(
        refused(named(common::shards(2, 4, 2, 0, 1.0)).split_off(1), false),
        "merge needs two shards or more, got 1"
    );
}

#[test]
fn files_merge_beside_the_first_shard_and_never_over_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let paths = common::save_shards(dir.path(), "m", &common::shards(2, 4, 2, 0, 1.0));
    let (merged, out) = merge_files(&paths, None, false).expect("merges");
    assert_eq!(out.parent(), Some(dir.path()));
    assert_eq!(out.file_name().and_then(|n| n.to_str()), Some("m-abababababab-sim64.ckpt"));
    assert_eq!(placer_profile::load_checkpoint(&out).expect("loads"), merged.profile);
    // Never over an existing checkpoint: a finished merge holds more than its shards.
    let err = merge_files(&paths, None, false).expect_err("refused");
    assert!(
        err.to_string()
            .ends_with("exists already: merge never replaces a checkpoint; move it aside, or choose another -o"),
        "{err}"
    );
    let err = merge_files(&paths, Some(&paths[1]), false).expect_err("refused");
    assert!(err.to_string().contains("is one of the shards"), "{err}");
    // The shard is untouched.
    assert_eq!(placer_profile::load_checkpoint(&paths[1]).expect("loads").header.shard.map(|s| s.index), Some(2));
}
