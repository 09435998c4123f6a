//! onnxruntime-training's own ops (domain `com.microsoft`) and the default-domain
//! spellings its gradient builder uses, each lowered to placer's kernels. Every tensor
//! the training graph keeps (saved layer-norm statistics, dropout masks, softmax
//! outputs) is a tensor in the model.

use super::consts::{self, axis};
use super::emit::{emit, grad_role};
use super::{Fail, Lowered, Lowerer, bad, unsupported};
use crate::proto::NodeProto;
use crate::values::tensor;
use crate::values::{Attrs, Constant, Elem, Tensor, Value};
use placer_ir::{AttrValue, Attrs as IrAttrs, DType, Op, Role};
use placer_zoo::T;

/// Ops this module lowers (by op type, whatever the domain).
pub(crate) const OPS: &[&str] = &[
    "FusedMatMul",
    "SoftmaxGrad_13",
    "SoftmaxGrad",
    "TanhGrad",
    "SigmoidGrad",
    "GeluGrad",
    "FastGeluGrad",
    "FastGelu",
    "BiasGelu",
    "Gelu",
    "BiasGeluGrad_dX",
    "QuickGelu",
    "QuickGeluGrad",
    "LayerNormalization",
    "LayerNormalizationGrad",
    "SimplifiedLayerNormalization",
    "SimplifiedLayerNormalizationGrad",
    "GatherGrad",
    "Dropout",
    "DropoutGrad",
    "ConcatTraining",
    "SplitTraining",
    "Split",
    "Scale",
    "Expand",
    "Size",
    "Neg",
];

pub(crate) fn lower(l: &mut Lowerer<'_>, node: &NodeProto) -> Option<Lowered> {
    Some(match node.op_type() {
        "FusedMatMul" => fused_matmul(l, node),
        "SoftmaxGrad_13" | "SoftmaxGrad" => activation_grad(l, node, Op::SoftmaxBackward, (0, 1)),
        "TanhGrad" => activation_grad(l, node, Op::TanhBackward, (1, 0)),
        "SigmoidGrad" => activation_grad(l, node, Op::SigmoidBackward, (0, 1)),
        "GeluGrad" | "FastGeluGrad" => activation_grad(l, node, Op::GeluBackward, (0, 1)),
        "FastGelu" | "BiasGelu" | "Gelu" => gelu(l, node),
        "BiasGeluGrad_dX" => bias_gelu_grad(l, node),
        "QuickGelu" => quick_gelu(l, node),
        "QuickGeluGrad" => quick_gelu_grad(l, node),
        "LayerNormalization" => layer_norm(l, node, false),
        "SimplifiedLayerNormalization" => layer_norm(l, node, true),
        "LayerNormalizationGrad" => layer_norm_grad(l, node, false),
        "SimplifiedLayerNormalizationGrad" => layer_norm_grad(l, node, true),
        "GatherGrad" => gather_grad(l, node),
        "Dropout" => dropout(l, node),
        "DropoutGrad" => dropout_grad(l, node),
        "ConcatTraining" => concat_training(l, node),
        "SplitTraining" | "Split" => super::slice::split(l, node),
        "Expand" => expand(l, node),
        "Scale" => scale(l, node),
        "Size" => super::ops::size(l, node),
        "Neg" => super::ops::neg(l, node),
        _ => return None,
    })
}

