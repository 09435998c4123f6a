//! Kernels timed alone against the same kernels in a whole step: the check a profile of
//! isolated kernels ([`Steps::Isolated`]) carries.
//!
//! An isolated profile times each kernel with only its operands allocated, put before
//! every repetition in the cache state a step leaves them in. A training step runs it
//! right after its producers, amid the step's other tensors and the arena's reuse of
//! freed bytes. The reference pass times every kernel in such whole steps, all in the
//! base placement, so each kernel's all-DRAM configuration has both times: alone, and
//! in the step. Their
//! ratio says whether the kernel's time carries over from one context to the other.
//! The ratio common to all kernels is the host's pace between the reference pass and
//! the passes (a shared host's speed moves by tens of percent in minutes), plus whatever
//! isolation does to every kernel alike; what one kind of kernel shows beyond it is the
//! context's own effect on that kind.

use super::percent;
use crate::ProfileError;
use crate::pass_run::base_placement;
use crate::record::{Profile, Steps};
use crate::tasks::{Pin, signature};
use placer_exec::Stats;
use placer_ir::{Model, NodeId};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Kernels at least this long are judged: shorter ones are mostly launch and timer.
pub const ISOLATION_MIN_NS: f64 = 1_000_000.0;
/// The agreement asked of a kernel alone and in the step.
pub const ISOLATION_TOLERANCE: f64 = 0.05;

/// Whether a ratio, alone over in the step, is within [`ISOLATION_TOLERANCE`] of 1.
fn agrees(ratio: f64) -> bool {
    (ratio - 1.0).abs() <= ISOLATION_TOLERANCE
}

/// Per signature, the median of its nodes' times in the reference pass's whole steps,
/// and how many nodes that is. ResNet-200 repeats its blocks tens of times, and one
/// node's few whole steps differ from its twins' by as much as contexts do.
fn in_step(model: &Model, profile: &Profile) -> HashMap<u64, (f64, usize)> {
    let mut twins: HashMap<u64, Vec<f64>> = HashMap::new();
    for (i, &ns) in profile.reference_ns.iter().enumerate().take(model.nodes().len()) {
        if ns > 0.0 {
            twins.entry(signature(model, NodeId(i as u32))).or_default().push(ns);
        }
    }
    twins.into_iter().filter_map(|(s, v)| Some((s, (Stats::of(&v)?.median, v.len())))).collect()
}

/// One kernel's all-DRAM configuration, alone and in the step (the median over the
/// reference pass's nodes of its signature).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IsolationRow {
    pub signature: u64,
    pub node: String,
    pub op: String,
    pub alone_ns: f64,
    pub in_step_ns: f64,
    /// The reference pass's nodes of this signature, whose median `in_step_ns` is.
    pub twins: usize,
}

impl IsolationRow {
    pub fn ratio(&self) -> f64 {
        self.alone_ns / self.in_step_ns
    }
}

/// Per op class: kernels judged, those within the tolerance once the common pace is
/// taken out, and the class's median ratio.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IsolationClass {
    pub op: String,
    pub kernels: usize,
    pub within: usize,
    pub median_ratio: f64,
}

/// Every kernel of an isolated profile whose all-DRAM configuration was measured, alone
/// against its time in the reference pass's whole steps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IsolationCheck {
    pub rows: Vec<IsolationRow>,
}

impl IsolationCheck {
    /// The check of `profile` (a profile of `model`); none unless its kernels were
    /// timed alone and its reference pass is done.
    pub fn of(model: &Model, profile: &Profile) -> Result<Option<IsolationCheck>, ProfileError> {
        if profile.header.protocol.steps != Steps::Isolated || profile.reference_ns.is_empty() {
            return Ok(None);
        }
        let names: Vec<String> = profile.header.pools.iter().map(|p| p.name.clone()).collect();
        let pins = profile.header.pins.iter().map(|r| Pin::resolve(r, model, &names)).collect::<Result<Vec<_>, _>>()?;
        let base = base_placement(model, &pins);
        let in_step = in_step(model, profile);
        let rows = profile
            .merged()
            .into_iter()
            .filter_map(|m| {
                let n = model.node_id(&m.node)?;
                let (in_step, twins) = *in_step.get(&m.signature)?;
                let operands = model.node(n).operands();
                let all_base = operands.len() == m.config.len()
                    && operands.iter().zip(&m.config).all(|(t, &p)| base.0[t.index()].0 == p);
                (all_base && in_step > 0.0).then(|| IsolationRow {
                    signature: m.signature,
                    node: m.node.clone(),
                    op: m.op.clone(),
                    alone_ns: m.median_ns,
                    in_step_ns: in_step,
                    twins,
                })
            })
            .collect();
        Ok(Some(IsolationCheck { rows }))
    }

