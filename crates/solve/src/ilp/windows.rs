//! Fix and optimise: improve a start window by window over the schedule. Each window is
//! a small MIP in which only the locations and transitions that fall inside it are
//! free (plus, for every tensor, the first transition after it, so that a change made
//! inside can be undone); everything else keeps the start's values. Occupancy and
//! overlap variables are free from the window's start to the end of the last segment
//! it frees, since a change inside shifts them that far. Each window starts from the
//! current plan, so no window makes it worse.
//!
//! Windows are solved one per core at once, a sweep's share apart. A window is solved
//! against the plan as it was when it began; when another was committed in the meantime,
//! its rows are checked against the plan as it is now before its values are written
//! (the rows it does not touch keep their terms, so the plan stays feasible). If they no
//! longer hold, it is solved once more against the plan as it is then, and dropped if
//! that attempt is overtaken too: 0-5% of DenseNet-264's windows and 5-13% of
//! ResNet-200's were.

use super::IlpOptions;
use super::build::{Built, Col, Row};
use super::highs::run_guarded;
use crate::instance::Instance;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError, mpsc};
use std::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WindowReport {
    pub windows: usize,
    pub improved: usize,
    /// The objective (ns added to the all-DRAM step) before and after.
    pub before_ns: f64,
    pub after_ns: f64,
    pub seconds: f64,
    /// Windows solved at once (one per core, at most a few).
    #[serde(default = "one")]
    pub workers: usize,
    /// Windows whose result was dropped: a window solved at the same time changed a row
    /// they share, and the result no longer fitted, twice (a window is solved again
    /// once). Each attempt counts in `windows`.
    #[serde(default)]
    pub conflicts: usize,
}

fn one() -> usize {
    1
}

/// How long the windows may run, how big each is, and when the plan is good enough.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(super) seconds: f64,
    pub(super) binaries: usize,
    /// Stop once the objective is at most this.
    pub(super) good_enough: f64,
    /// Windows solved at once; `None`: one per core.
    pub(super) workers: Option<usize>,
    /// The solve's absolute gap (model units): what the windows may leave on the table
    /// is a share of it.
    pub(super) gap: f64,
}

/// How often the windows report progress.
const REPORT_EVERY_SECONDS: f64 = 10.0;

/// Window solves at once, at most: each runs HiGHS on its own thread.
fn workers_for(limits: &Limits) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    limits.workers.unwrap_or(cores).clamp(1, MAX_WORKERS)
}

/// More workers than this gain little: windows solved at once are a sweep's share apart,
/// and the closer they are, the more often one's change voids the other's.
const MAX_WORKERS: usize = 4;

/// The plan being improved, shared by the workers.
struct Current<'x> {
    x: &'x mut [f64],
    objective: f64,
    /// Windows committed so far: a window solved since the last commit it saw needs
    /// its rows checked against the plan as it is now.
    commits: usize,
    improved: usize,
    conflicts: usize,
    windows: usize,
    /// Windows solved in a row without a gain.
    idle: usize,
}

impl Current<'_> {
    /// The last `STALLED_AFTER` windows in a row gained nothing: the start is as good
    /// as windows of this size make it, and the time left is the bound's.
    fn stalled(&self) -> bool {
        self.idle >= STALLED_AFTER
    }
}

/// Windows in a row without a gain after which the windows stop. From the bound's
/// priced start on DenseNet-264 b32, 0-1 of 82-89 windows gained anything in a 20 s
/// solve; the bound, given that time, proves a smaller gap.
const STALLED_AFTER: usize = 12;

