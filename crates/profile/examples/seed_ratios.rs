//! The emulator's per-configuration slowdowns beside real Optane's, for each wait model.
//!
//! The only real DRAM/Optane kernel times placer has are the reference system's
//! notebook means (tests/fixtures/autotm-mnist-b256.json: MNIST, batch 256, one
//! configuration at a time). This runs the same network (`placer zoo autotm-mnist`) and
//! times every convolution, forward and backward-data, in every configuration of its
//! data, filters and output, with the pmem pool emulated by each wait model, all in one
//! loop (round-robin, so the host's drift moves every column alike). It prints, per
//! configuration, the slowdown over all-DRAM:
//!
//! - `real`: the notebook's (a ConvolutionBias, 3 inputs, bias fixed in DRAM; and a
//!   ConvolutionBackpropData, whose all-DRAM time the notebook does not show, so its
//!   ratios are taken against filters-DRAM, delta-PMEM, output-DRAM);
//! - `at ref`: each wait model's formula at the reference host, the FAST 2020 Optane and
//!   DRAM bandwidths, with the notebook's own all-DRAM time as the kernel's time and
//!   this network's operand bytes;
//! - `here`: measured here, the EMULATED pool at this host's DRAM bandwidth scaled by
//!   the device's ratios.
//!
//! Which of the network's convolutions the notebook's nodes are is not printed there, so
//! every candidate is shown; the write-side ratios point at conv2 (docs/hosts.md).
//!
//! `cargo run --release -p placer-profile --example seed_ratios -- [ROUNDS]`

#![allow(clippy::print_stdout)] // a command-line tool: printing is its output

use placer_exec::{Executor, PoolAssignment, Stats};
use placer_host::{DeviceModel, Host, HostOptions};
use placer_ir::ops::node_traffic;
use placer_ir::{Model, NodeId, Op, Role};
use placer_pools::{Emulation, Pool, PoolId, PoolKind, PoolSet, WaitModel};
use std::collections::HashMap;

const FIXTURE: &str = include_str!("../tests/fixtures/autotm-mnist-b256.json");

