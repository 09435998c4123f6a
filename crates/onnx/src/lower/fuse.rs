//! Patterns that exporters spell out in several ONNX nodes and placer runs as one op:
//! GELU written with `Erf`, a batch norm followed by a per-channel scale and shift
//! (Caffe2's Scale layer), and attention scores divided by √d.

use super::consts::small;
use super::ops::{batch_norm, layer_norm_on, matmul};
use super::{Fail, Lowered, Lowerer, bad};
use crate::proto::NodeProto;
use crate::values::{Attrs, Value};
use std::collections::HashMap;

/// What a fused node computes in place of its chain.
#[derive(Debug, Clone)]
pub(crate) enum Fused {
    /// `x·½·(1 + erf(x/√2))`, or with `tanh` GELU's tanh approximation
    /// `x·½·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`: `x` is the ONNX value fed to the chain.
    Gelu { x: String, tanh: bool },
    /// BatchNormalization (node index) whose scale and shift are those of the Mul and
    /// Add that follow it (the norm's own scale and shift are folded in).
    ScaledNorm { norm: usize, scale: String, shift: String },
    /// MatMul (node index) whose product is scaled by `alpha`.
    ScaledMatMul { matmul: usize, alpha: f64 },
    /// A LayerNorm over the last axis written out (torch before opset 17).
    LayerNorm { x: String, scale: String, shift: String, epsilon: f64 },
    /// onnxruntime's ReLU6 (Clip) gradient: `dy · Cast(x ≥ min ∧ x ≤ max)`.
    ClipGrad { x: String, dy: String, min: f64, max: f64 },
    /// onnxruntime's gradient of a bare Erf: `dy · (2/√π · e^(−x·x))`.
    ErfGrad { x: String, dy: String },
    /// RMSNorm written out (Llama's and T5's `x · rsqrt(mean(x²) + ε) · w`).
    RmsNorm { x: String, scale: String, epsilon: f64 },
    /// `Where(IsNaN(softmax), c, v)`: the guard PyTorch's scaled-dot-product attention
    /// puts after its softmax (and onnxruntime's gradient of it): `v`, unchanged.
    NanGuard { value: String },
}

