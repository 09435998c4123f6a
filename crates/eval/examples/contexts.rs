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
//! - D, B's executor on an arena in which no tensor reuses another's bytes: every
//!   tensor at an offset of its own, the scratch after them all (B against D: the
//!   arena's reuse of freed bytes, D against C: an arena as such);
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
    // How much of each context's memory the kernel backed with huge pages: a context
    // on 4 KiB pages pays TLB misses the others do not.
    let mut huge = vec![("", anon_huge_kib())];
    let pools = |host: &mut Host| host.pool_set();
    let exec_plan = |pools: &placer_pools::PoolSet| placer_solve::exec_plan(&plan, &model, pools);
    let p = pools(&mut host)?;
    let plan_a = exec_plan(&p)?;
    let mut a = PlanExecutor::new(&model, p, plan_a, 7)?;
    huge.push(("A", anon_huge_kib()));
    let p = pools(&mut host)?;
    let plan_a2 = exec_plan(&p)?;
    let mut a2 = PlanExecutor::new(&model, p, plan_a2, 7)?;
    huge.push(("A′", anon_huge_kib()));
    let p = pools(&mut host)?;
    let plan_b = exec_plan(&p)?;
    let mut b = PlanExecutor::new(&model, p, plan_b, 7)?;
    huge.push(("B", anon_huge_kib()));
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
    huge.push(("C", anon_huge_kib()));
    c.set_warm_pool(true);
    let p = pools(&mut host)?;
    let plan_d = placer_solve::exec_plan(&without_reuse(&plan)?, &model, &p)?;
    let mut d = PlanExecutor::new(&model, p, plan_d, 7)?;
    huge.push(("D", anon_huge_kib()));
    d.set_warm_pool(true);
    for _ in 0..2 {
        a.step()?;
        a2.step()?;
        b.step()?;
        c.step()?;
        d.step()?;
    }
    let n = model.schedule().len();
    let mut times: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); n]; 5];
    let mut walls: Vec<Vec<f64>> = vec![Vec::new(); 5];
    // Per step: the sum of its kernels' times, and the wall time outside them.
    let mut sums_by_step: Vec<Vec<f64>> = vec![Vec::new(); 5];
    let mut between: Vec<Vec<f64>> = vec![Vec::new(); 5];
    for _ in 0..steps {
        let ta = a.step()?;
        let tb = b.step()?;
        let tc = c.step()?;
        let td = d.step()?;
        let ta2 = a2.step()?;
        let all = [
            (ta.kernel_ns, ta.wall_ns),
            (tb.kernel_ns, tb.wall_ns),
            (tc.kernel_ns, tc.wall_ns),
            (ta2.kernel_ns, ta2.wall_ns),
            (td.kernel_ns, td.wall_ns),
        ];
        for (ctx, (kernels, wall)) in all.into_iter().enumerate() {
            let sum: f64 = kernels.iter().sum();
            sums_by_step[ctx].push(sum);
            between[ctx].push(wall - sum);
            for (k, ns) in kernels.into_iter().enumerate() {
                times[ctx][k].push(ns);
            }
            walls[ctx].push(wall);
        }
    }
    let median = |v: &[f64]| Stats::of(v).map_or(f64::NAN, |s| s.median);
    // Readings after each context's setup; each context gained the difference.
    let huge: Vec<String> = huge.windows(2).map(|w| format!("{} {} MiB", w[1].0, (w[1].1 - w[0].1) / 1024)).collect();
    println!("huge pages gained while each context was set up: {}", huge.join(", "));
    println!(
        "{} ({steps} interleaved steps each; ms; A: run, B: run with threads woken, C: resident buffers, D: B without reuse)",
        plan.provenance.strategy
    );
    println!(
        "| kernel | predicted | A run | B woken | C resident | D no reuse | A/A′ (floor) | A/B | B/C | B/D | D/C | A/predicted |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut sums = [0.0f64; 6];
    let mut rows = Vec::new();
    for (k, kernel) in plan.kernels.iter().enumerate() {
        let [ka, kb, kc, ka2, kd] = [0, 1, 2, 3, 4].map(|ctx| median(&times[ctx][k]));
        let values = [kernel.time_ns, ka, kb, kc, ka2, kd];
        for (s, v) in sums.iter_mut().zip(values) {
            *s += v;
        }
        rows.push(((ka - kernel.time_ns).abs(), kernel.node.clone(), values));
    }
    rows.sort_by(|x, y| y.0.total_cmp(&x.0));
    let row = |name: &str, [p, ka, kb, kc, ka2, kd]: [f64; 6]| {
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            p / 1e6,
            ka / 1e6,
            kb / 1e6,
            kc / 1e6,
            kd / 1e6,
            ka / ka2,
            ka / kb,
            kb / kc,
            kb / kd,
            kd / kc,
            ka / p
        );
    };
    for (_, name, values) in rows.iter().take(12) {
        row(name, *values);
    }
    // By size, as predicted: small kernels read what the kernel before them wrote, so
    // where that sits (and whether it is still in cache) weighs most on them.
    for (name, lo, hi) in [("≥ 1 ms", 1e6, f64::INFINITY), ("50 µs - 1 ms", 5e4, 1e6), ("< 50 µs", 0.0, 5e4)] {
        let class: Vec<&[f64; 6]> = rows.iter().map(|r| &r.2).filter(|v| v[0] >= lo && v[0] < hi).collect();
        let mut sums = [0.0f64; 6];
        for v in &class {
            for (s, x) in sums.iter_mut().zip(v.iter()) {
                *s += x;
            }
        }
        row(&format!("*{} kernels {name}*", class.len()), sums);
    }
    row(&format!("**all {n} kernels**"), sums);
    // By op: what differs between contexts is the memory a kernel touches, so ops that
    // stream (copies, elementwise) part from ops that compute (matmul) here.
    let mut by_op: std::collections::BTreeMap<String, (usize, [f64; 6])> = std::collections::BTreeMap::new();
    for (name, values) in rows.iter().map(|r| (&r.1, r.2)) {
        let op = model.node(model.node_id(name).ok_or("a plan kernel not in the model")?).op;
        let entry = by_op.entry(format!("{op:?}")).or_insert((0, [0.0; 6]));
        entry.0 += 1;
        for (s, x) in entry.1.iter_mut().zip(values) {
            *s += x;
        }
    }
    for (op, (count, values)) in &by_op {
        row(&format!("*{count} {op}*"), *values);
    }
    println!(
        "step wall, medians: A {:.3}, B {:.3}, C {:.3}, D {:.3}, A′ {:.3} ms; plan predicted {:.3} ms",
        median(&walls[0]) / 1e6,
        median(&walls[1]) / 1e6,
        median(&walls[2]) / 1e6,
        median(&walls[4]) / 1e6,
        median(&walls[3]) / 1e6,
        plan.predicted.step_ns / 1e6
    );
    // A prediction adds kernels' medians; a step's median is the median of their sum,
    // plus whatever the executor does between kernels.
    println!(
        "| context | step wall | its kernels (median of sums) | kernels (sum of medians) | (sum of means) | (sum of 10%-trimmed means) | between kernels | per kernel µs |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let trimmed = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        let cut = v.len() / 10;
        let kept = &v[cut..v.len() - cut];
        kept.iter().sum::<f64>() / kept.len() as f64
    };
    for (ctx, name) in [(0, "A run"), (3, "A′ run"), (1, "B woken"), (2, "C resident"), (4, "D no reuse")] {
        let of_medians: f64 = times[ctx].iter().map(|k| median(k)).sum();
        let of_means: f64 = times[ctx].iter().map(|k| k.iter().sum::<f64>() / k.len() as f64).sum();
        let of_trimmed: f64 = times[ctx].iter().map(|k| trimmed(k)).sum();
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1} |",
            median(&walls[ctx]) / 1e6,
            median(&sums_by_step[ctx]) / 1e6,
            of_medians / 1e6,
            of_means / 1e6,
            of_trimmed / 1e6,
            median(&between[ctx]) / 1e6,
            median(&between[ctx]) / 1e3 / n as f64
        );
    }
    Ok(())
}

