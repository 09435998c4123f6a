//! Checkpoints round-trip, and anything else is refused by name.

mod common;

use common::profile;
use placer_profile::checkpoint;

#[test]
fn a_saved_profile_loads_back_identical() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("p.ckpt");
    let p = profile("m", 1000);
    checkpoint::save(&path, &p).expect("saves");
    assert_eq!(checkpoint::load(&path).expect("loads"), p);
    // Saving again replaces it and leaves no temporary file behind.
    checkpoint::save(&path, &profile("m", 3)).expect("saves");
    assert_eq!(checkpoint::load(&path).expect("loads").measurements.len(), 3);
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 1);
}

#[test]
fn damaged_and_foreign_files_are_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = checkpoint::encode(&profile("m", 100)).expect("encodes");
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
    checkpoint::save(&path, &profile("m", 5)).expect("saves");
    let blocked = dir.path().join("file-not-dir").join("p.ckpt");
    std::fs::write(dir.path().join("file-not-dir"), "x").expect("write");
    assert!(checkpoint::save(&blocked, &profile("m", 5)).is_err());
    assert_eq!(checkpoint::load(&path).expect("still there").measurements.len(), 5);
}
