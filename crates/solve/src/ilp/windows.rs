//! Fix and optimise: improve a start window by window over the schedule. Each window is
//! a small MIP in which only the locations and transitions that fall inside it are
//! free (plus, for every tensor, the first transition after it, so that a change made
//! inside can be undone); everything else keeps the start's values. Occupancy and
//! overlap variables stay free everywhere, since a change inside a window shifts them
//! further on. Each window's start is the current plan, so no window makes it worse.

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

pub(super) fn polish(built: &Built, inst: &Instance, x: &mut [f64], seconds: f64, window_binaries: usize) -> WindowReport {
    let started = Instant::now();
    let steps = inst.steps().max(1);
    let binaries = built.lp.cols.iter().filter(|c| c.integer).count().max(1);
    let per_step = binaries as f64 / steps as f64;
    let width = ((window_binaries as f64 / per_step) as usize).clamp(16, steps);
    let stride = (width / 2).max(1);
    let sweep: Vec<usize> = (0..steps).step_by(stride).collect();
    let before = built.objective(x);
    let (mut improved, mut windows) = (0, 0);
    // Sweep after sweep (each offset by a quarter window so that window edges move)
    // while a sweep still gains something and time is left.
    for round in 0.. {
        let shift = (round % 2) * stride / 2;
        let sweep_start = built.objective(x);
        for (i, &a) in sweep.iter().enumerate() {
            let left = seconds - started.elapsed().as_secs_f64();
            if left <= 0.5 {
                break;
            }
            // Spread what is left over the rest of this sweep, at most 10 s a window.
            let limit = (left / (sweep.len() - i) as f64).min(10.0);
            let a = (a + shift).min(steps - 1);
            let free = free_columns(built, a, (a + width).min(steps));
            let (cols, rows, map) = restrict(built, x, &free);
            let sub_start: Vec<f64> = map.iter().map(|&c| x[c]).collect();
            let quiet = IlpOptions { verbose: false, log_file: None, ..IlpOptions::default() };
            let current: f64 = map.iter().map(|&c| built.lp.cols[c].cost * x[c]).sum();
            windows += 1;
            if let Ok(Some(r)) = run_guarded(&cols, &rows, Some(sub_start), 1e-6, limit.max(1.0), &quiet)
                && r.objective < current - 1e-9
            {
                for (j, &c) in map.iter().enumerate() {
                    x[c] = r.x[j];
                }
                improved += 1;
            }
        }
        let gained = sweep_start - built.objective(x);
        if seconds - started.elapsed().as_secs_f64() <= 0.5 || gained <= 1e-3 * sweep_start.abs() {
            break;
        }
    }
    WindowReport {
        windows,
        improved,
        before_ns: before * super::NS_PER_UNIT,
        after_ns: built.objective(x) * super::NS_PER_UNIT,
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// Which columns may change for the window `a..b`.
fn free_columns(built: &Built, a: usize, b: usize) -> Vec<bool> {
    let mut free = vec![false; built.lp.cols.len()];
    for cols in built.occupancy.iter().flatten().flatten() {
        free[*cols] = true;
    }
    for v in built.overlap.iter().flatten() {
        free[*v] = true;
    }
    let inside = |s: usize| a <= s && s < b;
    for tv in &built.tensors {
        for (s, cols) in tv.loc.iter().enumerate() {
            if inside(tv.starts[s]) {
                for c in cols.iter().flatten() {
                    free[*c] = true;
                }
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
    free
}

/// The model with every column that is not free fixed at its value in `x`: returns the
/// free columns, the rows that touch one (bounds shifted by the fixed part), and each
/// new column's index in the full model.
fn restrict(built: &Built, x: &[f64], free: &[bool]) -> (Vec<Col>, Vec<Row>, Vec<usize>) {
    let mut index = vec![usize::MAX; free.len()];
    let mut map = Vec::new();
    for (c, &f) in free.iter().enumerate() {
        if f {
            index[c] = map.len();
            map.push(c);
        }
    }
    let cols = map.iter().map(|&c| built.lp.cols[c]).collect();
    let rows = built
        .lp
        .rows
        .iter()
        .filter(|r| r.terms.iter().any(|&(c, _)| free[c]))
        .map(|r| {
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
