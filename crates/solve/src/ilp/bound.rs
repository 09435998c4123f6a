//! A Lagrangian lower bound on the placement cost, tighter than the box bound.
//!
//! The box bound prices every kernel at its all-DRAM time and every copy as hidden: it
//! ignores the capacity, so on a large async model it is close to zero and the gap on
//! "what the placement adds" reads 100% whatever the plan. Here the rows that couple
//! tensors are moved into the objective with prices instead:
//!
//! - DRAM's capacity at each step (`occupancy + copies arriving ≤ room`), price ≥ 0;
//! - each overlap variable's two rows (`v ≥ kernel + slowdowns`, `v ≥ copies`), prices
//!   μ and 1 - μ (the variable costs 1: prices summing to 1 leave it out of the minimum).
//!
//! What is left falls apart by tensor: a path through its segments, choosing a pool per
//! segment and a transition at each break, which a small dynamic program solves
//! exactly. For any prices the sum of those minima, minus the prices times the rows'
//! right-hand sides, is at most the cost of every plan that meets the rows (weak
//! duality), so every iterate is a bound and the best one is kept. Prices follow
//! projected subgradient steps (Polyak's rule against the best plan known). The best this
//! can reach is the LP relaxation's bound, reached in milliseconds per step rather than
//! by a simplex on hundreds of thousands of rows.

// Capacity rows are in MiB (`BYTES_PER_UNIT`), as in the model: their subgradients are
// then of the same order as the overlap rows' (µs), and one step size serves both.
use super::build::{BYTES_PER_UNIT, Built};
use crate::instance::Instance;
use std::time::Instant;

/// The bound, and what it took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Bound {
    /// In model units (µs), comparable to `Built::objective`.
    pub(super) value: f64,
    pub(super) iterations: usize,
    pub(super) seconds: f64,
}

/// A tensor's capacity footprint: bytes held in capped pool `pool` over `first..=last`.
#[derive(Clone, Copy)]
pub(super) struct Held {
    pub(super) pool: usize,
    pub(super) first: usize,
    pub(super) last: usize,
    pub(super) bytes: f64,
}

pub(super) struct Lagrangian<'a> {
    pub(super) built: &'a Built,
    /// Each relaxed row's right-hand side: `Σ coef·x ≤ rhs`, its columns listed in `by_col`.
    pub(super) rhs: Vec<f64>,
    /// Per column: (relaxed row, coefficient).
    pub(super) by_col: Vec<Vec<(u32, f64)>>,
    /// Per column: what it holds against a capped pool, when it is a location there.
    pub(super) held: Vec<Option<Held>>,
    /// Per capped pool, in order: `cap_row[k] + step` is the relaxed row of its step;
    /// the pools' blocks of rows follow each other.
    pub(super) cap_row: Vec<usize>,
    /// Per capped pool, in the same order: its index among the pools.
    pub(super) capped: Vec<usize>,
    /// The overlap rows as (kernel row, copy row) pairs of relaxed rows, priced μ and
    /// 1 - μ.
    pub(super) pairs: Vec<(usize, usize)>,
    pub(super) steps: usize,
    /// The part of the objective no tensor decides (the offset column).
    constant: f64,
}

