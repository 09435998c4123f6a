//! The formulation as plain columns and rows, with the bookkeeping to write a placement
//! as column values (a warm start) and to read one back.

use super::{Formulation, IlpOptions, ModelSize};
use crate::instance::Instance;
use crate::placement::{Move, MoveKind, Placement};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy)]
pub(super) struct Col {
    pub(super) lo: f64,
    pub(super) hi: f64,
    pub(super) integer: bool,
    pub(super) cost: f64,
}

#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) terms: Vec<(usize, f64)>,
    pub(super) lo: f64,
    pub(super) hi: f64,
}

#[derive(Debug, Default)]
pub(super) struct Lp {
    pub(super) cols: Vec<Col>,
    pub(super) rows: Vec<Row>,
}

impl Lp {
    fn col(&mut self, lo: f64, hi: f64, integer: bool, cost: f64) -> usize {
        self.cols.push(Col { lo, hi, integer, cost });
        self.cols.len() - 1
    }

    fn row(&mut self, terms: Vec<(usize, f64)>, lo: f64, hi: f64) {
        self.rows.push(Row { terms, lo, hi });
    }
}

/// Transitions across one break in a tensor's live range.
#[derive(Debug, Clone)]
pub(super) struct Break {
    /// The tensor is in the new segment from this step (`steps` for the wrap-around).
    pub(super) at: usize,
    pub(super) from_seg: usize,
    pub(super) to_seg: usize,
    pub(super) stay: Vec<Option<usize>>,
    pub(super) sync: Vec<(u16, u16, usize)>,
    pub(super) async_: Vec<(u16, u16, usize)>,
}

#[derive(Debug, Clone)]
pub(super) struct TensorVars {
    /// First step of each segment.
    pub(super) starts: Vec<usize>,
    /// `loc[segment][pool]`; empty for a pinned tensor.
    pub(super) loc: Vec<Vec<Option<usize>>>,
    pub(super) breaks: Vec<Break>,
}

impl TensorVars {
    /// The last step of segment `s`, for a tensor live until `last`.
    pub(super) fn segment_end(&self, s: usize, last: usize) -> usize {
        self.starts.get(s + 1).map_or(last, |&next| next - 1)
    }

    pub(super) fn segment_at(&self, step: usize) -> usize {
        self.starts.partition_point(|&s| s <= step).saturating_sub(1)
    }
}

