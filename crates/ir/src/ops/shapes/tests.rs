use super::*;
use crate::ops::{Arity, AttrKind, Cost, cost};
use crate::types::AttrValue;

fn op(shape: &[u64]) -> Operand<'_> {
    Operand { shape, dtype: DType::F32 }
}

fn attrs(pairs: &[(&str, AttrValue)]) -> Attrs {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

#[test]
fn conv_shapes_follow_stride_padding_and_groups() {
    let a = attrs(&[("stride", AttrValue::Ints(vec![2, 2])), ("padding", AttrValue::Ints(vec![3, 3]))]);
    assert_eq!(conv_output_shape(&a, &[8, 3, 224, 224], &[64, 3, 7, 7]), Ok(vec![8, 64, 112, 112]));
    let grouped = attrs(&[("groups", AttrValue::Int(4))]);
    assert_eq!(conv_output_shape(&grouped, &[1, 8, 5, 5], &[12, 2, 3, 3]), Ok(vec![1, 12, 3, 3]));
    assert!(conv_output_shape(&grouped, &[1, 8, 5, 5], &[12, 8, 3, 3]).is_err());
    assert!(conv_output_shape(&Attrs::new(), &[1, 3, 2, 2], &[4, 3, 3, 3]).is_err());
}

#[test]
fn conv_backward_checks_against_the_forward_shape() {
    let a = attrs(&[("stride", AttrValue::Ints(vec![2, 2]))]);
    let (dy, w, dx) = ([2, 4, 3, 3], [4, 3, 3, 3], [2, 3, 7, 7]);
    assert!(check_shapes(Op::Conv2dBackwardData, &a, &[op(&dy), op(&w)], &[], &[op(&dx)]).is_ok());
    let wrong = [2, 3, 9, 9];
    let err = check_shapes(Op::Conv2dBackwardData, &a, &[op(&dy), op(&w)], &[], &[op(&wrong)]).expect_err("mismatch");
    assert!(err.contains("needs [2, 4, 4, 4]"), "{err}");
}

#[test]
fn matmul_respects_transposes_and_batch_dims() {
    let tb = attrs(&[("transpose_b", AttrValue::Bool(true))]);
    let (x, w, y) = ([2, 5, 8], [2, 7, 8], [2, 5, 7]);
    assert!(check_shapes(Op::MatMul, &tb, &[op(&x), op(&w)], &[], &[op(&y)]).is_ok());
    let err = check_shapes(Op::MatMul, &Attrs::new(), &[op(&x), op(&w)], &[], &[op(&y)]).expect_err("inner mismatch");
    assert!(err.contains("inner dimensions"), "{err}");
    let cost = cost(Op::MatMul, &tb, &[op(&x), op(&w)], &[op(&y)]);
    assert_eq!(cost.macs, 2 * 5 * 7 * 8);
}

#[test]
fn transpose_rejects_non_permutations() {
    let x = [2, 3, 4];
    for perm in [vec![0, 0, 1], vec![0, 1], vec![0, 1, 3], vec![-1, 0, 1]] {
        let a = attrs(&[("perm", AttrValue::Ints(perm))]);
        assert!(check_shapes(Op::Transpose, &a, &[op(&x)], &[], &[op(&x)]).is_err());
    }
    let a = attrs(&[("perm", AttrValue::Ints(vec![2, 0, 1]))]);
    assert!(check_shapes(Op::Transpose, &a, &[op(&x)], &[], &[op(&[4, 2, 3])]).is_ok());
}

fn shape_err(op: Op, attrs: &Attrs, inputs: &[Operand<'_>], outputs: &[Operand<'_>]) -> String {
    check_shapes(op, attrs, inputs, &[], outputs).expect_err("refused")
}

#[test]
fn add_and_mul_broadcast_their_second_operand_from_the_right() {
    let a = [2, 3, 4];
    for b in [&[2, 3, 4][..], &[4], &[3, 4], &[1, 4], &[3, 1], &[1, 1, 1], &[2, 1, 4], &[1], &[]] {
        for o in [Op::Add, Op::Mul] {
            let ok = check_shapes(o, &Attrs::new(), &[op(&a), op(b)], &[], &[op(&a)]);
            assert_eq!(ok, Ok(()), "{o} of {b:?}");
            // The operands' costs count the output's elements, however small b is.
            assert_eq!(cost(o, &Attrs::new(), &[op(&a), op(b)], &[op(&a)]).flops, 24);
        }
    }
}

#[test]
fn add_and_mul_refuse_what_does_not_broadcast() {
    let a = [2, 3, 4];
    let err = shape_err(Op::Add, &Attrs::new(), &[op(&a), op(&[3, 5])], &[op(&a)]);
    assert_eq!(
        err,
        "second input [3, 5] does not broadcast to the first: dimension 1 is 5, but must be 1 or 4 \
         (dimension 2 of [2, 3, 4], aligned from the right)"
    );
    let err = shape_err(Op::Mul, &Attrs::new(), &[op(&a), op(&[1, 2, 3, 4])], &[op(&a)]);
    assert_eq!(
        err,
        "second input [1, 2, 3, 4] does not broadcast to the first: it has 4 dimensions and [2, 3, 4] has 3"
    );
    // Broadcasting is one way: the first operand never stretches to the second.
    let err = shape_err(Op::Add, &Attrs::new(), &[op(&[4]), op(&a)], &[op(&a)]);
    assert!(err.starts_with("second input [2, 3, 4] does not broadcast to the first"), "{err}");
    let err = shape_err(Op::Add, &Attrs::new(), &[op(&[1, 4]), op(&[3, 4])], &[op(&[3, 4])]);
    assert!(err.contains("dimension 0 is 3, but must be 1 or 1"), "{err}");
    // The output has the first operand's shape.
    let err = shape_err(Op::Mul, &Attrs::new(), &[op(&a), op(&[4])], &[op(&[4])]);
    assert_eq!(err, "output has shape [4] but the op needs [2, 3, 4]");
    // Dtypes still agree.
    let i = Operand { shape: &[4], dtype: DType::I32 };
    let err = shape_err(Op::Add, &Attrs::new(), &[op(&a), i], &[op(&a)]);
    assert_eq!(err, "element types differ: f32 and i32");
}

#[test]
fn sum_to_reduces_to_a_shape_that_broadcasts_back() {
    let dy = [2, 3, 4];
    for y in [&[4][..], &[3, 1], &[1, 3, 4], &[2, 3, 4], &[]] {
        assert_eq!(check_shapes(Op::SumTo, &Attrs::new(), &[op(&dy)], &[], &[op(y)]), Ok(()), "{y:?}");
    }
    assert_eq!(cost(Op::SumTo, &Attrs::new(), &[op(&dy)], &[op(&[4])]).flops, 24);
    let err = shape_err(Op::SumTo, &Attrs::new(), &[op(&dy)], &[op(&[2, 4])]);
    assert_eq!(
        err,
        "output [2, 4] does not broadcast to the input: dimension 0 is 2, but must be 1 or 3 \
         (dimension 1 of [2, 3, 4], aligned from the right)"
    );
    let err = shape_err(Op::SumTo, &Attrs::new(), &[op(&[4])], &[op(&[2, 4])]);
    assert_eq!(err, "output [2, 4] does not broadcast to the input: it has 2 dimensions and [4] has 1");
}

#[test]
fn clip_needs_ordered_bounds_and_dropout_a_ratio_below_one_and_a_byte_or_data_typed_mask() {
    let x = [3, 5];
    let bounds = |min: f64, max: f64| attrs(&[("min", AttrValue::Float(min)), ("max", AttrValue::Float(max))]);
    assert!(check_shapes(Op::Clip, &bounds(0.0, 6.0), &[op(&x)], &[], &[op(&x)]).is_ok());
    assert!(check_shapes(Op::Clip, &bounds(1.0, 1.0), &[op(&x)], &[], &[op(&x)]).is_ok());
    assert_eq!(shape_err(Op::Clip, &bounds(6.0, 0.0), &[op(&x)], &[op(&x)]), "min 6 is greater than max 0");
    let err = shape_err(Op::ClipBackward, &bounds(6.0, 0.0), &[op(&x), op(&x)], &[op(&x)]);
    assert_eq!(err, "min 6 is greater than max 0");

    let mask = Operand { shape: &x, dtype: DType::U8 };
    let ratio = |r: f64| attrs(&[("ratio", AttrValue::Float(r)), ("seed", AttrValue::Int(7))]);
    assert!(check_shapes(Op::Dropout, &ratio(0.0), &[op(&x)], &[], &[op(&x), mask]).is_ok());
    assert!(check_shapes(Op::DropoutBackward, &ratio(0.5), &[op(&x), mask], &[], &[op(&x)]).is_ok());
    assert_eq!(shape_err(Op::Dropout, &ratio(1.0), &[op(&x)], &[op(&x), mask]), "ratio 1 must be in [0, 1)");
    assert_eq!(
        shape_err(Op::DropoutBackward, &ratio(-0.1), &[op(&x), mask], &[op(&x)]),
        "ratio -0.1 must be in [0, 1)"
    );
    // Eager torch's noise: the data's f32.
    assert!(check_shapes(Op::Dropout, &ratio(0.1), &[op(&x)], &[], &[op(&x), op(&x)]).is_ok());
    assert!(check_shapes(Op::DropoutBackward, &ratio(0.1), &[op(&x), op(&x)], &[], &[op(&x)]).is_ok());
    let wide = Operand { shape: &x, dtype: DType::I64 };
    assert_eq!(
        shape_err(Op::Dropout, &ratio(0.1), &[op(&x)], &[op(&x), wide]),
        "mask must be u8 or f32 (the data's), got i64"
    );
    let small = Operand { shape: &[3], dtype: DType::U8 };
    assert_eq!(
        shape_err(Op::DropoutBackward, &ratio(0.1), &[op(&x), small], &[op(&x)]),
        "mask has shape [3] but the op needs [3, 5]"
    );
}

#[test]
fn hard_sigmoid_needs_finite_parameters_and_hard_swish_none() {
    let x = [3, 5];
    let params = |alpha: f64, beta: f64| attrs(&[("alpha", AttrValue::Float(alpha)), ("beta", AttrValue::Float(beta))]);
    let torch = params(1.0 / 6.0, 0.5);
    assert!(check_shapes(Op::HardSigmoid, &torch, &[op(&x)], &[], &[op(&x)]).is_ok());
    assert!(check_shapes(Op::HardSigmoidBackward, &torch, &[op(&x), op(&x)], &[], &[op(&x)]).is_ok());
    // Any finite slope, zero and negative ones included.
    assert!(check_shapes(Op::HardSigmoid, &params(0.0, 2.0), &[op(&x)], &[], &[op(&x)]).is_ok());
    assert!(check_shapes(Op::HardSigmoid, &params(-0.2, 0.5), &[op(&x)], &[], &[op(&x)]).is_ok());
    assert_eq!(
        shape_err(Op::HardSigmoid, &params(f64::INFINITY, 0.5), &[op(&x)], &[op(&x)]),
        "alpha inf and beta 0.5 must both be finite"
    );
    assert_eq!(
        shape_err(Op::HardSigmoidBackward, &params(0.2, f64::NAN), &[op(&x), op(&x)], &[op(&x)]),
        "alpha 0.2 and beta NaN must both be finite"
    );
    assert_eq!(
        shape_err(Op::HardSigmoid, &torch, &[op(&x)], &[op(&[5, 3])]),
        "output has shape [5, 3] but the op needs [3, 5]"
    );
    assert!(check_shapes(Op::HardSwish, &Attrs::new(), &[op(&x)], &[], &[op(&x)]).is_ok());
    assert!(check_shapes(Op::HardSwishBackward, &Attrs::new(), &[op(&x), op(&x)], &[], &[op(&x)]).is_ok());
    assert_eq!(
        shape_err(Op::HardSwishBackward, &Attrs::new(), &[op(&x), op(&[15])], &[op(&x)]),
        "second input has shape [15] but the op needs [3, 5]"
    );
    let i = Operand { shape: &x, dtype: DType::I32 };
    assert_eq!(shape_err(Op::HardSwish, &Attrs::new(), &[i], &[i]), "expected a floating-point tensor, got i32");
    // Nominal costs: 3 per element for hard sigmoid, 4 for hard swish, backward alike.
    for (o, a, k) in [
        (Op::HardSigmoid, &torch, 3),
        (Op::HardSigmoidBackward, &torch, 3),
        (Op::HardSwish, &Attrs::new(), 4),
        (Op::HardSwishBackward, &Attrs::new(), 4),
    ] {
        let inputs: &[Operand<'_>] =
            if o.signature().inputs == Arity::Exactly(1) { &[op(&x)] } else { &[op(&x), op(&x)] };
        assert_eq!(cost(o, a, inputs, &[op(&x)]), Cost { macs: 0, flops: 15 * k }, "{o}");
    }
    assert!(Op::HardSigmoid.signature().attrs.iter().all(|s| s.required && s.kind == AttrKind::Float));
    assert!(Op::HardSwish.signature().attrs.is_empty() && Op::HardSwishBackward.signature().attrs.is_empty());
}

#[test]
fn rms_norm_saves_one_statistic_per_row() {
    let (x, d, rows) = ([2, 3, 8], [8], [2, 3]);
    let eps = attrs(&[("epsilon", AttrValue::Float(1e-6))]);
    assert!(check_shapes(Op::RmsNorm, &eps, &[op(&x), op(&d)], &[], &[op(&x), op(&rows)]).is_ok());
    let inputs = [op(&x), op(&x), op(&d), op(&rows)];
    assert!(check_shapes(Op::RmsNormBackward, &eps, &inputs, &[], &[op(&x), op(&d)]).is_ok());
    assert_eq!(
        shape_err(Op::RmsNorm, &eps, &[op(&x), op(&d)], &[op(&x), op(&[2, 3, 1])]),
        "saved inverse RMS has shape [2, 3, 1] but the op needs [2, 3]"
    );
    assert_eq!(
        shape_err(Op::RmsNormBackward, &eps, &inputs, &[op(&x), op(&[3])]),
        "scale gradient has shape [3] but the op needs [8]"
    );
    assert!(check_shapes(Op::RmsNorm, &eps, &[op(&[8]), op(&d)], &[], &[op(&[8]), op(&[])]).is_ok());
}

#[test]
fn pooling_rejects_excess_padding() {
    let a = attrs(&[("kernel", AttrValue::Ints(vec![2, 2])), ("padding", AttrValue::Ints(vec![2, 2]))]);
    assert!(pooling_output_shape(&a, &[1, 1, 8, 8]).is_err());
}
