//! `layer_norm_backward` on BERT-base b8's shape (8×128 rows of 768), alone, in the
//! contexts that might make a whole step's instances slower than the profile's: after a
//! GEMM of BERT's FFN shape on every thread (what ran two kernels before the slow
//! instances in the step), after an SGD-momentum update of a 768×3072 weight (what ran
//! just before them), after 64 MiB written (dirty lines to write back), and with
//! gradients of 1e-20 or denormal ones (slow paths in the FPU). Prints each context's
//! median and minimum of 15 calls, beside the host's clean case. Before `gemm.rs`
//! cleared the vector state faer leaves behind, the GEMM context ran 3-4× the others.
//!
//! Run with `cargo run --release -p placer-kernels --example layer_norm_backward_contexts`
//! (a few seconds). docs/profiling.md says what it found.
#![allow(clippy::print_stdout)] // a command-line tool: printing is its output

use placer_kernels::gemm::{Sgemm, sgemm};
use placer_kernels::norm::layer_norm_backward;
use placer_kernels::optim::{SgdMomentum, sgd_momentum};
use placer_kernels::tensor_ops::Rows;
use std::time::Instant;

const CALLS: usize = 15;

/// What runs before each timed call.
#[derive(Clone, Copy)]
enum Before {
    Nothing,
    Gemm,
    Update,
    Dirt,
}

/// Values in [-0.5, 0.5) from a 64-bit LCG: any spread will do, it must only not be
/// constant.
fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * scale
        })
        .collect()
}

fn main() {
    let shape = Rows { rows: 8 * 128, cols: 768 };
    let n = shape.rows * shape.cols;
    let x = values(n, 1, 1.0);
    let scale = vec![1.0f32; shape.cols];
    let mean = values(shape.rows, 2, 0.1);
    let inv_std: Vec<f32> = values(shape.rows, 3, 1.0).iter().map(|v| v + 3.0).collect();
    let (mut dx, mut dscale, mut dshift) = (vec![0f32; n], vec![0f32; shape.cols], vec![0f32; shape.cols]);
    let weights = 768 * 3072;
    let (grad, mut weight, mut velocity) = (vec![1e-3f32; weights], vec![0.01f32; weights], vec![0f32; weights]);
    let update = SgdMomentum { lr: 0.01, momentum: 0.9, weight_decay: 0.0 };
    let mut dirt = vec![0u8; 64 << 20];
    // BERT-base b8's FFN: (1024 × 768) · (768 × 3072), large enough to run on every thread.
    let ffn = Sgemm {
        m: shape.rows,
        n: 3072,
        k: shape.cols,
        alpha: 1.0,
        beta: 0.0,
        transpose_a: false,
        lda: shape.cols,
        transpose_b: false,
        ldb: 3072,
        ldc: 3072,
    };
    let (a, b, mut c) = (values(n, 5, 1.0), values(weights, 6, 1.0), vec![0f32; shape.rows * 3072]);

    println!("context                                   median ms    min ms");
    for (what, dy_scale, before) in [
        ("alone, gradients ~1e-3", 1e-3f32, Before::Nothing),
        ("after a 1024x768x3072 GEMM", 1e-3, Before::Gemm),
        ("after a 768x3072 SGD-momentum update", 1e-3, Before::Update),
        ("after 64 MiB written", 1e-3, Before::Dirt),
        ("gradients ~1e-20", 1e-20, Before::Nothing),
        ("denormal gradients ~1e-39", 1e-39, Before::Nothing),
    ] {
        let dy = values(n, 4, dy_scale);
        let mut ms = Vec::with_capacity(CALLS);
        for call in 0..CALLS {
            match before {
                Before::Gemm => sgemm(&ffn, &a, &b, &mut c),
                Before::Update => sgd_momentum(update, &grad, &mut weight, &mut velocity),
                Before::Dirt => dirt.iter_mut().for_each(|b| *b = b.wrapping_add(call as u8)),
                Before::Nothing => {}
            }
            let start = Instant::now();
            layer_norm_backward(shape, &dy, &x, &scale, &mean, &inv_std, &mut dx, &mut dscale, &mut dshift);
            ms.push(start.elapsed().as_secs_f64() * 1e3);
        }
        ms.sort_by(f64::total_cmp);
        println!("{what:40} {:>10.3} {:>9.3}", ms[CALLS / 2], ms[0]);
    }
}
