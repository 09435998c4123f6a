//! C entry points for placer_torch's op hook (python/placer_torch/_hook.cpp), which runs
//! below torch's dispatcher for every aten op of a step under a plan. Calling through
//! Python there would cost the step what the hook exists to save, so the hook calls
//! these functions directly, by the addresses `entry_points` hands to Python. The
//! charge is `ExecPlan::kernel_wait_ns` and the spin `placer_pools::busy_wait_ns`: the
//! same code placer's executor waits by. The hook's CPU allocator takes the memory of
//! the results it places at birth from `Memory` (homes.rs), the same pool memory
//! Python's re-homed tensors use.
#![allow(unsafe_code)]

use crate::homes::Memory;
use crate::placement::Placement;
use placer_ir::TensorId;
use placer_pools::PoolId;
use pyo3::prelude::*;
use std::sync::Arc;

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

/// `bytes` of pool `pool`'s memory for a result born there, or null when the pool
/// cannot give them (full, or no such pool): the hook then lets torch's allocator have
/// the request. The block holds `memory` alive until `memory_give` returns it.
///
/// # Safety
/// `memory` must be the address `Homes::address` gave, of a `Memory` still alive (its
/// `Homes`, or an earlier block not yet given back, holds it).
unsafe extern "C" fn memory_take(memory: *const Memory, pool: u32, bytes: u64) -> *mut u8 {
    // SAFETY: the caller's contract above: `memory` points to a live `Memory`.
    let m = unsafe { &*memory };
    let Ok(pool) = u16::try_from(pool) else { return std::ptr::null_mut() };
    match m.take(PoolId(pool), bytes) {
        Ok(address) => {
            // SAFETY: `memory` came from `Arc::as_ptr` of a live Arc (above), so its
            // count may be raised; `memory_give` lowers it again.
            unsafe { Arc::increment_strong_count(memory) };
            address as *mut u8
        }
        Err(_) => std::ptr::null_mut(),
    }
}

/// Returns a block from `memory_take`: free for the next result of its pool and size.
///
/// # Safety
/// `memory` and `address` must be a pair `memory_take` returned, given back once.
unsafe extern "C" fn memory_give(memory: *const Memory, address: *mut u8) {
    // SAFETY: the block holds one count of `memory` (memory_take), so it is alive here.
    let m = unsafe { &*memory };
    m.give(address as usize);
    // SAFETY: the count `memory_take` raised for this block, lowered once; the last
    // block of a `Memory` whose `Homes` is gone frees it here.
    unsafe { Arc::decrement_strong_count(memory) };
}

/// The addresses of `kernel_wait_ns`, `busy_wait_ns`, `memory_take` and `memory_give`,
/// for the hook to call.
#[pyfunction]
pub fn entry_points() -> (usize, usize, usize, usize) {
    let wait: unsafe extern "C" fn(*const Placement, *const Operand, usize, usize, f64) -> f64 = kernel_wait_ns;
    let spin: extern "C" fn(f64) -> f64 = busy_wait_ns;
    let take: unsafe extern "C" fn(*const Memory, u32, u64) -> *mut u8 = memory_take;
    let give: unsafe extern "C" fn(*const Memory, *mut u8) = memory_give;
    (wait as usize, spin as usize, take as usize, give as usize)
}
