//! Pool memory for the torch tensors that live across steps (parameters, optimizer
//! state): allocated by placer-pools as the executor's buffers are, so on a pool bound
//! to NUMA nodes the pages are bound there, placed, and checked where they landed. The
//! memory lives as long as this object; placer_torch makes every tensor over it hold a
//! reference to it.

use crate::ModelError;
use crate::placement::Placement;
use placer_pools::{Buffer, PoolSet};
use pyo3::prelude::*;
use std::collections::BTreeMap;
use std::sync::Mutex;

#[pyclass(module = "placer_torch._core", frozen)]
pub struct Homes {
    inner: Mutex<Inner>,
}

struct Inner {
    pools: PoolSet,
    buffers: Vec<Buffer>,
}

impl std::fmt::Debug for Homes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Homes")
    }
}

fn poisoned() -> PyErr {
    ModelError::new_err("pool memory: an earlier call failed while holding it")
}

#[pymethods]
impl Homes {
    /// Pool memory of the pools `placement` was resolved against.
    #[new]
    fn new(placement: PyRef<'_, Placement>) -> Homes {
        Homes { inner: Mutex::new(Inner { pools: placement.pool_set().clone(), buffers: Vec::new() }) }
    }

    /// Each pool and the NUMA nodes its memory is bound to (none: not bound, such as a
    /// heap pool).
    fn nodes(&self) -> PyResult<Vec<(String, Vec<u32>)>> {
        let inner = self.inner.lock().map_err(|_| poisoned())?;
        Ok(inner.pools.pools().iter().map(|p| (p.name.clone(), p.backend.checked_nodes().to_vec())).collect())
    }

    /// `bytes` of pool `pool`'s memory, zeroed; returns its address. A full pool is a
    /// one-line error naming it.
    fn allocate(&self, pool: &str, bytes: u64) -> PyResult<usize> {
        let mut inner = self.inner.lock().map_err(|_| poisoned())?;
        let id = inner.pools.find(pool).map_err(|e| ModelError::new_err(e.to_string()))?;
        let mut buffer = inner.pools.allocate(id, bytes.max(1)).map_err(|e| ModelError::new_err(e.to_string()))?;
        let address = buffer.bytes_mut().as_mut_ptr() as usize;
        inner.buffers.push(buffer);
        Ok(address)
    }

    /// Frees the memory at `address` (from `allocate`); no tensor may be over it any more.
    /// Returns whether there was such memory.
    fn release(&self, address: usize) -> PyResult<bool> {
        let mut inner = self.inner.lock().map_err(|_| poisoned())?;
        let found = inner.buffers.iter_mut().position(|b| b.bytes_mut().as_mut_ptr() as usize == address);
        Ok(found.map(|i| drop(inner.buffers.swap_remove(i))).is_some())
    }

    /// Per pool holding any of this memory, asked of the kernel now: (pool, buffers,
    /// bytes, pages asked about, pages on the pool's nodes, pages elsewhere, pages
    /// not placed, pages per node as `node:count` text).
    #[allow(clippy::type_complexity)] // a row of plain Python values
    fn pages(&self) -> PyResult<Vec<(String, usize, u64, u64, u64, u64, u64, String)>> {
        let inner = self.inner.lock().map_err(|_| poisoned())?;
        let mut rows = Vec::new();
        for (i, pool) in inner.pools.pools().iter().enumerate() {
            let mine: Vec<&Buffer> = inner.buffers.iter().filter(|b| b.pool().index() == i).collect();
            if mine.is_empty() {
                continue;
            }
            let (mut asked, mut elsewhere, mut unknown) = (0, 0, 0);
            let mut per_node: BTreeMap<u32, u64> = BTreeMap::new();
            let bytes = mine.iter().map(|b| b.len_bytes() as u64).sum();
            for b in &mine {
                if let Some(p) = inner.pools.query_pages(b) {
                    asked += p.queried;
                    elsewhere += p.elsewhere;
                    unknown += p.unknown;
                    for (node, n) in p.per_node {
                        *per_node.entry(node).or_default() += n;
                    }
                }
            }
            let nodes = per_node.iter().map(|(n, c)| format!("{n}:{c}")).collect::<Vec<_>>().join(",");
            rows.push((
                pool.name.clone(),
                mine.len(),
                bytes,
                asked,
                asked - elsewhere - unknown,
                elsewhere,
                unknown,
                nodes,
            ));
        }
        Ok(rows)
    }
}
