//! `placer profile MODEL [--max-simultaneous N] [--reps R] [--sample K] [--pin RULE]
//! [--shard I/N] ...`, and `placer profile merge SHARD...` (merge.rs).

mod isolation;
mod merge;

use crate::args::{DesignArg, ExportFormat, HostArgs, StepsArg};
use crate::render::progress::PassBar;
use crate::table::{Table, count};
use placer_profile::{Design, DesignRecord, DesignSpec, Mode, PassSchedule, ProfileOptions, Protocol, Steps};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    /// The model file (model.json).
    #[arg(required = true)]
    model: Option<PathBuf>,
    /// Most (node, configuration) pairs measured in one pass; 1 is single-config mode.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    max_simultaneous: u32,
    /// Also keep nodes two tensors apart out of the same pass.
    #[arg(long)]
    two_hop: bool,
    /// Timed steps per pass, at least.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    reps: u32,
    /// Timed steps per pass, at most: more are run while a picked kernel's median is
    /// not yet known to --precision.
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    max_reps: u32,
    /// A pass stops once every picked kernel's median is known to this relative
    /// standard error (or to 1 µs), estimated from its MAD.
    #[arg(long, default_value_t = 0.02)]
    precision: f64,
    /// Untimed steps at the start of every pass.
    #[arg(long, default_value_t = 1)]
    warmup: u32,
    /// Run the whole pass plan up to this many times and merge (median of rounds):
    /// samples from several moments beat many samples from one on a shared host.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// A round after the first re-runs the first eighth of the last round's passes and
    /// goes on only when the long kernels' medians moved by more than this (shift or
    /// spread per measurement); 0 runs every round.
    #[arg(long, default_value_t = placer_profile::ROUND_NOISE)]
    round_noise: f64,
    /// What a timed step runs: `picked` runs only the pass's picked kernels and a few
    /// reference kernels, each after the producers of its inputs; `whole` the whole
    /// training step around them; `live` whole steps with each tensor in an arena only
    /// while it is live, as plans run; `isolated` each kernel alone, only its operands
    /// allocated, in the cache state a step leaves them in. `auto`: `live` when a step is
    /// at most 50 GFLOPs, `isolated` when the footprint is over three quarters of this
    /// host's memory, else `picked`.
    #[arg(long, value_enum, default_value_t = StepsArg::Auto)]
    steps: StepsArg,
    /// Seed of the data every pass starts from.
    #[arg(long, default_value_t = 0x5EED)]
    seed: u64,
    /// Measure a random sample of this many configurations (for single-config checks on
    /// big models).
    #[arg(long)]
    sample: Option<u32>,
    #[arg(long, default_value_t = 1)]
    sample_seed: u64,
    /// Nodes with more configurations than this move their inputs (then outputs) as one
    /// group each: DenseNet's concatenations would otherwise have millions.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    max_configs: u64,
    /// An operand moving at most this share of its kernel's bytes (batch-norm's scale
    /// and statistics) stays in the default pool; 0 varies every operand the kernel
    /// touches.
    #[arg(long, default_value_t = placer_profile::NEGLIGIBLE_SHARE, value_parser = share)]
    negligible: f64,
    /// Which configurations to measure: `screen` measures, per kernel signature, the
    /// all-DRAM configuration, each operand alone in each other pool and each other pool
    /// for all, predicts the rest and checks the predictions on a seeded sample
    /// (measuring a signature in full when they miss); `full` measures every
    /// configuration.
    #[arg(long, value_enum, default_value_t = DesignArg::Screen)]
    design: DesignArg,
    /// A screening design's predictions must be within this share of the measured time
    /// (or within the measurement's own noise, whichever is wider).
    #[arg(long, default_value_t = 0.05)]
    design_tolerance: f64,
    /// Prediction errors below this many µs never send a signature back to be measured
    /// in full.
    #[arg(long, default_value_t = 20.0)]
    design_min_us: f64,
    /// Seed of the screening design's validation sample.
    #[arg(long, default_value_t = 0x5EED)]
    design_seed: u64,
    /// Fix tensors to a pool: `role=weight:dram` or `tensor=NAME:pmem`. Repeatable.
    #[arg(long, value_name = "RULE")]
    pin: Vec<placer_profile::PinRule>,
    /// Where checkpoints live.
    #[arg(long, env = "PLACER_CHECKPOINT_DIR", default_value = "checkpoints")]
    checkpoint_dir: PathBuf,
    /// Start over, replacing a checkpoint made with other settings.
    #[arg(long)]
    fresh: bool,
    /// Print the plan (configurations, rules, passes) and stop before measuring.
    #[arg(long)]
    plan_only: bool,
    /// Print the finished profile's measurements as CSV or JSON instead of the summary.
    /// An existing checkpoint that is finished, or was made with other settings, is
    /// exported as it is, without measuring.
    #[arg(long, value_enum)]
    export: Option<ExportFormat>,
    /// Stop with an error (exit 2) instead of a warning when the host is busy: other
    /// processes competing for the CPUs, stolen time, or unexplained jitter, before the
    /// first pass or during one. The checkpoint keeps what was measured.
    #[arg(long)]
    require_quiet: bool,
    /// Measure only shard I of N: every Nth first-stage pass of the plan, from pass I.
    /// Every shard plans the whole profile and records its digest; `placer profile
    /// merge` makes one profile of the N shards' checkpoints.
    #[arg(long, value_name = "I/N", value_parser = shard)]
    shard: Option<(u32, u32)>,
    /// Resume a checkpoint begun on a host with another fingerprint when nothing else
    /// differs: a merge of shards measured on a cluster's nodes, finished on one like
    /// them. The checkpoint keeps the fingerprint it began with.
    #[arg(long)]
    mixed_hosts: bool,
    /// Measure the passes only, not the calibrations of what a copy beside a kernel and
    /// a step beyond its kernels cost: for a quick look. `solve` then charges each
    /// copy's whole CPU time and no step overhead, and says so; a later run without
    /// this flag measures them.
    #[arg(long)]
    skip_calibrations: bool,
    #[command(flatten)]
    host: HostArgs,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Merge the checkpoints of `--shard` profiles into one profile, after checking that
    /// they belong together.
    Merge(merge::Args),
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(Action::Merge(merge)) = args.action {
        return merge::run(merge);
    }
    let Some(model_path) = args.model.clone() else {
        return Err(placer_profile::ProfileError::Usage { reason: "placer profile needs a model file".into() }.into());
    };
    let model = placer_ir::load_model(&model_path)?;
    if args.max_reps < args.reps {
        return Err(placer_profile::ProfileError::Usage {
            reason: format!("--max-reps {} is below --reps {}", args.max_reps, args.reps),
        }
        .into());
    }
    let options = ProfileOptions {
        mode: Mode {
            max_simultaneous: args.max_simultaneous,
            two_hop: args.two_hop,
            sample: args.sample.map(|k| (k, args.sample_seed)),
            max_configs: args.max_configs,
            negligible: args.negligible,
            design: DesignSpec {
                design: args.design.design(),
                tolerance: args.design_tolerance,
                min_error_ns: args.design_min_us * 1e3,
                seed: args.design_seed,
            },
        },
        protocol: Protocol {
            warmup: args.warmup,
            reps: args.reps,
            max_reps: args.max_reps,
            precision: args.precision,
            seed: args.seed,
            rounds: args.rounds,
            round_noise: args.round_noise,
            steps: args.steps.steps(&model),
        },
        pins: args.pin.clone(),
        model_source: Some(model_path),
        require_quiet: args.require_quiet,
        shard: args.shard,
        mixed_hosts: args.mixed_hosts,
        skip_calibrations: args.skip_calibrations,
        foreign: None,
    };
    let path = args.checkpoint_dir.join(placer_profile::checkpoint_name(&model, &options.mode, options.shard, None));
    // Exporting needs no match: a checkpoint that is finished, or that was made with
    // other settings (protocol, host, pools...), is exported as it is, measuring nothing.
    let export_as_is = match args.export {
        Some(format) if !args.fresh && !args.plan_only && path.exists() => {
            Some((format, placer_profile::load_checkpoint(&path)?))
        }
        _ => None,
    };
    if let Some((format, profile)) = &export_as_is
        && placer_profile::is_finished(profile)
    {
        return write_export(*format, profile);
    }
    let mut host = args.host.open()?;
    let pools = host.pool_set()?;
    let plan = placer_profile::schedule_profile(&model, &pools, &host.fingerprint, &options)?;
    if args.plan_only {
        out!("{}", plan_table(&plan, options.protocol.rounds).render())?;
        return Ok(());
    }
    if let Some((format, profile)) = &export_as_is
        && let Some(why) = placer_profile::mismatch(&profile.header, &plan.header)
    {
        errln!(
            "note: exporting checkpoint {} as it is ({} of {} passes measured), measuring nothing: {why}",
            path.display(),
            profile.passes_done,
            profile.passes_total
        );
        return write_export(*format, profile);
    }
    let started = Instant::now();
    let bar =
        PassBar::new(options.mode.max_simultaneous == 1, plan.passes.len() * plan.header.protocol.rounds as usize)?;
    let outcome = placer_profile::run_to_checkpoint(&model, pools, &plan, &path, args.fresh, &mut |p| bar.update(p))?;
    bar.finish();
    let profile = &outcome.profile;
    if let Some(warning) = profile.capped_warning() {
        errln!("warning: {warning}");
    }
    match args.export {
        Some(format) => write_export(format, profile)?,
        None => out!("{}", render(&model, &plan, profile, &path, outcome.resumed, started.elapsed().as_secs_f64())?)?,
    }
    Ok(())
}

