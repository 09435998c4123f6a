//! Softmax cross-entropy with hard integer labels, the loss that starts every backward
//! pass in the zoo.

use crate::activation::softmax_row;
use crate::error::KernelError;
use crate::tensor_ops::{Rows, check_indices, for_row_groups, reduce_rows_with_output};

/// Softmax cross-entropy over `logits = [N, C]` (`shape`) with one class index per row:
/// `probs = softmax(logits)` per row, and `loss[0] = mean over rows of −log p[label]`,
/// computed as `logsumexp(row) − row[label]` in f64 (never `log(0)`). An empty batch
/// (N = 0) has loss 0.
///
/// # Errors
/// [`KernelError::IndexOutOfRange`] for the first label outside `[0, C)`; nothing is
/// written then.
///
/// # Panics
/// If `loss` is not one element or a length does not match `shape`.
pub fn softmax_cross_entropy<I: Copy + Into<i64> + Sync>(
    shape: Rows,
    logits: &[f32],
    labels: &[I],
    loss: &mut [f32],
    probs: &mut [f32],
) -> Result<(), KernelError> {
    let Rows { rows, cols } = shape;
    assert_eq!(logits.len(), shape.numel(), "logits do not match the shape");
    assert_eq!(probs.len(), shape.numel(), "probabilities do not match the shape");
    assert_eq!(labels.len(), rows, "one label per row is needed");
    assert_eq!(loss.len(), 1, "the loss is a single element");
    check_indices("label", labels, cols)?;
    if rows == 0 {
        loss[0] = 0.0;
        return Ok(());
    }
    let total = reduce_rows_with_output(probs, rows, cols, 1, |acc, row0, out| {
        for (r, p) in out.chunks_exact_mut(cols).enumerate() {
            let row = row0 + r;
            let x = &logits[row * cols..][..cols];
            let (max, sum) = softmax_row(x, p);
            let label = labels[row].into() as usize; // checked above
            acc[0] += f64::from(max) + sum.ln() - f64::from(x[label]);
        }
    });
    loss[0] = (total[0] / rows as f64) as f32;
    Ok(())
}

/// The gradient of [`softmax_cross_entropy`]'s loss (taken as 1) with respect to the
/// logits: `dlogits = (probs − onehot(labels)) / N`.
///
/// # Errors
/// [`KernelError::IndexOutOfRange`] for the first label outside `[0, C)`; nothing is
/// written then.
pub fn softmax_cross_entropy_backward<I: Copy + Into<i64> + Sync>(
    shape: Rows,
    probs: &[f32],
    labels: &[I],
    dlogits: &mut [f32],
) -> Result<(), KernelError> {
    let Rows { rows, cols } = shape;
    assert_eq!(probs.len(), shape.numel(), "probabilities do not match the shape");
    assert_eq!(dlogits.len(), shape.numel(), "the logits gradient does not match the shape");
    assert_eq!(labels.len(), rows, "one label per row is needed");
    check_indices("label", labels, cols)?;
    if rows == 0 {
        return Ok(());
    }
    let inv_n = 1.0 / rows as f32;
    for_row_groups(dlogits, cols, |row0, out| {
        for (r, o) in out.chunks_exact_mut(cols).enumerate() {
            let row = row0 + r;
            for (o, &p) in o.iter_mut().zip(&probs[row * cols..][..cols]) {
                *o = p * inv_n;
            }
            let label = labels[row].into() as usize; // checked above
            o[label] = (probs[row * cols + label] - 1.0) * inv_n;
        }
    });
    Ok(())
}
