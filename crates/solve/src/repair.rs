//! Fitting a placement into its DRAM arena without solving again.
//!
//! The solver limits the bytes live in DRAM at every step; packing them at fixed
//! offsets can still need a little more (fragmentation, or a blocking copy holding both
//! ends). Solving again under a lower limit cost a whole second solve on DenseNet-264.
//! Instead, the tensors the packing put above the budget leave DRAM for their whole
//! live range (to the fastest other pool with room), and the arena is packed again: a
//! few layouts, seconds on the largest graphs. What moves is mostly small (377 tensors,
//! 4.4 MiB, for ResNet-200 b32's async plan at 10%). The plan is then checked like any
//! other, and its reported gaps are of the plan as repaired.

use crate::cost::Costs;
use crate::instance::Instance;
use crate::layout::{Layout, lay_out};
use crate::placement::Placement;
use placer_ir::Model;

/// How many times the arena is packed again after moving tensors out.
const ROUNDS: usize = 4;

/// What a repair moved out of DRAM.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Repair {
    pub tensors: usize,
    pub bytes: u64,
}

/// `placement` laid out so that DRAM's arena fits `inst.capacity[0]`, after moving out
/// whatever packed above it; `Err` says by how much the last packing still overshot.
pub fn fit_arena(
    model: &Model,
    inst: &Instance,
    costs: &Costs,
    mut placement: Placement,
) -> Result<(Placement, Layout, Option<Repair>), u64> {
    let budget = inst.capacity[0];
    let mut repair = Repair::default();
    let mut layout = lay_out(model, inst, &placement);
    for _ in 0..ROUNDS {
        if layout.arena_bytes[0] <= budget {
            break;
        }
        let mut held = placement.evaluate(inst, costs).bytes;
        let mut moved = 0;
        // Enough to cover the overshoot twice over: the packing moves other items too.
        let enough = 2 * (layout.arena_bytes[0] - budget);
        let mut freed = 0;
        for t in offenders(inst, &placement, &layout, budget) {
            if freed >= enough {
                break;
            }
            let Some(pool) = slow_pool(inst, &mut held, t) else { continue };
            placement.spans[t] = vec![(inst.tensors[t].first, pool)];
            placement.moves.retain(|m| m.tensor != t);
            repair.tensors += 1;
            repair.bytes += inst.tensors[t].bytes;
            freed += inst.tensors[t].bytes;
            moved += 1;
        }
        if moved == 0 {
            break;
        }
        layout = lay_out(model, inst, &placement);
    }
    match layout.arena_bytes[0].checked_sub(budget) {
        Some(over) if over > 0 => Err(over),
        _ => Ok((placement, layout, (repair.tensors > 0).then_some(repair))),
    }
}

/// Tensors with a DRAM span packed (even partly) above the budget, highest first. When
/// an item that cannot move sticks out too (scratch, a pinned tensor), the movable
/// tensors in DRAM at its steps follow, highest first: they make room under it.
fn offenders(inst: &Instance, placement: &Placement, layout: &Layout, budget: u64) -> Vec<usize> {
    let movable = |t: usize| inst.tensors[t].pinned.is_none();
    let span_steps = |t: usize, j: usize| {
        let spans = &placement.spans[t];
        let end = spans.get(j + 1).map_or(inst.tensors[t].last, |s| s.0.saturating_sub(1));
        spans[j].0..=end
    };
    let mut above: Vec<(u64, usize)> = Vec::new();
    let mut stuck = vec![false; inst.steps()];
    let mut dram: Vec<(u64, usize, usize)> = Vec::new();
    for (t, spans) in placement.spans.iter().enumerate() {
        for (j, _) in spans.iter().enumerate().filter(|(_, s)| s.1 == 0) {
            let top = layout.offsets[t][j] + inst.tensors[t].bytes;
            match (top > budget, movable(t)) {
                (true, true) => above.push((top, t)),
                (true, false) => span_steps(t, j).for_each(|s| stuck[s] = true),
                (false, true) => dram.push((top, t, j)),
                (false, false) => {}
            }
        }
    }
    for (s, k) in inst.kernels.iter().enumerate() {
        if k.scratch_bytes > 0 && layout.scratch[s] + k.scratch_bytes > budget {
            stuck[s] = true;
        }
    }
    above.sort_unstable_by(|a, b| b.cmp(a));
    dram.sort_unstable_by(|a, b| b.cmp(a));
    let under = dram.iter().filter(|&&(_, t, j)| span_steps(t, j).any(|s| stuck[s])).map(|&(top, t, _)| (top, t));
    let mut seen = std::collections::BTreeSet::new();
    above.into_iter().chain(under).map(|(_, t)| t).filter(|&t| seen.insert(t)).collect()
}

/// The fastest pool other than DRAM that `t` may use and that has room for it over its
/// whole live range, given `held` (bytes per pool per step, updated for the move).
fn slow_pool(inst: &Instance, held: &mut [Vec<u64>], t: usize) -> Option<u16> {
    let info = &inst.tensors[t];
    let range = info.first..=info.last;
    let pool = inst
        .pools
        .by_speed()
        .into_iter()
        .filter(|&p| p != 0 && inst.allowed(t, p))
        .find(|&p| held[p as usize][range.clone()].iter().all(|&b| b + info.bytes <= inst.capacity[p as usize]))?;
    for b in &mut held[pool as usize][range] {
        *b += info.bytes;
    }
    Some(pool)
}
