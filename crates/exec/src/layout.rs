//! Offsets in arenas: first-fit packing of items that live over ranges of steps, and
//! the plan that runs a model in one static placement within its live memory.

use crate::executor::PoolAssignment;
use crate::invoke::scratch_bytes;
use crate::planned::{ExecPlan, PlannedSpan, reserved_bytes};
use placer_ir::{Liveness, Model};

/// First fit in `order`: item `i` (`bytes[i]` bytes, live over the inclusive `ranges[i]`)
/// goes at the lowest offset clear of every item already placed that is live at a
/// common point. Returns each item's offset and the bytes the arena needs.
///
/// Placed items are indexed by the blocks of steps they touch, so that an item is tested
/// only against those that may share a step with it; items that touch many blocks (a
/// weight live all step) sit in one list every item scans. Testing every placed item
/// was most of a layout's time on DenseNet-264's async plans (10⁴ items).
pub fn first_fit(bytes: &[u64], ranges: &[&[(usize, usize)]], order: &[usize]) -> (Vec<u64>, u64) {
    let meets = |a: usize, b: usize| ranges[a].iter().any(|x| ranges[b].iter().any(|y| x.0 <= y.1 && y.0 <= x.1));
    let end = ranges.iter().flat_map(|r| r.iter().map(|x| x.1 + 1)).max().unwrap_or(1);
    let block = end.div_ceil(BLOCKS).max(1);
    let blocks_of = |i: usize| ranges[i].iter().flat_map(move |&(a, b)| a / block..=b / block);
    let mut narrow: Vec<Vec<usize>> = vec![Vec::new(); end / block + 1];
    let mut wide: Vec<usize> = Vec::new();
    // The last item each placed item was tested against: an item in several blocks is
    // tested once.
    let mut tested = vec![usize::MAX; bytes.len()];
    let mut offsets = vec![0u64; bytes.len()];
    let mut arena = 0;
    let mut taken: Vec<(u64, u64)> = Vec::new();
    for &i in order {
        taken.clear();
        for &k in wide.iter().chain(blocks_of(i).flat_map(|b| narrow[b].iter())) {
            if tested[k] != i {
                tested[k] = i;
                if meets(k, i) {
                    taken.push((offsets[k], offsets[k] + bytes[k]));
                }
            }
        }
        taken.sort_unstable_by_key(|x| x.0);
        let mut at = 0;
        for &(lo, hi) in &taken {
            if lo >= at + bytes[i] {
                break;
            }
            at = at.max(hi);
        }
        offsets[i] = at;
        arena = arena.max(at + bytes[i]);
        if blocks_of(i).count() > WIDE_BLOCKS {
            wide.push(i);
        } else {
            for b in blocks_of(i) {
                narrow[b].push(i);
            }
        }
    }
    (offsets, arena)
}

/// The index's blocks of steps, and how many an item may touch before it counts as wide.
const BLOCKS: usize = 256;
const WIDE_BLOCKS: usize = 8;

impl ExecPlan {
    /// The plan that keeps every tensor in `placement`'s pool for the whole step, with
    /// no moves, each placed only while it is live (`Liveness`) and each kernel's
    /// scratch in pool 0 while it runs: what a profiling pass needs when the model's
    /// footprint does not fit.
    ///
    /// Offsets do not depend on `placement`: every item is packed once, largest first,
    /// as if all shared one arena, and each pool's arena ends where its last item does.
    /// So a kernel reads and writes at the same offsets, amid the same freed bytes, in
    /// every pass, whichever other tensors a pass moved: single and simultaneous passes
    /// differ only in the pools. No pool's arena is larger than that one packing, which is
    /// about the step's peak live bytes.
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
        let mut order: Vec<usize> = (0..bytes.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(bytes[i]), ranges[i][0].0));
        let (offsets, _) = first_fit(&bytes, &ranges, &order);
        let mut arena_bytes = vec![0u64; pools];
        for (i, &pool) in pool_of.iter().enumerate() {
            arena_bytes[pool] = arena_bytes[pool].max(offsets[i] + bytes[i]);
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
            one_packing: true,
            side_cache: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::first_fit;
    use proptest::prelude::*;

    /// First fit as specified: every placed item tested.
    fn every_item_tested(bytes: &[u64], ranges: &[&[(usize, usize)]], order: &[usize]) -> (Vec<u64>, u64) {
        let meets = |a: usize, b: usize| ranges[a].iter().any(|x| ranges[b].iter().any(|y| x.0 <= y.1 && y.0 <= x.1));
        let mut offsets = vec![0u64; bytes.len()];
        let mut placed: Vec<usize> = Vec::new();
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

    proptest! {
        /// The index changes which items are tested, never the packing.
        #[test]
        fn the_indexed_first_fit_packs_as_testing_every_item_does(
            // Short ranges (a block or two of the index) and long ones (wide items).
            items in prop::collection::vec(
                (1u64..100, 0usize..3000, prop_oneof![0usize..40, 0usize..3000], prop::option::of((0usize..3000, 0usize..200))),
                1..120,
            ),
            seed in any::<u64>(),
        ) {
            let bytes: Vec<u64> = items.iter().map(|i| i.0).collect();
            let ranges: Vec<Vec<(usize, usize)>> = items
                .iter()
                .map(|&(_, start, len, second)| {
                    let mut r = vec![(start, start + len)];
                    r.extend(second.map(|(s, len)| (s, s + len)));
                    r
                })
                .collect();
            let ranges: Vec<&[(usize, usize)]> = ranges.iter().map(Vec::as_slice).collect();
            let mut order: Vec<usize> = (0..bytes.len()).collect();
            let mut rng = seed | 1;
            for k in (1..order.len()).rev() {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                order.swap(k, (rng % (k as u64 + 1)) as usize);
            }
            prop_assert_eq!(first_fit(&bytes, &ranges, &order), every_item_tested(&bytes, &ranges, &order));
        }
    }
}
