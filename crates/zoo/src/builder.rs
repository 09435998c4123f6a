//! A graph builder that records the forward pass and then derives the backward pass and
//! the weight update from it, the way a framework's autograd would. Model definitions
//! only describe the forward computation.

use crate::ZooError;
use placer_ir::ops::{conv_output_shape, pool_output_shape};
use placer_ir::{AttrValue, Attrs, DType, ModelDecl, NodeDecl, Op, Role, TensorDecl};
use std::collections::{BTreeMap, HashSet};

/// A tensor handle inside a [`GraphBuilder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct T(usize);

/// A recorded forward op: enough to emit its backward.
#[derive(Debug, Clone)]
struct TapeEntry {
    name: String,
    op: Op,
    attrs: Attrs,
    inputs: Vec<T>,
    outputs: Vec<T>,
}

/// The weight update appended for every weight once its gradient is complete.
#[derive(Debug, Clone, Copy)]
pub struct Optimizer {
    pub lr: f64,
    pub momentum: f64,
}

impl Default for Optimizer {
    fn default() -> Self {
        Optimizer { lr: 0.01, momentum: 0.9 }
    }
}

#[derive(Debug, Default)]
pub struct GraphBuilder {
    tensors: Vec<TensorDecl>,
    requires_grad: Vec<bool>,
    nodes: Vec<NodeDecl>,
    tape: Vec<TapeEntry>,
    names: HashSet<String>,
}

fn ints(v: &[u64]) -> AttrValue {
    AttrValue::Ints(v.iter().map(|&x| x as i64).collect())
}

/// Convolution geometry for [`GraphBuilder::conv2d`].
#[derive(Debug, Clone, Copy)]
pub struct Conv {
    pub stride: [u64; 2],
    pub padding: [u64; 2],
    pub dilation: [u64; 2],
    pub groups: u64,
}

impl Conv {
    /// Stride `s`, padding `p` in both directions, one group.
    pub fn new(s: u64, p: u64) -> Conv {
        Conv { stride: [s, s], padding: [p, p], dilation: [1, 1], groups: 1 }
    }

    /// The attributes placer's ops take for this geometry (defaults left out).
    pub fn attrs(&self) -> Attrs {
        let mut a = Attrs::new();
        if self.stride != [1, 1] {
            a.insert("stride".into(), ints(&self.stride));
        }
        if self.padding != [0, 0] {
            a.insert("padding".into(), ints(&self.padding));
        }
        if self.dilation != [1, 1] {
            a.insert("dilation".into(), ints(&self.dilation));
        }
        if self.groups != 1 {
            a.insert("groups".into(), AttrValue::Int(self.groups as i64));
        }
        a
    }
}

/// Pooling window geometry for [`GraphBuilder::max_pool2d`] and [`GraphBuilder::avg_pool2d`].
#[derive(Debug, Clone, Copy)]
pub struct Pool {
    pub kernel: [u64; 2],
    pub stride: [u64; 2],
    pub padding: [u64; 2],
}

impl Pool {
    /// The attributes placer's ops take for this geometry (defaults left out).
    pub fn attrs(&self) -> Attrs {
        let mut a = Attrs::from([("kernel".to_string(), ints(&self.kernel))]);
        if self.stride != self.kernel {
            a.insert("stride".into(), ints(&self.stride));
        }
        if self.padding != [0, 0] {
            a.insert("padding".into(), ints(&self.padding));
        }
        a
    }
}

