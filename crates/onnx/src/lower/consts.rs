//! Shape arithmetic: the small index tensors that exporters compute shapes with
//! (`Shape` → `Gather` → `Unsqueeze` → `Concat` → `Reshape`), and views that change only
//! the shape of a value.

use super::{Fail, Lowerer, bad, unsupported};
use crate::proto::NodeProto;
use crate::values::{Attrs, Constant, Elem, Value};
use placer_ir::DType;

/// Normalises a possibly negative axis against `rank`.
pub(crate) fn axis(a: i64, rank: usize) -> Result<usize, Fail> {
    let r = rank as i64;
    if a < -r || a >= r.max(1) {
        return bad(format!("axis {a} is out of range for rank {rank}"));
    }
    Ok(if a < 0 { (a + r) as usize } else { a as usize })
}

/// The same value with another shape (element count unchanged).
pub(crate) fn with_shape(v: Value, shape: Vec<u64>) -> Value {
    match v {
        Value::Tensor(mut t) => {
            t.shape = shape;
            Value::Tensor(t)
        }
        Value::Const(mut c) => {
            c.shape = shape;
            Value::Const(c)
        }
        other @ (Value::Poisoned | Value::Dropped) => other,
    }
}

pub(crate) fn shape_of(v: &Value) -> &[u64] {
    match v {
        Value::Tensor(t) => &t.shape,
        Value::Const(c) => &c.shape,
        Value::Poisoned | Value::Dropped => &[],
    }
}

fn ints_const(origin: &str, shape: Vec<u64>, values: Vec<i64>) -> Value {
    Value::Const(Constant {
        shape,
        elem: Elem::Int(DType::I64),
        data: Some(values.into_iter().map(|v| v as f64).collect()),
        origin: origin.to_string(),
    })
}

/// The integers of operand `k`, which must be a constant the file spells out.
pub(crate) fn int_operand(l: &Lowerer<'_>, node: &NodeProto, k: usize) -> Result<Vec<i64>, Fail> {
    let c = l.const_operand(node, k)?;
    match c.ints() {
        Some(v) => Ok(v),
        None => unsupported(format!("{} whose operand {k} is not a constant known to the importer", node.op_type())),
    }
}

/// `axes` of Squeeze/Unsqueeze/Reduce*: an attribute before opset 13, an input after.
pub(crate) fn axes(l: &Lowerer<'_>, node: &NodeProto) -> Result<Option<Vec<i64>>, Fail> {
    if let Some(a) = Attrs(node).ints("axes") {
        return Ok(Some(a));
    }
    match node.input.get(1).filter(|n| !n.is_empty()) {
        Some(_) => int_operand(l, node, 1).map(Some),
        None => Ok(None),
    }
}

pub(crate) fn shape_op(l: &Lowerer<'_>, node: &NodeProto) -> Result<Vec<Value>, Fail> {
    let v = l.operand(node, 0)?;
    let dims: Vec<i64> = shape_of(&v).iter().map(|&d| d as i64).collect();
    let a = Attrs(node);
    let rank = dims.len() as i64;
    let clamp = |x: i64| if x < 0 { (x + rank).max(0) } else { x.min(rank) } as usize;
    let (start, end) = (clamp(a.int("start", 0)), clamp(a.int("end", rank)));
    let picked = dims[start..end.max(start)].to_vec();
    Ok(vec![ints_const(node.output[0].as_str(), vec![picked.len() as u64], picked)])
}

pub(crate) fn unsqueeze(l: &Lowerer<'_>, node: &NodeProto) -> Result<Vec<Value>, Fail> {
    let v = l.operand(node, 0)?;
    let Some(axes_) = axes(l, node)? else { return bad("Unsqueeze without axes") };
    let mut shape = shape_of(&v).to_vec();
    let rank = shape.len() + axes_.len();
    let mut positions: Vec<usize> = axes_.iter().map(|&a| axis(a, rank)).collect::<Result<_, _>>()?;
    positions.sort_unstable();
    for p in positions {
        if p > shape.len() {
            return bad(format!("axis {p} is past the end"));
        }
        shape.insert(p, 1);
    }
    Ok(vec![with_shape(v, shape)])
}

