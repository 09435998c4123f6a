//! Convolution and pooling: their windows' geometry (read from ONNX attributes, shared
//! with training graphs' gradient ops) and the forward ops that use it.

use super::{Fail, Lowered, Lowerer, bad, unsupported};
use crate::proto::NodeProto;
use crate::values::{Attrs, Value, tensor};
use placer_zoo::{Conv, Pooling};

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

pub(crate) fn conv(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
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

pub(crate) fn pooling(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
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

pub(crate) fn global_avg_pool(l: &mut Lowerer<'_>, node: &NodeProto) -> Lowered {
    let x = l.tensor_operand(node, 0)?;
    hw(&x.shape)?;
    let xt = l.exact(&x);
    let name = l.name_for(&node.output[0]);
    let y = l.g.global_avg_pool(&name, xt);
    // placer's result is [N, C]; ONNX keeps [N, C, 1, 1], a view of it.
    Ok(vec![tensor(y, vec![x.shape[0], x.shape[1], 1, 1])])
}
