//! Elementwise ops between activations, data values (masks) and constants: placer's
//! `add` and `mul` broadcast their second operand, so a mask added to attention scores,
//! a squeeze-and-excitation gate and a layer scale are each one node, as in the file.

use super::derive::broadcast_all;
use super::{Fail, Lowered, Lowerer, bad, unsupported};
use crate::graph::op_label;
use crate::proto::NodeProto;
use crate::values::{Attrs, Constant, Elem, Tensor, Value};
use placer_ir::DType;
use placer_zoo::T;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Add,
    Mul,
}

/// The placer tensor for a non-activation operand: a weight for a float constant that
/// the layer trains (a bias, a layer scale), otherwise an input placer is fed.
fn operand_tensor(l: &mut Lowerer<'_>, v: &Value, note: &str) -> Result<T, Fail> {
    match v {
        Value::Tensor(t) => Ok(l.exact(t)),
        Value::Const(c) if is_weight(l, c) => l.weight(c, &c.shape),
        Value::Const(c) | Value::Data(c) => {
            if !note.is_empty() {
                l.note(note);
            }
            Ok(l.feed(c, DType::F32))
        }
        Value::Poisoned => Err(Fail::Poisoned),
        Value::Dropped => bad("a dropped input's values in an elementwise op"),
    }
}

/// Whether a constant operand is a trained parameter: in a forward graph, a float tensor
/// of more than one element that the file stores (an initializer, or something computed
/// from one); in a training graph, a parameter input. Scalars (0.5, √2, a mask's fill)
/// are constants.
pub(crate) fn is_weight(l: &Lowerer<'_>, c: &Constant) -> bool {
    let param = l.graph.input.iter().any(|i| i.name.as_deref() == Some(c.origin.as_str()));
    if l.training {
        // A training graph's parameters are its inputs with gradient buffers; its
        // initializers are buffers onnxruntime folded (a rotary cos/sin cache).
        return param;
    }
    let stored = c.data.is_none() || l.initializers.contains_key(c.origin.as_str()) || param;
    matches!(c.elem, Elem::Float(_)) && c.numel() > 1 && stored
}

/// `a ∘ b` with numpy broadcasting, as one placer `add` or `mul` whose second operand
/// is the one that broadcasts.
fn combine(l: &mut Lowerer<'_>, kind: Kind, a: &Value, b: &Value, out: &str, note: &str) -> Lowered {
    let (a, b) = (&l.rebatched(a), &l.rebatched(b));
    let (sa, sb) = (super::consts::shape_of(a).to_vec(), super::consts::shape_of(b).to_vec());
    let shape = broadcast_all(&[&sa, &sb])?;
    // The operand with the full shape goes first; the other broadcasts.
    let (full, other) = match (sa == shape, sb == shape) {
        (true, _) => (a, b),
        (false, true) => (b, a),
        (false, false) => return unsupported(format!("{shape:?} from two operands that both broadcast")),
    };
    let (x, y) = (operand_tensor(l, full, note)?, operand_tensor(l, other, note)?);
    let name = l.name_for(out);
    let z = match kind {
        Kind::Add => l.g.add(&name, x, y),
        Kind::Mul => l.g.mul(&name, x, y),
    };
    Ok(vec![Value::Tensor(Tensor { t: z, shape })])
}

/// The negation or reciprocal of a data value is data of the same shape: placer is fed
/// the value it adds or multiplies.
fn inverted(v: &Value) -> Option<Value> {
    match v {
        Value::Data(c) => Some(Value::Data(Constant { data: None, ..c.clone() })),
        Value::Const(c) if c.numel() == 1 || !matches!(c.elem, Elem::Float(_)) => {
            Some(Value::Data(Constant { data: None, ..c.clone() }))
        }
        _ => None,
    }
}

/// Add, Sub, Mul and Div where at least one operand is an activation.
pub(crate) fn binary(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let (a, b) = (l.operand(node, 0)?, l.operand(node, 1)?);
    let out = &node.output[0];
    let fed = "mask and constant operands of elementwise ops fed as inputs";
    match (node.op_type(), &a, &b) {
        ("Add", ..) => combine(l, Kind::Add, &a, &b, out, fed),
        ("Mul", ..) => combine(l, Kind::Mul, &a, &b, out, fed),
        // x - d and x / d: placer is fed -d or 1/d, which is data like d.
        ("Sub", Value::Tensor(_), other) | ("Div", Value::Tensor(_), other) => match inverted(other) {
            Some(inv) => {
                let kind = if node.op_type() == "Sub" { Kind::Add } else { Kind::Mul };
                combine(l, kind, &a, &inv, out, "subtracted or divided data fed as its negation or reciprocal")
            }
            None => unsupported(format!("{} of an activation by a weight or an activation", op_label(node))),
        },
        _ => unsupported(format!("{} of a constant or data by an activation", op_label(node))),
    }
}