pub(crate) fn squeeze(l: &Lowerer<'_>, node: &NodeProto) -> Result<Vec<Value>, Fail> {
    let v = l.operand(node, 0)?;
    let shape = shape_of(&v).to_vec();
    let drop: Vec<usize> = match axes(l, node)? {
        Some(a) => a.iter().map(|&x| axis(x, shape.len())).collect::<Result<_, _>>()?,
        None => (0..shape.len()).filter(|&i| shape[i] == 1).collect(),
    };
    if drop.iter().any(|&i| shape[i] != 1) {
        return bad(format!("cannot squeeze a dimension that is not 1 in {shape:?}"));
    }
    let kept = shape.iter().enumerate().filter(|(i, _)| !drop.contains(i)).map(|(_, &d)| d).collect();
    Ok(vec![with_shape(v, kept)])
}

pub(crate) fn flatten(l: &Lowerer<'_>, node: &NodeProto) -> Result<Vec<Value>, Fail> {
    let v = l.operand(node, 0)?;
    let shape = shape_of(&v).to_vec();
    let at = axis(Attrs(node).int("axis", 1), shape.len() + 1)?;
    let outer = shape[..at].iter().product();
    let inner = shape[at..].iter().product();
    Ok(vec![with_shape(v, vec![outer, inner])])
}

pub(crate) fn reshape(l: &mut Lowerer<'_>, node: &NodeProto) -> Result<Vec<Value>, Fail> {
    let v = l.operand(node, 0)?;
    let from = shape_of(&v).to_vec();
    let numel: u64 = from.iter().product();
    let mut target = match Attrs(node).ints("shape") {
        Some(s) if l.opset < 5 => s,
        _ => int_operand(l, node, 1)?,
    };
    let allow_zero = Attrs(node).int("allowzero", 0) == 1;
    // Exporters that fix the batch write it into Reshape targets; follow `--batch`.
    if let Some((file, new)) = l.rebatch
        && target.first() == Some(&(file as i64))
        && from.first() == Some(&new)
    {
        target[0] = new as i64;
        l.note(format!("Reshape targets with the file's batch {file} rewritten to batch {new}"));
    }
    let mut shape = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            0 if !allow_zero => match from.get(i) {
                Some(&x) => shape.push(x),
                None => return bad("a 0 in the target shape has no input dimension to copy"),
            },
            -1 if infer.is_none() => {
                infer = Some(i);
                shape.push(1);
            }
            d if d >= 0 => shape.push(d as u64),
            _ => return bad(format!("target shape {target:?} is invalid")),
        }
    }
    let known: u64 = shape.iter().product();
    if let Some(i) = infer {
        if known == 0 || !numel.is_multiple_of(known) {
            return bad(format!("cannot reshape {from:?} to {target:?}"));
        }
        shape[i] = numel / known;
    }
    if shape.iter().product::<u64>() != numel {
        return bad(format!("cannot reshape {from:?} ({numel} elements) to {target:?}"));
    }
    Ok(vec![with_shape(v, shape)])
}

