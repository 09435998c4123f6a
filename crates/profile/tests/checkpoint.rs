//! Checkpoints round-trip, and anything else is refused by name.

mod common;

use common::profile;
use placer_profile::FORMAT_VERSION;

#[test]
fn a_saved_profile_loads_back_identical() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("p.ckpt");
    let p = profile("m", 1000);
    placer_profile::save_checkpoint(&path, &p).expect("saves");
    assert_eq!(placer_profile::load_checkpoint(&path).expect("loads"), p);
    // Saving again replaces it and leaves no temporary file behind.
    placer_profile::save_checkpoint(&path, &profile("m", 3)).expect("saves");
    assert_eq!(placer_profile::load_checkpoint(&path).expect("loads").measurements.len(), 3);
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 1);
}

#[test]
fn the_model_round_trips() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut p = profile("m", 10);
    p.model_json = Some("{\"a model\": true}".into());
    let path = dir.path().join("p.ckpt");
    placer_profile::save_checkpoint(&path, &p).expect("saves");
    assert_eq!(placer_profile::load_checkpoint(&path).expect("loads"), p);
    assert_eq!(placer_profile::load_checkpoint_header(&path).expect("header"), p.header);
}

#[test]
fn another_frameworks_kernels_round_trip_and_a_file_without_them_was_timed_by_placers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("p.ckpt");
    let mut p = profile("m", 10);
    p.model_json = Some("{}".into());
    let ours = placer_profile::encode_checkpoint(&p).expect("encodes");
    p.kernels = Some(placer_profile::KernelSource {
        label: "torch 2.15.0 (aten ops, eager, CPU, 2 threads)".into(),
        tag: "torch".into(),
        placer_nodes: vec!["w.grad".into()],
        folded_nodes: vec!["conv.conv".into(), "mm".into()],
    });
    let theirs = placer_profile::encode_checkpoint(&p).expect("encodes");
    assert!(theirs.starts_with(&ours), "the source follows everything a file of placer's kernels holds");
    placer_profile::save_checkpoint(&path, &p).expect("saves");
    assert_eq!(placer_profile::load_checkpoint(&path).expect("loads"), p);
    std::fs::write(&path, &ours).expect("write");
    assert_eq!(placer_profile::load_checkpoint(&path).expect("loads").kernels, None);
    let described = p.kernels.as_ref().map(|k| k.describe()).unwrap_or_default();
    assert_eq!(
        described,
        "torch 2.15.0 (aten ops, eager, CPU, 2 threads); 1 node(s) timed by placer's kernels, 2 folded into another node's kernel"
    );
}

#[test]
fn damaged_and_foreign_files_are_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = placer_profile::encode_checkpoint(&profile("m", 100)).expect("encodes");
    let other = format!("format version {}", FORMAT_VERSION + 1);
    // The version before: its picked steps found in cache what a step leaves in memory.
    let older = format!("format version {}", FORMAT_VERSION - 1);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("text.ckpt", b"hello".to_vec(), "not a placer-profile checkpoint"),
        ("truncated.ckpt", good[..good.len() / 2].to_vec(), "damaged"),
        ("trailing.ckpt", [good.clone(), vec![0, 1, 2]].concat(), "trailing bytes"),
        ("other.ckpt", [&good[..15], &(FORMAT_VERSION + 1).to_le_bytes()[..], &good[19..]].concat(), &other),
        ("older.ckpt", [&good[..15], &(FORMAT_VERSION - 1).to_le_bytes()[..], &good[19..]].concat(), &older),
    ];
    for (name, bytes, expected) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).expect("write");
        let err = placer_profile::load_checkpoint(&path).expect_err(name).to_string();
        assert!(err.starts_with(&format!("checkpoint {}: ", path.display())) && err.contains(expected), "{err}");
    }
    // Only the header read, from a file that ends inside it: said in words.
    let path = dir.path().join("short.ckpt");
    std::fs::write(&path, &good[..40]).expect("write");
    let err = placer_profile::load_checkpoint_header(&path).expect_err("short").to_string();
    assert!(err.ends_with("damaged: the file ends early"), "{err}");
    let err = placer_profile::load_checkpoint(&dir.path().join("missing.ckpt")).expect_err("missing").to_string();
    assert!(err.contains("missing.ckpt"), "{err}");
}

