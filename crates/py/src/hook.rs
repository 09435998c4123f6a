//! C entry points for placer_torch's op hook (python/placer_torch/_hook.cpp), which runs
//! below torch's dispatcher for every aten op of a step under a plan. Calling through
//! Python there would cost the step what the hook exists to save, so the hook calls
//! these two functions directly, by the addresses `entry_points` hands to Python. The
//! charge is `ExecPlan::kernel_wait_ns` and the spin `placer_pools::busy_wait_ns`: the
//! same code placer's executor waits by.
#![allow(unsafe_code)]

use crate::placement::Placement;
use placer_ir::TensorId;
use pyo3::prelude::*;

/// One operand of an op, as the hook passes it: the tensor's index in the model, the
/// bytes the op reads of it and the bytes it writes. The C++ `Operand` has this layout.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Operand {
    pub tensor: u32,
    pub read: u64,
    pub written: u64,
}

/// What the emulated pools charge a kernel at `step` that took `kernel_ns`, for the `n`
/// operands at `operands`; negative when an operand names no tensor of the model.
///
/// # Safety
/// `placement` must point to a live `Placement` (the hook keeps its Python object), and
/// `operands` to `n` initialised `Operand`s.
unsafe extern "C" fn kernel_wait_ns(
    placement: *const Placement,
    operands: *const Operand,
    n: usize,
    step: usize,
    kernel_ns: f64,
) -> f64 {
    // SAFETY: the caller's contract above: both pointers are valid for the call, and a
    // frozen pyclass is never mutated, so a shared reference is sound.
    let (placement, operands) = unsafe { (&*placement, std::slice::from_raw_parts(operands, n)) };
    placement.wait_of(operands.iter().map(|o| (TensorId(o.tensor), o.read, o.written)), step, kernel_ns).unwrap_or(-1.0)
}

/// Spins for `ns` nanoseconds (an emulated device's time); returns the ns spun.
extern "C" fn busy_wait_ns(ns: f64) -> f64 {
    placer_pools::busy_wait_ns(ns).as_nanos() as f64
}

/// The addresses of `kernel_wait_ns` and `busy_wait_ns`, for the hook to call.
#[pyfunction]
pub fn entry_points() -> (usize, usize) {
    let wait: unsafe extern "C" fn(*const Placement, *const Operand, usize, usize, f64) -> f64 = kernel_wait_ns;
    let spin: extern "C" fn(f64) -> f64 = busy_wait_ns;
    (wait as usize, spin as usize)
}