/// Ops on constants only, evaluated when their data is known; otherwise the result is a
/// constant known by shape (weights computed from weights stay weights).
pub(crate) fn fold(l: &Lowerer<'_>, node: &NodeProto) -> Result<Vec<Value>, Fail> {
    let inputs: Vec<Constant> = (0..node.input.len())
        .filter(|&k| !node.input[k].is_empty())
        .map(|k| l.const_operand(node, k))
        .collect::<Result<_, _>>()?;
    let out = node.output[0].as_str();
    let op = node.op_type();
    let first = &inputs[0];
    match op {
        "Gather" => {
            let (data, idx) = (first, &inputs[1]);
            let a = axis(Attrs(node).int("axis", 0), data.shape.len())?;
            let (Some(d), Some(ix), true, 0) = (data.ints(), idx.ints(), data.shape.len() == 1, a) else {
                return unsupported("Gather on constants other than a 1-D shape vector");
            };
            let len = d.len() as i64;
            let picked: Result<Vec<i64>, Fail> = ix
                .iter()
                .map(|&i| {
                    let j = if i < 0 { i + len } else { i };
                    d.get(j as usize).copied().ok_or(Fail::Error(format!("index {i} out of range")))
                })
                .collect();
            Ok(vec![ints_const(out, idx.shape.clone(), picked?)])
        }
        "Concat" => {
            let mut all = Vec::new();
            for c in &inputs {
                match c.ints() {
                    Some(v) if c.shape.len() <= 1 => all.extend(v),
                    _ => return unsupported("Concat of constants other than shape vectors"),
                }
            }
            Ok(vec![ints_const(out, vec![all.len() as u64], all)])
        }
        "Cast" => {
            let to = Elem::from_onnx(Attrs(node).int("to", 1) as i32);
            let mut c = first.clone();
            if matches!(to, Elem::Int(_) | Elem::Bool) {
                c.data = c.data.map(|d| d.into_iter().map(f64::trunc).collect());
            }
            c.elem = to;
            c.origin = out.to_string();
            Ok(vec![Value::Const(c)])
        }
        "Add" | "Sub" | "Mul" | "Div" => {
            let (a, b) = (first, &inputs[1]);
            let shape = if a.numel() >= b.numel() { a.shape.clone() } else { b.shape.clone() };
            let data = match (&a.data, &b.data) {
                (Some(x), Some(y)) if x.len() == y.len() || x.len() == 1 || y.len() == 1 => {
                    let n = x.len().max(y.len());
                    let at = |v: &Vec<f64>, i: usize| if v.len() == 1 { v[0] } else { v[i] };
                    let int = matches!(a.elem, Elem::Int(_));
                    Some(
                        (0..n)
                            .map(|i| {
                                let (p, q) = (at(x, i), at(y, i));
                                match op {
                                    "Add" => p + q,
                                    "Sub" => p - q,
                                    "Mul" => p * q,
                                    _ if int && q != 0.0 => (p / q).floor(),
                                    _ => p / q,
                                }
                            })
                            .collect(),
                    )
                }
                _ => None,
            };
            Ok(vec![Value::Const(Constant { shape, elem: a.elem, data, origin: out.to_string() })])
        }
        "Slice" => slice(node, &inputs),
        "Expand" => {
            let Some(target) = inputs.get(1).and_then(Constant::ints) else {
                return unsupported("Expand to a shape the importer does not know");
            };
            let shape = broadcast(&first.shape, &target.iter().map(|&d| d.max(0) as u64).collect::<Vec<_>>())?;
            let data = first.data.as_ref().and_then(|d| match d.as_slice() {
                [x] => Some(vec![*x; shape.iter().product::<u64>() as usize]),
                _ if d.len() as u64 == shape.iter().product::<u64>() => Some(d.clone()),
                // Repeat a row over leading dimensions ([1, S] expanded to [B, S]).
                _ if shape.last() == first.shape.last() && first.numel() == *shape.last().unwrap_or(&0) => {
                    let rows = shape.iter().product::<u64>() / first.numel().max(1);
                    Some(d.iter().copied().cycle().take(d.len() * rows as usize).collect())
                }
                _ => None,
            });
            let data = data.filter(|d| d.len() as u64 <= crate::values::MAX_READ_ELEMENTS);
            Ok(vec![Value::Const(Constant { shape, elem: first.elem, data, origin: out.to_string() })])
        }
        "Equal" | "Where" => {
            let n = inputs.iter().map(Constant::numel).max().unwrap_or(0);
            let at = |c: &Constant, i: usize| c.data.as_ref().map(|d| if d.len() == 1 { d[0] } else { d[i] });
            let same = inputs.iter().all(|c| c.numel() == n || c.numel() == 1);
            let data: Option<Vec<f64>> = same
                .then(|| {
                    (0..n as usize)
                        .map(|i| match op {
                            "Equal" => Some(f64::from(u8::from(at(&inputs[0], i)? == at(&inputs[1], i)?))),
                            _ => Some(if at(&inputs[0], i)? != 0.0 { at(&inputs[1], i)? } else { at(&inputs[2], i)? }),
                        })
                        .collect::<Option<Vec<f64>>>()
                })
                .flatten();
            let widest = inputs.iter().max_by_key(|c| c.numel()).unwrap_or(first);
            let elem = if op == "Equal" { Elem::Bool } else { inputs.get(1).map_or(first.elem, |c| c.elem) };
            Ok(vec![Value::Const(Constant { shape: widest.shape.clone(), elem, data, origin: out.to_string() })])
        }
        "Transpose" => {
            let perm = Attrs(node).ints("perm").unwrap_or_else(|| (0..first.shape.len() as i64).rev().collect());
            let shape = perm.iter().map(|&p| first.shape.get(p as usize).copied().unwrap_or(1)).collect();
            Ok(vec![Value::Const(Constant { shape, elem: first.elem, data: None, origin: out.to_string() })])
        }
        _ => unsupported(format!("{op} on constants")),
    }
}

