//! Gather: an embedding lookup, one position of an activation, or every position in
//! order; and the fed ids and one-hot selectors these need.

use super::consts::{self, axis, shape_of};
use super::{Fail, Lowered, Lowerer, bad, unsupported};
use crate::proto::NodeProto;
use crate::values::{Attrs, Constant, Elem, Tensor, Value, tensor};
use placer_zoo::T;

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

pub(crate) fn gather(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
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
