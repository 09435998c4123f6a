//! `placer solve [MODEL] --budget B [--profile CKPT] [--formulation static|sync|async]
//! [--time-limit S] [--gap G] [--placement-gap G] [-o plan.json] [--baselines]`
//!
//! Without a model, the checkpoint (`--profile`, else the most recent in
//! `--checkpoint-dir`) names the model file it measured. With a model and no
//! `--profile`, the most recent checkpoint of that model in `--checkpoint-dir` is used.

mod overhead;

use crate::args::{FormulationArg, HostArgs};
use crate::out::Deferred;
use crate::render::progress;
use crate::table::{Table, bytes, count};
use placer_profile::Profile;
use placer_solve::{
    Budget, Costs, IlpOptions, KernelCost, SolveInputs, SolvePools, SolveRequest, SolveResult, StageTime,
    UNCALIBRATED_SHARE,
};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The model file (model.json). Without it, the model the checkpoint measured: the
    /// `--profile` checkpoint's, or the most recent checkpoint's in `--checkpoint-dir`.
    model: Option<PathBuf>,
    /// DRAM budget: a size (64GB, 64GiB, 512MiB) or a share of peak live memory (0.25, 25%).
    #[arg(long, allow_hyphen_values = true)]
    budget: String,
    /// Kernel times: a checkpoint written by `placer profile` for this model and host.
    /// Without it, the most recent checkpoint of the model in `--checkpoint-dir`; with
    /// none there, every time comes from the cost model (docs/solving.md).
    #[arg(long, value_name = "CKPT")]
    profile: Option<PathBuf>,
    /// Where to look for the most recent checkpoint (of the model, when one is named)
    /// when `--profile` is not given.
    #[arg(long, env = "PLACER_CHECKPOINT_DIR", default_value = "checkpoints")]
    checkpoint_dir: PathBuf,
    /// `static`: one pool a tensor; `sync`: blocking moves at uses; `async`: also
    /// background moves beside kernels (docs/solving.md, "The formulations").
    #[arg(long, value_enum, default_value_t = FormulationArg::library_default())]
    formulation: FormulationArg,
    /// Time limit for the whole solve, seconds: baselines, every ILP stage, the arena's
    /// fit and the checks. When it hits, the best checked plan so far is returned.
    #[arg(long, default_value_t = 300.0)]
    time_limit: f64,
    /// Stop once the proven gap is at most this share of the step time (0.01 = 1%).
    #[arg(long, default_value_t = 0.01)]
    gap: f64,
    /// Large async solves (improved window by window) also keep going, while time is
    /// left, until the proven gap is at most this share of what the placement adds.
    #[arg(long, default_value_t = 0.25)]
    placement_gap: f64,
    /// Where to write the plan.
    #[arg(short = 'o', long, default_value = "plan.json")]
    output: PathBuf,
    /// Also print every baseline's predicted step time, checked like the plan.
    #[arg(long)]
    baselines: bool,
    /// Also write every baseline's checked plan into this directory, as `NAME.json`
    /// (first-touch, interleave, greedy, ...): what placer_torch applies beside the plan.
    #[arg(long, value_name = "DIR")]
    baseline_plans: Option<PathBuf>,
    /// Fix tensors to a pool: `role=weight:dram` or `tensor=NAME:pmem`. Repeatable; the
    /// profile's own pins always apply.
    #[arg(long, value_name = "RULE")]
    pin: Vec<placer_profile::PinRule>,
    /// Async: how many steps before or after a use a copy may run.
    #[arg(long, default_value_t = 5)]
    async_window: usize,
    /// Async: copies may overlap only the longest kernels, this share of them.
    #[arg(long, default_value_t = 1.0)]
    async_share: f64,
    /// Async: a copy may overlap a kernel only if the kernel could hide this share of it.
    #[arg(long, default_value_t = 0.25)]
    min_hidden: f64,
    /// Async, large models: about how many binaries each improvement window frees.
    #[arg(long, default_value_t = 1500, hide = true)]
    window_binaries: usize,
    /// Async, large models: improvement windows solved at once (default: one per core,
    /// at most four).
    #[arg(long, value_name = "N", hide = true)]
    window_workers: Option<usize>,
    /// Async: start from the best baseline instead of solving the sync formulation first
    /// (to measure what the sync stage buys).
    #[arg(long, hide = true)]
    no_sync_first: bool,
    /// Tensors smaller than this keep one pool for life (sync and async).
    #[arg(long, default_value = "64KiB")]
    small_tensor: String,
    /// Show the solver's log.
    #[arg(long, short)]
    verbose: bool,
    /// Do not measure copy bandwidth when the host cache has none: estimate moves from
    /// the pools' read and write bandwidth instead.
    #[arg(long)]
    no_probe: bool,
    #[command(flatten)]
    host: HostArgs,
}