/// Numpy-style broadcast of two shapes.
fn broadcast(a: &[u64], b: &[u64]) -> Result<Vec<u64>, Fail> {
    let rank = a.len().max(b.len());
    let dim = |s: &[u64], i: usize| if i + s.len() < rank { 1 } else { s[i + s.len() - rank] };
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y || y == 1 => Ok(x),
            (1, y) => Ok(y),
            (x, y) => bad(format!("shapes {a:?} and {b:?} do not broadcast ({x} against {y})")),
        })
        .collect()
}

/// Slice (opset 10+: starts, ends, axes, steps as inputs) of a constant.
fn slice(node: &NodeProto, inputs: &[Constant]) -> Result<Vec<Value>, Fail> {
    let data = &inputs[0];
    let ints = |k: usize| inputs.get(k).and_then(Constant::ints);
    let (Some(starts), Some(ends)) = (ints(1), ints(2)) else {
        return unsupported("Slice with bounds the importer does not know (or opset < 10 attributes)");
    };
    let rank = data.shape.len();
    let axes: Vec<usize> = match ints(3) {
        Some(a) => a.iter().map(|&x| axis(x, rank)).collect::<Result<_, _>>()?,
        None => (0..starts.len()).collect(),
    };
    let steps = ints(4).unwrap_or_else(|| vec![1; starts.len()]);
    if steps.iter().any(|&s| s != 1) || axes.len() != starts.len() || ends.len() != starts.len() {
        return unsupported("Slice with steps other than 1");
    }
    let mut shape = data.shape.clone();
    let mut ranges: Vec<(u64, u64)> = shape.iter().map(|&d| (0, d)).collect();
    for ((&ax, &st), &en) in axes.iter().zip(&starts).zip(&ends) {
        let d = shape[ax] as i64;
        let clamp = |x: i64| if x < 0 { (x + d).max(0) } else { x.min(d) } as u64;
        let (a, b) = (clamp(st), clamp(en));
        ranges[ax] = (a, b.max(a));
        shape[ax] = b.saturating_sub(a);
    }
    // Elements, in row-major order, of the kept ranges.
    let values = data.data.as_ref().map(|d| {
        let mut out = Vec::new();
        let strides: Vec<u64> = (0..rank).map(|i| data.shape[i + 1..].iter().product()).collect();
        let count: u64 = shape.iter().product();
        for flat in 0..count {
            let mut rem = flat;
            let mut src = 0;
            for i in (0..rank).rev() {
                let idx = rem % shape[i].max(1);
                rem /= shape[i].max(1);
                src += (ranges[i].0 + idx) * strides[i];
            }
            out.push(d[src as usize]);
        }
        out
    });
    Ok(vec![Value::Const(Constant { shape, elem: data.elem, data: values, origin: node.output[0].clone() })])
}
