//! One function per ONNX op family: forward ops as placer ops, recorded on the
//! builder's tape so that the backward pass can be derived.

use super::consts::{self, axis, int_operand};
use super::elementwise;
use super::{Fail, Lowered, Lowerer, bad, unsupported};
use crate::graph::op_label;
use crate::proto::NodeProto;
use crate::values::{Attrs, Constant, Elem, Tensor, Value, constant_of, tensor};
use placer_ir::DType;
use placer_zoo::T;

/// Lowers one node of a forward graph.
pub(crate) fn forward<'m>(l: &mut Lowerer<'m>, node: &'m NodeProto) -> Lowered {
    match node.domain() {
        "" | "ai.onnx" => {}
        _ => return unsupported(op_label(node)),
    }
    let all_const = node.input.iter().filter(|n| !n.is_empty()).all(|n| matches!(l.value(n), Some(Value::Const(_))));
    match node.op_type() {
        "Constant" => constant(node),
        "ConstantOfShape" => constant_of_shape(l, node),
        "Shape" => consts::shape_op(l, node),
        "Unsqueeze" => consts::unsqueeze(l, node),
        "Squeeze" => consts::squeeze(l, node),
        "Flatten" => consts::flatten(l, node),
        "Reshape" => consts::reshape(l, node),
        "Identity" => Ok(vec![l.operand(node, 0)?]),
        "Dropout" => dropout(l, node),
        "Gather" => super::gather::gather(l, node),
        "Transpose" if all_const => {
            let values = consts::fold(l, node)?;
            l.note_transpose(node);
            Ok(values)
        }
        "Expand" if matches!(l.value(&node.input[0]), Some(Value::Const(c)) if elementwise::is_weight(l, c)) => {
            let Some(Value::Const(w)) = l.value(&node.input[0]).cloned() else { return bad("Expand without a weight") };
            elementwise::expand_weight(l, node, &w)
        }
        _ if consts::is_data_node(l, node) => consts::data_node(l, node),
        _ if all_const && !node.input.is_empty() => consts::fold(l, node),
        "Cast" | "CastLike" => cast(l, node),
        "Conv" => super::window::conv(l, node),
        "Relu" => unary(l, node, |g, name, x| g.relu(name, x)),
        "Tanh" => unary(l, node, |g, name, x| g.tanh(name, x)),
        // An Erf outside a GELU (which fuse.rs makes one gelu).
        "Erf" => unary(l, node, |g, name, x| g.erf(name, x)),
        "Gelu" => unary(l, node, |g, name, x| g.gelu(name, x)),
        "MaxPool" | "AveragePool" => super::window::pooling(l, node),
        "GlobalAveragePool" => super::window::global_avg_pool(l, node),
        "ReduceMean" => reduce_mean(l, node),
        "BatchNormalization" => {
            let x = l.tensor_operand(node, 0)?;
            let (scale, shift) = (l.const_operand(node, 1)?, l.const_operand(node, 2)?);
            batch_norm(l, node, &x, &scale, &shift, &node.output[0])
        }
        "LayerNormalization" => layer_norm(l, node),
        "Softmax" => softmax(l, node),
        "Gemm" => gemm(l, node),
        "MatMul" => {
            let (a, b) = (l.operand(node, 0)?, l.operand(node, 1)?);
            matmul(l, &a, &b, false, 1.0, &node.output[0]).map(|v| vec![v])
        }
        "Add" => add(l, node),
        "Sub" | "Mul" | "Div" => elementwise::binary(l, node),
        "Where" => elementwise::where_(l, node),
        "Slice" => super::slice::slice(l, node),
        "SplitToSequence" => super::slice::split_to_sequence(l, node),
        "SequenceAt" => super::slice::sequence_at(l, node),
        "Split" => super::slice::split(l, node),
        "Neg" => neg(l, node),
        "Size" => size(l, node),
        "Clip" => elementwise::clip(l, node),
        "Sigmoid" => unary(l, node, |g, name, x| g.sigmoid(name, x)),
        "HardSwish" => unary(l, node, |g, name, x| g.hard_swish(name, x)),
        "HardSigmoid" => {
            let x = l.tensor_operand(node, 0)?;
            let (alpha, beta) = (Attrs(node).float("alpha", 0.2), Attrs(node).float("beta", 0.5));
            let xt = l.exact(&x);
            let name = l.name_for(&node.output[0]);
            let y = l.g.hard_sigmoid(&name, xt, alpha, beta);
            Ok(vec![tensor(y, x.shape)])
        }
        "Sum" => sum(l, node),
        "Concat" => concat(l, node),
        "Transpose" => transpose(l, node),
        _ => unsupported(op_label(node)),
    }
}

