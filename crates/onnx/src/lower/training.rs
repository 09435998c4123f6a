//! Training graphs from onnxruntime-training's artifact generator: forward and
//! backward are both in the file. Forward nodes lower as in a forward graph; each
//! gradient op maps to placer's backward kernel, and the shapes the file leaves out
//! (weight gradients, batch-norm statistics) follow from the operands.

use super::consts;
use super::emit::{emit, grad_role};
use super::ops::forward;
use super::ort;
use super::window::{conv_geometry, hw, pooling_geometry};
use super::{Fail, Lowered, Lowerer, bad, unsupported};
use crate::proto::{GraphProto, NodeProto, type_proto};
use crate::values::{Attrs, Tensor, Value, tensor};
use crate::{ImportOptions, OnnxError};
use placer_ir::{AttrValue, Attrs as IrAttrs, DType, Op, Role};
use placer_zoo::T;
use std::collections::HashSet;

/// The suffix onnxruntime gives the gradient buffer of each trainable parameter.
const BUFFER: &str = "_grad.accumulation.buffer";

/// Gradient and training-only ops (onnxruntime writes some in the default domain).
const TRAINING_OPS: &[&str] = &[
    "BatchNormInternal",
    "BatchNormalizationGrad",
    "ConvGrad",
    "ReluGrad",
    "MaxPoolGrad",
    "AveragePoolGrad",
    "SoftmaxCrossEntropyLoss",
    "SoftmaxCrossEntropyLossGrad",
    "InPlaceAccumulatorV2",
    "InPlaceAccumulator",
    "ReduceSum",
];

pub(crate) fn is_training_graph(graph: &GraphProto) -> bool {
    graph.node.iter().any(|n| n.op_type().ends_with("Grad") || n.op_type().starts_with("InPlaceAccumulator"))
}

pub(crate) fn known(node: &NodeProto) -> bool {
    TRAINING_OPS.contains(&node.op_type()) || ort::OPS.contains(&node.op_type())
}

/// Lowers a training graph. Trainable parameters are the inputs that have a gradient
/// buffer; the buffers, frozen statistics and flags are not data.
pub(crate) fn lower(l: &mut Lowerer<'_>, opts: &ImportOptions) -> Result<(), OnnxError> {
    let graph = l.graph;
    let names: HashSet<&str> = graph.input.iter().filter_map(|i| i.name.as_deref()).collect();
    let frozen: HashSet<&str> = graph
        .node
        .iter()
        .filter(|n| n.op_type() == "BatchNormInternal")
        .flat_map(|n| n.input.iter().skip(3).map(String::as_str))
        .collect();
    let flags: HashSet<&str> = graph
        .input
        .iter()
        .filter(|i| {
            matches!(i.r#type.as_ref().and_then(|t| t.value.as_ref()),
                Some(type_proto::Value::TensorType(t)) if t.elem_type == Some(9))
        })
        .filter_map(|i| i.name.as_deref())
        .collect();
    let not_data = |name: &str| {
        names.contains(format!("{name}{BUFFER}").as_str())
            || name.ends_with(BUFFER)
            || frozen.contains(name)
            || flags.contains(name)
    };
    l.training = true;
    l.declare_inputs(opts, &not_data)?;
    l.note(
        "training graph: forward and backward imported as they are; shapes the file omits derived from the operands",
    );
    let outputs: Vec<String> = graph.output.iter().filter_map(|o| o.name.clone()).collect();
    l.run(&outputs, &lower_node)
}

fn lower_node<'m>(l: &mut Lowerer<'m>, node: &'m NodeProto) -> Lowered {
    match node.op_type() {
        "BatchNormInternal" => batch_norm_internal(l, node),
        "BatchNormalizationGrad" => batch_norm_grad(l, node),
        "ConvGrad" => conv_grad(l, node),
        "ReluGrad" => {
            let (dy, y) = (l.tensor_operand(node, 0)?, l.tensor_operand(node, 1)?);
            let (dyt, yt) = (l.exact(&dy), l.exact(&y));
            let dx =
                emit(l, node, Op::ReluBackward, IrAttrs::new(), &[dyt, yt], &[(0, dy.shape.clone(), Role::Gradient)])?;
            Ok(vec![tensor(dx[0], dy.shape)])
        }
        "MaxPoolGrad" | "AveragePoolGrad" => pooling_grad(l, node),
        "SoftmaxCrossEntropyLoss" => loss(l, node),
        "SoftmaxCrossEntropyLossGrad" => {
            let probs = l.tensor_operand(node, 1)?;
            let labels = labels(l, node, 2, &probs.shape)?;
            let (pt, lt) = (l.exact(&probs), l.exact(&labels));
            let shape = probs.shape.clone();
            let d = emit(
                l,
                node,
                Op::SoftmaxCrossEntropyBackward,
                IrAttrs::new(),
                &[pt, lt],
                &[(0, shape.clone(), Role::Gradient)],
            )?;
            Ok(vec![tensor(d[0], shape)])
        }
        "Gemm" if is_backward(node) => gemm_grad(l, node),
        "ReduceSum" => reduce_sum(l, node),
        "InPlaceAccumulatorV2" | "InPlaceAccumulator" => accumulate(l, node),
        // Masks and shape arithmetic, whatever the op.
        _ if consts::is_data_node(l, node) || all_constant(l, node) => forward(l, node),
        _ => ort::lower(l, node).unwrap_or_else(|| forward(l, node)),
    }
}

