//! The reverse sweep: walks the tape from the loss back, emits each op's backward nodes,
//! sums gradients that arrive more than once with `add`, and appends a weight's
//! SGD-momentum update as soon as its last reader has been swept.

use super::{GraphBuilder, Optimizer, T, TapeEntry, matmul_attrs};
use crate::ZooError;
use placer_ir::{AttrValue, Attrs, DType, Op, Role};

/// State of the reverse sweep over the tape.
pub(super) struct Backward<'b> {
    g: &'b mut GraphBuilder,
    /// The gradient accumulated so far for each tensor.
    grads: Vec<Option<T>>,
    /// How many more tape entries read each weight; its update waits for zero.
    pending_readers: Vec<usize>,
    sums: usize,
    opt: Optimizer,
}

impl Backward<'_> {
    pub(super) fn run(g: &mut GraphBuilder, loss: T, opt: Optimizer) -> Result<(), ZooError> {
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
        let (base, shape, dtype) = (format!("{}.grad{suffix}", decl.name), decl.shape.clone(), decl.dtype);
        // A weight read by several layers (tied embeddings, an initializer shared by
        // identical layers) gets one contribution per reader before they are summed.
        let name = self.g.unique_name(&base);
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

    /// A split's gradient is the concat of its parts' gradients, which needs all of them.
    fn split(&mut self, e: &TapeEntry) -> Result<(), ZooError> {
        let x = e.inputs[0];
        let grads: Vec<Option<T>> = e.outputs.iter().map(|t| self.grads[t.0]).collect();
        if !self.wants(x) || grads.iter().all(Option::is_none) {
            return Ok(());
        }
        let Some(parts) = grads.into_iter().collect::<Option<Vec<T>>>() else {
            return Err(ZooError::Shape(format!(
                "{}: a part of the split takes no part in the loss, so its gradient would be zeros, which placer cannot write",
                e.name
            )));
        };
        let attrs = Attrs::from([("axis".to_string(), e.attrs.get("axis").cloned().unwrap_or(AttrValue::Int(0)))]);
        let dx = self.emit(format!("{}.bwd", e.name), Op::Concat, attrs, &parts, &[x], &format!(".from.{}", e.name))[0];
        self.accumulate(x, dx);
        Ok(())
    }

    /// Emits one backward node; `outs` are the tensors whose gradients it produces.
    fn emit(&mut self, name: String, op: Op, attrs: Attrs, inputs: &[T], outs: &[T], suffix: &str) -> Vec<T> {
        let grads: Vec<T> = outs.iter().map(|&t| self.grad_tensor(t, suffix)).collect();
        self.g.push_node(name, op, attrs, inputs, &[], &grads);
        grads
    }

    fn entry(&mut self, e: &TapeEntry) -> Result<(), ZooError> {
        if e.op == Op::Split {
            return self.split(e);
        }
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
            Op::Relu
            | Op::Tanh
            | Op::Sigmoid
            | Op::Softmax
            | Op::Gelu
            | Op::Erf
            | Op::Clip
            | Op::HardSigmoid
            | Op::HardSwish => {
                let (op, saved) = match e.op {
                    Op::Relu => (Op::ReluBackward, e.outputs[0]),
                    Op::Tanh => (Op::TanhBackward, e.outputs[0]),
                    Op::Sigmoid => (Op::SigmoidBackward, e.outputs[0]),
                    Op::Softmax => (Op::SoftmaxBackward, e.outputs[0]),
                    Op::Clip => (Op::ClipBackward, x),
                    Op::HardSigmoid => (Op::HardSigmoidBackward, x),
                    Op::HardSwish => (Op::HardSwishBackward, x),
                    Op::Erf => (Op::ErfBackward, x),
                    _ => (Op::GeluBackward, x),
                };
                // Only clip (its bounds) and hard sigmoid (its alpha and beta) have
                // attributes, which their backward takes too.
                let dx = self.emit(bwd, op, e.attrs.clone(), &[dy, saved], &[x], &from)[0];
                self.accumulate(x, dx);
            }
            Op::Dropout => {
                let attrs: Attrs =
                    e.attrs.iter().filter(|(k, _)| *k == "ratio").map(|(k, v)| (k.clone(), v.clone())).collect();
                let dx = self.emit(bwd, Op::DropoutBackward, attrs, &[dy, e.outputs[1]], &[x], &from)[0];
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
            Op::RmsNorm => {
                let inputs = [dy, x, e.inputs[1], e.outputs[1]];
                let grads = self.emit(bwd, Op::RmsNormBackward, e.attrs.clone(), &inputs, &e.inputs, &from);
                for (&t, &g) in e.inputs.iter().zip(&grads) {
                    self.accumulate(t, g);
                }
            }
            Op::Add | Op::Mul => self.add_or_mul(e, dy),
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

    /// The backward of `add` and `mul`, whose second operand `b` may be broadcast:
    /// `add`: da = dy, db = dy (or `sum_to(dy)`); `mul`: da = dy · b (b broadcast again),
    /// db = dy · a (or that product at a's shape, then `sum_to`). Only operands that
    /// want a gradient get one.
    fn add_or_mul(&mut self, e: &TapeEntry, dy: T) {
        let (a, b) = (e.inputs[0], e.inputs[1]);
        let broadcast = self.g.shape(a) != self.g.shape(b);
        let from = format!(".from.{}", e.name);
        if self.wants(a) {
            let da = if e.op == Op::Add {
                dy
            } else {
                self.emit(format!("{}.bwd_a", e.name), Op::Mul, Attrs::new(), &[dy, b], &[a], &from)[0]
            };
            self.accumulate(a, da);
        }
        if !self.wants(b) {
            return;
        }
        let suffix = if self.g.tensors[b.0].role == Role::Weight { "" } else { from.as_str() };
        let db = match (e.op, broadcast) {
            (Op::Add, false) => dy,
            (Op::Add, true) => self.emit(format!("{}.bwd_b", e.name), Op::SumTo, Attrs::new(), &[dy], &[b], suffix)[0],
            (_, false) => self.emit(format!("{}.bwd_b", e.name), Op::Mul, Attrs::new(), &[dy, a], &[b], suffix)[0],
            (_, true) => {
                // dy · a at a's shape first, then reduced to b's.
                let base = format!("{}.grad{from}.full", self.g.name_of(b));
                let (name, shape, dtype) = (self.g.unique_name(&base), self.g.shape(a).to_vec(), self.g.dtype(a));
                let full = self.g.tensor(name, shape, dtype, Role::Gradient, false);
                self.g.push_node(format!("{}.bwd_b", e.name), Op::Mul, Attrs::new(), &[dy, a], &[], &[full]);
                self.emit(format!("{}.bwd_b.sum", e.name), Op::SumTo, Attrs::new(), &[full], &[b], suffix)[0]
            }
        };
        self.accumulate(b, db);
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