/// Ops the importer has a rule for (in some forms); anything else is unsupported outright.
const KNOWN: &[&str] = &[
    "Constant",
    "ConstantOfShape",
    "Shape",
    "Unsqueeze",
    "Squeeze",
    "Flatten",
    "Reshape",
    "Identity",
    "Dropout",
    "Cast",
    "CastLike",
    "Conv",
    "Relu",
    "Tanh",
    "Gelu",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "BatchNormalization",
    "LayerNormalization",
    "Softmax",
    "Gemm",
    "MatMul",
    "Add",
    "Sum",
    "Concat",
    "Transpose",
    "Gather",
    "Sub",
    "Mul",
    "Div",
    "Erf",
    "Where",
    "Slice",
    "SplitToSequence",
    "SequenceAt",
    "Clip",
    "Sigmoid",
    "HardSigmoid",
    "HardSwish",
    "ReduceMean",
    "Pow",
    "Sqrt",
];

pub(crate) fn known(node: &NodeProto) -> bool {
    matches!(node.domain(), "" | "ai.onnx") && KNOWN.contains(&node.op_type())
}

fn constant(node: &NodeProto) -> Lowered {
    let a = Attrs(node);
    let out = node.output[0].as_str();
    if let Some(t) = a.tensor("value") {
        return Ok(vec![Value::Const(constant_of(t, out))]);
    }
    let (data, elem, shape) = if a.has("value_float") {
        (vec![a.float("value_float", 0.0)], Elem::Float(DType::F32), vec![])
    } else if a.has("value_int") {
        (vec![a.int("value_int", 0) as f64], Elem::Int(DType::I64), vec![])
    } else if let Some(v) = a.ints("value_ints") {
        let n = v.len() as u64;
        (v.into_iter().map(|x| x as f64).collect(), Elem::Int(DType::I64), vec![n])
    } else {
        return unsupported("Constant without a tensor, float or int value");
    };
    Ok(vec![Value::Const(Constant { shape, elem, data: Some(data), origin: out.to_string() })])
}

fn constant_of_shape(l: &Lowerer<'_>, node: &NodeProto) -> Lowered {
    let dims = int_operand(l, node, 0)?;
    if dims.iter().any(|&d| d < 0) {
        return bad(format!("negative dimension in {dims:?}"));
    }
    let shape: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
    let fill = Attrs(node).tensor("value").map(|t| constant_of(t, ""));
    let elem = fill.as_ref().map(|f| f.elem).unwrap_or(Elem::Float(DType::F32));
    let numel: u64 = shape.iter().product();
    let data = match fill.and_then(|f| f.scalar()) {
        Some(x) if numel <= crate::values::MAX_READ_ELEMENTS => Some(vec![x; numel as usize]),
        None if numel <= crate::values::MAX_READ_ELEMENTS => Some(vec![0.0; numel as usize]),
        _ => None,
    };
    Ok(vec![Value::Const(Constant { shape, elem, data, origin: node.output[0].clone() })])
}

