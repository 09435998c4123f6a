//! Shape arithmetic: the small index tensors that exporters compute shapes with
//! (`Shape` → `Gather` → `Unsqueeze` → `Concat` → `Reshape`), views that change only
//! the shape of a value, and nodes that compute data (masks, ids) from data and
//! constants, evaluated like constants but by shape alone (`data_node`). The arithmetic
//! itself is derive.rs's, which needs nothing from here.

use super::{Fail, Lowered, Lowerer, bad, unsupported};
use crate::proto::NodeProto;
use crate::values::{Attrs, Constant, Elem, Value, constant_of};
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
        Value::Data(mut c) => {
            c.shape = shape;
            Value::Data(c)
        }
        other @ (Value::Poisoned | Value::Dropped) => other,
    }
}

pub(crate) fn shape_of(v: &Value) -> &[u64] {
    match v {
        Value::Tensor(t) => &t.shape,
        Value::Const(c) | Value::Data(c) => &c.shape,
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
    if let Some((file, new)) = l.rebatch {
        rebatch_target(l, &mut target, &from, numel, file, new);
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

/// A Reshape target that a file with a fixed batch wrote for it: its first dimension is
/// the file's batch where the input's is `--batch`; otherwise the first dimension that
/// is a multiple of the file's batch (rows of batch·sequence, or the batch after the
/// sequence) is scaled to `--batch` when that makes the element counts agree.
fn rebatch_target(l: &mut Lowerer<'_>, target: &mut [i64], from: &[u64], numel: u64, file: u64, new: u64) {
    let (file, new) = (file as i64, new as i64);
    // A 0 (copy the input's) or -1 (inferred) leaves the count to the input: no rewrite.
    let fits = |t: &[i64]| t.contains(&-1) || t.contains(&0) || t.iter().product::<i64>() == numel as i64;
    if target.first() == Some(&file) && from.first() == Some(&(new as u64)) {
        target[0] = new;
    } else if !fits(target) {
        let Some(i) = (0..target.len()).find(|&i| {
            let mut t = target.to_vec();
            t[i] = target[i] / file * new;
            target[i] > 0 && target[i] % file == 0 && fits(&t)
        }) else {
            return;
        };
        target[i] = target[i] / file * new;
    } else {
        return;
    }
    l.note(format!("Reshape targets with the file's batch {file} rewritten to batch {new}"));
}

/// Ops on constants only, evaluated when their data is known; otherwise the result is a
/// constant known by shape (weights computed from weights stay weights).
pub(crate) fn fold(l: &Lowerer<'_>, node: &NodeProto) -> Result<Vec<Value>, Fail> {
    let inputs: Vec<Constant> = (0..node.input.len())
        .filter(|&k| !node.input[k].is_empty())
        .map(|k| l.const_operand(node, k))
        .collect::<Result<_, _>>()?;
    evaluate(l, node, &inputs)
}

/// The result of `node` on known operands (elements known or not).
pub(crate) fn evaluate(l: &Lowerer<'_>, node: &NodeProto, inputs: &[Constant]) -> Result<Vec<Value>, Fail> {
    let out = node.output[0].as_str();
    let op = node.op_type();
    let first = &inputs[0];
    match op {
        "Gather" => {
            let (data, idx) = (first, &inputs[1]);
            let a = axis(Attrs(node).int("axis", 0), data.shape.len())?;
            let (Some(d), Some(ix), true, 0) = (data.ints(), idx.ints(), data.shape.len() == 1, a) else {
                // Known by shape: the indices' shape replaces the gathered axis.
                let mut shape = data.shape[..a].to_vec();
                shape.extend_from_slice(&idx.shape);
                shape.extend_from_slice(&data.shape[a + 1..]);
                return Ok(vec![Value::Const(Constant {
                    shape,
                    elem: data.elem,
                    data: None,
                    origin: out.to_string(),
                })]);
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
        "Concat" if inputs.iter().all(|c| c.shape.len() == 1 && c.data.is_some()) => {
            let all: Vec<i64> = inputs.iter().filter_map(Constant::ints).flatten().collect();
            Ok(vec![ints_const(out, vec![all.len() as u64], all)])
        }
        "Concat" => {
            let ax = axis(Attrs(node).int("axis", 0), first.shape.len())?;
            let mut shape = first.shape.clone();
            shape[ax] = inputs.iter().map(|c| c.shape.get(ax).copied().unwrap_or(0)).sum();
            // Row-major: each input contributes a block of its trailing size per outer index.
            let outer: u64 = first.shape[..ax].iter().product();
            let data = inputs.iter().map(|c| c.data.as_deref()).collect::<Option<Vec<&[f64]>>>().map(|all| {
                let mut v = Vec::new();
                for o in 0..outer as usize {
                    for (c, d) in inputs.iter().zip(&all) {
                        let block: usize = c.shape[ax..].iter().product::<u64>() as usize;
                        v.extend_from_slice(&d[o * block..(o + 1) * block]);
                    }
                }
                v
            });
            Ok(vec![Value::Const(Constant { shape, elem: first.elem, data, origin: out.to_string() })])
        }
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceProd" => {
            let shape = reduce_shape(l, node, &first.shape)?;
            Ok(vec![Value::Const(Constant { shape, elem: first.elem, data: None, origin: out.to_string() })])
        }
        "Cast" | "CastLike" => {
            // CastLike (the dynamo exporter's unoptimised graphs) casts to its second
            // operand's element type.
            let to = match inputs.get(1) {
                Some(like) if op == "CastLike" => like.elem,
                _ => Elem::from_onnx(Attrs(node).int("to", 1) as i32),
            };
            let mut c = first.clone();
            if matches!(to, Elem::Int(_) | Elem::Bool) {
                c.data = c.data.map(|d| d.into_iter().map(f64::trunc).collect());
            }
            c.elem = to;
            c.origin = out.to_string();
            Ok(vec![Value::Const(c)])
        }
        "Slice" => slice(node, inputs),
        "Expand" => {
            let Some(target) = inputs.get(1).and_then(Constant::ints) else {
                return unsupported("Expand to a shape the importer does not know");
            };
            let mut target: Vec<u64> = target.iter().map(|&d| d.max(0) as u64).collect();
            // A static export's target shape carries the export's batch; with --batch the
            // data already has the new one (RoBERTa's token types expanded to the batch).
            if let Some((file, new)) = l.rebatch
                && target.first() == Some(&file)
                && first.shape.first() == Some(&new)
            {
                target[0] = new;
            }
            let shape = super::derive::broadcast_all(&[&first.shape, &target])?;
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
            let data = data.filter(|d| d.len() as u64 <= crate::values::MAX_COMPUTED_ELEMENTS);
            Ok(vec![Value::Const(Constant { shape, elem: first.elem, data, origin: out.to_string() })])
        }
        "Transpose" => {
            let perm = Attrs(node).ints("perm").unwrap_or_else(|| (0..first.shape.len() as i64).rev().collect());
            let shape = perm.iter().map(|&p| first.shape.get(p as usize).copied().unwrap_or(1)).collect();
            Ok(vec![Value::Const(Constant { shape, elem: first.elem, data: None, origin: out.to_string() })])
        }
        _ => match super::derive::evaluate(node, inputs) {
            Some(result) => Ok(result?.into_iter().map(Value::Const).collect()),
            None => unsupported(format!("{op} on constants")),
        },
    }
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

/// Reductions of constants or data: the shape only.
pub(crate) fn reduce_shape(l: &Lowerer<'_>, node: &NodeProto, shape: &[u64]) -> Result<Vec<u64>, Fail> {
    let keep = Attrs(node).int("keepdims", 1) == 1;
    let all: Vec<usize> = match axes(l, node)? {
        Some(a) if !a.is_empty() => a.iter().map(|&x| axis(x, shape.len())).collect::<Result<_, _>>()?,
        _ => (0..shape.len()).collect(),
    };
    Ok(shape
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (all.contains(&i), keep) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect())
}

/// A node whose operands are constants and data values, at least one of them data:
/// its result is data too, shaped by the same rules as for constants.
pub(crate) fn data_node(l: &Lowerer<'_>, node: &NodeProto) -> Lowered {
    let inputs: Vec<Constant> = (0..node.input.len())
        .filter(|&k| !node.input[k].is_empty())
        .map(|k| match l.operand(node, k)? {
            Value::Const(c) | Value::Data(c) => Ok(c),
            _ => bad("a data op with an activation operand"),
        })
        .collect::<Result<_, _>>()?;
    let values = evaluate(l, node, &inputs)?;
    Ok(values
        .into_iter()
        .map(|v| match v {
            Value::Const(mut c) => {
                // Values computed from data are never read: they change every step.
                c.data = None;
                Value::Data(c)
            }
            other => other,
        })
        .collect())
}

/// Random draws change every step: data, whatever their operands.
const RANDOM: &[&str] = &["RandomUniformLike", "RandomNormalLike", "RandomUniform", "RandomNormal", "Bernoulli"];

/// Whether every operand is a constant or data, and at least one is data (or the op
/// draws random numbers).
pub(crate) fn is_data_node(l: &Lowerer<'_>, node: &NodeProto) -> bool {
    if RANDOM.contains(&node.op_type()) {
        return true;
    }
    let operands: Vec<Option<&Value>> = node.input.iter().filter(|n| !n.is_empty()).map(|n| l.value(n)).collect();
    operands.iter().any(|v| matches!(v, Some(Value::Data(_))))
        && operands.iter().all(|v| matches!(v, Some(Value::Data(_) | Value::Const(_))))
}

/// The elements of a small constant `name`, from an initializer or a Constant node, or
/// a Reshape, Unsqueeze, Squeeze or Identity of one (the dynamo exporter's unoptimised
/// graphs reshape a ReduceMean's axes `[-1]` to `[-1]`): those keep the elements.
pub(crate) fn small(l: &Lowerer<'_>, name: &str) -> Option<Vec<f64>> {
    if let Some(init) = l.initializers.get(name) {
        return constant_of(init, name).data;
    }
    let node = &l.graph.node[*l.topo.producer.get(name)?];
    let a = Attrs(node);
    match (node.op_type(), a.tensor("value")) {
        ("Constant", Some(t)) => constant_of(t, name).data,
        ("Constant", None) if a.has("value_float") => Some(vec![a.float("value_float", 0.0)]),
        ("Reshape" | "Unsqueeze" | "Squeeze" | "Identity", _) => small(l, node.input.first()?),
        _ => None,
    }
}