impl Fused {
    pub fn lower<'m>(&self, l: &mut Lowerer<'m>, last: &'m NodeProto) -> Lowered {
        let out = last.output[0].clone();
        match self {
            Fused::Gelu { x, tanh } => {
                let x = tensor_value(l, x)?;
                let name = l.name_for(&out);
                l.note(match tanh {
                    false => "GELU written with Erf fused into one gelu",
                    true => "GELU's tanh approximation written out (Pow, Tanh, ...) fused into one gelu: same tensors and traffic",
                });
                let y = l.g.gelu(&name, x.t);
                Ok(vec![Value::Tensor(crate::values::Tensor { t: y, shape: x.shape })])
            }
            Fused::ScaledNorm { norm, scale, shift } => {
                let node = &l.graph.node[*norm];
                let x = l.tensor_operand(node, 0)?;
                let (Some(Value::Const(s)), Some(Value::Const(b))) = (l.value(scale).cloned(), l.value(shift).cloned())
                else {
                    return bad("scale or shift is not a constant");
                };
                l.note("BatchNormalization + per-channel Mul + Add folded into one batch_norm");
                batch_norm(l, node, &x, &s, &b, &out)
            }
            Fused::LayerNorm { x, scale, shift, epsilon } => {
                let x = tensor_value(l, x)?;
                let (Some(Value::Const(s)), Some(Value::Const(b))) = (l.value(scale).cloned(), l.value(shift).cloned())
                else {
                    return bad("a written-out LayerNorm on a non-tensor or with computed scale or shift");
                };
                l.note("LayerNorm written out (ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add) fused into one layer_norm");
                layer_norm_on(l, &x, &s, &b, *epsilon, &out)
            }
            Fused::RmsNorm { x, scale, epsilon } => {
                let x = tensor_value(l, x)?;
                let Some(Value::Const(s)) = l.value(scale).cloned() else {
                    return bad("a written-out RMSNorm with a computed scale");
                };
                let Some(&d) = x.shape.last() else { return bad("RMSNorm of a scalar") };
                let gamma = l.weight(&s, &[d])?;
                let xt = if l.g.shape(x.t).last() == Some(&d) { x.t } else { l.exact(&x) };
                l.note(
                    "RMSNorm written out (Pow, ReduceMean, Add, Sqrt, Reciprocal or Div, Mul) fused into one rms_norm",
                );
                let name = l.name_for(&out);
                let y = l.g.rms_norm_with(&name, xt, gamma, *epsilon);
                Ok(vec![Value::Tensor(crate::values::Tensor { t: y, shape: x.shape })])
            }
            Fused::ClipGrad { x, dy, min, max } => {
                let attrs = placer_ir::Attrs::from([
                    ("min".to_string(), placer_ir::AttrValue::Float(*min)),
                    ("max".to_string(), placer_ir::AttrValue::Float(*max)),
                ]);
                l.note("Clip's gradient written out (GreaterOrEqual, LessOrEqual, And, Cast, Mul) fused into clip_backward");
                input_gradient(l, last, placer_ir::Op::ClipBackward, attrs, x, dy)
            }
            Fused::ErfGrad { x, dy } => {
                l.note("Erf's gradient written out (Mul, Neg, Exp, Mul by 2/√π, Mul) fused into erf_backward");
                input_gradient(l, last, placer_ir::Op::ErfBackward, placer_ir::Attrs::new(), x, dy)
            }
            Fused::NanGuard { value } => match l.value(value).cloned() {
                Some(Value::Poisoned) => Err(Fail::Poisoned),
                Some(v) => {
                    l.note(
                        "NaN guard after a softmax (IsNaN, Where) passed over: placer's attention masks are finite, \
                         so no row is masked whole and the softmax never yields NaN",
                    );
                    Ok(vec![v])
                }
                None => bad(format!("the guarded value '{value}' is not known")),
            },
            Fused::ScaledMatMul { matmul: i, alpha } => {
                let node = &l.graph.node[*i];
                let (a, b) = (l.operand(node, 0)?, l.operand(node, 1)?);
                l.note("MatMul followed by a scalar Div or Mul folded into the matmul's alpha");
                matmul(l, &a, &b, false, *alpha, &out).map(|v| vec![v])
            }
        }
    }
}

/// `op(dy, x)`, a backward op that reads the forward input `x`, emitted for the node
/// `last` whose output is the gradient: what a written-out gradient chain fuses into.
fn input_gradient(
    l: &mut Lowerer<'_>,
    last: &NodeProto,
    op: placer_ir::Op,
    attrs: placer_ir::Attrs,
    x: &str,
    dy: &str,
) -> Lowered {
    let (x, dy) = (tensor_value(l, x)?, tensor_value(l, dy)?);
    let (xt, dyt) = (l.exact(&x), l.exact(&dy));
    let outs = [(0, dy.shape.clone(), placer_ir::Role::Gradient)];
    let dx = super::emit::emit(l, last, op, attrs, &[dyt, xt], &outs)?;
    Ok(vec![Value::Tensor(crate::values::Tensor { t: dx[0], shape: dy.shape })])
}

/// The tensor a fused chain starts from; an upstream failure is passed on, not reported.
fn tensor_value(l: &Lowerer<'_>, name: &str) -> Result<crate::values::Tensor, Fail> {
    match l.value(name) {
        Some(Value::Tensor(t)) => Ok(t.clone()),
        Some(Value::Poisoned) => Err(Fail::Poisoned),
        _ => bad(format!("the fused chain starts from '{name}', which is not an activation")),
    }
}

