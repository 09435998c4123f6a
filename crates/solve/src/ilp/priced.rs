//! A plan from the Lagrangian bound's prices (a Lagrangian heuristic; Fisher, "The
//! Lagrangian relaxation method for solving integer programming problems", Management
//! Science 27(1), 1981).
//!
//! At the prices of its best bound, each tensor's cheapest path (`bound::shortest_path`,
//! what the bound itself sums) is a placement the bound rates as good; only the relaxed
//! capacity rows may be broken, and near the bound's best prices they are broken at few
//! steps, by little. The repair takes the most overfilled step, re-routes the tensors
//! that hold the pool there around every overfilled step of that pool, cheapest per MiB
//! freed first, until the step fits, and repeats.
//!
//! The bound prices each overlap variable (the larger of a kernel's time and the
//! copies beside it) as a fixed mix of the two, so its paths put many copies beside
//! kernels the mix calls free, and its capacity prices keep tensors out of DRAM where
//! there is room. Local search then re-routes one tensor at a time against all the
//! others at their exact marginal costs, within the room the others leave, pass after
//! pass until a pass gains nothing: on DenseNet-264 b32 at 10% this took the bound's
//! paths from 3,006 ms over the all-DRAM step to 2,062 ms in 0.35 s. The result goes
//! through the model's own `placement_from` and `values_for`, and is returned only if
//! every row holds.
//!
//! Why: on DenseNet-264 the windows start from the sync stage's plan (or greedy's) and
//! spend most of a short time limit walking it towards what the bound already knows;
//! this start is built in a fraction of that time.

use super::bound::{Lagrangian, shortest_path};
use super::build::{Built, TensorVars};
use crate::instance::Instance;
use std::time::Instant;

/// Capacity rows are in MiB: a step over by less than this fits.
const OVER: f64 = 1e-6;

/// The share of DRAM's room at each step the priced plan leaves free. The model counts
/// bytes; the arena packs them at offsets, and a plan that fills DRAM to the byte at many
/// steps packed 1 page to 13 MiB over the budget on DenseNet-264 b32 at 10%. The repair
/// then moved whole tensors out of DRAM, at up to 100 ms of the step: more than the gap
/// the solve had proven. With 2% free, two such solves still needed repairs of 26 and
/// 41 ms; with 5%, two of three 20 s solves needed none, and the third moved 19 MB for
/// 8 ms. The priced plan cost no more for it (2,053 ms against 2,051-2,066 ms with no
/// slack). The bound keeps the true capacity, so the gap reported includes what the
/// slack costs.
const PACKING_SLACK: f64 = 0.05;

/// Tensors re-routed at most, as a multiple of the tensors: the repair stops (and no plan
/// is returned) rather than chase its own moves.
const REROUTES_PER_TENSOR: usize = 4;

/// What the chosen paths hold in each capped pool at each step (MiB), and what they put
/// on every relaxed row.
struct Load<'l, 'a> {
    lag: &'l Lagrangian<'a>,
    at: Vec<Vec<f64>>,
    /// What each capped pool may hold at each step: the capacity row's limit, less the
    /// packing's slack in DRAM.
    room: Vec<Vec<f64>>,
    /// Per relaxed row, what the paths put on its left-hand side.
    level: Vec<f64>,
    /// Per relaxed row, its overlap pair (index into `lag.pairs`), if it is in one.
    pair_of: Vec<Option<u32>>,
    /// Per overlap pair, its variable's cost and floor.
    overlap: Vec<(f64, f64)>,
}

impl<'l, 'a> Load<'l, 'a> {
    /// The capped pool and step of relaxed row `j`, when it is a capacity row.
    fn capacity_row(&self, j: u32) -> Option<(usize, usize)> {
        let first = *self.lag.cap_row.first()?;
        let j = (j as usize).checked_sub(first)?;
        Some((j / self.lag.steps, j % self.lag.steps))
    }

    /// Adds (`sign` 1) or takes away (-1) what the columns of one path hold.
    fn add(&mut self, cols: &[usize], sign: f64) {
        for &c in cols {
            if let Some(h) = self.lag.held[c] {
                for v in &mut self.at[h.pool][h.first..=h.last] {
                    *v += sign * h.bytes;
                }
            }
            for &(j, a) in &self.lag.by_col[c] {
                self.level[j as usize] += sign * a;
                if let Some((k, i)) = self.capacity_row(j) {
                    self.at[k][i] += sign * a;
                }
            }
        }
    }

