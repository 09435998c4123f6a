//! From a checkpoint back to its model: `placer solve --budget 64GB` with no model
//! solves the most recent profile, so the profile must say which model it measured
//! and the file must still hold that model.

use crate::ProfileError;
use crate::record::Profile;
use crate::record::codec as checkpoint;
use placer_ir::Model;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A checkpoint's header and the model it measured: the one the checkpoint carries, or,
/// in a checkpoint of version 16, the one read back from the file it was profiled from.
#[derive(Debug)]
pub struct Profiled {
    /// The checkpoint's profile, read once for its model and for the solve.
    pub profile: Profile,
    /// Where the model came from, in words: its file, and whether that file still
    /// holds it.
    pub origin: String,
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

/// Reads `checkpoint` and the model it measured. A checkpoint that carries its model
/// ([`crate::Profile::model_json`]) needs nothing else, whatever the model was built
/// from; its recorded file, if any, is only named. One of version 16 carries none: its
/// model file must still be there and hold the profiled model.
pub fn profiled(checkpoint: &Path) -> Result<Profiled, ProfileError> {
    let profile = checkpoint::load(checkpoint)?;
    let header = &profile.header;
    let refuse = |reason: String| ProfileError::ModelSource { checkpoint: checkpoint.to_path_buf(), reason };
    let from_file = |source: &str| -> Result<Model, String> {
        let model = placer_ir::load_model(Path::new(source)).map_err(|e| format!("it no longer loads: {e}"))?;
        let hash = model.content_hash();
        if hash != header.model_hash {
            return Err(format!("model hash {} then, {} now", short(&header.model_hash), short(&hash)));
        }
        Ok(model)
    };
    if let Some(json) = &profile.model_json {
        let model = placer_ir::parse_model(json)
            .ok()
            .filter(|m| m.content_hash() == header.model_hash)
            .ok_or_else(|| refuse("damaged: the model it carries is not the one it profiled".into()))?;
        let origin = match header.model_source.as_deref() {
            None => "the checkpoint (built in memory, not read from a file)".to_string(),
            Some(source) if !Path::new(source).is_file() => format!("the checkpoint (its file {source} is gone)"),
            Some(source) => match from_file(source) {
                Ok(_) => source.to_string(),
                Err(why) => format!("the checkpoint (its file {source} has changed since it was profiled: {why})"),
            },
        };
        return Ok(Profiled { profile, origin, model });
    }
    let Some(source) = header.model_source.as_deref() else {
        return Err(refuse(format!(
            "it records no model file (model {} was built in memory); name the model: placer solve MODEL --budget B --profile {}",
            header.model_name,
            checkpoint.display()
        )));
    };
    if !Path::new(source).is_file() {
        return Err(refuse(format!(
            "its model file {source} is gone; name the model where it is now: placer solve MODEL --budget B --profile {}",
            checkpoint.display()
        )));
    }
    let model = from_file(source).map_err(|now| {
        refuse(format!(
            "its model file {source} has changed since it was profiled ({now}); profile it again: placer profile {source}"
        ))
    })?;
    let origin = source.to_string();
    Ok(Profiled { profile, origin, model })
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}
