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
//!
//! **Vector code.** The workspace builds for baseline x86-64 (SSE2) and denies `unsafe`,
//! so the hot loops (elementwise maps, GELU, softmax, batch norm, im2col, max pooling) are
//! marked `#[multiversion(targets("x86_64+avx512f+avx512vl+fma", "x86_64+avx2+fma"))]`: the
//! `multiversion` crate compiles each for those targets as well and picks one at run time,
//! with no `unsafe` of ours. Such a loop calls only `#[inline(always)]` helpers or small
//! closures, so its whole body gets the wider target, and it is written for LLVM's
//! vectoriser (flat arrays, zipped iterators, selects rather than branches; see pooling.rs).
//! A machine always runs the same clone, so results repeat bit for bit; the clones agree
//! with one another too, except where `fastmath`'s fused multiply-adds are used (the
//! AVX clones fuse, the baseline one does not).

pub mod activation;
pub mod conv;
pub mod dispatch;
pub mod dropout;
pub mod error;
mod fastmath;
pub mod gemm;
pub mod loss;
pub mod norm;
pub mod optim;
pub mod pooling;
pub mod tensor_ops;

pub use error::KernelError;
