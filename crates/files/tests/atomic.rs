//! The atomic write: success replaces, every failure leaves the old file and no
//! temporary file, and racing writers never mix.

use placer_files::{Step, write_atomic, write_atomic_with};
use std::io;
use std::path::Path;

/// Every entry of `dir` but the ones named.
fn others(dir: &Path, expected: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| !expected.contains(&n.as_str()))
        .collect();
    names.sort();
    names
}

#[test]
fn a_write_creates_then_replaces() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plan.json");
    write_atomic(&path, b"first").expect("create");
    assert_eq!(std::fs::read(&path).expect("read"), b"first");
    write_atomic(&path, "second, longer than the first").expect("replace");
    assert_eq!(std::fs::read(&path).expect("read"), b"second, longer than the first");
    write_atomic(&path, b"3").expect("shorten");
    assert_eq!(std::fs::read(&path).expect("read"), b"3");
    assert_eq!(others(dir.path(), &["plan.json"]), Vec::<String>::new());
}

#[test]
fn a_writer_that_fails_midway_leaves_the_old_file_and_no_temporary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("model.json");
    std::fs::write(&path, b"old content").expect("seed");
    let err = write_atomic_with(&path, |w| {
        w.write_all(&[b'n'; 100_000])?;
        Err(io::Error::other("serializer gave up"))
    })
    .expect_err("the writer failed");
    assert_eq!(err.step, Step::Write);
    assert_eq!(err.path, path);
    assert_eq!(err.io.to_string(), "serializer gave up");
    assert_eq!(std::fs::read(&path).expect("read"), b"old content");
    assert_eq!(others(dir.path(), &["model.json"]), Vec::<String>::new());
}

#[test]
fn a_target_that_is_a_directory_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("taken");
    std::fs::create_dir(&path).expect("mkdir");
    std::fs::write(path.join("inside"), b"kept").expect("seed");
    let err = write_atomic(&path, b"new").expect_err("cannot replace a directory");
    assert_eq!(err.step, Step::Rename);
    assert!(path.is_dir());
    assert_eq!(std::fs::read(path.join("inside")).expect("read"), b"kept");
    assert_eq!(others(dir.path(), &["taken"]), Vec::<String>::new());
    let message = err.to_string();
    assert!(message.starts_with(&format!("cannot write {}: renaming", path.display())), "{message}");
}

#[test]
fn a_missing_directory_names_the_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("no-such-dir");
    let path = missing.join("out.json");
    let err = write_atomic(&path, b"new").expect_err("no directory");
    assert_eq!(err.step, Step::CreateTemp(missing.clone()));
    assert_eq!(err.io.kind(), io::ErrorKind::NotFound);
    assert!(err.to_string().contains(&missing.display().to_string()), "{err}");
    assert!(!missing.exists());
}

#[cfg(unix)]
#[test]
fn the_new_file_is_as_readable_as_one_std_writes() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let ours = dir.path().join("ours");
    let theirs = dir.path().join("theirs");
    write_atomic(&ours, b"x").expect("write");
    std::fs::write(&theirs, b"x").expect("write");
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&ours), mode(&theirs));
}

#[test]
fn racing_writers_leave_one_complete_file() {
    const LEN: usize = 1 << 20;
    const ROUNDS: usize = 20;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("race.bin");
    write_atomic(&path, vec![b'0'; LEN]).expect("seed");
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let writers: Vec<_> = [b'a', b'b']
            .into_iter()
            .map(|byte| {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..ROUNDS {
                        // Written in pieces so that the two writers interleave.
                        write_atomic_with(path, |w| {
                            for _ in 0..16 {
                                w.write_all(&[byte; LEN / 16])?;
                            }
                            Ok(())
                        })
                        .expect("write");
                    }
                })
            })
            .collect();
        let reader = s.spawn(|| {
            let mut reads = 0;
            loop {
                let finished = done.load(std::sync::atomic::Ordering::Relaxed);
                let bytes = std::fs::read(&path).expect("read");
                assert_eq!(bytes.len(), LEN, "a reader saw a partial file");
                assert!(bytes.iter().all(|&b| b == bytes[0]), "a reader saw two writers' bytes mixed");
                reads += 1;
                if finished {
                    return reads;
                }
            }
        });
        for w in writers {
            w.join().expect("writer");
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        reader.join().expect("reader");
    });
    let bytes = std::fs::read(&path).expect("read");
    assert_eq!(bytes.len(), LEN);
    assert!(bytes[0] == b'a' || bytes[0] == b'b');
    assert!(bytes.iter().all(|&b| b == bytes[0]));
    assert_eq!(others(dir.path(), &["race.bin"]), Vec::<String>::new());
}

#[test]
fn stale_temporary_files_of_one_target_are_removed_and_nothing_else() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("m.ckpt");
    write_atomic(&path, b"kept").expect("create");
    // What a process killed between creating and renaming leaves, and bystanders.
    for name in [".m.ckpt.Ab12Cd.tmp", ".m.ckpt.Zz99Yy.tmp", ".other.ckpt.Ab12Cd.tmp", "m.ckpt.tmp", ".m.ckpt.keep"] {
        std::fs::write(dir.path().join(name), b"half").expect("write");
    }
    assert_eq!(placer_files::remove_stale_temps(&path).expect("removes"), 2);
    assert_eq!(others(dir.path(), &["m.ckpt"]), [".m.ckpt.keep", ".other.ckpt.Ab12Cd.tmp", "m.ckpt.tmp"]);
    assert_eq!(std::fs::read(&path).expect("read"), b"kept");
}
