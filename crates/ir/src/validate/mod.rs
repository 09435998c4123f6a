//! [`ModelDecl`] -> [`Model`]: every check a model must pass, all problems reported.
//!
//! This file checks tensors, names, roles and shapes; `schedule` orders the nodes (the
//! dependencies between them, cycles, and a given or derived schedule).

mod schedule;

use crate::decode::{Damaged, SourceMap};
use crate::diag::{DiagnosticKind as K, Diagnostics, Location, Subject};
use crate::model::{Model, ModelDecl, Node, Tensor};
use crate::ops::{AttrKind, Operand, check_shapes};
use crate::types::{AttrValue, NodeId, TensorId, shape_str};
use schedule::{dependencies, derived_schedule};
use std::collections::{HashMap, HashSet};

/// Tensors with more dimensions than this are refused as absurd.
pub const MAX_RANK: usize = 8;
/// Tensors larger than this (1 PiB) are refused as absurd: no host has such a tier.
pub const MAX_TENSOR_BYTES: u64 = 1 << 50;

/// Validates a model built in memory (no source positions).
pub fn validate(decl: ModelDecl) -> Result<Model, Diagnostics> {
    validate_with(decl, None, &Damaged::default(), Diagnostics::default())
}

pub(crate) fn validate_with(
    decl: ModelDecl,
    spans: Option<&SourceMap<'_>>,
    damaged: &Damaged,
    diags: Diagnostics,
) -> Result<Model, Diagnostics> {
    let mut v = Validator { spans, damaged, diags, bad_attrs: HashSet::new() };
    let model = v.run(decl);
    v.diags.sort();
    match model {
        Some(model) if v.diags.is_empty() => Ok(model),
        _ => Err(v.diags),
    }
}

struct Validator<'s, 'a> {
    spans: Option<&'s SourceMap<'a>>,
    damaged: &'s Damaged,
    diags: Diagnostics,
    /// Nodes whose attributes already failed: their shape check would only repeat it.
    bad_attrs: HashSet<usize>,
}

