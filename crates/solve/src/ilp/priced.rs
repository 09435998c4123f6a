//! A plan from the Lagrangian bound's prices (a Lagrangian heuristic; Fisher, "The
//! Lagrangian relaxation method for solving integer programming problems", Management
//! Science 27(1), 1981).
//!
//! At the prices of its best bound, each tensor's cheapest path (`bound::shortest_path`,
//! what the bound itself sums) is a placement the bound rates as good; only the relaxed
//! capacity rows may be broken, and near the bound's best prices they are broken at few
//! steps, by little. The repair takes the most overfilled step, re-routes the tensors
//! that hold the pool there around every overfilled step of that pool, cheapest per MiB
//! freed first, until the step fits, and repeats. The result goes through the model's
//! own `placement_from` and `values_for`, and is returned only if every row holds.
//!
//! Why: on DenseNet-264 the windows start from the sync stage's plan (or greedy's) and
//! spend most of a short time limit walking it towards what the bound already knows;
//! this start is built in a fraction of that time.

use super::bound::{Lagrangian, shortest_path};
use crate::instance::Instance;
use std::time::Instant;

/// Capacity rows are in MiB: a step over by less than this fits.
const OVER: f64 = 1e-6;

/// Tensors re-routed at most, as a multiple of the tensors: the repair stops (and no plan
/// is returned) rather than chase its own moves.
const REROUTES_PER_TENSOR: usize = 4;

/// What the chosen paths hold in each capped pool at each step (MiB).
struct Load<'l, 'a> {
    lag: &'l Lagrangian<'a>,
    at: Vec<Vec<f64>>,
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
                if let Some((k, i)) = self.capacity_row(j) {
                    self.at[k][i] += sign * a;
                }
            }
        }
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

    fn excess(&self, k: usize, i: usize) -> f64 {
        self.at[k][i] - self.lag.rhs[self.lag.cap_row[k] + i]
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
    let mut load = Load { lag, at: vec![vec![0.0; lag.steps]; lag.cap_row.len()] };
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
    let mut x = vec![0.0; built.lp.cols.len()];
    for &c in paths.iter().flatten() {
        x[c] = 1.0;
    }
    let x = built.values_for(inst, &built.placement_from(inst, &x))?;
    built.fits(&x).then_some(x)
}
