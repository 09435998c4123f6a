//! Training graphs from onnxruntime-training (placeholder while being written).
use crate::proto::GraphProto;
use crate::{ImportOptions, OnnxError, lower::Lowerer};

pub(crate) fn is_training_graph(graph: &GraphProto) -> bool {
    graph.node.iter().any(|n| n.domain() == "com.microsoft" && (n.op_type().ends_with("Grad") || n.op_type().starts_with("InPlaceAccumulator")))
}

pub(crate) fn lower(_l: &mut Lowerer<'_>, _opts: &ImportOptions) -> Result<(), OnnxError> {
    Err(OnnxError::Input("training graphs: in progress".into()))
}

pub(crate) fn known(_node: &crate::proto::NodeProto) -> bool {
    false
}
