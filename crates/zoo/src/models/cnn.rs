//! Plain feed-forward networks: LeNet, an MLP, VGG.

use crate::ZooError;
use crate::builder::{Conv, GraphBuilder, T};
use crate::layers::{classify, conv, linear, sq};
use placer_ir::DType;

pub(crate) fn lenet(g: &mut GraphBuilder, n: u64) -> Result<T, ZooError> {
    let x = g.input("images", &[n, 1, 28, 28], DType::F32);
    let x = conv(g, "conv1", x, 6, sq(5), Conv::new(1, 2), true)?;
    let x = g.relu("relu1", x);
    let x = g.max_pool("pool1", x, 2, 2, 0)?;
    let x = conv(g, "conv2", x, 16, sq(5), Conv::new(1, 0), true)?;
    let x = g.relu("relu2", x);
    let x = g.max_pool("pool2", x, 2, 2, 0)?;
    let x = g.reshape("flatten", x, &[n, 16 * 5 * 5]);
    let x = linear(g, "fc1", x, 120)?;
    let x = g.relu("relu3", x);
    let x = linear(g, "fc2", x, 84)?;
    let x = g.relu("relu4", x);
    let logits = linear(g, "fc3", x, 10)?;
    Ok(classify(g, logits))
}

/// The convolutional MNIST network of Flux's model zoo, which the reference system's
/// profiling notebook measured on real Optane (its operand sizes match: a 294,912-byte
/// reshape is 256 × 288 floats, a 10,240-byte divide 256 × 10): three 3x3 convolutions
/// (16, 32, 32 channels, padded) each with ReLU and a 2x2 max pool, then a dense layer.
/// Here so the emulator's slowdowns can be set beside that notebook's real ones on
/// kernels of the same shapes (docs/hosts.md, wait models).
pub(crate) fn autotm_mnist(g: &mut GraphBuilder, n: u64) -> Result<T, ZooError> {
    let mut x = g.input("images", &[n, 1, 28, 28], DType::F32);
    for (i, channels) in [16, 32, 32].into_iter().enumerate() {
        let i = i + 1;
        x = conv(g, &format!("conv{i}"), x, channels, sq(3), Conv::new(1, 1), true)?;
        x = g.relu(&format!("relu{i}"), x);
        x = g.max_pool(&format!("pool{i}"), x, 2, 2, 0)?;
    }
    let x = g.reshape("flatten", x, &[n, 32 * 3 * 3]);
    let logits = linear(g, "fc", x, 10)?;
    Ok(classify(g, logits))
}

pub(crate) fn mlp(g: &mut GraphBuilder, n: u64) -> Result<T, ZooError> {
    let mut x = g.input("images", &[n, 784], DType::F32);
    for (i, width) in [1024, 1024].into_iter().enumerate() {
        x = linear(g, &format!("fc{}", i + 1), x, width)?;
        x = g.relu(&format!("relu{}", i + 1), x);
    }
    let logits = linear(g, "fc3", x, 10)?;
    Ok(classify(g, logits))
}

/// `0` in a configuration means a 2x2 max pool; any other number a 3x3 conv + ReLU.
fn vgg(g: &mut GraphBuilder, n: u64, cfg: &[u64]) -> Result<T, ZooError> {
    let mut x = g.input("images", &[n, 3, 224, 224], DType::F32);
    let mut block = 1;
    let mut layer = 1;
    for &c in cfg {
        if c == 0 {
            x = g.max_pool(&format!("pool{block}"), x, 2, 2, 0)?;
            block += 1;
            layer = 1;
        } else {
            let name = format!("conv{block}_{layer}");
            x = conv(g, &name, x, c, sq(3), Conv::new(1, 1), true)?;
            x = g.relu(&format!("{name}.relu"), x);
            layer += 1;
        }
    }
    let x = g.reshape("flatten", x, &[n, 512 * 7 * 7]);
    let x = linear(g, "fc6", x, 4096)?;
    let x = g.relu("fc6.relu", x);
    let x = linear(g, "fc7", x, 4096)?;
    let x = g.relu("fc7.relu", x);
    let logits = linear(g, "fc8", x, 1000)?;
    Ok(classify(g, logits))
}

pub(crate) fn vgg16(g: &mut GraphBuilder, n: u64) -> Result<T, ZooError> {
    vgg(g, n, &[64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0])
}

pub(crate) fn vgg19(g: &mut GraphBuilder, n: u64) -> Result<T, ZooError> {
    vgg(g, n, &[64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0, 512, 512, 512, 512, 0])
}