fn ir_attrs(pairs: &[(&str, AttrValue)]) -> IrAttrs {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

/// An activation operand, or a parameter (a constant with a gradient buffer) as its
/// weight; `true` when it is the transpose of that weight.
fn operand(l: &mut Lowerer<'_>, node: &NodeProto, k: usize) -> Result<(Tensor, bool), Fail> {
    match l.operand(node, k)? {
        Value::Tensor(t) => Ok((t, false)),
        Value::Const(c) if matches!(c.elem, Elem::Float(_)) => {
            let (t, flipped) = l.weight_maybe_transposed(&c)?;
            let shape = l.g.shape(t).to_vec();
            Ok((Tensor { t, shape }, flipped))
        }
        _ => unsupported(format!("{} with operand {k} that is neither an activation nor a weight", node.op_type())),
    }
}

/// `alpha · op(A) · op(B)`: a matmul; an activation of rank > 2 times a 2-D operand is
/// one 2-D product over the flattened rows.
fn fused_matmul(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let a = Attrs(node);
    if a.int("transBatchA", 0) != 0 || a.int("transBatchB", 0) != 0 {
        return unsupported("FusedMatMul with transBatchA or transBatchB");
    }
    let ((x, fa), (y, fb)) = (operand(l, node, 0)?, operand(l, node, 1)?);
    let (ta, tb, alpha) = ((a.int("transA", 0) == 1) != fa, (a.int("transB", 0) == 1) != fb, a.float("alpha", 1.0));
    let (ra, rb) = (x.shape.len(), y.shape.len());
    let (xt, yt, lead) = if ra == rb && x.shape[..ra - 2] == y.shape[..rb - 2] {
        (l.exact(&x), l.exact(&y), x.shape[..ra - 2].to_vec())
    } else if ra > 2 && rb == 2 && !ta {
        let k = x.shape[ra - 1];
        let rows = x.shape[..ra - 1].iter().product();
        (l.shaped(x.t, &[rows, k]), l.exact(&y), vec![])
    } else {
        return unsupported("FusedMatMul with broadcasting");
    };
    let (sx, sy) = (l.g.shape(xt).to_vec(), l.g.shape(yt).to_vec());
    let (r, s) = (sx.len(), sy.len());
    let (m, k) = if ta { (sx[r - 1], sx[r - 2]) } else { (sx[r - 2], sx[r - 1]) };
    let (k2, n) = if tb { (sy[s - 1], sy[s - 2]) } else { (sy[s - 2], sy[s - 1]) };
    if k != k2 {
        return bad(format!("inner dimensions {k} and {k2} differ"));
    }
    let mut shape = lead;
    shape.extend([m, n]);
    let mut attrs = IrAttrs::new();
    for (flag, name) in [(ta, "transpose_a"), (tb, "transpose_b")] {
        if flag {
            attrs.insert(name.into(), AttrValue::Bool(true));
        }
    }
    if alpha != 1.0 {
        attrs.insert("alpha".into(), AttrValue::Float(alpha));
    }
    let role = grad_role(l, &node.output[0]);
    let out = emit(l, node, Op::MatMul, attrs, &[xt, yt], &[(0, shape.clone(), role)])?;
    // The ONNX shape of a flattened product keeps the activation's leading dimensions.
    let onnx_shape = match (ra, rb) {
        (ra, 2) if ra > 2 && !ta => {
            let mut s = x.shape[..ra - 1].to_vec();
            s.push(n);
            s
        }
        _ => shape,
    };
    Ok(vec![tensor(out[0], onnx_shape)])
}

/// A backward activation `dx = f'(saved) · dy`; `order` gives the positions of dy and
/// the saved tensor among the node's operands.
fn activation_grad(l: &mut Lowerer<'_>, node: &NodeProto, op: Op, order: (usize, usize)) -> Lowered {
    let (dy, saved) = (l.tensor_operand(node, order.0)?, l.tensor_operand(node, order.1)?);
    if op == Op::SoftmaxBackward {
        let rank = dy.shape.len();
        if axis(Attrs(node).int("axis", -1), rank)? != rank - 1 {
            return unsupported("SoftmaxGrad over an axis other than the last");
        }
    }
    let (dyt, st) = (l.exact(&dy), l.exact(&saved));
    let dx = emit(l, node, op, IrAttrs::new(), &[dyt, st], &[(0, dy.shape.clone(), Role::Gradient)])?;
    Ok(vec![tensor(dx[0], dy.shape)])
}

/// FastGelu (GELU's tanh approximation), BiasGelu (bias, then GELU) and Gelu (opset 20's,
/// or onnxruntime's own in `com.microsoft`; exact or tanh): placer's `gelu`, after a
/// `bias_add` when there is a bias.
fn gelu(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    let unbiased = l.exact(&x);
    let mut xt = unbiased;
    if let Some(b) = l.optional(node, 1)? {
        let Value::Const(b) = b else { return unsupported(format!("{} with a computed bias", node.op_type())) };
        let d = *x.shape.last().unwrap_or(&1);
        let bt = l.weight(&b, &[d])?;
        let name = l.name_for(&format!("{}.biased", node.output[0]));
        xt = l.g.bias_add(&name, xt, bt, x.shape.len() as i64 - 1);
        l.biased.insert(unbiased, xt);
        l.note("BiasGelu imported as bias_add then gelu (the biased input is kept for the gradient)");
    }
    if node.op_type() == "FastGelu" {
        l.note("FastGelu (GELU's tanh approximation) imported as gelu: same tensors, same traffic");
    }
    let name = l.name_for(&node.output[0]);
    let y = l.g.gelu(&name, xt);
    Ok(vec![tensor(y, x.shape)])
}

/// BiasGeluGrad_dX(dY, X, B): GELU's gradient at X + B, which `gelu` kept.
fn bias_gelu_grad(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let dy = l.tensor_operand(node, 0)?;
    let x = l.tensor_operand(node, 1)?;
    let xt = l.exact(&x);
    // The biased input the forward BiasGelu computed from the same X.
    let Some(&biased) = l.biased.get(&xt) else { return unsupported("BiasGeluGrad_dX without its forward BiasGelu") };
    let dyt = l.exact(&dy);
    let dx = emit(l, node, Op::GeluBackward, IrAttrs::new(), &[dyt, biased], &[(0, dy.shape.clone(), Role::Gradient)])?;
    Ok(vec![tensor(dx[0], dy.shape)])
}

fn quick_alpha(node: &NodeProto) -> Result<(), Fail> {
    if (Attrs(node).float("alpha", 1.702) - 1.0).abs() > 1e-6 {
        return unsupported("QuickGelu with alpha other than 1 (placer has SiLU, x·sigmoid(x), only)");
    }
    Ok(())
}

/// QuickGelu with alpha 1 is SiLU, x·sigmoid(x): `sigmoid` then `mul`.
fn quick_gelu(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    quick_alpha(node)?;
    let x = l.tensor_operand(node, 0)?;
    let xt = l.exact(&x);
    let s = l.name_for(&format!("{}.sigmoid", node.output[0]));
    let st = l.g.sigmoid(&s, xt);
    let name = l.name_for(&node.output[0]);
    let y = l.g.mul(&name, xt, st);
    l.note("QuickGelu(alpha 1) imported as SiLU: sigmoid then mul");
    Ok(vec![tensor(y, x.shape)])
}

/// SiLU's gradient, recomputing the sigmoid from X as onnxruntime's kernel does:
/// dx = dy·s + sigmoid_backward(dy·x, s).
fn quick_gelu_grad(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    quick_alpha(node)?;
    let (dy, x) = (l.tensor_operand(node, 0)?, l.tensor_operand(node, 1)?);
    let (dyt, xt) = (l.exact(&dy), l.exact(&x));
    let base = node.output[0].clone();
    let shape = dy.shape.clone();
    let f32s = |l: &mut Lowerer<'_>, suffix: &str| {
        let name = l.name_for(&format!("{base}.{suffix}"));
        l.g.declare(&name, &shape, DType::F32, Role::Gradient)
    };
    let (s, a, b, c, dx) = (f32s(l, "sigmoid"), f32s(l, "dy_s"), f32s(l, "dy_x"), f32s(l, "dsig"), f32s(l, "dx"));
    for (op, inputs, out) in [
        (Op::Sigmoid, vec![xt], s),
        (Op::Mul, vec![dyt, s], a),
        (Op::Mul, vec![dyt, xt], b),
        (Op::SigmoidBackward, vec![b, s], c),
        (Op::Add, vec![a, c], dx),
    ] {
        let name = l.g.name_of(out).to_string();
        l.g.node(&name, op, IrAttrs::new(), &inputs, &[], &[out]);
    }
    Ok(vec![tensor(dx, dy.shape)])
}