impl GraphBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn shape(&self, t: T) -> &[u64] {
        &self.tensors[t.0].shape
    }

    fn tensor(&mut self, name: String, shape: Vec<u64>, dtype: DType, role: Role, grad: bool) -> T {
        debug_assert!(!self.names.contains(&name), "duplicate tensor name {name}");
        self.names.insert(name.clone());
        self.tensors.push(TensorDecl { name, shape, dtype, role });
        self.requires_grad.push(grad);
        T(self.tensors.len() - 1)
    }

    /// Data fed to the step (images, token ids, labels).
    pub fn input(&mut self, name: &str, shape: &[u64], dtype: DType) -> T {
        self.tensor(name.to_string(), shape.to_vec(), dtype, Role::Input, false)
    }

    /// A trainable parameter; it gets a gradient and an SGD-momentum update.
    pub fn weight(&mut self, name: &str, shape: &[u64]) -> T {
        self.tensor(name.to_string(), shape.to_vec(), DType::F32, Role::Weight, true)
    }

    /// A trainable parameter of any float dtype.
    pub fn weight_typed(&mut self, name: &str, shape: &[u64], dtype: DType) -> T {
        self.tensor(name.to_string(), shape.to_vec(), dtype, Role::Weight, true)
    }

    /// A tensor that takes no part in differentiation (an imported training graph's
    /// gradients, optimizer state, statistics).
    pub fn declare(&mut self, name: &str, shape: &[u64], dtype: DType, role: Role) -> T {
        self.tensor(name.to_string(), shape.to_vec(), dtype, role, false)
    }

    pub fn dtype(&self, t: T) -> DType {
        self.tensors[t.0].dtype
    }

    pub fn role(&self, t: T) -> Role {
        self.tensors[t.0].role
    }

    /// Whether a tensor is already called `name`; names must be unique.
    pub fn has_name(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// `base`, or `base#k` with the smallest k that is still free.
    pub fn unique_name(&self, base: &str) -> String {
        if !self.has_name(base) {
            return base.to_string();
        }
        (2..).map(|k| format!("{base}#{k}")).find(|n| !self.has_name(n)).unwrap_or_default()
    }

    pub fn name_of(&self, t: T) -> &str {
        &self.tensors[t.0].name
    }

    /// Emits a node as it is, outside the tape: it gets no derived backward. Imported
    /// training graphs, which carry their own backward pass, are built this way.
    pub fn node(&mut self, name: &str, op: Op, attrs: Attrs, inputs: &[T], updates: &[T], outputs: &[T]) {
        self.push_node(name.to_string(), op, attrs, inputs, updates, outputs);
    }

    fn push_node(&mut self, name: String, op: Op, attrs: Attrs, inputs: &[T], updates: &[T], outputs: &[T]) {
        let names = |ts: &[T]| ts.iter().map(|&t| self.name_of(t).to_string()).collect();
        let node =
            NodeDecl { name, op, attrs, inputs: names(inputs), updates: names(updates), outputs: names(outputs) };
        self.nodes.push(node);
    }

    /// Emits a forward op and records it on the tape. `outs` lists each output's name
    /// suffix, shape, dtype and role; the first output is the op's main result.
    fn forward(
        &mut self,
        name: &str,
        op: Op,
        attrs: Attrs,
        inputs: &[T],
        outs: Vec<(&str, Vec<u64>, DType, Role)>,
    ) -> Vec<T> {
        let grad = inputs.iter().any(|t| self.requires_grad[t.0]);
        let outputs: Vec<T> = outs
            .into_iter()
            .map(|(suffix, shape, dtype, role)| {
                let differentiable = grad && role == Role::Activation;
                self.tensor(format!("{name}{suffix}"), shape, dtype, role, differentiable)
            })
            .collect();
        self.push_node(name.to_string(), op, attrs.clone(), inputs, &[], &outputs);
        self.tape.push(TapeEntry {
            name: name.to_string(),
            op,
            attrs,
            inputs: inputs.to_vec(),
            outputs: outputs.clone(),
        });
        outputs
    }

    fn unary(&mut self, name: &str, op: Op, attrs: Attrs, inputs: &[T], shape: Vec<u64>) -> T {
        let dtype = self.tensors[inputs[0].0].dtype;
        self.forward(name, op, attrs, inputs, vec![("", shape, dtype, Role::Activation)])[0]
    }

    pub fn conv2d(&mut self, name: &str, x: T, w: T, conv: Conv) -> Result<T, ZooError> {
        let attrs = conv.attrs();
        let shape = conv_output_shape(&attrs, self.shape(x), self.shape(w))
            .map_err(|e| ZooError::Shape(format!("{name}: {e}")))?;
        Ok(self.unary(name, Op::Conv2d, attrs, &[x, w], shape))
    }

    pub fn bias_add(&mut self, name: &str, x: T, b: T, axis: i64) -> T {
        let shape = self.shape(x).to_vec();
        self.unary(name, Op::BiasAdd, axis_attr(axis), &[x, b], shape)
    }

    pub fn matmul(&mut self, name: &str, a: T, b: T, transpose_b: bool, alpha: f64) -> Result<T, ZooError> {
        let (sa, sb) = (self.shape(a), self.shape(b));
        let r = sa.len();
        let n = if transpose_b { sb[r - 2] } else { sb[r - 1] };
        let k = if transpose_b { sb[r - 1] } else { sb[r - 2] };
        if sa[r - 1] != k {
            return Err(ZooError::Shape(format!("{name}: inner dimensions {} and {k} differ", sa[r - 1])));
        }
        let mut shape = sa.to_vec();
        shape[r - 1] = n;
        Ok(self.unary(name, Op::MatMul, matmul_attrs(false, transpose_b, alpha), &[a, b], shape))
    }

    pub fn relu(&mut self, name: &str, x: T) -> T {
        let shape = self.shape(x).to_vec();
        self.unary(name, Op::Relu, Attrs::new(), &[x], shape)
    }

    pub fn gelu(&mut self, name: &str, x: T) -> T {
        let shape = self.shape(x).to_vec();
        self.unary(name, Op::Gelu, Attrs::new(), &[x], shape)
    }

    pub fn add(&mut self, name: &str, a: T, b: T) -> T {
        let shape = self.shape(a).to_vec();
        self.unary(name, Op::Add, Attrs::new(), &[a, b], shape)
    }

    pub fn max_pool(&mut self, name: &str, x: T, kernel: u64, stride: u64, padding: u64) -> Result<T, ZooError> {
        self.max_pool2d(name, x, square_pool(kernel, stride, padding))
    }

    pub fn max_pool2d(&mut self, name: &str, x: T, pool: Pool) -> Result<T, ZooError> {
        self.max_pool2d_indexed(name, x, pool).map(|(y, _)| y)
    }

    /// [`GraphBuilder::max_pool2d`], also returning the indices of the maxima.
    pub fn max_pool2d_indexed(&mut self, name: &str, x: T, pool: Pool) -> Result<(T, T), ZooError> {
        let attrs = pool.attrs();
        let shape = pool_output_shape(&attrs, self.shape(x)).map_err(|e| ZooError::Shape(format!("{name}: {e}")))?;
        let outs =
            vec![("", shape.clone(), DType::F32, Role::Activation), (".indices", shape, DType::I32, Role::Workspace)];
        let out = self.forward(name, Op::MaxPool2d, attrs, &[x], outs);
        Ok((out[0], out[1]))
    }

    pub fn avg_pool(&mut self, name: &str, x: T, kernel: u64, stride: u64, padding: u64) -> Result<T, ZooError> {
        self.avg_pool2d(name, x, square_pool(kernel, stride, padding), false)
    }

    /// `count_include_pad` divides by the whole window at the borders, padding included.
    pub fn avg_pool2d(&mut self, name: &str, x: T, pool: Pool, count_include_pad: bool) -> Result<T, ZooError> {
        let mut attrs = pool.attrs();
        if count_include_pad {
            attrs.insert("count_include_pad".into(), AttrValue::Bool(true));
        }
        let shape = pool_output_shape(&attrs, self.shape(x)).map_err(|e| ZooError::Shape(format!("{name}: {e}")))?;
        Ok(self.unary(name, Op::AvgPool2d, attrs, &[x], shape))
    }

    pub fn global_avg_pool(&mut self, name: &str, x: T) -> T {
        let shape = self.shape(x)[..2].to_vec();
        self.unary(name, Op::GlobalAvgPool, Attrs::new(), &[x], shape)
    }

    /// Training-mode batch normalisation over axis 1, with learned scale and shift.
    pub fn batch_norm(&mut self, name: &str, x: T, epsilon: f64) -> T {
        let c = self.shape(x)[1];
        let gamma = self.weight(&format!("{name}.gamma"), &[c]);
        let beta = self.weight(&format!("{name}.beta"), &[c]);
        self.batch_norm_with(name, x, gamma, beta, epsilon)
    }

    /// [`GraphBuilder::batch_norm`] with existing scale and shift tensors.
    pub fn batch_norm_with(&mut self, name: &str, x: T, gamma: T, beta: T, epsilon: f64) -> T {
        self.batch_norm_saving(name, x, gamma, beta, epsilon)[0]
    }

    /// [`GraphBuilder::batch_norm_with`], returning the output, the batch mean and the
    /// inverse standard deviation.
    pub fn batch_norm_saving(&mut self, name: &str, x: T, gamma: T, beta: T, epsilon: f64) -> [T; 3] {
        let c = self.shape(x)[1];
        let shape = self.shape(x).to_vec();
        let outs = vec![
            ("", shape, DType::F32, Role::Activation),
            (".mean", vec![c], DType::F32, Role::Workspace),
            (".invstd", vec![c], DType::F32, Role::Workspace),
        ];
        let out = self.forward(name, Op::BatchNorm, epsilon_attr(epsilon), &[x, gamma, beta], outs);
        [out[0], out[1], out[2]]
    }

    /// Layer normalisation over the last axis, with learned scale and shift.
    pub fn layer_norm(&mut self, name: &str, x: T, epsilon: f64) -> T {
        let d = self.shape(x).last().copied().unwrap_or(1);
        let gamma = self.weight(&format!("{name}.gamma"), &[d]);
        let beta = self.weight(&format!("{name}.beta"), &[d]);
        self.layer_norm_with(name, x, gamma, beta, epsilon)
    }

    /// [`GraphBuilder::layer_norm`] with existing scale and shift tensors.
    pub fn layer_norm_with(&mut self, name: &str, x: T, gamma: T, beta: T, epsilon: f64) -> T {
        let shape = self.shape(x).to_vec();
        let rows = shape.split_last().map(|(_, r)| r.to_vec()).unwrap_or_default();
        let outs = vec![
            ("", shape, DType::F32, Role::Activation),
            (".mean", rows.clone(), DType::F32, Role::Workspace),
            (".rstd", rows, DType::F32, Role::Workspace),
        ];
        self.forward(name, Op::LayerNorm, epsilon_attr(epsilon), &[x, gamma, beta], outs)[0]
    }

    pub fn concat(&mut self, name: &str, xs: &[T], axis: usize) -> T {
        if xs.len() == 1 {
            return xs[0];
        }
        let mut shape = self.shape(xs[0]).to_vec();
        shape[axis] = xs.iter().map(|&x| self.shape(x)[axis]).sum();
        self.unary(name, Op::Concat, axis_attr(axis as i64), xs, shape)
    }

    pub fn reshape(&mut self, name: &str, x: T, shape: &[u64]) -> T {
        self.unary(name, Op::Reshape, Attrs::new(), &[x], shape.to_vec())
    }

    pub fn transpose(&mut self, name: &str, x: T, perm: &[usize]) -> T {
        let shape: Vec<u64> = perm.iter().map(|&p| self.shape(x)[p]).collect();
        let mut attrs = Attrs::new();
        attrs.insert("perm".into(), AttrValue::Ints(perm.iter().map(|&p| p as i64).collect()));
        self.unary(name, Op::Transpose, attrs, &[x], shape)
    }

    pub fn softmax(&mut self, name: &str, x: T) -> T {
        let shape = self.shape(x).to_vec();
        self.unary(name, Op::Softmax, Attrs::new(), &[x], shape)
    }

    pub fn tanh(&mut self, name: &str, x: T) -> T {
        let shape = self.shape(x).to_vec();
        self.unary(name, Op::Tanh, Attrs::new(), &[x], shape)
    }

    pub fn embedding(&mut self, name: &str, ids: T, table: T) -> T {
        let mut shape = self.shape(ids).to_vec();
        shape.push(self.shape(table)[1]);
        let dtype = self.tensors[table.0].dtype;
        self.forward(name, Op::Embedding, Attrs::new(), &[ids, table], vec![("", shape, dtype, Role::Activation)])[0]
    }

    /// The loss: mean softmax cross-entropy of `logits` [N, C] against `labels` [N].
    pub fn softmax_cross_entropy(&mut self, name: &str, logits: T, labels: T) -> T {
        self.softmax_cross_entropy_saving(name, logits, labels).0
    }

    /// [`GraphBuilder::softmax_cross_entropy`], also returning the probabilities.
    pub fn softmax_cross_entropy_saving(&mut self, name: &str, logits: T, labels: T) -> (T, T) {
        let shape = self.shape(logits).to_vec();
        let outs = vec![("", vec![], DType::F32, Role::Activation), (".probs", shape, DType::F32, Role::Workspace)];
        let out = self.forward(name, Op::SoftmaxCrossEntropy, Attrs::new(), &[logits, labels], outs);
        (out[0], out[1])
    }

    /// Derives the backward pass from `loss` (the output of
    /// [`GraphBuilder::softmax_cross_entropy`]) and appends an SGD-momentum update for
    /// each weight as soon as its gradient is complete, then validates the result.
    pub fn finish(
        mut self,
        name: &str,
        meta: BTreeMap<String, String>,
        loss: T,
        opt: Optimizer,
    ) -> Result<placer_ir::Model, ZooError> {
        Backward::run(&mut self, loss, opt)?;
        let decl = ModelDecl { name: name.to_string(), meta, tensors: self.tensors, nodes: self.nodes, schedule: None };
        placer_ir::validate(decl).map_err(|d| ZooError::Invalid(d.to_string()))
    }
}