pub(super) struct Built {
    pub(super) lp: Lp,
    pub(super) tensors: Vec<TensorVars>,
    /// Per step: the max(kernel, copies) variable of kernels that copies may overlap.
    pub(super) overlap: Vec<Option<usize>>,
    /// (column, floor) of every overlap variable: the least it can be.
    pub(super) overlap_floor: Vec<(usize, f64)>,
    /// Per overlap variable: its column, and the indices of its kernel row (v ≥ the
    /// kernel, slowed by its copies) and its copy row (v ≥ the copies).
    pub(super) overlap_rows: Vec<OverlapRows>,
    /// Per step: (column, µs, µs of kernel slowdown) of every copy that may overlap the kernel.
    pub(super) copies_during: Vec<Vec<(usize, f64, f64)>>,
    /// `occupancy[pool][step]` for capped pools.
    pub(super) occupancy: Vec<Vec<Option<usize>>>,
    pub(super) offset_col: usize,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct OverlapRows {
    pub(super) v: usize,
    pub(super) kernel: usize,
    pub(super) copies: usize,
}

/// How far past a bound `b` a value may lie and still meet it.
fn tolerance(b: f64) -> f64 {
    1e-6 * (1.0 + b.abs())
}

pub(super) const NS_PER_UNIT: f64 = 1e3; // the model works in µs
/// Capacity rows count MiB, not bytes: with bytes their coefficients reached 10⁸ against
/// costs near 1, and HiGHS's LP on some windows stalled for tens of seconds past its
/// time limit.
pub(super) const BYTES_PER_UNIT: f64 = (1u64 << 20) as f64;

fn break_steps(inst: &Instance, t: usize, opts: &IlpOptions, long: &[bool]) -> BTreeMap<usize, (bool, bool)> {
    let info = &inst.tensors[t];
    let mut out = BTreeMap::new();
    if opts.formulation == Formulation::Static || info.pinned.is_some() || info.bytes < opts.small_tensor_bytes {
        return out;
    }
    let inside = |b: usize| b > info.first && b <= info.last;
    // A copy beside a kernel that could hide only a sliver of it is dominated by a
    // blocking move: leave that cut out.
    let cheapest =
        inst.pools.move_ns_per_byte.iter().flatten().copied().filter(|&c| c > 0.0).fold(f64::INFINITY, f64::min);
    let copy_ns = info.bytes as f64 * cheapest;
    let copy_ok = |b: usize| {
        opts.formulation == Formulation::Async
            && long[b - 1]
            && inst.kernels[b - 1].cost.base_ns >= opts.min_hidden_share * copy_ns
            && info.writes.binary_search(&(b - 1)).is_err()
    };
    for &u in &info.uses {
        for b in [u, u + 1] {
            if inside(b) {
                out.insert(b, (true, copy_ok(b)));
            }
        }
        if opts.formulation == Formulation::Async {
            let w = opts.async_window;
            for b in (u.saturating_sub(w)..u).chain(u + 2..=u + 1 + w) {
                if inside(b) && copy_ok(b) {
                    out.entry(b).or_insert((false, true));
                }
            }
        }
    }
    out
}

fn long_kernels(inst: &Instance, share: f64) -> Vec<bool> {
    let mut bases: Vec<f64> = inst.kernels.iter().map(|k| k.cost.base_ns).collect();
    bases.sort_by(f64::total_cmp);
    let keep = ((bases.len() as f64) * share.clamp(0.0, 1.0)).round() as usize;
    let threshold = if keep == 0 { f64::INFINITY } else { bases[bases.len() - keep] };
    inst.kernels.iter().map(|k| k.cost.base_ns >= threshold).collect()
}

pub(super) fn build(inst: &Instance, opts: &IlpOptions) -> Built {
    let steps = inst.steps();
    let pools = inst.pools.len();
    let long = long_kernels(inst, opts.async_kernel_share);
    let mut lp = Lp::default();
    let offset_col = lp.col(1.0, 1.0, false, 0.0);
    let mut offset = 0.0;
    let mut tensors = Vec::with_capacity(inst.tensors.len());
    for (t, info) in inst.tensors.iter().enumerate() {
        let breaks = break_steps(inst, t, opts, &long);
        let mut starts = vec![info.first];
        starts.extend(breaks.keys().copied());
        let allowed: Vec<u16> = (0..pools as u16).filter(|&p| inst.allowed(t, p)).collect();
        let loc: Vec<Vec<Option<usize>>> = if info.pinned.is_some() {
            Vec::new()
        } else {
            starts
                .iter()
                .map(|_| {
                    let cols: Vec<Option<usize>> =
                        (0..pools as u16).map(|p| allowed.contains(&p).then(|| lp.col(0.0, 1.0, true, 0.0))).collect();
                    let terms: Vec<(usize, f64)> = cols.iter().flatten().map(|&c| (c, 1.0)).collect();
                    lp.row(terms, 1.0, 1.0);
                    cols
                })
                .collect()
        };
        let mut tv = TensorVars { starts, loc, breaks: Vec::new() };
        let mut spec: Vec<(usize, usize, usize, bool, bool)> =
            breaks.iter().enumerate().map(|(i, (&at, &(sync, copy)))| (at, i, i + 1, sync, copy)).collect();
        if info.persistent && !breaks.is_empty() {
            spec.push((steps, breaks.len(), 0, true, false));
        }
        for (at, from_seg, to_seg, sync, copy) in spec {
            let mut br = Break { at, from_seg, to_seg, stay: vec![None; pools], sync: Vec::new(), async_: Vec::new() };
            for &p in &allowed {
                br.stay[p as usize] = Some(lp.col(0.0, 1.0, false, 0.0));
                for &q in allowed.iter().filter(|&&q| q != p) {
                    let bytes = info.bytes as f64;
                    let cost = bytes * inst.pools.move_ns_per_byte[p as usize][q as usize] / NS_PER_UNIT;
                    if sync {
                        br.sync.push((p, q, lp.col(0.0, 1.0, false, cost)));
                    }
                    if copy {
                        // Binary: with both kinds on offer, a fractional split would
                        // count only part of an in-flight copy against capacity.
                        br.async_.push((p, q, lp.col(0.0, 1.0, true, 0.0)));
                    }
                }
            }
            // Flow conservation: what leaves the old segment's pool is what arrives in
            // the new segment's pool.
            for &p in &allowed {
                let (Some(from), Some(to), Some(stay)) =
                    (tv.loc[from_seg][p as usize], tv.loc[to_seg][p as usize], br.stay[p as usize])
                else {
                    continue;
                };
                let mut out = vec![(from, -1.0), (stay, 1.0)];
                let mut inn = vec![(to, -1.0), (stay, 1.0)];
                for &(a, b, c) in br.sync.iter().chain(&br.async_) {
                    if a == p {
                        out.push((c, 1.0));
                    }
                    if b == p {
                        inn.push((c, 1.0));
                    }
                }
                lp.row(out, 0.0, 0.0);
                lp.row(inn, 0.0, 0.0);
            }
            tv.breaks.push(br);
        }
        tensors.push(tv);
    }

    // Kernels: base + Σ δ·loc; where copies may overlap, v ≥ that and v ≥ Σ copies.
    // Per step: (column, copy µs, µs the copy costs the kernel beside it).
    let mut copies_during: Vec<Vec<(usize, f64, f64)>> = vec![Vec::new(); steps];
    for (t, tv) in tensors.iter().enumerate() {
        for br in &tv.breaks {
            for &(p, q, c) in &br.async_ {
                let bytes = inst.tensors[t].bytes as f64;
                let ns = bytes * inst.pools.move_ns_per_byte[p as usize][q as usize];
                let cpu_ns = bytes * inst.pools.copy_cpu_ns_per_byte[p as usize][q as usize];
                let slowdown = inst.kernels[br.at - 1].cost.copy_loss_ns(cpu_ns);
                copies_during[br.at - 1].push((c, ns / NS_PER_UNIT, slowdown / NS_PER_UNIT));
            }
        }
    }
    let mut overlap = vec![None; steps];
    let mut overlap_floor = Vec::new();
    let mut overlap_rows = Vec::new();
    for (i, k) in inst.kernels.iter().enumerate() {
        let mut constant = k.cost.base_ns / NS_PER_UNIT;
        let mut terms: Vec<(usize, f64)> = Vec::new();
        for (o, &t) in k.operands.iter().enumerate() {
            let delta = &k.cost.delta_ns[o];
            match inst.tensors[t].pinned {
                Some(p) => constant += delta[p as usize] / NS_PER_UNIT,
                None => {
                    let seg = tensors[t].segment_at(i);
                    for (p, col) in tensors[t].loc[seg].iter().enumerate() {
                        if let Some(c) = col
                            && delta[p] != 0.0
                        {
                            terms.push((*c, delta[p] / NS_PER_UNIT));
                        }
                    }
                }
            }
        }
        // The objective leaves out every kernel's base (its all-DRAM time): what is
        // left is what the placement adds, so the solver's relative gap is measured
        // against that, not diluted by time no placement can change.
        let base = k.cost.base_ns / NS_PER_UNIT;
        if copies_during[i].is_empty() {
            offset += constant - base;
            for (c, a) in terms {
                lp.cols[c].cost += a;
            }
        } else {
            // v can never be below the kernel's constant part plus its cheapest terms.
            // Kept for the box bound, not as the column's bound: as a bound it slowed
            // HiGHS's window solves several times over on DenseNet-264.
            let floor = constant + terms.iter().map(|&(_, a)| a.min(0.0)).sum::<f64>();
            let v = lp.col(0.0, f64::INFINITY, false, 1.0);
            overlap_floor.push((v, floor));
            // The kernel, slowed by the copies beside it; and the copies themselves.
            let mut kernel_row: Vec<(usize, f64)> = terms.iter().map(|&(c, a)| (c, -a)).collect();
            kernel_row.extend(copies_during[i].iter().map(|&(c, _, slowdown)| (c, -slowdown)));
            kernel_row.push((v, 1.0));
            let kernel = lp.rows.len();
            lp.row(kernel_row, constant, f64::INFINITY);
            let mut copy_row: Vec<(usize, f64)> = copies_during[i].iter().map(|&(c, a, _)| (c, -a)).collect();
            copy_row.push((v, 1.0));
            overlap_rows.push(OverlapRows { v, kernel, copies: lp.rows.len() });
            lp.row(copy_row, 0.0, f64::INFINITY);
            offset -= base;
            overlap[i] = Some(v);
        }
    }
    lp.cols[offset_col].cost = offset;

    // Capacity: occupancy[p][i] = occupancy[p][i-1] + what arrives in p at i - what
    // leaves; bounded by the capacity minus what is fixed there (scratch, pinned).
    let mut occupancy = vec![vec![None; steps]; pools];
    for (p, occupancy_of_p) in occupancy.iter_mut().enumerate() {
        let mut fixed = vec![0i128; steps + 1];
        let mut possible = vec![0i128; steps + 1];
        for (t, info) in inst.tensors.iter().enumerate() {
            let target = match info.pinned {
                Some(q) if q as usize == p => &mut fixed,
                Some(_) => continue,
                None if inst.allowed(t, p as u16) => &mut possible,
                None => continue,
            };
            target[info.first] += i128::from(info.bytes);
            target[info.last + 1] -= i128::from(info.bytes);
        }
        if p == 0 {
            for (i, k) in inst.kernels.iter().enumerate() {
                fixed[i] += i128::from(k.scratch_bytes);
                fixed[i + 1] -= i128::from(k.scratch_bytes);
            }
        }
        let cap = i128::from(inst.capacity[p]);
        let (mut f, mut m) = (0i128, 0i128);
        let mut room = vec![0i128; steps];
        let mut capped = false;
        for i in 0..steps {
            f += fixed[i];
            m += possible[i];
            room[i] = cap - f;
            capped |= m > room[i];
        }
        if !capped {
            continue;
        }
        let mut events: Vec<Vec<(usize, f64)>> = vec![Vec::new(); steps + 1];
        let mut arriving: Vec<Vec<(usize, f64)>> = vec![Vec::new(); steps];
        for (t, info) in inst.tensors.iter().enumerate() {
            let tv = &tensors[t];
            if tv.loc.is_empty() {
                continue;
            }
            let bytes = info.bytes as f64 / BYTES_PER_UNIT;
            let Some(first) = tv.loc[0][p] else { continue };
            events[info.first].push((first, bytes));
            if let Some(last) = tv.loc[tv.loc.len() - 1][p] {
                events[info.last + 1].push((last, -bytes));
            }
            for br in tv.breaks.iter().filter(|b| b.at < steps) {
                if let (Some(a), Some(b)) = (tv.loc[br.from_seg][p], tv.loc[br.to_seg][p]) {
                    events[br.at].push((b, bytes));
                    events[br.at].push((a, -bytes));
                }
                for &(_, q, c) in &br.async_ {
                    if q as usize == p {
                        arriving[br.at - 1].push((c, bytes));
                    }
                }
            }
        }
        let mut prev: Option<usize> = None;
        for i in 0..steps {
            let hi = room[i].max(0) as f64 / BYTES_PER_UNIT;
            let occ = lp.col(0.0, hi, false, 0.0);
            let mut row: Vec<(usize, f64)> = events[i].iter().map(|&(c, b)| (c, -b)).collect();
            row.push((occ, 1.0));
            if let Some(prev) = prev {
                row.push((prev, -1.0));
            }
            lp.row(row, 0.0, 0.0);
            if !arriving[i].is_empty() {
                let mut row = arriving[i].clone();
                row.push((occ, 1.0));
                lp.row(row, f64::NEG_INFINITY, hi);
            }
            occupancy_of_p[i] = Some(occ);
            prev = Some(occ);
        }
    }
    Built { lp, tensors, overlap, overlap_floor, overlap_rows, copies_during, occupancy, offset_col }
}

impl Built {
    /// Σ cost·x: the objective at column values `x`.
    pub(super) fn objective(&self, x: &[f64]) -> f64 {
        self.lp.cols.iter().zip(x).map(|(c, v)| c.cost * v).sum()
    }

