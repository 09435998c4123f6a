//! Pool memory for torch tensors: parameters, optimizer state and gradients re-homed
//! into their pool, saved activations carried by holders, and the results the op hook
//! has born in their pool (`_hook.cpp`'s CPU allocator). It is allocated by placer-pools
//! as the executor's buffers are, so on a pool bound to NUMA nodes the pages are bound
//! there, placed, and checked where they landed.
//!
//! Memory no tensor is over any more is kept for the next tensor of the same pool and
//! size: a fresh allocation would fault its pages in again every step. `release` gives
//! the kept memory back. One `Memory` serves Python (through `Homes`) and the hook (by
//! address, hook.rs) alike; it lives while `Homes` or any block the hook handed out
//! does, so a tensor born in pool memory may outlive the plan that placed it.

use crate::ModelError;
use crate::placement::Placement;
use placer_pools::{Buffer, PoolId, PoolSet};
use pyo3::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

/// The memory behind `Homes`, shared with the op hook's blocks.
#[derive(Debug)]
pub struct Memory {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    pools: PoolSet,
    /// Every buffer allocated and not yet released, by address.
    buffers: HashMap<usize, Buffer>,
    /// Addresses no tensor is over, by (pool, bytes).
    free: HashMap<(PoolId, u64), Vec<usize>>,
}

fn poisoned() -> PyErr {
    ModelError::new_err("pool memory: an earlier call failed while holding it")
}

impl Memory {
    fn lock(&self) -> PyResult<MutexGuard<'_, Inner>> {
        self.inner.lock().map_err(|_| poisoned())
    }

    /// `bytes` of pool `pool`'s memory: kept memory of that size when there is some
    /// (its contents are what the last tensor left), else fresh and zeroed.
    pub(crate) fn take(&self, pool: PoolId, bytes: u64) -> Result<usize, String> {
        let mut inner = self.inner.lock().map_err(|_| "pool memory is poisoned".to_string())?;
        if pool.index() >= inner.pools.pools().len() {
            return Err(format!("no pool {} on this host", pool.index()));
        }
        let bytes = bytes.max(1);
        if let Some(address) = inner.free.get_mut(&(pool, bytes)).and_then(Vec::pop) {
            return Ok(address);
        }
        let mut buffer = inner.pools.allocate(pool, bytes).map_err(|e| e.to_string())?;
        let address = buffer.bytes_mut().as_mut_ptr() as usize;
        inner.buffers.insert(address, buffer);
        Ok(address)
    }

    /// The memory at `address` (from `take`) is free for the next tensor of its pool and
    /// size; whether it was this memory's.
    pub(crate) fn give(&self, address: usize) -> bool {
        let Ok(mut inner) = self.inner.lock() else { return false };
        let Some(key) = inner.buffers.get(&address).map(|b| (b.pool(), b.len_bytes() as u64)) else { return false };
        inner.free.entry(key).or_default().push(address);
        true
    }
}

/// Pool memory of one applied plan, for Python.
#[pyclass(module = "placer_torch._core", frozen)]
#[derive(Debug)]
pub struct Homes {
    memory: Arc<Memory>,
}

#[pymethods]
impl Homes {
    /// Pool memory of the pools `placement` was resolved against.
    #[new]
    fn new(placement: PyRef<'_, Placement>) -> Homes {
        let inner = Inner { pools: placement.pool_set().clone(), buffers: HashMap::new(), free: HashMap::new() };
        Homes { memory: Arc::new(Memory { inner: Mutex::new(inner) }) }
    }

    /// Each pool and the NUMA nodes its memory is bound to (none: not bound, such as a
    /// heap pool).
    fn nodes(&self) -> PyResult<Vec<(String, Vec<u32>)>> {
        let inner = self.memory.lock()?;
        Ok(inner.pools.pools().iter().map(|p| (p.name.clone(), p.backend.checked_nodes().to_vec())).collect())
    }

    /// `bytes` of pool `pool`'s memory (kept memory of that size, or fresh); returns its
    /// address. A full pool is a one-line error naming it.
    fn take(&self, pool: &str, bytes: u64) -> PyResult<usize> {
        let id = self.memory.lock()?.pools.find(pool).map_err(|e| ModelError::new_err(e.to_string()))?;
        self.memory.take(id, bytes).map_err(ModelError::new_err)
    }

    /// The memory at `address` is free for the next tensor of its pool and size: no
    /// tensor may be over it any more. Returns whether it was this memory's.
    fn give(&self, address: usize) -> bool {
        self.memory.give(address)
    }

    /// Frees the memory kept for reuse; returns its bytes.
    fn release(&self) -> PyResult<u64> {
        let mut inner = self.memory.lock()?;
        let Inner { pools, buffers, free } = &mut *inner;
        let mut freed = 0;
        for address in free.drain().flat_map(|(_, addresses)| addresses) {
            if let Some(buffer) = buffers.remove(&address) {
                freed += buffer.len_bytes() as u64;
                pools.free(buffer);
            }
        }
        Ok(freed)
    }

    /// The address the op hook hands to `memory_take` and `memory_give` (hook.rs).
    fn address(&self) -> usize {
        Arc::as_ptr(&self.memory) as usize
    }

    /// Per pool holding any of this memory, asked of the kernel now: (pool, buffers,
    /// bytes, pages asked about, pages on the pool's nodes, pages elsewhere, pages
    /// not placed, pages per node as `node:count` text). Memory kept for reuse counts.
    #[allow(clippy::type_complexity)] // a row of plain Python values
    fn pages(&self) -> PyResult<Vec<(String, usize, u64, u64, u64, u64, u64, String)>> {
        let inner = self.memory.lock()?;
        let mut rows = Vec::new();
        for (i, pool) in inner.pools.pools().iter().enumerate() {
            let mine: Vec<&Buffer> = inner.buffers.values().filter(|b| b.pool().index() == i).collect();
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
