//! The bytes each kernel reads and writes, per operand: what a slower memory tier
//! charges for, and what the emulated tier and the cost model will use.
//!
//! These are compulsory counts: every input read once in full (a broadcast operand of
//! `add` or `mul` at its own size, though the kernel reads it many times), every output
//! written once in full, every in-place update read and written once. Real kernels re-read
//! operands that do not fit in cache (a GEMM's panels, a convolution's filter), so the
//! counts are a lower bound on traffic; where a kernel touches only part of an operand
//! the count says so (an embedding reads only the rows its ids select).

use crate::{Model, NodeId, Op, TensorId};

/// Bytes moved between a kernel and one operand's memory in one execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Traffic {
    pub read: u64,
    pub written: u64,
}

/// Traffic per operand of `node`, in the order of [`crate::Node::operands`] (each
/// distinct tensor once: inputs, then updates, then outputs).
pub fn node_traffic(model: &Model, node: NodeId) -> Vec<(TensorId, Traffic)> {
    let n = model.node(node);
    let mut out: Vec<(TensorId, Traffic)> = n.operands().into_iter().map(|t| (t, Traffic::default())).collect();
    let mut add = |t: TensorId, read: u64, written: u64| {
        if let Some((_, traffic)) = out.iter_mut().find(|(id, _)| *id == t) {
            traffic.read += read;
            traffic.written += written;
        }
    };
    for (slot, &t) in n.inputs.iter().enumerate() {
        let bytes = model.tensor(t).bytes;
        let read = match (n.op, slot) {
            // Only the selected rows of the table are read.
            (Op::Embedding, 1) => {
                let ids = model.tensor(n.inputs[0]).numel();
                let row = model.tensor(t).shape.get(1).copied().unwrap_or(1) * model.tensor(t).dtype.size_bytes();
                bytes.min(ids.saturating_mul(row))
            }
            _ => bytes,
        };
        add(t, read, 0);
    }
    for &t in &n.updates {
        let bytes = model.tensor(t).bytes;
        add(t, bytes, bytes);
    }
    for &t in &n.outputs {
        let bytes = model.tensor(t).bytes;
        // Scatter-style backward kernels clear their output and then add into it.
        let read = match n.op {
            Op::MaxPool2dBackward | Op::EmbeddingBackward | Op::Conv2dBackwardData => bytes,
            _ => 0,
        };
        add(t, read, bytes);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_are_read_and_written_and_outputs_written() {
        let model = placer_zoo_free_model();
        let sgd = model.node_id("w.sgd").expect("node");
        let t = node_traffic(&model, sgd);
        let get = |name: &str| t.iter().find(|(id, _)| model.tensor(*id).name == name).map(|(_, tr)| *tr);
        assert_eq!(get("w.grad"), Some(Traffic { read: 64, written: 0 }));
        assert_eq!(get("w"), Some(Traffic { read: 64, written: 64 }));
        assert_eq!(get("w.velocity"), Some(Traffic { read: 64, written: 64 }));
    }

    #[test]
    fn a_broadcast_operand_and_a_mask_move_their_own_bytes() {
        let src = r#"{"format": "placer-model", "version": 1, "name": "t",
          "tensors": [
            {"name": "x", "shape": [4, 8], "role": "input"},
            {"name": "s", "shape": [8], "role": "weight"},
            {"name": "y", "shape": [4, 8], "role": "activation"},
            {"name": "z", "shape": [4, 8], "role": "activation"},
            {"name": "z.mask", "shape": [4, 8], "dtype": "u8", "role": "workspace"}
          ],
          "nodes": [
            {"name": "scale", "op": "mul", "inputs": ["x", "s"], "outputs": ["y"]},
            {"name": "drop", "op": "dropout", "attrs": {"ratio": 0.5}, "inputs": ["y"], "outputs": ["z", "z.mask"]}
          ]}"#;
        let model = crate::parse_model(src).expect("valid");
        let get = |node: &str, name: &str| {
            let t = node_traffic(&model, model.node_id(node).expect("node"));
            t.iter().find(|(id, _)| model.tensor(*id).name == name).map(|(_, tr)| *tr)
        };
        assert_eq!(get("scale", "x"), Some(Traffic { read: 128, written: 0 }));
        assert_eq!(get("scale", "s"), Some(Traffic { read: 32, written: 0 }), "read at its own size");
        assert_eq!(get("scale", "y"), Some(Traffic { read: 0, written: 128 }));
        assert_eq!(get("drop", "z.mask"), Some(Traffic { read: 0, written: 32 }), "one byte per element");
    }

    /// A one-node update model written by hand (the IR must not depend on the zoo).
    fn placer_zoo_free_model() -> Model {
        let src = r#"{"format": "placer-model", "version": 1, "name": "t",
          "tensors": [
            {"name": "w", "shape": [16], "role": "weight"},
            {"name": "w.velocity", "shape": [16], "role": "optimizer_state"},
            {"name": "w.grad", "shape": [16], "role": "input"}
          ],
          "nodes": [{"name": "w.sgd", "op": "sgd_momentum", "attrs": {"lr": 0.1, "momentum": 0.9},
                     "inputs": ["w.grad"], "updates": ["w", "w.velocity"], "outputs": []}]}"#;
        crate::parse_model(src).expect("valid")
    }
}