/// A one-element constant feeding `name`.
fn scalar(l: &Lowerer<'_>, name: &str) -> Option<f64> {
    match small(l, name).as_deref() {
        Some([x]) => Some(*x),
        _ => None,
    }
}

fn is_const(l: &Lowerer<'_>, name: &str) -> bool {
    l.initializers.contains_key(name)
        || l.topo.producer.get(name).is_some_and(|&i| {
            matches!(l.graph.node[i].op_type(), "Constant" | "ConstantOfShape" | "Unsqueeze" | "Reshape")
                && l.graph.node[i].input.iter().all(|n| n.is_empty() || is_const(l, n))
        })
}

fn close(x: Option<f64>, want: f64) -> bool {
    x.is_some_and(|x| (x - want).abs() <= 1e-4 * want.abs().max(1.0))
}

/// The single node reading `value` (and nothing else reads it or exposes it).
fn sole_reader<'a>(l: &'a Lowerer<'_>, value: &str) -> Option<(usize, &'a NodeProto)> {
    let graph_output = l.graph.output.iter().any(|o| o.name.as_deref() == Some(value));
    match l.topo.readers_of(value) {
        [r] if !graph_output => Some((*r, &l.graph.node[*r])),
        _ => None,
    }
}

/// The operand of a binary node that is not `value`.
fn other<'n>(node: &'n NodeProto, value: &str) -> Option<&'n str> {
    match node.input.as_slice() {
        [a, b] if a == value => Some(b),
        [a, b] if b == value => Some(a),
        _ => None,
    }
}

/// Finds every fusable chain: the last node of each does the work, the others are skipped.
pub(crate) fn find(l: &mut Lowerer<'_>) -> HashMap<usize, Fused> {
    let mut fused = HashMap::new();
    let mut skipped = Vec::new();
    for (i, node) in l.graph.node.iter().enumerate() {
        match node.op_type() {
            "ReduceMean" => {
                if let Some((last, f, chain)) = layer_norm(l, i) {
                    fused.insert(last, f);
                    skipped.extend(chain);
                }
            }
            "Pow" => {
                if let Some((last, f, chain)) = rms_norm(l, i) {
                    fused.insert(last, f);
                    skipped.extend(chain);
                }
            }
            "Tanh" => {
                if let Some((last, f, chain)) = gelu_tanh(l, i) {
                    fused.insert(last, f);
                    skipped.extend(chain);
                }
            }
            "Exp" => {
                if let Some((last, f, chain)) = erf_grad(l, i) {
                    fused.insert(last, f);
                    skipped.extend(chain);
                }
            }
            "And" => {
                if let Some((last, f, chain)) = clip_grad(l, i) {
                    fused.insert(last, f);
                    skipped.extend(chain);
                }
            }
            "IsNaN" => {
                if let Some(wheres) = nan_guard(l, node) {
                    for (w, value) in wheres {
                        fused.insert(w, Fused::NanGuard { value });
                    }
                    skipped.push(i);
                }
            }
            "Erf" => {
                if let Some((last, f, chain)) = gelu(l, i) {
                    fused.insert(last, f);
                    skipped.extend(chain);
                }
            }
            "BatchNormalization" => {
                let Some((mul_i, mul)) = sole_reader(l, &node.output[0]) else { continue };
                let Some(scale) = other(mul, &node.output[0]).filter(|s| mul.op_type() == "Mul" && is_const(l, s))
                else {
                    continue;
                };
                let Some((add_i, add)) = sole_reader(l, &mul.output[0]) else { continue };
                let Some(shift) = other(add, &mul.output[0]).filter(|s| add.op_type() == "Add" && is_const(l, s))
                else {
                    continue;
                };
                fused.insert(add_i, Fused::ScaledNorm { norm: i, scale: scale.to_string(), shift: shift.to_string() });
                skipped.extend([i, mul_i]);
            }
            "MatMul" => {
                let Some((s_i, s)) = sole_reader(l, &node.output[0]) else { continue };
                let by = match (s.op_type(), s.input.first() == Some(&node.output[0])) {
                    ("Div" | "Mul", true) => s.input.get(1).and_then(|n| scalar(l, n)),
                    ("Mul", false) => s.input.first().and_then(|n| scalar(l, n)),
                    _ => None,
                };
                let alpha = match (s.op_type(), by) {
                    ("Div", Some(c)) if c != 0.0 => 1.0 / c,
                    ("Mul", Some(c)) => c,
                    _ => continue,
                };
                fused.insert(s_i, Fused::ScaledMatMul { matmul: i, alpha });
                skipped.push(i);
            }
            _ => {}
        }
    }
    for i in skipped {
        l.skip(i);
    }
    fused
}

