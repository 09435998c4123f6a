//! Inception v3, torchvision layout without the auxiliary classifier (which only
//! trains through an extra loss and is dropped at inference).

use crate::ZooError;
use crate::builder::{Conv, GraphBuilder, T};
use crate::layers::{classify, conv_bn_relu, linear, sq};
use placer_ir::DType;

const EPS: f64 = 1e-3;

/// A conv-BN-ReLU unit with kernel `k` = [height, width], stride `s` and padding `p`.
fn unit(g: &mut GraphBuilder, name: &str, x: T, out: u64, k: [u64; 2], s: u64, p: [u64; 2]) -> Result<T, ZooError> {
    let c = Conv { stride: [s, s], padding: p, dilation: [1, 1], groups: 1 };
    conv_bn_relu(g, name, x, out, k, c, EPS)
}

fn unit1(g: &mut GraphBuilder, name: &str, x: T, out: u64) -> Result<T, ZooError> {
    unit(g, name, x, out, sq(1), 1, [0, 0])
}

fn pooling_branch(g: &mut GraphBuilder, name: &str, x: T, out: u64) -> Result<T, ZooError> {
    let p = g.avg_pool(&format!("{name}.pool"), x, 3, 1, 1)?;
    unit1(g, &format!("{name}.conv"), p, out)
}

fn block_a(g: &mut GraphBuilder, name: &str, x: T, pool_features: u64) -> Result<T, ZooError> {
    let b1 = unit1(g, &format!("{name}.b1x1"), x, 64)?;
    let b5 = unit1(g, &format!("{name}.b5x5_1"), x, 48)?;
    let b5 = unit(g, &format!("{name}.b5x5_2"), b5, 64, sq(5), 1, [2, 2])?;
    let b3 = unit1(g, &format!("{name}.b3x3dbl_1"), x, 64)?;
    let b3 = unit(g, &format!("{name}.b3x3dbl_2"), b3, 96, sq(3), 1, [1, 1])?;
    let b3 = unit(g, &format!("{name}.b3x3dbl_3"), b3, 96, sq(3), 1, [1, 1])?;
    let bp = pooling_branch(g, &format!("{name}.bpool"), x, pool_features)?;
    Ok(g.concat(&format!("{name}.concat"), &[b1, b5, b3, bp], 1))
}

fn block_b(g: &mut GraphBuilder, name: &str, x: T) -> Result<T, ZooError> {
    let b3 = unit(g, &format!("{name}.b3x3"), x, 384, sq(3), 2, [0, 0])?;
    let bd = unit1(g, &format!("{name}.b3x3dbl_1"), x, 64)?;
    let bd = unit(g, &format!("{name}.b3x3dbl_2"), bd, 96, sq(3), 1, [1, 1])?;
    let bd = unit(g, &format!("{name}.b3x3dbl_3"), bd, 96, sq(3), 2, [0, 0])?;
    let bp = g.max_pool(&format!("{name}.bpool"), x, 3, 2, 0)?;
    Ok(g.concat(&format!("{name}.concat"), &[b3, bd, bp], 1))
}

fn block_c(g: &mut GraphBuilder, name: &str, x: T, c7: u64) -> Result<T, ZooError> {
    let (row, col) = (([1, 7], [0, 3]), ([7, 1], [3, 0]));
    let b1 = unit1(g, &format!("{name}.b1x1"), x, 192)?;
    let b7 = unit1(g, &format!("{name}.b7x7_1"), x, c7)?;
    let b7 = unit(g, &format!("{name}.b7x7_2"), b7, c7, row.0, 1, row.1)?;
    let b7 = unit(g, &format!("{name}.b7x7_3"), b7, 192, col.0, 1, col.1)?;
    let mut bd = unit1(g, &format!("{name}.b7x7dbl_1"), x, c7)?;
    for (i, ((k, p), out)) in [(col, c7), (row, c7), (col, c7), (row, 192)].into_iter().enumerate() {
        bd = unit(g, &format!("{name}.b7x7dbl_{}", i + 2), bd, out, k, 1, p)?;
    }
    let bp = pooling_branch(g, &format!("{name}.bpool"), x, 192)?;
    Ok(g.concat(&format!("{name}.concat"), &[b1, b7, bd, bp], 1))
}