impl<'a> Lagrangian<'a> {
    fn new(built: &'a Built, inst: &Instance) -> Self {
        let steps = inst.steps();
        let ncols = built.lp.cols.len();
        let mut rhs = Vec::new();
        let mut by_col: Vec<Vec<(u32, f64)>> = vec![Vec::new(); ncols];
        let mut pairs = Vec::new();
        for o in &built.overlap_rows {
            // The model's rows read `v - Σ a·x ≥ lo`; relaxed they read `Σ a·x - v ≤ -lo`,
            // and v (reduced cost 1 - μ - ν ≥ 0) sits at 0 in every minimiser.
            let mut pair = [0; 2];
            for (k, &r) in [o.kernel, o.copies].iter().enumerate() {
                let row = &built.lp.rows[r];
                let j = rhs.len();
                rhs.push(-row.lo);
                for &(c, a) in row.terms.iter().filter(|&&(c, _)| c != o.v) {
                    by_col[c].push((j as u32, -a));
                }
                pair[k] = j;
            }
            pairs.push((pair[0], pair[1]));
        }
        let mut capped = Vec::new();
        let mut cap_row = Vec::new();
        for (p, cols) in built.occupancy.iter().enumerate() {
            if cols.iter().all(Option::is_none) {
                continue;
            }
            capped.push(p);
            cap_row.push(rhs.len());
            rhs.extend(cols.iter().map(|c| c.map_or(f64::INFINITY, |c| built.lp.cols[c].hi)));
        }
        let mut held = vec![None; ncols];
        for (t, tv) in built.tensors.iter().enumerate() {
            let info = &inst.tensors[t];
            let bytes = info.bytes as f64 / BYTES_PER_UNIT;
            for (s, cols) in tv.loc.iter().enumerate() {
                for (k, &p) in capped.iter().enumerate() {
                    if let Some(c) = cols[p] {
                        held[c] =
                            Some(Held { pool: k, first: tv.starts[s], last: tv.segment_end(s, info.last), bytes });
                    }
                }
            }
            // A background copy holds its destination while it runs, beside the kernel
            // before the break.
            for br in tv.breaks.iter().filter(|b| b.at < steps) {
                for &(_, q, c) in &br.async_ {
                    if let Some(k) = capped.iter().position(|&p| p == q as usize) {
                        by_col[c].push(((cap_row[k] + br.at - 1) as u32, bytes));
                    }
                }
            }
        }
        let constant = built.lp.cols[built.offset_col].cost;
        Lagrangian { built, rhs, by_col, held, cap_row, capped, pairs, steps, constant }
    }

    /// Per capped pool, prefix sums of the step prices, so that a location column's
    /// share of the capacity rows costs one subtraction.
    fn prefix(&self, price: &[f64]) -> Vec<Vec<f64>> {
        self.cap_row
            .iter()
            .map(|&r| {
                let mut acc = vec![0.0; self.steps + 1];
                for i in 0..self.steps {
                    acc[i + 1] = acc[i] + price[r + i];
                }
                acc
            })
            .collect()
    }

    /// Column `c`'s cost with the relaxed rows priced at `price` (`prefix` from it).
    fn reduced(&self, c: usize, price: &[f64], prefix: &[Vec<f64>]) -> f64 {
        let mut rc = self.built.lp.cols[c].cost;
        for &(j, a) in &self.by_col[c] {
            rc += price[j as usize] * a;
        }
        if let Some(h) = self.held[c] {
            rc += h.bytes * (prefix[h.pool][h.last + 1] - prefix[h.pool][h.first]);
        }
        rc
    }

    /// Every column's reduced cost at `price`.
    pub(super) fn reduced_costs(&self, price: &[f64]) -> Vec<f64> {
        let prefix = self.prefix(price);
        (0..self.built.lp.cols.len()).map(|c| self.reduced(c, price, &prefix)).collect()
    }

