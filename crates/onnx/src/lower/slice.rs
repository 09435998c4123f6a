//! Slices of an activation along one axis (rotary embeddings' two halves, ShuffleNet's
//! channel split): placer's `split`, made once per activation and axis at the first
//! Slice's bounds; later Slices of the same activation take the parts they cover.
//! Every part must be read, since a split's gradient is the concat of its parts'.

use super::consts::{self, axis};
use super::{Fail, Lowered, Lowerer, bad, unsupported};
use crate::proto::NodeProto;
use crate::values::{Attrs, Tensor, Value, tensor};
use placer_zoo::T;

/// The parts of one activation split along one axis: (start, end, tensor).
pub(crate) type Parts = Vec<(u64, u64, T)>;

/// The `[start, end)` a Slice keeps along its single axis, with constant bounds.
fn bounds(l: &Lowerer<'_>, node: &NodeProto, shape: &[u64]) -> Result<(usize, u64, u64), Fail> {
    let ints = |k: usize| -> Result<Option<Vec<i64>>, Fail> {
        match node.input.get(k).filter(|n| !n.is_empty()) {
            Some(_) => consts::int_operand(l, node, k).map(Some),
            None => Ok(None),
        }
    };
    let (Some(starts), Some(ends)) = (ints(1)?, ints(2)?) else {
        return unsupported("Slice of an activation without starts and ends (opset < 10)");
    };
    let axes = ints(3)?.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = ints(4)?.unwrap_or_else(|| vec![1; starts.len()]);
    let (&[s], &[e], &[a], &[1]) = (starts.as_slice(), ends.as_slice(), axes.as_slice(), steps.as_slice()) else {
        return unsupported("Slice of an activation along more than one axis, or with a step");
    };
    let ax = axis(a, shape.len())?;
    let d = shape[ax] as i64;
    let clamp = |x: i64| if x < 0 { (x + d).max(0) } else { x.min(d) } as u64;
    let (start, end) = (clamp(s), clamp(e));
    if start >= end {
        return bad(format!("Slice [{s}, {e}) of a dimension of {d} is empty"));
    }
    Ok((ax, start, end))
}

pub(crate) fn slice(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    let (ax, start, end) = bounds(l, node, &x.shape)?;
    let mut shape = x.shape.clone();
    shape[ax] = end - start;
    if end - start == x.shape[ax] {
        return Ok(vec![Value::Tensor(x)]);
    }
    let key = (node.input[0].clone(), ax);
    let parts = match l.slices.get(&key) {
        Some(parts) => parts.clone(),
        None => {
            let cuts: Vec<u64> = [0, start, end, x.shape[ax]].into_iter().collect();
            let mut edges: Vec<u64> = cuts.clone();
            edges.dedup();
            let sizes: Vec<u64> = edges.windows(2).map(|w| w[1] - w[0]).collect();
            let xt = l.exact(&x);
            let name = l.name_for(&format!("{}.split", node.input[0]));
            let ts = l.g.split(&name, xt, ax, &sizes);
            l.note("Slices of an activation imported as one split of it");
            let parts: Parts = edges.windows(2).zip(ts).map(|(w, t)| (w[0], w[1], t)).collect();
            l.slices.insert(key, parts.clone());
            parts
        }
    };
    match parts.iter().find(|&&(s, e, _)| s == start && e == end) {
        Some(&(_, _, t)) => Ok(vec![Value::Tensor(Tensor { t, shape })]),
        None => unsupported("Slices of one activation at bounds that do not line up"),
    }
}

/// Whether the Gathers reading `value` along `ax` pick every one of its `dim` positions,
/// each by a constant scalar index (the q, k and v of a fused projection).
fn every_position_gathered(l: &Lowerer<'_>, value: &str, ax: usize, rank: usize, dim: u64) -> bool {
    let mut seen = vec![false; dim as usize];
    for &r in l.topo.readers_of(value) {
        let node = &l.graph.node[r];
        let a = Attrs(node).int("axis", 0);
        if node.op_type() != "Gather" || axis(a, rank).ok() != Some(ax) {
            continue;
        }
        let Some(&[i]) = node.input.get(1).and_then(|n| consts::small(l, n)).as_deref() else { return false };
        let i = if i < 0.0 { i + dim as f64 } else { i } as usize;
        if let Some(s) = seen.get_mut(i) {
            *s = true;
        }
    }
    seen.iter().all(|&s| s)
}

/// Gather of one position `index` along `ax` when every position is gathered: one split
/// into unit parts, each part a view without that axis.
pub(crate) fn gather_all(l: &mut Lowerer<'_>, node: &NodeProto, x: &Tensor, ax: usize, index: i64) -> Option<Lowered> {
    let dim = x.shape[ax];
    if !every_position_gathered(l, &node.input[0], ax, x.shape.len(), dim) {
        return None;
    }
    let key = (node.input[0].clone(), ax);
    let parts = match l.slices.get(&key) {
        Some(parts) => parts.clone(),
        None => {
            let xt = l.exact(x);
            let name = l.name_for(&format!("{}.split", node.input[0]));
            let ts = l.g.split(&name, xt, ax, &vec![1; dim as usize]);
            l.note("Gathers of every position along an axis imported as one split");
            let parts: Parts = ts.into_iter().enumerate().map(|(i, t)| (i as u64, i as u64 + 1, t)).collect();
            l.slices.insert(key, parts.clone());
            parts
        }
    };
    let i = if index < 0 { index + dim as i64 } else { index } as u64;
    let &(_, _, t) = parts.iter().find(|&&(s, e, _)| s == i && e == i + 1)?;
    let mut shape = x.shape.clone();
    shape.remove(ax);
    Some(Ok(vec![Value::Tensor(Tensor { t, shape })]))
}

