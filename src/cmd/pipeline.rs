//! `placer pipeline [MODEL] [--budget B] [--sweep] [-o DIR]`: profile (resuming from the
//! checkpoint), solve, run the plan beside the baselines and all-DRAM, write a report.

use super::host_args::HostArgs;
use super::plans;
use super::run::plan_label;
use super::solve::{FormulationArg, SolveInputs, solve_inputs};
use crate::table::{Table, bytes, count};
use anyhow::Context as _;
use placer_eval::{Comparison, Contender, EvalError, MeasureOptions, Measured, Report, SweepPoint};
use placer_host::Host;
use placer_ir::Model;
use placer_profile::session::{self, ProfileOptions};
use placer_profile::{Mode, Protocol};
use placer_solve::ilp::IlpOptions;
use placer_solve::{Budget, SolveRequest, SolveResult};
use std::path::{Path, PathBuf};

/// The bundled default: LeNet on MNIST-sized inputs, batch 256.
const DEFAULT_MODEL: &str = "configs/models/lenet-mnist-b256.json";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The model file [default: the bundled lenet-mnist, batch 256].
    model: Option<PathBuf>,
    /// DRAM budget: a size (64GB, 512MiB) or a share of peak live memory (25%).
    #[arg(long, default_value = "25%", allow_hyphen_values = true)]
    budget: String,
    /// Also solve and run at budgets from 10% to 100% of peak live memory.
    #[arg(long)]
    sweep: bool,
    /// The report directory [default: reports/MODEL].
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = FormulationArg::Async)]
    formulation: FormulationArg,
    /// Solver time limit per solve, seconds.
    #[arg(long, default_value_t = 300.0)]
    time_limit: f64,
    /// Timed steps of each plan (interleaved).
    #[arg(long, short = 'n', default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    iterations: u64,
    /// Untimed steps of each plan first.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Profile: timed steps per pass, at least (see `placer profile --reps`).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    reps: u32,
    /// Profile rounds (see `placer profile --rounds`).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// Where checkpoints live; an existing one for this model and host is resumed.
    #[arg(long, default_value = "checkpoints")]
    checkpoint_dir: PathBuf,
    /// Do not measure copy bandwidth when the host cache has none: estimate moves from
    /// the pools' read and write bandwidth instead.
    #[arg(long)]
    no_probe: bool,
    #[command(flatten)]
    host: HostArgs,
}

