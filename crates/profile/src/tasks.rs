//! What to measure: every node's memory configurations, minus what the rules remove,
//! deduplicated by kernel signature so identical kernels are measured once.

use crate::ProfileError;
use crate::record::{Mode, PinRule, PinRuleTarget};
pub use placer_exec::SplitMix64;
use placer_ir::ops::node_traffic;
use placer_ir::{Model, NodeId, Role, TensorId};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};

/// A [`PinRule`] applied to one model and host: its tensor and pool found by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    pub target: PinTarget,
    pub pool: u16,
    pub rule: PinRule,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinTarget {
    Role(Role),
    Tensor(TensorId),
}

impl Pin {
    /// `rule` on `model`, whose host's pools are named `pools`.
    pub fn resolve(rule: &PinRule, model: &Model, pools: &[String]) -> Result<Pin, ProfileError> {
        let usage = |reason: String| ProfileError::Usage { reason: format!("--pin {rule}: {reason}") };
        let pool = pools
            .iter()
            .position(|p| *p == rule.pool)
            .ok_or_else(|| usage(format!("unknown pool '{}'; pools: {}", rule.pool, pools.join(", "))))?
            as u16;
        let target = match &rule.target {
            PinRuleTarget::Role(r) => PinTarget::Role(*r),
            PinRuleTarget::Tensor(name) => PinTarget::Tensor(
                model.tensor_id(name).ok_or_else(|| usage(format!("the model has no tensor '{name}'")))?,
            ),
        };
        Ok(Pin { target, pool, rule: rule.clone() })
    }

    /// Parses `role=ROLE:POOL` or `tensor=NAME:POOL` and resolves it on `model`.
    pub fn parse(text: &str, model: &Model, pools: &[String]) -> Result<Pin, ProfileError> {
        let rule: PinRule =
            text.parse().map_err(|reason| ProfileError::Usage { reason: format!("--pin {text}: {reason}") })?;
        Pin::resolve(&rule, model, pools)
    }

    pub fn applies_to(&self, model: &Model, t: TensorId) -> bool {
        match self.target {
            PinTarget::Role(r) => model.tensor(t).role == r,
            PinTarget::Tensor(id) => id == t,
        }
    }
}

/// The pool choices of one operand.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Choice {
    Any,
    Fixed(u16),
    /// Wherever the operand at this index goes.
    SameAs(usize),
}

/// By default, nodes with more configurations than this get their free inputs grouped
/// (see `RuleCounts::grouped`).
pub const MAX_CONFIGS_PER_NODE: u128 = 256;

/// By default, an operand that moves at most this share of its kernel's compulsory
/// bytes stays in the default pool (see `RuleCounts::negligible`). Optane writes at a
/// sixth of DRAM's bandwidth (76.8 vs 12.5 GB/s, Yang et al., FAST 2020), so such an
/// operand adds at most about 0.5% to a kernel bound by DRAM bandwidth, a tenth of the
/// design's 5% tolerance. Batch-norm's scale, shift and statistics are 10^-5 of its
/// bytes at batch 32, yet they made its backward 256 configurations instead of 8.
pub const NEGLIGIBLE_SHARE: f64 = 1e-3;

/// Per operand of node `n` (`Node::operands` order), whether it moves at most `share`
/// of the node's compulsory bytes, so that its pool cannot change the kernel's time
/// measurably. An operand the kernel declares no traffic for is negligible at any
/// share, 0 included (0 bytes ≤ 0). Depends only on the node's signature.
pub fn negligible_operands(model: &Model, n: NodeId, share: f64) -> Vec<bool> {
    let traffic = node_traffic(model, n);
    let bytes = |t: &placer_ir::ops::Traffic| t.read + t.written;
    let total: u64 = traffic.iter().map(|(_, t)| bytes(t)).sum();
    traffic.iter().map(|(_, t)| bytes(t) as f64 <= share * total as f64).collect()
}

/// Marks an operand whose pool a lookup ignores.
pub const ANY_POOL: u16 = u16::MAX;

/// `config` of a kernel of `signature`, with the operands `masks` marks for that
/// signature ([`negligible_operands`]) set to [`ANY_POOL`]: the key a profile's time for
/// the kernel is found by, whatever pools those operands are in. Unchanged when `masks`
/// has no entry for the signature.
pub fn mask_negligible(masks: &HashMap<u64, Vec<bool>>, signature: u64, config: &[u16]) -> Vec<u16> {
    match masks.get(&signature) {
        Some(mask) => config.iter().zip(mask).map(|(&p, &ignore)| if ignore { ANY_POOL } else { p }).collect(),
        None => config.to_vec(),
    }
}

/// One kernel signature in one configuration: the unit that gets measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub signature: u64,
    /// Pool of each operand, in `Node::operands` order.
    pub config: Vec<u16>,
    /// Every node with this signature; any of them can be measured for all.
    pub instances: Vec<NodeId>,
}

