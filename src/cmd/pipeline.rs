//! `placer pipeline [MODEL] [--budget B] [--sweep] [-o DIR]`: profile (resuming from the
//! checkpoint), solve, run the plan beside the baselines and all-DRAM, write a report.

use crate::args::{FormulationArg, HostArgs, StepsArg};
use crate::out::Deferred;
use crate::render::plans;
use crate::render::progress::{self, PassBar};
use crate::table::{Table, bytes};
use placer_eval::{MeasureOptions, PipelineEvent, PipelineRequest, Stage, SweepPoint, plan_label};
use placer_ir::Model;
use placer_profile::ProfileOptions;
use placer_solve::Budget;
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
    /// The ILP's formulation (as `placer solve --formulation`).
    #[arg(long, value_enum, default_value_t = FormulationArg::library_default())]
    formulation: FormulationArg,
    /// Solver time limit per solve, seconds.
    #[arg(long, default_value_t = 300.0)]
    time_limit: f64,
    /// Timed steps of each plan (interleaved).
    #[arg(long, short = 'n', default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    iterations: u64,
    /// Untimed steps in each plan's first turn. Every turn builds the plan's executor
    /// afresh, so only one plan's arenas are held at a time.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Untimed steps of a plan before each of its later timed ones, when several plans
    /// run interleaved, so each is timed in its own cache state rather than the one the
    /// plan before it left.
    #[arg(long, default_value_t = 1)]
    rewarm: usize,
    /// Profile: timed steps per pass, at least (see `placer profile --reps`); more are
    /// run until every picked kernel's median is known to 2%.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    reps: u32,
    /// Profile rounds (see `placer profile --rounds`).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// Profile: which steps time the kernels (see `placer profile --steps`).
    #[arg(long, value_enum, default_value_t = StepsArg::Auto)]
    steps: StepsArg,
    /// Where checkpoints live; an existing one for this model and host is resumed.
    #[arg(long, env = "PLACER_CHECKPOINT_DIR", default_value = "checkpoints")]
    checkpoint_dir: PathBuf,
    /// Do not measure copy bandwidth when the host cache has none: estimate moves from
    /// the pools' read and write bandwidth instead.
    #[arg(long)]
    no_probe: bool,
    /// Stop with an error (exit 2) instead of a warning when the host is busy, while
    /// profiling or before the plans are timed.
    #[arg(long)]
    require_quiet: bool,
    #[command(flatten)]
    host: HostArgs,
}

/// The model, how to name its source, and its file if it came from one.
fn load(path: Option<&Path>) -> anyhow::Result<(Model, String, Option<PathBuf>)> {
    let file = match path {
        Some(p) => p,
        None if Path::new(DEFAULT_MODEL).exists() => Path::new(DEFAULT_MODEL),
        // Outside the repository: the same model, built by the zoo.
        None => return Ok((placer_zoo::build("lenet-mnist", 256)?, "zoo lenet-mnist, batch 256".into(), None)),
    };
    Ok((placer_ir::load_model(file)?, file.display().to_string(), Some(file.to_path_buf())))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (model, source, file) = load(args.model.as_deref())?;
    let budget = Budget::parse(&args.budget)?;
    let mut host = args.host.open()?;
    let dir = args.output.clone().unwrap_or_else(|| Path::new("reports").join(model.name()));
    outln!("placer pipeline: {} ({source}), budget {budget}", model.name())?;
    // The budget is checked against DRAM's capacity: say where that figure came from.
    for note in host.layout.capacity_notes() {
        outln!("  capacity: {note}")?;
    }
    let request = PipelineRequest {
        model: &model,
        source: &source,
        budget,
        formulation: args.formulation.formulation(),
        time_limit: args.time_limit,
        profile: ProfileOptions {
            model_source: file,
            require_quiet: args.require_quiet,
            ..ProfileOptions::pipeline(args.reps, args.rounds).with_steps(args.steps.steps(&model))
        },
        checkpoint_dir: &args.checkpoint_dir,
        measure: MeasureOptions {
            warmup: args.warmup,
            iterations: args.iterations as usize,
            rewarm: args.rewarm,
            seed: 0x5EED,
            require_quiet: args.require_quiet,
        },
        sweep: args.sweep,
        no_probe: args.no_probe,
        output: &dir,
    };
    // Its length comes with the profiler's first report.
    let bar = PassBar::new(false, 0)?;
    let mut printed = Deferred::default();
    let outcome = placer_eval::pipeline(&request, &mut host, &mut |event| printed.keep(render(event, &bar)))?;
    printed.result()?;
    for path in &outcome.written {
        outln!("  wrote {}", path.display())?;
    }
    let comparison = placer_eval::Comparison::new(&outcome.measured);
    out!("{}", placer_eval::report::standing_section(&comparison, &outcome.result.plan))?;
    let pools: Vec<String> = outcome.result.plan.inputs.pools.iter().map(|p| p.name.clone()).collect();
    if let Some(note) = placer_eval::compare::huge_pages_note(&outcome.measured, &pools) {
        outln!("\n{note}")?;
    }
    if let Some((true, note)) = &outcome.memory {
        outln!("{note}")?;
    }
    if let Some(m) = outcome.measured.first() {
        outln!("{}", m.timing_note())?;
    }
    Ok(())
}

fn render(event: PipelineEvent<'_>, bar: &PassBar) -> std::io::Result<()> {
    match event {
        PipelineEvent::Stage(stage) => outln!(
            "{}",
            match stage {
                Stage::Profile => "1/4 profile",
                Stage::Solve => "2/4 solve",
                Stage::Run => "3/4 run the plan, the baselines and all-DRAM, interleaved",
                Stage::Report => "4/4 report",
            }
        ),
        PipelineEvent::ProfilePass(p) => {
            bar.update(p);
            Ok(())
        }
        PipelineEvent::Profiled { note } => {
            bar.finish();
            outln!("  {note}")
        }
        PipelineEvent::Inputs(e) => progress::inputs_event(e),
        PipelineEvent::Progress(line) => outln!("  {line}"),
        PipelineEvent::Solved(result) => {
            let plan = &result.plan;
            outln!(
                "  {}: predicted {:.3} ms per step = {:.3}× all-DRAM; DRAM budget {} of peak {}",
                plan_label(plan),
                plan.predicted.step_ns / 1e6,
                plan.predicted.step_ns / result.all_dram_ns,
                bytes(result.budget_bytes),
                bytes(result.peak_bytes)
            )
        }
        PipelineEvent::Compared(comparison) => out!("{}", plans::comparison_text(comparison)),
        PipelineEvent::SweepBudget { share } => outln!("sweep: budget {:.0}% of peak live memory", share * 100.0),
        PipelineEvent::SweepNoPlan(e) => outln!("  no plan at this budget: {e}"),
        PipelineEvent::Swept(points) => out!("{}", sweep_table(points).render()),
    }
}

fn sweep_table(points: &[SweepPoint]) -> Table {
    let mut t = Table::new(&["budget", "strategy", "measured ms"]);
    for p in points {
        for r in &p.comparison.rows {
            t.row(vec![format!("{:.0}%", p.share * 100.0), r.name.clone(), format!("{:.3}", r.measured_ms)]);
        }
    }
    t
}