/// LayerNormalization (or SimplifiedLayerNormalization, RMSNorm) over the last axis,
/// keeping the statistics its gradient reads.
fn layer_norm(l: &mut Lowerer<'_>, node: &NodeProto, rms: bool) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    let rank = x.shape.len();
    if axis(Attrs(node).int("axis", -1), rank)? != rank - 1 {
        return unsupported(format!("{} over more than the last axis", node.op_type()));
    }
    let d = x.shape[rank - 1];
    let rows = x.shape[..rank - 1].to_vec();
    let scale = l.const_operand(node, 1)?;
    let gamma = l.weight(&scale, &[d])?;
    let xt = l.exact(&x);
    let epsilon = Attrs(node).float("epsilon", 1e-5);
    let attrs = ir_attrs(&[("epsilon", AttrValue::Float(epsilon))]);
    // ONNX keeps the statistics as [..., 1]; placer's are [...]: a view.
    let mut stat_view = rows.clone();
    stat_view.push(1);
    if rms {
        let outs = [(0, x.shape.clone(), Role::Activation), (1, rows.clone(), Role::Activation)];
        let t = emit(l, node, Op::RmsNorm, attrs, &[xt, gamma], &outs)?;
        return Ok(vec![tensor(t[0], x.shape), tensor(t[1], stat_view)]);
    }
    let Some(Value::Const(shift)) = l.optional(node, 2)? else {
        return unsupported("LayerNormalization without a constant bias");
    };
    let beta = l.weight(&shift, &[d])?;
    let outs = [
        (0, x.shape.clone(), Role::Activation),
        (1, rows.clone(), Role::Activation),
        (2, rows.clone(), Role::Activation),
    ];
    let t = emit(l, node, Op::LayerNorm, attrs, &[xt, gamma, beta], &outs)?;
    Ok(vec![tensor(t[0], x.shape), tensor(t[1], stat_view.clone()), tensor(t[2], stat_view)])
}

