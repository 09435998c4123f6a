//! Offsets: where in each pool's arena every span of every tensor (and every kernel's
//! scratch) sits. AutoTM solved for bytes and then found that fragmentation pushed real
//! DRAM use over the budget; a plan that carries its own offsets is executed exactly as
//! laid out, and its arena size is the DRAM it will use.
//!
//! Time is counted in phases, three per kernel `s`: phase `3s` holds the blocking
//! copies out of DRAM (each source freed as soon as it is copied), phase `3s + 1` every
//! other blocking copy (into DRAM, or between other pools), and phase `3s + 2` kernel
//! `s` itself, with its outputs, scratch, and the background copies it overlaps
//! (source and destination both held). Emptying DRAM before filling it is what keeps
//! every phase within the per-step counts the solver limited. Phases `3 × steps` and
//! `3 × steps + 1` end the step, where weights return. Two items may share bytes only
//! if no phase holds both. Packing is first fit in several orders (largest first, and
//! others), with a bounded search of swaps for DRAM, whose arena must fit the budget.

use crate::instance::Instance;
use crate::placement::{MoveKind, Placement};
use placer_ir::Model;
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Per tensor, per span: its offset in that span's pool.
    pub offsets: Vec<Vec<u64>>,
    /// Per step: its scratch's offset in DRAM (0 when it has none).
    pub scratch: Vec<u64>,
    /// Bytes each pool's arena needs.
    pub arena_bytes: Vec<u64>,
    /// The most bytes any one phase holds in each pool: what a perfect packing needs.
    pub phase_peak_bytes: Vec<u64>,
}

#[derive(Debug, Clone, Copy)]
enum Owner {
    Span(usize, usize),
    Scratch(usize),
}

#[derive(Debug)]
struct Item {
    owner: Owner,
    pool: u16,
    bytes: u64,
    /// Inclusive phase ranges; at most two (a weight's first span and its return).
    phases: Vec<(usize, usize)>,
}

fn items(model: &Model, inst: &Instance, placement: &Placement) -> Vec<Item> {
    let steps = inst.steps();
    let end = 3 * steps + 1;
    let kind: HashMap<(usize, usize), MoveKind> = placement.moves.iter().map(|m| ((m.tensor, m.at), m.kind)).collect();
    // A span entered at step `at` by a move from pool `from` starts (and the span it
    // leaves ends) in the move's phase.
    let move_phase = |t: usize, at: usize, from: u16| match kind.get(&(t, at)) {
        Some(MoveKind::Async) => 3 * at - 1,
        _ if from == 0 => 3 * at,
        _ => 3 * at + 1,
    };
    let mut items = Vec::new();
    for (t, (info, spans)) in inst.tensors.iter().zip(&placement.spans).enumerate() {
        let produced = model.producer(info.id).is_some();
        // A weight that ends the step in the pool it started in (without a move back)
        // must also be at the same offset: its first and last spans are one item.
        let wraps = info.persistent && spans.len() > 1 && !kind.contains_key(&(t, steps));
        for (j, &(from, pool)) in spans.iter().enumerate() {
            if wraps && j == spans.len() - 1 {
                continue;
            }
            let start = match j {
                0 if produced && !info.persistent => 3 * from + 2,
                0 => 0,
                _ => move_phase(t, from, spans[j - 1].1),
            };
            let stop = match spans.get(j + 1) {
                Some(&(next, _)) => move_phase(t, next, pool),
                None if info.persistent => end,
                None => 3 * info.last + 2,
            };
            let mut phases = vec![(start, stop)];
            let last_pool = spans[spans.len() - 1].1;
            if j == 0 && info.persistent && kind.contains_key(&(t, steps)) {
                phases.push((move_phase(t, steps, last_pool), end));
            }
            if j == 0 && wraps {
                phases.push((move_phase(t, spans[spans.len() - 1].0, spans[spans.len() - 2].1), end));
            }
            items.push(Item { owner: Owner::Span(t, j), pool, bytes: info.bytes, phases });
        }
    }
    for (s, k) in inst.kernels.iter().enumerate() {
        if k.scratch_bytes > 0 {
            let kernel = 3 * s + 2;
            items.push(Item {
                owner: Owner::Scratch(s),
                pool: 0,
                bytes: k.scratch_bytes,
                phases: vec![(kernel, kernel)],
            });
        }
    }
    items
}

/// How hard packing tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Packing {
    /// Several orders, and for DRAM a search of swaps: a plan's DRAM arena must fit
    /// its budget.
    Tightest,
    /// Largest first only, a quarter of the work: for the all-DRAM reference, whose
    /// arena need only fit the pool (on DenseNet-264 b32 each order packs ~12,000 items
    /// against ~2,000 live beside each, about half a second).
    LargestFirst,
}

/// Lays out `placement`'s spans and the kernels' scratch in per-pool arenas.
pub fn lay_out(model: &Model, inst: &Instance, placement: &Placement) -> Layout {
    lay_out_packing(model, inst, placement, Packing::Tightest)
}

