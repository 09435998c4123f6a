//! Whole steps against picked-only steps, side by side on one executor: a spread of a
//! profile's first-stage passes each run twice with whole steps (whole, whole′), then in
//! rounds twice with picked steps (picked, picked′), and every picked kernel's medians
//! are compared. whole against whole′ is the noise floor, measured in the same minutes.
//! `cargo run --release -p placer-profile --example steps -- MODEL.json [PASSES [ROUNDS]]`

#![allow(clippy::print_stdout)] // a command-line tool: printing is its output

mod common;

use placer_exec::Stats;
use placer_profile::{Steps, lab::Engine, lab::PassContext, lab::run_pass};
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

type Key = (u64, Vec<u16>);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (model, count, rounds) = match args.as_slice() {
        [_, m] => (m, 6, 3),
        [_, m, n] => (m, n.parse()?, 3),
        [_, m, n, r] => (m, n.parse()?, r.parse()?),
        _ => return Err("usage: steps MODEL.json [PASSES [ROUNDS]]".into()),
    };
    let model = placer_ir::load_model(Path::new(model))?;
    let common::Bench { options, plan, base, engine: mut exec, reference_ns, conflicts } = common::open(&model)?;
    let whole = placer_profile::Protocol { steps: Steps::Whole, ..options.protocol.clone() };
    let picked = placer_profile::Protocol { steps: Steps::Picked, ..options.protocol.clone() };
    let context = |protocol| PassContext {
        model: &model,
        tasks: &plan.measured,
        base: &base,
        protocol,
        conflicts: &conflicts,
        reference_ns: &reference_ns,
    };
    let (cx_whole, cx_picked) = (context(&whole), context(&picked));
    let total = plan.passes.len();
    let chosen: Vec<usize> = (0..count.min(total)).map(|i| i * total / count.min(total)).collect();
    println!(
        "{}: {} first-stage passes; passes {:?} timed with whole steps twice, with picked steps twice per round in {rounds} rounds",
        model.name(),
        total,
        chosen
    );
    // whole, picked, whole′, picked′: one median per configuration, a picked one the
    // median of its rounds' medians (as `Protocol::rounds` merges them).
    let mut runs: [HashMap<Key, Vec<f64>>; 4] = Default::default();
    let mut seconds = [0.0; 4];
    let mut time = |k: usize, cx: &PassContext<'_>, p: usize, exec: &mut Engine<'_>| {
        let started = Instant::now();
        let result = run_pass(exec, cx, &plan.passes[p], p as u32)?;
        seconds[k] += started.elapsed().as_secs_f64();
        for m in result.measurements {
            runs[k].entry((m.signature, m.config)).or_default().push(m.median_ns);
        }
        Ok::<(), placer_profile::ProfileError>(())
    };
    for &p in &chosen {
        time(0, &cx_whole, p, &mut exec)?;
        time(2, &cx_whole, p, &mut exec)?;
    }
    // Rounds of picked passes are spread over time as a profile's rounds are: every
    // chosen pass runs once before any runs again.
    for _ in 0..rounds {
        for &p in &chosen {
            time(1, &cx_picked, p, &mut exec)?;
            time(3, &cx_picked, p, &mut exec)?;
        }
    }
    let runs: Vec<HashMap<Key, f64>> = runs
        .into_iter()
        .map(|r| r.into_iter().map(|(k, v)| (k, Stats::of(&v).map_or(f64::NAN, |s| s.median))).collect())
        .collect();
    println!(
        "seconds measuring: whole {:.1} + {:.1}, picked {:.1} + {:.1}",
        seconds[0], seconds[2], seconds[1], seconds[3]
    );
    println!(
        "| kernels | pairs | whole′ vs whole (floor) | picked vs whole | picked′ vs whole′ | picked′ vs picked | median picked/whole |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (label, min_ns) in [("≥ 1 ms", 1e6), ("≥ 50 µs", 5e4), ("all", 0.0)] {
        let keys: Vec<&Key> = runs[0].iter().filter(|(_, t)| **t >= min_ns).map(|(k, _)| k).collect();
        let within = |a: usize, b: usize| {
            let n = keys.iter().filter(|k| (runs[b][**k] / runs[a][**k] - 1.0).abs() <= 0.05).count();
            format!("{:.1}%", 100.0 * n as f64 / keys.len().max(1) as f64)
        };
        let ratios: Vec<f64> = keys.iter().map(|k| runs[1][*k] / runs[0][*k]).collect();
        let median = Stats::of(&ratios).map_or(f64::NAN, |s| s.median);
        println!(
            "| {label} | {} | {} | {} | {} | {} | {median:.3} |",
            keys.len(),
            within(0, 2),
            within(0, 1),
            within(2, 3),
            within(1, 3)
        );
    }
    Ok(())
}