/// `Where(cond, x, fill)` (or `Where(cond, fill, x)`) with a mask known as data or a
/// constant: placer adds a bias it is fed, 0 where x is kept and the fill elsewhere,
/// which is what a masked softmax needs.
pub(crate) fn where_(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let (c, x, y) = (l.operand(node, 0)?, l.operand(node, 1)?, l.operand(node, 2)?);
    let (act, fill) = match (&x, &y) {
        (Value::Tensor(_), Value::Tensor(_)) => return select(l, node, &c, &x, &y),
        (Value::Tensor(_), f) => (&x, f),
        (f, Value::Tensor(_)) => (&y, f),
        _ => return bad("Where without an activation"),
    };
    let (Value::Data(cond) | Value::Const(cond)) = &c else {
        return unsupported("Where with a computed condition");
    };
    let shape = broadcast_all(&[&cond.shape, super::consts::shape_of(fill)])?;
    let bias = Value::Data(Constant {
        shape,
        elem: Elem::Float(DType::F32),
        data: None,
        origin: format!("{}.bias", node.output[0]),
    });
    combine(
        l,
        Kind::Add,
        act,
        &bias,
        &node.output[0],
        "Where(mask, x, fill) imported as x plus a fed bias (0 or the fill)",
    )
}

/// Where(mask, x, y) between two activations: `x·m + y·(1 − m)`, with the mask and its
/// complement fed (as data, they change with every batch). Both branches get their
/// gradient through the products, as the framework's select routes it.
fn select(l: &mut Lowerer<'_>, node: &NodeProto, c: &Value, x: &Value, y: &Value) -> Lowered {
    let (Value::Data(cond) | Value::Const(cond)) = c else {
        return unsupported("Where between two activations with a computed condition");
    };
    let out = &node.output[0];
    let fed = |what: &str| {
        Value::Data(Constant {
            shape: cond.shape.clone(),
            elem: Elem::Float(DType::F32),
            data: None,
            origin: format!("{out}.{what}"),
        })
    };
    let note = "Where(mask, x, y) between two activations imported as x·mask + y·(1 − mask), both fed";
    let then = combine(l, Kind::Mul, x, &fed("mask"), &format!("{out}.then"), note)?;
    let other = combine(l, Kind::Mul, y, &fed("unmask"), &format!("{out}.else"), note)?;
    match (then.first(), other.first()) {
        (Some(a), Some(b)) => combine(l, Kind::Add, a, b, out, note),
        _ => bad("Where's branches produced nothing"),
    }
}

/// Clip with constant bounds (ReLU6 is Clip(0, 6)).
pub(crate) fn clip(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    let a = Attrs(node);
    let bound = |k: usize, attr: &str, default: f64| -> Result<f64, Fail> {
        if l.opset < 11 {
            return Ok(a.float(attr, default));
        }
        match l.optional(node, k)? {
            None => Ok(default),
            Some(Value::Const(c)) => {
                c.scalar().map_or_else(|| unsupported("Clip with a bound that is not a known scalar"), Ok)
            }
            Some(_) => unsupported("Clip with a computed bound"),
        }
    };
    let (min, max) = (bound(1, "min", f64::NEG_INFINITY)?, bound(2, "max", f64::INFINITY)?);
    if !min.is_finite() || !max.is_finite() {
        return unsupported("Clip without both bounds");
    }
    let xt = l.exact(&x);
    let name = l.name_for(&node.output[0]);
    let y = l.g.clip(&name, xt, min, max);
    Ok(vec![Value::Tensor(Tensor { t: y, shape: x.shape })])
}

/// Expand of a weight to a batch (ViT's class token [1, 1, D] to [B, 1, D]): a `mul` of
/// a fed ones tensor by the weight, so that the weight is one parameter and its
/// gradient the sum over the batch.
pub(crate) fn expand_weight(l: &mut Lowerer<'_>, node: &NodeProto, w: &Constant) -> Lowered {
    let target: Vec<u64> = super::consts::int_operand(l, node, 1)?.iter().map(|&d| d.max(0) as u64).collect();
    let shape = broadcast_all(&[&w.shape, &target])?;
    let ones = Value::Data(Constant {
        shape: shape.clone(),
        elem: Elem::Float(DType::F32),
        data: None,
        origin: format!("{}.ones", node.output[0]),
    });
    combine(
        l,
        Kind::Mul,
        &ones,
        &Value::Const(w.clone()),
        &node.output[0],
        "Expand of a weight imported as a fed ones tensor times the weight",
    )
}

/// A constant of the export's batch that the exporter folded from a weight expanded to it
/// (the dynamo exporter writes ViT's `class_token.expand(B, -1, -1)` as one [B, 1, D]
/// initializer): the weight as it was, [1, ...], expanded to `batch` as [`expand_weight`]
/// does, so that it is one parameter whatever the batch.
pub(crate) fn unfold_batch(l: &mut Lowerer<'_>, c: &Constant, batch: u64, out: &str) -> Result<Tensor, Fail> {
    let rest = &c.shape[1..];
    let one = Constant { shape: [&[1], rest].concat(), elem: c.elem, data: None, origin: c.origin.clone() };
    let ones = Value::Data(Constant {
        shape: [&[batch], rest].concat(),
        elem: Elem::Float(DType::F32),
        data: None,
        origin: format!("{out}.ones"),
    });
    let note = "a constant of the export's batch (a weight the exporter expanded and folded, as ViT's class \
                token) imported as one [1, ...] weight times a fed ones tensor";
    match combine(l, Kind::Mul, &ones, &Value::Const(one), out, note)?.pop() {
        Some(Value::Tensor(t)) => Ok(t),
        _ => bad("the expanded weight is not a tensor"),
    }
}
