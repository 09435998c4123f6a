//! From a checkpoint back to its model: `placer solve --budget 64GB` with no model
//! solves the most recent profile, so the profile must say which model it measured
//! and the file must still hold that model.

use crate::ProfileError;
use crate::checkpoint;
use crate::record::ProfileHeader;
use placer_ir::Model;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A checkpoint's header and the model it measured, read back from the file it was
/// profiled from.
#[derive(Debug)]
pub struct Profiled {
    pub header: ProfileHeader,
    pub model_file: PathBuf,
    pub model: Model,
}

/// The checkpoint (`*.ckpt`) in `dir` written last. Interrupted or partial profiles count:
/// a checkpoint is saved after every pass, and the solver fills what is missing.
pub fn latest(dir: &Path) -> Result<PathBuf, ProfileError> {
    newest_first(dir)?.into_iter().next().ok_or_else(|| ProfileError::NoCheckpoint { dir: dir.to_path_buf() })
}

/// The checkpoint in `dir` written last that measured `model` (the same content hash),
/// like [`latest`]; `None` when `dir` holds none, or does not exist. A checkpoint that
/// cannot be read is another model's unless its file name is one `placer profile` gives
/// this model ([`crate::profiler::checkpoint_stem`]); then its error is returned (an older
/// format, say), rather than solving without the profile the user meant.
pub fn latest_of(dir: &Path, model: &Model) -> Result<Option<PathBuf>, ProfileError> {
    let hash = model.content_hash();
    let ours = crate::profiler::checkpoint_stem(model.name(), &hash);
    for path in newest_first(dir)? {
        match checkpoint::load_header(&path) {
            Ok(header) if header.model_hash == hash => return Ok(Some(path)),
            Ok(_) => {}
            Err(e) if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&ours)) => return Err(e),
            Err(_) => {}
        }
    }
    Ok(None)
}

/// Every checkpoint file in `dir`, the one written last first; none when `dir` does not
/// exist.
fn newest_first(dir: &Path) -> Result<Vec<PathBuf>, ProfileError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ProfileError::Checkpoint { path: dir.to_path_buf(), reason: e.to_string() }),
    };
    let mut found: Vec<(SystemTime, PathBuf)> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| ProfileError::Checkpoint { path: dir.to_path_buf(), reason: e.to_string() })?;
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "ckpt") || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let modified = entry
            .metadata()
            .and_then(|m| m.modified())
            .map_err(|e| ProfileError::Checkpoint { path: path.clone(), reason: e.to_string() })?;
        found.push((modified, path));
    }
    // Ties (coarse clocks) go to the name, so the order does not depend on the
    // directory's.
    found.sort_by(|a, b| b.cmp(a));
    Ok(found.into_iter().map(|(_, path)| path).collect())
}

/// Reads `checkpoint`'s header and the model file it records, refusing a checkpoint that records
/// no file, a file that has gone, and a file that no longer holds the profiled model.
pub fn profiled(checkpoint: &Path) -> Result<Profiled, ProfileError> {
    let header = checkpoint::load_header(checkpoint)?;
    let refuse = |reason: String| ProfileError::ModelSource { checkpoint: checkpoint.to_path_buf(), reason };
    let Some(source) = header.model_source.as_ref() else {
        return Err(refuse(format!(
            "it records no model file (model {} was built in memory); name the model: placer solve MODEL --budget B --profile {}",
            header.model_name,
            checkpoint.display()
        )));
    };
    let model_file = PathBuf::from(source);
    if !model_file.is_file() {
        return Err(refuse(format!(
            "its model file {source} is gone; name the model where it is now: placer solve MODEL --budget B --profile {}",
            checkpoint.display()
        )));
    }
    let changed = |now: &str| {
        refuse(format!(
            "its model file {source} has changed since it was profiled ({now}); profile it again: placer profile {source}"
        ))
    };
    let model = placer_ir::load_model(&model_file).map_err(|e| changed(&format!("it no longer loads: {e}")))?;
    let hash = model.content_hash();
    if hash != header.model_hash {
        return Err(changed(&format!("model hash {} then, {} now", short(&header.model_hash), short(&hash))));
    }
    Ok(Profiled { header, model_file, model })
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}
