//! Layer helpers shared by the model definitions.

use crate::ZooError;
use crate::builder::{Conv, GraphBuilder, T};

/// A fully connected layer on a 2-D input: `x · W + b`, with W stored [in, out].
pub fn linear(g: &mut GraphBuilder, name: &str, x: T, out: u64) -> Result<T, ZooError> {
    let inp = g.shape(x)[1];
    let w = g.weight(&format!("{name}.weight"), &[inp, out]);
    let b = g.weight(&format!("{name}.bias"), &[out]);
    let y = g.matmul(&format!("{name}.matmul"), x, w, false, 1.0)?;
    Ok(g.bias_add(name, y, b, 1))
}

/// A convolution with a `k`×`k` filter; `bias` adds a per-channel bias.
pub fn conv(g: &mut GraphBuilder, name: &str, x: T, out: u64, k: [u64; 2], c: Conv, bias: bool) -> Result<T, ZooError> {
    let inp = g.shape(x)[1] / c.groups;
    let w = g.weight(&format!("{name}.weight"), &[out, inp, k[0], k[1]]);
    if bias {
        let y = g.conv2d(&format!("{name}.conv"), x, w, c)?;
        let b = g.weight(&format!("{name}.bias"), &[out]);
        Ok(g.bias_add(name, y, b, 1))
    } else {
        g.conv2d(name, x, w, c)
    }
}

/// Convolution without bias, then batch norm, then ReLU (ResNet, DenseNet, Inception).
pub fn conv_bn_relu(
    g: &mut GraphBuilder,
    name: &str,
    x: T,
    out: u64,
    k: [u64; 2],
    c: Conv,
    eps: f64,
) -> Result<T, ZooError> {
    let y = conv(g, &format!("{name}.conv"), x, out, k, c, false)?;
    let y = g.batch_norm(&format!("{name}.bn"), y, eps);
    Ok(g.relu(&format!("{name}.relu"), y))
}

/// Square-kernel shorthand.
pub fn sq(k: u64) -> [u64; 2] {
    [k, k]
}

/// Classification head: logits [N, classes] and the loss against integer labels.
pub fn classify(g: &mut GraphBuilder, logits: T) -> T {
    let n = g.shape(logits)[0];
    let labels = g.input("labels", &[n], placer_ir::DType::I32);
    g.softmax_cross_entropy("loss", logits, labels)
}