fn load(path: Option<&Path>) -> anyhow::Result<(Model, String)> {
    match path {
        Some(p) => Ok((placer_ir::load_model(p)?, p.display().to_string())),
        None if Path::new(DEFAULT_MODEL).exists() => {
            Ok((placer_ir::load_model(Path::new(DEFAULT_MODEL))?, DEFAULT_MODEL.into()))
        }
        // Outside the repository: the same model, built by the zoo.
        None => Ok((placer_zoo::build("lenet-mnist", 256)?, "zoo lenet-mnist, batch 256".into())),
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (model, source) = load(args.model.as_deref())?;
    let budget = Budget::parse(&args.budget)?;
    let mut host = args.host.open()?;
    let dir = args.output.clone().unwrap_or_else(|| Path::new("reports").join(model.name()));
    println!("placer pipeline: {} ({source}), budget {budget}", model.name());

    println!("1/4 profile");
    let (checkpoint, profile_note) = profile(&model, &mut host, &args)?;
    println!("  {profile_note}");

    println!("2/4 solve");
    let inputs = solve_inputs(&model, &mut host, Some(&checkpoint), &[], args.no_probe)?;
    let result = solve(&model, &inputs, &args, budget, &checkpoint)?;
    let plan = &result.plan;
    println!(
        "  {}: predicted {:.3} ms per step = {:.3}× all-DRAM; DRAM budget {} of peak {}",
        plan_label(plan),
        plan.predicted.step_ns / 1e6,
        plan.predicted.step_ns / result.all_dram_ns,
        bytes(result.budget_bytes),
        bytes(result.peak_bytes)
    );

    println!("3/4 run the plan, the baselines and all-DRAM, interleaved");
    let measured = measure(&model, &mut host, &result, &args)?;
    let comparison = Comparison::new(&measured);
    print!("{}", plans::comparison(&comparison).render());

    let sweep = if args.sweep { Some(sweep(&model, &mut host, &inputs, &args, &checkpoint)?) } else { None };

    println!("4/4 report");
    let facts = facts(&model, &source, &inputs, &result, &checkpoint, &profile_note, &measured);
    let report = Report { model: &model, plan, measured: &measured, facts, sweep: sweep.as_deref() };
    let written = report.write(&dir)?;
    for path in &written {
        println!("  wrote {}", path.display());
    }
    if let Some(m) = measured.first() {
        println!("{}", plans::emulation_line(m));
    }
    Ok(())
}

fn profile(model: &Model, host: &mut Host, args: &Args) -> anyhow::Result<(PathBuf, String)> {
    let pools = host.pool_set()?;
    let options = ProfileOptions {
        mode: Mode { max_simultaneous: 64, two_hop: false, sample: None, max_configs: 256 },
        protocol: Protocol {
            warmup: 2,
            reps: args.reps,
            max_reps: args.reps.max(31),
            cv_target: 0.02,
            seed: 0x5EED,
            rounds: args.rounds,
        },
        pins: Vec::new(),
    };
    let plan = session::plan(model, &pools, &host.fingerprint, &options)?;
    let path = args.checkpoint_dir.join(session::checkpoint_name(model, &options.mode));
    std::fs::create_dir_all(&args.checkpoint_dir)
        .with_context(|| format!("cannot create {}", args.checkpoint_dir.display()))?;
    let started = std::time::Instant::now();
    let (profile, resumed) = super::profile::measure(model, pools, &plan, &path, false, false)?;
    let total = plan.passes.len() * args.rounds as usize;
    let note = format!(
        "{}: {} measurements, {} passes ({} resumed from the checkpoint), {:.1} s",
        path.display(),
        count(profile.measurements.len() as u64),
        total,
        resumed.min(total),
        started.elapsed().as_secs_f64()
    );
    Ok((path, note))
}

fn solve(
    model: &Model,
    inputs: &SolveInputs,
    args: &Args,
    budget: Budget,
    checkpoint: &Path,
) -> anyhow::Result<SolveResult> {
    let formulation = args.formulation.formulation();
    let request = SolveRequest {
        model,
        costs: &inputs.costs,
        pools: inputs.pools.clone(),
        budget,
        pins: inputs.pins.clone(),
        options: IlpOptions { formulation, time_limit: args.time_limit, ..IlpOptions::default() },
        profile: Some(checkpoint.display().to_string()),
    };
    let mut progress = |line: &str| println!("  {line}");
    let result = placer_solve::solve(&request, &mut progress)?;
    if !result.check.ok() {
        anyhow::bail!(
            "the plan checker found problems in the solver's plan (a bug; please report it): {}",
            result.check.problems.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
        );
    }
    Ok(result)
}

/// The plan, every baseline the checker passed, and all-DRAM.
fn contenders(result: &SolveResult) -> Vec<Contender> {
    let mut out = vec![Contender { name: plan_label(&result.plan), plan: result.plan.clone() }];
    for c in &result.baselines {
        if let Ok((plan, check)) = &c.outcome
            && check.ok()
        {
            out.push(Contender { name: c.name.clone(), plan: plan.clone() });
        }
    }
    if !result.no_placement_needed {
        out.push(Contender { name: "all-dram".into(), plan: result.all_dram.clone() });
    }
    out
}

fn measure(model: &Model, host: &mut Host, result: &SolveResult, args: &Args) -> anyhow::Result<Vec<Measured>> {
    let options = MeasureOptions { warmup: args.warmup, iterations: args.iterations as usize, seed: 0x5EED };
    let mut progress = |line: &str| println!("  {line}");
    let mut pools = || host.pool_set().map_err(EvalError::from);
    Ok(placer_eval::measure(model, &mut pools, &contenders(result), &options, &mut progress)?)
}

fn sweep(
    model: &Model,
    host: &mut Host,
    inputs: &SolveInputs,
    args: &Args,
    checkpoint: &Path,
) -> anyhow::Result<Vec<SweepPoint>> {
    let mut points = Vec::new();
    for tenth in 1..=10 {
        let share = f64::from(tenth) / 10.0;
        println!("sweep: budget {:.0}% of peak live memory", share * 100.0);
        let result = match solve(model, inputs, args, Budget::Fraction(share), checkpoint) {
            Ok(r) => r,
            // A budget below what any placement needs is a point with no plan, not the
            // end of the sweep.
            Err(e) if matches!(e.downcast_ref(), Some(placer_solve::SolveError::Infeasible { .. })) => {
                println!("  no plan at this budget: {e:#}");
                continue;
            }
            Err(e) => return Err(e),
        };
        let measured = measure(model, host, &result, args)?;
        let comparison = Comparison::new(&measured);
        print!("{}", plans::comparison(&comparison).render());
        points.push(SweepPoint { share, budget_bytes: result.budget_bytes, comparison });
    }
    let mut t = Table::new(&["budget", "strategy", "measured ms"]);
    for p in &points {
        for r in &p.comparison.rows {
            t.row(vec![format!("{:.0}%", p.share * 100.0), r.name.clone(), format!("{:.3}", r.measured_ms)]);
        }
    }
    print!("{}", t.render());
    Ok(points)
}

fn facts(
    model: &Model,
    source: &str,
    inputs: &SolveInputs,
    result: &SolveResult,
    checkpoint: &Path,
    profile_note: &str,
    measured: &[Measured],
) -> Vec<(String, String)> {
    let plan = &result.plan;
    let pools: Vec<String> = inputs
        .pools
        .pools
        .iter()
        .map(|p| match &p.emulated_as {
            Some(d) => format!("{} (EMULATED {d}, {})", p.name, bytes(p.capacity)),
            None => format!("{} ({})", p.name, bytes(p.capacity)),
        })
        .collect();
    let mut facts = vec![
        ("model".to_string(), format!("{} from {source}: {} kernels", model.name(), model.schedule().len())),
        ("pools".to_string(), pools.join(", ")),
        ("profile".to_string(), profile_note.to_string()),
        (
            "budget".to_string(),
            format!(
                "{} ({:.0}% of peak live memory, {})",
                bytes(result.budget_bytes),
                100.0 * result.budget_bytes as f64 / result.peak_bytes.max(1) as f64,
                bytes(result.peak_bytes)
            ),
        ),
    ];
    if let Some(s) = &plan.solver {
        facts.push((
            "solver".to_string(),
            format!(
                "{} {}: proven gap {:.2}% of the step, {:.1} s",
                plan_label(plan),
                s.status,
                100.0 * s.gap_of_step,
                s.total_seconds
            ),
        ));
    }
    facts.push((
        "predicted".to_string(),
        format!(
            "{:.3} ms per step ({} kernels measured by the profile, {} estimated), all-DRAM {:.3} ms",
            plan.predicted.step_ns / 1e6,
            plan.predicted.measured_kernels,
            plan.predicted.estimated_kernels,
            result.all_dram_ns / 1e6
        ),
    ));
    if let Some(m) = measured.first() {
        facts.push(("timing".to_string(), plans::emulation_line(m)));
    }
    facts.push(("checkpoint".to_string(), checkpoint.display().to_string()));
    facts
}