/// `--export csv|json`: the profile's measurements (and, as JSON, all of it).
fn write_export(format: ExportFormat, profile: &placer_profile::Profile) -> anyhow::Result<()> {
    match format {
        ExportFormat::Csv => out!("{}", placer_profile::export_csv(profile))?,
        ExportFormat::Json => outln!("{}", placer_profile::export_json(profile)?)?,
    }
    Ok(())
}

/// What was planned: model, host, mode, configurations after each rule, passes.
fn plan_table(plan: &PassSchedule, rounds: u32) -> Table {
    let h = &plan.header;
    let c = &plan.tasks.counts;
    let mut t = Table::new(&["model", &format!("{} ({})", h.model_name, &h.model_hash[..16])]);
    let pools: Vec<String> = h
        .pools
        .iter()
        .map(|p| match &p.emulated_as {
            Some(d) => format!("{} (EMULATED {d})", p.name),
            None => p.name.clone(),
        })
        .collect();
    t.row(vec!["host".into(), format!("fingerprint {}; pools {}", h.host_fingerprint, pools.join(", "))]);
    t.row(vec!["mode".into(), h.mode.label()]);
    t.row(vec![
        "steps".into(),
        match h.protocol.steps {
            Steps::Live => {
                "live: whole steps, each tensor in an arena only while it is live, as plans run (peak live memory)"
                    .into()
            }
            Steps::Whole => "whole: every tensor allocated for the whole profile (the footprint)".into(),
            Steps::Picked => match h.cache_bytes {
                Some(bytes) => format!(
                    "picked: every tensor allocated for the whole profile (the footprint); before each timed kernel, \
                     what a step leaves out of a {} MiB last-level cache is written out of it",
                    bytes >> 20
                ),
                None => "picked: every tensor allocated for the whole profile (the footprint); this host does not \
                         say its last-level cache size, so every timed kernel finds its operands in cache"
                    .into(),
            },
            Steps::Isolated => "isolated: each kernel alone, only its operands allocated, put before every \
                                repetition in the cache state a step leaves them in; the reference pass in whole \
                                live steps (peak live memory)"
                .into(),
        },
    ]);
    t.row(vec![
        "configurations".into(),
        format!(
            "{} counting in-place tensors twice; -{} in-place, -{} pinned, -{} negligible operands, -{} grouped \
             inputs = {} (node, config) pairs; {} measurements once identical kernels share one",
            big(c.naive),
            big(c.in_place),
            big(c.pinned),
            big(c.negligible),
            big(c.grouped),
            big(c.per_node),
            count(c.unique as u64)
        ),
    ]);
    if !c.grouped_nodes.is_empty() {
        t.row(vec![
            "grouped".into(),
            format!(
                "{} node(s) had over {} configurations; each moves its free inputs (and if needed outputs) as one group: {}",
                c.grouped_nodes.len(),
                h.mode.max_configs,
                abbreviate(&c.grouped_nodes, 4)
            ),
        ]);
    }
    if h.mode.design.design == Design::Full {
        t.row(vec!["design".into(), "full: every configuration is measured".into()]);
    } else {
        let screened = plan.families.iter().filter(|f| f.screened).count();
        let design: usize = plan.families.iter().filter(|f| f.screened).map(|f| f.design.len()).sum();
        let validation: usize = plan.families.iter().map(|f| f.validation.len()).sum();
        t.row(vec![
            "design".into(),
            format!(
                "screening: {screened} of {} signature families screened (base, singles, corners: {} \
                 configurations, plus {} to validate); the rest measured in full; first stage {} of {} \
                 measurements ({:.1}%)",
                plan.families.len(),
                count(design as u64),
                count(validation as u64),
                count(plan.measured.len() as u64),
                count(c.unique as u64),
                100.0 * plan.measured.len() as f64 / c.unique.max(1) as f64
            ),
        ]);
    }
    // Kernels timed alone share no step, so only the pass size bounds their packing.
    let bound = match h.protocol.steps {
        Steps::Isolated => "each kernel alone, so only the pass size",
        _ => "a node once per pass, a shared tensor in one pool",
    };
    t.row(vec![
        "passes".into(),
        format!(
            "{} per round x {} round(s) (lower bound {}: {bound}); {} measurements per round, up to {} per pass \
             (mean {:.1})",
            plan.stats.passes,
            rounds,
            plan.stats.lower_bound,
            count(plan.stats.measurements as u64),
            plan.stats.max_per_pass,
            plan.stats.mean_per_pass
        ),
    ]);
    if let Some(shard) = h.shard {
        t.row(vec![
            "shard".into(),
            format!(
                "{}: {} of the {} first-stage passes per round (passes {}, {}, {}, ...), plan digest {}; the \
                 design is judged, and the interference calibrated, once the shards are merged \
                 (placer profile merge)",
                shard.label(),
                shard.len(),
                shard.schedule_passes,
                shard.index,
                shard.index + shard.count,
                shard.index + 2 * shard.count,
                h.plan_hash
            ),
        ]);
    }
    t
}

