//! Placer nodes for a training graph's backward ops, emitted as the file names them:
//! shared by the gradient ops of both the default domain and onnxruntime's.

use super::{Fail, Lowerer};
use crate::proto::NodeProto;
use crate::values::Value;
use placer_ir::{Attrs as IrAttrs, DType, Op, Role};
use placer_zoo::T;

/// Emits one backward node. `outs` gives, for each output position, its shape and role;
/// an output the file leaves unnamed still gets a tensor (placer's ops have fixed arity).
pub(crate) fn emit(
    l: &mut Lowerer<'_>,
    node: &NodeProto,
    op: Op,
    attrs: IrAttrs,
    inputs: &[T],
    outs: &[(usize, Vec<u64>, Role)],
) -> Result<Vec<T>, Fail> {
    let label = crate::graph::node_label(node);
    let dtype = inputs.first().map(|&t| l.dtype_of(t)).unwrap_or(DType::F32);
    let mut tensors = Vec::with_capacity(outs.len());
    for (k, shape, role) in outs {
        let onnx =
            node.output.get(*k).filter(|n| !n.is_empty()).cloned().unwrap_or_else(|| format!("{label}.unused{k}"));
        let name = l.name_for(&onnx);
        tensors.push(l.g.declare(&name, shape, dtype, *role));
    }
    // Named after its first output: tensor names are unique, and onnxruntime reuses a
    // node's name for the two or three kernels one gradient op becomes.
    let name = l.g.name_of(tensors[0]).to_string();
    l.g.node(&name, op, attrs, inputs, &[], &tensors);
    Ok(tensors)
}

/// onnxruntime names a parameter's gradient `<parameter>_grad`; parameters are constants here.
pub(crate) fn grad_role(l: &Lowerer<'_>, output: &str) -> Role {
    let is_weight_grad = output.strip_suffix("_grad").is_some_and(|p| matches!(l.value(p), Some(Value::Const(_))));
    if is_weight_grad { Role::WeightGradient } else { Role::Gradient }
}