    /// Overlap pair `p`'s variable, its kernel's level raised by `dk` and its copies' by
    /// `dc`: the larger of the two (rows read `level - rhs ≤ v`), at least its floor.
    fn overlap_value(&self, p: usize, dk: f64, dc: f64) -> f64 {
        let (k, c) = self.lag.pairs[p];
        let floor = self.overlap[p].1;
        (self.level[k] - self.lag.rhs[k] + dk).max(self.level[c] - self.lag.rhs[c] + dc).max(floor)
    }

    /// Relaxed row `j` raised by `a`, when it is one of an overlap pair's rows: the pair,
    /// and how much its kernel's and its copies' levels rise.
    fn raises(&self, j: u32, a: f64) -> Option<(u32, f64, f64)> {
        let p = self.pair_of[j as usize]?;
        let kernel = self.lag.pairs[p as usize].0 == j as usize;
        Some(if kernel { (p, a, 0.0) } else { (p, 0.0, a) })
    }

    /// What raising pair `p`'s levels by `dk` and `dc` costs: its variable's rise, at
    /// the variable's cost.
    fn raise_cost(&self, p: u32, dk: f64, dc: f64) -> f64 {
        let p = p as usize;
        self.overlap[p].0 * (self.overlap_value(p, dk, dc) - self.overlap_value(p, 0.0, 0.0))
    }

    /// What adding column `c` alone to the paths costs: its own cost, and how much it
    /// raises each overlap variable it enters. `exact` of the one column, without its
    /// allocation: this runs for every column of every tensor in every pass.
    fn marginal(&self, c: usize) -> f64 {
        let raised = self.lag.by_col[c].iter().filter_map(|&(j, a)| self.raises(j, a));
        self.lag.built.lp.cols[c].cost + raised.map(|(p, dk, dc)| self.raise_cost(p, dk, dc)).sum::<f64>()
    }

    /// What adding the columns of one path together costs: as `marginal`, with the
    /// path's own columns that enter the same overlap pair added up first.
    fn exact(&self, cols: &[usize]) -> f64 {
        let own: f64 = cols.iter().map(|&c| self.lag.built.lp.cols[c].cost).sum();
        let mut raised: Vec<(u32, f64, f64)> =
            cols.iter().flat_map(|&c| self.lag.by_col[c].iter().filter_map(|&(j, a)| self.raises(j, a))).collect();
        raised.sort_by_key(|r| r.0);
        let overlaps: f64 = raised
            .chunk_by(|a, b| a.0 == b.0)
            .map(|group| {
                let (dk, dc) = group.iter().fold((0.0, 0.0), |(k, c), r| (k + r.1, c + r.2));
                self.raise_cost(group[0].0, dk, dc)
            })
            .sum();
        own + overlaps
    }

    /// What the columns of one path hold in pool `k` at step `i`.
    fn share(&self, cols: &[usize], k: usize, i: usize) -> f64 {
        let mut held = 0.0;
        for &c in cols {
            if let Some(h) = self.lag.held[c]
                && h.pool == k
                && (h.first..=h.last).contains(&i)
            {
                held += h.bytes;
            }
            for &(j, a) in &self.lag.by_col[c] {
                if self.capacity_row(j) == Some((k, i)) {
                    held += a;
                }
            }
        }
        held
    }

    /// Whether column `c`'s share of the capped pools still fits beside the load.
    fn room_for(&self, c: usize) -> bool {
        let room = |k: usize, i: usize, bytes: f64| self.excess(k, i) + bytes <= OVER;
        self.lag.held[c].is_none_or(|h| (h.first..=h.last).all(|i| room(h.pool, i, h.bytes)))
            && self.lag.by_col[c].iter().all(|&(j, a)| self.capacity_row(j).is_none_or(|(k, i)| room(k, i, a)))
    }

    fn excess(&self, k: usize, i: usize) -> f64 {
        self.at[k][i] - self.room[k][i]
    }

