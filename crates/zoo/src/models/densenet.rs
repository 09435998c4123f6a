//! Densely connected networks, torchvision layout (growth 32, bottleneck 4x,
//! compression 0.5). Each layer concatenates all earlier feature maps of its block, as
//! the reference implementation does, so the memory cost of concatenation is real.

use crate::ZooError;
use crate::builder::{Conv, GraphBuilder, T};
use crate::layers::{classify, conv, conv_bn_relu, linear, sq};
use placer_ir::DType;

const EPS: f64 = 1e-5;
const GROWTH: u64 = 32;
const BOTTLENECK: u64 = 4;

/// Batch norm and ReLU before a convolution (the pre-activation order DenseNet uses).
fn bn_relu_conv(g: &mut GraphBuilder, name: &str, x: T, out: u64, k: u64, pad: u64) -> Result<T, ZooError> {
    let y = g.batch_norm(&format!("{name}.bn"), x, EPS);
    let y = g.relu(&format!("{name}.relu"), y);
    conv(g, &format!("{name}.conv"), y, out, sq(k), Conv::new(1, pad), false)
}

fn densenet(g: &mut GraphBuilder, n: u64, blocks: [usize; 4]) -> Result<T, ZooError> {
    let x = g.input("images", &[n, 3, 224, 224], DType::F32);
    let x = conv_bn_relu(g, "stem", x, 64, sq(7), Conv::new(2, 3), EPS)?;
    let mut x = g.max_pool("stem.pool", x, 3, 2, 1)?;
    for (b, &layers) in blocks.iter().enumerate() {
        let mut features = vec![x];
        for l in 0..layers {
            let name = format!("block{}.layer{}", b + 1, l + 1);
            let input = g.concat(&format!("{name}.concat"), &features, 1);
            let y = bn_relu_conv(g, &format!("{name}.1"), input, BOTTLENECK * GROWTH, 1, 0)?;
            let y = bn_relu_conv(g, &format!("{name}.2"), y, GROWTH, 3, 1)?;
            features.push(y);
        }
        x = g.concat(&format!("block{}.out", b + 1), &features, 1);
        if b + 1 < blocks.len() {
            let name = format!("transition{}", b + 1);
            let channels = g.shape(x)[1] / 2;
            let y = bn_relu_conv(g, &name, x, channels, 1, 0)?;
            x = g.avg_pool(&format!("{name}.pool"), y, 2, 2, 0)?;
        }
    }
    let x = g.batch_norm("final.bn", x, EPS);
    let x = g.relu("final.relu", x);
    let x = g.global_avg_pool("avgpool", x);
    let logits = linear(g, "fc", x, 1000)?;
    Ok(classify(g, logits))
}

pub(crate) fn densenet121(g: &mut GraphBuilder, n: u64) -> Result<T, ZooError> {
    densenet(g, n, [6, 12, 24, 16])
}

pub(crate) fn densenet264(g: &mut GraphBuilder, n: u64) -> Result<T, ZooError> {
    densenet(g, n, [6, 12, 64, 48])
}
