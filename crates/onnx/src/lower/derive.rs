//! Values computed without placer running anything: elementwise arithmetic, comparisons
//! and index ops on constants (evaluated when their elements are known) and on data
//! inputs such as attention masks and token ids (known by shape only).
//!
//! Exporters build masks, position ids and relative-position buckets this way. None of
//! it is differentiated; where an activation or an embedding finally reads such a
//! value, it becomes an input that placer is fed (`Lowerer::feed`).

use super::{Fail, bad, unsupported};
use crate::proto::NodeProto;
use crate::values::{Attrs, Constant, Elem, MAX_COMPUTED_ELEMENTS};
use placer_ir::DType;

/// Numpy-style broadcast of shapes.
pub(crate) fn broadcast_all(shapes: &[&[u64]]) -> Result<Vec<u64>, Fail> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let dim = |s: &[u64], i: usize| if i + s.len() < rank { 1 } else { s[i + s.len() - rank] };
    (0..rank)
        .map(|i| {
            let mut out = 1;
            for s in shapes {
                match (out, dim(s, i)) {
                    (o, d) if o == d || d == 1 => {}
                    (1, d) => out = d,
                    (o, d) => return bad(format!("shapes {shapes:?} do not broadcast ({o} against {d})")),
                }
            }
            Ok(out)
        })
        .collect()
}

/// The flat index into `shape` (broadcast to `out`) of the element at flat index `i` of `out`.
fn source_index(out: &[u64], shape: &[u64], mut i: u64) -> usize {
    let offset = out.len() - shape.len();
    let (mut src, mut stride) = (0, 1);
    for k in (0..out.len()).rev() {
        let coord = i % out[k];
        i /= out[k];
        if k >= offset {
            let d = shape[k - offset];
            if d != 1 {
                src += coord * stride;
            }
            stride *= d;
        }
    }
    src as usize
}

/// Elementwise `f` over broadcast operands; elements only when all are known and few.
fn elementwise(inputs: &[Constant], elem: Elem, out: &str, f: &dyn Fn(&[f64]) -> f64) -> Result<Constant, Fail> {
    let shapes: Vec<&[u64]> = inputs.iter().map(|c| c.shape.as_slice()).collect();
    let shape = broadcast_all(&shapes)?;
    let numel: u64 = shape.iter().product();
    let data = (numel <= MAX_COMPUTED_ELEMENTS)
        .then(|| inputs.iter().map(|c| c.data.as_deref()).collect::<Option<Vec<&[f64]>>>())
        .flatten()
        .map(|all| {
            (0..numel)
                .map(|i| {
                    let args: Vec<f64> =
                        all.iter().zip(inputs.iter()).map(|(d, c)| d[source_index(&shape, &c.shape, i)]).collect();
                    f(&args)
                })
                .collect()
        });
    Ok(Constant { shape, elem, data, origin: out.to_string() })
}

/// An elementwise function of two operands.
type Binary = fn(f64, f64) -> f64;

fn flag(b: bool) -> f64 {
    f64::from(u8::from(b))
}