    /// The Lagrangian's value at `price`, and a subgradient (each relaxed row's
    /// left-hand side minus its right-hand side at the minimiser).
    fn evaluate(&self, price: &[f64], grad: &mut [f64]) -> f64 {
        let steps = self.steps;
        let prefix = self.prefix(price);
        let reduced = |c: usize| self.reduced(c, price, &prefix);
        let mut value = self.constant;
        for (&p, &r) in price.iter().zip(&self.rhs) {
            if p != 0.0 {
                value -= p * r;
            }
        }
        for (g, &r) in grad.iter_mut().zip(&self.rhs) {
            *g = -r;
        }
        // The tensors' paths are independent: both cores take a share, each with its own
        // sums, added afterwards in a fixed order (the result does not depend on timing).
        let tensors = &self.built.tensors;
        let half = tensors.len().div_ceil(2);
        let part = |range: std::ops::Range<usize>| {
            let mut value = 0.0;
            let mut grad = vec![0.0; self.rhs.len()];
            let mut held_delta: Vec<Vec<f64>> = vec![vec![0.0; steps + 1]; self.cap_row.len()];
            let mut chosen = Vec::new();
            for tv in tensors[range].iter().filter(|tv| !tv.loc.is_empty()) {
                chosen.clear();
                value += shortest_path(tv, &reduced, &mut chosen);
                for &c in &chosen {
                    for &(j, a) in &self.by_col[c] {
                        grad[j as usize] += a;
                    }
                    if let Some(h) = self.held[c] {
                        held_delta[h.pool][h.first] += h.bytes;
                        held_delta[h.pool][h.last + 1] -= h.bytes;
                    }
                }
            }
            (value, grad, held_delta)
        };
        let (first, second) = std::thread::scope(|scope| {
            let second = scope.spawn(|| part(half..tensors.len()));
            let first = part(0..half);
            (first, second.join())
        });
        let second = second.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let mut held_delta = first.2;
        for (mine, theirs) in held_delta.iter_mut().zip(&second.2) {
            for (a, b) in mine.iter_mut().zip(theirs) {
                *a += b;
            }
        }
        value += first.0 + second.0;
        for ((g, a), b) in grad.iter_mut().zip(&first.1).zip(&second.1) {
            *g += a + b;
        }
        for (k, delta) in held_delta.iter().enumerate() {
            let mut running = 0.0;
            for (i, d) in delta.iter().take(steps).enumerate() {
                running += d;
                grad[self.cap_row[k] + i] += running;
            }
        }
        value
    }

    /// Moves the prices `step` along the subgradient, back into their domain: capacity
    /// prices non-negative; each overlap pair as one μ in [0, 1] with ν = 1 - μ, moved by
    /// the difference of its two rows (the variable v, priced 1 - μ - ν = 0, drops out).
    fn step(&self, price: &mut [f64], grad: &[f64], step: f64) {
        for &r in &self.cap_row {
            for i in r..r + self.steps {
                price[i] = (price[i] + step * grad[i]).max(0.0);
            }
        }
        for &(a, b) in &self.pairs {
            let mu = (price[a] + step * (grad[a] - grad[b])).clamp(0.0, 1.0);
            price[a] = mu;
            price[b] = 1.0 - mu;
        }
    }

    /// The squared length of the step direction, counting only what the domain leaves
    /// open.
    fn norm(&self, price: &[f64], grad: &[f64]) -> f64 {
        let mut n = 0.0;
        for &r in &self.cap_row {
            for i in r..r + self.steps {
                if grad[i] > 0.0 || price[i] > 0.0 {
                    n += grad[i] * grad[i];
                }
            }
        }
        for &(a, b) in &self.pairs {
            let d = grad[a] - grad[b];
            if (d > 0.0 && price[a] < 1.0) || (d < 0.0 && price[a] > 0.0) {
                n += d * d;
            }
        }
        n
    }
}

