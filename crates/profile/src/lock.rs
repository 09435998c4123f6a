//! One profiler per checkpoint. A profile holds an advisory lock (`flock`, through std's
//! `File::try_lock`) on `<checkpoint>.lock` while it measures and writes; a second
//! profiler on the same checkpoint is refused at once, naming the process that holds it.
//!
//! The lock is on a sidecar file, not the checkpoint itself: checkpoints are replaced by
//! rename (placer_files), which would leave a lock on the old inode. The kernel drops the
//! lock when its holder exits, however it exits, so a killed profiler never blocks the
//! next one; the pid it wrote is only read to name a live holder. A holder that finishes
//! removes the file while still holding the lock; a taker checks that the file it locked
//! is still the one at the path, so two can never hold locks on different inodes.

use crate::ProfileError;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Held while a profile writes its checkpoint; the lock is released when it is dropped.
#[derive(Debug)]
pub struct CheckpointLock {
    _file: File,
    path: PathBuf,
}

impl Drop for CheckpointLock {
    fn drop(&mut self) {
        // Removed while still locked (the file handle closes after this): a waiter that
        // opened it will see it is no longer at the path and start over.
        let _ = std::fs::remove_file(&self.path);
    }
}

impl CheckpointLock {
    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// How many times a lock file that vanished under the taker is opened again.
const LOCK_ATTEMPTS: usize = 8;

/// Whether `file` is the file now at `path` (same device and inode).
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Where the lock for `checkpoint` lives.
pub fn lock_path(checkpoint: &Path) -> PathBuf {
    let mut name = checkpoint.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".lock");
    checkpoint.with_file_name(name)
}

/// Takes the lock on `checkpoint`, or says who holds it.
pub fn lock(checkpoint: &Path) -> Result<CheckpointLock, ProfileError> {
    let path = lock_path(checkpoint);
    let failed = |what: &str, e: std::io::Error| ProfileError::Checkpoint {
        path: checkpoint.to_path_buf(),
        reason: format!("cannot {what} its lock file {}: {e}", path.display()),
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| ProfileError::CreateDir { path: dir.to_path_buf(), source })?;
    }
    // A lock on a file a finishing holder has just removed protects nothing: try again.
    let mut file = None;
    for _ in 0..LOCK_ATTEMPTS {
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| failed("open", e))?;
        match f.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = f.read_to_string(&mut text);
                let holder =
                    text.trim().parse::<u32>().map_or("another process".to_string(), |pid| format!("process {pid}"));
                return Err(ProfileError::Busy { path: checkpoint.to_path_buf(), holder });
            }
            Err(TryLockError::Error(e)) => return Err(failed("lock", e)),
        }
        if same_file(&f, &path) {
            file = Some(f);
            break;
        }
    }
    let Some(mut file) = file else {
        return Err(failed("keep", std::io::Error::other("it was replaced while being locked, again and again")));
    };
    // The holder's pid, for the message a second profiler prints.
    let pid = std::process::id().to_string();
    file.set_len(0)
        .and_then(|()| file.seek(SeekFrom::Start(0)))
        .and_then(|_| file.write_all(pid.as_bytes()))
        .and_then(|()| file.flush())
        .map_err(|e| failed("write", e))?;
    Ok(CheckpointLock { _file: file, path })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_checkpoint_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ckpt = dir.path().join("m.ckpt");
        let held = lock(&ckpt).expect("first lock");
        assert_eq!(held.path(), dir.path().join("m.ckpt.lock"));
        let err = lock(&ckpt).expect_err("second lock refused");
        let text = err.to_string();
        assert!(text.contains(&format!("process {}", std::process::id())), "{text}");
        assert!(text.contains("m.ckpt"), "{text}");
        drop(held);
        assert!(!dir.path().join("m.ckpt.lock").exists(), "a finished holder removes its lock file");
        // A lock file left by a holder that died (the kernel released its lock with the
        // process; the file and its pid stay) is taken over.
        std::fs::write(dir.path().join("m.ckpt.lock"), "999999999").expect("stale lock file");
        let again = lock(&ckpt).expect("a dead holder's file does not block");
        let pid = std::fs::read_to_string(again.path()).expect("lock file");
        assert_eq!(pid, std::process::id().to_string());
    }
}