/// `IsNaN` of a softmax whose every reader is `Where(that, constant, v)`: each Where and
/// the value `v` it passes on when nothing is NaN (the softmax itself in the forward pass,
/// its gradient in onnxruntime's backward pass).
fn nan_guard(l: &Lowerer<'_>, isnan: &NodeProto) -> Option<Vec<(usize, String)>> {
    let of = *l.topo.producer.get(isnan.input.first()?)?;
    let mask = isnan.output.first()?;
    let exposed = l.graph.output.iter().any(|o| o.name.as_ref() == Some(mask));
    if l.graph.node[of].op_type() != "Softmax" || exposed {
        return None;
    }
    l.topo
        .readers_of(mask)
        .iter()
        .map(|&r| {
            let w = &l.graph.node[r];
            let guards = w.op_type() == "Where" && w.input.first() == Some(mask) && is_const(l, w.input.get(1)?);
            guards.then(|| Some((r, w.input.get(2)?.clone())))?
        })
        .collect::<Option<Vec<_>>>()
        .filter(|w| !w.is_empty())
}

/// `Mul(Mul(x, Add(Erf(Div(x, √2)), 1)), 0.5)` in either multiplication order, as
/// `torch.onnx.export` writes `nn.GELU()` before opset 20.
fn gelu(l: &Lowerer<'_>, erf: usize) -> Option<(usize, Fused, Vec<usize>)> {
    let erf_node = &l.graph.node[erf];
    let div_i = *l.topo.producer.get(erf_node.input.first()?)?;
    let div = &l.graph.node[div_i];
    let x = div.input.first()?.clone();
    let scaled = match div.op_type() {
        "Div" => close(scalar(l, div.input.get(1)?), std::f64::consts::SQRT_2),
        "Mul" => close(scalar(l, div.input.get(1)?), std::f64::consts::FRAC_1_SQRT_2),
        _ => false,
    };
    if !scaled || sole_reader(l, &div.output[0])?.0 != erf {
        return None;
    }
    let (add_i, add) = sole_reader(l, &erf_node.output[0])?;
    if add.op_type() != "Add" || !close(scalar(l, other(add, &erf_node.output[0])?), 1.0) {
        return None;
    }
    let (mul_i, mul) = sole_reader(l, &add.output[0])?;
    if mul.op_type() != "Mul" {
        return None;
    }
    let partner = other(mul, &add.output[0])?;
    if close(scalar(l, partner), 0.5) {
        // x · ((1 + erf) · 0.5), as the dynamo exporter writes it
        let (last_i, last) = sole_reader(l, &mul.output[0])?;
        if last.op_type() != "Mul" || other(last, &mul.output[0]) != Some(x.as_str()) {
            return None;
        }
        return Some((last_i, Fused::Gelu { x, tanh: false }, vec![div_i, erf, add_i, mul_i]));
    }
    if partner == x {
        // (x · (1 + erf)) · 0.5
        let (half_i, half) = sole_reader(l, &mul.output[0])?;
        if half.op_type() != "Mul" || !close(scalar(l, other(half, &mul.output[0])?), 0.5) {
            return None;
        }
        return Some((half_i, Fused::Gelu { x, tanh: false }, vec![div_i, erf, add_i, mul_i]));
    }
    // (x · 0.5) · (1 + erf)
    let half_i = *l.topo.producer.get(partner)?;
    let half = &l.graph.node[half_i];
    if half.op_type() != "Mul" || other(half, &x).is_none_or(|c| !close(scalar(l, c), 0.5)) {
        return None;
    }
    if sole_reader(l, partner)?.0 != mul_i {
        return None;
    }
    Some((mul_i, Fused::Gelu { x, tanh: false }, vec![div_i, erf, add_i, half_i]))
}