impl Validator<'_, '_> {
    fn at(&self, pos: impl Fn(&SourceMap<'_>) -> Option<usize>) -> Option<Location> {
        self.spans.and_then(|s| pos(s).map(|p| s.locate(p)))
    }

    fn tensor_loc(&self, i: usize, shape: bool) -> Option<Location> {
        self.at(|s| s.tensors.get(i).map(|t| if shape { t.shape } else { t.name }))
    }

    fn node_loc(&self, i: usize) -> Option<Location> {
        self.at(|s| s.nodes.get(i).map(|n| n.name))
    }

    fn run(&mut self, decl: ModelDecl) -> Option<Model> {
        if decl.nodes.is_empty() {
            self.diags.push(
                K::MissingField,
                None,
                Subject::Model,
                "the model has no nodes; a training step needs at least one".to_string(),
            );
        }
        let tensors = self.tensors(&decl);
        let tensor_ids = self.names(decl.tensors.iter().map(|t| t.name.as_str()), true);
        let node_ids = self.names(decl.nodes.iter().map(|n| n.name.as_str()), false);
        let nodes = self.resolve_nodes(&decl, &tensor_ids);
        let producer = self.producers(&decl, &tensor_ids, &tensors);
        self.roles(&decl, &tensor_ids, &tensors, &producer);
        self.shapes(&decl, &tensors, &nodes);
        let deps = dependencies(&nodes, &producer);
        let acyclic = self.cycles(&decl, nodes.len(), &deps);
        let (schedule, schedule_given) = match &decl.schedule {
            Some(order) => (self.given_schedule(order, &node_ids, &decl, &deps)?, true),
            None if acyclic => {
                let order = derived_schedule(nodes.len(), &deps);
                // Kahn's algorithm leaves out exactly the nodes on or behind a cycle, and
                // `cycles` found none; a short order would silently drop nodes.
                if order.len() != nodes.len() {
                    self.diags.push(
                        K::Cycle,
                        None,
                        Subject::Model,
                        "internal error: the derived schedule misses nodes".to_string(),
                    );
                    return None;
                }
                (order, false)
            }
            None => return None,
        };
        let nodes: Option<Vec<Node>> = nodes.into_iter().collect();
        Some(Model {
            name: decl.name,
            meta: decl.meta,
            tensors,
            nodes: nodes?,
            schedule,
            schedule_given,
            producer,
            tensor_ids: tensor_ids.into_iter().map(|(k, v)| (k.to_string(), TensorId(v as u32))).collect(),
            node_ids: node_ids.into_iter().map(|(k, v)| (k.to_string(), NodeId(v as u32))).collect(),
        })
    }

    fn tensors(&mut self, decl: &ModelDecl) -> Vec<Tensor> {
        decl.tensors
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let bytes = if self.damaged.tensors.contains(&i) {
                    0
                } else {
                    self.tensor_bytes(i, &t.name, &t.shape, t.dtype.size_bytes())
                };
                Tensor { name: t.name.clone(), shape: t.shape.clone(), dtype: t.dtype, role: t.role, bytes }
            })
            .collect()
    }

    fn tensor_bytes(&mut self, i: usize, name: &str, shape: &[u64], elem: u64) -> u64 {
        let subject = Subject::Tensor(name.to_string());
        let loc = self.tensor_loc(i, true);
        if shape.len() > MAX_RANK {
            self.diags.push(
                K::Size,
                loc,
                subject,
                format!("shape {} has {} dimensions; at most {MAX_RANK} are supported", shape_str(shape), shape.len()),
            );
            return 0;
        }
        if shape.contains(&0) {
            self.diags.push(K::Size, loc, subject, format!("shape {} has a zero dimension", shape_str(shape)));
            return 0;
        }
        let bytes = shape.iter().try_fold(elem, |acc, &d| acc.checked_mul(d));
        match bytes {
            Some(b) if b <= MAX_TENSOR_BYTES => b,
            _ => {
                self.diags.push(
                    K::Size,
                    loc,
                    subject,
                    format!("shape {} is absurdly large (over 1 PiB)", shape_str(shape)),
                );
                0
            }
        }
    }

    /// Maps names to indices, reporting empty and duplicate names.
    fn names<'n>(&mut self, names: impl Iterator<Item = &'n str>, tensors: bool) -> HashMap<&'n str, usize> {
        let mut ids = HashMap::new();
        for (i, name) in names.enumerate() {
            let (what, loc, subject) = if tensors {
                ("tensor", self.tensor_loc(i, false), Subject::Tensor(name.to_string()))
            } else {
                ("node", self.node_loc(i), Subject::Node(name.to_string()))
            };
            let damaged = if tensors { &self.damaged.tensors } else { &self.damaged.nodes };
            if name.is_empty() {
                if !damaged.contains(&i) {
                    self.diags.push(K::BadValue, loc, Subject::Model, format!("{what} #{i} has an empty name"));
                }
                continue;
            }
            if let Some(first) = ids.insert(name, i) {
                ids.insert(name, first);
                self.diags.push(
                    K::DuplicateName,
                    loc,
                    subject,
                    format!("{what} name is used twice (first by {what} #{first})"),
                );
            }
        }
        ids
    }

    /// Resolves operand names; a node with an unknown operand resolves to `None`.
    fn resolve_nodes(&mut self, decl: &ModelDecl, ids: &HashMap<&str, usize>) -> Vec<Option<Node>> {
        decl.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let subject = Subject::Node(n.name.clone());
                let mut ok = true;
                let mut resolve =
                    |list: &[String], pick: fn(&crate::decode::NodeSpans) -> &Vec<usize>, this: &mut Self| {
                        list.iter()
                            .enumerate()
                            .filter_map(|(k, name)| match ids.get(name.as_str()) {
                                Some(&t) => Some(TensorId(t as u32)),
                                None => {
                                    let loc = this.at(|s| s.nodes.get(i).and_then(|sp| pick(sp).get(k).copied()));
                                    this.diags.push(
                                        K::UnknownName,
                                        loc,
                                        subject.clone(),
                                        format!("uses tensor '{name}', which is not declared in \"tensors\""),
                                    );
                                    ok = false;
                                    None
                                }
                            })
                            .collect::<Vec<_>>()
                    };
                let inputs = resolve(&n.inputs, |s| &s.inputs, self);
                let updates = resolve(&n.updates, |s| &s.updates, self);
                let outputs = resolve(&n.outputs, |s| &s.outputs, self);
                if !self.damaged.nodes.contains(&i) {
                    self.signature(i, n, &subject);
                }
                ok.then(|| Node { name: n.name.clone(), op: n.op, attrs: n.attrs.clone(), inputs, updates, outputs })
            })
            .collect()
    }

    /// Operand counts and attributes against the op's signature.
    fn signature(&mut self, i: usize, n: &crate::model::NodeDecl, subject: &Subject) {
        let sig = n.op.signature();
        let loc = self.at(|s| s.nodes.get(i).map(|sp| sp.op));
        for (what, count, arity) in [
            ("inputs", n.inputs.len(), sig.inputs),
            ("outputs", n.outputs.len(), sig.outputs),
            ("updates", n.updates.len(), crate::ops::Arity::Exactly(sig.updates)),
        ] {
            if !arity.accepts(count) {
                self.diags.push(
                    K::Arity,
                    loc,
                    subject.clone(),
                    format!("op {} takes {arity} {what}, got {count}", n.op),
                );
            }
        }
        // Everything reported from here on is about attributes.
        let before_attrs = self.diags.len();
        for (name, value) in &n.attrs {
            let attr_loc = self.at(|s| s.nodes.get(i).and_then(|sp| sp.attrs.get(name).copied()));
            let Some(spec) = sig.attrs.iter().find(|a| a.name == name) else {
                let known: Vec<&str> = sig.attrs.iter().map(|a| a.name).collect();
                let expected = if known.is_empty() { "none".to_string() } else { known.join(", ") };
                self.diags.push(
                    K::Attribute,
                    attr_loc,
                    subject.clone(),
                    format!("op {} has no attribute '{name}' (expected: {expected})", n.op),
                );
                continue;
            };
            let fits = match (spec.kind, value) {
                (AttrKind::Int, AttrValue::Int(_))
                | (AttrKind::Float, AttrValue::Float(_) | AttrValue::Int(_))
                | (AttrKind::Bool, AttrValue::Bool(_))
                | (AttrKind::Ints(None), AttrValue::Ints(_)) => true,
                (AttrKind::Ints(Some(len)), AttrValue::Ints(v)) => v.len() == len,
                _ => false,
            };
            if !fits {
                let wanted = match spec.kind {
                    AttrKind::Int => "an integer".to_string(),
                    AttrKind::Float => "a number".to_string(),
                    AttrKind::Bool => "a boolean".to_string(),
                    AttrKind::Ints(Some(len)) => format!("a list of {len} integers"),
                    AttrKind::Ints(None) => "a list of integers".to_string(),
                };
                self.diags.push(
                    K::Attribute,
                    attr_loc,
                    subject.clone(),
                    format!("attribute '{name}' must be {wanted}, got {}", value.kind()),
                );
            }
        }
        for spec in sig.attrs.iter().filter(|a| a.required && !n.attrs.contains_key(a.name)) {
            self.diags.push(K::Attribute, loc, subject.clone(), format!("op {} needs attribute '{}'", n.op, spec.name));
        }
        if self.diags.len() > before_attrs {
            self.bad_attrs.insert(i);
        }
    }

    /// Works on the declared names rather than on `nodes`, so that a node left out of
    /// `nodes` for an unknown operand (already reported) still counts as the producer of
    /// the outputs it does declare, and its other problems are still found.
    fn producers(&mut self, decl: &ModelDecl, ids: &HashMap<&str, usize>, tensors: &[Tensor]) -> Vec<Option<NodeId>> {
        let mut producer: Vec<Option<NodeId>> = vec![None; tensors.len()];
        for (i, node) in decl.nodes.iter().enumerate() {
            let subject = Subject::Node(node.name.clone());
            for (k, name) in node.outputs.iter().enumerate() {
                let Some(&t) = ids.get(name.as_str()) else { continue };
                let loc = self.at(|s| s.nodes.get(i).and_then(|sp| sp.outputs.get(k).copied()));
                if let Some(first) = producer[t] {
                    let first_name = &decl.nodes[first.index()].name;
                    self.diags.push(
                        K::ProducedTwice,
                        loc,
                        subject.clone(),
                        format!("produces tensor '{name}', which node '{first_name}' already produces"),
                    );
                    continue;
                }
                producer[t] = Some(NodeId(i as u32));
                if node.inputs.contains(name) || node.updates.contains(name) {
                    self.diags.push(
                        K::Cycle,
                        loc,
                        subject.clone(),
                        format!("reads tensor '{name}', which it also produces"),
                    );
                }
            }
            for (k, name) in node.updates.iter().enumerate() {
                if node.updates[..k].contains(name) {
                    let loc = self.at(|s| s.nodes.get(i).and_then(|sp| sp.updates.get(k).copied()));
                    self.diags.push(
                        K::Arity,
                        loc,
                        subject.clone(),
                        format!("lists tensor '{name}' twice in \"updates\""),
                    );
                }
                if ids.contains_key(name.as_str()) && node.inputs.contains(name) {
                    let loc = self.at(|s| s.nodes.get(i).and_then(|sp| sp.updates.get(k).copied()));
                    self.diags.push(
                        K::Arity,
                        loc,
                        subject.clone(),
                        format!("lists tensor '{name}' both as an input and as an update; an update is already read"),
                    );
                }
            }
        }
        producer
    }

    fn roles(&mut self, decl: &ModelDecl, ids: &HashMap<&str, usize>, tensors: &[Tensor], producer: &[Option<NodeId>]) {
        // By name, so that the uses by a node with an unknown operand (already reported,
        // and left out of `nodes`) still count.
        let mut used = vec![false; tensors.len()];
        for n in &decl.nodes {
            for name in n.inputs.iter().chain(&n.updates) {
                if let Some(&t) = ids.get(name.as_str()) {
                    used[t] = true;
                }
            }
        }
        for (i, t) in tensors.iter().enumerate() {
            // A second declaration of a name (already reported) is never referenced:
            // every use resolves to the first.
            if self.damaged.tensors.contains(&i) || ids.get(t.name.as_str()) != Some(&i) {
                continue;
            }
            let subject = Subject::Tensor(t.name.clone());
            let loc = self.tensor_loc(i, false);
            match (t.role.is_external(), producer[i]) {
                (true, Some(p)) => self.diags.push(
                    K::Role,
                    loc,
                    subject,
                    format!(
                        "has role {} but node '{}' produces it; inputs, weights and optimizer state exist before the step (change them in place with \"updates\")",
                        t.role,
                        decl.nodes[p.index()].name
                    ),
                ),
                // A node that failed to decode may well be the missing producer: say
                // nothing rather than guess.
                (false, None) if !self.damaged.nodes.is_empty() => {}
                (false, None) if used[i] => self.diags.push(
                    K::NeverProduced,
                    loc,
                    subject,
                    format!("is used but never produced (role {} needs a producing node)", t.role),
                ),
                (false, None) => self.diags.push(
                    K::NeverProduced,
                    loc,
                    subject,
                    format!("is declared with role {} but no node produces or uses it", t.role),
                ),
                _ => {}
            }
        }
    }

    fn shapes(&mut self, decl: &ModelDecl, tensors: &[Tensor], nodes: &[Option<Node>]) {
        for (i, node) in nodes.iter().enumerate() {
            let Some(node) = node else { continue };
            if self.damaged.nodes.contains(&i) {
                continue;
            }
            let sig = node.op.signature();
            let arity_ok = sig.inputs.accepts(node.inputs.len())
                && sig.outputs.accepts(node.outputs.len())
                && node.updates.len() == sig.updates;
            let operands_ok = node
                .inputs
                .iter()
                .chain(&node.updates)
                .chain(&node.outputs)
                .all(|t| !self.damaged.tensors.contains(&t.index()) && tensors[t.index()].bytes > 0);
            if !arity_ok || !operands_ok || self.bad_attrs.contains(&i) {
                continue;
            }
            let ops =
                |ids: &[TensorId]| -> Vec<Operand<'_>> { ids.iter().map(|t| tensors[t.index()].operand()).collect() };
            if let Err(msg) =
                check_shapes(node.op, &node.attrs, &ops(&node.inputs), &ops(&node.updates), &ops(&node.outputs))
            {
                let loc = self.at(|s| s.nodes.get(i).map(|sp| sp.op));
                self.diags.push(
                    K::Shape,
                    loc,
                    Subject::Node(decl.nodes[i].name.clone()),
                    format!("{}: {msg}", node.op),
                );
            }
        }
    }
}
