//! Residual networks, torchvision layout (v1.5: the stride sits on the 3x3 conv).

use crate::ZooError;
use crate::builder::{Conv, GraphBuilder, T};
use crate::layers::{classify, conv, conv_bn_relu, linear, sq};
use placer_ir::DType;

const EPS: f64 = 1e-5;

fn conv_bn(g: &mut GraphBuilder, name: &str, x: T, out: u64, k: u64, c: Conv) -> Result<T, ZooError> {
    let y = conv(g, &format!("{name}.conv"), x, out, sq(k), c, false)?;
    Ok(g.batch_norm(&format!("{name}.bn"), y, EPS))
}

/// The shortcut: identity, or a strided 1x1 projection when the shape changes.
fn shortcut(g: &mut GraphBuilder, name: &str, x: T, out: u64, stride: u64) -> Result<T, ZooError> {
    if stride == 1 && g.shape(x)[1] == out {
        Ok(x)
    } else {
        conv_bn(g, &format!("{name}.downsample"), x, out, 1, Conv::new(stride, 0))
    }
}

fn basic_block(g: &mut GraphBuilder, name: &str, x: T, width: u64, stride: u64) -> Result<T, ZooError> {
    let y = conv_bn_relu(g, &format!("{name}.1"), x, width, sq(3), Conv::new(stride, 1), EPS)?;
    let y = conv_bn(g, &format!("{name}.2"), y, width, 3, Conv::new(1, 1))?;
    let s = shortcut(g, name, x, width, stride)?;
    let sum = g.add(&format!("{name}.add"), y, s);
    Ok(g.relu(&format!("{name}.relu"), sum))
}

fn bottleneck(g: &mut GraphBuilder, name: &str, x: T, width: u64, stride: u64) -> Result<T, ZooError> {
    let out = width * 4;
    let y = conv_bn_relu(g, &format!("{name}.1"), x, width, sq(1), Conv::new(1, 0), EPS)?;
    let y = conv_bn_relu(g, &format!("{name}.2"), y, width, sq(3), Conv::new(stride, 1), EPS)?;
    let y = conv_bn(g, &format!("{name}.3"), y, out, 1, Conv::new(1, 0))?;
    let s = shortcut(g, name, x, out, stride)?;
    let sum = g.add(&format!("{name}.add"), y, s);
    Ok(g.relu(&format!("{name}.relu"), sum))
}

type Block = fn(&mut GraphBuilder, &str, T, u64, u64) -> Result<T, ZooError>;

fn resnet(g: &mut GraphBuilder, n: u64, block: Block, depths: [usize; 4]) -> Result<T, ZooError> {
    let x = g.input("images", &[n, 3, 224, 224], DType::F32);
    let x = conv_bn_relu(g, "stem", x, 64, sq(7), Conv::new(2, 3), EPS)?;
    let mut x = g.max_pool("stem.pool", x, 3, 2, 1)?;
    for (stage, (&depth, width)) in depths.iter().zip([64, 128, 256, 512]).enumerate() {
        for i in 0..depth {
            let stride = if stage > 0 && i == 0 { 2 } else { 1 };
            x = block(g, &format!("layer{}.{i}", stage + 1), x, width, stride)?;
        }
    }
    let x = g.global_avg_pool("avgpool", x);
    let logits = linear(g, "fc", x, 1000)?;
    Ok(classify(g, logits))
}

pub(crate) fn resnet18(g: &mut GraphBuilder, n: u64) -> Result<T, ZooError> {
    resnet(g, n, basic_block, [2, 2, 2, 2])
}

pub(crate) fn resnet50(g: &mut GraphBuilder, n: u64) -> Result<T, ZooError> {
    resnet(g, n, bottleneck, [3, 4, 6, 3])
}

pub(crate) fn resnet200(g: &mut GraphBuilder, n: u64) -> Result<T, ZooError> {
    resnet(g, n, bottleneck, [3, 24, 36, 3])
}