/// Reduces over the last axis only (`axes` [-1], as an attribute or an input).
fn last_axis_mean(l: &Lowerer<'_>, node: &NodeProto) -> bool {
    let axes = Attrs(node).ints("axes").or_else(|| {
        let v = small(l, node.input.get(1)?)?;
        Some(v.into_iter().map(|x| x as i64).collect())
    });
    node.op_type() == "ReduceMean" && axes.as_deref() == Some(&[-1]) && Attrs(node).int("keepdims", 1) == 1
}

/// `(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * gamma + beta` over the last axis.
fn layer_norm(l: &Lowerer<'_>, mean_i: usize) -> Option<(usize, Fused, Vec<usize>)> {
    let mean = &l.graph.node[mean_i];
    let x = mean.input.first()?.clone();
    if !last_axis_mean(l, mean) {
        return None;
    }
    let (sub_i, sub) = sole_reader(l, &mean.output[0])?;
    if sub.op_type() != "Sub" || sub.input.first() != Some(&x) {
        return None;
    }
    let centred = &sub.output[0];
    let readers = l.topo.readers_of(centred);
    let op_of = |i: usize| l.graph.node[i].op_type();
    let (&pow_i, &div_i) = match readers {
        [a, b] if op_of(*a) == "Pow" && op_of(*b) == "Div" => (a, b),
        [a, b] if op_of(*a) == "Div" && op_of(*b) == "Pow" => (b, a),
        _ => return None,
    };
    let pow = &l.graph.node[pow_i];
    if !close(scalar(l, pow.input.get(1)?), 2.0) {
        return None;
    }
    let (var_i, var) = sole_reader(l, &pow.output[0])?;
    if !last_axis_mean(l, var) {
        return None;
    }
    let (eps_i, eps) = sole_reader(l, &var.output[0])?;
    let epsilon = scalar(l, other(eps, &var.output[0])?).filter(|_| eps.op_type() == "Add")?;
    let (sqrt_i, sqrt) = sole_reader(l, &eps.output[0])?;
    let (d_i, div) = sole_reader(l, &sqrt.output[0])?;
    if sqrt.op_type() != "Sqrt" || d_i != div_i || div.input.first() != Some(centred) {
        return None;
    }
    let (mul_i, mul) = sole_reader(l, &div.output[0])?;
    let scale = other(mul, &div.output[0]).filter(|s| mul.op_type() == "Mul" && is_const(l, s))?;
    let (add_i, add) = sole_reader(l, &mul.output[0])?;
    let shift = other(add, &mul.output[0]).filter(|s| add.op_type() == "Add" && is_const(l, s))?;
    let fused = Fused::LayerNorm { x, scale: scale.to_string(), shift: shift.to_string(), epsilon };
    Some((add_i, fused, vec![mean_i, sub_i, pow_i, var_i, eps_i, sqrt_i, div_i, mul_i]))
}