fn layer_norm_grad(l: &mut Lowerer<'_>, node: &NodeProto, rms: bool) -> Lowered {
    let (dy, x) = (l.tensor_operand(node, 0)?, l.tensor_operand(node, 1)?);
    let scale = l.const_operand(node, 2)?;
    let d = *x.shape.last().unwrap_or(&1);
    let rows = x.shape[..x.shape.len() - 1].to_vec();
    let gamma = l.weight(&scale, &[d])?;
    let stat = |l: &mut Lowerer<'_>, k: usize| -> Result<T, Fail> {
        let s = l.tensor_operand(node, k)?;
        Ok(l.shaped(s.t, &rows))
    };
    let epsilon = Attrs(node).float("epsilon", 1e-5);
    let attrs = ir_attrs(&[("epsilon", AttrValue::Float(epsilon))]);
    let (dyt, xt) = (l.exact(&dy), l.exact(&x));
    let dx = (0, x.shape.clone(), Role::Gradient);
    let dparam = |k| (k, vec![d], Role::WeightGradient);
    let g = if rms {
        let inv = stat(l, 3)?;
        emit(l, node, Op::RmsNormBackward, attrs, &[dyt, xt, gamma, inv], &[dx, dparam(1)])?
    } else {
        let (mean, inv) = (stat(l, 3)?, stat(l, 4)?);
        emit(l, node, Op::LayerNormBackward, attrs, &[dyt, xt, gamma, mean, inv], &[dx, dparam(1), dparam(2)])?
    };
    Ok(g.into_iter().enumerate().map(|(k, t)| tensor(t, if k == 0 { x.shape.clone() } else { vec![d] })).collect())
}