#[test]
fn an_unwritable_directory_is_an_error_and_the_old_file_survives() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("p.ckpt");
    placer_profile::save_checkpoint(&path, &profile("m", 5)).expect("saves");
    let blocked = dir.path().join("file-not-dir").join("p.ckpt");
    std::fs::write(dir.path().join("file-not-dir"), "x").expect("write");
    assert!(placer_profile::save_checkpoint(&blocked, &profile("m", 5)).is_err());
    assert_eq!(placer_profile::load_checkpoint(&path).expect("still there").measurements.len(), 5);
}

/// Found by `scripts/fuzz.sh` (target `checkpoint`, minimised): a string length of
/// 3.9 GB (and, before minimising, one past `isize::MAX`) in a 24-byte file. bincode
/// allocates a string before reading it, so decoding panicked with "capacity overflow"
/// or tried to allocate gigabytes; the decoder's byte limit now refuses it.
#[test]
fn fuzz_a_string_length_past_the_end_is_refused_not_allocated() {
    let header = [&b"placer-profile\n"[..], &FORMAT_VERSION.to_le_bytes()].concat();
    let cases: [(&str, &[u8]); 3] = [
        ("fuzz-u32-length.ckpt", &[0xfc, 0xff, 0xff, 0xff, 0xe9]),
        ("fuzz-u64-length.ckpt", &[0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]),
        ("fuzz-max-length.ckpt", &[0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, body) in cases {
        let bytes = [&header[..], body].concat();
        let path = dir.path().join(name);
        let err = placer_profile::decode_checkpoint(&bytes, &path).expect_err(name).to_string();
        assert!(err.contains("damaged: a length runs past the end of the file"), "{name}: {err}");
        std::fs::write(&path, &bytes).expect("write");
        let err = placer_profile::load_checkpoint_header(&path).expect_err(name).to_string();
        assert!(err.contains("damaged: a length runs past the end of the file"), "{name}: {err}");
    }
}

/// The byte limit grows with the file: checkpoints over each step of it still load.
#[test]
fn large_checkpoints_pass_the_decoders_byte_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big.ckpt");
    let mut p = profile("m", 40_000);
    for m in &mut p.measurements {
        m.node = format!("{}-{}", m.node, "n".repeat(24));
    }
    placer_profile::save_checkpoint(&path, &p).expect("saves");
    assert!(std::fs::metadata(&path).expect("size").len() > 1 << 20, "the test must cross the first limit");
    assert_eq!(placer_profile::load_checkpoint(&path).expect("loads"), p);
    assert_eq!(placer_profile::load_checkpoint_header(&path).expect("header loads"), p.header);
}

/// A pool's kind is stored by its name, as it was when the field was a string: version
/// 17 files from before the enum read unchanged, and a kind this placer does not know
/// is refused by name, never read as another.
#[test]
fn a_pool_kind_is_stored_by_name_and_an_unknown_one_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = placer_profile::encode_checkpoint(&profile("m", 10)).expect("encodes");
    // The pool named "pmem" is of kind pmem: both spellings become "pmex".
    let mut bad = good.clone();
    let mut replaced = 0;
    for i in 0..bad.len().saturating_sub(4) {
        if &bad[i..i + 5] == b"\x04pmem" {
            bad[i + 4] = b'x';
            replaced += 1;
        }
    }
    assert_eq!(replaced, 2, "the name and the kind, each a 4-byte string");
    let path = dir.path().join("kind.ckpt");
    std::fs::write(&path, bad).expect("write");
    let err = placer_profile::load_checkpoint(&path).expect_err("an unknown kind").to_string();
    assert!(err.contains("unknown pool kind 'pmex'") && err.lines().count() == 1, "{err}");
}
