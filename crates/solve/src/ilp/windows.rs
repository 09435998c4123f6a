//! Fix and optimise: improve a start window by window over the schedule. Each window is
//! a small MIP in which only the locations and transitions that fall inside it are
//! free (plus, for every tensor, the first transition after it, so that a change made
//! inside can be undone); everything else keeps the start's values. Occupancy and
//! overlap variables are free from the window's start to the end of the last segment
//! it frees, since a change inside shifts them that far. Each window starts from the
//! current plan, so no window makes it worse.

use super::IlpOptions;
use super::build::{Built, Col, Row};
use super::highs::run_guarded;
use crate::instance::Instance;
use serde::{Deserialize, Serialize};
use std::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WindowReport {
    pub windows: usize,
    pub improved: usize,
    /// The objective (ns added to the all-DRAM step) before and after.
    pub before_ns: f64,
    pub after_ns: f64,
    pub seconds: f64,
}

/// How long the windows may run, how big each is, and when the plan is good enough.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(super) seconds: f64,
    pub(super) binaries: usize,
    /// Stop once the objective is at most this.
    pub(super) good_enough: f64,
}

/// How often the windows report progress.
const REPORT_EVERY_SECONDS: f64 = 10.0;

pub(super) fn polish(
    built: &Built,
    inst: &Instance,
    x: &mut [f64],
    limits: &Limits,
    progress: &mut dyn FnMut(&str),
) -> WindowReport {
    let Limits { seconds, binaries: window_binaries, good_enough } = *limits;
    let started = Instant::now();
    let deadline = started + std::time::Duration::from_secs_f64(seconds.max(0.0));
    let steps = inst.steps().max(1);
    let binaries = built.lp.cols.iter().filter(|c| c.integer).count().max(1);
    let per_step = binaries as f64 / steps as f64;
    let width = ((window_binaries as f64 / per_step) as usize).clamp(16, steps);
    let stride = (width / 2).max(1);
    let sweep: Vec<usize> = (0..steps).step_by(stride).collect();
    let before = built.objective(x);
    // Kept up to date window by window rather than summed over every column each time.
    let mut objective = before;
    let rows_of = rows_of_columns(built);
    let (mut improved, mut windows, mut stalled) = (0, 0, 0);
    let mut next_report = REPORT_EVERY_SECONDS;
    // Sweep after sweep (every other one offset by a quarter window, so that window
    // edges move) while sweeps still gain something and time is left.
    for round in 0.. {
        let shift = (round % 2) * stride / 2;
        let sweep_start = objective;
        for (i, &a) in sweep.iter().enumerate() {
            let left = seconds - started.elapsed().as_secs_f64();
            if left <= 0.5 || objective <= good_enough {
                break;
            }
            // Spread what is left over the rest of this sweep, at most 10 s a window.
            let limit = (left / (sweep.len() - i) as f64).min(10.0);
            let a = (a + shift).min(steps - 1);
            let free = free_columns(built, inst, a, (a + width).min(steps));
            let (cols, rows, map) = restrict(built, &rows_of, x, &free);
            let sub_start: Vec<f64> = map.iter().map(|&c| x[c]).collect();
            let quiet = IlpOptions { verbose: false, log_file: None, ..IlpOptions::default() };
            let current: f64 = map.iter().map(|&c| built.lp.cols[c].cost * x[c]).sum();
            windows += 1;
            if started.elapsed().as_secs_f64() >= next_report {
                next_report += REPORT_EVERY_SECONDS;
                progress(&format!(
                    "windows: {windows} solved in {:.0} s (sweep {}), placement cost {:.3} ms, target {:.3} ms",
                    started.elapsed().as_secs_f64(),
                    round + 1,
                    objective * super::NS_PER_UNIT / 1e6,
                    good_enough * super::NS_PER_UNIT / 1e6
                ));
            }
            if let Ok(Some(r)) = run_guarded(&cols, &rows, Some(sub_start), 1e-6, limit.max(1.0), deadline, &quiet)
                && r.objective < current - 1e-9
            {
                for (j, &c) in map.iter().enumerate() {
                    x[c] = r.x[j];
                }
                objective += map.iter().map(|&c| built.lp.cols[c].cost * x[c]).sum::<f64>() - current;
                improved += 1;
            }
        }
        let gained = sweep_start - objective;
        stalled = if gained <= 1e-3 * sweep_start.abs() { stalled + 1 } else { 0 };
        let done = objective <= good_enough;
        // Two sweeps in a row without gain have tried both window offsets: stuck.
        if done || seconds - started.elapsed().as_secs_f64() <= 0.5 || stalled >= 2 {
            break;
        }
    }
    WindowReport {
        windows,
        improved,
        before_ns: before * super::NS_PER_UNIT,
        after_ns: objective * super::NS_PER_UNIT,
        seconds: started.elapsed().as_secs_f64(),
    }
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
