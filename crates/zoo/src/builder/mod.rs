//! A graph builder that records the forward pass and then derives the backward pass and
//! the weight update from it, the way a framework's autograd would. Model definitions
//! only describe the forward computation.
//!
//! This file is the forward API: tensors, the ops a model definition calls, and the tape
//! they are recorded on. `backward` is the reverse sweep that `finish` runs over the tape.

mod backward;

use crate::ZooError;
use backward::Backward;
use placer_ir::ops::{conv_output_shape, pooling_output_shape};
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
pub struct Pooling {
    pub kernel: [u64; 2],
    pub stride: [u64; 2],
    pub padding: [u64; 2],
}

impl Pooling {
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

    /// `a + b`, elementwise. `b` may broadcast to `a` (numpy's rules, aligned from the
    /// right: no more dimensions than `a`, each equal to `a`'s or 1); the result has
    /// `a`'s shape. A `b` that does not broadcast fails validation in `finish`.
    pub fn add(&mut self, name: &str, a: T, b: T) -> T {
        let shape = self.shape(a).to_vec();
        self.unary(name, Op::Add, Attrs::new(), &[a, b], shape)
    }

    /// `a · b`, elementwise; `b` may broadcast to `a` as in [`GraphBuilder::add`].
    pub fn mul(&mut self, name: &str, a: T, b: T) -> T {
        let shape = self.shape(a).to_vec();
        self.unary(name, Op::Mul, Attrs::new(), &[a, b], shape)
    }

    /// `x` summed over the dimensions along which `shape` broadcasts to it (the
    /// reduction of a broadcast; `shape` must broadcast to `x`'s shape, or `finish`
    /// refuses the graph). Recorded on the tape, but it has no backward rule (that would
    /// be a broadcast, which only `add` and `mul` do): `finish` refuses a graph in which
    /// a gradient must flow back through it.
    pub fn sum_to(&mut self, name: &str, x: T, shape: &[u64]) -> T {
        self.unary(name, Op::SumTo, Attrs::new(), &[x], shape.to_vec())
    }

    /// `1 / (1 + e^−x)`; its backward reads the output.
    pub fn sigmoid(&mut self, name: &str, x: T) -> T {
        let shape = self.shape(x).to_vec();
        self.unary(name, Op::Sigmoid, Attrs::new(), &[x], shape)
    }

    /// `min(max(x, min), max)` (ReLU6 is `clip(x, 0, 6)`); its backward reads the input.
    /// `min > max` fails validation in `finish`.
    pub fn clip(&mut self, name: &str, x: T, min: f64, max: f64) -> T {
        let shape = self.shape(x).to_vec();
        let attrs =
            Attrs::from([("min".to_string(), AttrValue::Float(min)), ("max".to_string(), AttrValue::Float(max))]);
        self.unary(name, Op::Clip, attrs, &[x], shape)
    }

    /// `max(0, min(1, alpha · x + beta))` (ONNX's HardSigmoid, whose defaults are
    /// `alpha` 0.2 and `beta` 0.5; PyTorch's `hardsigmoid` is `alpha` 1/6, `beta` 0.5);
    /// its backward reads the input. A non-finite `alpha` or `beta` fails validation in
    /// `finish`.
    pub fn hard_sigmoid(&mut self, name: &str, x: T, alpha: f64, beta: f64) -> T {
        let shape = self.shape(x).to_vec();
        let attrs =
            Attrs::from([("alpha".to_string(), AttrValue::Float(alpha)), ("beta".to_string(), AttrValue::Float(beta))]);
        self.unary(name, Op::HardSigmoid, attrs, &[x], shape)
    }

    /// `x · max(0, min(1, x/6 + 1/2))` (ONNX's HardSwish, MobileNet-v3's activation); its
    /// backward reads the input.
    pub fn hard_swish(&mut self, name: &str, x: T) -> T {
        let shape = self.shape(x).to_vec();
        self.unary(name, Op::HardSwish, Attrs::new(), &[x], shape)
    }

    /// Dropout with probability `ratio` (in [0, 1), else `finish` refuses the graph):
    /// `y = x · mask / (1 − ratio)`. The mask is a second output, `{name}.mask`: u8, x's
    /// shape, a workspace tensor (saved for the backward, like max pooling's indices)
    /// that gets no gradient. Its `seed` is a hash of `name`, so every dropout node of a
    /// graph draws its own mask, and the same one in every build.
    pub fn dropout(&mut self, name: &str, x: T, ratio: f64) -> T {
        let shape = self.shape(x).to_vec();
        let dtype = self.dtype(x);
        let attrs = Attrs::from([
            ("ratio".to_string(), AttrValue::Float(ratio)),
            ("seed".to_string(), AttrValue::Int(name_seed(name))),
        ]);
        let outs = vec![("", shape.clone(), dtype, Role::Activation), (".mask", shape, DType::U8, Role::Workspace)];
        self.forward(name, Op::Dropout, attrs, &[x], outs)[0]
    }

    pub fn max_pool(&mut self, name: &str, x: T, kernel: u64, stride: u64, padding: u64) -> Result<T, ZooError> {
        self.max_pool2d(name, x, square_pooling(kernel, stride, padding))
    }