/// Evaluates `node` on constants, or shapes its result. `None` when the op is not one
/// of these (the caller reports it).
pub(crate) fn evaluate(node: &NodeProto, inputs: &[Constant]) -> Option<Result<Vec<Constant>, Fail>> {
    let out = node.output[0].as_str();
    let first = inputs.first()?;
    let int = matches!(first.elem, Elem::Int(_));
    let a = Attrs(node);
    let same = first.elem;
    let unary: Option<fn(f64) -> f64> = match node.op_type() {
        "Neg" => Some(|x| -x),
        "Abs" => Some(f64::abs),
        "Log" => Some(f64::ln),
        "Exp" => Some(f64::exp),
        "Sqrt" => Some(f64::sqrt),
        "Reciprocal" => Some(f64::recip),
        "Floor" => Some(f64::floor),
        "Ceil" => Some(f64::ceil),
        "Sin" => Some(f64::sin),
        "Cos" => Some(f64::cos),
        "Sigmoid" => Some(|x| 1.0 / (1.0 + (-x).exp())),
        "Tanh" => Some(f64::tanh),
        "Relu" => Some(|x| x.max(0.0)),
        _ => None,
    };
    if let Some(f) = unary {
        return Some(elementwise(&inputs[..1], same, out, &|v| f(v[0])).map(|c| vec![c]));
    }
    let logic: Option<fn(f64) -> bool> = match node.op_type() {
        "Not" => Some(|x| x == 0.0),
        "IsNaN" => Some(f64::is_nan),
        "IsInf" => Some(f64::is_infinite),
        _ => None,
    };
    if let Some(f) = logic {
        return Some(elementwise(&inputs[..1], Elem::Bool, out, &|v| flag(f(v[0]))).map(|c| vec![c]));
    }
    let binary: Option<(Elem, Binary)> = match node.op_type() {
        "Add" => Some((same, |p, q| p + q)),
        "Sub" => Some((same, |p, q| p - q)),
        "Mul" => Some((same, |p, q| p * q)),
        "Div" if int => Some((same, |p: f64, q: f64| if q == 0.0 { 0.0 } else { (p / q).floor() })),
        "Div" => Some((same, |p, q| p / q)),
        "Pow" => Some((same, f64::powf)),
        "Mod" => Some((same, |p: f64, q: f64| if q == 0.0 { 0.0 } else { p - (p / q).floor() * q })),
        "Min" => Some((same, f64::min)),
        "Max" => Some((same, f64::max)),
        "And" | "BitwiseAnd" => Some((Elem::Bool, |p, q| flag(p != 0.0 && q != 0.0))),
        "Or" | "BitwiseOr" => Some((Elem::Bool, |p, q| flag(p != 0.0 || q != 0.0))),
        "Xor" => Some((Elem::Bool, |p, q| flag((p != 0.0) != (q != 0.0)))),
        "Equal" => Some((Elem::Bool, |p, q| flag(p == q))),
        "Less" => Some((Elem::Bool, |p, q| flag(p < q))),
        "Greater" => Some((Elem::Bool, |p, q| flag(p > q))),
        "LessOrEqual" => Some((Elem::Bool, |p, q| flag(p <= q))),
        "GreaterOrEqual" => Some((Elem::Bool, |p, q| flag(p >= q))),
        _ => None,
    };
    if let Some((elem, f)) = binary {
        if inputs.len() < 2 {
            return Some(match node.op_type() {
                "Min" | "Max" => Ok(vec![Constant { origin: out.to_string(), ..first.clone() }]),
                op => bad(format!("{op} needs two operands")),
            });
        }
        // Min and Max take any number of operands.
        let folded = inputs[1..]
            .iter()
            .try_fold(first.clone(), |acc, next| elementwise(&[acc, next.clone()], elem, out, &|v| f(v[0], v[1])));
        return Some(folded.map(|c| vec![c]));
    }
    Some(match node.op_type() {
        "Where" if inputs.len() == 3 => {
            let elem = inputs[1].elem;
            elementwise(inputs, elem, out, &|v| if v[0] != 0.0 { v[1] } else { v[2] }).map(|c| vec![c])
        }
        "CumSum" | "Trilu" => Ok(vec![Constant { data: None, origin: out.to_string(), ..first.clone() }]),
        "Size" => Ok(vec![Constant {
            shape: vec![],
            elem: Elem::Int(DType::I64),
            data: Some(vec![first.numel() as f64]),
            origin: out.to_string(),
        }]),
        "Range" => range(inputs, out),
        "RandomUniformLike" | "RandomNormalLike" | "Bernoulli" => {
            let elem = if a.has("dtype") { Elem::from_onnx(a.int("dtype", 1) as i32) } else { same };
            Ok(vec![Constant { shape: first.shape.clone(), elem, data: None, origin: out.to_string() }])
        }
        "GatherElements" => match inputs.get(1) {
            Some(idx) => {
                Ok(vec![Constant { shape: idx.shape.clone(), elem: same, data: None, origin: out.to_string() }])
            }
            None => bad("GatherElements needs indices"),
        },
        "GatherND" => gather_nd(node, inputs, out),
        "ScatterND" | "ScatterElements" => Ok(vec![Constant { data: None, origin: out.to_string(), ..first.clone() }]),
        _ => return None,
    })
}

fn range(inputs: &[Constant], out: &str) -> Result<Vec<Constant>, Fail> {
    let scalar = |k: usize| inputs.get(k).and_then(Constant::scalar);
    let (Some(start), Some(limit), Some(delta)) = (scalar(0), scalar(1), scalar(2)) else {
        return unsupported("Range with bounds the importer does not know");
    };
    if delta == 0.0 {
        return bad("Range with a zero step");
    }
    let n = ((limit - start) / delta).ceil().max(0.0) as u64;
    let data = (n <= MAX_COMPUTED_ELEMENTS).then(|| (0..n).map(|i| start + i as f64 * delta).collect());
    Ok(vec![Constant { shape: vec![n], elem: inputs[0].elem, data, origin: out.to_string() }])
}

fn gather_nd(node: &NodeProto, inputs: &[Constant], out: &str) -> Result<Vec<Constant>, Fail> {
    let (Some(data), Some(idx)) = (inputs.first(), inputs.get(1)) else { return bad("GatherND needs two operands") };
    let batch = Attrs(node).int("batch_dims", 0).max(0) as usize;
    let Some((&depth, lead)) = idx.shape.split_last() else { return bad("GatherND with scalar indices") };
    let from = batch + depth as usize;
    if from > data.shape.len() {
        return bad(format!("GatherND indices {:?} are too deep for {:?}", idx.shape, data.shape));
    }
    let mut shape = lead.to_vec();
    shape.extend_from_slice(&data.shape[from..]);
    Ok(vec![Constant { shape, elem: data.elem, data: None, origin: out.to_string() }])
}