impl GraphBuilder {
    /// Validates the graph as built, deriving nothing: for graphs that already hold
    /// their backward pass and updates.
    pub fn finish_as_is(self, name: &str, meta: BTreeMap<String, String>) -> Result<placer_ir::Model, ZooError> {
        let decl = ModelDecl { name: name.to_string(), meta, tensors: self.tensors, nodes: self.nodes, schedule: None };
        placer_ir::validate(decl).map_err(|d| ZooError::Invalid(d.to_string()))
    }
}

fn axis_attr(axis: i64) -> Attrs {
    Attrs::from([("axis".to_string(), AttrValue::Int(axis))])
}

fn epsilon_attr(epsilon: f64) -> Attrs {
    Attrs::from([("epsilon".to_string(), AttrValue::Float(epsilon))])
}

fn square_pool(kernel: u64, stride: u64, padding: u64) -> Pool {
    Pool { kernel: [kernel; 2], stride: [stride; 2], padding: [padding; 2] }
}

fn matmul_attrs(transpose_a: bool, transpose_b: bool, alpha: f64) -> Attrs {
    let mut a = Attrs::new();
    if transpose_a {
        a.insert("transpose_a".into(), AttrValue::Bool(true));
    }
    if transpose_b {
        a.insert("transpose_b".into(), AttrValue::Bool(true));
    }
    if alpha != 1.0 {
        a.insert("alpha".into(), AttrValue::Float(alpha));
    }
    a
}