    /// The most overfilled step of any capped pool: (excess, pool, step).
    fn worst(&self) -> Option<(f64, usize, usize)> {
        (0..self.at.len())
            .flat_map(|k| (0..self.lag.steps).map(move |i| (k, i)))
            .map(|(k, i)| (self.excess(k, i), k, i))
            .filter(|e| e.0 > OVER)
            .max_by(|a, b| a.0.total_cmp(&b.0))
    }
}

/// Column values for a plan built from `price`, or None when the repair could not make
/// every step fit by `deadline`.
pub(super) fn plan(lag: &Lagrangian<'_>, price: &[f64], inst: &Instance, deadline: Instant) -> Option<Vec<f64>> {
    let (mut load, mut paths) = routed(lag, price, deadline)?;
    improve(&mut load, &mut paths, deadline);
    values(lag.built, inst, &paths)
}

/// Each tensor's cheapest path at `price`, repaired until every capped step fits, and
/// what they load; None when the repair could not make every step fit by `deadline`.
fn routed<'l, 'a>(
    lag: &'l Lagrangian<'a>,
    price: &[f64],
    deadline: Instant,
) -> Option<(Load<'l, 'a>, Vec<Vec<usize>>)> {
    let built = lag.built;
    let rc = lag.reduced_costs(price);
    let mut paths = Vec::with_capacity(built.tensors.len());
    let mut costs = Vec::with_capacity(built.tensors.len());
    for tv in &built.tensors {
        let mut cols = Vec::new();
        let cost = if tv.loc.is_empty() { 0.0 } else { shortest_path(tv, &|c| rc[c], &mut cols) };
        if !cost.is_finite() {
            return None;
        }
        paths.push(cols);
        costs.push(cost);
    }
    let mut pair_of = vec![None; lag.rhs.len()];
    for (p, &(k, c)) in lag.pairs.iter().enumerate() {
        pair_of[k] = Some(p as u32);
        pair_of[c] = Some(p as u32);
    }
    let overlap = built.overlap_rows.iter().map(|o| (built.lp.cols[o.v].cost, built.lp.cols[o.v].lo)).collect();
    let room = lag
        .cap_row
        .iter()
        .zip(&lag.capped)
        .map(|(&r, &pool)| {
            let keep = if pool == 0 { 1.0 - PACKING_SLACK } else { 1.0 };
            lag.rhs[r..r + lag.steps].iter().map(|&limit| limit * keep).collect()
        })
        .collect();
    let mut load = Load {
        lag,
        at: vec![vec![0.0; lag.steps]; lag.cap_row.len()],
        room,
        level: vec![0.0; lag.rhs.len()],
        pair_of,
        overlap,
    };
    for path in &paths {
        load.add(path, 1.0);
    }
    let mut reroutes = REROUTES_PER_TENSOR * paths.len();
    while let Some((excess, k, i)) = load.worst() {
        if Instant::now() >= deadline {
            return None;
        }
        // Every overfilled step of pool k, counted by prefix: a re-routed path avoids
        // them all, so that it never lands on another full step.
        let mut over = vec![0usize; lag.steps + 1];
        for s in 0..lag.steps {
            over[s + 1] = over[s] + usize::from(load.excess(k, s) > OVER);
        }
        let blocked = |c: usize| {
            lag.held[c].is_some_and(|h| h.pool == k && over[h.last + 1] > over[h.first])
                || lag.by_col[c]
                    .iter()
                    .any(|&(j, _)| load.capacity_row(j).is_some_and(|(q, s)| q == k && over[s + 1] > over[s]))
        };
        let mut offers = Vec::new();
        for (t, path) in paths.iter().enumerate() {
            let freed = load.share(path, k, i);
            if freed <= 0.0 {
                continue;
            }
            let mut cols = Vec::new();
            let cost = shortest_path(&built.tensors[t], &|c| if blocked(c) { f64::INFINITY } else { rc[c] }, &mut cols);
            if cost.is_finite() {
                offers.push(((cost - costs[t]).max(0.0) / freed, t, cost, cols));
            }
        }
        offers.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut left = excess;
        for (_, t, cost, cols) in offers {
            if left <= OVER {
                break;
            }
            if reroutes == 0 {
                return None;
            }
            reroutes -= 1;
            left -= load.share(&paths[t], k, i);
            load.add(&paths[t], -1.0);
            load.add(&cols, 1.0);
            paths[t] = cols;
            costs[t] = cost;
        }
        if left > OVER {
            // Nothing left to move out of that step.
            return None;
        }
    }
    Some((load, paths))
}