pub(super) fn polish(
    built: &Built,
    inst: &Instance,
    x: &mut [f64],
    limits: &Limits,
    progress: &mut dyn FnMut(&str),
) -> WindowReport {
    let Limits { seconds, binaries: window_binaries, good_enough, gap, .. } = *limits;
    let workers = workers_for(limits);
    let started = Instant::now();
    let deadline = started + std::time::Duration::from_secs_f64(seconds.max(0.0));
    let steps = inst.steps().max(1);
    let binaries = built.lp.cols.iter().filter(|c| c.integer).count().max(1);
    let per_step = binaries as f64 / steps as f64;
    let width = ((window_binaries as f64 / per_step) as usize).clamp(16, steps);
    let stride = (width / 2).max(1);
    let before = built.objective(x);
    let rows_of = rows_of_columns(built);
    let current =
        Mutex::new(Current { x, objective: before, commits: 0, improved: 0, conflicts: 0, windows: 0, idle: 0 });
    let mut stalled = 0;
    let mut next_report = REPORT_EVERY_SECONDS;
    let left = || seconds - started.elapsed().as_secs_f64();
    // Sweep after sweep (every other one offset by a quarter window, so that window
    // edges move) while sweeps still gain something and time is left.
    for round in 0.. {
        let shift = (round % 2) * stride / 2;
        let sweep: Vec<(usize, usize)> = (shift..steps).step_by(stride).map(|a| (a, (a + width).min(steps))).collect();
        // Each window may stop this far from its own optimum: over a whole sweep, at most
        // a quarter of the solve's gap. Proving each window optimal bought nothing
        // measurable on DenseNet-264 and costs time.
        let window_gap = (gap / (4 * sweep.len().max(1)) as f64).max(1e-6);
        let order = interleaved(sweep.len(), workers);
        let sweep_start = lock(&current).objective;
        let claimed = AtomicUsize::new(0);
        let (tx, rx) = mpsc::channel::<()>();
        std::thread::scope(|scope| {
            for _ in 0..workers {
                let tx = tx.clone();
                let (current, claimed, order, sweep, rows_of) = (&current, &claimed, &order, &sweep, &rows_of);
                scope.spawn(move || {
                    loop {
                        let i = claimed.fetch_add(1, Ordering::Relaxed);
                        let remaining = order.len().saturating_sub(i);
                        let done = {
                            let c = lock(current);
                            c.objective <= good_enough || c.stalled()
                        };
                        if remaining == 0 || left() <= 0.5 || done {
                            break;
                        }
                        // Spread what is left over the rest of this sweep, at most 10 s a window.
                        let limit = (left() * workers as f64 / remaining as f64).min(10.0);
                        let (a, b) = sweep[order[i]];
                        let free = free_columns(built, inst, a, b);
                        solve_window(built, rows_of, current, &free, window_gap, limit, deadline);
                        let _ = tx.send(());
                    }
                });
            }
            drop(tx);
            // Progress is reported from here: the caller's callback stays on its thread.
            while rx.recv().is_ok() {
                if started.elapsed().as_secs_f64() >= next_report {
                    next_report += REPORT_EVERY_SECONDS;
                    let c = lock(&current);
                    progress(&format!(
                        "windows: {} solved in {:.0} s (sweep {}, {workers} at a time), placement cost {:.3} ms, target {:.3} ms",
                        c.windows,
                        started.elapsed().as_secs_f64(),
                        round + 1,
                        c.objective * super::NS_PER_UNIT / 1e6,
                        good_enough * super::NS_PER_UNIT / 1e6
                    ));
                }
            }
        });
        let objective = lock(&current).objective;
        let gained = sweep_start - objective;
        stalled = if gained <= 1e-3 * sweep_start.abs() { stalled + 1 } else { 0 };
        // Two sweeps in a row without gain have tried both window offsets: stuck.
        if objective <= good_enough || left() <= 0.5 || stalled >= 2 || lock(&current).stalled() {
            break;
        }
    }
    let c = current.into_inner().unwrap_or_else(PoisonError::into_inner);
    WindowReport {
        windows: c.windows,
        improved: c.improved,
        before_ns: before * super::NS_PER_UNIT,
        after_ns: c.objective * super::NS_PER_UNIT,
        seconds: started.elapsed().as_secs_f64(),
        workers,
        conflicts: c.conflicts,
    }
}

/// Solves one window against the plan as it is now and commits what it gains. When
/// another window was committed meanwhile, the rows this one touches are checked against
/// the plan as it has become: every other row keeps its terms, so the plan stays
/// feasible. A window that no longer fits is solved once more against the plan as it is
/// then, and dropped (a conflict) if that one is overtaken too.
fn solve_window(
    built: &Built,
    rows_of: &[Vec<u32>],
    current: &Mutex<Current<'_>>,
    free: &[bool],
    gap: f64,
    limit: f64,
    deadline: Instant,
) {
    let quiet = IlpOptions { verbose: false, log_file: None, ..IlpOptions::default() };
    for attempt in 0..2 {
        let (cols, rows, map, sub_start, seen) = {
            let c = lock(current);
            let (cols, rows, map) = restrict(built, rows_of, c.x, free);
            let sub_start: Vec<f64> = map.iter().map(|&j| c.x[j]).collect();
            (cols, rows, map, sub_start, c.commits)
        };
        let solved = run_guarded(&cols, &rows, Some(sub_start), gap, limit.max(1.0), deadline, &quiet);
        let mut c = lock(current);
        c.windows += 1;
        c.idle += 1;
        let Ok(Some(r)) = solved else { return };
        let gain: f64 = map.iter().zip(&r.x).map(|(&j, &v)| built.lp.cols[j].cost * (c.x[j] - v)).sum();
        if gain <= 1e-9 {
            return;
        }
        let old: Vec<f64> = map.iter().map(|&j| c.x[j]).collect();
        for (&j, &v) in map.iter().zip(&r.x) {
            c.x[j] = v;
        }
        if c.commits == seen || rows_hold(built, rows_of, c.x, &map) {
            c.objective -= gain;
            c.commits += 1;
            c.improved += 1;
            c.idle = 0;
            return;
        }
        for (&j, &v) in map.iter().zip(&old) {
            c.x[j] = v;
        }
        if attempt == 1 || Instant::now() >= deadline {
            c.conflicts += 1;
            return;
        }
    }
}