/// The cheapest path for one tensor under reduced costs: a pool per segment, and at each
/// break the stay or the cheapest move between them. Pushes the columns it takes onto
/// `chosen`; returns the path's cost. A weight whose last segment wraps back to its first
/// closes the cycle, so each first pool is tried in turn.
pub(super) fn shortest_path(
    tv: &super::build::TensorVars,
    reduced: &dyn Fn(usize) -> f64,
    chosen: &mut Vec<usize>,
) -> f64 {
    let segs = tv.loc.len();
    let pools = tv.loc[0].len();
    let node = |s: usize, p: usize| tv.loc[s][p].map(reduced);
    // The cheapest column for going from p to q across a break.
    let edge = |br: &super::build::Break, p: usize, q: usize| -> Option<(f64, usize)> {
        if p == q {
            return br.stay[p].map(|c| (reduced(c), c));
        }
        br.sync
            .iter()
            .chain(&br.async_)
            .filter(|e| e.0 as usize == p && e.1 as usize == q)
            .map(|e| (reduced(e.2), e.2))
            .min_by(|a, b| a.0.total_cmp(&b.0))
    };
    let forward: Vec<&super::build::Break> = tv.breaks.iter().filter(|b| b.to_seg == b.from_seg + 1).collect();
    let wrap = tv.breaks.iter().find(|b| b.to_seg == 0 && b.from_seg + 1 == segs);
    let starts: Vec<Option<usize>> = if wrap.is_some() { (0..pools).map(Some).collect() } else { vec![None] };
    let mut best: Option<(f64, Vec<usize>)> = None;
    for fixed in starts {
        // cost[p] of the cheapest path to segment s in pool p; back[(s - 1) · pools + p] =
        // (prev pool, edge col). Flat and reused: this runs for every tensor at every
        // step of the bound, and per-segment vectors were a good part of its time.
        let mut cost: Vec<f64> = (0..pools)
            .map(|p| if fixed.is_some_and(|f| f != p) { f64::INFINITY } else { node(0, p).unwrap_or(f64::INFINITY) })
            .collect();
        let mut next = vec![f64::INFINITY; pools];
        let mut back = vec![(usize::MAX, usize::MAX); forward.len() * pools];
        for (s, br) in forward.iter().enumerate() {
            next.fill(f64::INFINITY);
            let from = &mut back[s * pools..(s + 1) * pools];
            for q in 0..pools {
                let Some(n) = node(s + 1, q) else { continue };
                for (p, &before) in cost.iter().enumerate().filter(|(_, c)| c.is_finite()) {
                    if let Some((e, c)) = edge(br, p, q)
                        && before + e + n < next[q]
                    {
                        next[q] = before + e + n;
                        from[q] = (p, c);
                    }
                }
            }
            std::mem::swap(&mut cost, &mut next);
        }
        let mut end = (f64::INFINITY, usize::MAX, None);
        for (p, &c) in cost.iter().enumerate() {
            let close = match (wrap, fixed) {
                (Some(w), Some(f)) => edge(w, p, f),
                _ => Some((0.0, usize::MAX)),
            };
            if let Some((e, col)) = close
                && c + e < end.0
            {
                end = (c + e, p, (col != usize::MAX).then_some(col));
            }
        }
        if !end.0.is_finite() || best.as_ref().is_some_and(|b| b.0 <= end.0) {
            continue;
        }
        let mut cols: Vec<usize> = end.2.into_iter().collect();
        let mut p = end.1;
        for s in (0..segs).rev() {
            cols.extend(tv.loc[s][p]);
            if s > 0 {
                let (prev, c) = back[(s - 1) * pools + p];
                cols.push(c);
                p = prev;
            }
        }
        best = Some((end.0, cols));
    }
    match best {
        Some((cost, cols)) => {
            chosen.extend(cols);
            cost
        }
        // No path at all: the tensor cannot be placed, and neither can anything else.
        None => f64::INFINITY,
    }
}

const PATIENCE: usize = 50;

/// The subgradient search, resumable: the windows improve the plan between two runs,
/// and a better plan aims the steps better.
pub(super) struct BoundSearch<'a> {
    lag: Lagrangian<'a>,
    price: Vec<f64>,
    /// The prices of the best bound so far: a plan built from them (`priced.rs`) starts
    /// close to what the bound says is possible.
    best_price: Vec<f64>,
    grad: Vec<f64>,
    best: f64,
    theta: f64,
    since_best: usize,
    iterations: usize,
    seconds: f64,
    /// The objective the last run aimed at.
    upper: f64,
}

