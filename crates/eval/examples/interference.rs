//! How well the profile's interference calibration predicts what a background copy costs
//! real kernels, at copy sizes and on nodes it did not measure. For every op: the node
//! the calibration measured and the op's shortest node, each alone and with a copy handed
//! to a copy thread just before it (a real memcpy between DRAM buffers, as the plan
//! executor's copy thread does before it sleeps an emulated pool's wait), alternating,
//! `ROUNDS` triples (alone, with, alone again: the noise floor), medians, at each
//! copy size. Predicted loss = the op's share × min(the
//! copy's memcpy time at the calibration's ns/B, the kernel alone): the solver's charge.
//! `cargo run --release -p placer-eval --example interference -- MODEL.json CKPT [ROUNDS [MiB...]]`

#![allow(clippy::print_stdout)] // a command-line tool: printing is its output

use placer_exec::{Executor, PoolAssignment, Stats};
use placer_host::{Host, HostOptions};
use placer_ir::NodeId;
use placer_pools::PoolId;
use placer_profile::interference::CopyBench;
use std::collections::BTreeMap;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: MODEL.json CKPT [ROUNDS [MiB...]]";
    let model = placer_ir::load_model(std::path::Path::new(args.get(1).ok_or(usage)?))?;
    let profile = placer_profile::checkpoint::load(std::path::Path::new(args.get(2).ok_or(usage)?))?;
    let calibration = profile.interference.ok_or("the profile has no interference calibration")?;
    let rounds: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(21);
    let sizes: Vec<usize> = match args.get(4..).filter(|a| !a.is_empty()) {
        Some(list) => list.iter().map(|s| s.parse::<usize>().map(|m| m << 20)).collect::<Result<_, _>>()?,
        None => vec![1 << 20, 4 << 20, 16 << 20],
    };
    let mut host = Host::open(&HostOptions::default())?;
    let pools = host.pool_set()?;
    let mut exec = Executor::new(&model, pools, &PoolAssignment::all_in(&model, PoolId(0)), 7)?;
    exec.step()?;
    let mut shortest: BTreeMap<String, NodeId> = BTreeMap::new();
    for &n in model.schedule() {
        let e = shortest.entry(model.node(n).op.to_string()).or_insert(n);
        if profile.reference_ns.get(n.index()) < profile.reference_ns.get(e.index()) {
            *e = n;
        }
    }
    println!(
        "memcpy {:.4} ns/B (the calibration's); {rounds} pairs per row, medians; loss = with copy − alone",
        calibration.memcpy_ns_per_byte
    );
    println!("| op | node | share | alone µs | copy MiB | measured loss µs | predicted µs | noise (A′ − A) µs |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    let (mut measured_sum, mut predicted_sum) = (0.0, 0.0);
    // As a plan's step runs, and as the calibration measured.
    placer_exec::as_launcher(|launcher| -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let copier = CopyBench::start(launcher)?;
        for op in &calibration.ops {
            let measured = model.schedule().iter().copied().find(|&n| model.node(n).name == op.node);
            let mut nodes: Vec<NodeId> = measured.into_iter().chain(shortest.get(&op.op).copied()).collect();
            nodes.dedup();
            for &n in &nodes {
                for &bytes in &sizes {
                    let (mut alone, mut with, mut again) = (Vec::new(), Vec::new(), Vec::new());
                    for _ in 0..rounds {
                        alone.push(exec.step_nodes(&[n])?.kernel_ns[0]);
                        copier.hand(bytes)?;
                        with.push(exec.step_nodes(&[n])?.kernel_ns[0]);
                        copier.done()?;
                        again.push(exec.step_nodes(&[n])?.kernel_ns[0]);
                    }
                    let median = |v: &[f64]| Stats::of(v).map_or(f64::NAN, |s| s.median);
                    let a = median(&alone);
                    let loss = median(&with) - a;
                    let noise = median(&again) - a;
                    let predicted = op.share.max(0.0) * (bytes as f64 * calibration.memcpy_ns_per_byte).min(a);
                    measured_sum += loss;
                    predicted_sum += predicted;
                    println!(
                        "| {} | {} | {:.2} | {:.1} | {} | {:.1} | {:.1} | {:.1} |",
                        op.op,
                        model.node(n).name,
                        op.share,
                        a / 1e3,
                        bytes >> 20,
                        loss / 1e3,
                        predicted / 1e3,
                        noise / 1e3
                    );
                }
            }
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    println!(
        "\nall rows: measured loss {:.3} ms, predicted {:.3} ms ({:+.1}%)",
        measured_sum / 1e6,
        predicted_sum / 1e6,
        (predicted_sum / measured_sum - 1.0) * 100.0
    );
    Ok(())
}