fn all_constant(l: &Lowerer<'_>, node: &NodeProto) -> bool {
    let mut operands = node.input.iter().filter(|n| !n.is_empty()).peekable();
    operands.peek().is_some() && operands.all(|n| matches!(l.value(n), Some(Value::Const(_))))
}

/// onnxruntime names the nodes it generates for the backward pass `<forward>_Grad/...`.
fn is_backward(node: &NodeProto) -> bool {
    node.name.as_deref().is_some_and(|n| n.contains("_Grad/"))
}

fn weight_gradient_role(l: &Lowerer<'_>, t: T) -> Role {
    if l.g.role(t) == Role::Weight { Role::WeightGradient } else { Role::Gradient }
}

fn batch_norm_internal(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    let (scale, shift) = (l.const_operand(node, 1)?, l.const_operand(node, 2)?);
    if x.shape.len() < 2 {
        return bad("BatchNormInternal needs an input of rank ≥ 2");
    }
    let c = x.shape[1];
    let xt = l.exact(&x);
    let (gamma, beta) = (l.weight(&scale, &[c])?, l.weight(&shift, &[c])?);
    let name = l.name_for(&node.output[0]);
    let [y, mean, inv_std] = l.g.batch_norm_saving(&name, xt, gamma, beta, Attrs(node).float("epsilon", 1e-5));
    l.note("BatchNormInternal: running mean and variance outputs not kept (batch statistics only)");
    let stat = |t| tensor(t, vec![c]);
    Ok(vec![tensor(y, x.shape), Value::Poisoned, Value::Poisoned, stat(mean), stat(inv_std)])
}

fn batch_norm_grad(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let (dy, x) = (l.tensor_operand(node, 0)?, l.tensor_operand(node, 1)?);
    let scale = l.const_operand(node, 2)?;
    let (mean, inv_std) = (l.tensor_operand(node, 3)?, l.tensor_operand(node, 4)?);
    let c = x.shape[1];
    let gamma = l.weight(&scale, &[c])?;
    let inputs = [l.exact(&dy), l.exact(&x), gamma, mean.t, inv_std.t];
    let attrs = IrAttrs::from([("epsilon".to_string(), AttrValue::Float(Attrs(node).float("epsilon", 1e-5)))]);
    let outs =
        [(0, x.shape.clone(), Role::Gradient), (1, vec![c], Role::WeightGradient), (2, vec![c], Role::WeightGradient)];
    let g = emit(l, node, Op::BatchNormBackward, attrs, &inputs, &outs)?;
    Ok(vec![tensor(g[0], x.shape), tensor(g[1], vec![c]), tensor(g[2], vec![c])])
}

fn conv_grad(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let (dy, x) = (l.tensor_operand(node, 0)?, l.tensor_operand(node, 1)?);
    let w = l.const_operand(node, 2)?;
    // The forward convolution's attributes, as the zoo's backward nodes carry them.
    let attrs = conv_geometry(node, hw(&x.shape)?, &w.shape)?.attrs();
    let (dyt, xt, wt) = (l.exact(&dy), l.exact(&x), l.weight(&w, &w.shape)?);
    let wanted = |k: usize| node.output.get(k).is_some_and(|o| !o.is_empty());
    let mut out = vec![Value::Poisoned; 3];
    if wanted(0) {
        let dx =
            emit(l, node, Op::Conv2dBackwardData, attrs.clone(), &[dyt, wt], &[(0, x.shape.clone(), Role::Gradient)])?;
        out[0] = tensor(dx[0], x.shape.clone());
    }
    let role = weight_gradient_role(l, wt);
    let dw = emit(l, node, Op::Conv2dBackwardFilter, attrs, &[xt, dyt], &[(1, w.shape.clone(), role)])?;
    out[1] = tensor(dw[0], w.shape.clone());
    if wanted(2) {
        let k = dy.shape[1];
        let axis = IrAttrs::from([("axis".to_string(), AttrValue::Int(1))]);
        let db = emit(l, node, Op::BiasGrad, axis, &[dyt], &[(2, vec![k], Role::WeightGradient)])?;
        out[2] = tensor(db[0], vec![k]);
    }
    Ok(out)
}

