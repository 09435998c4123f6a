//! Probe results cached per host, in a small JSON file named by the host's fingerprint,
//! so that emulation and later commands reuse measured DRAM figures.

use crate::HostError;
use crate::probe::PoolsProbe;
use crate::topology::HostTopology;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The host's measured local-DRAM bandwidth, all cores: the baseline every emulated
/// pool's slowdown is scaled from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DramBaseline {
    pub read_gbps: f64,
    pub write_gbps: f64,
    pub latency_ns: f64,
    pub threads: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostCache {
    pub format: String,
    pub version: u32,
    pub fingerprint: String,
    /// Seconds since the Unix epoch when the baseline was measured.
    pub measured_at: u64,
    pub baseline: DramBaseline,
    /// The last full `placer topo --probe`, with the pool layout it measured.
    pub probe: Option<PoolsProbe>,
}

const CACHE_FORMAT: &str = "placer-host-cache";
/// 2: measured on huge pages, as the pools' buffers are since then. A version-1 entry was
/// measured on 4 KiB pages (on this project's VM its DRAM read bandwidth was 1.5-1.7×
/// lower), so it is not used: it is measured again and replaced.
const CACHE_VERSION: u32 = 2;

/// `$PLACER_CACHE_DIR`, else `$XDG_CACHE_HOME/placer`, else `~/.cache/placer`.
pub fn default_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PLACER_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("placer");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache").join("placer")
}

/// A digest of what makes memory figures comparable: host name, CPU model and count,
/// and every NUMA node's index and technology. Another machine gets a different key.
/// Node sizes are left out: on VMs with memory hotplug they change while the machine
/// runs (seen here: a profile and its resume a few seconds apart disagreed), and a
/// tier's bandwidth does not depend on how much of it there is.
pub fn fingerprint(topology: &HostTopology) -> String {
    let mut h = Sha256::new();
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    h.update(hostname.trim().as_bytes());
    h.update(topology.cpu_model.as_deref().unwrap_or("").as_bytes());
    h.update(topology.cpus.to_le_bytes());
    for n in &topology.nodes {
        h.update(n.os_index.to_le_bytes());
        h.update(n.subtype.as_deref().unwrap_or("").as_bytes());
    }
    let digest = h.finalize();
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

pub fn path_for(dir: &Path, fingerprint: &str) -> PathBuf {
    dir.join(format!("host-{fingerprint}.json"))
}

/// The cached entry, if there is one for this fingerprint and it was measured the way
/// this placer measures ([`CACHE_VERSION`]; an older entry is as good as none). A
/// corrupt or foreign file, or one from a newer placer, is an error, not silently
/// ignored: the user should know their cache is broken.
pub fn load(dir: &Path, fingerprint: &str) -> Result<Option<HostCache>, HostError> {
    let path = path_for(dir, fingerprint);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(HostError::Cache { path, reason: e.to_string() }),
    };
    let cache: HostCache =
        serde_json::from_str(&text).map_err(|e| HostError::Cache { path: path.clone(), reason: e.to_string() })?;
    if cache.format != CACHE_FORMAT || cache.fingerprint != fingerprint {
        return Err(HostError::Cache { path, reason: "not a placer host cache for this host (delete it)".into() });
    }
    match cache.version.cmp(&CACHE_VERSION) {
        std::cmp::Ordering::Less => Ok(None),
        std::cmp::Ordering::Equal => Ok(Some(cache)),
        std::cmp::Ordering::Greater => Err(HostError::Cache {
            path,
            reason: format!("version {} is from a newer placer (this one reads {CACHE_VERSION})", cache.version),
        }),
    }
}

/// Writes atomically ([`placer_files::write_atomic`]), so an interrupted write never
/// leaves a half-written cache.
pub fn store(
    dir: &Path,
    fingerprint: &str,
    baseline: DramBaseline,
    probe: Option<PoolsProbe>,
) -> Result<PathBuf, HostError> {
    let path = path_for(dir, fingerprint);
    let err = |reason: String| HostError::Cache { path: path.clone(), reason };
    std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
    let measured_at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let cache = HostCache {
        format: CACHE_FORMAT.to_string(),
        version: CACHE_VERSION,
        fingerprint: fingerprint.to_string(),
        measured_at,
        baseline,
        probe,
    };
    let text = serde_json::to_string_pretty(&cache).map_err(|e| err(e.to_string()))?;
    placer_files::write_atomic(&path, text).map_err(|e| err(e.io.to_string()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASELINE: DramBaseline = DramBaseline { read_gbps: 30.0, write_gbps: 25.0, latency_ns: 100.0, threads: 2 };

    /// The entry `store` writes, with its version replaced.
    fn with_version(dir: &Path, version: u32) {
        let path = store(dir, "f", BASELINE, None).expect("stored");
        let text = std::fs::read_to_string(&path).expect("read");
        let old = format!("\"version\": {CACHE_VERSION}");
        assert!(text.contains(&old), "{text}");
        std::fs::write(&path, text.replace(&old, &format!("\"version\": {version}"))).expect("write");
    }

    #[test]
    fn an_entry_measured_the_older_way_is_measured_again_and_a_newer_one_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        store(dir.path(), "f", BASELINE, None).expect("stored");
        assert_eq!(load(dir.path(), "f").expect("loads").map(|c| c.baseline), Some(BASELINE));
        with_version(dir.path(), CACHE_VERSION - 1);
        assert_eq!(load(dir.path(), "f").expect("an older entry is none"), None);
        with_version(dir.path(), CACHE_VERSION + 1);
        let err = load(dir.path(), "f").expect_err("newer").to_string();
        assert!(err.contains("from a newer placer"), "{err}");
        assert!(load(dir.path(), "another").expect("no entry").is_none());
    }
}