/// `w · (x · 1/sqrt(mean(x²) + ε))` over the last axis, with the reciprocal written as
/// Reciprocal or as Div(1, ·), and a Cast to the same type allowed before the scale.
fn rms_norm(l: &Lowerer<'_>, pow_i: usize) -> Option<(usize, Fused, Vec<usize>)> {
    let pow = &l.graph.node[pow_i];
    let x = pow.input.first()?.clone();
    if !close(scalar(l, pow.input.get(1)?), 2.0) {
        return None;
    }
    let (mean_i, mean) = sole_reader(l, &pow.output[0])?;
    if !last_axis_mean(l, mean) {
        return None;
    }
    let (eps_i, eps) = sole_reader(l, &mean.output[0])?;
    let epsilon = scalar(l, other(eps, &mean.output[0])?).filter(|_| eps.op_type() == "Add")?;
    let (sqrt_i, sqrt) = sole_reader(l, &eps.output[0])?;
    let (inv_i, inv) = sole_reader(l, &sqrt.output[0])?;
    let reciprocal = match inv.op_type() {
        "Reciprocal" => true,
        "Div" => inv.input.get(1) == Some(&sqrt.output[0]) && close(scalar(l, inv.input.first()?), 1.0),
        _ => false,
    };
    if sqrt.op_type() != "Sqrt" || !reciprocal {
        return None;
    }
    let (norm_i, norm) = sole_reader(l, &inv.output[0])?;
    if norm.op_type() != "Mul" || other(norm, &inv.output[0]) != Some(x.as_str()) {
        return None;
    }
    let mut chain = vec![pow_i, mean_i, eps_i, sqrt_i, inv_i, norm_i];
    let (mut next_i, mut next) = sole_reader(l, &norm.output[0])?;
    let mut input = norm.output[0].clone();
    if next.op_type() == "Cast" {
        chain.push(next_i);
        input = next.output[0].clone();
        (next_i, next) = sole_reader(l, &next.output[0])?;
    }
    let scale = other(next, &input).filter(|s| next.op_type() == "Mul" && is_const(l, s))?;
    Some((next_i, Fused::RmsNorm { x, scale: scale.to_string(), epsilon }, chain))
}

/// GPT-2's `gelu_new`: `(x·½)·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`, as both torch
/// exporters write it (the half taken first), or with the half taken last.
fn gelu_tanh(l: &Lowerer<'_>, tanh_i: usize) -> Option<(usize, Fused, Vec<usize>)> {
    let tanh = &l.graph.node[tanh_i];
    let producer = |v: &str| l.topo.producer.get(v).map(|&i| (i, &l.graph.node[i]));
    let (m2_i, m2) = producer(tanh.input.first()?)?;
    let inner = m2.input.iter().find(|v| !close(scalar(l, v), (2.0 / std::f64::consts::PI).sqrt()))?;
    if m2.op_type() != "Mul" || other(m2, inner).is_none_or(|c| !close(scalar(l, c), 0.797_884_560_8)) {
        return None;
    }
    let (a2_i, a2) = producer(inner)?;
    if a2.op_type() != "Add" {
        return None;
    }
    // One operand of the Add is x, the other 0.044715·x³.
    let (x, cube_term) = a2.input.iter().find_map(|cand| {
        let rest = other(a2, cand)?;
        let (m1_i, m1) = producer(rest)?;
        let pow_out = other(m1, m1.input.iter().find(|v| close(scalar(l, v), 0.044715))?)?;
        let (pow_i, pow) = producer(pow_out)?;
        let ok = m1.op_type() == "Mul"
            && pow.op_type() == "Pow"
            && pow.input.first() == Some(cand)
            && close(scalar(l, pow.input.get(1)?), 3.0);
        ok.then(|| (cand.clone(), [m1_i, pow_i]))
    })?;
    let (add1_i, add1) = sole_reader(l, &tanh.output[0])?;
    if add1.op_type() != "Add" || !close(scalar(l, other(add1, &tanh.output[0])?), 1.0) {
        return None;
    }
    let (mul_i, mul) = sole_reader(l, &add1.output[0])?;
    if mul.op_type() != "Mul" {
        return None;
    }
    let mut chain = vec![cube_term[0], cube_term[1], a2_i, m2_i, tanh_i, add1_i];
    let partner = other(mul, &add1.output[0])?;
    let last = if partner == x {
        // (x · (1 + tanh)) · 0.5
        let (half_i, half) = sole_reader(l, &mul.output[0])?;
        if half.op_type() != "Mul" || !close(scalar(l, other(half, &mul.output[0])?), 0.5) {
            return None;
        }
        chain.push(mul_i);
        half_i
    } else {
        // (x · 0.5) · (1 + tanh)
        let (half_i, half) = producer(partner)?;
        if half.op_type() != "Mul" || other(half, &x).is_none_or(|c| !close(scalar(l, c), 0.5)) {
            return None;
        }
        chain.push(half_i);
        mul_i
    };
    Some((last, Fused::Gelu { x, tanh: true }, chain))
}