/// What `solve` works on: the model, the checkpoint (its path and profile, read once)
/// when there is one, and how they were chosen (for the header).
struct Chosen {
    model: placer_ir::Model,
    checkpoint: Option<PathBuf>,
    profile: Option<Profile>,
    note: Option<String>,
}

fn choose(args: &Args) -> anyhow::Result<Chosen> {
    let with = |model, checkpoint: Option<PathBuf>, note| -> anyhow::Result<Chosen> {
        let profile = checkpoint.as_deref().map(placer_profile::load_checkpoint).transpose()?;
        Ok(Chosen { model, checkpoint, profile, note })
    };
    if let Some(path) = &args.model {
        let model = placer_ir::load_model(path)?;
        if let Some(given) = &args.profile {
            return with(model, Some(given.clone()), None);
        }
        let found = placer_profile::latest_of(&args.checkpoint_dir, &model)?;
        let note = found.as_ref().map(|checkpoint| {
            format!(
                "{} with checkpoint {} (the most recent of this model in {})",
                model.name(),
                checkpoint.display(),
                args.checkpoint_dir.display()
            )
        });
        return with(model, found, note);
    }
    let (checkpoint, how) = match &args.profile {
        Some(path) => (path.clone(), "given"),
        None => (placer_profile::latest(&args.checkpoint_dir)?, "the most recent"),
    };
    let found = placer_profile::profiled(&checkpoint)?;
    let note = format!(
        "{} from {}, as checkpoint {} ({how}) recorded it",
        found.model.name(),
        found.origin,
        checkpoint.display()
    );
    Ok(Chosen { model: found.model, checkpoint: Some(checkpoint), profile: Some(found.profile), note: Some(note) })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let Chosen { model, checkpoint, profile: read, note: chosen } = choose(&args)?;
    let budget = Budget::parse(&args.budget)?;
    let small_tensor = placer_units::parse_bytes(&args.small_tensor)
        .map_err(|reason| placer_solve::SolveError::Usage { reason: format!("--small-tensor: {reason}") })?;
    let log_file = std::env::temp_dir().join(format!("placer-highs-{}.log", std::process::id()));
    let options = IlpOptions {
        formulation: args.formulation.formulation(),
        time_limit: args.time_limit,
        gap: args.gap,
        placement_gap: args.placement_gap,
        async_window: args.async_window,
        async_kernel_share: args.async_share,
        min_hidden_share: args.min_hidden,
        window_binaries: args.window_binaries,
        window_workers: args.window_workers,
        sync_first: !args.no_sync_first,
        small_tensor_bytes: small_tensor,
        verbose: args.verbose,
        log_file: Some(log_file.clone()),
        ..IlpOptions::default()
    };
    // Before the host is opened: a bad limit must not cost a probe first.
    options.check()?;
    let mut host = args.host.open()?;
    let mut printed = Deferred::default();
    let SolveInputs { pools, costs, pins, profile } = placer_solve::solve_inputs(
        &model,
        &mut host,
        checkpoint.as_deref().zip(read),
        &args.pin,
        args.no_probe,
        &mut |event| printed.keep(progress::inputs_event(event)),
    )?;
    printed.result()?;
    let request = SolveRequest {
        model: &model,
        costs: &costs,
        pools: pools.clone(),
        budget,
        pins,
        options,
        profile: checkpoint.as_ref().map(|p| p.display().to_string()),
        every_baseline: args.baselines || args.baseline_plans.is_some(),
    };
    if let Some(chosen) = &chosen {
        outln!("solving {chosen}")?;
    }
    let mut table =
        header(&model, &pools, &costs, profile.as_ref(), checkpoint.as_deref(), &args.checkpoint_dir, &budget);
    // The budget is checked against DRAM's capacity: say where that figure came from.
    for note in host.layout.capacity_notes() {
        table.row(vec!["capacity".into(), note]);
    }
    out!("{}", table.render())?;
    let mut printed = Deferred::default();
    let result = placer_solve::solve(&request, &mut |line| printed.keep(outln!("  {line}")));
    let _ = std::fs::remove_file(&log_file);
    let _ = std::fs::remove_file(log_file.with_extension("sync.log"));
    let result = result?;
    // The plan is kept even when the progress could not be printed.
    result.plan.save(&args.output)?;
    printed.result()?;
    out!("{}", summary(&result, &pools).render())?;
    if args.verbose {
        out!("\n{}", stage_table(&result.stages).render())?;
    }
    if args.baselines {
        out!("\n{}", baseline_table(&result))?;
    }
    outln!("wrote {}", args.output.display())?;
    if let Some(dir) = &args.baseline_plans {
        anyhow::Context::with_context(std::fs::create_dir_all(dir), || format!("cannot create {}", dir.display()))?;
        for c in &result.baselines {
            if let Ok((plan, check)) = &c.outcome
                && check.ok()
            {
                // "EMULATED 2LM" is a label; its file is emulated-2lm.json.
                let path = dir.join(format!("{}.json", c.name.to_lowercase().replace(' ', "-")));
                plan.save(&path)?;
                outln!("wrote {}", path.display())?;
            }
        }
    }
    if pools.any_emulated() {
        outln!("EMULATED: {} — predictions are for the device model, not measurements of it.", emulated_list(&pools))?;
    }
    Ok(())
}