    /// The objective's floor over the columns' bounds alone (Σ cost × the bound it
    /// prefers, overlap variables at their floor), when that is finite.
    pub(super) fn trivial_bound(&self) -> Option<f64> {
        let mut lo: Vec<f64> = self.lp.cols.iter().map(|c| c.lo).collect();
        for &(v, floor) in &self.overlap_floor {
            lo[v] = lo[v].max(floor);
        }
        let bound: f64 =
            self.lp.cols.iter().zip(&lo).map(|(c, &l)| c.cost * if c.cost >= 0.0 { l } else { c.hi }).sum();
        bound.is_finite().then_some(bound)
    }

    /// Whether row `r` holds at `x`, within a tolerance a little looser than HiGHS's own.
    pub(super) fn row_holds(&self, r: usize, x: &[f64]) -> bool {
        let row = &self.lp.rows[r];
        let value: f64 = row.terms.iter().map(|&(c, a)| a * x[c]).sum();
        value >= row.lo - tolerance(row.lo) && value <= row.hi + tolerance(row.hi)
    }

    /// Whether `x` meets every row and every column's bounds.
    pub(super) fn fits(&self, x: &[f64]) -> bool {
        let cols = self.lp.cols.iter().zip(x).all(|(c, &v)| v >= c.lo - tolerance(c.lo) && v <= c.hi + tolerance(c.hi));
        cols && (0..self.lp.rows.len()).all(|r| self.row_holds(r, x))
    }