/// How many configurations each rule removed, for the user to see.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RuleCounts {
    /// Σ N^k over nodes, counting an in-place tensor once as read and once as written
    /// (as a framework that gives in-place outputs their own tensor would).
    pub naive: u128,
    /// Removed because an in-place tensor's read and write share one location.
    pub in_place: u128,
    /// Removed by `--pin` rules.
    pub pinned: u128,
    /// Removed because the operand moves no more than a negligible share of the
    /// kernel's bytes ([`NEGLIGIBLE_SHARE`] by default; none at all, whatever the share):
    /// it stays in the default pool (or its pin) and its pool is immaterial to the time.
    pub negligible: u128,
    /// Removed by grouping: a node with more than `max_configs` (default
    /// [`MAX_CONFIGS_PER_NODE`])
    /// configurations (DenseNet's concatenations have 20+ inputs, their backward 20+
    /// outputs) gets its free inputs, and if that is not enough its free outputs, moved
    /// as one group each. A plan must then keep each group in one pool at that node.
    pub grouped: u128,
    /// Nodes whose inputs were grouped.
    pub grouped_nodes: Vec<String>,
    /// (node, config) pairs left after the rules.
    pub per_node: u128,
    /// Measurements left after identical kernels share one (signature + config).
    pub unique: usize,
    /// The most configurations any one node has: no plan can use fewer passes without
    /// sharing measurements between identical kernels.
    pub max_per_node: u128,
}

/// One kernel signature under one outcome of the rules: the space of configurations a
/// design is drawn from. A signature whose nodes were pinned differently has several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    pub signature: u64,
    /// Per operand (`Node::operands` order): free, fixed, or moving with another.
    pub choices: Vec<Choice>,
    /// Every node with this signature and these choices, in schedule order.
    pub instances: Vec<NodeId>,
}

impl Family {
    /// The operands that choose their pool freely (a group's leader stands for it).
    pub fn factors(&self) -> Vec<usize> {
        self.choices.iter().enumerate().filter(|(_, c)| **c == Choice::Any).map(|(i, _)| i).collect()
    }

    /// The configuration in which each factor sits in `values[f]`.
    pub fn config(&self, values: &[u16]) -> Vec<u16> {
        let mut config = Vec::with_capacity(self.choices.len());
        let mut next = values.iter();
        for choice in &self.choices {
            let pool = match choice {
                Choice::Any => next.next().copied().unwrap_or(0),
                Choice::Fixed(p) => *p,
                Choice::SameAs(i) => config[*i],
            };
            config.push(pool);
        }
        config
    }

    /// The factor values of `config` (the inverse of [`Family::config`]).
    pub fn values(&self, config: &[u16]) -> Vec<u16> {
        self.factors().iter().map(|&i| config[i]).collect()
    }
}

#[derive(Debug, Clone)]
pub struct TaskList {
    pub tasks: Vec<Task>,
    /// Every configuration space, one per (signature, choices), in signature order.
    pub families: Vec<Family>,
    pub counts: RuleCounts,
    /// Signature of every node, indexed by node id.
    pub signatures: Vec<u64>,
}

/// A digest of what makes two kernels interchangeable for timing: op, attributes, and
/// each operand's slot, shape and dtype.
pub fn signature(model: &Model, n: NodeId) -> u64 {
    let node = model.node(n);
    let mut h = Sha256::new();
    h.update(node.op.to_string().as_bytes());
    h.update(format!("{:?}", node.attrs).as_bytes());
    for (slot, ids) in [("in", &node.inputs), ("up", &node.updates), ("out", &node.outputs)] {
        for &t in ids {
            let tensor = model.tensor(t);
            h.update(format!("{slot}:{:?}:{}", tensor.shape, tensor.dtype).as_bytes());
        }
    }
    let digest = h.finalize();
    u64::from_le_bytes([digest[0], digest[1], digest[2], digest[3], digest[4], digest[5], digest[6], digest[7]])
}

/// The rules' settings that shape a configuration space.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rules {
    /// Nodes with more configurations than this get their operands grouped.
    pub max_configs: u128,
    /// Operands moving at most this share of their kernel's bytes stay where they are.
    pub negligible: f64,
}

impl Rules {
    /// The rules that shape `mode`'s configuration space.
    pub fn of(mode: &Mode) -> Rules {
        Rules { max_configs: u128::from(mode.max_configs), negligible: mode.negligible }
    }
}

impl Default for Rules {
    fn default() -> Self {
        Rules { max_configs: MAX_CONFIGS_PER_NODE, negligible: NEGLIGIBLE_SHARE }
    }
}

