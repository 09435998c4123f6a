//! What a background copy costs the real kernels beside it, op by op, against the one
//! per-byte figure the probe measures with its synthetic kernel (and the solver uses for
//! every kernel). Each kernel of the model's first node of every op runs on the
//! executor alone and with a copy handed to a copy thread just before it (a real memcpy
//! between DRAM buffers, then a sleep for what the emulated pool charges, as the plan
//! executor's copy thread does), alone and with alternating, `ROUNDS` pairs; the copy is
//! waited for after the kernel, untimed. Loss per byte = (with − alone) / bytes.
//! `cargo run --release -p placer-eval --example interference -- MODEL.json [MiB [ROUNDS]]`

#![allow(clippy::print_stdout)] // a command-line tool: printing is its output

use placer_exec::{Executor, PoolAssignment, Stats};
use placer_host::{Host, HostOptions};
use placer_ir::NodeId;
use placer_pools::{PoolId, sleep_until};
use std::collections::BTreeMap;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let model = placer_ir::load_model(std::path::Path::new(args.get(1).ok_or("usage: MODEL.json [MiB [ROUNDS]]")?))?;
    let mib: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(2);
    let rounds: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(31);
    let bytes = mib << 20;
    let mut host = Host::open(&HostOptions::default())?;
    let pools = host.pool_set()?;
    let probe = host.cache.as_ref().and_then(|c| c.probe.as_ref());
    let figure = |from: &str, to: &str| {
        probe
            .and_then(|p| p.copies.iter().find(|c| c.from == from && c.to == to))
            .and_then(|c| c.interference_ns_per_byte.as_ref())
            .map_or(f64::NAN, |s| s.median)
    };
    let slow = PoolId(1);
    let wait_ns = pools.emulated_ns(PoolId(0), bytes as u64, 0) + pools.emulated_ns(slow, 0, bytes as u64);
    let mut first_of_op: BTreeMap<String, NodeId> = BTreeMap::new();
    for &n in model.schedule() {
        first_of_op.entry(model.node(n).op.to_string()).or_insert(n);
    }
    let mut exec = Executor::new(&model, pools, &PoolAssignment::all_in(&model, PoolId(0)), 7)?;
    exec.step()?;
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    let (jobs, inbox) = channel::<()>();
    let (done, finished) = channel::<()>();
    println!(
        "{} MiB copies dram -> pmem (EMULATED wait {:.0} µs each); the probe's figure: {:.4} ns/B; {rounds} pairs, medians",
        mib,
        wait_ns / 1e3,
        figure("dram", "pmem")
    );
    println!("| op | node | FLOP/B | alone µs | with copy µs | loss ns/B | loss / probe |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    std::thread::scope(|s| -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let (src, dst) = (&src, &mut dst);
        s.spawn(move || {
            for () in inbox {
                let start = Instant::now();
                dst.copy_from_slice(src);
                std::hint::black_box(&dst);
                sleep_until(start + Duration::from_nanos(wait_ns as u64));
                if done.send(()).is_err() {
                    break;
                }
            }
        });
        for (op, &n) in &first_of_op {
            let (mut alone, mut with) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                alone.push(exec.step_nodes(&[n]).map_err(|e| e.to_string())?.kernel_ns[0]);
                jobs.send(()).map_err(|e| e.to_string())?;
                with.push(exec.step_nodes(&[n]).map_err(|e| e.to_string())?.kernel_ns[0]);
                finished.recv().map_err(|e| e.to_string())?;
            }
            let (a, w) =
                (Stats::of(&alone).map_or(f64::NAN, |s| s.median), Stats::of(&with).map_or(f64::NAN, |s| s.median));
            let cost = model.cost(n);
            let traffic: u64 = placer_ir::ops::node_traffic(&model, n).iter().map(|(_, t)| t.read + t.written).sum();
            let loss = (w - a) / bytes as f64;
            println!(
                "| {op} | {} | {:.1} | {:.1} | {:.1} | {loss:.4} | {:.2} |",
                model.node(n).name,
                cost.flops as f64 / traffic.max(1) as f64,
                a / 1e3,
                w / 1e3,
                loss / figure("dram", "pmem")
            );
        }
        drop(jobs);
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    Ok(())
}