/// The model's column values for one path per tensor, if they meet every row.
fn values(built: &Built, inst: &Instance, paths: &[Vec<usize>]) -> Option<Vec<f64>> {
    let mut x = vec![0.0; built.lp.cols.len()];
    for &c in paths.iter().flatten() {
        x[c] = 1.0;
    }
    let x = built.values_for(inst, &built.placement_from(inst, &x))?;
    built.fits(&x).then_some(x)
}

/// Passes of `improve` at most: on DenseNet-264 b32 each takes a few tens of ms, and
/// the gains fall off within a handful.
const PASSES: usize = 20;

/// Re-routes one tensor at a time against every other path as it is: the exact
/// marginal cost of each of its columns (its own cost, plus how much it raises each
/// overlap variable, the larger of the kernel's and the copies' level), among the
/// columns that fit beside the other paths in the capped pools. The bound's paths price
/// an overlap as a fixed mix of its kernel and its copies, so many copies land beside
/// one kernel and are not hidden, and the repair leaves DRAM with room at many steps;
/// this undoes both. A path is replaced only when its exact cost falls, so the plan only
/// gets better, pass after pass, until a pass gains nothing or time runs out.
fn improve(load: &mut Load<'_, '_>, paths: &mut [Vec<usize>], deadline: Instant) {
    let lag = load.lag;
    let built = lag.built;
    let mut cost = vec![0.0; built.lp.cols.len()];
    let mut scratch = Vec::new();
    for _ in 0..PASSES {
        let mut gained = 0.0;
        for (t, tv) in built.tensors.iter().enumerate() {
            if tv.loc.is_empty() {
                continue;
            }
            if Instant::now() >= deadline {
                return;
            }
            load.add(&paths[t], -1.0);
            let cols = columns(tv);
            for &c in &cols {
                cost[c] = if load.room_for(c) { load.marginal(c) } else { f64::INFINITY };
            }
            scratch.clear();
            if shortest_path(tv, &|c| cost[c], &mut scratch).is_finite() {
                let (old, new) = (load.exact(&paths[t]), load.exact(&scratch));
                if new < old - 1e-9 {
                    gained += old - new;
                    paths[t] = std::mem::take(&mut scratch);
                }
            }
            load.add(&paths[t], 1.0);
        }
        if gained <= 1e-6 {
            return;
        }
    }
}

/// Every column of one tensor's path choices: its locations and its transitions.
fn columns(tv: &TensorVars) -> Vec<usize> {
    let locs = tv.loc.iter().flatten().flatten().copied();
    let stays = tv.breaks.iter().flat_map(|b| b.stay.iter().flatten().copied());
    let moves = tv.breaks.iter().flat_map(|b| b.sync.iter().chain(&b.async_).map(|e| e.2));
    locs.chain(stays).chain(moves).collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The priced plan without and with the local search, as the model's column values,
    /// and the local search's own account of the improved plan's objective.
    pub(in super::super) fn with_and_without_local_search(
        lag: &Lagrangian<'_>,
        price: &[f64],
        inst: &Instance,
        deadline: Instant,
    ) -> (Option<Vec<f64>>, Option<Vec<f64>>, f64) {
        let (mut load, mut paths) = routed(lag, price, deadline).expect("routed");
        let before = values(lag.built, inst, &paths);
        improve(&mut load, &mut paths, deadline);
        // What the paths cost by the local search's books: the offset, their columns,
        // and every overlap variable at the larger of its two levels.
        let built = lag.built;
        let columns: f64 = paths.iter().flatten().map(|&c| built.lp.cols[c].cost).sum();
        let overlaps: f64 = (0..lag.pairs.len()).map(|p| load.overlap[p].0 * load.overlap_value(p, 0.0, 0.0)).sum();
        let books = built.lp.cols[built.offset_col].cost + columns + overlaps;
        (before, values(built, inst, &paths), books)
    }
}
