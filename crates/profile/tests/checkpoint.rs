//! Checkpoints round-trip, and anything else is refused by name.

use placer_profile::checkpoint;
use placer_profile::{Measurement, Mode, PoolInfo, Profile, ProfileHeader, Protocol};

pub fn profile(records: usize) -> Profile {
    Profile {
        header: ProfileHeader {
            format: "placer-profile".into(),
            version: 1,
            model_name: "m".into(),
            model_hash: "ab".repeat(32),
            host_fingerprint: "f00d".into(),
            pools: vec![
                PoolInfo { name: "dram".into(), kind: "dram".into(), emulated_as: None },
                PoolInfo { name: "pmem".into(), kind: "pmem".into(), emulated_as: Some("optane-dcpmm".into()) },
            ],
            emulated: true,
            protocol: Protocol { warmup: 2, reps: 7, max_reps: 31, cv_target: 0.02, seed: 1, rounds: 1 },
            mode: Mode { max_simultaneous: 64, two_hop: false, sample: None, max_configs: 4096 },
            pins: vec![],
            plan_hash: "cafe".into(),
        },
        passes_total: 10,
        passes_done: 3,
        wall_seconds: 1.5,
        clock_resolution_ns: 30.0,
        clock_overhead_ns: 30.0,
        reference_ns: vec![],
        pass_drift: vec![],
        measurements: (0..records)
            .map(|i| Measurement {
                signature: i as u64 * 0x9E37_79B9,
                config: vec![(i % 2) as u16, 0, 1],
                node: format!("node{i}"),
                op: "conv2d".into(),
                pass: (i / 10) as u32,
                count: 7,
                median_ns: 1000.0 + i as f64,
                drift_corrected_ns: 1000.0 + i as f64,
                mad_ns: 10.0,
                min_ns: 990.0,
                max_ns: 1100.0,
                cv: 0.0148,
            })
            .collect(),
    }
}

#[test]
fn a_saved_profile_loads_back_identical() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("p.ckpt");
    let p = profile(1000);
    checkpoint::save(&path, &p).expect("saves");
    assert_eq!(checkpoint::load(&path).expect("loads"), p);
    // Saving again replaces it and leaves no temporary file behind.
    checkpoint::save(&path, &profile(3)).expect("saves");
    assert_eq!(checkpoint::load(&path).expect("loads").measurements.len(), 3);
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 1);
}

#[test]
fn damaged_and_foreign_files_are_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = checkpoint::encode(&profile(100)).expect("encodes");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("text.ckpt", b"hello".to_vec(), "not a placer-profile checkpoint"),
        ("truncated.ckpt", good[..good.len() / 2].to_vec(), "damaged"),
        ("trailing.ckpt", [good.clone(), vec![0, 1, 2]].concat(), "trailing bytes"),
        ("v9.ckpt", [&good[..15], &9u32.to_le_bytes()[..], &good[19..]].concat(), "format version 9"),
    ];
    for (name, bytes, expected) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).expect("write");
        let err = checkpoint::load(&path).expect_err(name).to_string();
        assert!(err.starts_with(&format!("checkpoint {}: ", path.display())) && err.contains(expected), "{err}");
    }
    let err = checkpoint::load(&dir.path().join("missing.ckpt")).expect_err("missing").to_string();
    assert!(err.contains("missing.ckpt"), "{err}");
}

#[test]
fn an_unwritable_directory_is_an_error_and_the_old_file_survives() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("p.ckpt");
    checkpoint::save(&path, &profile(5)).expect("saves");
    let blocked = dir.path().join("file-not-dir").join("p.ckpt");
    std::fs::write(dir.path().join("file-not-dir"), "x").expect("write");
    assert!(checkpoint::save(&blocked, &profile(5)).is_err());
    assert_eq!(checkpoint::load(&path).expect("still there").measurements.len(), 5);
}
