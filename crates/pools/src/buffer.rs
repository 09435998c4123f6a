//! A buffer owned by one pool, with typed views.

use crate::alloc::Region;
use crate::{PoolError, PoolId};
use bytemuck::Pod;

/// A buffer owned by one pool. The bytes are zeroed when allocated and touched once, so
/// the first kernel to use it does not pay for page faults inside its timing.
#[derive(Debug)]
pub struct Buffer {
    pub(crate) region: Region,
    pub(crate) pool: PoolId,
}

impl Buffer {
    pub fn pool(&self) -> PoolId {
        self.pool
    }

    pub fn len_bytes(&self) -> usize {
        self.bytes().len()
    }

    pub fn bytes(&self) -> &[u8] {
        self.region.bytes()
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.region.bytes_mut()
    }

    pub fn as_f32(&self) -> Result<&[f32], PoolError> {
        view(self.bytes(), "f32")
    }

    pub fn as_f32_mut(&mut self) -> Result<&mut [f32], PoolError> {
        view_mut(self.bytes_mut(), "f32")
    }

    pub fn as_i32(&self) -> Result<&[i32], PoolError> {
        view(self.bytes(), "i32")
    }

    pub fn as_i32_mut(&mut self) -> Result<&mut [i32], PoolError> {
        view_mut(self.bytes_mut(), "i32")
    }
}

fn view<'a, T: Pod>(bytes: &'a [u8], what: &'static str) -> Result<&'a [T], PoolError> {
    bytemuck::try_cast_slice(bytes).map_err(|_| PoolError::BadView { len: bytes.len(), what })
}

fn view_mut<'a, T: Pod>(bytes: &'a mut [u8], what: &'static str) -> Result<&'a mut [T], PoolError> {
    let len = bytes.len();
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| PoolError::BadView { len, what })
}