impl<'a> BoundSearch<'a> {
    pub(super) fn new(built: &'a Built, inst: &Instance) -> Self {
        let lag = Lagrangian::new(built, inst);
        let n = lag.rhs.len();
        let mut price = vec![0.0; n];
        // Overlap pairs start with the kernel's row priced in full: the bound begins at
        // "kernels at their cheapest, copies free", which is about the box bound.
        for &(a, b) in &lag.pairs {
            price[a] = 1.0;
            price[b] = 0.0;
        }
        BoundSearch {
            lag,
            best_price: price.clone(),
            price,
            grad: vec![0.0; n],
            best: f64::NEG_INFINITY,
            theta: 2.0,
            since_best: 0,
            iterations: 0,
            seconds: 0.0,
            upper: f64::INFINITY,
        }
    }

    /// Steps until `deadline`, `max_iterations` more evaluations, or the bound is within
    /// `close_enough` of `upper` (the objective of the best plan known); returns the best
    /// bound so far.
    pub(super) fn run(&mut self, upper: f64, close_enough: f64, deadline: Instant, max_iterations: usize) -> Bound {
        let started = Instant::now();
        // A better plan moves Polyak's target: the step size starts afresh.
        if upper < self.upper {
            self.theta = self.theta.max(1.0);
            self.since_best = 0;
        }
        self.upper = upper;
        let stop = self.iterations.saturating_add(max_iterations);
        // One evaluation (tens of milliseconds on the largest graphs) is always made: any
        // bound is better than none.
        let first = self.iterations;
        while self.iterations < stop && (Instant::now() < deadline || self.iterations == first) && self.theta >= 1e-4 {
            if upper - self.best <= close_enough {
                break;
            }
            self.iterations += 1;
            let value = self.lag.evaluate(&self.price, &mut self.grad);
            if self.best == f64::NEG_INFINITY || value > self.best + 1e-9 * self.best.abs().max(1.0) {
                self.best = value;
                self.since_best = 0;
                self.best_price.copy_from_slice(&self.price);
            } else {
                // Polyak's step, halved after PATIENCE evaluations without a better bound.
                self.since_best += 1;
                if self.since_best >= PATIENCE {
                    self.theta /= 2.0;
                    self.since_best = 0;
                }
            }
            let norm = self.lag.norm(&self.price, &self.grad);
            if norm <= 0.0 {
                break;
            }
            let step = self.theta * (upper - value).max(1e-6 * upper.abs().max(1.0)) / norm;
            self.lag.step(&mut self.price, &self.grad, step);
        }
        self.seconds += started.elapsed().as_secs_f64();
        Bound { value: self.best, iterations: self.iterations, seconds: self.seconds }
    }

    /// The relaxation and the prices of its best bound so far, for `priced::plan`.
    pub(super) fn best_prices(&self) -> (&Lagrangian<'a>, &[f64]) {
        (&self.lag, &self.best_price)
    }
}

#[cfg(test)]
mod tests {
    use super::super::build::build;
    use super::super::highs::run_guarded;
    use super::super::{Formulation, IlpOptions};
    use super::*;
    use crate::cost::Costs;
    use crate::pools::{PoolFigures, SolvePools};
    use std::time::Duration;

    fn pools() -> SolvePools {
        let pool = |name: &str, read: f64, write: f64| PoolFigures {
            name: name.into(),
            kind: placer_pools::PoolKind::parse(name).expect("a pool kind"),
            capacity: 64 << 30,
            emulated_as: None,
            read_gbps: read,
            write_gbps: write,
            source: "test".into(),
        };
        SolvePools {
            pools: vec![pool("dram", 30.0, 25.0), pool("pmem", 10.0, 4.0)],
            move_ns_per_byte: vec![vec![0.0, 1.0 / 3.5], vec![1.0 / 9.0, 0.0]],
            moves_measured: true,
            copy_cpu_ns_per_byte: vec![vec![0.05; 2]; 2],
            memcpy_source: "test".into(),
        }
    }

