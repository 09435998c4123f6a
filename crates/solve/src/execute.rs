//! plan.json as the executor takes it: names resolved to tensor and pool ids on this
//! host, each move tied to the span it enters.

use crate::SolveError;
use crate::placement::MoveKind;
use crate::plan::{Plan, SideCache};
use crate::two_lm;
use placer_exec::{CopyKind, ExecPlan, PlannedMove, PlannedSpan, SideWaits};
use placer_ir::{Model, TensorId};
use placer_pools::{PoolId, PoolSet};
use std::collections::HashMap;

/// Resolves `plan` against `model` and the host's `pools`.
pub fn exec_plan(plan: &Plan, model: &Model, pools: &PoolSet) -> Result<ExecPlan, SolveError> {
    let mismatch = |reason: String| SolveError::Mismatch { reason };
    if plan.provenance.model_hash != model.content_hash() {
        return Err(mismatch(format!(
            "the plan is for model '{}' ({}), not '{}' ({})",
            plan.provenance.model,
            plan.provenance.model_hash.chars().take(16).collect::<String>(),
            model.name(),
            &model.content_hash()[..16]
        )));
    }
    let mut pool_ids = HashMap::new();
    let mut arena_bytes = vec![0; pools.pools().len()];
    for (figures, &bytes) in plan.inputs.pools.iter().zip(&plan.arena_bytes) {
        let id = pools.find(&figures.name).map_err(|e| mismatch(format!("the plan's pool '{}': {e}", figures.name)))?;
        arena_bytes[id.index()] = bytes;
        pool_ids.insert(figures.name.as_str(), id);
    }
    let steps = model.schedule().len();
    if plan.tensors.len() != model.tensors().len() || plan.kernels.len() != steps {
        return Err(mismatch("the plan does not list the model's tensors and kernels".into()));
    }
    let mut spans = Vec::with_capacity(plan.tensors.len());
    for (pt, t) in plan.tensors.iter().zip(model.tensors()) {
        if pt.name != t.name {
            return Err(mismatch(format!("the plan names tensor '{}' where the model has '{}'", pt.name, t.name)));
        }
        let resolved = pt
            .placement
            .iter()
            .map(|s| {
                let pool =
                    *pool_ids.get(s.pool.as_str()).ok_or_else(|| mismatch(format!("unknown pool '{}'", s.pool)))?;
                Ok(PlannedSpan { from: s.from, pool, offset: s.offset })
            })
            .collect::<Result<Vec<_>, SolveError>>()?;
        spans.push(resolved);
    }
    let index: HashMap<&str, usize> = model.tensors().iter().enumerate().map(|(i, t)| (t.name.as_str(), i)).collect();
    let mut moves = Vec::with_capacity(plan.moves.len());
    for m in &plan.moves {
        let t = *index
            .get(m.tensor.as_str())
            .ok_or_else(|| mismatch(format!("a move names unknown tensor '{}'", m.tensor)))?;
        let to_span = if m.before_step == steps {
            0
        } else {
            spans[t].iter().position(|s| s.from == m.before_step).ok_or_else(|| {
                mismatch(format!("the move of '{}' before step {} enters none of its spans", m.tensor, m.before_step))
            })?
        };
        let kind = match m.kind {
            MoveKind::Sync => CopyKind::Blocking,
            MoveKind::Async => CopyKind::Background,
        };
        moves.push(PlannedMove { tensor: TensorId(t as u32), to_span, before_step: m.before_step, kind });
    }
    let side_cache = match &plan.memory_side_cache {
        None => None,
        Some(cache) => Some(side_waits(plan, model, pools, cache, &pool_ids)?),
    };
    Ok(ExecPlan {
        spans,
        moves,
        scratch_offsets: plan.kernels.iter().map(|k| k.scratch_offset).collect(),
        arena_bytes,
        budget_bytes: plan.inputs.budget_bytes,
        side_cache,
        // Each pool's offsets are packed on their own: two pools' tensors may share one.
        one_packing: false,
    })
}

/// What an EMULATED 2LM plan's cache charges per step: its traffic at the emulated
/// pool's own extra costs, as the pool would charge the same bytes.
fn side_waits(
    plan: &Plan,
    model: &Model,
    pools: &PoolSet,
    cache: &SideCache,
    pool_ids: &HashMap<&str, PoolId>,
) -> Result<SideWaits, SolveError> {
    let mismatch = |reason: String| SolveError::Mismatch { reason };
    let pool = *pool_ids
        .get(cache.pool.as_str())
        .ok_or_else(|| mismatch(format!("the 2LM cache is in front of unknown pool '{}'", cache.pool)))?;
    let emulation = pools.pool(pool).emulation.as_ref().ok_or_else(|| {
        mismatch(format!(
            "the plan emulates 2LM in front of pool '{}', which is a real device here; on a host in Memory Mode, \
             measure the hardware's 2LM as all-slow",
            cache.pool
        ))
    })?;
    let traffic = two_lm::step_traffic(model, plan, cache).map_err(mismatch)?;
    let waits_ns = traffic
        .iter()
        .map(|&t| {
            two_lm::wait_ns(t, cache.line_bytes, emulation.read_extra_ns_per_byte, emulation.write_extra_ns_per_byte)
        })
        .collect();
    Ok(SideWaits { pool, waits_ns })
}