/// Dropout in training mode (the `training_mode` operand true, as a training-mode export
/// writes it) is placer's `dropout`, whose mask the backward reads; in inference mode it
/// passes its input on, as the exported model does.
fn dropout(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let training = match l.optional(node, 2)? {
        Some(Value::Const(c)) => c.scalar().is_some_and(|t| t != 0.0),
        Some(_) => return unsupported("Dropout with a computed training_mode"),
        None => false,
    };
    if !training {
        if node.output.get(1).is_some_and(|m| !m.is_empty() && !l.topo.readers_of(m).is_empty()) {
            return unsupported("Dropout in inference mode whose mask is used");
        }
        l.note("Dropout in inference mode imported as identity, as the exported model runs it");
        return Ok(vec![l.operand(node, 0)?, Value::Poisoned]);
    }
    let x = l.tensor_operand(node, 0)?;
    let ratio = match l.optional(node, 1)? {
        None => 0.5,
        Some(Value::Const(c)) => {
            c.scalar().map_or_else(|| unsupported("a dropout ratio the importer does not know"), Ok)?
        }
        Some(_) => return unsupported("a computed dropout ratio"),
    };
    let xt = l.exact(&x);
    let name = l.name_for(&node.output[0]);
    let y = l.g.dropout(&name, xt, ratio);
    l.note("Dropout in training mode imported as dropout with its u8 mask");
    Ok(vec![tensor(y, x.shape), Value::Poisoned])
}

fn cast(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    // A constant cast like an activation (the dynamo exporter's unoptimised attention
    // scale): the constant, in the activation's element type.
    if let (Value::Const(c), Some(Value::Tensor(like))) = (l.operand(node, 0)?, l.optional(node, 1)?) {
        let elem = match l.dtype_of(like.t) {
            d @ (DType::I32 | DType::I64) => Elem::Int(d),
            d => Elem::Float(d),
        };
        let data = match elem {
            Elem::Int(_) => c.data.map(|d| d.into_iter().map(f64::trunc).collect()),
            _ => c.data,
        };
        return Ok(vec![Value::Const(Constant { elem, data, origin: node.output[0].clone(), ..c })]);
    }
    let x = l.tensor_operand(node, 0)?;
    let to = match l.optional(node, 1)? {
        Some(Value::Tensor(like)) if node.op_type() == "CastLike" => Some(l.dtype_of(like.t)),
        Some(Value::Const(like) | Value::Data(like)) if node.op_type() == "CastLike" => like.elem.dtype(),
        _ => Elem::from_onnx(Attrs(node).int("to", 1) as i32).dtype(),
    };
    if to == Some(l.dtype_of(x.t)) {
        return Ok(vec![Value::Tensor(x)]);
    }
    if l.g.role(x.t) == placer_ir::Role::Input {
        // Typically an attention mask turned into an additive bias.
        return unsupported(format!(
            "Cast of graph input '{}' to another dtype (if it is an attention mask: --drop-input {0})",
            l.g.name_of(x.t)
        ));
    }
    unsupported("Cast of an activation to another dtype")
}

/// An elementwise op, applied to the placer tensor whatever view ONNX has of it.
fn unary(l: &mut Lowerer<'_>, node: &NodeProto, op: fn(&mut placer_zoo::GraphBuilder, &str, T) -> T) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    let name = l.name_for(&node.output[0]);
    let y = op(&mut l.g, &name, x.t);
    Ok(vec![tensor(y, x.shape)])
}

