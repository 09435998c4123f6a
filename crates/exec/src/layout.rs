//! Offsets in arenas: first-fit packing of items that live over ranges of steps, and
//! the plan that runs a model in one static placement within its live memory.

use crate::executor::PoolAssignment;
use crate::invoke::scratch_bytes;
use crate::planned::{ExecPlan, PlannedSpan, reserved_bytes};
use placer_ir::{Liveness, Model};

/// First fit in `order`: item `i` (`bytes[i]` bytes, live over the inclusive `ranges[i]`)
/// goes at the lowest offset clear of every item already placed that is live at a
/// common point. Returns each item's offset and the bytes the arena needs.
pub fn first_fit(bytes: &[u64], ranges: &[&[(usize, usize)]], order: &[usize]) -> (Vec<u64>, u64) {
    let meets = |a: usize, b: usize| ranges[a].iter().any(|x| ranges[b].iter().any(|y| x.0 <= y.1 && y.0 <= x.1));
    let mut offsets = vec![0u64; bytes.len()];
    let mut placed: Vec<usize> = Vec::with_capacity(bytes.len());
    let mut arena = 0;
    for &i in order {
        let mut taken: Vec<(u64, u64)> =
            placed.iter().filter(|&&k| meets(k, i)).map(|&k| (offsets[k], offsets[k] + bytes[k])).collect();
        taken.sort_unstable();
        let mut at = 0;
        for (lo, hi) in taken {
            if lo >= at + bytes[i] {
                break;
            }
            at = at.max(hi);
        }
        offsets[i] = at;
        arena = arena.max(at + bytes[i]);
        placed.push(i);
    }
    (offsets, arena)
}

impl ExecPlan {
    /// The plan that keeps every tensor in `placement`'s pool for the whole step, with
    /// no moves, each placed only while it is live (`Liveness`) and each kernel's
    /// scratch in pool 0 while it runs: what a profiling pass needs when the model's
    /// footprint does not fit. Each pool's items are packed largest first.
    pub fn resident(model: &Model, placement: &PoolAssignment, pools: usize) -> ExecPlan {
        let liveness = Liveness::new(model);
        let steps = model.schedule().len();
        // Items: every tensor, then every step's scratch (in pool 0).
        let mut bytes: Vec<u64> = model.tensors().iter().map(|t| reserved_bytes(t.bytes)).collect();
        let mut ranges: Vec<[(usize, usize); 1]> = liveness.ranges.iter().map(|r| [(r.first, r.last)]).collect();
        let mut pool_of: Vec<usize> = placement.0.iter().map(|p| p.index()).collect();
        for (s, &n) in model.schedule().iter().enumerate() {
            bytes.push(reserved_bytes(scratch_bytes(model, n)));
            ranges.push([(s, s)]);
            pool_of.push(0);
        }
        let ranges: Vec<&[(usize, usize)]> = ranges.iter().map(|r| r.as_slice()).collect();
        let mut offsets = vec![0u64; bytes.len()];
        let mut arena_bytes = vec![0u64; pools];
        for (pool, arena) in arena_bytes.iter_mut().enumerate() {
            let items: Vec<usize> = (0..bytes.len()).filter(|&i| pool_of[i] == pool).collect();
            let mut order: Vec<usize> = (0..items.len()).collect();
            order.sort_by_key(|&k| (std::cmp::Reverse(bytes[items[k]]), ranges[items[k]][0].0));
            let sub_bytes: Vec<u64> = items.iter().map(|&i| bytes[i]).collect();
            let sub_ranges: Vec<&[(usize, usize)]> = items.iter().map(|&i| ranges[i]).collect();
            let (sub_offsets, size) = first_fit(&sub_bytes, &sub_ranges, &order);
            for (&i, o) in items.iter().zip(sub_offsets) {
                offsets[i] = o;
            }
            *arena = size;
        }
        let tensors = model.tensors().len();
        let spans = (0..tensors)
            .map(|i| vec![PlannedSpan { from: liveness.ranges[i].first, pool: placement.0[i], offset: offsets[i] }])
            .collect();
        let scratch_offsets = offsets[tensors..tensors + steps].to_vec();
        ExecPlan {
            spans,
            moves: Vec::new(),
            scratch_offsets,
            budget_bytes: arena_bytes[0],
            arena_bytes,
            side_cache: None,
        }
    }
}