    pub(super) fn size(&self) -> ModelSize {
        ModelSize {
            variables: self.lp.cols.len(),
            binaries: self.lp.cols.iter().filter(|c| c.integer).count(),
            constraints: self.lp.rows.len(),
            nonzeros: self.lp.rows.iter().map(|r| r.terms.len()).sum(),
        }
    }

    /// Column values for `placement`, or None when this model cannot represent it (a
    /// move where the model has no break, or of a kind it does not offer there).
    pub(super) fn values_for(&self, inst: &Instance, placement: &Placement) -> Option<Vec<f64>> {
        let mut x = vec![0.0; self.lp.cols.len()];
        x[self.offset_col] = 1.0;
        let mut moves: BTreeMap<(usize, usize), &Move> = BTreeMap::new();
        for m in &placement.moves {
            moves.insert((m.tensor, m.at), m);
        }
        let mut used_moves = 0;
        for (t, tv) in self.tensors.iter().enumerate() {
            let pool_of_seg = |s: usize| placement.pool_at(t, tv.starts[s]);
            if tv.loc.is_empty() {
                if placement.spans[t].len() != 1 || Some(placement.spans[t][0].1) != inst.tensors[t].pinned {
                    return None;
                }
                continue;
            }
            // Every change of pool must fall on a break.
            for w in placement.spans[t].windows(2) {
                tv.starts.binary_search(&w[1].0).ok()?;
            }
            for (s, cols) in tv.loc.iter().enumerate() {
                x[cols[pool_of_seg(s) as usize]?] = 1.0;
            }
            for br in &tv.breaks {
                let (a, b) = (pool_of_seg(br.from_seg), pool_of_seg(br.to_seg));
                if a == b {
                    x[br.stay[a as usize]?] = 1.0;
                    continue;
                }
                let m = moves.get(&(t, br.at))?;
                used_moves += 1;
                let find = |list: &[(u16, u16, usize)]| list.iter().find(|&&(p, q, _)| p == a && q == b).map(|e| e.2);
                let col = match m.kind {
                    MoveKind::Sync => find(&br.sync),
                    MoveKind::Async => find(&br.async_),
                }?;
                x[col] = 1.0;
            }
        }
        if used_moves != placement.moves.len() {
            return None;
        }
        for (i, v) in self.overlap.iter().enumerate() {
            if let Some(v) = v {
                let copies: f64 = self.copies_during[i].iter().map(|&(c, a, _)| a * x[c]).sum();
                let slowdown: f64 = self.copies_during[i].iter().map(|&(c, _, s)| s * x[c]).sum();
                x[*v] = (self.kernel_units(inst, &x, i) + slowdown).max(copies);
            }
        }
        let steps = inst.steps();
        for (p, cols) in self.occupancy.iter().enumerate() {
            if cols.iter().all(Option::is_none) {
                continue;
            }
            let mut delta = vec![0.0; steps + 1];
            for (t, info) in inst.tensors.iter().enumerate().filter(|(_, i)| i.pinned.is_none()) {
                let spans = &placement.spans[t];
                for (j, &(from, pool)) in spans.iter().enumerate() {
                    if pool as usize == p {
                        let to = spans.get(j + 1).map_or(info.last + 1, |s| s.0);
                        delta[from] += info.bytes as f64 / BYTES_PER_UNIT;
                        delta[to] -= info.bytes as f64 / BYTES_PER_UNIT;
                    }
                }
            }
            let mut running = 0.0;
            for (i, c) in cols.iter().enumerate() {
                running += delta[i];
                if let Some(c) = c {
                    x[*c] = running;
                }
            }
        }
        Some(x)
    }