/// SplitToSequence read only by SequenceAt at constant positions (the dynamo exporter's
/// unoptimised `torch.split`, GPT-2's query, key and value): a Split whose parts are
/// the SequenceAt outputs, given their values here; each SequenceAt then passes its
/// own on ([`sequence_at`]).
pub(crate) fn split_to_sequence(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    let ax = axis(Attrs(node).int("axis", 0), x.shape.len())?;
    let dim = x.shape[ax];
    let sizes: Vec<u64> = match l.optional(node, 1)? {
        Some(Value::Const(c)) => match (c.ints(), c.shape.is_empty()) {
            // One chunk size: equal chunks, the last one shorter, as torch.split makes.
            (Some(s), true) if s[0] > 0 => {
                let s = s[0] as u64;
                (0..dim.div_ceil(s)).map(|k| s.min(dim - k * s)).collect()
            }
            (Some(s), false) => s.iter().map(|&d| d.max(0) as u64).collect(),
            _ => return unsupported("SplitToSequence with sizes the importer does not know"),
        },
        _ => return unsupported("SplitToSequence without constant sizes"),
    };
    let mut parts = vec![String::new(); sizes.len()];
    for &r in l.topo.readers_of(&node.output[0]) {
        let reader = &l.graph.node[r];
        let at = (reader.op_type() == "SequenceAt")
            .then(|| reader.input.get(1).and_then(|p| l.value(p)))
            .flatten()
            .and_then(|v| if let Value::Const(c) = v { c.scalar() } else { None });
        let Some(at) = at else { return unsupported("SplitToSequence read other than by SequenceAt at a constant") };
        // Negative positions count from the end; anything outside the parts is refused.
        let k = if at < 0.0 { at + sizes.len() as f64 } else { at };
        match (k >= 0.0).then(|| parts.get_mut(k as usize)).flatten() {
            Some(p) if p.is_empty() => *p = reader.output[0].clone(),
            _ => return unsupported("SplitToSequence with a part read twice or out of range"),
        }
    }
    if parts.is_empty() || parts.iter().any(String::is_empty) {
        return unsupported("SplitToSequence with a part no SequenceAt reads");
    }
    let values = split_parts(l, &x, ax, &sizes, &parts[0])?;
    let first = values.first().cloned().ok_or(Fail::Error("a split into no parts".into()))?;
    for (name, v) in parts.into_iter().zip(values) {
        l.set_value(name, v);
    }
    // The sequence itself: only the SequenceAt nodes read it, and they ignore it.
    Ok(vec![first])
}

/// SequenceAt of a [`split_to_sequence`]: its part, already given its value.
pub(crate) fn sequence_at(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    l.operand(node, 0)?;
    match l.value(&node.output[0]) {
        Some(v) => Ok(vec![v.clone()]),
        None => unsupported("SequenceAt of a sequence other than a SplitToSequence's"),
    }
}

/// Split (and SplitTraining) of an activation into parts along one axis.
pub(crate) fn split(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    let rank = x.shape.len();
    let ax = axis(Attrs(node).int("axis", 0), rank)?;
    let n = node.output.len() as u64;
    let sizes: Vec<u64> = match (Attrs(node).ints("split"), node.input.get(1).filter(|s| !s.is_empty())) {
        (Some(s), _) => s.iter().map(|&d| d.max(0) as u64).collect(),
        (None, Some(_)) => consts::int_operand(l, node, 1)?.iter().map(|&d| d.max(0) as u64).collect(),
        (None, None) if x.shape[ax].is_multiple_of(n) => vec![x.shape[ax] / n; n as usize],
        (None, None) => return unsupported("Split into unequal parts without sizes"),
    };
    if sizes.len() != node.output.len() {
        return bad(format!("{} split sizes for {} outputs", sizes.len(), node.output.len()));
    }
    split_parts(l, &x, ax, &sizes, &node.output[0])
}

/// `x` split along `ax` into parts of `sizes`, named after ONNX value `first`.
fn split_parts(l: &mut Lowerer<'_>, x: &Tensor, ax: usize, sizes: &[u64], first: &str) -> Lowered {
    if sizes.iter().try_fold(0u64, |sum, &s| sum.checked_add(s)) != Some(x.shape[ax]) {
        return bad(format!("split sizes {sizes:?} do not cover dimension {ax} of {:?}", x.shape));
    }
    let xt = l.exact(x);
    let name = l.name_for(first);
    let parts = l.g.split(&name, xt, ax, sizes);
    Ok(parts
        .into_iter()
        .zip(sizes)
        .map(|(t, &s)| {
            let mut shape = x.shape.clone();
            shape[ax] = s;
            tensor(t, shape)
        })
        .collect())
}