/// The shape the file declares for value `name` (value_info or graph output), with the
/// batch dimension following `--batch`.
fn declared_shape(l: &Lowerer<'_>, name: &str) -> Option<Vec<u64>> {
    let info = l.graph.value_info.iter().chain(&l.graph.output).find(|v| v.name.as_deref() == Some(name))?;
    let Some(type_proto::Value::TensorType(t)) = info.r#type.as_ref()?.value.as_ref() else { return None };
    let mut shape = Vec::new();
    for d in &t.shape.as_ref()?.dim {
        match d.value {
            Some(crate::proto::tensor_shape_proto::dimension::Value::DimValue(v)) if v > 0 => shape.push(v as u64),
            _ => return None,
        }
    }
    if let (Some((file, new)), Some(first)) = (l.rebatch, shape.first_mut())
        && *first == file
    {
        *first = new;
    }
    Some(shape)
}

fn pooling_grad(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let dy = l.tensor_operand(node, 0)?;
    let a = Attrs(node);
    let Some(dx_shape) = node.output.first().and_then(|o| declared_shape(l, o)) else {
        return unsupported(format!("{} whose output shape the file does not give", node.op_type()));
    };
    let mut attrs = pooling_geometry(node, hw(&dx_shape)?)?.attrs();
    let dyt = l.exact(&dy);
    let (op, inputs) = if node.op_type() == "MaxPoolGrad" {
        let mask = l.tensor_operand(node, 1)?;
        (Op::MaxPool2dBackward, vec![dyt, mask.t])
    } else {
        if a.int("count_include_pad", 0) == 1 {
            attrs.insert("count_include_pad".into(), AttrValue::Bool(true));
        }
        (Op::AvgPool2dBackward, vec![dyt])
    };
    let dx = emit(l, node, op, attrs, &inputs, &[(0, dx_shape.clone(), Role::Gradient)])?;
    Ok(vec![tensor(dx[0], dx_shape)])
}

/// The labels, one per row of the logits whatever `--batch` made of the file's labels
/// shape (a causal LM's logits are [batch·sequence, vocabulary]).
fn labels(l: &mut Lowerer<'_>, node: &NodeProto, k: usize, logits: &[u64]) -> Result<Tensor, Fail> {
    match l.operand(node, k)? {
        Value::Data(mut c) => {
            c.shape = logits[..logits.len().saturating_sub(1)].to_vec();
            let t = l.feed(&c, DType::I32);
            Ok(Tensor { t, shape: c.shape })
        }
        _ => l.tensor_operand(node, k),
    }
}

fn loss(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let logits = l.tensor_operand(node, 0)?;
    if logits.shape.len() != 2 {
        // ONNX's classes are on axis 1 ([N, C, d1, ...]); placer's on the last of [N, C].
        return unsupported("SoftmaxCrossEntropyLoss of logits that are not [N, C]");
    }
    let labels = labels(l, node, 1, &logits.shape)?;
    if Attrs(node).string("reduction").is_some_and(|r| r != "mean") || node.input.len() > 2 {
        return unsupported("SoftmaxCrossEntropyLoss other than a mean without weights");
    }
    let (lt, yt) = (l.exact(&logits), l.exact(&labels));
    let name = l.name_for(&node.output[0]);
    // The second output (log-probabilities in onnxruntime) is placer's probabilities.
    let (loss, probs) = l.g.softmax_cross_entropy_saving(&name, lt, yt);
    Ok(vec![tensor(loss, vec![]), tensor(probs, logits.shape)])
}

