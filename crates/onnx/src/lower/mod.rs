//! Lowering ONNX nodes onto placer's op set through the zoo's [`GraphBuilder`], which
//! derives the backward pass and the updates of a forward graph. Training graphs, which
//! carry their own backward pass, lower in [`training`] on the same [`Lowerer`].

mod consts;
mod derive;
mod elementwise;
mod emit;
mod fuse;
mod gather;
mod ops;
mod ort;
mod slice;
pub(crate) mod training;
mod window;

pub(crate) use ops::forward;

use crate::graph::{Topology, node_label, op_label};
use crate::proto::{GraphProto, NodeProto, TensorProto, ValueInfoProto, tensor_shape_proto::dimension, type_proto};
use crate::values::{Constant, Elem, Tensor, Value, constant_of};
use crate::{ImportOptions, OnnxError};
use fuse::Fused;
use placer_ir::DType;
use placer_zoo::{GraphBuilder, T};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Why one node was not lowered.
pub(crate) enum Fail {
    /// Placer cannot run or differentiate it; collected with the others and reported once.
    Unsupported(String),
    /// The file contradicts itself (bad shapes, missing operands).
    Error(String),
    /// An operand comes from a node that could not be imported; not reported again.
    Poisoned,
}

pub(crate) type Lowered = Result<Vec<Value>, Fail>;

pub(crate) fn unsupported<X>(what: impl Into<String>) -> Result<X, Fail> {
    Err(Fail::Unsupported(what.into()))
}

pub(crate) fn bad<X>(why: impl Into<String>) -> Result<X, Fail> {
    Err(Fail::Error(why.into()))
}

pub(crate) struct Lowerer<'m> {
    pub g: GraphBuilder,
    pub graph: &'m GraphProto,
    pub topo: Topology,
    pub opset: i64,
    /// The graph's initializers by name.
    pub initializers: HashMap<&'m str, &'m TensorProto>,
    values: HashMap<String, Value>,
    /// Nodes whose work a fused node does; they emit nothing.
    skipped: HashSet<usize>,
    fused: HashMap<usize, Fused>,
    /// What could not be imported: description → (count, first node).
    failures: BTreeMap<String, (usize, String)>,
    /// Things the import changed on purpose, reported to the user: description → count.
    pub notes: BTreeMap<String, usize>,
    views: HashMap<(T, Vec<u64>), T>,
    weights: HashMap<String, T>,
    /// A BiasGelu's input and the biased tensor its gradient reads.
    pub biased: HashMap<T, T>,
    /// Tensors that already include a factor a following Scale would apply.
    pub prescaled: HashMap<T, f64>,
    /// Splits made for Slices of an activation: (value, axis) → its parts.
    pub slices: HashMap<(String, usize), slice::Parts>,
    /// Transposes of stored weights: ONNX value → the weight.
    transposes: HashMap<String, Constant>,
    /// Inputs made by `feed`.
    fed: HashMap<(String, Vec<u64>, DType), T>,
    /// Nodes skipped because an operand could not be imported.
    unexamined: usize,
    /// The batch size written in the file, when it overrode it with `--batch`.
    pub rebatch: Option<(u64, u64)>,
    /// Whether this is a training graph (parameters are its inputs, not initializers).
    pub training: bool,
    /// Whether a data input has set the batch (and `rebatch`) yet.
    batch_seen: bool,
}

impl<'m> Lowerer<'m> {
    pub fn new(graph: &'m GraphProto, topo: Topology, opset: i64) -> Self {
        Lowerer {
            g: GraphBuilder::new(),
            graph,
            topo,
            opset,
            initializers: graph.initializer.iter().filter_map(|t| Some((t.name.as_deref()?, t))).collect(),
            values: HashMap::new(),
            skipped: HashSet::new(),
            fused: HashMap::new(),
            failures: BTreeMap::new(),
            notes: BTreeMap::new(),
            views: HashMap::new(),
            weights: HashMap::new(),
            fed: HashMap::new(),
            transposes: HashMap::new(),
            slices: HashMap::new(),
            biased: HashMap::new(),
            prescaled: HashMap::new(),
            rebatch: None,
            batch_seen: false,
            training: false,
            unexamined: 0,
        }
    }

