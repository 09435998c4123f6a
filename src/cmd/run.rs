//! `placer run MODEL [--iterations N] [--warmup W] [--place ROLE=POOL ...] [--json]`, or
//! `placer run MODEL --plan plan.json [--compare-baselines]`.

use crate::args::HostArgs;
use crate::out::Deferred;
use crate::render::{pages, plans};
use crate::table::{Table, bytes};
use placer_eval::{Beside, Comparison, LeftOut, MeasureOptions, PlanRunEvent};
use placer_exec::{RunOptions, RunSummary};
use placer_ir::Model;
use placer_pools::PoolSet;
use placer_solve::Plan;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The model file (model.json).
    model: PathBuf,
    /// Timed training steps.
    #[arg(long, short = 'n', default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    iterations: u64,
    /// Untimed steps before the timed ones.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Seed of the deterministic input and weight data.
    #[arg(long, default_value_t = 0x5EED)]
    seed: u64,
    /// How many of the slowest kernels to list.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Put every tensor of a role in a pool, e.g. `--place activation=pmem`; `all=POOL`
    /// for every tensor. Later options override earlier ones. Default: all in the first
    /// pool (local DRAM).
    #[arg(long, value_name = "ROLE=POOL", conflicts_with = "plan")]
    place: Vec<String>,
    /// Execute this plan (from `placer solve`): tensors at their planned pools and
    /// offsets, moves as planned; reports measured against predicted.
    #[arg(long, value_name = "PLAN")]
    plan: Option<PathBuf>,
    /// With --plan: also run every baseline at the plan's budget and all-DRAM,
    /// interleaved step by step in this process.
    #[arg(long, requires = "plan")]
    compare_baselines: bool,
    /// Untimed steps of a plan before each of its later timed ones, when several plans
    /// run interleaved (each turn builds the plan's executor afresh, and the first runs
    /// --warmup untimed steps), so each is timed in its own cache state rather than the
    /// one the plan before it left.
    #[arg(long, default_value_t = 1, requires = "compare_baselines")]
    rewarm: usize,
    /// Print the summary as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// With --plan: write each kernel's time as it ran in the plan (and its pools) to
    /// this file, for `placer compare FILE PROFILE` to judge a profile against.
    /// All-DRAM runs twice beside the plan, interleaved (A and A′): the host's pace, and
    /// the noise floor under the plan's error at that pace (three times the steps).
    #[arg(long, value_name = "FILE", requires = "plan")]
    in_situ: Option<PathBuf>,
    /// Stop with an error (exit 2) instead of a warning when the host is busy before the
    /// run (other processes competing for the CPUs, stolen time, unexplained jitter).
    #[arg(long)]
    require_quiet: bool,
    #[command(flatten)]
    host: HostArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let model = placer_ir::load_model(&args.model)?;
    if let Some(path) = &args.plan {
        return run_plan(&args, &model, path);
    }
    let mut host = args.host.open()?;
    let pools = host.pool_set()?;
    let options = RunOptions { warmup: args.warmup, iterations: args.iterations as usize, seed: args.seed };
    let run = placer_eval::run_plain(&model, pools, &args.place, &options, args.require_quiet)?;
    if let Some(warning) = run.host.and_then(|a| a.warning("before the run")) {
        errln!("warning: {warning}");
    }
    let summary = RunSummary::new(&model, &run.report, args.top).ok_or_else(|| anyhow::anyhow!("no timed steps"))?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&summary)?)?;
    } else {
        out!("{}", render(&summary, run.executor.pools(), host.layout.topology.virtual_machine))?;
    }
    Ok(())
}

fn run_plan(args: &Args, model: &Model, path: &Path) -> anyhow::Result<()> {
    let plan = Plan::load(path)?;
    let mut host = args.host.open()?;
    let options = MeasureOptions {
        warmup: args.warmup,
        iterations: args.iterations as usize,
        rewarm: args.rewarm,
        seed: args.seed,
        require_quiet: args.require_quiet,
    };
    // With --json, stdout carries only the JSON.
    let json = args.json;
    let mut printed = Deferred::default();
    let mut events = |event: PlanRunEvent<'_>| match event {
        PlanRunEvent::LeftOut(LeftOut::ProfileGone { profile }) => {
            errln!("note: the plan's profile {profile} is gone; baselines are costed by the cost model alone");
        }
        PlanRunEvent::LeftOut(LeftOut::FailedCheck { baseline }) => {
            errln!("note: baseline {baseline} failed the plan checker; left out");
        }
        PlanRunEvent::LeftOut(LeftOut::NoPlan { baseline, why }) => {
            errln!("note: baseline {baseline} has no plan: {why}");
        }
        PlanRunEvent::Progress(line) if json => errln!("  {line}"),
        PlanRunEvent::Progress(line) => printed.keep(outln!("  {line}")),
    };
    let planned = args.in_situ.as_ref().map(|_| plan.clone());
    // An in-situ record carries all-DRAM's run beside the plan's: looked up in the
    // profile as the plan's kernels are, the shift common to every placement (the
    // host's pace; docs/profiling.md).
    let beside = match (args.compare_baselines, args.in_situ.is_some()) {
        (true, _) => Beside::Baselines,
        (false, true) => Beside::AllDram,
        (false, false) => Beside::Nothing,
    };
    let measured = placer_eval::run_plan(model, &mut host, plan, beside, &options, &mut events)?;
    printed.result()?;
    let pools = host.pool_set()?;
    if let (Some(file), Some(plan)) = (&args.in_situ, &planned) {
        placer_eval::in_situ(model, plan, &measured, &pools, &host.fingerprint)?.save(file)?;
        errln!(
            "wrote each kernel's time in the plan to {} (compare it: placer compare {} PROFILE)",
            file.display(),
            file.display()
        );
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&measured)?)?;
        return Ok(());
    }
    out!("{}", plans::facts(&measured[0], &pools).render())?;
    outln!()?;
    outln!("kernels furthest from their prediction")?;
    out!("{}", plans::kernels(&measured[0], model, args.top).render())?;
    if measured.len() > 1 {
        outln!()?;
        outln!("side by side, interleaved ({} timed steps each)", args.iterations)?;
        out!("{}", plans::comparison_text(&Comparison::new(&measured)))?;
    }
    let names: Vec<String> = pools.pools().iter().map(|p| p.name.clone()).collect();
    if let Some(note) = placer_eval::compare::huge_pages_note(&measured, &names) {
        outln!("\n{note}")?;
    }
    Ok(())
}