pub(crate) fn lay_out_packing(model: &Model, inst: &Instance, placement: &Placement, packing: Packing) -> Layout {
    let pools = inst.pools.len();
    let items = items(model, inst, placement);
    let mut layout = Layout {
        offsets: placement.spans.iter().map(|s| vec![0; s.len()]).collect(),
        scratch: vec![0; inst.steps()],
        arena_bytes: vec![0; pools],
        phase_peak_bytes: phase_peaks(&items, pools, 3 * inst.steps() + 2),
    };
    for pool in 0..pools {
        let mine: Vec<&Item> = items.iter().filter(|i| i.pool as usize == pool).collect();
        let (offsets, arena) = match packing {
            Packing::Tightest => pack_pool(&mine, pool == 0),
            Packing::LargestFirst => pack(&mine, &largest_first(&mine)),
        };
        layout.arena_bytes[pool] = arena;
        for (item, at) in mine.iter().zip(offsets) {
            match item.owner {
                Owner::Span(t, j) => {
                    layout.offsets[t][j] = at;
                    // The wrapping weight's last span shares its first span's offset.
                    let spans = &placement.spans[t];
                    let wraps = inst.tensors[t].persistent && spans.len() > 1;
                    if j == 0 && wraps && spans[spans.len() - 1].1 == spans[0].1 {
                        let last = spans.len() - 1;
                        layout.offsets[t][last] = at;
                    }
                }
                Owner::Scratch(s) => layout.scratch[s] = at,
            }
        }
    }
    layout
}

/// Packs one pool's items; returns each item's offset and the arena's size. Several
/// orders are tried, and for DRAM (whose arena must fit the budget) a bounded local
/// search of swaps keeps any order that packs no worse.
fn pack_pool(items: &[&Item], search: bool) -> (Vec<u64>, u64) {
    let n = items.len();
    let length = |i: &Item| i.phases.iter().map(|p| (p.1 - p.0 + 1) as u64).sum::<u64>();
    let mut orders: Vec<Vec<usize>> = vec![largest_first(items)];
    let mut by = |key: &dyn Fn(&Item) -> (u64, u64)| {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(key(items[i])));
        orders.push(order);
    };
    by(&|i| (i.bytes.saturating_mul(length(i)), i.bytes));
    by(&|i| (length(i), i.bytes));
    by(&|i| (u64::MAX - i.phases[0].0 as u64, i.bytes));
    // Half the orders on each core: on DenseNet-264's async plans a packing takes a
    // good part of a second. The first best in the fixed order wins, as before.
    let packed: Vec<(Vec<u64>, u64)> = std::thread::scope(|scope| {
        let (mine, theirs) = orders.split_at(orders.len() / 2);
        let other = scope.spawn(|| theirs.iter().map(|o| pack(items, o)).collect::<Vec<_>>());
        let mut packed: Vec<(Vec<u64>, u64)> = mine.iter().map(|o| pack(items, o)).collect();
        packed.extend(other.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        packed
    });
    let mut best: Option<(Vec<usize>, Vec<u64>, u64)> = None;
    for (order, (offsets, arena)) in orders.into_iter().zip(packed) {
        if best.as_ref().is_none_or(|b| arena < b.2) {
            best = Some((order, offsets, arena));
        }
    }
    let Some((mut order, mut offsets, mut arena)) = best else { return (Vec::new(), 0) };
    // About 3·10⁷ overlap tests in all: hundreds of tries on small graphs, a few on
    // the largest.
    let tries = if search && n > 1 { (30_000_000 / (n * n)).min(400) } else { 0 };
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..tries {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let (a, b) = ((rng % n as u64) as usize, ((rng >> 32) % n as u64) as usize);
        let mut candidate = order.clone();
        candidate.swap(a, b);
        let (o, size) = pack(items, &candidate);
        if size <= arena {
            (order, offsets, arena) = (candidate, o, size);
        }
    }
    (offsets, arena)
}

/// Largest first; of equal sizes, the earliest first.
fn largest_first(items: &[&Item]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(items[i].bytes), items[i].phases[0].0));
    order
}

/// First fit in `order` ([`placer_exec::first_fit`], shared with the executor's
/// static plans): each item at the lowest offset clear of the items already placed that
/// share a phase with it.
fn pack(items: &[&Item], order: &[usize]) -> (Vec<u64>, u64) {
    let bytes: Vec<u64> = items.iter().map(|i| i.bytes).collect();
    let phases: Vec<&[(usize, usize)]> = items.iter().map(|i| i.phases.as_slice()).collect();
    placer_exec::first_fit(&bytes, &phases, order)
}

fn phase_peaks(items: &[Item], pools: usize, phases: usize) -> Vec<u64> {
    let mut delta = vec![vec![0i128; phases + 1]; pools];
    for item in items {
        for &(a, b) in &item.phases {
            delta[item.pool as usize][a] += i128::from(item.bytes);
            delta[item.pool as usize][b + 1] -= i128::from(item.bytes);
        }
    }
    delta
        .iter()
        .map(|d| {
            let mut live = 0i128;
            d.iter()
                .map(|x| {
                    live += x;
                    live
                })
                .max()
                .unwrap_or(0) as u64
        })
        .collect()
}