/// Whether every row that touches one of `cols` holds at `x`.
fn rows_hold(built: &Built, rows_of: &[Vec<u32>], x: &[f64], cols: &[usize]) -> bool {
    let mut rows: Vec<u32> = cols.iter().flat_map(|&c| rows_of[c].iter().copied()).collect();
    rows.sort_unstable();
    rows.dedup();
    rows.iter().all(|&r| built.row_holds(r as usize, x))
}

/// The order in which `workers` claim `n` windows: consecutive claims a sweep's
/// `1/workers` apart, so that windows solved at once rarely share a row, while each
/// worker still walks its own stretch of the schedule in order.
fn interleaved(n: usize, workers: usize) -> Vec<usize> {
    let per = n.div_ceil(workers.max(1));
    (0..per).flat_map(|j| (0..workers).map(move |w| w * per + j)).filter(|&i| i < n).collect()
}

fn lock<'a, 'x>(m: &'a Mutex<Current<'x>>) -> std::sync::MutexGuard<'a, Current<'x>> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Which columns may change for the window `a..b`.
fn free_columns(built: &Built, inst: &Instance, a: usize, b: usize) -> Vec<bool> {
    let mut free = vec![false; built.lp.cols.len()];
    let inside = |s: usize| a <= s && s < b;
    // The last step a change made here can reach: the end of a free segment.
    let mut extent = b.min(inst.steps()).saturating_sub(1);
    for (t, tv) in built.tensors.iter().enumerate() {
        for (s, cols) in tv.loc.iter().enumerate() {
            if inside(tv.starts[s]) {
                for c in cols.iter().flatten() {
                    free[*c] = true;
                }
                extent = extent.max(tv.segment_end(s, inst.tensors[t].last));
            }
        }
        let mut after = false;
        for br in &tv.breaks {
            let take = inside(br.at) || (br.at >= b && !after);
            after |= br.at >= b;
            if take {
                for c in br.stay.iter().flatten() {
                    free[*c] = true;
                }
                for &(_, _, c) in br.sync.iter().chain(&br.async_) {
                    free[c] = true;
                }
            }
        }
    }
    // Occupancy and overlap variables from the window to the extent follow the change.
    for cols in &built.occupancy {
        for c in cols[a.min(cols.len())..(extent + 1).min(cols.len())].iter().flatten() {
            free[*c] = true;
        }
    }
    for v in built.overlap[a.min(built.overlap.len())..(extent + 1).min(built.overlap.len())].iter().flatten() {
        free[*v] = true;
    }
    free
}

/// The model with every column that is not free fixed at its value in `x`: returns the
/// free columns, the rows that touch one (bounds shifted by the fixed part), and each
/// new column's index in the full model.
fn restrict(built: &Built, rows_of: &[Vec<u32>], x: &[f64], free: &[bool]) -> (Vec<Col>, Vec<Row>, Vec<usize>) {
    let mut index = vec![usize::MAX; free.len()];
    let mut map = Vec::new();
    for (c, &f) in free.iter().enumerate() {
        if f {
            index[c] = map.len();
            map.push(c);
        }
    }
    let mut touched: Vec<u32> = map.iter().flat_map(|&c| rows_of[c].iter().copied()).collect();
    touched.sort_unstable();
    touched.dedup();
    let cols = map.iter().map(|&c| built.lp.cols[c]).collect();
    let rows = touched
        .iter()
        .map(|&r| {
            let r = &built.lp.rows[r as usize];
            let fixed: f64 = r.terms.iter().filter(|&&(c, _)| !free[c]).map(|&(c, a)| a * x[c]).sum();
            Row {
                terms: r.terms.iter().filter(|&&(c, _)| free[c]).map(|&(c, a)| (index[c], a)).collect(),
                lo: r.lo - fixed,
                hi: r.hi - fixed,
            }
        })
        .collect();
    (cols, rows, map)
}

/// For every column, the rows it appears in.
fn rows_of_columns(built: &Built) -> Vec<Vec<u32>> {
    let mut rows_of = vec![Vec::new(); built.lp.cols.len()];
    for (r, row) in built.lp.rows.iter().enumerate() {
        for &(c, _) in &row.terms {
            rows_of[c].push(r as u32);
        }
    }
    rows_of
}

#[cfg(test)]
mod tests {
    use super::interleaved;

    #[test]
    fn workers_claim_every_window_once_a_sweep_share_apart() {
        for (n, workers) in [(0, 2), (1, 2), (7, 2), (8, 3), (10, 4), (5, 1)] {
            let order = interleaved(n, workers);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "n {n}, workers {workers}: {order:?}");
        }
        assert_eq!(interleaved(7, 2), vec![0, 4, 1, 5, 2, 6, 3]);
        assert_eq!(interleaved(5, 1), vec![0, 1, 2, 3, 4]);
    }
}