/// A screening design's outcome: validation, fallbacks, what was predicted, stages.
fn design_rows(t: &mut Table, d: &DesignRecord, plan: &PassSchedule, profile: &placer_profile::Profile) {
    let s = d.summary();
    let full = plan.tasks.counts.unique.max(1);
    let measured = full.saturating_sub(s.predicted);
    // Kernels alone measure all-DRAM in another context than the reference pass: the
    // pair is the `alone vs step` check, not two measurements of one thing.
    let floor = if profile.header.protocol.steps == Steps::Isolated {
        "all-DRAM alone against the reference pass's whole steps, not a floor"
    } else {
        "noise floor, all-DRAM measured twice in this run"
    };
    t.row(vec![
        "validation".into(),
        format!(
            "{} of {} held-out configurations within their allowed error; |error| median {:.1}%, worst {:.1}%; \
             kernels >= 1 ms: {} of {} within ±5% ({floor}: {} of {})",
            s.validation_passed,
            s.validation_points,
            100.0 * s.median_abs_error,
            100.0 * s.worst_abs_error,
            s.long_within_5pct,
            s.long_points,
            s.floor_within_5pct,
            s.floor_points
        ),
    ]);
    let fallbacks: Vec<String> =
        d.fallbacks().map(|f| format!("{} ({}): {}", f.node, f.op, f.fallback.as_deref().unwrap_or(""))).collect();
    t.row(vec![
        "measured in full".into(),
        if fallbacks.is_empty() {
            "no screened signature missed its validation".into()
        } else {
            format!("{} of {} screened signature families: {}", s.fallbacks, s.screened, abbreviate(&fallbacks, 5))
        },
    ]);
    t.row(vec![
        "predicted".into(),
        format!(
            "{} configurations predicted, {} measured: {:.1}% of the full set measured",
            count(s.predicted as u64),
            count(measured as u64),
            100.0 * measured as f64 / full as f64
        ),
    ]);
    let rounds = profile.header.protocol.rounds;
    t.row(vec![
        "stages".into(),
        format!(
            "first {:.1} s ({} passes x {rounds}, with the reference pass), second {:.1} s ({} passes x {rounds})",
            d.first_stage_seconds,
            d.first_stage_passes,
            (profile.wall_seconds - d.first_stage_seconds - profile.calibration_seconds()).max(0.0),
            d.second_stage_passes
        ),
    ]);
}

