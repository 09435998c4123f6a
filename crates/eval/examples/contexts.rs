//! Where profile-time and run-time kernel times part, one variable at a time, side by
//! side: the same plan's kernels timed in three contexts, their steps interleaved
//! (A, B, C, A, B, C, ...):
//!
//! - A, the plan executor as `placer run --plan` runs it (threads may park between
//!   kernels; every tensor at its planned offset in an arena);
//! - B, the same with every pool thread woken before each kernel, as the profiler does
//!   (A against B: thread wake-up);
//! - C, the resident executor the profiler's whole steps use, threads woken, every
//!   tensor in its own buffer (B against C: arena against resident buffers);
//!
//! and A′, a second executor exactly like A: A against A′ is the noise floor. All beside
//! the plan's own prediction (the profile). Every tensor must be where the plan
//! puts it at the start, so use a plan with no moves: all-DRAM (`placer solve MODEL
//! --budget 100%`) or a static one.
//! `cargo run --release -p placer-eval --example contexts -- MODEL.json PLAN.json [STEPS]`

#![allow(clippy::print_stdout)] // a command-line tool: printing is its output

use placer_exec::{Executor, PlanExecutor, PoolAssignment, Stats};
use placer_host::{Host, HostOptions};
use placer_pools::PoolId;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (model_path, plan_path) = match (args.get(1), args.get(2)) {
        (Some(m), Some(p)) => (m, p),
        _ => return Err("usage: contexts MODEL.json PLAN.json [STEPS]".into()),
    };
    let steps: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(21);
    let model = placer_ir::load_model(std::path::Path::new(model_path))?;
    let plan: placer_solve::Plan = serde_json::from_str(&std::fs::read_to_string(plan_path)?)?;
    if !plan.moves.is_empty() {
        return Err("the plan moves tensors; the resident executor cannot follow it: use a plan with no moves".into());
    }
    let mut host = Host::open(&HostOptions::default())?;
    let pools = |host: &mut Host| host.pool_set();
    let exec_plan = |pools: &placer_pools::PoolSet| placer_solve::exec_plan(&plan, &model, pools);
    let p = pools(&mut host)?;
    let plan_a = exec_plan(&p)?;
    let mut a = PlanExecutor::new(&model, p, plan_a, 7)?;
    let p = pools(&mut host)?;
    let plan_a2 = exec_plan(&p)?;
    let mut a2 = PlanExecutor::new(&model, p, plan_a2, 7)?;
    let p = pools(&mut host)?;
    let plan_b = exec_plan(&p)?;
    let mut b = PlanExecutor::new(&model, p, plan_b, 7)?;
    b.set_warm_pool(true);
    // The resident executor places each tensor in the pool the plan starts it in.
    let p = pools(&mut host)?;
    let mut placement = PoolAssignment::all_in(&model, PoolId(0));
    for (t, tensor) in plan.tensors.iter().enumerate() {
        if let Some(first) = tensor.placement.first() {
            placement.0[t] = p.find(&first.pool)?;
        }
    }
    let mut c = Executor::new(&model, p, &placement, 7)?;
    c.set_warm_pool(true);
    for _ in 0..2 {
        a.step()?;
        a2.step()?;
        b.step()?;
        c.step()?;
    }
    let n = model.schedule().len();
    let mut times: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); n]; 4];
    let mut walls: Vec<Vec<f64>> = vec![Vec::new(); 4];
    for _ in 0..steps {
        let ta = a.step()?;
        let tb = b.step()?;
        let tc = c.step()?;
        let ta2 = a2.step()?;
        let all = [
            (ta.kernel_ns, ta.wall_ns),
            (tb.kernel_ns, tb.wall_ns),
            (tc.kernel_ns, tc.wall_ns),
            (ta2.kernel_ns, ta2.wall_ns),
        ];
        for (ctx, (kernels, wall)) in all.into_iter().enumerate() {
            for (k, ns) in kernels.into_iter().enumerate() {
                times[ctx][k].push(ns);
            }
            walls[ctx].push(wall);
        }
    }
    let median = |v: &[f64]| Stats::of(v).map_or(f64::NAN, |s| s.median);
    println!(
        "{} ({steps} interleaved steps each; ms; A: run, B: run with threads woken, C: resident buffers)",
        plan.strategy
    );
    println!("| kernel | predicted | A run | B woken | C resident | A/A′ (floor) | A/B | B/C | A/predicted |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut sums = [0.0f64; 5];
    let mut rows = Vec::new();
    for (k, kernel) in plan.kernels.iter().enumerate() {
        let (ka, kb, kc, ka2) =
            (median(&times[0][k]), median(&times[1][k]), median(&times[2][k]), median(&times[3][k]));
        for (s, v) in sums.iter_mut().zip([kernel.time_ns, ka, kb, kc, ka2]) {
            *s += v;
        }
        rows.push(((ka - kernel.time_ns).abs(), kernel.node.clone(), [kernel.time_ns, ka, kb, kc, ka2]));
    }
    rows.sort_by(|x, y| y.0.total_cmp(&x.0));
    let row = |name: &str, [p, ka, kb, kc, ka2]: [f64; 5]| {
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            p / 1e6,
            ka / 1e6,
            kb / 1e6,
            kc / 1e6,
            ka / ka2,
            ka / kb,
            kb / kc,
            ka / p
        );
    };
    for (_, name, values) in rows.iter().take(12) {
        row(name, *values);
    }
    row(&format!("**all {n} kernels**"), sums);
    println!(
        "step wall, medians: A {:.3}, B {:.3}, C {:.3}, A′ {:.3} ms; plan predicted {:.3} ms",
        median(&walls[0]) / 1e6,
        median(&walls[1]) / 1e6,
        median(&walls[2]) / 1e6,
        median(&walls[3]) / 1e6,
        plan.predicted.step_ns / 1e6
    );
    Ok(())
}