/// ReduceMean over H and W of an [N, C, H, W] activation (the dynamo exporter's
/// global average pool).
fn reduce_mean(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    let rank = x.shape.len();
    let axes: Vec<usize> = match consts::axes(l, node)? {
        Some(a) => a.iter().map(|&v| axis(v, rank)).collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    if rank != 4 || !(axes.len() == 2 && axes.contains(&2) && axes.contains(&3)) {
        return unsupported("ReduceMean other than over H and W of an [N, C, H, W] activation");
    }
    let xt = l.exact(&x);
    let name = l.name_for(&node.output[0]);
    let y = l.g.global_avg_pool(&name, xt);
    let keep = Attrs(node).int("keepdims", 1) == 1;
    let shape = if keep { vec![x.shape[0], x.shape[1], 1, 1] } else { vec![x.shape[0], x.shape[1]] };
    Ok(vec![tensor(y, shape)])
}

pub(crate) fn batch_norm(
    l: &mut Lowerer<'_>,
    node: &NodeProto,
    x: &Tensor,
    scale: &Constant,
    shift: &Constant,
    out: &str,
) -> Lowered {
    if x.shape.len() < 2 {
        return bad("BatchNormalization needs an input of rank ≥ 2");
    }
    if node.output.iter().skip(1).any(|o| !o.is_empty() && !l.topo.readers_of(o).is_empty()) {
        return unsupported("BatchNormalization whose running statistics are read");
    }
    let c = x.shape[1];
    let xt = l.exact(x);
    let (gamma, beta) = (l.weight(scale, &[c])?, l.weight(shift, &[c])?);
    l.note("BatchNormalization imported in training mode (batch statistics; running mean and variance not kept)");
    let name = l.name_for(out);
    let y = l.g.batch_norm_with(&name, xt, gamma, beta, Attrs(node).float("epsilon", 1e-5));
    Ok(vec![tensor(y, x.shape.clone())])
}

fn layer_norm(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    let rank = x.shape.len();
    if axis(Attrs(node).int("axis", -1), rank)? != rank - 1 {
        return unsupported("LayerNormalization over more than the last axis");
    }
    if node.output.iter().skip(1).any(|o| !o.is_empty() && !l.topo.readers_of(o).is_empty()) {
        return unsupported("LayerNormalization whose mean or inverse deviation is read");
    }
    let scale = l.const_operand(node, 1)?;
    let Some(Value::Const(shift)) = l.optional(node, 2)? else {
        return unsupported("LayerNormalization without a constant bias");
    };
    layer_norm_on(l, &x, &scale, &shift, Attrs(node).float("epsilon", 1e-5), &node.output[0])
}

/// Layer normalisation of `x` over its last axis with constant scale and shift.
pub(crate) fn layer_norm_on(
    l: &mut Lowerer<'_>,
    x: &Tensor,
    scale: &Constant,
    shift: &Constant,
    epsilon: f64,
    out: &str,
) -> Lowered {
    let Some(&d) = x.shape.last() else { return bad("LayerNorm of a scalar") };
    let (gamma, beta) = (l.weight(scale, &[d])?, l.weight(shift, &[d])?);
    // Normalising the last axis works on any view with the same last dimension.
    let xt = if l.g.shape(x.t).last() == Some(&d) { x.t } else { l.exact(x) };
    let name = l.name_for(out);
    let y = l.g.layer_norm_with(&name, xt, gamma, beta, epsilon);
    Ok(vec![tensor(y, x.shape.clone())])
}

fn softmax(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    let rank = x.shape.len();
    let default = if l.opset < 13 { 1 } else { -1 };
    if axis(Attrs(node).int("axis", default), rank)? != rank - 1 {
        return unsupported("Softmax over an axis other than the last");
    }
    let d = x.shape[rank - 1];
    let xt = if l.g.shape(x.t).last() == Some(&d) { x.t } else { l.exact(&x) };
    let name = l.name_for(&node.output[0]);
    let y = l.g.softmax(&name, xt);
    Ok(vec![tensor(y, x.shape)])
}

fn gemm(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let a = Attrs(node);
    if a.int("transA", 0) != 0 {
        return unsupported("Gemm with transA");
    }
    let (x, w) = (l.operand(node, 0)?, l.operand(node, 1)?);
    let out = &node.output[0];
    let bias = l.optional(node, 2)?;
    let mm_name = if bias.is_some() { format!("{out}.matmul") } else { out.clone() };
    let alpha = a.float("alpha", 1.0);
    let Value::Tensor(y) = matmul(l, &x, &w, a.int("transB", 0) == 1, alpha, &mm_name)? else {
        return bad("Gemm produced no tensor");
    };
    match bias {
        None => Ok(vec![Value::Tensor(y)]),
        Some(Value::Const(c)) => {
            if a.float("beta", 1.0) != 1.0 {
                l.note("Gemm beta ignored: it scales a trained bias, so it changes only the bias's initial value");
            }
            let n = *y.shape.last().unwrap_or(&1);
            if c.numel() != n {
                return unsupported("Gemm with a bias that is not one value per output column");
            }
            bias_add(l, &y, &c, 1, out).map(|v| vec![v])
        }
        Some(_) => unsupported("Gemm with a computed bias"),
    }
}

/// `a · b`. A rank-r activation times a 2-D weight is computed as one 2-D product over
/// the flattened leading dimensions, which the result keeps as a view.
pub(crate) fn matmul(
    l: &mut Lowerer<'_>,
    a: &Value,
    b: &Value,
    transpose_b: bool,
    alpha: f64,
    out: &str,
) -> Result<Value, Fail> {
    let Value::Tensor(a) = a else { return unsupported("MatMul with a constant left operand") };
    let (k, rows) = match a.shape.split_last() {
        Some((&k, lead)) if !lead.is_empty() => (k, lead.iter().product::<u64>()),
        _ => return unsupported("MatMul of a vector"),
    };
    let name = l.name_for(out);
    let (y, shape) = match b {
        Value::Const(w) => {
            let (kk, n) = match (w.shape.as_slice(), transpose_b) {
                (&[kk, n], false) | (&[n, kk], true) => (kk, n),
                _ => return unsupported("MatMul with a weight that is not 2-D"),
            };
            if kk != k {
                return bad(format!("inner dimensions {k} and {kk} differ"));
            }
            let (wt, flipped) = l.weight_maybe_transposed(w)?;
            let at = l.shaped(a.t, &[rows, k]);
            let y = l.g.matmul(&name, at, wt, transpose_b != flipped, alpha).or_else(|e| bad(e.to_string()))?;
            let mut shape = a.shape.clone();
            *shape.last_mut().unwrap_or(&mut 0) = n;
            (y, shape)
        }
        Value::Tensor(bt) => {
            let r = a.shape.len();
            if bt.shape.len() != r || bt.shape[..r - 2] != a.shape[..r - 2] {
                return unsupported("MatMul with broadcasting");
            }
            let (at, btt) = (l.exact(a), l.exact(bt));
            let y = l.g.matmul(&name, at, btt, transpose_b, alpha).or_else(|e| bad(e.to_string()))?;
            let shape = l.g.shape(y).to_vec();
            (y, shape)
        }
        Value::Data(_) => return unsupported("MatMul by data"),
        Value::Poisoned | Value::Dropped => return bad("MatMul of a value that is not an activation or a constant"),
    };
    Ok(tensor(y, shape))
}

/// `x + c` where the constant varies along one axis only: a bias.
fn bias_add(l: &mut Lowerer<'_>, x: &Tensor, c: &Constant, axis_: usize, out: &str) -> Result<Value, Fail> {
    let n = x.shape[axis_];
    let b = l.weight(c, &[n])?;
    let placer_shape = l.g.shape(x.t).to_vec();
    // The last axis survives any view that keeps the last dimension.
    let (xt, ax) = if axis_ == x.shape.len() - 1 && placer_shape.last() == Some(&n) {
        (x.t, placer_shape.len() - 1)
    } else {
        (l.exact(x), axis_)
    };
    let name = l.name_for(out);
    let y = l.g.bias_add(&name, xt, b, ax as i64);
    Ok(tensor(y, x.shape.clone()))
}

/// The one axis along which a broadcast constant of `c_shape` varies against `x_shape`.
fn bias_axis(x_shape: &[u64], c_shape: &[u64]) -> Option<usize> {
    if c_shape.len() > x_shape.len() {
        return None;
    }
    let offset = x_shape.len() - c_shape.len();
    let varying: Vec<usize> = (0..c_shape.len()).filter(|&i| c_shape[i] != 1).map(|i| i + offset).collect();
    match varying.as_slice() {
        [ax] if c_shape[ax - offset] == x_shape[*ax] => Some(*ax),
        _ => None,
    }
}

fn add(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let (a, b) = (l.operand(node, 0)?, l.operand(node, 1)?);
    let out = &node.output[0];
    match (&a, &b) {
        (Value::Tensor(x), Value::Tensor(y)) if x.shape == y.shape => add_tensors(l, x, y, out).map(|v| vec![v]),
        (Value::Tensor(x), Value::Const(c)) | (Value::Const(c), Value::Tensor(x)) if elementwise::is_weight(l, c) => {
            match bias_axis(&x.shape, &c.shape) {
                Some(ax) => bias_add(l, x, c, ax, out).map(|v| vec![v]),
                None => elementwise::binary(l, node),
            }
        }
        _ => elementwise::binary(l, node),
    }
}

fn add_tensors(l: &mut Lowerer<'_>, x: &Tensor, y: &Tensor, out: &str) -> Result<Value, Fail> {
    if x.shape != y.shape {
        return unsupported("Add with broadcasting between activations");
    }
    // Both in the placer shape of the first operand, whatever the views.
    let target = l.g.shape(x.t).to_vec();
    let yt = l.shaped(y.t, &target);
    let name = l.name_for(out);
    let z = l.g.add(&name, x.t, yt);
    Ok(tensor(z, x.shape.clone()))
}

fn sum(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let mut acc = l.tensor_operand(node, 0)?;
    let n = node.input.len();
    for k in 1..n {
        let next = l.tensor_operand(node, k)?;
        let out = if k + 1 == n { node.output[0].clone() } else { format!("{}.partial{k}", node.output[0]) };
        let Value::Tensor(t) = add_tensors(l, &acc, &next, &out)? else { return bad("Sum produced no tensor") };
        acc = t;
    }
    Ok(vec![Value::Tensor(acc)])
}

fn concat(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    // A float constant as tall as the export's batch beside activations: a weight the
    // exporter expanded to the batch and folded (ViT's class token, dynamo).
    let values: Vec<Value> = (0..node.input.len()).map(|k| l.operand(node, k)).collect::<Result<_, _>>()?;
    let batch = values.iter().find_map(|v| match v {
        Value::Tensor(t) => t.shape.first().copied(),
        _ => None,
    });
    let exported = l.rebatch.map(|(file, _)| file).or(batch);
    let mut parts = Vec::with_capacity(values.len());
    for (k, v) in values.iter().enumerate() {
        parts.push(match (v, batch) {
            (Value::Const(c), Some(b)) if matches!(c.elem, Elem::Float(_)) && c.shape.first() == exported.as_ref() => {
                let out = format!("{}.part{k}", node.output[0]);
                elementwise::unfold_batch(l, c, b, &out)?
            }
            _ => l.tensor_operand(node, k)?,
        });
    }
    let rank = parts[0].shape.len();
    let ax = axis(Attrs(node).int("axis", 1), rank)?;
    let ts: Vec<T> = parts.iter().map(|p| l.exact(p)).collect();
    let name = l.name_for(&node.output[0]);
    let y = l.g.concat(&name, &ts, ax);
    let shape = l.g.shape(y).to_vec();
    Ok(vec![tensor(y, shape)])
}

fn transpose(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    let rank = x.shape.len();
    let perm: Vec<usize> = match Attrs(node).ints("perm") {
        Some(p) => p.iter().map(|&a| axis(a, rank)).collect::<Result<_, _>>()?,
        None => (0..rank).rev().collect(),
    };
    let xt = l.exact(&x);
    let name = l.name_for(&node.output[0]);
    let y = l.g.transpose(&name, xt, &perm);
    let shape = l.g.shape(y).to_vec();
    Ok(vec![tensor(y, shape)])
}

/// Size of any value is known from its shape.
pub(crate) fn size(l: &Lowerer<'_>, node: &NodeProto) -> Lowered {
    let v = l.operand(node, 0)?;
    let n: u64 = consts::shape_of(&v).iter().product();
    Ok(vec![Value::Const(Constant {
        shape: vec![],
        elem: Elem::Int(DType::I64),
        data: Some(vec![n as f64]),
        origin: node.output[0].clone(),
    })])
}

/// -x of an activation: a `mul` by a fed -1 (rotary embeddings' rotate_half).
pub(crate) fn neg(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    let minus = Constant {
        shape: vec![1],
        elem: Elem::Float(DType::F32),
        data: None,
        origin: format!("{}.minus_one", node.output[0]),
    };
    let xt = l.exact(&x);
    let m = l.feed(&minus, DType::F32);
    l.note("Neg of an activation imported as mul by a fed -1");
    let name = l.name_for(&node.output[0]);
    let y = l.g.mul(&name, xt, m);
    Ok(vec![tensor(y, x.shape)])
}
