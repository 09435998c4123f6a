//! Heap regions: a vector of cache lines, so alignment comes from the type system.

use crate::ALIGN;
use bytemuck::{Pod, Zeroable};

#[derive(Debug, Clone, Copy, Pod, Zeroable)]
#[repr(C, align(64))]
struct Line([u8; ALIGN]);

#[derive(Debug)]
pub(crate) struct HeapRegion {
    lines: Vec<Line>,
    len: usize,
}

impl HeapRegion {
    /// `None` when the system refuses the memory.
    pub(crate) fn allocate_zeroed(len: usize) -> Option<HeapRegion> {
        let mut lines: Vec<Line> = Vec::new();
        lines.try_reserve_exact(len.div_ceil(ALIGN)).ok()?;
        lines.resize(len.div_ceil(ALIGN), Line::zeroed());
        Some(HeapRegion { lines, len })
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.lines)[..self.len]
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.lines)[..self.len]
    }
}