    /// The kernel's cost (µs) under column values `x`.
    fn kernel_units(&self, inst: &Instance, x: &[f64], step: usize) -> f64 {
        let k = &inst.kernels[step];
        let mut total = k.cost.base_ns;
        for (o, &t) in k.operands.iter().enumerate() {
            let pool = match inst.tensors[t].pinned {
                Some(p) => p as usize,
                None => {
                    let seg = self.tensors[t].segment_at(step);
                    self.tensors[t].loc[seg].iter().position(|c| c.is_some_and(|c| x[c] > 0.5)).unwrap_or(0)
                }
            };
            total += k.cost.delta_ns[o][pool];
        }
        total / NS_PER_UNIT
    }

    pub(super) fn placement_from(&self, inst: &Instance, x: &[f64]) -> Placement {
        let steps = inst.steps();
        let mut spans = Vec::with_capacity(inst.tensors.len());
        let mut moves = Vec::new();
        for (t, tv) in self.tensors.iter().enumerate() {
            if tv.loc.is_empty() {
                spans.push(vec![(inst.tensors[t].first, inst.tensors[t].pinned.unwrap_or(0))]);
                continue;
            }
            let pool_of = |s: usize| -> u16 {
                tv.loc[s]
                    .iter()
                    .enumerate()
                    .filter_map(|(p, c)| c.map(|c| (p, x[c])))
                    .max_by(|a, b| a.1.total_cmp(&b.1))
                    .map_or(0, |(p, _)| p as u16)
            };
            let mut list: Vec<(usize, u16)> = Vec::new();
            for (s, &start) in tv.starts.iter().enumerate() {
                let p = pool_of(s);
                if list.last().is_none_or(|&(_, q)| q != p) {
                    list.push((start, p));
                }
            }
            for br in &tv.breaks {
                let (a, b) = (pool_of(br.from_seg), pool_of(br.to_seg));
                if a == b {
                    continue;
                }
                let copy: f64 = br.async_.iter().filter(|e| e.0 == a && e.1 == b).map(|e| x[e.2]).sum();
                let sync: f64 = br.sync.iter().filter(|e| e.0 == a && e.1 == b).map(|e| x[e.2]).sum();
                let kind = if copy > sync { MoveKind::Async } else { MoveKind::Sync };
                moves.push(Move { tensor: t, from: a, to: b, at: br.at.min(steps), kind });
            }
            spans.push(list);
        }
        Placement { spans, moves }
    }
}
