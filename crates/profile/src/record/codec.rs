//! Checkpoints: a [`Profile`] in bincode 2 behind a fixed text header, written
//! atomically ([`placer_files::write_atomic`]: temporary file, fsync, rename, fsync of the
//! directory) after every pass.
//!
//! Layout: `placer-profile\n` magic, then a little-endian u32 format version, then the
//! bincode body, then (from version 17) the profiled model's JSON as a bincode
//! `Option<String>`, then, for a profile of another framework's kernels only, its
//! [`super::KernelSource`] as a bincode `Option` (a file that ends after the model was
//! timed by placer's kernels, as every earlier one was). The version is read before the body, so a file from another version
//! is refused by name rather than misread.

use super::{FORMAT_NAME, FORMAT_VERSION, Profile, ProfileHeader};
use crate::ProfileError;
use std::io::Read;
use std::path::Path;

const MAGIC: &[u8] = b"placer-profile\n";

fn config() -> bincode::config::Configuration<bincode::config::LittleEndian, bincode::config::Varint> {
    bincode::config::standard().with_little_endian().with_variable_int_encoding()
}

/// Runs `$decode` with `$config` set to [`config`] under a byte limit of at least
/// `$len`, the length of what is decoded. bincode allocates a string's bytes before it
/// reads them, so a damaged length would be allocated whole (or overflow the allocator,
/// a panic); under the limit it is refused. A real checkpoint is never refused: every
/// string is stored whole in its bytes, so all of them add up to at most `$len`.
macro_rules! with_limit_for {
    ($len:expr, |$config:ident| $decode:expr) => {{
        let len: u64 = $len;
        if len <= 1 << 20 {
            let $config = config().with_limit::<{ 1 << 20 }>();
            $decode
        } else if len <= 1 << 24 {
            let $config = config().with_limit::<{ 1 << 24 }>();
            $decode
        } else if len <= 1 << 28 {
            let $config = config().with_limit::<{ 1 << 28 }>();
            $decode
        } else if len <= 1 << 32 {
            let $config = config().with_limit::<{ 1 << 32 }>();
            $decode
        } else {
            let $config = config().with_limit::<{ 1 << 40 }>();
            $decode
        }
    }};
}

/// What a decoding error says in `damaged: ...`.
fn damage(e: bincode::error::DecodeError) -> String {
    match e {
        bincode::error::DecodeError::LimitExceeded => "damaged: a length runs past the end of the file".into(),
        // A header read from the file itself: bincode's own text for these is a Debug dump.
        bincode::error::DecodeError::UnexpectedEnd { .. } => "damaged: the file ends early".into(),
        bincode::error::DecodeError::Io { inner, .. } if inner.kind() == std::io::ErrorKind::UnexpectedEof => {
            "damaged: the file ends early".into()
        }
        bincode::error::DecodeError::Io { inner, .. } => format!("damaged: {inner}"),
        e => format!("damaged: {e}"),
    }
}

pub fn encode(profile: &Profile) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::with_capacity(64 + profile.measurements.len() * 64);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bincode::serde::encode_into_std_write(profile, &mut bytes, config()).map_err(|e| e.to_string())?;
    bincode::serde::encode_into_std_write(&profile.model_json, &mut bytes, config()).map_err(|e| e.to_string())?;
    if profile.kernels.is_some() {
        bincode::serde::encode_into_std_write(&profile.kernels, &mut bytes, config()).map_err(|e| e.to_string())?;
    }
    Ok(bytes)
}

/// The bincode body after the magic and the version this placer reads.
fn body<'a>(bytes: &'a [u8], path: &Path) -> Result<&'a [u8], ProfileError> {
    let bad = |reason: String| ProfileError::Checkpoint { path: path.to_path_buf(), reason };
    let body = bytes.strip_prefix(MAGIC).ok_or_else(|| bad(format!("not a {FORMAT_NAME} checkpoint (no header)")))?;
    let (version, body) = body.split_at_checked(4).ok_or_else(|| bad("truncated header".into()))?;
    let version = u32::from_le_bytes([version[0], version[1], version[2], version[3]]);
    if version != FORMAT_VERSION {
        return Err(bad(format!(
            "format version {version}, from another placer (this one reads version {FORMAT_VERSION}); \
             move it aside, or replace it with placer profile --fresh"
        )));
    }
    Ok(body)
}

pub fn decode(bytes: &[u8], path: &Path) -> Result<Profile, ProfileError> {
    let bad = |reason: String| ProfileError::Checkpoint { path: path.to_path_buf(), reason };
    let body = body(bytes, path)?;
    let (mut profile, read): (Profile, usize) =
        with_limit_for!(body.len() as u64, |config| bincode::serde::decode_from_slice(body, config))
            .map_err(|e| bad(damage(e)))?;
    let mut read_all = read;
    let rest = &body[read..];
    let (model_json, read): (Option<String>, usize) =
        with_limit_for!(rest.len() as u64, |config| bincode::serde::decode_from_slice(rest, config))
            .map_err(|e| bad(damage(e)))?;
    profile.model_json = model_json;
    read_all += read;
    let rest = &rest[read..];
    if !rest.is_empty() {
        let (kernels, read): (Option<super::KernelSource>, usize) =
            with_limit_for!(rest.len() as u64, |config| bincode::serde::decode_from_slice(rest, config))
                .map_err(|e| bad(damage(e)))?;
        profile.kernels = kernels;
        read_all += read;
    }
    if read_all != body.len() {
        return Err(bad(format!("damaged: {} trailing bytes", body.len() - read_all)));
    }
    Ok(profile)
}

pub fn load(path: &Path) -> Result<Profile, ProfileError> {
    let bytes = std::fs::read(path)
        .map_err(|e| ProfileError::Checkpoint { path: path.to_path_buf(), reason: e.to_string() })?;
    decode(&bytes, path)
}

/// Only the header of the checkpoint at `path` (the body's first field): the
/// measurements after it are neither read nor decoded.
pub fn load_header(path: &Path) -> Result<ProfileHeader, ProfileError> {
    let bad = |reason: String| ProfileError::Checkpoint { path: path.to_path_buf(), reason };
    let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let len = file.metadata().map_err(|e| bad(e.to_string()))?.len();
    let mut reader = std::io::BufReader::new(file);
    let mut prefix = Vec::with_capacity(MAGIC.len() + 4);
    (&mut reader).take((MAGIC.len() + 4) as u64).read_to_end(&mut prefix).map_err(|e| bad(e.to_string()))?;
    body(&prefix, path)?;
    with_limit_for!(len, |config| bincode::serde::decode_from_std_read(&mut reader, config)).map_err(|e| bad(damage(e)))
}

/// Replaces `path` with `profile` so that a crash at any moment leaves either the old
/// file or the new one, complete.
pub fn save(path: &Path, profile: &Profile) -> Result<(), ProfileError> {
    let err = |reason: String| ProfileError::Checkpoint { path: path.to_path_buf(), reason };
    let bytes = encode(profile).map_err(&err)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
    placer_files::write_atomic(path, bytes).map_err(|e| err(e.io.to_string()))
}
