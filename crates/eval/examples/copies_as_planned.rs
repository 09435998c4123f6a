//! What a plan's background copies cost the kernels they overlap when each pair runs on its
//! own, against what the plan charges for them and, given a run of the plan
//! (`placer run MODEL --plan P --in-situ RUN.json`), what they cost in the run.
//!
//! For every kernel of at least 1 ms that the plan has copies beside: the kernel alone and
//! with one copy of all those copies' bytes handed to a copy thread just before it (from
//! and to memory, as the calibration copies), `ROUNDS` triples (alone, with, alone again:
//! the noise floor), medians. Every tensor sits in DRAM: an emulated pool's wait is a
//! sleep that no copy competes with. In the run, a kernel's cost is its time at the
//! profile's pace (the median run/plan of the kernels of at least 1 ms with no copy beside
//! them) less the plan's time for it. If the pairs here cost about what the plan charges
//! and the run's copies cost less, what differs is the run's context, not the
//! calibration.
//!
//! `cargo run --release -p placer-eval --example copies_as_planned -- MODEL.json PLAN.json [ROUNDS [RUN.json]]`

#![allow(clippy::print_stdout)] // a command-line tool: printing is its output

use placer_exec::{Executor, PoolAssignment, Stats};
use placer_host::{Host, HostOptions};
use placer_pools::PoolId;
use placer_profile::CopyBench;
use placer_solve::{MoveKind, Plan};

type Error = Box<dyn std::error::Error + Send + Sync>;

const MIN_KERNEL_NS: f64 = 1e6;

fn median(v: &[f64]) -> f64 {
    Stats::of(v).map_or(f64::NAN, |s| s.median)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: MODEL.json PLAN.json [ROUNDS [RUN.json]]";
    let model = placer_ir::load_model(std::path::Path::new(args.get(1).ok_or(usage)?))?;
    let plan = Plan::load(std::path::Path::new(args.get(2).ok_or(usage)?))?;
    let rounds: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(7);
    let run = args.get(4).map(|p| placer_profile::InSitu::load(std::path::Path::new(p))).transpose()?;
    let steps = model.schedule().len();
    let pools = &plan.inputs.pools;
    let pool_of = |name: &str| pools.iter().position(|p| p.name == name);
    // Per step: the bytes copied beside its kernel, and their CPU time as the plan has it.
    let (mut bytes, mut cpu_ns) = (vec![0u64; steps], vec![0.0; steps]);
    for m in plan.moves.iter().filter(|m| m.kind == MoveKind::Async) {
        let (Some(at), Some(from), Some(to)) = (m.overlaps, pool_of(&m.from), pool_of(&m.to)) else { continue };
        bytes[at] += m.bytes;
        cpu_ns[at] += m.bytes as f64 * plan.inputs.copy_cpu_ns_per_byte[from][to];
    }
    let run_ns: Option<Vec<f64>> = run.as_ref().map(|r| {
        let mut v = vec![f64::NAN; steps];
        for k in &r.kernels {
            if k.step < steps {
                v[k.step] = k.median_ns;
            }
        }
        v
    });
    let pace = run_ns.as_ref().map(|r| {
        let ratios: Vec<f64> = (0..steps)
            .filter(|&i| bytes[i] == 0 && plan.kernels[i].time_ns >= MIN_KERNEL_NS && r[i].is_finite())
            .map(|i| r[i] / plan.kernels[i].time_ns)
            .collect();
        median(&ratios)
    });
    let mut host = Host::open(&HostOptions::default())?;
    let mut exec = Executor::new(&model, host.pool_set()?, &PoolAssignment::all_in(&model, PoolId(0)), 7)?;
    // As a plan runs: no wake-up of the pool's threads before each kernel.
    exec.set_warm_pool(false);
    exec.step()?;
    if let Some(p) = pace {
        println!("the run's pace: run/plan {p:.3} over the kernels of at least 1 ms with no copy beside them");
    }
    println!(
        "| step | node | kernel µs | copy MiB | copy CPU µs | loss alone µs | noise µs | charged µs | cost in the run µs |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    let (mut loss_sum, mut charged_sum, mut run_sum) = (0.0, 0.0, 0.0);
    placer_exec::as_launcher(|launcher| -> Result<(), Error> {
        let copier = CopyBench::start(launcher)?;
        for i in (0..steps).filter(|&i| bytes[i] > 0 && plan.kernels[i].time_ns >= MIN_KERNEL_NS) {
            let n = model.schedule()[i];
            let size = bytes[i] as usize;
            let [a, with, again] =
                copier.triples(size, rounds, || (), || exec.step_nodes(&[n]).map(drop).map_err(Error::from))?;
            let loss = with - a;
            let charged = plan.kernels[i].interference_ns;
            let in_run = match (&run_ns, pace) {
                (Some(r), Some(p)) => r[i] / p - plan.kernels[i].time_ns,
                _ => f64::NAN,
            };
            loss_sum += loss;
            charged_sum += charged;
            run_sum += in_run;
            println!(
                "| {i} | {} | {:.0} | {:.1} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
                model.node(n).name,
                a / 1e3,
                bytes[i] as f64 / f64::from(1 << 20),
                cpu_ns[i] / 1e3,
                loss / 1e3,
                (again - a) / 1e3,
                charged / 1e3,
                in_run / 1e3
            );
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    println!(
        "\nall rows: the pairs alone lost {:.1} ms, the plan charged {:.1} ms, the run's copies cost {:.1} ms",
        loss_sum / 1e6,
        charged_sum / 1e6,
        run_sum / 1e6
    );
    Ok(())
}
