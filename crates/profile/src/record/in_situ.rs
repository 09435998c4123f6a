//! The third reference a profile can be judged against: each kernel as it ran inside a
//! plan, amid the plan's own neighbours, reuse of freed bytes and background copies
//! (`placer run --plan PLAN --in-situ FILE`). A profile predicts these times; this file
//! holds what they were.
//!
//! A JSON document, so that it can be read and diffed by hand: `format` and `version`
//! first, then what ran where, then one entry per kernel of the schedule.

use super::PoolInfo;
use crate::ProfileError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

pub const IN_SITU_FORMAT: &str = "placer-in-situ";
/// Bumped whenever a field changes meaning; other versions are refused by name.
pub const IN_SITU_VERSION: u32 = 1;

/// Every kernel of one plan as executed: its median over the run's timed steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InSitu {
    pub format: String,
    pub version: u32,
    pub model_name: String,
    pub model_hash: String,
    pub host_fingerprint: String,
    pub pools: Vec<PoolInfo>,
    /// The plan that ran, in words (its strategy and budget).
    pub plan: String,
    /// A digest of the plan file's content: two runs are runs of the same plan only when
    /// it is the same.
    pub plan_digest: String,
    /// The timed steps every kernel's figures come from.
    pub steps: u32,
    /// One per kernel of the schedule, in schedule order.
    pub kernels: Vec<InSituKernel>,
    /// Every node's median time with every tensor in DRAM, run interleaved with the plan
    /// (empty when it was not): set against the profile's all-DRAM times, the shift
    /// common to every placement (the host's pace between the profile and the run).
    #[serde(default)]
    pub reference_ns: BTreeMap<String, f64>,
    /// The same for all-DRAM's second run in the same interleaved run (A′; empty when it
    /// did not run, and in records written before it was kept): against the first, the
    /// floor under any figure set against all-DRAM's kernels.
    #[serde(default)]
    pub reference_again_ns: BTreeMap<String, f64>,
}

/// One kernel of the schedule as it ran in the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InSituKernel {
    pub step: usize,
    pub node: String,
    pub op: String,
    /// The pool of each operand while it ran, in `Node::operands` order: the key a
    /// profile's measurement of the same kernel is found by.
    pub config: Vec<u16>,
    /// Its time including the emulated pools' waits, over the timed steps, ns.
    pub median_ns: f64,
    pub mad_ns: f64,
    pub count: u32,
    /// A background copy of the plan ran beside it: the copy thread's share of the
    /// machine is part of its time, and of no profile's measurement.
    pub beside_copy: bool,
    /// What the plan charged for the copies beside it (the solver's interference term:
    /// the profile's calibration, not this run), ns; 0 apart from copies, and in records
    /// written before it was kept.
    #[serde(default)]
    pub charged_ns: f64,
}

impl InSitu {
    pub fn load(path: &Path) -> Result<InSitu, ProfileError> {
        let bad = |reason: String| ProfileError::InSitu { path: path.to_path_buf(), reason };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
        let format = doc.get("format").and_then(|f| f.as_str()).unwrap_or("");
        if format != IN_SITU_FORMAT {
            return Err(bad(format!("not an in-situ record (format '{format}', expected '{IN_SITU_FORMAT}')")));
        }
        let version = doc.get("version").and_then(|v| v.as_u64()).unwrap_or(0);
        if version != u64::from(IN_SITU_VERSION) {
            return Err(bad(format!(
                "version {version}; this placer reads version {IN_SITU_VERSION}: record the run again"
            )));
        }
        let run: InSitu = serde_json::from_value(doc).map_err(|e| bad(e.to_string()))?;
        if let Some(k) = run.kernels.iter().find(|k| k.config.iter().any(|&p| usize::from(p) >= run.pools.len())) {
            return Err(bad(format!("kernel {} (step {}) names a pool the record does not list", k.node, k.step)));
        }
        Ok(run)
    }

    /// Writes the record atomically: a reader sees the old file or the new one.
    pub fn save(&self, path: &Path) -> Result<(), ProfileError> {
        let err = |reason: String| ProfileError::InSitu { path: path.to_path_buf(), reason };
        let text = serde_json::to_string_pretty(self).map_err(|e| err(e.to_string()))?;
        placer_files::write_atomic(path, text).map_err(|e| err(e.io.to_string()))
    }

    /// The digest [`InSitu::plan_digest`] holds, of a plan file's bytes.
    pub fn digest(bytes: &[u8]) -> String {
        use sha2::{Digest, Sha256};
        Sha256::digest(bytes).iter().take(16).map(|b| format!("{b:02x}")).collect()
    }

    /// Whether `path` holds an in-situ record rather than a checkpoint: a checkpoint
    /// starts with its own magic line, a record with JSON.
    pub fn is_in_situ(path: &Path) -> bool {
        use std::io::Read;
        let mut first = [0u8; 64];
        let Ok(mut file) = std::fs::File::open(path) else { return false };
        let n = file.read(&mut first).unwrap_or(0);
        first[..n].iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> InSitu {
        InSitu {
            format: IN_SITU_FORMAT.into(),
            version: IN_SITU_VERSION,
            model_name: "toy-b1".into(),
            model_hash: "00".into(),
            host_fingerprint: "host".into(),
            pools: vec![PoolInfo { name: "dram".into(), kind: placer_pools::PoolKind::Dram, emulated_as: None }],
            plan: "ilp (sync) at a budget of 1 B".into(),
            plan_digest: InSitu::digest(b"{}"),
            steps: 3,
            kernels: vec![InSituKernel {
                step: 0,
                node: "conv1".into(),
                op: "conv2d".into(),
                config: vec![0, 0],
                median_ns: 1e5,
                mad_ns: 1e3,
                count: 3,
                beside_copy: false,
                charged_ns: 0.0,
            }],
            reference_ns: BTreeMap::from([("conv1".to_string(), 9e4)]),
            reference_again_ns: BTreeMap::new(),
        }
    }

    #[test]
    fn a_record_reads_back_as_written_and_damage_is_named() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("run.json");
        record().save(&path)?;
        assert!(InSitu::is_in_situ(&path));
        assert_eq!(InSitu::load(&path)?, record());
        let refused = |text: &str| {
            std::fs::write(&path, text).map_err(|e| e.to_string())?;
            match InSitu::load(&path) {
                Ok(_) => Err(format!("accepted: {text}")),
                Err(e) => Ok(e.to_string()),
            }
        };
        assert!(refused("not json")?.contains("not JSON"));
        assert!(refused(r#"{"format": "placer-profile"}"#)?.contains("not an in-situ record"));
        let mut bad = record();
        bad.kernels[0].config = vec![0, 1];
        let text = serde_json::to_string(&bad)?;
        assert!(refused(&text)?.contains("kernel conv1 (step 0) names a pool the record does not list"));
        // A checkpoint is not a record.
        std::fs::write(&path, b"placer-profile\n\x11\x00\x00\x00")?;
        assert!(!InSitu::is_in_situ(&path));
        Ok(())
    }
}
