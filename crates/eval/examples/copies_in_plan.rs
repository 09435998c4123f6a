//! What a plan's background memcpys cost the kernels beside them, measured inside the
//! plan: the plan as it runs (A), the same plan with its background copies moving no
//! bytes (B: each still takes its emulated wait, so the step keeps its shape; the moved
//! tensors keep stale contents), and A again (A′, the noise floor), in one process,
//! interleaved round by round. Per kernel, A − B is what the copies beside it cost it;
//! the plan's charge for them is set beside that, per op, per phase (forward up to the
//! loss, backward after it) and by the copies' CPU time against the kernel's time.
//! Unlike a run set against its profile, no pace between two moments enters: the three
//! executors run on the same host minutes apart at most, turn by turn.
//! `cargo run --release -p placer-eval --example copies_in_plan -- MODEL.json PLAN.json [ROUNDS]`

#![allow(clippy::print_stdout)] // a command-line tool: printing is its output

use placer_exec::{PlanExecutor, Stats};
use placer_host::{Host, HostOptions};
use placer_ir::Op;
use placer_solve::Plan;
use std::collections::BTreeMap;
use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: MODEL.json PLAN.json [ROUNDS]";
    let model = placer_ir::load_model(Path::new(args.get(1).ok_or(usage)?))?;
    let plan = Plan::load(Path::new(args.get(2).ok_or(usage)?))?;
    let rounds: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(6);
    let mut host = Host::open(&HostOptions::default())?;
    let mut executor = |memcpy: bool| -> Result<PlanExecutor<'_>, Box<dyn std::error::Error>> {
        let pools = host.pool_set()?;
        let exec = placer_solve::exec_plan(&plan, &model, &pools)?;
        let mut e = PlanExecutor::new(&model, pools, exec, 7)?;
        e.set_background_memcpy(memcpy);
        Ok(e)
    };
    let names = ["A", "B (no memcpy)", "A′"];
    let mut runs = [executor(true)?, executor(false)?, executor(true)?];
    let steps = model.schedule().len();
    let mut samples: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); steps]; 3];
    let mut walls: Vec<Vec<f64>> = vec![Vec::new(); 3];
    for round in 0..=rounds {
        // Each turn a different order, so no contender always follows the same one.
        for i in 0..3 {
            let c = (i + round) % 3;
            let times = runs[c].step()?;
            if round == 0 {
                continue; // warm-up
            }
            walls[c].push(times.wall_ns);
            for (s, &t) in times.kernel_ns.iter().enumerate() {
                samples[c][s].push(t);
            }
        }
        if round > 0 {
            println!("round {round} of {rounds}");
        }
    }
    let median = |v: &[f64]| Stats::of(v).map_or(f64::NAN, |s| s.median);
    let kernel: Vec<Vec<f64>> = samples.iter().map(|c| c.iter().map(|s| median(s)).collect()).collect();
    for (c, name) in names.iter().enumerate() {
        println!("{name}: step {:.1} ms (median of {rounds})", median(&walls[c]) / 1e6);
    }

    // The copies beside each kernel: their CPU time as the plan costs it.
    let pool = |name: &str| plan.inputs.pools.iter().position(|p| p.name == name);
    let mut cpu_ns = vec![0.0; steps];
    // Per step, for a kernel beside one copy only: its direction, and whether a kernel
    // within the two steps before touched the tensor it copies (its source may still be
    // in cache).
    let mut one_copy: Vec<Vec<String>> = vec![Vec::new(); steps];
    let touched = |tensor: &str, at: usize| {
        model.schedule()[at.saturating_sub(2)..at].iter().any(|&n| {
            let node = model.node(n);
            node.inputs.iter().chain(&node.outputs).chain(&node.updates).any(|&t| model.tensor(t).name == tensor)
        })
    };
    for m in &plan.moves {
        if let (Some(at), Some(f), Some(t)) = (m.overlaps, pool(&m.from), pool(&m.to)) {
            cpu_ns[at] += m.bytes as f64 * plan.inputs.copy_cpu_ns_per_byte[f][t];
            let recent = if touched(&m.tensor, at) { "touched within 2 steps" } else { "touched earlier" };
            one_copy[at].push(format!("{}→{}, {recent}", m.from, m.to));
        }
    }
    let loss = model.schedule().iter().position(|&n| model.node(n).op == Op::SoftmaxCrossEntropy).unwrap_or(steps);
    // Per group: kernels, Σ cost (A − B), Σ floor (A′ − A), Σ charge, Σ the kernels' B.
    let mut groups: BTreeMap<String, [f64; 5]> = BTreeMap::new();
    for (s, k) in plan.kernels.iter().enumerate() {
        if k.copies_ns <= 0.0 {
            continue;
        }
        let (a, b, a2) = (kernel[0][s], kernel[1][s], kernel[2][s]);
        let op = model.node(model.schedule()[s]).op.to_string();
        let phase = if s <= loss { "forward" } else { "backward" };
        let size = match cpu_ns[s] / b.max(1.0) {
            x if x < 0.25 => "copies < 1/4 of the kernel",
            x if x < 0.75 => "copies 1/4-3/4 of the kernel",
            _ => "copies ≥ 3/4 of the kernel",
        };
        let mut keys = vec![format!("op {op}"), format!("phase {phase}"), format!("size {size}"), "all".to_string()];
        if let [copy] = one_copy[s].as_slice() {
            keys.push(format!("one copy {copy}"));
        }
        for key in keys {
            let g = groups.entry(key).or_insert([0.0; 5]);
            g[0] += 1.0;
            g[1] += a - b;
            g[2] += a2 - a;
            g[3] += k.interference_ns;
            g[4] += b;
        }
    }
    println!("\nkernels beside a background copy: what the memcpys cost them (A − B) against the plan's charge");
    println!("| group | kernels | kernels ms (B) | cost ms (A − B) | floor ms (A′ − A) | charged ms | charged/cost |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (key, g) in &groups {
        println!(
            "| {key} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} |",
            g[0],
            g[4] / 1e6,
            g[1] / 1e6,
            g[2] / 1e6,
            g[3] / 1e6,
            g[3] / g[1]
        );
    }
    Ok(())
}