    pub fn max_pool2d(&mut self, name: &str, x: T, pooling: Pooling) -> Result<T, ZooError> {
        self.max_pool2d_indexed(name, x, pooling).map(|(y, _)| y)
    }

    /// [`GraphBuilder::max_pool2d`], also returning the indices of the maxima.
    pub fn max_pool2d_indexed(&mut self, name: &str, x: T, pooling: Pooling) -> Result<(T, T), ZooError> {
        let attrs = pooling.attrs();
        let shape = pooling_output_shape(&attrs, self.shape(x)).map_err(|e| ZooError::Shape(format!("{name}: {e}")))?;
        let outs =
            vec![("", shape.clone(), DType::F32, Role::Activation), (".indices", shape, DType::I32, Role::Workspace)];
        let out = self.forward(name, Op::MaxPool2d, attrs, &[x], outs);
        Ok((out[0], out[1]))
    }

    pub fn avg_pool(&mut self, name: &str, x: T, kernel: u64, stride: u64, padding: u64) -> Result<T, ZooError> {
        self.avg_pool2d(name, x, square_pooling(kernel, stride, padding), false)
    }

    /// `count_include_pad` divides by the whole window at the borders, padding included.
    pub fn avg_pool2d(&mut self, name: &str, x: T, pooling: Pooling, count_include_pad: bool) -> Result<T, ZooError> {
        let mut attrs = pooling.attrs();
        if count_include_pad {
            attrs.insert("count_include_pad".into(), AttrValue::Bool(true));
        }
        let shape = pooling_output_shape(&attrs, self.shape(x)).map_err(|e| ZooError::Shape(format!("{name}: {e}")))?;
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

    /// RMS normalisation over the last axis with a learned scale (`{name}.gamma`).
    pub fn rms_norm(&mut self, name: &str, x: T, epsilon: f64) -> T {
        let d = self.shape(x).last().copied().unwrap_or(1);
        let gamma = self.weight(&format!("{name}.gamma"), &[d]);
        self.rms_norm_with(name, x, gamma, epsilon)
    }

    /// RMS normalisation over the last axis (RMSNorm of T5 and Llama, onnxruntime's
    /// SimplifiedLayerNormalization) with an existing scale: `y = x · inv_rms · gamma`.
    /// The saved `{name}.rrms` (the inverse RMS per row, x's shape without the last
    /// axis) is a workspace tensor, like layer norm's statistics.
    pub fn rms_norm_with(&mut self, name: &str, x: T, gamma: T, epsilon: f64) -> T {
        let shape = self.shape(x).to_vec();
        let rows = shape.split_last().map(|(_, r)| r.to_vec()).unwrap_or_default();
        let dtype = self.dtype(x);
        let outs = vec![("", shape, dtype, Role::Activation), (".rrms", rows, dtype, Role::Workspace)];
        self.forward(name, Op::RmsNorm, epsilon_attr(epsilon), &[x, gamma], outs)[0]
    }

    pub fn concat(&mut self, name: &str, xs: &[T], axis: usize) -> T {
        if xs.len() == 1 {
            return xs[0];
        }
        let mut shape = self.shape(xs[0]).to_vec();
        shape[axis] = xs.iter().map(|&x| self.shape(x)[axis]).sum();
        self.unary(name, Op::Concat, axis_attr(axis as i64), xs, shape)
    }

    /// Splits `x` along `axis` into parts of `sizes` (named `{name}.0`, `{name}.1`, …).
    /// Its backward concatenates the parts' gradients, so every part must be used.
    pub fn split(&mut self, name: &str, x: T, axis: usize, sizes: &[u64]) -> Vec<T> {
        let (shape, dtype) = (self.shape(x).to_vec(), self.dtype(x));
        let suffixes: Vec<String> = (0..sizes.len()).map(|i| format!(".{i}")).collect();
        let outs = suffixes
            .iter()
            .zip(sizes)
            .map(|(suffix, &size)| {
                let mut part = shape.clone();
                part[axis] = size;
                (suffix.as_str(), part, dtype, Role::Activation)
            })
            .collect();
        let mut attrs = axis_attr(axis as i64);
        attrs.insert("sizes".into(), AttrValue::Ints(sizes.iter().map(|&s| s as i64).collect()));
        self.forward(name, Op::Split, attrs, &[x], outs)
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

    /// `erf(x)` elementwise (a model's own `torch.erf`, outside a GELU).
    pub fn erf(&mut self, name: &str, x: T) -> T {
        let shape = self.shape(x).to_vec();
        self.unary(name, Op::Erf, Attrs::new(), &[x], shape)
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

/// A dropout node's seed: FNV-1a of its name (as a non-negative i64, for the attribute).
fn name_seed(name: &str) -> i64 {
    let hash = name.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3));
    (hash >> 1) as i64
}

fn square_pooling(kernel: u64, stride: u64, padding: u64) -> Pooling {
    Pooling { kernel: [kernel; 2], stride: [stride; 2], padding: [padding; 2] }
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
