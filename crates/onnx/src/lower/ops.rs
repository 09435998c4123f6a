//! One function per ONNX op family: forward ops as placer ops, recorded on the
//! builder's tape so that the backward pass can be derived.

use super::consts::{self, axis, int_operand, shape_of};
use super::elementwise;
use super::{Fail, Lowered, Lowerer, bad, unsupported};
use crate::graph::op_label;
use crate::proto::NodeProto;
use crate::values::{Attrs, Constant, Elem, Tensor, Value, constant_of};
use placer_zoo::{Conv, Pooling, T};

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
        "Gather" => gather(l, node),
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
        "Conv" => conv(l, node),
        "Relu" => unary(l, node, |g, name, x| g.relu(name, x)),
        "Tanh" => unary(l, node, |g, name, x| g.tanh(name, x)),
        "Gelu" => unary(l, node, |g, name, x| g.gelu(name, x)),
        "MaxPool" | "AveragePool" => pooling(l, node),
        "GlobalAveragePool" => global_avg_pool(l, node),
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
        "Split" | "Neg" | "Size" => super::ort::lower(l, node).unwrap_or_else(|| unsupported(op_label(node))),
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
    matches!(node.domain(), "" | "ai.onnx") && KNOWN.contains(&node.op_type()) || super::training::known(node)
}

fn tensor(t: T, shape: Vec<u64>) -> Value {
    Value::Tensor(Tensor { t, shape })
}