    pub fn note(&mut self, what: impl Into<String>) {
        *self.notes.entry(what.into()).or_default() += 1;
    }

    /// Gives ONNX value `name` its value ahead of the node that outputs it (a split's
    /// parts, which SequenceAt nodes then pass on).
    pub fn set_value(&mut self, name: String, v: Value) {
        self.values.insert(name, v);
    }

    pub fn value(&self, name: &str) -> Option<&Value> {
        self.values.get(name)
    }

    /// Initializers become constants; graph inputs that are not initializers become
    /// placer inputs with every dimension resolved. `is_param` picks the inputs that are
    /// trainable parameters (training graphs feed them as inputs).
    pub fn declare_inputs(&mut self, opts: &ImportOptions, is_param: &dyn Fn(&str) -> bool) -> Result<(), OnnxError> {
        let inputs: Vec<&str> = self.graph.input.iter().filter_map(|i| i.name.as_deref()).collect();
        if let Some(unknown) = opts.drop_inputs.iter().find(|d| !inputs.contains(&d.as_str())) {
            return Err(OnnxError::Input(format!(
                "--drop-input {unknown}: the graph has no such input; its inputs: {}",
                inputs.iter().filter(|i| !self.initializers.contains_key(*i)).copied().collect::<Vec<_>>().join(", ")
            )));
        }
        for init in &self.graph.initializer {
            let name = init.name.clone().unwrap_or_default();
            self.values.insert(name.clone(), Value::Const(constant_of(init, &name)));
        }
        for input in &self.graph.input {
            let name = input.name.clone().unwrap_or_default();
            if self.values.contains_key(&name) {
                continue;
            }
            if opts.drop_inputs.contains(&name) {
                self.values.insert(name, Value::Dropped);
                continue;
            }
            let param = is_param(&name);
            let (elem, shape) = self.resolve_input(input, opts, !param)?;
            let value = if param {
                Value::Const(Constant { shape, elem, data: None, origin: name.clone() })
            } else if !matches!(elem, Elem::Float(_)) {
                // Ids and masks: an input only where an op reads them (`feed`).
                Value::Data(Constant { shape, elem, data: None, origin: name.clone() })
            } else {
                let Some(dtype) = elem.dtype() else {
                    return Err(OnnxError::Input(format!(
                        "input '{name}' has ONNX element type {elem:?}, which placer has no dtype for"
                    )));
                };
                // Integer inputs are indices (token ids, labels): the kernels index in i32.
                let dtype = if dtype == DType::I64 {
                    self.note("int64 inputs imported as i32 (they are indices)");
                    DType::I32
                } else {
                    dtype
                };
                let t = self.g.input(&name, &shape, dtype);
                Value::Tensor(Tensor { t, shape })
            };
            self.values.insert(name, value);
        }
        Ok(())
    }

