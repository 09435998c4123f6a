//! Errors a kernel reports instead of panicking: conditions that depend on tensor
//! *values* (class labels, embedding ids), which validation cannot check.
//!
//! Inside the kernels, shape and length mismatches are bugs of the caller and the kernels
//! assert on them. `dispatch` checks every operand against its shape first and reports a
//! mismatch as [`KernelError::BadOperand`], so a model that validated never reaches an
//! assertion.

/// A kernel could not run on the values it was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// An index read from a tensor (a label, an embedding id) is outside `[0, bound)`.
    #[error("{what} {index} is out of range [0, {bound})")]
    IndexOutOfRange {
        /// What the index selects, e.g. `"label"` or `"embedding id"`.
        what: &'static str,
        /// The offending value, widened so that negative ids print as they are.
        index: i64,
        /// The exclusive upper bound (number of classes, vocabulary size).
        bound: usize,
    },
    /// An operand does not have the element type or length its shape and op require.
    #[error("{op}: {detail}")]
    BadOperand { op: &'static str, detail: String },
    /// The scratch buffer is smaller than the kernel needs.
    #[error("scratch space of {given} floats is smaller than the {needed} needed")]
    ScratchTooSmall { needed: usize, given: usize },
}