fn constant(node: &NodeProto) -> Lowered {
    let a = Attrs(node);
    let out = node.output[0].as_str();
    if let Some(t) = a.tensor("value") {
        return Ok(vec![Value::Const(constant_of(t, out))]);
    }
    let (data, elem, shape) = if a.has("value_float") {
        (vec![a.float("value_float", 0.0)], Elem::Float(placer_ir::DType::F32), vec![])
    } else if a.has("value_int") {
        (vec![a.int("value_int", 0) as f64], Elem::Int(placer_ir::DType::I64), vec![])
    } else if let Some(v) = a.ints("value_ints") {
        let n = v.len() as u64;
        (v.into_iter().map(|x| x as f64).collect(), Elem::Int(placer_ir::DType::I64), vec![n])
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
    let elem = fill.as_ref().map(|f| f.elem).unwrap_or(Elem::Float(placer_ir::DType::F32));
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
            d @ (placer_ir::DType::I32 | placer_ir::DType::I64) => Elem::Int(d),
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

fn pair(v: Option<Vec<i64>>, default: u64, what: &str) -> Result<[u64; 2], Fail> {
    match v.as_deref() {
        None => Ok([default; 2]),
        Some(&[a, b]) if a >= 0 && b >= 0 => Ok([a as u64, b as u64]),
        Some(other) => unsupported(format!("{what} {other:?} (placer takes 2-D windows)")),
    }
}

/// Symmetric padding from ONNX `pads` [top, left, bottom, right] or `auto_pad`.
fn padding(
    a: Attrs<'_>,
    input: [u64; 2],
    kernel: [u64; 2],
    stride: [u64; 2],
    dilation: [u64; 2],
) -> Result<[u64; 2], Fail> {
    match a.string("auto_pad").as_deref() {
        None | Some("NOTSET") => {}
        Some("VALID") => return Ok([0, 0]),
        Some("SAME_UPPER" | "SAME_LOWER") => {
            let mut pad = [0; 2];
            for i in 0..2 {
                let out = input[i].div_ceil(stride[i]);
                let span = (kernel[i] - 1) * dilation[i] + 1;
                let total = ((out - 1) * stride[i] + span).saturating_sub(input[i]);
                if total % 2 == 1 {
                    return unsupported("auto_pad SAME with odd total padding (placer pads symmetrically)");
                }
                pad[i] = total / 2;
            }
            return Ok(pad);
        }
        Some(other) => return bad(format!("unknown auto_pad '{other}'")),
    }
    match a.ints("pads").as_deref() {
        None => Ok([0, 0]),
        Some(&[t, l, b, r]) if t == b && l == r && t >= 0 && l >= 0 => Ok([t as u64, l as u64]),
        Some(p) => unsupported(format!("{} with asymmetric pads {p:?}", a.0.op_type())),
    }
}

pub(crate) fn hw(shape: &[u64]) -> Result<[u64; 2], Fail> {
    match shape {
        &[_, _, h, w] => Ok([h, w]),
        other => unsupported(format!("a 2-D window op on a rank-{} tensor", other.len())),
    }
}

/// The geometry of a Conv (or onnxruntime's ConvGrad) over an input of spatial size
/// `input` with a filter of shape `filter`.
pub(crate) fn conv_geometry(node: &NodeProto, input: [u64; 2], filter: &[u64]) -> Result<Conv, Fail> {
    let a = Attrs(node);
    let kernel = pair(Some(filter.get(2..).unwrap_or_default().iter().map(|&d| d as i64).collect()), 1, "kernel")?;
    let stride = pair(a.ints("strides"), 1, "strides")?;
    let dilation = pair(a.ints("dilations"), 1, "dilations")?;
    let padding = padding(a, input, kernel, stride, dilation)?;
    Ok(Conv { stride, padding, dilation, groups: a.int("group", 1).max(1) as u64 })
}

/// The window of a MaxPool or AveragePool (or their onnxruntime gradients) over an
/// input of spatial size `input`.
pub(crate) fn pooling_geometry(node: &NodeProto, input: [u64; 2]) -> Result<Pooling, Fail> {
    let a = Attrs(node);
    let kernel = pair(a.ints("kernel_shape"), 1, "kernel_shape")?;
    let stride = pair(a.ints("strides"), 1, "strides")?;
    if pair(a.ints("dilations"), 1, "dilations")? != [1, 1] {
        return unsupported(format!("{} with dilations", node.op_type()));
    }
    let padding = padding(a, input, kernel, stride, [1, 1])?;
    if a.int("ceil_mode", 0) == 1 {
        let differs = (0..2).any(|i| !(input[i] + 2 * padding[i] - kernel[i]).is_multiple_of(stride[i]));
        if differs {
            return unsupported(format!("{} with ceil_mode=1 where it changes the output size", node.op_type()));
        }
    }
    Ok(Pooling { kernel, stride, padding })
}

fn conv(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    let w = l.const_operand(node, 1)?;
    let geometry = conv_geometry(node, hw(&x.shape)?, &w.shape)?;
    let xt = l.exact(&x);
    let wt = l.weight(&w, &w.shape)?;
    let out = &node.output[0];
    let bias = l.optional(node, 2)?;
    let conv_name = if bias.is_some() { l.name_for(&format!("{out}.conv")) } else { l.name_for(out) };
    let y = l.g.conv2d(&conv_name, xt, wt, geometry).or_else(|e| bad(e.to_string()))?;
    let y = match bias {
        Some(Value::Const(b)) => {
            let channels = l.g.shape(y)[1];
            let bt = l.weight(&b, &[channels])?;
            let name = l.name_for(out);
            l.g.bias_add(&name, y, bt, 1)
        }
        Some(_) => return unsupported("Conv with a computed bias"),
        None => y,
    };
    let shape = l.g.shape(y).to_vec();
    Ok(vec![tensor(y, shape)])
}

fn pooling(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    let a = Attrs(node);
    let geometry = pooling_geometry(node, hw(&x.shape)?)?;
    let xt = l.exact(&x);
    let name = l.name_for(&node.output[0]);
    // The indices are placer's own (the window position of each maximum); only
    // onnxruntime's MaxPoolGrad reads a MaxPool's second output, and it becomes
    // placer's max_pool2d_backward, which reads exactly these.
    let (y, indices) = if node.op_type() == "MaxPool" {
        let (y, idx) = l.g.max_pool2d_indexed(&name, xt, geometry).or_else(|e| bad(e.to_string()))?;
        (y, Some(idx))
    } else {
        let y =
            l.g.avg_pool2d(&name, xt, geometry, a.int("count_include_pad", 0) == 1).or_else(|e| bad(e.to_string()))?;
        (y, None)
    };
    let shape = l.g.shape(y).to_vec();
    let indices = indices.map_or(Value::Poisoned, |i| tensor(i, shape.clone()));
    Ok(vec![tensor(y, shape), indices])
}

fn global_avg_pool(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    hw(&x.shape)?;
    let xt = l.exact(&x);
    let name = l.name_for(&node.output[0]);
    let y = l.g.global_avg_pool(&name, xt);
    // placer's result is [N, C]; ONNX keeps [N, C, 1, 1], a view of it.
    Ok(vec![tensor(y, vec![x.shape[0], x.shape[1], 1, 1])])
}

/// The fed input of embedding ids that are data or a constant, with `--batch` where the
/// file fixed its batch. One row the file broadcasts ([1, S] position ids) stays one
/// row: its lookup is added to every sample by a broadcasting `add`, as in the file.
/// An embedding and its onnxruntime gradient share it.
pub(crate) fn fed_ids(l: &mut Lowerer<'_>, ids: &Value) -> Result<T, Fail> {
    let (Value::Data(c) | Value::Const(c)) = l.rebatched(ids) else {
        return bad("embedding ids that are neither data nor a constant");
    };
    Ok(l.feed(&c, placer_ir::DType::I32))
}

/// Whether constant `c` holds 0, 1, 2, ... in order: a Gather by it takes every element
/// of a flat tensor in place.
fn is_iota(c: &Constant) -> bool {
    c.data.as_ref().is_some_and(|d| d.iter().enumerate().all(|(k, &v)| v == k as f64))
}

/// A Gather of flat `x` by every position in order, shaped as the index (the dynamo
/// exporter's `as_strided` after a flatten: ConvNeXt's pooled features): `x` viewed in
/// the index's shape, whose first dimension follows `--batch` when the file fixed it.
fn in_order(l: &mut Lowerer<'_>, x: Value, index: &Constant) -> Lowered {
    let numel = shape_of(&x)[0];
    let mut shape = index.shape.clone();
    if let Some((file, new)) = l.rebatch
        && shape.first() == Some(&file)
        && numel != index.numel()
    {
        shape[0] = new;
    }
    if shape.iter().product::<u64>() != numel {
        return bad(format!(
            "a Gather by every position in order ({:?}) of a flat tensor of {numel} elements",
            index.shape
        ));
    }
    Ok(vec![consts::with_shape(x, shape)])
}

/// One position of an activation along the axis before its last (BERT's pooler takes
/// token 0 of [B, S, D]): a batched matmul by a fed one-hot selector [.., 1, S], so that
/// the gradient reaches every position, as the framework's scatter does.
fn pick(l: &mut Lowerer<'_>, node: &NodeProto, x: &Tensor, ax: i64) -> Lowered {
    let rank = x.shape.len();
    let index = l.const_operand(node, 1)?.scalar().map(|i| i as i64);
    if let Some(index) = index
        && let Some(done) = super::slice::gather_all(l, node, x, axis(ax, rank)?, index)
    {
        return done;
    }
    if rank < 2 || axis(ax, rank)? != rank - 2 {
        return unsupported("Gather of one element of an activation along an axis other than the one before the last");
    }
    let st = selector(l, &x.shape);
    let xt = l.exact(x);
    let name = l.name_for(&node.output[0]);
    let y = l.g.matmul(&name, st, xt, false, 1.0).or_else(|e| bad(e.to_string()))?;
    l.note("Gather of one position of an activation imported as a matmul by a fed one-hot selector");
    let mut shape = x.shape[..rank - 2].to_vec();
    shape.push(x.shape[rank - 1]);
    Ok(vec![tensor(y, shape)])
}

/// The fed one-hot selector [.., 1, S] of one position of `shape` [.., S, D]; a
/// Gather and its gradient (onnxruntime's GatherGrad) share it.
pub(crate) fn selector(l: &mut Lowerer<'_>, shape: &[u64]) -> T {
    let rank = shape.len();
    let mut sel_shape = shape[..rank - 2].to_vec();
    sel_shape.extend([1, shape[rank - 2]]);
    let selector =
        Constant { shape: sel_shape, elem: Elem::Float(placer_ir::DType::F32), data: None, origin: "selector".into() };
    l.feed(&selector, placer_ir::DType::F32)
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

fn gather(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let (table, ids) = (l.operand(node, 0)?, l.operand(node, 1)?);
    match (&table, &ids, Attrs(node).int("axis", 0)) {
        (Value::Const(c), Value::Tensor(i), 0) if c.shape.len() == 2 => {
            let w = l.weight(c, &c.shape)?;
            let it = l.exact(i);
            let name = l.name_for(&node.output[0]);
            let y = l.g.embedding(&name, it, w);
            let shape = l.g.shape(y).to_vec();
            Ok(vec![tensor(y, shape)])
        }
        // Fixed ids (positions, token types) into a trained table: still an embedding
        // (the table gets its gradient), with the ids fed as data, one row per sample.
        (Value::Const(c), Value::Const(_), 0) if c.shape.len() == 2 && matches!(c.elem, Elem::Float(_)) => {
            let w = l.weight(c, &c.shape)?;
            let ids = fed_ids(l, &ids)?;
            l.note("constant ids into an embedding table (positions, token types) fed as an input");
            let name = l.name_for(&node.output[0]);
            let y = l.g.embedding(&name, ids, w);
            let shape = l.g.shape(y).to_vec();
            Ok(vec![tensor(y, shape)])
        }
        // Ids the step is fed (token ids) or computes from them (RoBERTa's positions).
        (Value::Const(c), Value::Data(_), 0) if c.shape.len() == 2 && matches!(c.elem, Elem::Float(_)) => {
            let w = l.weight(c, &c.shape)?;
            let it = fed_ids(l, &ids)?;
            let name = l.name_for(&node.output[0]);
            let y = l.g.embedding(&name, it, w);
            let shape = l.g.shape(y).to_vec();
            Ok(vec![tensor(y, shape)])
        }
        (Value::Tensor(x), Value::Const(i), ax) if i.numel() == 1 => pick(l, node, x, ax),
        (Value::Tensor(x), Value::Const(i), 0) if x.shape.len() == 1 && is_iota(i) => in_order(l, table, i),
        (Value::Const(_), Value::Const(_), _) => consts::fold(l, node),
        (Value::Const(_) | Value::Data(_), Value::Const(_) | Value::Data(_), _) => consts::data_node(l, node),
        _ => unsupported(format!(
            "Gather other than an embedding lookup ({:?} by {:?})",
            shape_of(&table),
            shape_of(&ids)
        )),
    }
}