fn ms(v: f64) -> String {
    format!("{v:.3}")
}

fn render(s: &RunSummary, pools: &PoolSet, virtual_machine: bool) -> String {
    let mut facts = Table::new(&["model", &format!("{} ({})", s.model, &s.content_hash[..16])]);
    for (pool, (name, peak)) in pools.pools().iter().zip(&s.pool_peaks) {
        facts.row(vec![
            format!("pool {name}"),
            format!("{}: {} allocated of {}{}", pool.describe(), bytes(*peak), bytes(pool.capacity), pages(pool)),
        ]);
    }
    facts.row(vec![
        "timing".into(),
        if s.emulated {
            let pools: Vec<String> = s.emulated_pools.iter().map(placer_exec::EmulatedPoolUse::describe).collect();
            format!(
                "EMULATED: tensors in {}: each kernel waits what the device model charges \
                 (median {} ms of waiting per step); these are not measurements of that device",
                pools.join(", "),
                ms(s.emulated_wait_ms.median)
            )
        } else {
            let slow_real = pools
                .pools()
                .iter()
                .zip(&s.pool_peaks)
                .any(|(p, (_, peak))| *peak > 0 && !p.is_emulated() && p.kind != placer_pools::PoolKind::Dram);
            if virtual_machine && slow_real {
                "measured on real memory, in a virtual machine: its NUMA nodes are as fast as the hypervisor's \
                 memory behind them, not as the devices they are named for"
                    .into()
            } else {
                "measured on real memory: no tensor is in an emulated pool".into()
            }
        },
    ]);
    facts.row(vec!["scratch".into(), bytes(s.scratch_bytes)]);
    facts.row(vec![
        "clock".into(),
        format!(
            "monotonic, resolution {:.0} ns, {:.0} ns per reading; shortest kernel median {:.1} µs; \
             {} kernel(s) under {:.1} µs carry over 1% timer error",
            s.clock.resolution_ns,
            s.clock.overhead_ns,
            s.shortest_kernel_us,
            s.kernels_near_clock,
            s.near_clock_threshold_us
        ),
    ]);
    let st = &s.step_ms;
    facts.row(vec![
        "step".into(),
        format!(
            "median {} ms, MAD {} ms, CV {:.1}%, min {} ms, max {} ms ({} timed after {} warm-up)",
            ms(st.median),
            ms(st.mad),
            100.0 * st.cv,
            ms(st.min),
            ms(st.max),
            s.iterations,
            s.warmup
        ),
    ]);
    facts.row(vec![
        "kernels".into(),
        format!(
            "median {} ms per step ({:.1}% of the step)",
            ms(s.kernels_ms.median),
            100.0 * s.kernels_ms.median / st.median
        ),
    ]);
    if let (Some(first), Some(last)) = (s.first_loss, s.last_loss) {
        facts.row(vec!["loss".into(), format!("{first:.4} after the first step, {last:.4} after the last")]);
    }
    let mut out = facts.render();

    out.push_str(&format!("\nslowest {} kernels\n", s.slowest.len()));
    let mut slow = Table::new(&["node", "op", "phase", "median µs", "MAD µs", "share", "GFLOP/s"]);
    for k in &s.slowest {
        slow.row(vec![
            k.node.clone(),
            k.op.to_string(),
            k.phase.to_string(),
            format!("{:.1}", k.median_us),
            format!("{:.1}", k.mad_us),
            format!("{:.1}%", 100.0 * k.share),
            format!("{:.1}", k.gflops_per_s),
        ]);
    }
    out.push_str(&slow.render());

    out.push_str("\nby op\n");
    let mut ops = Table::new(&["op", "nodes", "median ms", "share", "GFLOP", "GFLOP/s"]);
    for o in &s.by_op {
        ops.row(vec![
            o.op.to_string(),
            o.nodes.to_string(),
            ms(o.median_ms),
            format!("{:.1}%", 100.0 * o.share),
            format!("{:.3}", o.gflop),
            format!("{:.1}", o.gflops_per_s),
        ]);
    }
    out.push_str(&ops.render());
    out
}