    /// The bound against HiGHS's proven optimum on small models: never above it, and
    /// above the box bound wherever the budget forces a cost. It prints the figures
    /// docs/BENCHMARKS.md records (run with `--nocapture`).
    #[test]
    #[allow(clippy::print_stderr)]
    fn the_lagrangian_bound_never_exceeds_the_optimum_and_beats_the_box_bound_and_its_prices_make_a_plan() {
        for (name, batch, share, formulation) in [
            ("lenet-mnist", 8, 0.25, Formulation::Static),
            ("lenet-mnist", 8, 0.25, Formulation::Sync),
            ("lenet-mnist", 8, 0.25, Formulation::Async),
            ("mlp", 8, 0.3, Formulation::Async),
            ("bert-tiny", 2, 0.3, Formulation::Async),
        ] {
            let model = placer_zoo::build(name, batch).expect("zoo model");
            let costs = Costs::new(&model, &pools(), &[]);
            let unlimited = Instance::new(&model, &costs, pools(), u64::MAX, &[]);
            let budget = (unlimited.peak_bytes as f64 * share) as u64;
            let inst = Instance::new(&model, &costs, pools(), budget, &[]);
            let opts = IlpOptions { formulation, gap: 0.0, small_tensor_bytes: 0, ..IlpOptions::default() };
            let built = build(&inst, &opts);
            let optimum = run_guarded(
                &built.lp.cols,
                &built.lp.rows,
                None,
                1e-9,
                60.0,
                Instant::now() + Duration::from_secs(120),
                &opts,
            )
            .expect("solved")
            .expect("in time");
            let proven = (optimum.objective - optimum.bound) / optimum.objective.abs().max(1e-9);
            assert!(proven <= 1e-3, "{name} {formulation:?}: {}", optimum.status);
            let deadline = Instant::now() + Duration::from_secs(20);
            let bound = BoundSearch::new(&built, &inst).run(optimum.objective, 0.0, deadline, 10_000);
            let boxed = built.trivial_bound().expect("finite");
            let slack = 1e-6 * optimum.objective.abs().max(1.0);
            eprintln!(
                "{name} {formulation:?}: box {boxed:.3}, Lagrangian {:.3} ({} iterations), HiGHS bound {:.3}, optimum {:.3}",
                bound.value, bound.iterations, optimum.bound, optimum.objective
            );
            assert!(
                bound.value <= optimum.objective + slack,
                "{name} {formulation:?}: {bound:?} above {optimum:.3}",
                optimum = optimum.objective
            );
            assert!(
                bound.value > boxed + slack,
                "{name} {formulation:?}: {bound:?} no better than the box bound {boxed}"
            );
            // The plan from the bound's prices meets every row, and so can be no better
            // than the optimum.
            let mut search = BoundSearch::new(&built, &inst);
            search.run(optimum.objective, 0.0, deadline, 200);
            let (lag, price) = search.best_prices();
            let priced = super::super::priced::plan(lag, price, &inst, deadline).expect("a priced plan that fits");
            assert!(built.fits(&priced), "{name} {formulation:?}: the priced plan breaks a row");
            let cost = built.objective(&priced);
            assert!(cost >= optimum.objective - slack, "{name} {formulation:?}: {cost} below the optimum");
            // The local search improves, and its books agree with the model's.
            let (before, after, books) =
                super::super::priced::tests::with_and_without_local_search(lag, price, &inst, deadline);
            let (before, after) = (built.objective(&before.expect("fits")), built.objective(&after.expect("fits")));
            eprintln!("{name} {formulation:?}: priced plan {before:.3}, after the local search {after:.3}");
            // On each of these five models the bound's paths leave something to gain.
            assert!(after < before - slack, "{name} {formulation:?}: the local search gained nothing");
            assert!(
                (books - after).abs() <= slack,
                "{name} {formulation:?}: books {books} against the model's {after}"
            );
            assert!((after - cost).abs() <= slack, "{name} {formulation:?}: {after} against plan()'s {cost}");
        }
    }
}