fn emulated_list(pools: &SolvePools) -> String {
    pools
        .pools
        .iter()
        .filter_map(|p| p.emulated_as.as_ref().map(|d| format!("pool '{}' is emulated as {d}", p.name)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

fn header(
    model: &placer_ir::Model,
    pools: &SolvePools,
    costs: &Costs,
    profile: Option<&Profile>,
    checkpoint: Option<&Path>,
    searched: &Path,
    budget: &Budget,
) -> Table {
    let mut t = Table::new(&["model", &format!("{} ({} kernels)", model.name(), count(model.schedule().len() as u64))]);
    let pool_text: Vec<String> = pools
        .pools
        .iter()
        .map(|p| {
            let label = p.emulated_as.as_ref().map_or(String::new(), |d| format!(" EMULATED {d}"));
            format!("{}{label} ({}, read {:.1} GB/s from {})", p.name, bytes(p.capacity), p.read_gbps, p.source)
        })
        .collect();
    t.row(vec!["pools".into(), pool_text.join("; ")]);
    let mut moves = Vec::new();
    for (i, from) in pools.pools.iter().enumerate() {
        for (j, to) in pools.pools.iter().enumerate() {
            if i != j {
                moves.push(format!("{}→{} {:.1} GB/s", from.name, to.name, 1.0 / pools.move_ns_per_byte[i][j]));
            }
        }
    }
    let how = if pools.moves_measured { "measured copies" } else { "estimated: read + write" };
    t.row(vec!["moves".into(), format!("{} ({how})", moves.join(", "))]);
    let cpu: Vec<String> = (0..pools.len())
        .flat_map(|i| (0..pools.len()).filter(move |&j| j != i).map(move |j| (i, j)))
        .map(|(i, j)| {
            format!("{}→{} {:.3} ns/B", pools.pools[i].name, pools.pools[j].name, pools.copy_cpu_ns_per_byte[i][j])
        })
        .collect();
    if !cpu.is_empty() {
        let range = |f: fn(&KernelCost) -> f64| {
            costs
                .kernels
                .iter()
                .map(|k| f(k).max(0.0))
                .fold((f64::INFINITY, 0.0f64), |(lo, hi), s| (lo.min(s), hi.max(s)))
        };
        let (fixed, shares) = if let Some(l) = costs.copy_level {
            (
                "nothing".to_string(),
                format!(
                    "{:.2} for every kernel: what its framework's whole step lost beside a copy thread, {:.3} ns per byte copied, over the memcpy alone; the calibration's shares, timed on kernels alone, would have charged {:.3} and are set aside",
                    l.share, l.loss_ns_per_byte, l.calibrated_ns_per_byte
                ),
            )
        } else if costs.interference_calibrated {
            let (lo, hi) = range(|k| k.interference_fixed_ns);
            let (slo, shi) = range(|k| k.interference_share);
            (
                format!("{:.0}-{:.0} µs by op", lo / 1e3, hi / 1e3),
                format!("{slo:.2}-{shi:.2} by op and signature; both measured by the profile"),
            )
        } else {
            let reason = "not measured: the profile has no interference calibration";
            ("nothing".to_string(), format!("{UNCALIBRATED_SHARE}; {reason}"))
        };
        t.row(vec![
            "copy beside a kernel".into(),
            format!(
                "costs it {fixed} plus a share ({shares}) of the copy's CPU time, {} (copies to or from an emulated pool: {})",
                cpu.join(", "),
                pools.memcpy_source
            ),
        ]);
    }
    let m = &costs.model;
    let times = match (profile, checkpoint) {
        (Some(p), Some(path)) => format!(
            "{}: {} measured configurations{}{}",
            path.display(),
            count(costs.measured_count() as u64),
            match costs.predicted_count() {
                0 => String::new(),
                n => format!(", {} predicted by its screening design", count(n as u64)),
            },
            if p.is_complete() {
                String::new()
            } else {
                format!(" (incomplete: {}/{} passes)", p.passes_done, p.passes_total)
            }
        ),
        // Only a named model without `--profile` gets here: `searched` held none of it.
        _ => format!(
            "no profile (no checkpoint of this model in {}): every kernel time is estimated by the cost model; `placer profile MODEL` measures them",
            searched.display()
        ),
    };
    t.row(vec!["times".into(), times]);
    if let Some(k) = profile.and_then(|p| p.kernels.as_ref()) {
        t.row(vec!["kernels timed".into(), k.describe()]);
    }
    if let Some(p) = profile {
        let overhead = overhead::step_overhead(p.step_overhead.as_ref(), p.kernels.as_ref());
        t.row(vec!["step overhead".into(), overhead]);
    }
    t.row(vec![
        "cost model".into(),
        format!(
            "base fitted to {} all-DRAM times, pools to {} others; extra ns per byte read/written: {}",
            m.base_fitted_from,
            m.pools_fitted_from,
            (1..pools.len())
                .map(|p| format!(
                    "{} {:.3}/{:.3}",
                    pools.pools[p].name, m.read_extra_ns_per_byte[p], m.write_extra_ns_per_byte[p]
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ]);
    t.row(vec!["budget".into(), budget.to_string()]);
    t
}

fn summary(r: &SolveResult, pools: &SolvePools) -> Table {
    let plan = &r.plan;
    let mut t = Table::new(&["peak live", &format!("{} (DRAM budget {})", bytes(r.peak_bytes), bytes(r.budget_bytes))]);
    if let Some(s) = &plan.solver {
        t.row(vec![
            "solver".into(),
            format!(
                "HiGHS {}: proven gap {:.3}% of the step time ({:.2}% of what the placement adds); {:.1} s in all, {:.1} s in the last stage (+{:.1} s to build it); first feasible plan at {}; {} variables ({} binary), {} constraints, {} nonzeros",
                s.status,
                s.gap_of_step * 100.0,
                s.gap * 100.0,
                s.total_seconds,
                s.solve_seconds,
                s.build_seconds,
                s.first_feasible_seconds.map_or("(not in the log)".into(), |f| format!("{f:.2} s")),
                count(s.size.variables as u64),
                count(s.size.binaries as u64),
                count(s.size.constraints as u64),
                count(s.size.nonzeros as u64)
            ),
        ]);
        if let Some((name, ns)) = &s.warm_start {
            t.row(vec!["started from".into(), format!("{name}, predicted {}", ms(*ns))]);
        }
        if let Some((name, ns)) = &s.kept {
            t.row(vec![
                "kept".into(),
                format!("{name}: the solver's own plan was predicted slower ({}), so this one is returned", ms(*ns)),
            ]);
        }
        if let Some(w) = &s.windows {
            t.row(vec![
                "windows".into(),
                format!(
                    "{} of {} windows improved the start in {:.1} s ({} at a time{}): placement cost {} → {}",
                    w.improved,
                    w.windows,
                    w.seconds,
                    w.workers,
                    if w.conflicts > 0 {
                        format!(", {} dropped after a window beside them changed a shared row", w.conflicts)
                    } else {
                        String::new()
                    },
                    ms(w.before_ns),
                    ms(w.after_ns)
                ),
            ]);
        }
        if let Some(b) = &s.lagrangian {
            t.row(vec![
                "bound".into(),
                format!(
                    "no plan adds less than {} to the all-DRAM step (Lagrangian bound: {} steps in {:.1} s)",
                    ms(b.bound_ns),
                    count(b.iterations as u64),
                    b.seconds
                ),
            ]);
        }
    }
    let p = &plan.predicted;
    t.row(vec![
        "predicted".into(),
        format!(
            "{} per step = {:.3}× all-DRAM ({}); kernels {} (+{} slowed by copies beside them), blocking moves {}, exposed copies {}",
            ms(p.step_ns),
            p.step_ns / r.all_dram_ns,
            ms(r.all_dram_ns),
            ms(p.kernel_ns),
            ms(p.interference_ns),
            ms(p.sync_move_ns),
            ms(p.exposed_copy_ns)
        ),
    ]);
    if let Some(best) = best_baseline(r) {
        t.row(vec!["best baseline".into(), format!("{} {} ({:.3}× the plan)", best.0, ms(best.1), best.1 / p.step_ns)]);
    }
    let moved: u64 = plan.moves.iter().map(|m| m.bytes).sum();
    let asyncs = plan.moves.iter().filter(|m| m.overlaps.is_some()).count();
    t.row(vec![
        "moves".into(),
        format!("{} ({} sync, {asyncs} async), {} per step", plan.moves.len(), plan.moves.len() - asyncs, bytes(moved)),
    ]);
    let peaks: Vec<String> = pools
        .pools
        .iter()
        .zip(&plan.pool_peak_bytes)
        .zip(&plan.inputs.capacity)
        .map(|((pool, peak), cap)| format!("{} {} of {}", pool.name, bytes(*peak), bytes(*cap)))
        .collect();
    t.row(vec!["peak use".into(), peaks.join("; ")]);
    t.row(vec![
        "kernels".into(),
        format!(
            "{} measured, {} predicted by the profile's design, {} estimated by the cost model",
            p.measured_kernels, p.predicted_kernels, p.estimated_kernels
        ),
    ]);
    t.row(vec![
        "check".into(),
        format!(
            "ok: capacity at every step, moves match locations, {} kernel times and the step time recomputed",
            plan.kernels.len()
        ),
    ]);
    t
}

fn best_baseline(r: &SolveResult) -> Option<(String, f64)> {
    r.baselines
        .iter()
        .filter_map(|c| {
            c.outcome.as_ref().ok().filter(|(_, chk)| chk.ok()).map(|(p, _)| (c.name.clone(), p.predicted.step_ns))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// The plan beside every baseline, and why any baseline has no plan, below the table.
fn baseline_table(r: &SolveResult) -> String {
    let mut t = Table::new(&["strategy", "predicted step", "vs all-DRAM", "vs plan", "DRAM peak", "moves", "check"]);
    let row = |t: &mut Table, name: &str, plan: &placer_solve::Plan, ok: bool| {
        t.row(vec![
            name.to_string(),
            ms(plan.predicted.step_ns),
            format!("{:.3}×", plan.predicted.step_ns / r.all_dram_ns),
            format!("{:.3}×", plan.predicted.step_ns / r.plan.predicted.step_ns),
            bytes(plan.pool_peak_bytes[0]),
            count(plan.moves.len() as u64),
            if ok { "ok".into() } else { "FAILED".into() },
        ]);
    };
    let label = match r.plan.provenance.formulation {
        Some(f) => format!("{} ({})", r.plan.provenance.strategy, f.name()),
        None => r.plan.provenance.strategy.to_string(),
    };
    row(&mut t, &label, &r.plan, r.check.ok());
    let mut notes = String::new();
    for c in &r.baselines {
        match &c.outcome {
            Ok((plan, chk)) => row(&mut t, &c.name, plan, chk.ok()),
            Err(why) => {
                t.row(vec![
                    c.name.clone(),
                    "no plan".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                ]);
                notes.push_str(&format!("  {}: no plan: {why}\n", c.name));
            }
        }
    }
    t.render() + &notes
}

/// Where the solve's time went: one row per thing worked on (all baselines, one
/// baseline, a formulation, the plan returned), in the order they first ran.
fn stage_table(stages: &[StageTime]) -> Table {
    let mut t = Table::new(&["time spent on", "seconds, by stage"]);
    let mut order: Vec<&str> = Vec::new();
    for s in stages {
        if !order.contains(&s.of.as_str()) {
            order.push(&s.of);
        }
    }
    for of in order {
        let parts: Vec<String> =
            stages.iter().filter(|s| s.of == of).map(|s| format!("{} {:.2}", s.stage.label(), s.seconds)).collect();
        t.row(vec![of.to_string(), parts.join(", ")]);
    }
    t.row(vec!["all stages".into(), format!("{:.2}", stages.iter().map(|s| s.seconds).sum::<f64>())]);
    t
}