/// `plan` laid out so that no tensor reuses bytes another has freed: each tensor at an
/// offset of its own in each pool it lives in, every kernel's scratch in DRAM after
/// them all (the original arena's size bounds the largest scratch), the budget raised
/// to fit. The plan has no moves, so each tensor has one span per pool.
fn without_reuse(plan: &placer_solve::Plan) -> Result<placer_solve::Plan, String> {
    let mut spread = plan.clone();
    let mut end = vec![0u64; plan.inputs.pools.len()];
    for tensor in &mut spread.tensors {
        for span in &mut tensor.placement {
            let pool = plan
                .inputs
                .pools
                .iter()
                .position(|p| p.name == span.pool)
                .ok_or_else(|| format!("tensor {}: pool '{}' is not one of the plan's", tensor.name, span.pool))?;
            span.offset = end[pool];
            end[pool] += tensor.bytes.div_ceil(4096) * 4096;
        }
    }
    for kernel in &mut spread.kernels {
        kernel.scratch_offset = end[0];
    }
    end[0] += plan.arena_bytes[0];
    spread.inputs.budget_bytes = end[0];
    spread.inputs.capacity[0] = spread.inputs.capacity[0].max(end[0]);
    spread.phase_peak_bytes[0] = spread.phase_peak_bytes[0].max(end[0]);
    spread.arena_bytes = end;
    Ok(spread)
}

/// The process's transparent huge pages, in KiB (`AnonHugePages` of
/// /proc/self/smaps_rollup); 0 where the kernel does not say.
fn anon_huge_kib() -> i64 {
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    rollup
        .lines()
        .find_map(|l| l.strip_prefix("AnonHugePages:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
