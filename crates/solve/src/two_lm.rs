//! The EMULATED 2LM baseline: the hardware alternative to placing tensors at all. DRAM
//! of the budget's size (less what all-slow keeps in DRAM: scratch space and tensors
//! pinned there) becomes a memory-side cache in front of the slow pool
//! (direct-mapped, 64-byte lines, tags kept by the hardware, write-back: Optane's Memory
//! Mode, the reference system's headline comparison). Every tensor lives where all-slow
//! puts it, at all-slow's offsets; each kernel runs at DRAM speed and then waits for the
//! lines its operands fetched from the slow device and the dirty lines they evicted,
//! given the cache as the kernel before it left it ([`placer_pools::MemorySideCache`]).
//!
//! The wait goes through the same path as an emulated pool's: the executor charges it
//! after the kernel, at the emulated device's extra cost per byte read (a fetch) and
//! written (a write-back). The solver predicts it with the cost model's fitted extras.
//! Only a pool that is itself emulated can be cached this way; on a host in Memory Mode
//! the real cache is measured instead (docs/hosts.md).

use crate::cost::Costs;
use crate::plan::{Plan, PlanKernel, SideCache};
use crate::pools::SolvePools;
use placer_ir::Model;
use placer_pools::{MemorySideCache, SideTraffic};

/// How every output names this baseline.
pub const LABEL: &str = "EMULATED 2LM";
pub const LINE_BYTES: u64 = 64;

/// Per step, what the cache costs the slow device in the steady state: the schedule
/// runs once to warm the cache, as every training step after the first finds it, and
/// the second run is counted. Tensors are read (inputs), read and written (updates) or
/// written (outputs) whole, in operand order.
pub fn step_traffic(model: &Model, plan: &Plan, cache: &SideCache) -> Result<Vec<SideTraffic>, String> {
    let mut offsets = Vec::with_capacity(plan.tensors.len());
    for t in &plan.tensors {
        let cached: Vec<u64> = t.placement.iter().filter(|s| s.pool == cache.pool).map(|s| s.offset).collect();
        match (cached.as_slice(), t.placement.len()) {
            ([], _) => offsets.push(None),
            ([offset], 1) => offsets.push(Some(*offset)),
            _ => return Err(format!("tensor '{}' moves; a 2LM plan keeps every tensor in one place", t.name)),
        }
    }
    let mut side = MemorySideCache::new(cache.cache_bytes, cache.line_bytes);
    let mut steps = vec![SideTraffic::default(); model.schedule().len()];
    for round in 0..2 {
        for (step, &n) in model.schedule().iter().enumerate() {
            let node = model.node(n);
            let mut traffic = SideTraffic::default();
            let mut touch = |ids: &[placer_ir::TensorId], write: bool| {
                for t in ids {
                    if let Some(Some(offset)) = offsets.get(t.index()) {
                        traffic += side.access(*offset, model.tensor(*t).bytes, write);
                    }
                }
            };
            touch(&node.inputs, false);
            touch(&node.updates, false);
            touch(&node.updates, true);
            touch(&node.outputs, true);
            if round == 1 {
                steps[step] = traffic;
            }
        }
    }
    Ok(steps)
}

/// The wait for one step's traffic at these extra costs per byte read and written.
pub fn wait_ns(t: SideTraffic, line_bytes: u64, read_extra_ns_per_byte: f64, write_extra_ns_per_byte: f64) -> f64 {
    (t.fills * line_bytes) as f64 * read_extra_ns_per_byte
        + (t.writebacks * line_bytes) as f64 * write_extra_ns_per_byte
}

/// The pool a 2LM cache sits in front of: the slowest, if it is emulated.
pub fn cached_pool(pools: &SolvePools) -> Result<u16, String> {
    let slowest = *pools.by_speed().last().unwrap_or(&0);
    let pool = &pools.pools[slowest as usize];
    if slowest == 0 {
        return Err("there is no slow pool to cache".into());
    }
    if pool.emulated_as.is_none() {
        return Err(format!(
            "pool '{}' is a real device: 2LM is emulated only in front of an emulated pool; on a host in Memory Mode, \
             measure the hardware's 2LM as all-slow",
            pool.name
        ));
    }
    Ok(slowest)
}

/// The 2LM plan made from all-slow's: the same places and offsets, every kernel costed
/// as all-DRAM's plus its cache wait.
pub fn plan(
    model: &Model,
    all_slow: &Plan,
    all_dram: &Plan,
    costs: &Costs,
    pools: &SolvePools,
) -> Result<Plan, String> {
    let pool = cached_pool(pools)?;
    let cache = SideCache {
        pool: pools.pools[pool as usize].name.clone(),
        // DRAM is the budget: what all-slow keeps there (scratch, pinned tensors) is
        // not cache.
        cache_bytes: all_slow.inputs.budget_bytes.saturating_sub(all_slow.arena_bytes[0]),
        line_bytes: LINE_BYTES,
    };
    let traffic = step_traffic(model, all_slow, &cache)?;
    let waits = fitted_waits(&traffic, &cache, costs, pool as usize);
    let mut plan = all_slow.clone();
    plan.provenance.strategy = crate::plan::Strategy::TwoLm;
    plan.provenance.formulation = None;
    plan.kernels = all_slow
        .kernels
        .iter()
        .zip(&all_dram.kernels)
        .zip(&waits)
        .map(|((k, d), w)| PlanKernel { time_ns: d.time_ns + w, source: d.source, ..k.clone() })
        .collect();
    let step: f64 = plan.kernels.iter().map(|k| k.time_ns).sum();
    plan.predicted = crate::plan::Predicted {
        step_ns: step + costs.step_overhead_ns,
        kernel_ns: step,
        interference_ns: 0.0,
        sync_move_ns: 0.0,
        exposed_copy_ns: 0.0,
        ..all_dram.predicted
    };
    let (lines, fills, writebacks) =
        traffic.iter().fold((0, 0, 0), |(l, f, w), t| (l + t.lines, f + t.fills, w + t.writebacks));
    plan.provenance.note = format!(
        "{LABEL}: DRAM of the budget's size ({} bytes) emulated as a direct-mapped memory-side cache of {}-byte lines \
         in front of pool '{}' (docs/hosts.md); per step {lines} lines accessed, {fills} fetched, {writebacks} written \
         back. Times are predictions for that model, not measurements of a 2LM host",
        cache.cache_bytes, cache.line_bytes, cache.pool
    );
    plan.memory_side_cache = Some(cache);
    Ok(plan)
}

/// Per step, the wait the solver predicts for `plan`'s cache: its traffic at the cost
/// model's fitted extras for the cached pool. Also the cached pool's index.
pub fn predicted_waits(
    model: &Model,
    plan: &Plan,
    cache: &SideCache,
    costs: &Costs,
    pools: &SolvePools,
) -> Result<(usize, Vec<f64>), String> {
    let pool = pools
        .pools
        .iter()
        .position(|p| p.name == cache.pool)
        .ok_or_else(|| format!("the 2LM cache is in front of unknown pool '{}'", cache.pool))?;
    Ok((pool, fitted_waits(&step_traffic(model, plan, cache)?, cache, costs, pool)))
}

/// `traffic` at the cost model's fitted extras for pool `pool`.
fn fitted_waits(traffic: &[SideTraffic], cache: &SideCache, costs: &Costs, pool: usize) -> Vec<f64> {
    let (read, write) = (costs.model.read_extra_ns_per_byte[pool], costs.model.write_extra_ns_per_byte[pool]);
    traffic.iter().map(|&t| wait_ns(t, cache.line_bytes, read, write)).collect()
}
