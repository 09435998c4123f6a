//! Do a profile's passes time the all-DRAM configurations as a whole all-DRAM step
//! does? Each first-stage pass (its picks placed as their configurations say, emulated
//! waits and all) is followed at once by a whole all-DRAM step of the same engine (the
//! profile's reference pass), in rounds; the picks whose configuration is all-DRAM are
//! set beside the same nodes in that step. Kernels under 20 µs are left out.
//! `cargo run --release -p placer-profile --example base_picks -- MODEL.json [ROUNDS]`

#![allow(clippy::print_stdout)] // a command-line tool: printing is its output

mod common;
use placer_profile::{lab::PassContext, lab::reference_pass, lab::run_pass};
use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let Some(model) = args.get(1) else {
        return Err("usage: base_picks MODEL.json [ROUNDS]".into());
    };
    let model = placer_ir::load_model(Path::new(model))?;
    let rounds: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(2);
    let common::Bench { options, plan, base, engine: mut exec, reference_ns: first, conflicts } = common::open(&model)?;
    let cx = PassContext {
        model: &model,
        tasks: &plan.measured,
        base: &base,
        protocol: &options.protocol,
        conflicts: &conflicts,
        reference_ns: &first,
    };
    let index = |name: &str| model.nodes().iter().position(|n| n.name == name);
    let (mut sb, mut sr, mut sf) = (0.0, 0.0, 0.0);
    for r in 0..rounds {
        for (p, picks) in plan.passes.iter().enumerate() {
            let result = run_pass(&mut exec, &cx, picks, p as u32)?;
            let now = reference_pass(&mut exec, &model, &base, &options.protocol)?;
            let (mut b, mut n, mut f) = (0.0, 0.0, 0.0);
            for m in &result.measurements {
                if m.config.iter().all(|&c| c == 0)
                    && let Some(i) = index(&m.node)
                    && now[i] > 20_000.0
                {
                    b += m.median_ns;
                    n += now[i];
                    f += first[i];
                }
            }
            println!(
                "round {r} pass {p}: base picks {:.3} ms, same nodes whole step now {:.3} ms (ratio {:.3}), in first reference {:.3} ms; pass drift {:.3}",
                b / 1e6,
                n / 1e6,
                b / n,
                f / 1e6,
                result.drift
            );
            sb += b;
            sr += n;
            sf += f;
        }
    }
    println!("all: base picks / whole-now {:.3}, whole-now / first reference {:.3}", sb / sr, sr / sf);
    Ok(())
}
