//! Each op's parameters read from its attributes and checked, once: for the shape rules
//! that validate a model (`shapes`) and for the kernels that run it. A kernel never
//! reads an attribute with a default of its own.

use super::AttrReader;
use crate::types::{Attrs, shape_str};

/// The axis an op (`bias_add`, `concat`, `split`) works along, `axis` counted from the
/// end when negative, checked against the rank of `shape`.
pub fn axis(attrs: &Attrs, shape: &[u64]) -> Result<usize, String> {
    let axis = AttrReader(attrs).int("axis", 0);
    let rank = shape.len() as i64;
    let normalised = if axis < 0 { axis + rank } else { axis };
    if (0..rank).contains(&normalised) {
        Ok(normalised as usize)
    } else {
        Err(format!("axis {axis} is out of range for {}", shape_str(shape)))
    }
}

/// `clip`'s `min` and `max`, checked: `min ≤ max`.
pub fn clip_bounds(attrs: &Attrs) -> Result<(f64, f64), String> {
    let a = AttrReader(attrs);
    let (min, max) = (a.float("min", f64::NEG_INFINITY), a.float("max", f64::INFINITY));
    // A NaN bound (possible from a builder, not from JSON) is refused too.
    if min > max || min.is_nan() || max.is_nan() {
        return Err(format!("min {min} is greater than max {max}"));
    }
    Ok((min, max))
}

/// `hard_sigmoid`'s `alpha` and `beta`, checked: both given and finite (a file cannot
/// hold an infinity or a NaN, but a builder can).
pub fn hard_sigmoid(attrs: &Attrs) -> Result<(f64, f64), String> {
    let a = AttrReader(attrs);
    let (alpha, beta) = (a.float("alpha", f64::NAN), a.float("beta", f64::NAN));
    if !alpha.is_finite() || !beta.is_finite() {
        return Err(format!("alpha {alpha} and beta {beta} must both be finite"));
    }
    Ok((alpha, beta))
}

/// `dropout`'s `ratio`, checked: in `[0, 1)`.
pub fn dropout_ratio(attrs: &Attrs) -> Result<f64, String> {
    let ratio = AttrReader(attrs).float("ratio", 0.0);
    if !(0.0..1.0).contains(&ratio) {
        return Err(format!("ratio {ratio} must be in [0, 1)"));
    }
    Ok(ratio)
}

/// A (batched) matrix product's dimensions: `batch` products of `[m, k] × [k, n]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatMulDims {
    pub batch: u64,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub transpose_a: bool,
    pub transpose_b: bool,
    pub alpha: f64,
}

impl MatMulDims {
    /// The product's shape: the operands' batch dimensions, then `[m, n]`.
    pub fn output_shape(&self, lhs: &[u64]) -> Vec<u64> {
        let mut out = lhs[..lhs.len() - 2].to_vec();
        out.extend([self.m, self.n]);
        out
    }
}

/// The dimensions of `matmul` over operands shaped `lhs` and `rhs`, checked: the same
/// rank (at least 2), the same batch dimensions, inner dimensions that agree.
pub fn matmul_dims(attrs: &Attrs, lhs: &[u64], rhs: &[u64]) -> Result<MatMulDims, String> {
    let a = AttrReader(attrs);
    let rank = lhs.len();
    if rank < 2 || rhs.len() != rank {
        return Err(format!(
            "matmul needs two operands of the same rank (at least 2), got {} and {}",
            shape_str(lhs),
            shape_str(rhs)
        ));
    }
    if lhs[..rank - 2] != rhs[..rank - 2] {
        return Err(format!("batch dimensions differ: {} and {}", shape_str(lhs), shape_str(rhs)));
    }
    let (transpose_a, transpose_b) = (a.bool("transpose_a", false), a.bool("transpose_b", false));
    let (m, k) = if transpose_a { (lhs[rank - 1], lhs[rank - 2]) } else { (lhs[rank - 2], lhs[rank - 1]) };
    let (k2, n) = if transpose_b { (rhs[rank - 1], rhs[rank - 2]) } else { (rhs[rank - 2], rhs[rank - 1]) };
    if k != k2 {
        return Err(format!("inner dimensions differ ({k} and {k2}) for {} x {}", shape_str(lhs), shape_str(rhs)));
    }
    let batch = lhs[..rank - 2].iter().product();
    Ok(MatMulDims { batch, m, n, k, transpose_a, transpose_b, alpha: a.float("alpha", 1.0) })
}
