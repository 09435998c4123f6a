//! Calling one node's kernel on byte slices, wherever those bytes live (a tensor's own
//! buffer, or a slot of an arena).

use crate::ExecError;
use crate::runner::SharedRunner;
use placer_ir::{DType, Model, NodeId, TensorId};
use placer_kernels::dispatch::{self, Arg, In, Out};
use placer_pools::PoolError;
use std::time::Instant;

fn bad_view(model: &Model, t: TensorId, len: usize, what: &'static str) -> ExecError {
    ExecError::Pool { tensor: model.tensor(t).name.clone(), error: PoolError::BadView { len, what } }
}

fn input<'a>(model: &'a Model, t: TensorId, bytes: &'a [u8]) -> Result<Arg<'a, In<'a>>, ExecError> {
    let data = match model.tensor(t).dtype {
        DType::I32 => In::I32(bytemuck::try_cast_slice(bytes).map_err(|_| bad_view(model, t, bytes.len(), "i32"))?),
        DType::I64 => In::I64(bytemuck::try_cast_slice(bytes).map_err(|_| bad_view(model, t, bytes.len(), "i64"))?),
        DType::U8 => In::U8(bytes),
        _ => In::F32(bytemuck::try_cast_slice(bytes).map_err(|_| bad_view(model, t, bytes.len(), "f32"))?),
    };
    Ok(Arg { shape: model.tensor(t).shape.as_slice(), data })
}

fn output<'a>(model: &'a Model, t: TensorId, bytes: &'a mut [u8]) -> Result<Arg<'a, Out<'a>>, ExecError> {
    let len = bytes.len();
    let data = match model.tensor(t).dtype {
        DType::I32 => Out::I32(bytemuck::try_cast_slice_mut(bytes).map_err(|_| bad_view(model, t, len, "i32"))?),
        DType::I64 => Out::I64(bytemuck::try_cast_slice_mut(bytes).map_err(|_| bad_view(model, t, len, "i64"))?),
        DType::U8 => Out::U8(bytes),
        _ => Out::F32(bytemuck::try_cast_slice_mut(bytes).map_err(|_| bad_view(model, t, len, "f32"))?),
    };
    Ok(Arg { shape: model.tensor(t).shape.as_slice(), data })
}

/// Bytes of scratch space node `n`'s kernel needs.
pub(crate) fn scratch_bytes(model: &Model, n: NodeId) -> u64 {
    let node = model.node(n);
    let shapes = |ids: &[TensorId]| ids.iter().map(|&t| model.tensor(t).shape.as_slice()).collect::<Vec<_>>();
    dispatch::scratch_len(node.op, &node.attrs, &shapes(&node.inputs), &shapes(&node.outputs)) as u64 * 4
}

/// Runs node `n`: `inputs` in `node.inputs` order, `written` as the node's updates then
/// its outputs, with `runner`'s kernel when it has one for `n`, else placer's. Returns
/// the kernel's own time in ns.
pub(crate) fn invoke(
    model: &Model,
    n: NodeId,
    inputs: &[&[u8]],
    mut written: Vec<&mut [u8]>,
    scratch: &mut [f32],
    runner: Option<&SharedRunner>,
) -> Result<f64, ExecError> {
    let node = model.node(n);
    if let Some(runner) = runner {
        let failed = |reason: String| ExecError::Runner { node: node.name.clone(), reason };
        // A runner that panicked once is not trusted again.
        let mut runner = runner.lock().map_err(|_| failed("the kernel runner failed earlier".into()))?;
        if let Some(ns) = runner.run(n, inputs, &mut written).map_err(failed)? {
            return Ok(ns);
        }
    }
    let args = node.inputs.iter().zip(inputs).map(|(&t, b)| input(model, t, b)).collect::<Result<Vec<_>, _>>()?;
    let ids = node.updates.iter().chain(&node.outputs);
    let mut outs = ids.zip(written).map(|(&t, b)| output(model, t, b)).collect::<Result<Vec<_>, _>>()?;
    let (updates, outputs) = outs.split_at_mut(node.updates.len());
    let start = Instant::now();
    let result = dispatch::run(node.op, &node.attrs, &args, updates, outputs, scratch);
    let elapsed = start.elapsed().as_nanos() as f64;
    result.map_err(|source| ExecError::Kernel { node: node.name.clone(), op: node.op, error: source })?;
    Ok(elapsed)
}