fn block_d(g: &mut GraphBuilder, name: &str, x: T) -> Result<T, ZooError> {
    let b3 = unit1(g, &format!("{name}.b3x3_1"), x, 192)?;
    let b3 = unit(g, &format!("{name}.b3x3_2"), b3, 320, sq(3), 2, [0, 0])?;
    let b7 = unit1(g, &format!("{name}.b7x7x3_1"), x, 192)?;
    let b7 = unit(g, &format!("{name}.b7x7x3_2"), b7, 192, [1, 7], 1, [0, 3])?;
    let b7 = unit(g, &format!("{name}.b7x7x3_3"), b7, 192, [7, 1], 1, [3, 0])?;
    let b7 = unit(g, &format!("{name}.b7x7x3_4"), b7, 192, sq(3), 2, [0, 0])?;
    let bp = g.max_pool(&format!("{name}.bpool"), x, 3, 2, 0)?;
    Ok(g.concat(&format!("{name}.concat"), &[b3, b7, bp], 1))
}

/// The 1x3 / 3x1 fork that ends both wide branches of an E block.
fn fork(g: &mut GraphBuilder, name: &str, x: T) -> Result<T, ZooError> {
    let a = unit(g, &format!("{name}a"), x, 384, [1, 3], 1, [0, 1])?;
    let b = unit(g, &format!("{name}b"), x, 384, [3, 1], 1, [1, 0])?;
    Ok(g.concat(&format!("{name}.concat"), &[a, b], 1))
}

fn block_e(g: &mut GraphBuilder, name: &str, x: T) -> Result<T, ZooError> {
    let b1 = unit1(g, &format!("{name}.b1x1"), x, 320)?;
    let b3 = unit1(g, &format!("{name}.b3x3_1"), x, 384)?;
    let b3 = fork(g, &format!("{name}.b3x3_2"), b3)?;
    let bd = unit1(g, &format!("{name}.b3x3dbl_1"), x, 448)?;
    let bd = unit(g, &format!("{name}.b3x3dbl_2"), bd, 384, sq(3), 1, [1, 1])?;
    let bd = fork(g, &format!("{name}.b3x3dbl_3"), bd)?;
    let bp = pooling_branch(g, &format!("{name}.bpool"), x, 192)?;
    Ok(g.concat(&format!("{name}.concat"), &[b1, b3, bd, bp], 1))
}

pub(crate) fn inception_v3(g: &mut GraphBuilder, n: u64) -> Result<T, ZooError> {
    let x = g.input("images", &[n, 3, 299, 299], DType::F32);
    let x = unit(g, "Conv2d_1a_3x3", x, 32, sq(3), 2, [0, 0])?;
    let x = unit(g, "Conv2d_2a_3x3", x, 32, sq(3), 1, [0, 0])?;
    let x = unit(g, "Conv2d_2b_3x3", x, 64, sq(3), 1, [1, 1])?;
    let x = g.max_pool("maxpool1", x, 3, 2, 0)?;
    let x = unit1(g, "Conv2d_3b_1x1", x, 80)?;
    let x = unit(g, "Conv2d_4a_3x3", x, 192, sq(3), 1, [0, 0])?;
    let x = g.max_pool("maxpool2", x, 3, 2, 0)?;
    let x = block_a(g, "Mixed_5b", x, 32)?;
    let x = block_a(g, "Mixed_5c", x, 64)?;
    let x = block_a(g, "Mixed_5d", x, 64)?;
    let x = block_b(g, "Mixed_6a", x)?;
    let x = block_c(g, "Mixed_6b", x, 128)?;
    let x = block_c(g, "Mixed_6c", x, 160)?;
    let x = block_c(g, "Mixed_6d", x, 160)?;
    let x = block_c(g, "Mixed_6e", x, 192)?;
    let x = block_d(g, "Mixed_7a", x)?;
    let x = block_e(g, "Mixed_7b", x)?;
    let x = block_e(g, "Mixed_7c", x)?;
    let x = g.global_avg_pool("avgpool", x);
    let logits = linear(g, "fc", x, 1000)?;
    Ok(classify(g, logits))
}
