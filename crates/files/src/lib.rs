//! One way to replace a file so that a reader, or a crash at any moment, sees either the
//! old file or the new one, complete, never a mix or a truncated file.
//!
//! The sequence: write a uniquely named temporary file in the target's directory (a
//! rename is atomic only within one file system), fsync it (so the rename cannot reach
//! the disk before the data), rename it over the target, then fsync the directory (the
//! rename itself is durable only once the directory entry is). On any failure before the
//! rename the temporary file is removed and the target is untouched. Unique temporary
//! names let two writers race: the last rename wins and each rename installs a complete
//! file.

use std::fmt;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Which step of [`write_atomic_with`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Creating the temporary file in this directory.
    CreateTemp(PathBuf),
    /// Writing the content into the temporary file (including the writer's own errors).
    Write,
    /// Flushing the temporary file to the disk.
    Sync,
    /// Renaming the temporary file over the target.
    Rename,
    /// Syncing this directory after the rename: the target already holds the new content,
    /// but a crash could still bring back the old one.
    SyncDir(PathBuf),
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::CreateTemp(dir) => write!(f, "creating a temporary file in {}", dir.display()),
            Step::Write => f.write_str("writing the temporary file"),
            Step::Sync => f.write_str("syncing the temporary file"),
            Step::Rename => f.write_str("renaming the temporary file over it"),
            Step::SyncDir(dir) => write!(f, "syncing directory {}", dir.display()),
        }
    }
}

/// A failed atomic write: the target, the step and the I/O error. Callers with their own
/// error types usually keep only `io`, as their errors already name the target.
#[derive(Debug)]
pub struct WriteError {
    /// The file that was to be replaced.
    pub path: PathBuf,
    pub step: Step,
    pub io: io::Error,
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot write {}: {}: {}", self.path.display(), self.step, self.io)
    }
}

// The I/O error is part of the message, so it is not also reported as the source.
impl std::error::Error for WriteError {}

impl From<WriteError> for io::Error {
    fn from(e: WriteError) -> io::Error {
        e.io
    }
}

/// Replaces `path` with `bytes` atomically and durably (see the crate documentation).
pub fn write_atomic(path: &Path, bytes: impl AsRef<[u8]>) -> Result<(), WriteError> {
    write_atomic_with(path, |w| w.write_all(bytes.as_ref()))
}

/// Replaces `path` with what `write` writes, atomically and durably. If `write` fails the
/// target is left as it was and the temporary file is removed. The writer is buffered.
///
/// The directory must exist. The new file gets the permissions a newly created file gets
/// (0o666 less the umask), as `std::fs::write` would give it.
pub fn write_atomic_with(path: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), WriteError> {
    let fail = |step: Step| move |io: io::Error| WriteError { path: path.to_path_buf(), step, io };
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let prefix = temp_prefix(path);
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    // tempfile creates private (0o600) files; a model or a plan should be as readable as
    // one written with std::fs::write.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    // Dropping `tmp` on any early return below removes the temporary file.
    let mut tmp = builder.tempfile_in(dir).map_err(fail(Step::CreateTemp(dir.to_path_buf())))?;
    {
        let mut out = BufWriter::new(tmp.as_file_mut());
        write(&mut out).and_then(|()| out.flush()).map_err(fail(Step::Write))?;
    }
    tmp.as_file().sync_all().map_err(fail(Step::Sync))?;
    // On failure the returned error owns the temporary file, and dropping it removes it.
    tmp.persist(path).map_err(|e| fail(Step::Rename)(e.error))?;
    sync_dir(dir).map_err(fail(Step::SyncDir(dir.to_path_buf())))
}

/// The temporary-file name prefix [`write_atomic_with`] uses for `path`.
fn temp_prefix(path: &Path) -> String {
    format!(".{}.", path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
}

/// Removes the temporary files that writes of `path` left when their process was killed
/// between creating and renaming them, and returns how many. Only for a caller that
/// knows no write of `path` is under way (it holds the file's lock): a live writer's
/// temporary file would go too.
pub fn remove_stale_temps(path: &Path) -> io::Result<usize> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let prefix = temp_prefix(path);
    let mut removed = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&prefix) && name.ends_with(".tmp") && entry.file_type()?.is_file() {
            std::fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

// Other systems cannot open a directory as a file; the rename is as durable as they make it.
#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}