/// GatherGrad(shape, indices, dY): the embedding table's gradient.
fn gather_grad(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let shape: Vec<u64> = consts::int_operand(l, node, 0)?.iter().map(|&d| d.max(0) as u64).collect();
    let ax = Attrs(node).int("axis", 0);
    if ax != 0 {
        return pick_grad(l, node, &shape, ax);
    }
    let ids = match l.operand(node, 1)? {
        v @ (Value::Data(_) | Value::Const(_)) => super::gather::fed_ids(l, &v)?,
        Value::Tensor(t) => l.exact(&t),
        _ => return Err(Fail::Poisoned),
    };
    let dy = l.tensor_operand(node, 2)?;
    let mut rows = l.g.shape(ids).to_vec();
    rows.push(*shape.last().unwrap_or(&1));
    let dyt = l.shaped(dy.t, &rows);
    let g =
        emit(l, node, Op::EmbeddingBackward, IrAttrs::new(), &[dyt, ids], &[(0, shape.clone(), Role::WeightGradient)])?;
    Ok(vec![tensor(g[0], shape)])
}

/// The gradient of one position picked from [.., S, D] (see `gather::pick`): the
/// selector's transpose times dY, which scatters dY into that position.
fn pick_grad(l: &mut Lowerer<'_>, node: &NodeProto, shape: &[u64], ax: i64) -> Lowered {
    let rank = shape.len();
    let one = matches!(l.operand(node, 1)?, Value::Const(c) if c.numel() == 1);
    if rank < 2 || axis(ax, rank)? != rank - 2 || !one {
        return unsupported("GatherGrad other than of one position along the axis before the last");
    }
    let st = super::gather::selector(l, shape);
    let dy = l.tensor_operand(node, 2)?;
    let mut rows = shape[..rank - 2].to_vec();
    rows.extend([1, shape[rank - 1]]);
    let dyt = l.shaped(dy.t, &rows);
    let attrs = ir_attrs(&[("transpose_a", AttrValue::Bool(true))]);
    let g = emit(l, node, Op::MatMul, attrs, &[st, dyt], &[(0, shape.to_vec(), Role::Gradient)])?;
    Ok(vec![tensor(g[0], shape.to_vec())])
}

fn ratio(l: &Lowerer<'_>, node: &NodeProto, k: usize) -> Result<f64, Fail> {
    match l.optional(node, k)? {
        None => Ok(0.5),
        Some(Value::Const(c)) => {
            c.scalar().map_or_else(|| unsupported("a dropout ratio the importer does not know"), Ok)
        }
        Some(_) => unsupported("a computed dropout ratio"),
    }
}

/// Dropout with its mask, which the gradient reads: one byte per element, as onnxruntime keeps it.
fn dropout(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    let r = ratio(l, node, 1)?;
    let xt = l.exact(&x);
    let attrs = ir_attrs(&[("ratio", AttrValue::Float(r))]);
    let name = l.name_for(&node.output[0]);
    let y = l.g.declare(&name, &x.shape, l.dtype_of(xt), Role::Activation);
    let mask_name = l.name_for(node.output.get(1).filter(|m| !m.is_empty()).map_or(&format!("{name}.mask"), |m| m));
    let mask = l.g.declare(&mask_name, &x.shape, DType::U8, Role::Workspace);
    l.g.node(&name, Op::Dropout, attrs, &[xt], &[], &[y, mask]);
    Ok(vec![tensor(y, x.shape.clone()), tensor(mask, x.shape)])
}

fn dropout_grad(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let (dy, mask) = (l.tensor_operand(node, 0)?, l.tensor_operand(node, 1)?);
    let r = ratio(l, node, 2)?;
    let (dyt, mt) = (l.exact(&dy), l.exact(&mask));
    let attrs = ir_attrs(&[("ratio", AttrValue::Float(r))]);
    let dx = emit(l, node, Op::DropoutBackward, attrs, &[dyt, mt], &[(0, dy.shape.clone(), Role::Gradient)])?;
    Ok(vec![tensor(dx[0], dy.shape)])
}

