//! CPU kernels for placer's op set (docs/ops.md): forward, backward and update.
//!
//! Every kernel works on slices the caller owns, because the memory pool a buffer lives
//! in is chosen outside the kernel. A kernel never allocates its operands; temporary
//! space (im2col columns and the like) is passed in as `scratch`, and each kernel that
//! needs it says how much through a `*_scratch_len` function, so the executor can
//! allocate it from a pool and account for it.
//!
//! Modules hold families of kernels as free functions over a small parameter struct;
//! `dispatch` maps an IR node (op, attributes, operand shapes) onto them.

pub mod activation;
pub mod conv;
pub mod dispatch;
pub mod error;
mod fastmath;
pub mod gemm;
pub mod loss;
pub mod norm;
pub mod optim;
pub mod pool;
pub mod tensor_ops;
pub mod traffic;

pub use error::KernelError;