    /// Rows whose in-step time is at least [`ISOLATION_MIN_NS`].
    pub fn judged(&self) -> impl Iterator<Item = &IsolationRow> {
        self.rows.iter().filter(|r| r.in_step_ns >= ISOLATION_MIN_NS)
    }

    /// The median ratio, alone over in the step, of the judged kernels (1 when none).
    pub fn pace(&self) -> f64 {
        let ratios: Vec<f64> = self.judged().map(IsolationRow::ratio).collect();
        Stats::of(&ratios).map_or(1.0, |s| s.median)
    }

    /// (within the tolerance as measured, within it once divided by the pace, judged).
    pub fn within(&self) -> (usize, usize, usize) {
        let pace = self.pace();
        let judged: Vec<f64> = self.judged().map(IsolationRow::ratio).collect();
        let raw = judged.iter().filter(|&&r| agrees(r)).count();
        let paced = judged.iter().filter(|&&r| agrees(r / pace)).count();
        (raw, paced, judged.len())
    }

    /// The judged kernels by op class, most kernels first; within the tolerance counts
    /// them once divided by the pace.
    pub fn classes(&self) -> Vec<IsolationClass> {
        let pace = self.pace();
        let mut by_op: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for r in self.judged() {
            by_op.entry(&r.op).or_default().push(r.ratio());
        }
        let mut classes: Vec<IsolationClass> = by_op
            .into_iter()
            .map(|(op, ratios)| IsolationClass {
                op: op.to_string(),
                kernels: ratios.len(),
                within: ratios.iter().filter(|&&r| agrees(r / pace)).count(),
                median_ratio: Stats::of(&ratios).map_or(1.0, |s| s.median),
            })
            .collect();
        classes.sort_by(|a, b| b.kernels.cmp(&a.kernels).then_with(|| a.op.cmp(&b.op)));
        classes
    }

    /// One line: how many judged kernels agree, raw and paced.
    pub fn summary(&self) -> String {
        let (raw, paced, judged) = self.within();
        if judged == 0 {
            return format!(
                "no all-DRAM kernel of at least {:.0} ms measured alone yet ({} shorter)",
                ISOLATION_MIN_NS / 1e6,
                self.rows.len()
            );
        }
        format!(
            "{judged} all-DRAM kernels of at least {:.0} ms: {} within ±{:.0}% of their time in whole steps as \
             measured, {} once divided by the common ratio {:.3} (the host's pace between the reference pass and \
             the passes, and what isolation does to every kernel alike)",
            ISOLATION_MIN_NS / 1e6,
            percent(raw as f64 / judged as f64),
            100.0 * ISOLATION_TOLERANCE,
            percent(paced as f64 / judged as f64),
            self.pace()
        )
    }
}

/// What the solver takes from a profile of kernels alone: each signature's times moved
/// by what its all-DRAM configuration took in the step beyond what it took alone.
///
/// Alone, a kernel's time in one configuration against another is what its operands'
/// pools change, with nothing else moving; in the step, its all-DRAM time carries what
/// isolation cannot show (its neighbours' data in the caches and on the memory bus, the
/// arena's reuse of freed bytes). So every configuration keeps its difference from the
/// all-DRAM one as measured alone, on the level the step measured. The step's level
/// comes from the reference pass, one moment; it holds the host's pace of that moment
/// as a live profile's passes do theirs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Anchor {
    /// Per signature: (alone, in the step), all-DRAM.
    levels: HashMap<u64, (f64, f64)>,
}

impl Anchor {
    /// The anchor of `profile` (of `model`): empty unless its kernels were timed alone.
    pub fn of(model: &Model, profile: &Profile) -> Result<Anchor, ProfileError> {
        let Some(check) = IsolationCheck::of(model, profile)? else {
            return Ok(Anchor::default());
        };
        let levels = check.rows.iter().map(|r| (r.signature, (r.alone_ns, r.in_step_ns))).collect();
        Ok(Anchor { levels })
    }

    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// `ns`, a time of `signature` alone, on the step's level: moved by the all-DRAM
    /// difference, or scaled by the all-DRAM ratio where moving would leave less than
    /// that ratio of it (a configuration measured faster than all-DRAM, on a kernel far
    /// slower alone than in the step).
    pub fn apply(&self, signature: u64, ns: f64) -> f64 {
        match self.levels.get(&signature) {
            Some(&(alone, step)) if alone > 0.0 => (ns + step - alone).max(ns * step / alone),
            _ => ns,
        }
    }
}
