//! What `placer run` reports, computed from a [`RunReport`]: step time, the slowest
//! kernels, and achieved GFLOP/s per op kind.

use crate::{ClockInfo, EmulatedPoolUse, RunReport, Stats};
use placer_ir::Model;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub model: String,
    pub content_hash: String,
    pub warmup: usize,
    pub iterations: usize,
    pub clock: ClockInfo,
    /// Wall time of a step, in ms.
    pub step_ms: Stats,
    /// Wall time of every timed step, in ms, in order (for pooling across runs).
    pub steps_ms: Vec<f64>,
    /// Sum of kernel times of a step, in ms (the rest of the wall time is the executor).
    pub kernels_ms: Stats,
    /// The shortest median kernel time, in µs: compare with the clock's resolution.
    pub shortest_kernel_us: f64,
    /// Kernels whose median is under 100 times the clock's cost or resolution (whichever
    /// is larger): their times carry at least 1% timer error.
    pub kernels_near_clock: usize,
    pub near_clock_threshold_us: f64,
    pub slowest: Vec<KernelRow>,
    pub by_op: Vec<OpRow>,
    pub first_loss: Option<f32>,
    pub last_loss: Option<f32>,
    pub pool_peaks: Vec<(String, u64)>,
    pub scratch_bytes: u64,
    /// True when any tensor was in an emulated pool: the times are then emulated, not
    /// measured on the device the pool stands for.
    pub emulated: bool,
    pub emulated_pools: Vec<EmulatedPoolUse>,
    /// Per step, ms spent waiting for emulated pools.
    pub emulated_wait_ms: Stats,
}

#[derive(Debug, Clone, Serialize)]
pub struct KernelRow {
    pub node: String,
    pub op: &'static str,
    pub phase: &'static str,
    pub median_us: f64,
    pub mad_us: f64,
    /// Share of the median step's kernel time.
    pub share: f64,
    pub gflops_per_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct OpRow {
    pub op: &'static str,
    pub nodes: usize,
    /// Sum over the op's nodes of their median times, in ms.
    pub median_ms: f64,
    pub share: f64,
    pub gflop: f64,
    pub gflops_per_s: f64,
}

impl RunSummary {
    pub fn new(model: &Model, report: &RunReport, top: usize) -> Option<RunSummary> {
        let schedule = model.schedule();
        let per_node: Vec<Stats> = (0..schedule.len())
            .map(|i| Stats::of(&report.steps.iter().map(|s| s.kernel_ns[i]).collect::<Vec<_>>()))
            .collect::<Option<_>>()?;
        let step_ms = Stats::of(&report.steps.iter().map(|s| s.wall_ns / 1e6).collect::<Vec<_>>())?;
        let kernels_ms =
            Stats::of(&report.steps.iter().map(|s| s.kernel_ns.iter().sum::<f64>() / 1e6).collect::<Vec<_>>())?;
        let total_ns: f64 = per_node.iter().map(|s| s.median).sum::<f64>().max(1.0);
        let gflops = |flops: u64, ns: f64| if ns > 0.0 { flops as f64 / ns } else { 0.0 };
        let flops: Vec<u64> = schedule.iter().map(|&n| model.cost(n).flops).collect();

        let mut rows: Vec<KernelRow> = schedule
            .iter()
            .zip(&per_node)
            .zip(&flops)
            .map(|((&n, s), &f)| KernelRow {
                node: model.node(n).name.clone(),
                op: model.node(n).op.as_str(),
                phase: model.phase(n).as_str(),
                median_us: s.median / 1e3,
                mad_us: s.mad / 1e3,
                share: s.median / total_ns,
                gflops_per_s: gflops(f, s.median),
            })
            .collect();
        let shortest_kernel_us = rows.iter().map(|r| r.median_us).fold(f64::INFINITY, f64::min);
        let near_clock_threshold_us = 100.0 * report.clock.resolution_ns.max(report.clock.overhead_ns) / 1e3;
        let kernels_near_clock = rows.iter().filter(|r| r.median_us < near_clock_threshold_us).count();
        rows.sort_by(|a, b| b.median_us.total_cmp(&a.median_us));
        rows.truncate(top);

        let mut ops: BTreeMap<&'static str, (usize, f64, u64)> = BTreeMap::new();
        for ((&n, s), &f) in schedule.iter().zip(&per_node).zip(&flops) {
            let e = ops.entry(model.node(n).op.as_str()).or_default();
            e.0 += 1;
            e.1 += s.median;
            e.2 += f;
        }
        let mut by_op: Vec<OpRow> = ops
            .into_iter()
            .map(|(op, (nodes, ns, flops))| OpRow {
                op,
                nodes,
                median_ms: ns / 1e6,
                share: ns / total_ns,
                gflop: flops as f64 / 1e9,
                gflops_per_s: gflops(flops, ns),
            })
            .collect();
        by_op.sort_by(|a, b| b.median_ms.total_cmp(&a.median_ms));
        Some(RunSummary {
            model: model.name().to_string(),
            content_hash: model.content_hash(),
            warmup: report.warmup,
            iterations: report.steps.len(),
            clock: report.clock,
            step_ms,
            steps_ms: report.steps.iter().map(|s| s.wall_ns / 1e6).collect(),
            kernels_ms,
            shortest_kernel_us,
            kernels_near_clock,
            near_clock_threshold_us,
            slowest: rows,
            by_op,
            first_loss: report.losses.first().copied(),
            last_loss: report.losses.last().copied(),
            pool_peaks: report.pool_peaks.clone(),
            scratch_bytes: report.scratch_bytes,
            emulated: !report.emulated.is_empty(),
            emulated_pools: report.emulated.clone(),
            emulated_wait_ms: Stats::of(&report.steps.iter().map(|s| s.emulated_wait_ns / 1e6).collect::<Vec<_>>())?,
        })
    }
}