/// What the calibrations after the passes measured, or why they did not run.
fn calibrations_note(plan: &PassSchedule, profile: &placer_profile::Profile) -> String {
    let mut parts = Vec::new();
    let mut skipped = false;
    match &profile.interference {
        Some(i) => parts.push(format!(
            "interference {:.1} s ({} ops, {} more signatures of their own)",
            i.seconds,
            i.ops.len(),
            i.signatures.len()
        )),
        None if !placer_profile::calibrates_interference(&profile.header) => {}
        None if plan.skip_calibrations => {
            skipped = true;
            parts.push("interference skipped (--skip-calibrations)".to_string());
        }
        None => parts.push("interference not yet measured".to_string()),
    }
    match &profile.step_overhead {
        Some(o) => parts.push(format!("step overhead {:.1} s", o.seconds)),
        None if !placer_profile::measures_step_overhead(&profile.header) => {}
        None if plan.skip_calibrations => {
            skipped = true;
            parts.push("step overhead skipped (--skip-calibrations)".to_string());
        }
        None => parts.push("step overhead not yet measured".to_string()),
    }
    if parts.is_empty() {
        return "none due (a shard's are measured once its merge is resumed)".into();
    }
    let mut note = parts.join(", ");
    if skipped {
        note.push_str("; solve charges each copy's whole CPU time and no step overhead until a run without the flag");
    }
    note
}