/// ConcatTraining: a concat that also writes each part's length, which its gradient
/// (SplitTraining) reads as the split sizes; the lengths are known from the shapes.
fn concat_training(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let parts: Vec<Tensor> = (0..node.input.len()).map(|k| l.tensor_operand(node, k)).collect::<Result<_, _>>()?;
    let rank = parts[0].shape.len();
    let ax = axis(Attrs(node).int("axis", 0), rank)?;
    let ts: Vec<T> = parts.iter().map(|p| l.exact(p)).collect();
    let mut shape = parts[0].shape.clone();
    shape[ax] = parts.iter().map(|p| p.shape[ax]).sum();
    let attrs = ir_attrs(&[("axis", AttrValue::Int(ax as i64))]);
    let y = emit(l, node, Op::Concat, attrs, &ts, &[(0, shape.clone(), Role::Activation)])?;
    let lengths: Vec<f64> = parts.iter().map(|p| p.shape[ax] as f64).collect();
    let n = lengths.len() as u64;
    let lengths =
        Constant { shape: vec![n], elem: Elem::Int(DType::I64), data: Some(lengths), origin: node.output[0].clone() };
    Ok(vec![tensor(y[0], shape), Value::Const(lengths)])
}

/// Expand of an activation. onnxruntime writes the gradient of a global average pool
/// (and of ReduceMean over H and W) as Expand of dY [N, C, 1, 1] to [N, C, H, W] and a
/// Scale by 1/(H·W), in either order: placer's global_avg_pool_backward does both, and
/// the Scale passes its operand on (`Lowerer::prescaled` pairs the two).
fn expand(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    let target: Vec<u64> = consts::int_operand(l, node, 1)?.iter().map(|&d| d.max(0) as u64).collect();
    let shape = super::derive::broadcast_all(&[&x.shape, &target])?;
    let (&[n, c, 1, 1], &[n2, c2, h, w]) = (x.shape.as_slice(), shape.as_slice()) else {
        return unsupported("Expand of an activation other than a pooled gradient [N, C, 1, 1]");
    };
    let factor = 1.0 / (h * w) as f64;
    let scaled_before = l.prescaled.get(&x.t).is_some_and(|&f| same(f, factor));
    let scaled_after = matches!(sole_reader_op(l, &node.output[0]), Some("Scale"));
    if n != n2 || c != c2 || !(scaled_before || scaled_after) {
        return unsupported("Expand of an activation other than a pooled gradient scaled by 1/(H·W)");
    }
    let dyt = l.shaped(x.t, &[n, c]);
    let dx = emit(l, node, Op::GlobalAvgPoolBackward, IrAttrs::new(), &[dyt], &[(0, shape.clone(), Role::Gradient)])?;
    if scaled_after {
        l.prescaled.insert(dx[0], factor);
    }
    Ok(vec![tensor(dx[0], shape)])
}

fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1e-12)
}

fn sole_reader_op<'m>(l: &Lowerer<'m>, value: &str) -> Option<&'m str> {
    match l.topo.readers_of(value) {
        [r] => Some(l.graph.node[*r].op_type()),
        _ => None,
    }
}

/// Scale(A, s): A·s (or A/s with scale_down), supported as the 1/(H·W) of a pooled
/// gradient, before or after its Expand.
fn scale(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    let Some(s) = l.const_operand(node, 1)?.scalar() else {
        return unsupported("Scale by a factor the importer does not know");
    };
    let factor = if Attrs(node).int("scale_down", 0) == 1 { 1.0 / s } else { s };
    let applied = l.prescaled.get(&x.t).is_some_and(|&f| same(f, factor));
    let before_expand = matches!(sole_reader_op(l, &node.output[0]), Some("Expand")) && x.shape.ends_with(&[1, 1]);
    if before_expand {
        l.prescaled.insert(x.t, factor);
    }
    if applied || before_expand {
        return Ok(vec![Value::Tensor(x)]);
    }
    unsupported("Scale other than a pooled gradient's 1/(H·W)")
}
