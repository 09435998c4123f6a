//! The operands dispatch hands to kernels: a shape and a typed slice each, checked for
//! element type and length before any kernel sees them.

use crate::error::KernelError;
use placer_ir::Op;

/// A read-only operand's data.
#[derive(Debug)]
pub enum In<'a> {
    F32(&'a [f32]),
    I32(&'a [i32]),
    /// Indices as torch keeps them (labels, ids, max-pool positions).
    I64(&'a [i64]),
    /// Bytes: a dropout mask.
    U8(&'a [u8]),
}

/// A written operand's data (an output, or a tensor updated in place).
#[derive(Debug)]
pub enum Out<'a> {
    F32(&'a mut [f32]),
    I32(&'a mut [i32]),
    I64(&'a mut [i64]),
    U8(&'a mut [u8]),
}

impl In<'_> {
    fn type_and_len(&self) -> (&'static str, usize) {
        match self {
            In::F32(d) => ("f32", d.len()),
            In::I32(d) => ("i32", d.len()),
            In::I64(d) => ("i64", d.len()),
            In::U8(d) => ("u8", d.len()),
        }
    }
}

impl Out<'_> {
    fn type_and_len(&self) -> (&'static str, usize) {
        match self {
            Out::F32(d) => ("f32", d.len()),
            Out::I32(d) => ("i32", d.len()),
            Out::I64(d) => ("i64", d.len()),
            Out::U8(d) => ("u8", d.len()),
        }
    }
}

/// One operand: its shape from the model and its data from a pool buffer.
#[derive(Debug)]
pub struct Arg<'a, D> {
    pub shape: &'a [u64],
    pub data: D,
}

pub(super) type Result<T> = std::result::Result<T, KernelError>;

pub(super) fn dims(shape: &[u64]) -> Vec<usize> {
    shape.iter().map(|&d| d as usize).collect()
}

pub(super) fn numel(shape: &[u64]) -> usize {
    shape.iter().product::<u64>() as usize
}

pub(super) fn bad(op: Op, detail: String) -> KernelError {
    KernelError::BadOperand { op: op.as_str(), detail }
}

/// "an f32", "an i32", but "a u8".
pub(super) fn article(dtype: &str) -> &'static str {
    if dtype.starts_with('u') { "a" } else { "an" }
}

/// Checks an input's element type and length against its shape.
pub(super) fn in_check(op: Op, a: &Arg<'_, In<'_>>, want: &str) -> Result<()> {
    let (ty, len) = a.data.type_and_len();
    if ty != want {
        return Err(bad(op, format!("expected {} {want} input of shape {:?}, got {ty}", article(want), a.shape)));
    }
    if len != numel(a.shape) {
        return Err(bad(op, format!("{ty} input of {len} elements for shape {:?}", a.shape)));
    }
    Ok(())
}

pub(super) fn f32_in<'a>(op: Op, a: &Arg<'a, In<'a>>) -> Result<&'a [f32]> {
    in_check(op, a, "f32")?;
    match a.data {
        In::F32(d) => Ok(d),
        _ => Err(bad(op, "expected an f32 input".into())),
    }
}

/// Indices of either width: the index kernels are generic over both.
pub(super) enum Ids<'a> {
    I32(&'a [i32]),
    I64(&'a [i64]),
}

pub(super) fn ids_in<'a>(op: Op, a: &Arg<'a, In<'a>>) -> Result<Ids<'a>> {
    match a.data {
        In::I32(d) => in_check(op, a, "i32").map(|()| Ids::I32(d)),
        In::I64(d) => in_check(op, a, "i64").map(|()| Ids::I64(d)),
        _ => {
            let (ty, _) = a.data.type_and_len();
            Err(bad(op, format!("expected an index (i32 or i64) input of shape {:?}, got {ty}", a.shape)))
        }
    }
}

pub(super) fn u8_in<'a>(op: Op, a: &Arg<'a, In<'a>>) -> Result<&'a [u8]> {
    in_check(op, a, "u8")?;
    match a.data {
        In::U8(d) => Ok(d),
        _ => Err(bad(op, "expected a u8 input".into())),
    }
}

/// Checks an output's element type and length against its shape.
pub(super) fn out_check(op: Op, a: &Arg<'_, Out<'_>>, want: &str) -> Result<()> {
    let (ty, len) = a.data.type_and_len();
    if ty != want {
        return Err(bad(op, format!("expected {} {want} output of shape {:?}, got {ty}", article(want), a.shape)));
    }
    if len != numel(a.shape) {
        return Err(bad(op, format!("{want} output of {len} elements for shape {:?}", a.shape)));
    }
    Ok(())
}

pub(super) fn f32_out<'s>(op: Op, a: &'s mut Arg<'_, Out<'_>>) -> Result<&'s mut [f32]> {
    out_check(op, a, "f32")?;
    match &mut a.data {
        Out::F32(d) => Ok(d),
        _ => Err(bad(op, "expected an f32 output".into())),
    }
}

pub(super) fn i32_out<'s>(op: Op, a: &'s mut Arg<'_, Out<'_>>) -> Result<&'s mut [i32]> {
    out_check(op, a, "i32")?;
    match &mut a.data {
        Out::I32(d) => Ok(d),
        _ => Err(bad(op, "expected an i32 output".into())),
    }
}

pub(super) fn u8_out<'s>(op: Op, a: &'s mut Arg<'_, Out<'_>>) -> Result<&'s mut [u8]> {
    out_check(op, a, "u8")?;
    match &mut a.data {
        Out::U8(d) => Ok(d),
        _ => Err(bad(op, "expected a u8 output".into())),
    }
}

/// Exactly `N` operands of one kind, or an error naming the op.
pub(super) fn exactly<'s, T, const N: usize>(op: Op, what: &str, items: &'s mut [T]) -> Result<&'s mut [T; N]> {
    let len = items.len();
    items.try_into().map_err(|_| bad(op, format!("expected {N} {what}, got {len}")))
}