/// A backward Gemm: `C = op(A) · op(B)` with `beta = 0`, as a matmul.
fn gemm_grad(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let a = Attrs(node);
    let operand = |l: &mut Lowerer<'_>, k: usize| -> Result<T, Fail> {
        match l.operand(node, k)? {
            Value::Tensor(t) => Ok(l.exact(&t)),
            Value::Const(c) => l.weight(&c, &c.shape.clone()),
            Value::Data(_) => unsupported("a backward Gemm of data"),
            Value::Poisoned | Value::Dropped => Err(Fail::Poisoned),
        }
    };
    let (x, y) = (operand(l, 0)?, operand(l, 1)?);
    let (ta, tb) = (a.int("transA", 0) == 1, a.int("transB", 0) == 1);
    let (sx, sy) = (l.g.shape(x).to_vec(), l.g.shape(y).to_vec());
    if sx.len() != 2 || sy.len() != 2 {
        return unsupported("a backward Gemm on operands that are not 2-D");
    }
    let m = if ta { sx[1] } else { sx[0] };
    let n = if tb { sy[0] } else { sy[1] };
    let mut attrs = IrAttrs::new();
    if ta {
        attrs.insert("transpose_a".into(), AttrValue::Bool(true));
    }
    if tb {
        attrs.insert("transpose_b".into(), AttrValue::Bool(true));
    }
    let role = grad_role(l, &node.output[0]);
    let out = emit(l, node, Op::MatMul, attrs, &[x, y], &[(0, vec![m, n], role)])?;
    Ok(vec![tensor(out[0], vec![m, n])])
}

/// A sum over every axis but one: a bias gradient.
fn reduce_sum(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let dy = l.tensor_operand(node, 0)?;
    let rank = dy.shape.len();
    let axes = match consts::axes(l, node)? {
        Some(a) => a.iter().map(|&x| consts::axis(x, rank)).collect::<Result<Vec<_>, _>>()?,
        None => (0..rank).collect(),
    };
    let kept: Vec<usize> = (0..rank).filter(|i| !axes.contains(i)).collect();
    let [axis] = kept.as_slice() else {
        return sum_to(l, node, &dy, &axes);
    };
    let c = dy.shape[*axis];
    let dyt = l.exact(&dy);
    let attrs = IrAttrs::from([("axis".to_string(), AttrValue::Int(*axis as i64))]);
    let g = emit(l, node, Op::BiasGrad, attrs, &[dyt], &[(0, vec![c], Role::WeightGradient)])?;
    Ok(vec![tensor(g[0], vec![c])])
}

/// A sum over leading axes, or any axes kept as 1: the gradient of an operand that was
/// broadcast (BERT's position embeddings added to every sample), placer's `sum_to`.
fn sum_to(l: &mut Lowerer<'_>, node: &NodeProto, dy: &Tensor, axes: &[usize]) -> Lowered {
    let keep = Attrs(node).int("keepdims", 1) == 1;
    let shape: Vec<u64> = dy
        .shape
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (axes.contains(&i), keep) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect();
    // Without keepdims only leading axes may go: the rest must still line up.
    if !keep && axes.iter().enumerate().any(|(k, &a)| a != k) {
        return unsupported("ReduceSum over inner axes without keepdims");
    }
    let dyt = l.exact(dy);
    let role = grad_role(l, &node.output[0]);
    let g = emit(l, node, Op::SumTo, IrAttrs::new(), &[dyt], &[(0, shape.clone(), role)])?;
    Ok(vec![tensor(g[0], shape)])
}

/// `buffer += gradient`: the point where a parameter's gradient is complete. placer
/// takes one step per batch, so the accumulation buffer is not kept and the weight gets
/// its update here (SGD with momentum, as in the zoo; onnxruntime keeps the optimizer
/// in a separate graph).
fn accumulate(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let buffer = node.input.first().cloned().unwrap_or_default();
    let Some(param) = buffer.strip_suffix(BUFFER) else {
        return unsupported("InPlaceAccumulator on something other than a parameter's gradient buffer");
    };
    let Some(Value::Const(w)) = l.value(param).cloned() else {
        return bad(format!("parameter '{param}' is not a graph input"));
    };
    let grad = l.tensor_operand(node, 1)?;
    let wt = l.weight(&w, &w.shape)?;
    let gt = l.shaped(grad.t, &w.shape);
    let velocity_name = l.name_for(&format!("{param}.velocity"));
    let velocity = l.g.declare(&velocity_name, &w.shape, DType::F32, Role::OptimizerState);
    let attrs =
        IrAttrs::from([("lr".to_string(), AttrValue::Float(0.01)), ("momentum".to_string(), AttrValue::Float(0.9))]);
    let name = l.name_for(&format!("{param}.sgd"));
    l.g.node(&name, Op::SgdMomentum, attrs, &[gt], &[wt, velocity], &[]);
    l.note("InPlaceAccumulatorV2 mapped to the weight's SGD-momentum update (no accumulation buffer; the optimizer graph is not imported)");
    Ok(vec![Value::Poisoned; node.output.len()])
}