/// State of the reverse sweep over the tape.
struct Backward<'b> {
    g: &'b mut GraphBuilder,
    /// The gradient accumulated so far for each tensor.
    grads: Vec<Option<T>>,
    /// How many more tape entries read each weight; its update waits for zero.
    pending_readers: Vec<usize>,
    sums: usize,
    opt: Optimizer,
}

impl Backward<'_> {
    fn run(g: &mut GraphBuilder, loss: T, opt: Optimizer) -> Result<(), ZooError> {
        let mut pending_readers = vec![0; g.tensors.len()];
        for entry in &g.tape {
            for &t in &entry.inputs {
                pending_readers[t.0] += 1;
            }
        }
        let tape = std::mem::take(&mut g.tape);
        let grads = vec![None; g.tensors.len()];
        let mut b = Backward { g, grads, pending_readers, sums: 0, opt };
        let loss_entry = tape.iter().rposition(|e| e.op == Op::SoftmaxCrossEntropy && e.outputs[0] == loss);
        let Some(loss_entry) = loss_entry else {
            return Err(ZooError::Shape("the loss must be the output of softmax_cross_entropy".into()));
        };
        for entry in tape[..=loss_entry].iter().rev() {
            b.entry(entry)?;
            for &t in &entry.inputs {
                b.pending_readers[t.0] -= 1;
                if b.g.tensors[t.0].role == Role::Weight && b.pending_readers[t.0] == 0 {
                    b.update(t)?;
                }
            }
        }
        Ok(())
    }

    fn wants(&self, t: T) -> bool {
        self.g.requires_grad[t.0]
    }

    fn grad_tensor(&mut self, of: T, suffix: &str) -> T {
        let decl = &self.g.tensors[of.0];
        let role = if decl.role == Role::Weight { Role::WeightGradient } else { Role::Gradient };
        let (name, shape, dtype) = (format!("{}.grad{suffix}", decl.name), decl.shape.clone(), decl.dtype);
        self.g.tensor(name, shape, dtype, role, false)
    }

    /// Adds a gradient contribution for `t`, summing with earlier ones.
    fn accumulate(&mut self, t: T, contribution: T) {
        match self.grads[t.0] {
            None => self.grads[t.0] = Some(contribution),
            Some(previous) => {
                self.sums += 1;
                let sum = self.grad_tensor(t, &format!(".sum{}", self.sums));
                let name = format!("{}.grad.sum{}", self.g.name_of(t), self.sums);
                self.g.push_node(name, Op::Add, Attrs::new(), &[previous, contribution], &[], &[sum]);
                self.grads[t.0] = Some(sum);
            }
        }
    }

    /// Emits one backward node; `outs` are the tensors whose gradients it produces.
    fn emit(&mut self, name: String, op: Op, attrs: Attrs, inputs: &[T], outs: &[T], suffix: &str) -> Vec<T> {
        let grads: Vec<T> = outs.iter().map(|&t| self.grad_tensor(t, suffix)).collect();
        self.g.push_node(name, op, attrs, inputs, &[], &grads);
        grads
    }

    fn entry(&mut self, e: &TapeEntry) -> Result<(), ZooError> {
        let dy = if e.op == Op::SoftmaxCrossEntropy {
            // The loss seeds the sweep: its backward needs no incoming gradient.
            let dlogits = self.emit(
                format!("{}.bwd", e.name),
                Op::SoftmaxCrossEntropyBackward,
                Attrs::new(),
                &[e.outputs[1], e.inputs[1]],
                &[e.inputs[0]],
                &format!(".from.{}", e.name),
            )[0];
            self.accumulate(e.inputs[0], dlogits);
            return Ok(());
        } else {
            match self.grads[e.outputs[0].0] {
                Some(dy) => dy,
                // Nothing downstream depends on this op's result.
                None => return Ok(()),
            }
        };
        let x = e.inputs[0];
        let from = format!(".from.{}", e.name);
        let bwd = format!("{}.bwd", e.name);
        match e.op {
            Op::Conv2d => {
                let w = e.inputs[1];
                if self.wants(x) {
                    let dx = self.emit(
                        format!("{}.bwd_data", e.name),
                        Op::Conv2dBackwardData,
                        e.attrs.clone(),
                        &[dy, w],
                        &[x],
                        &from,
                    )[0];
                    self.accumulate(x, dx);
                }
                let dw = self.emit(
                    format!("{}.bwd_filter", e.name),
                    Op::Conv2dBackwardFilter,
                    e.attrs.clone(),
                    &[x, dy],
                    &[w],
                    "",
                )[0];
                self.accumulate(w, dw);
            }
            Op::MatMul => {
                let (a, b) = (e.inputs[0], e.inputs[1]);
                let transpose_b = matches!(e.attrs.get("transpose_b"), Some(AttrValue::Bool(true)));
                let alpha = match e.attrs.get("alpha") {
                    Some(AttrValue::Float(f)) => *f,
                    _ => 1.0,
                };
                if self.wants(a) {
                    // C = A·B -> dA = dC·Bᵀ ;  C = A·Bᵀ -> dA = dC·B
                    let da = self.emit(
                        format!("{}.bwd_a", e.name),
                        Op::MatMul,
                        matmul_attrs(false, !transpose_b, alpha),
                        &[dy, b],
                        &[a],
                        &from,
                    )[0];
                    self.accumulate(a, da);
                }
                if self.wants(b) {
                    // C = A·B -> dB = Aᵀ·dC ;  C = A·Bᵀ -> dB = dCᵀ·A
                    let (inputs, attrs) = if transpose_b {
                        ([dy, a], matmul_attrs(true, false, alpha))
                    } else {
                        ([a, dy], matmul_attrs(true, false, alpha))
                    };
                    let suffix = if self.g.tensors[b.0].role == Role::Weight { "" } else { from.as_str() };
                    let db = self.emit(format!("{}.bwd_b", e.name), Op::MatMul, attrs, &inputs, &[b], suffix)[0];
                    self.accumulate(b, db);
                }
            }
            Op::BiasAdd => {
                let b = e.inputs[1];
                if self.wants(x) {
                    self.accumulate(x, dy);
                }
                let db = self.emit(bwd, Op::BiasGrad, e.attrs.clone(), &[dy], &[b], "")[0];
                self.accumulate(b, db);
            }
            Op::Relu | Op::Tanh | Op::Softmax | Op::Gelu => {
                let (op, saved) = match e.op {
                    Op::Relu => (Op::ReluBackward, e.outputs[0]),
                    Op::Tanh => (Op::TanhBackward, e.outputs[0]),
                    Op::Softmax => (Op::SoftmaxBackward, e.outputs[0]),
                    _ => (Op::GeluBackward, x),
                };
                let dx = self.emit(bwd, op, Attrs::new(), &[dy, saved], &[x], &from)[0];
                self.accumulate(x, dx);
            }
            Op::MaxPool2d => {
                let dx = self.emit(bwd, Op::MaxPool2dBackward, e.attrs.clone(), &[dy, e.outputs[1]], &[x], &from)[0];
                self.accumulate(x, dx);
            }
            Op::AvgPool2d => {
                let dx = self.emit(bwd, Op::AvgPool2dBackward, e.attrs.clone(), &[dy], &[x], &from)[0];
                self.accumulate(x, dx);
            }
            Op::GlobalAvgPool => {
                let dx = self.emit(bwd, Op::GlobalAvgPoolBackward, Attrs::new(), &[dy], &[x], &from)[0];
                self.accumulate(x, dx);
            }
            Op::BatchNorm | Op::LayerNorm => {
                let op = if e.op == Op::BatchNorm { Op::BatchNormBackward } else { Op::LayerNormBackward };
                let inputs = [dy, x, e.inputs[1], e.outputs[1], e.outputs[2]];
                let grads = self.emit(bwd, op, e.attrs.clone(), &inputs, &e.inputs, &from);
                for (&t, &g) in e.inputs.iter().zip(&grads) {
                    self.accumulate(t, g);
                }
            }
            Op::Add => {
                for &t in &e.inputs {
                    if self.wants(t) {
                        self.accumulate(t, dy);
                    }
                }
            }
            Op::Concat => {
                let sizes: Vec<i64> = e.inputs.iter().map(|&t| self.g.shape(t)[axis(&e.attrs)] as i64).collect();
                let mut attrs = e.attrs.clone();
                attrs.insert("sizes".into(), AttrValue::Ints(sizes));
                let grads = self.emit(bwd, Op::Split, attrs, &[dy], &e.inputs, &from);
                for (&t, &g) in e.inputs.iter().zip(&grads) {
                    if self.wants(t) {
                        self.accumulate(t, g);
                    }
                }
            }
            Op::Reshape => {
                let dx = self.emit(bwd, Op::Reshape, Attrs::new(), &[dy], &[x], &from)[0];
                self.accumulate(x, dx);
            }
            Op::Transpose => {
                let perm = match e.attrs.get("perm") {
                    Some(AttrValue::Ints(p)) => p.clone(),
                    _ => return Err(ZooError::Shape(format!("{}: transpose without perm", e.name))),
                };
                let mut inverse = vec![0i64; perm.len()];
                for (i, &p) in perm.iter().enumerate() {
                    inverse[p as usize] = i as i64;
                }
                let attrs = Attrs::from([("perm".to_string(), AttrValue::Ints(inverse))]);
                let dx = self.emit(bwd, Op::Transpose, attrs, &[dy], &[x], &from)[0];
                self.accumulate(x, dx);
            }
            Op::Embedding => {
                let table = e.inputs[1];
                let dt = self.emit(bwd, Op::EmbeddingBackward, Attrs::new(), &[dy, x], &[table], "")[0];
                self.accumulate(table, dt);
            }
            other => return Err(ZooError::Shape(format!("{}: no backward rule for {other}", e.name))),
        }
        Ok(())
    }

    fn update(&mut self, w: T) -> Result<(), ZooError> {
        let name = self.g.name_of(w).to_string();
        let Some(grad) = self.grads[w.0] else {
            return Err(ZooError::Shape(format!("weight '{name}' gets no gradient from the loss")));
        };
        let shape = self.g.shape(w).to_vec();
        let velocity = self.g.tensor(format!("{name}.velocity"), shape, DType::F32, Role::OptimizerState, false);
        let attrs = Attrs::from([
            ("lr".to_string(), AttrValue::Float(self.opt.lr)),
            ("momentum".to_string(), AttrValue::Float(self.opt.momentum)),
        ]);
        self.g.push_node(format!("{name}.sgd"), Op::SgdMomentum, attrs, &[grad], &[w, velocity], &[]);
        Ok(())
    }
}

fn axis(attrs: &Attrs) -> usize {
    match attrs.get("axis") {
        Some(AttrValue::Int(a)) => *a as usize,
        _ => 0,
    }
}
