//! The model in two forms: a declaration (names, as written in a file or by a builder)
//! and a validated [`Model`] (resolved ids, derived schedule), which only
//! [`crate::validate`] can make.

use crate::ops::{Cost, Op, Operand, cost};
use crate::types::{Attrs, DType, NodeId, Role, TensorId};
use std::collections::{BTreeMap, HashMap};

/// Current version of the model.json format (docs/model-format.md).
pub const FORMAT_VERSION: u64 = 1;
/// The value of the `format` field that identifies a placer model file.
pub const FORMAT_NAME: &str = "placer-model";

/// A tensor as declared, before validation.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorDecl {
    pub name: String,
    pub shape: Vec<u64>,
    pub dtype: DType,
    pub role: Role,
}

/// A node as declared, before validation. Operands are tensor names.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDecl {
    pub name: String,
    pub op: Op,
    pub attrs: Attrs,
    pub inputs: Vec<String>,
    /// Tensors read and written in place; see docs/model-format.md for the ordering rule.
    pub updates: Vec<String>,
    pub outputs: Vec<String>,
}

/// A whole model as declared, before validation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelDecl {
    pub name: String,
    /// Free-form provenance (generator, batch size...). Not part of the content hash.
    pub meta: BTreeMap<String, String>,
    pub tensors: Vec<TensorDecl>,
    pub nodes: Vec<NodeDecl>,
    /// An explicit execution order; when absent a topological order is derived.
    pub schedule: Option<Vec<String>>,
}

/// A validated tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub name: String,
    pub shape: Vec<u64>,
    pub dtype: DType,
    pub role: Role,
    /// Size in bytes; validation guarantees it neither overflows nor is zero.
    pub bytes: u64,
}

impl Tensor {
    pub fn numel(&self) -> u64 {
        self.shape.iter().product()
    }

    pub fn operand(&self) -> Operand<'_> {
        Operand { shape: &self.shape, dtype: self.dtype }
    }
}

/// Which part of a training step a node belongs to, inferred from what it touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    Forward,
    Backward,
    Update,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            Phase::Update => "update",
        }
    }
}

/// A validated node. Operands are tensor ids.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub name: String,
    pub op: Op,
    pub attrs: Attrs,
    pub inputs: Vec<TensorId>,
    pub updates: Vec<TensorId>,
    pub outputs: Vec<TensorId>,
}

impl Node {
    /// Every tensor the node touches, each once, in the order inputs, updates, outputs.
    /// These are the operands whose memory pool a configuration chooses.
    pub fn operands(&self) -> Vec<TensorId> {
        let mut seen = Vec::with_capacity(self.inputs.len() + self.updates.len() + self.outputs.len());
        for &t in self.inputs.iter().chain(&self.updates).chain(&self.outputs) {
            if !seen.contains(&t) {
                seen.push(t);
            }
        }
        seen
    }
}

/// A model that passed validation: names resolved, shapes checked, schedule fixed.
#[derive(Debug, Clone)]
pub struct Model {
    pub(crate) name: String,
    pub(crate) meta: BTreeMap<String, String>,
    pub(crate) tensors: Vec<Tensor>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) schedule: Vec<NodeId>,
    pub(crate) schedule_given: bool,
    pub(crate) producer: Vec<Option<NodeId>>,
    pub(crate) tensor_ids: HashMap<String, TensorId>,
    pub(crate) node_ids: HashMap<String, NodeId>,
}

impl Model {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn meta(&self) -> &BTreeMap<String, String> {
        &self.meta
    }

    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn tensor(&self, id: TensorId) -> &Tensor {
        &self.tensors[id.index()]
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    pub fn tensor_id(&self, name: &str) -> Option<TensorId> {
        self.tensor_ids.get(name).copied()
    }

    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.node_ids.get(name).copied()
    }

    /// The execution order: every node exactly once, every dependency respected.
    pub fn schedule(&self) -> &[NodeId] {
        &self.schedule
    }

    /// Whether the schedule came from the file (true) or was derived (false).
    pub fn schedule_given(&self) -> bool {
        self.schedule_given
    }

    /// The node that produces a tensor; `None` for inputs, weights and optimizer state.
    pub fn producer(&self, id: TensorId) -> Option<NodeId> {
        self.producer[id.index()]
    }

    pub fn phase(&self, id: NodeId) -> Phase {
        let node = self.node(id);
        if !node.updates.is_empty() {
            Phase::Update
        } else if node.outputs.iter().any(|&t| matches!(self.tensor(t).role, Role::Gradient | Role::WeightGradient)) {
            Phase::Backward
        } else {
            Phase::Forward
        }
    }

    pub fn cost(&self, id: NodeId) -> Cost {
        let node = self.node(id);
        let operands =
            |ids: &[TensorId]| -> Vec<Operand<'_>> { ids.iter().map(|&t| self.tensor(t).operand()).collect() };
        cost(node.op, &node.attrs, &operands(&node.inputs), &operands(&node.outputs))
    }

    /// Turns the model back into a declaration (the inverse of validation).
    pub fn to_decl(&self) -> ModelDecl {
        let name_of = |ids: &[TensorId]| ids.iter().map(|&t| self.tensor(t).name.clone()).collect();
        ModelDecl {
            name: self.name.clone(),
            meta: self.meta.clone(),
            tensors: self
                .tensors
                .iter()
                .map(|t| TensorDecl { name: t.name.clone(), shape: t.shape.clone(), dtype: t.dtype, role: t.role })
                .collect(),
            nodes: self
                .nodes
                .iter()
                .map(|n| NodeDecl {
                    name: n.name.clone(),
                    op: n.op,
                    attrs: n.attrs.clone(),
                    inputs: name_of(&n.inputs),
                    updates: name_of(&n.updates),
                    outputs: name_of(&n.outputs),
                })
                .collect(),
            schedule: self.schedule_given.then(|| self.schedule.iter().map(|&n| self.node(n).name.clone()).collect()),
        }
    }
}