/// `Mul(dy, Cast(And(GreaterOrEqual(x, min), LessOrEqual(x, max))))`, either operand
/// order, as onnxruntime's gradient builder writes Clip's gradient.
fn clip_grad(l: &Lowerer<'_>, and_i: usize) -> Option<(usize, Fused, Vec<usize>)> {
    let and = &l.graph.node[and_i];
    let producer = |v: &str| l.topo.producer.get(v).map(|&i| (i, &l.graph.node[i]));
    let (mut lo, mut hi) = (None, None);
    for v in &and.input {
        let (i, cmp) = producer(v)?;
        let bound = scalar(l, cmp.input.get(1)?)?;
        match cmp.op_type() {
            "GreaterOrEqual" => lo = Some((i, cmp.input.first()?.clone(), bound)),
            "LessOrEqual" => hi = Some((i, cmp.input.first()?.clone(), bound)),
            _ => return None,
        }
    }
    let ((lo_i, x, min), (hi_i, x2, max)) = (lo?, hi?);
    if x != x2 {
        return None;
    }
    let (cast_i, cast) = sole_reader(l, &and.output[0])?;
    if cast.op_type() != "Cast" {
        return None;
    }
    let (mul_i, mul) = sole_reader(l, &cast.output[0])?;
    let dy = other(mul, &cast.output[0]).filter(|_| mul.op_type() == "Mul")?;
    Some((mul_i, Fused::ClipGrad { x, dy: dy.to_string(), min, max }, vec![lo_i, hi_i, and_i, cast_i]))
}

/// onnxruntime's gradient of a bare Erf, from its Exp: `Mul(x, x)` → `Neg` → `Exp` →
/// `Mul` by 2/√π → `Mul` by dy.
fn erf_grad(l: &Lowerer<'_>, exp_i: usize) -> Option<(usize, Fused, Vec<usize>)> {
    let producer = |v: &str| l.topo.producer.get(v).map(|&i| (i, &l.graph.node[i]));
    let exp = &l.graph.node[exp_i];
    let (neg_i, neg) = producer(exp.input.first()?)?;
    let (sq_i, sq) = producer(neg.input.first()?)?;
    let x = sq.input.first()?;
    if neg.op_type() != "Neg" || sq.op_type() != "Mul" || sq.input.get(1) != Some(x) {
        return None;
    }
    sole_reader(l, &sq.output[0]).filter(|(i, _)| *i == neg_i)?;
    let (c_i, c) = sole_reader(l, &exp.output[0])?;
    let two_over_sqrt_pi = std::f64::consts::FRAC_2_SQRT_PI;
    if c.op_type() != "Mul" || !close(scalar(l, other(c, &exp.output[0])?), two_over_sqrt_pi) {
        return None;
    }
    let (last_i, last) = sole_reader(l, &c.output[0])?;
    let dy = other(last, &c.output[0]).filter(|_| last.op_type() == "Mul")?;
    Some((last_i, Fused::ErfGrad { x: x.clone(), dy: dy.to_string() }, vec![sq_i, neg_i, exp_i, c_i]))
}