/// Every task for `pools` pools under `pins` and `rules`; pool 0 is the default pool.
pub fn enumerate(model: &Model, pools: u16, pins: &[Pin], rules: Rules) -> Result<TaskList, ProfileError> {
    let n = u128::from(pools);
    let mut counts = RuleCounts::default();
    let mut by_key: BTreeMap<(u64, Vec<u16>), Vec<NodeId>> = BTreeMap::new();
    let mut families: BTreeMap<(u64, Vec<Choice>), Vec<NodeId>> = BTreeMap::new();
    let signatures: Vec<u64> = (0..model.nodes().len()).map(|i| signature(model, NodeId(i as u32))).collect();
    for &id in model.schedule() {
        let node = model.node(id);
        let negligible = negligible_operands(model, id, rules.negligible);
        let operands = node.operands();
        counts.naive += n.saturating_pow((operands.len() + node.updates.len()) as u32);
        let all = n.saturating_pow(operands.len() as u32);
        counts.in_place += n.saturating_pow((operands.len() + node.updates.len()) as u32) - all;
        let mut choices: Vec<Choice> = Vec::with_capacity(operands.len());
        let (mut after_pins, mut after_negligible) = (1u128, 1u128);
        for (&t, &negligible) in operands.iter().zip(&negligible) {
            let pinned = pins.iter().rev().find(|p| p.applies_to(model, t));
            let choice = match pinned {
                Some(p) => Choice::Fixed(p.pool),
                None if negligible => Choice::Fixed(0),
                None => Choice::Any,
            };
            after_pins = after_pins.saturating_mul(if pinned.is_some() { 1 } else { n });
            after_negligible = after_negligible.saturating_mul(if choice == Choice::Any { n } else { 1 });
            choices.push(choice);
        }
        counts.pinned += all - after_pins;
        counts.negligible += after_pins - after_negligible;
        let mut configs = after_negligible;
        // Inputs first, then outputs (a concatenation's backward splits one gradient
        // into many).
        let inputs = 0..node.inputs.len().min(choices.len());
        let outputs = choices.len().saturating_sub(node.outputs.len())..choices.len();
        let mut grouped_here = false;
        for range in [inputs, outputs] {
            if configs <= rules.max_configs {
                break;
            }
            let free: Vec<usize> = range.filter(|&i| choices[i] == Choice::Any).collect();
            if let Some((&leader, rest)) = free.split_first() {
                for &i in rest {
                    choices[i] = Choice::SameAs(leader);
                }
                let grouped = configs / n.saturating_pow(rest.len() as u32);
                counts.grouped += configs - grouped;
                configs = grouped;
                grouped_here = true;
            }
        }
        if grouped_here {
            counts.grouped_nodes.push(node.name.clone());
        }
        counts.per_node += configs;
        counts.max_per_node = counts.max_per_node.max(configs);
        if configs > 1 << 20 {
            return Err(ProfileError::Usage {
                reason: format!(
                    "node '{}' has {configs} configurations over {pools} pools even with its inputs and outputs \
                     grouped; pin some tensors (--pin)",
                    node.name
                ),
            });
        }
        for config in expand(&choices, pools) {
            by_key.entry((signatures[id.index()], config)).or_default().push(id);
        }
        families.entry((signatures[id.index()], choices)).or_default().push(id);
    }
    let tasks: Vec<Task> = by_key
        .into_iter()
        .map(|((signature, config), mut instances)| {
            instances.dedup();
            Task { signature, config, instances }
        })
        .collect();
    counts.unique = tasks.len();
    let families = families
        .into_iter()
        .map(|((signature, choices), instances)| Family { signature, choices, instances })
        .collect();
    Ok(TaskList { tasks, families, counts, signatures })
}

/// Every assignment allowed by `choices`, in lexicographic order.
pub(crate) fn expand(choices: &[Choice], pools: u16) -> Vec<Vec<u16>> {
    let mut configs = vec![Vec::with_capacity(choices.len())];
    for choice in choices {
        configs = configs
            .into_iter()
            .flat_map(|prefix: Vec<u16>| {
                let options: Vec<u16> = match choice {
                    Choice::Any => (0..pools).collect(),
                    Choice::Fixed(p) => vec![*p],
                    Choice::SameAs(i) => vec![prefix[*i]],
                };
                options.into_iter().map(move |o| {
                    let mut c = prefix.clone();
                    c.push(o);
                    c
                })
            })
            .collect();
    }
    configs
}

/// A deterministic sample of `k` tasks (partial Fisher-Yates with [`SplitMix64`]).
pub fn sample(tasks: Vec<Task>, k: usize, seed: u64) -> Vec<Task> {
    if k >= tasks.len() {
        return tasks;
    }
    let mut tasks = tasks;
    let mut rng = SplitMix64::new(seed);
    for i in 0..k {
        let j = i + rng.below((tasks.len() - i) as u64) as usize;
        tasks.swap(i, j);
    }
    tasks.truncate(k);
    tasks.sort_by(|a, b| (a.signature, &a.config).cmp(&(b.signature, &b.config)));
    tasks
}
