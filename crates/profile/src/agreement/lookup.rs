//! The profile's times looked up as the solver looks them up: by a kernel's signature
//! and its pools, with the operands the profile never moved ignored, for the in-situ
//! comparison and its all-DRAM reference.

use super::Anchor;
use crate::ProfileError;
use crate::record::Profile;
use crate::tasks::{mask_negligible, negligible_operands, signature};
use placer_ir::{Model, NodeId};
use serde::Serialize;
use std::collections::HashMap;

/// Where the profile's time for a kernel's configuration came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfileTime {
    Measured,
    Predicted,
}

/// The profile's times by (signature, configuration), with the operands it never moved
/// masked as the solver masks them.
pub(super) struct Lookup {
    /// Per node of the model: its signature.
    signatures: Vec<u64>,
    /// Per signature, the operands the profile never moved.
    masks: HashMap<u64, Vec<bool>>,
    measured: HashMap<(u64, Vec<u16>), (f64, f64, u32)>,
    predicted: HashMap<(u64, Vec<u16>), f64>,
}

impl Lookup {
    pub(super) fn new(model: &Model, profile: &Profile) -> Result<Lookup, ProfileError> {
        let negligible = profile.header.mode.negligible;
        let signatures: Vec<u64> = (0..model.nodes().len()).map(|i| signature(model, NodeId(i as u32))).collect();
        let mut masks = HashMap::new();
        for (i, &s) in signatures.iter().enumerate() {
            masks.entry(s).or_insert_with(|| negligible_operands(model, NodeId(i as u32), negligible));
        }
        let key = |s: u64, c: &[u16]| (s, mask_negligible(&masks, s, c));
        // Kernels timed alone are looked up on the step's level, as the solver takes them.
        let anchor = Anchor::of(model, profile)?;
        let measured = profile
            .merged()
            .iter()
            .map(|m| (key(m.signature, &m.config), (anchor.apply(m.signature, m.median_ns), m.mad_ns, m.count)))
            .collect();
        let predicted = profile
            .predictions()
            .iter()
            .map(|p| (key(p.signature, &p.config), anchor.apply(p.signature, p.predicted_ns)))
            .collect();
        Ok(Lookup { signatures, masks, measured, predicted })
    }

    /// The profile's time for `node` in `config`: where it came from, median, MAD and
    /// samples (0 for a prediction).
    pub(super) fn time(&self, node: NodeId, config: &[u16]) -> Option<(ProfileTime, f64, f64, u32)> {
        let s = *self.signatures.get(node.index())?;
        let key = (s, mask_negligible(&self.masks, s, config));
        if let Some(&(ns, mad, count)) = self.measured.get(&key) {
            return Some((ProfileTime::Measured, ns, mad, count));
        }
        self.predicted.get(&key).map(|&ns| (ProfileTime::Predicted, ns, 0.0, 0))
    }
}