/// The notebook's ConvolutionBackpropData_3291 single-configuration means (µs), keyed
/// (filters, delta) - output; its all-DRAM mean is not in the printed output.
const BACKPROP_DATA: [(&str, f64); 4] = [("DD-P", 746.33), ("DP-D", 198.12), ("PP-D", 192.28), ("DP-P", 762.73)];
const BACKPROP_DATA_BASE: &str = "DP-D";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: usize = std::env::args().nth(1).map(|r| r.parse()).transpose()?.unwrap_or(15);
    let model = placer_zoo::build("autotm-mnist", 256)?;
    let mut host = Host::open(&HostOptions::default())?;
    let (baseline, _) = host.baseline()?;
    let optane = DeviceModel::named("optane-dcpmm")?;
    let (dram_read, dram_write) = (baseline.read_gbps * 1e9, baseline.write_gbps * 1e9);
    let here = |wait| optane.emulation(dram_read, dram_write).with_wait(wait);
    let at_ref = |wait: WaitModel| {
        let (d, s) = (&optane.reference_dram, &optane.device);
        Emulation::from_bandwidths(
            "optane-dcpmm",
            d.read_gbps * 1e9,
            d.write_gbps * 1e9,
            s.read_gbps * 1e9,
            s.write_gbps * 1e9,
        )
        .with_wait(wait)
    };
    // Pool 0 DRAM; pool 1 + i the device under wait model i. All on the heap, so a
    // change of configuration only retags: every operand keeps its address.
    let mut pools = vec![Pool::new("dram", PoolKind::Dram, 1 << 34)];
    for wait in WaitModel::ALL {
        pools.push(Pool::new(&format!("pmem-{wait}"), PoolKind::Pmem, 1 << 34).with_emulation(here(wait)));
    }
    let mut exec = Executor::new(&model, PoolSet::new(pools), &PoolAssignment::all_in(&model, PoolId(0)), 7)?;
    exec.set_warm_pool(true);
    exec.step()?; // every tensor holds what training computes
    let targets: Vec<NodeId> = model
        .schedule()
        .iter()
        .copied()
        .filter(|&n| matches!(model.node(n).op, Op::Conv2d | Op::Conv2dBackwardData))
        .collect();
    let mut samples: HashMap<(NodeId, String, usize), Vec<f64>> = HashMap::new();
    let all_dram = PoolAssignment::all_in(&model, PoolId(0));
    for _ in 0..rounds {
        for &n in &targets {
            for config in configs() {
                for (m, wait_pool) in (0..=WaitModel::ALL.len()).map(|m| (m, PoolId(m as u16))) {
                    // m == 0: all-DRAM, timed once per configuration sweep as the reference.
                    if m == 0 && config != "DD-D" {
                        continue;
                    }
                    let mut placement = all_dram.clone();
                    for (t, c) in seed_operands(&model, n).into_iter().zip(config.chars().filter(|c| *c != '-')) {
                        if c == 'P' {
                            placement.0[t.index()] = wait_pool;
                        }
                    }
                    exec.set_placement(&placement)?;
                    exec.step_nodes(&[n])?;
                    let ns = exec.step_nodes(&[n])?.kernel_ns[0];
                    samples.entry((n, config.to_string(), m)).or_default().push(ns);
                }
            }
        }
    }
    let median = |n: NodeId, config: &str, m: usize| -> f64 {
        Stats::of(&samples[&(n, config.to_string(), m)]).map_or(f64::NAN, |s| s.median)
    };
    println!(
        "EMULATED optane-dcpmm here (DRAM baseline {:.1} GB/s read, {:.1} GB/s write); `at ref`: the formula at FAST 2020's \
         DRAM 105.6/76.8 and Optane 37.6/12.5 GB/s; {rounds} rounds, medians",
        baseline.read_gbps, baseline.write_gbps
    );
    let fixture: serde_json::Value = serde_json::from_str(FIXTURE)?;
    let bias = &fixture["nodes"][0]["single"];
    let real_bias: Vec<(String, f64)> = configs()
        .filter_map(|c| {
            let key = format!("{}D-{}", &c[..2], &c[3..]);
            bias[&key].as_f64().map(|us| (c.to_string(), us))
        })
        .collect();
    let real_data: Vec<(String, f64)> = BACKPROP_DATA.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    for &n in &targets {
        let node = model.node(n);
        let (real, base) = match node.op {
            Op::Conv2d => (&real_bias, "DD-D"),
            _ => (&real_data, BACKPROP_DATA_BASE),
        };
        let real_base = real.iter().find(|(c, _)| c == base).map_or(f64::NAN, |(_, us)| *us);
        let dram_here = median(n, "DD-D", 0);
        let base_here: Vec<f64> = (1..=WaitModel::ALL.len()).map(|m| median(n, base, m)).collect();
        // The noise floor: all-DRAM is timed three times per sweep (once per column), so
        // A′/A is what the same configuration gives twice in one run.
        let floor: Vec<String> =
            (1..=WaitModel::ALL.len()).map(|m| format!("{:.3}", median(n, "DD-D", m) / dram_here)).collect();
        println!(
            "\n{} ({}): all-DRAM {:.0} µs here, timed again {} of that (noise floor); ratios against {base}",
            node.name,
            node.op,
            dram_here / 1e3,
            floor.join(" and ")
        );
        print!("| config | real |");
        for wait in WaitModel::ALL {
            print!(" {wait} at ref | {wait} here |");
        }
        println!();
        println!("|---|---:|{}", "---:|---:|".repeat(WaitModel::ALL.len()));
        // Mean |log(model / real)| over the configurations, per column: 0 is a perfect fit.
        let mut misfit = vec![0.0; 2 * WaitModel::ALL.len()];
        for (config, real_us) in real {
            print!("| {config} | {:.2} |", real_us / real_base);
            for (i, wait) in WaitModel::ALL.into_iter().enumerate() {
                let formula = |c: &str| real_base * 1e3 + wait_at(&model, n, c, &at_ref(wait), real_base * 1e3);
                // At ref, the kernel's own time for both is the notebook's reference time.
                let at_ref_ratio = formula(config) / formula(base);
                let here_ratio = median(n, config, i + 1) / base_here[i];
                print!(" {at_ref_ratio:.2} | {here_ratio:.2} |");
                let real_ratio = real_us / real_base;
                misfit[2 * i] += (at_ref_ratio / real_ratio).ln().abs() / real.len() as f64;
                misfit[2 * i + 1] += (here_ratio / real_ratio).ln().abs() / real.len() as f64;
            }
            println!();
        }
        print!("| mean \\|log(model/real)\\| | |");
        for m in &misfit {
            print!(" {m:.3} |");
        }
        println!();
    }
    Ok(())
}

/// Every configuration of (data, filters) - output, as the notebook writes them.
fn configs() -> impl Iterator<Item = &'static str> {
    ["DD-D", "PD-D", "DP-D", "PP-D", "DD-P", "PD-P", "DP-P", "PP-P"].into_iter()
}

/// The node's operands in the notebook's order: for a forward convolution (data,
/// filters, output); for backward-data (filters, delta, output).
fn seed_operands(model: &Model, n: NodeId) -> Vec<placer_ir::TensorId> {
    let node = model.node(n);
    let weight = node.inputs.iter().copied().find(|&t| model.tensor(t).role == Role::Weight);
    let other = node.inputs.iter().copied().find(|&t| model.tensor(t).role != Role::Weight);
    let (Some(weight), Some(other)) = (weight, other) else { return Vec::new() };
    let first_two = if node.op == Op::Conv2d { [other, weight] } else { [weight, other] };
    first_two.into_iter().chain(node.outputs.iter().copied()).collect()
}

/// What `emulation` charges node `n` in `config` for a kernel of `kernel_ns`.
fn wait_at(model: &Model, n: NodeId, config: &str, emulation: &Emulation, kernel_ns: f64) -> f64 {
    let traffic: HashMap<_, _> = node_traffic(model, n).into_iter().collect();
    let (mut read, mut written) = (0, 0);
    for (t, c) in seed_operands(model, n).into_iter().zip(config.chars().filter(|c| *c != '-')) {
        if c == 'P' {
            read += traffic[&t].read;
            written += traffic[&t].written;
        }
    }
    emulation.kernel_wait_ns(read, written, kernel_ns)
}