    /// The element type and shape of a graph input; `batched` inputs take `--batch`.
    fn resolve_input(
        &mut self,
        input: &ValueInfoProto,
        opts: &ImportOptions,
        batched: bool,
    ) -> Result<(Elem, Vec<u64>), OnnxError> {
        let batch = if batched { opts.batch } else { None };
        let name = input.name.as_deref().unwrap_or_default();
        let tensor = match input.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(type_proto::Value::TensorType(t)) => t,
            _ => return Err(OnnxError::Input(format!("input '{name}' is not a tensor"))),
        };
        let elem = Elem::from_onnx(tensor.elem_type.unwrap_or(0));
        let dims = tensor.shape.as_ref().map(|s| s.dim.as_slice()).unwrap_or(&[]);
        let mut shape = Vec::with_capacity(dims.len());
        for (axis, dim) in dims.iter().enumerate() {
            let resolved = match &dim.value {
                Some(dimension::Value::DimValue(v)) if *v > 0 => {
                    let v = *v as u64;
                    match batch {
                        Some(b) if axis == 0 && b != v => {
                            // The first data input says what the file's batch was; a
                            // training graph's labels may have rows of batch·sequence.
                            if !self.batch_seen {
                                self.rebatch = Some((v, b));
                            }
                            self.batch_seen = true;
                            b
                        }
                        Some(_) if axis == 0 => {
                            self.batch_seen = true;
                            v
                        }
                        _ => v,
                    }
                }
                Some(dimension::Value::DimParam(p)) if opts.dims.contains_key(p) => opts.dims[p],
                _ if axis == 0 && batch.is_some() => batch.unwrap_or(1),
                other => {
                    let label = match other {
                        Some(dimension::Value::DimParam(p)) => format!("'{p}'"),
                        _ => "unnamed".to_string(),
                    };
                    let hint = match other {
                        Some(dimension::Value::DimParam(p)) if axis != 0 => format!("pass --dim {p}=N"),
                        Some(dimension::Value::DimParam(p)) => format!("pass --batch N or --dim {p}=N"),
                        _ if axis == 0 => "pass --batch N".to_string(),
                        _ => "name it in the model, or fix it".to_string(),
                    };
                    return Err(OnnxError::Input(format!(
                        "input '{name}' dimension {axis} ({label}) has no size: {hint}"
                    )));
                }
            };
            shape.push(resolved);
        }
        Ok((elem, shape))
    }

    /// Lowers every node in order, collecting what cannot be imported.
    /// Only nodes that `roots` depend on are lowered: other outputs' branches (an
    /// exported pooling head, a passthrough of the ids) are left out, and counted.
    pub fn run(
        &mut self,
        roots: &[String],
        lower: &dyn Fn(&mut Lowerer<'m>, &'m NodeProto) -> Lowered,
    ) -> Result<(), OnnxError> {
        self.fused = fuse::find(self);
        let needed = self.needed_by(roots);
        let unneeded = (0..self.graph.node.len()).filter(|i| !needed.contains(i) && !self.skipped.contains(i)).count();
        if unneeded > 0 {
            self.notes.insert(format!("{unneeded} node(s) that the loss does not depend on left out"), 1);
        }
        for k in 0..self.topo.order.len() {
            let i = self.topo.order[k];
            if self.skipped.contains(&i) || !needed.contains(&i) {
                continue;
            }
            let node = &self.graph.node[i];
            let inputs_poisoned =
                node.input.iter().any(|n| matches!(self.values.get(n.as_str()), Some(Value::Poisoned)));
            let result = if inputs_poisoned {
                // Still name ops placer has no rule for at all, so their counts are whole.
                match ops::known(node) || training::known(node) {
                    true => Err(Fail::Poisoned),
                    false => Err(Fail::Unsupported(op_label(node))),
                }
            } else if let Some(dropped) = self.dropped(node) {
                dropped
            } else if let Some(f) = self.fused.remove(&i) {
                f.lower(self, node)
            } else {
                lower(self, node)
            };
            let outputs = match result {
                Ok(values) => values,
                Err(Fail::Unsupported(what)) => {
                    let entry = self.failures.entry(what).or_insert((0, node_label(node)));
                    entry.0 += 1;
                    vec![Value::Poisoned; node.output.len()]
                }
                Err(Fail::Poisoned) => {
                    self.unexamined += 1;
                    vec![Value::Poisoned; node.output.len()]
                }
                Err(Fail::Error(reason)) => {
                    return Err(OnnxError::Node { node: node_label(node), op: op_label(node), reason });
                }
            };
            for (name, v) in node.output.iter().zip(outputs) {
                if !name.is_empty() {
                    self.values.insert(name.clone(), v);
                }
            }
        }
        if self.failures.is_empty() && self.unexamined > 0 {
            // Every skip traces back to a failure, unless a node read an output the
            // importer deliberately does not produce (running statistics, a dropout mask).
            return Err(OnnxError::Unsupported {
                count: self.unexamined,
                list: "nodes that read outputs placer does not produce (running statistics, masks)".into(),
            });
        }
        if self.failures.is_empty() {
            return Ok(());
        }
        let count = self.failures.values().map(|(n, _)| n).sum();
        let list = self
            .failures
            .iter()
            .map(|(what, (n, first))| format!("{what} ×{n} (first: '{first}')"))
            .collect::<Vec<_>>()
            .join("; ");
        let list = match self.unexamined {
            0 => list,
            n => format!("{list} ({n} node(s) downstream of these were not examined)"),
        };
        Err(OnnxError::Unsupported { count, list })
    }

    /// What a node that reads a dropped input's values produces: dropped values when it
    /// reads nothing else computed, the activation itself when it adds or multiplies one
    /// by them (the mask term falls out), and otherwise a failure. `None` when the node
    /// reads no dropped value.
    fn dropped(&mut self, node: &NodeProto) -> Option<Lowered> {
        let inputs: Vec<Option<&Value>> =
            node.input.iter().filter(|n| !n.is_empty()).map(|n| self.values.get(n.as_str())).collect();
        if !inputs.iter().any(|v| matches!(v, Some(Value::Dropped))) {
            return None;
        }
        let tensors: Vec<&Value> = inputs.iter().flatten().filter(|v| matches!(v, Value::Tensor(_))).copied().collect();
        let result = match (tensors.as_slice(), node.op_type()) {
            ([], _) => Ok(vec![Value::Dropped; node.output.len()]),
            ([t], "Add" | "Mul") if inputs.len() == 2 => {
                let t = (*t).clone();
                self.note(format!(
                    "{} of a dropped input's values passed over (the activation goes on unchanged)",
                    node.op_type()
                ));
                Ok(vec![t])
            }
            _ => unsupported(format!("{} combining a dropped input's values with an activation", op_label(node))),
        };
        Some(result)
    }

    /// Indices of the nodes the values `roots` are computed from (fused chains included).
    fn needed_by(&self, roots: &[String]) -> HashSet<usize> {
        let mut needed = HashSet::new();
        let mut stack: Vec<&str> = roots.iter().map(String::as_str).collect();
        while let Some(v) = stack.pop() {
            if let Some(&i) = self.topo.producer.get(v)
                && needed.insert(i)
            {
                stack.extend(self.graph.node[i].input.iter().map(String::as_str).filter(|n| !n.is_empty()));
            }
        }
        needed
    }

    pub fn skip(&mut self, i: usize) {
        self.skipped.insert(i);
    }

    /// Operand `k` of `node`, which must be present.
    pub fn operand(&self, node: &NodeProto, k: usize) -> Result<Value, Fail> {
        match node.input.get(k).filter(|n| !n.is_empty()) {
            Some(name) => match self.values.get(name.as_str()) {
                Some(Value::Poisoned) => Err(Fail::Poisoned),
                Some(v) => Ok(v.clone()),
                None => bad(format!("operand '{name}' has no value")),
            },
            None => bad(format!("operand {k} is missing")),
        }
    }

    pub fn optional(&self, node: &NodeProto, k: usize) -> Result<Option<Value>, Fail> {
        match node.input.get(k).filter(|n| !n.is_empty()) {
            Some(_) => self.operand(node, k).map(Some),
            None => Ok(None),
        }
    }

    /// Operand `k` as a placer tensor: an activation, or data (ids, labels, a mask)
    /// that the step is fed.
    pub fn tensor_operand(&mut self, node: &NodeProto, k: usize) -> Result<Tensor, Fail> {
        match self.operand(node, k)? {
            Value::Tensor(t) => Ok(t),
            Value::Data(c) => {
                let dtype = match c.elem {
                    Elem::Float(d) => d,
                    Elem::Int(_) => DType::I32,
                    Elem::Bool => DType::U8,
                    Elem::Other(code) => return unsupported(format!("data of ONNX element type {code}")),
                };
                let t = self.feed(&c, dtype);
                Ok(Tensor { t, shape: c.shape })
            }
            Value::Poisoned => Err(Fail::Poisoned),
            _ => unsupported(format!("{} with a constant operand {k}", op_label(node))),
        }
    }

    pub fn const_operand(&self, node: &NodeProto, k: usize) -> Result<Constant, Fail> {
        match self.operand(node, k)? {
            Value::Const(c) => Ok(c),
            Value::Poisoned => Err(Fail::Poisoned),
            _ => unsupported(format!("{} with a computed operand {k}", op_label(node))),
        }
    }

    /// The placer tensor holding `v` in exactly its ONNX shape, reshaping a view once.
    pub fn exact(&mut self, v: &Tensor) -> T {
        self.shaped(v.t, &v.shape)
    }

    /// `t` reshaped to `shape` (no node when it already has it; one per distinct shape).
    pub fn shaped(&mut self, t: T, shape: &[u64]) -> T {
        if self.g.shape(t) == shape {
            return t;
        }
        if let Some(&done) = self.views.get(&(t, shape.to_vec())) {
            return done;
        }
        let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
        let name = self.g.unique_name(&format!("{}.as[{}]", self.g.name_of(t), dims.join(",")));
        let r = self.g.reshape(&name, t, shape);
        self.views.insert((t, shape.to_vec()), r);
        r
    }

    /// The weight a constant stands for, created on first use, with `shape` (same count).
    pub fn weight(&mut self, c: &Constant, shape: &[u64]) -> Result<T, Fail> {
        let Elem::Float(dtype) = c.elem else {
            return unsupported("a non-float constant used as a weight");
        };
        if c.numel() != shape.iter().product::<u64>() {
            return bad(format!("constant '{}' has {} elements where {shape:?} is needed", c.origin, c.numel()));
        }
        if let Some(&w) = self.weights.get(&c.origin) {
            return if self.g.shape(w) == shape { Ok(w) } else { unsupported("a weight used in two shapes") };
        }
        let name = self.g.unique_name(&c.origin);
        let w = self.g.weight_typed(&name, shape, dtype);
        self.weights.insert(c.origin.clone(), w);
        Ok(w)
    }

    /// The placer input that feeds a data value (a mask, ids) or a constant that is
    /// not a weight (a bool buffer) to the op that reads it; one per value and dtype.
    pub fn feed(&mut self, c: &Constant, dtype: DType) -> T {
        let key = (c.origin.clone(), c.shape.clone(), dtype);
        if let Some(&t) = self.fed.get(&key) {
            return t;
        }
        let name = self.name_for(&c.origin);
        let t = self.g.input(&name, &c.shape, dtype);
        if self.graph.input.iter().all(|i| i.name.as_deref() != Some(c.origin.as_str())) {
            self.note("values computed from data inputs and constants only (masks, position ids) fed as inputs");
        }
        self.fed.insert(key, t);
        t
    }

    /// A data value or non-weight constant whose first dimension is the batch the file
    /// fixed, with `--batch` in its place: a mask that a static export computed from its
    /// own shapes.
    pub fn rebatched(&self, v: &Value) -> Value {
        let Some((file, new)) = self.rebatch else { return v.clone() };
        let weight = matches!(v, Value::Const(c) if elementwise::is_weight(self, c));
        match v {
            Value::Data(c) | Value::Const(c) if c.shape.first() == Some(&file) && !weight => {
                let mut c = c.clone();
                c.shape[0] = new;
                c.data = None;
                Value::Data(c)
            }
            other => other.clone(),
        }
    }

    /// Remembers a 2-D Transpose of a stored weight, so that a matmul reading the
    /// transpose reads the weight itself with its transpose flag flipped: one parameter,
    /// as in the framework.
    pub fn note_transpose(&mut self, node: &NodeProto) {
        let Some(Value::Const(w)) = node.input.first().and_then(|n| self.values.get(n.as_str())) else { return };
        let swap = crate::values::Attrs(node).ints("perm").is_none_or(|p| p == [1, 0]);
        if w.shape.len() == 2 && swap && elementwise::is_weight(self, w) {
            self.transposes.insert(node.output[0].clone(), w.clone());
        }
    }

    /// The weight for constant `c` and whether it is the transpose of a stored weight.
    pub fn weight_maybe_transposed(&mut self, c: &Constant) -> Result<(T, bool), Fail> {
        match self.transposes.get(&c.origin).cloned() {
            Some(w) => Ok((self.weight(&w, &w.shape)?, true)),
            None => Ok((self.weight(c, &c.shape)?, false)),
        }
    }

    /// A unique placer name for the tensor behind ONNX value `onnx`.
    pub fn name_for(&self, onnx: &str) -> String {
        self.g.unique_name(if onnx.is_empty() { "unnamed" } else { onnx })
    }

    pub fn dtype_of(&self, t: T) -> DType {
        self.g.dtype(t)
    }
}

impl Lowerer<'_> {
    /// The batch size the graph was imported at: the first dimension of its first input.
    pub fn batch(&self) -> u64 {
        self.graph
            .input
            .iter()
            .filter_map(|i| match self.values.get(i.name.as_deref().unwrap_or_default()) {
                Some(Value::Tensor(Tensor { shape, .. }) | Value::Data(Constant { shape, .. })) => {
                    shape.first().copied()
                }
                _ => None,
            })
            .next()
            .unwrap_or(1)
    }
}