fn render(
    model: &placer_ir::Model,
    plan: &PassSchedule,
    profile: &placer_profile::Profile,
    path: &std::path::Path,
    resumed: usize,
    this_run: f64,
) -> anyhow::Result<String> {
    let h = &profile.header;
    let p = &h.protocol;
    let mut t = plan_table(plan, p.rounds);
    t.row(vec!["host activity".into(), profile.activity_note()]);
    t.row(vec![
        "protocol".into(),
        format!(
            "{} steps: {} warm-up {}, then {}-{} timed steps per pass until every picked kernel's median is \
             known to ±{:.1}% (or 1 µs); up to {} round(s), each after the first going on only when a re-run of the \
             last one's first passes moved their medians by over {:.0}%; clock resolves {:.0} ns, {:.0} ns per reading",
            p.steps.as_str(),
            p.warmup,
            if p.steps == Steps::Isolated {
                "run(s) before each node's first configuration in a pass"
            } else {
                "steps"
            },
            p.reps,
            p.max_reps,
            100.0 * p.precision,
            p.rounds,
            100.0 * p.round_noise,
            profile.clock_resolution_ns,
            profile.clock_overhead_ns
        ),
    ]);
    let drift = placer_exec::Stats::of(&profile.pass_drift);
    t.row(vec![
        "rounds".into(),
        format!(
            "{} passes measured ({} per round of the first stage); their drift against the reference pass: median {:.3}, spread \
             {:.1}%",
            profile.passes_done,
            plan.passes.len(),
            drift.as_ref().map_or(1.0, |s| s.median),
            drift.as_ref().map_or(0.0, |s| if s.median > 0.0 { 148.26 * s.mad / s.median } else { 0.0 })
        ),
    ]);
    for k in &profile.round_checks {
        t.row(vec![
            "round check".into(),
            format!(
                "passes {}-{} re-ran {}-{}: {} long kernels, {:.1}% within ±5%, shift {:+.1}%, spread {:.1}% per \
                 measurement: {}",
                k.first_pass,
                k.first_pass + k.passes - 1,
                k.rerun_of,
                k.rerun_of + k.passes - 1,
                k.pairs,
                100.0 * f64::from(k.within_5pct) / f64::from(k.pairs.max(1)),
                100.0 * k.shift,
                100.0 * k.spread,
                if k.quiet { "quiet, no further round" } else { "noisy, the round goes on" }
            ),
        ]);
    }
    t.row(vec![
        "wall time".into(),
        format!(
            "{:.1} s measuring in all{}; this run {:.1} s",
            profile.wall_seconds,
            if resumed > 0 { format!(" (resumed after {resumed} passes)") } else { String::new() },
            this_run
        ),
    ]);
    if let Some(d) = &profile.design {
        design_rows(&mut t, d, plan, profile);
    }
    isolation::rows(&mut t, model, profile)?;
    t.row(vec!["calibrations".into(), calibrations_note(plan, profile)]);
    t.row(vec![
        "checkpoint".into(),
        format!("{} ({} measurements)", path.display(), count(profile.measurements.len() as u64)),
    ]);
    let mut out = t.render();
    if h.emulated {
        out.push_str(
            "\nEMULATED: some pools' timing is emulated by a device model (docs/hosts.md); these timings are not \
             measurements of the devices they stand for.\n",
        );
    }
    Ok(out)
}

fn abbreviate(names: &[String], shown: usize) -> String {
    let head = names.iter().take(shown).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > shown { format!("{head}, ... ({} more)", names.len() - shown) } else { head }
}

fn big(n: u128) -> String {
    u64::try_from(n).map_or_else(|_| n.to_string(), count)
}

/// `I/N`.
fn shard(text: &str) -> Result<(u32, u32), String> {
    placer_profile::Shard::parse(text)
}

/// A share of a kernel's bytes, in [0, 1).
fn share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if (0.0..1.0).contains(&v) => Ok(v),
        _ => Err(format!("expected a share in [0, 1), such as 0.001; got '{text}'")),
    }
}
