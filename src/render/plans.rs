//! Terminal output for plans that were executed: one plan's facts, the side-by-side
//! comparison, and the kernels whose measured time strays furthest from the prediction.

use crate::table::{Table, bytes};
use placer_eval::{Comparison, Measured};
use placer_ir::Model;
use placer_pools::PoolSet;

fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

/// The budget as a person reads it: plans without one (all-DRAM) say so.
pub fn budget_text(budget: u64) -> String {
    if budget == u64::MAX { "none".into() } else { bytes(budget) }
}

pub fn facts(m: &Measured, pools: &PoolSet) -> Table {
    let mut t = Table::new(&["plan", &m.name]);
    let s = &m.step_ns;
    t.row(vec![
        "step".into(),
        format!(
            "median {}, MAD {}, CV {:.1}%, min {}, max {} ({} timed steps)",
            ms(s.median),
            ms(s.mad),
            100.0 * s.cv,
            ms(s.min),
            ms(s.max),
            s.count
        ),
    ]);
    t.row(vec![
        "predicted".into(),
        format!("{} per step: measured is {:+.1}% off", ms(m.predicted_step_ns), 100.0 * m.prediction_error()),
    ]);
    let r = &m.report;
    t.row(vec![
        "moves".into(),
        format!(
            "{} blocking ({} per step), {} in the background ({} waiting for them per step); {} copied per step",
            r.blocking_moves,
            ms(m.blocking_ns),
            r.background_moves,
            ms(m.copy_wait_ns.iter().sum()),
            bytes(r.bytes_moved)
        ),
    ]);
    for (i, pool) in pools.pools().iter().enumerate() {
        let (reserved, peak) = (r.reserved_bytes[i], r.peak_bytes[i]);
        if reserved == 0 {
            continue;
        }
        let limit = if i == 0 { format!(", budget {}", budget_text(m.budget_bytes)) } else { String::new() };
        t.row(vec![
            format!("pool {}", pool.name),
            format!(
                "{}: arena {} reserved, peak {} in use (measured by the arena){limit}{}{}",
                pool.describe(),
                bytes(reserved),
                bytes(peak),
                r.pages.get(i).map(|tally| super::pages_on(tally, pool.backend.checked_nodes())).unwrap_or_default(),
                match r.huge_page_bytes.get(i).copied().flatten() {
                    // Of the arena itself, which bounds the figure: its whole huge pages
                    // alone can read less, by the tail's page of the mapping's slack.
                    Some(huge) => format!("; {} of it on huge pages", bytes(huge)),
                    None => String::new(),
                }
            ),
        ]);
    }
    if let (Some(first), Some(last)) = (r.losses.first(), r.losses.last()) {
        t.row(vec!["loss".into(), format!("{first:.4} after the first step, {last:.4} after the last")]);
    }
    t.row(vec!["timing".into(), m.timing_note()]);
    t
}

/// The side-by-side table, then the line on the host's pace where A′ ran.
pub fn comparison_text(c: &Comparison) -> String {
    let table = comparison(c).render();
    match &c.anchor {
        Some(anchor) => format!("{table}\n{}\n", anchor.note()),
        None => table,
    }
}

fn comparison(c: &Comparison) -> Table {
    let mut t = Table::new(&[
        "strategy",
        "measured",
        "±MAD",
        "predicted",
        "error",
        "anchored",
        "vs first-touch",
        "vs all-DRAM",
        "DRAM peak",
        "moves",
    ]);
    for r in &c.rows {
        t.row(vec![
            r.name.clone(),
            format!("{:.3} ms", r.measured_ms),
            format!("{:.3}", r.mad_ms),
            format!("{:.3} ms", r.predicted_ms),
            format!("{:+.1}%", 100.0 * r.error),
            r.anchored_error.map_or("-".into(), |e| format!("{:+.1}%", 100.0 * e)),
            r.speedup_vs_first_touch.map_or("-".into(), |x| format!("{x:.2}× faster")),
            r.slowdown_vs_all_dram.map_or("-".into(), |x| format!("{x:.2}×")),
            format!("{} / {}", bytes(r.dram_peak_bytes), budget_text(r.budget_bytes)),
            format!("{} + {}", r.blocking_moves, r.background_moves),
        ]);
    }
    t
}

/// The `top` kernels whose measured time is furthest from the prediction.
pub fn kernels(m: &Measured, model: &Model, top: usize) -> Table {
    let mut t = Table::new(&["step", "node", "op", "predicted µs", "measured µs", "error", "copy wait µs"]);
    let mut order: Vec<usize> = (0..m.kernel_ns.len()).collect();
    let off = |k: usize| (m.kernel_ns[k] - m.predicted_kernel_ns[k]).abs();
    order.sort_by(|&a, &b| off(b).total_cmp(&off(a)));
    for &k in order.iter().take(top) {
        let node = model.node(model.schedule()[k]);
        t.row(vec![
            k.to_string(),
            node.name.clone(),
            node.op.to_string(),
            format!("{:.1}", m.predicted_kernel_ns[k] / 1e3),
            format!("{:.1}", m.kernel_ns[k] / 1e3),
            format!("{:+.1}%", 100.0 * (m.kernel_ns[k] / m.predicted_kernel_ns[k] - 1.0)),
            format!("{:.1}", m.copy_wait_ns[k] / 1e3),
        ]);
    }
    t
}
