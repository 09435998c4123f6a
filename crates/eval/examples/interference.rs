//! How well the profile's interference calibration predicts what a background copy costs
//! real kernels, at copy sizes and on nodes it did not measure. For every op: the two
//! nodes the calibration measured and the op's shortest node, each alone and with a copy
//! handed to a copy thread just before it (a real memcpy between DRAM buffers, as the
//! plan executor's copy thread does before it sleeps an emulated pool's wait),
//! alternating, `ROUNDS` triples (alone, with, alone again: the noise floor), medians, at
//! each copy size (0 KiB: the fixed part alone). Predicted loss = the op's fixed part + its share ×
//! min(the copy's memcpy time at the calibration's ns/B, the kernel alone): the solver's
//! charge.
//! `cargo run --release -p placer-eval --example interference -- MODEL.json CKPT [ROUNDS [KiB...]]`

#![allow(clippy::print_stdout)] // a command-line tool: printing is its output

use placer_exec::{Executor, PoolAssignment, Stats};
use placer_host::{Host, HostOptions};
use placer_ir::NodeId;
use placer_pools::PoolId;
use placer_profile::CopyBench;
use std::collections::BTreeMap;

type Error = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: MODEL.json CKPT [ROUNDS [KiB...]]";
    let model = placer_ir::load_model(std::path::Path::new(args.get(1).ok_or(usage)?))?;
    let profile = placer_profile::load_checkpoint(std::path::Path::new(args.get(2).ok_or(usage)?))?;
    let calibration = profile.interference.ok_or("the profile has no interference calibration")?;
    let rounds: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(21);
    let sizes: Vec<usize> = match args.get(4..).filter(|a| !a.is_empty()) {
        Some(list) => list.iter().map(|s| s.parse::<usize>().map(|k| k << 10)).collect::<Result<_, _>>()?,
        None => vec![0, 256, 1024, 4096],
    };
    let warm = std::env::var_os("WARM").is_some();
    let mut host = Host::open(&HostOptions::default())?;
    let pools = host.pool_set()?;
    let mut exec = Executor::new(&model, pools, &PoolAssignment::all_in(&model, PoolId(0)), 7)?;
    // As a plan runs: no wake-up of the pool's threads before each kernel.
    exec.set_warm_pool(false);
    exec.step()?;
    let mut shortest: BTreeMap<String, NodeId> = BTreeMap::new();
    for &n in model.schedule() {
        let e = shortest.entry(model.node(n).op.to_string()).or_insert(n);
        if profile.reference_ns.get(n.index()) < profile.reference_ns.get(e.index()) {
            *e = n;
        }
    }
    let by_name: BTreeMap<&str, NodeId> = model.schedule().iter().map(|&n| (model.node(n).name.as_str(), n)).collect();
    println!(
        "memcpy {:.4} ns/B (the calibration's, which took {:.1} s); {rounds} rounds per row, medians; loss = with copy − alone",
        calibration.memcpy_ns_per_byte, calibration.seconds
    );
    println!(
        "| op | node | fixed µs | share | kernel µs | copy KiB | measured loss µs | predicted µs | noise (A′ − A) µs |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let (mut measured_sum, mut predicted_sum) = (0.0, 0.0);
    // As a plan's step runs, and as the calibration measured.
    placer_exec::as_launcher(|launcher| -> Result<(), Error> {
        let copier = CopyBench::start(launcher)?;
        for op in &calibration.ops {
            let mut nodes: Vec<NodeId> = [op.share_pairs.node.as_str(), op.fixed_pairs.node.as_str()]
                .iter()
                .filter_map(|name| by_name.get(name).copied())
                .chain(shortest.get(&op.op).copied())
                .collect();
            nodes.dedup();
            for &n in &nodes {
                let kernel: Vec<f64> =
                    (0..5).map(|_| Ok(exec.step_nodes(&[n])?.kernel_ns[0])).collect::<Result<_, Error>>()?;
                let kernel = Stats::of(&kernel[1..]).map_or(f64::NAN, |s| s.median).max(1.0);
                for &bytes in &sizes {
                    // WARM: as a plan's kernel follows another, the pool's threads awake
                    // when the copy is handed over.
                    let wake = || {
                        if warm {
                            rayon::broadcast(|_| ());
                        }
                    };
                    let [a, with, again] =
                        copier.triples(bytes, rounds, wake, || exec.step_nodes(&[n]).map(drop).map_err(Error::from))?;
                    let (loss, noise) = (with - a, again - a);
                    let predicted = op.fixed_ns.max(0.0)
                        + op.share.max(0.0) * (bytes as f64 * calibration.memcpy_ns_per_byte).min(kernel);
                    measured_sum += loss;
                    predicted_sum += predicted;
                    println!(
                        "| {} | {} | {:.1} | {:.2} | {:.1} | {} | {:.1} | {:.1} | {:.1} |",
                        op.op,
                        model.node(n).name,
                        op.fixed_ns / 1e3,
                        op.share,
                        kernel / 1e3,
                        bytes >> 10,
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
