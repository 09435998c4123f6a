//! `placer pipeline` as one call: profile (resuming from the checkpoint), solve, run the
//! plan beside the baselines and all-DRAM, optionally again at budgets from 10% to 100%
//! of peak live memory, and write the report. The caller hears of every stage through
//! [`PipelineEvent`]s and renders them as it likes.

use crate::EvalError;
use crate::compare::Comparison;
use crate::contenders::{from_solve, plan_label};
use crate::interleave::{MeasureOptions, Measured, run_interleaved};
use crate::report::{Report, SweepPoint};
use placer_host::Host;
use placer_ir::Model;
use placer_profile::{ProfileOptions, Progress, profile_into_dir};
use placer_solve::{
    Budget, Formulation, IlpOptions, InputsEvent, SolveError, SolveInputs, SolveRequest, SolveResult, solve_inputs,
};
use placer_units::{fmt_bytes, fmt_count};
use std::path::{Path, PathBuf};

/// Everything one pipeline run is asked to do.
#[derive(Debug, Clone)]
pub struct PipelineRequest<'a> {
    pub model: &'a Model,
    /// Where the model came from, as the report names it.
    pub source: &'a str,
    pub budget: Budget,
    pub formulation: Formulation,
    /// Solver time limit per solve, seconds.
    pub time_limit: f64,
    /// How to profile (see `ProfileOptions::pipeline`).
    pub profile: ProfileOptions,
    /// Where checkpoints live; an existing one for this model and host is resumed.
    pub checkpoint_dir: &'a Path,
    /// How each set of plans is run side by side.
    pub measure: MeasureOptions,
    /// Also solve and run at budgets from 10% to 100% of peak live memory.
    pub sweep: bool,
    /// Estimate moves from read and write bandwidth instead of probing copies when the
    /// host cache has none.
    pub no_probe: bool,
    /// The report directory.
    pub output: &'a Path,
}

/// The pipeline's four stages, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Profile,
    Solve,
    Run,
    Report,
}

/// What the pipeline tells its caller as it goes.
#[derive(Debug, Clone, Copy)]
pub enum PipelineEvent<'a> {
    /// A stage begins.
    Stage(Stage),
    /// A profiling pass is done (the first report also says what was resumed).
    ProfilePass(Progress),
    /// The profile is complete: where it is, and how much was measured.
    Profiled { note: &'a str },
    /// Gathering the solve's inputs (e.g. a probe of the copies).
    Inputs(InputsEvent),
    /// A line from the solver or from the interleaved runs.
    Progress(&'a str),
    /// The plan at the requested budget.
    Solved(&'a SolveResult),
    /// The plans at one budget were run side by side.
    Compared(&'a Comparison),
    /// A sweep point begins at this share of peak live memory.
    SweepBudget { share: f64 },
    /// No placement meets this sweep point's budget; the sweep goes on.
    SweepNoPlan(&'a SolveError),
    /// Every sweep point that had a plan.
    Swept(&'a [SweepPoint]),
}

/// What a pipeline run produced, besides the report on disk.
#[derive(Debug)]
pub struct PipelineOutcome {
    pub result: SolveResult,
    pub measured: Vec<Measured>,
    pub sweep: Option<Vec<SweepPoint>>,
    /// The report's files.
    pub written: Vec<PathBuf>,
    /// Whether the host's memory speed moved between the profile and the runs, and the
    /// line that says so ([`crate::compare::memory_note`]); `None` where either was not
    /// timed.
    pub memory: Option<(bool, String)>,
}

/// Runs the whole pipeline on `host`.
pub fn pipeline(
    req: &PipelineRequest<'_>,
    host: &mut Host,
    events: &mut dyn FnMut(PipelineEvent<'_>),
) -> Result<PipelineOutcome, EvalError> {
    let model = req.model;
    events(PipelineEvent::Stage(Stage::Profile));
    let (checkpoint, measured_profile, profile_note) = profile(req, host, events)?;
    events(PipelineEvent::Profiled { note: &profile_note });

    events(PipelineEvent::Stage(Stage::Solve));
    let inputs = solve_inputs(model, host, Some((&checkpoint, measured_profile)), &[], req.no_probe, &mut |e| {
        events(PipelineEvent::Inputs(e))
    })?;
    let result = solve(req, &inputs, req.budget, &checkpoint, events)?;
    events(PipelineEvent::Solved(&result));

    events(PipelineEvent::Stage(Stage::Run));
    let measured = measure(req, host, &result, events)?;
    events(PipelineEvent::Compared(&Comparison::new(&measured)));

    let sweep = if req.sweep { Some(sweep(req, host, &inputs, &checkpoint, events)?) } else { None };

    events(PipelineEvent::Stage(Stage::Report));
    let mut facts = facts(req, &inputs, &result, &checkpoint, &profile_note, &measured);
    let host_before = measured.first().and_then(|m| m.host_before);
    if let Some(a) = host_before {
        let state = if a.busy().is_some() { "BUSY" } else { "quiet" };
        facts.push(("host before the runs".to_string(), format!("{state}: {}", a.describe())));
    }
    let before_runs = host_before.and_then(|a| a.calibration).map(|c| c.memcpy_ns_per_byte);
    let memory = inputs
        .profile
        .as_ref()
        .and_then(|p| p.memcpy_ns_per_byte())
        .zip(before_runs)
        .map(|(profile, before)| crate::compare::memory_note(&profile, before));
    if let Some((_, note)) = &memory {
        facts.push(("host memory".to_string(), note.clone()));
    }
    // The budget was checked against DRAM's capacity: where that figure came from.
    facts.extend(host.layout.capacity_notes().into_iter().map(|note| ("capacity".to_string(), note)));
    let report = Report { model, plan: &result.plan, measured: &measured, facts, sweep: sweep.as_deref() };
    let written = report.write(req.output)?;
    Ok(PipelineOutcome { result, measured, sweep, written, memory })
}

/// Profiles into the checkpoint directory (resuming); returns the checkpoint and a note
/// of what was measured.
fn profile(
    req: &PipelineRequest<'_>,
    host: &mut Host,
    events: &mut dyn FnMut(PipelineEvent<'_>),
) -> Result<(PathBuf, placer_profile::Profile, String), EvalError> {
    let pools = host.pool_set()?;
    let started = std::time::Instant::now();
    let on_pass = &mut |p: Progress| events(PipelineEvent::ProfilePass(p));
    let outcome = profile_into_dir(req.model, pools, &host.fingerprint, &req.profile, req.checkpoint_dir, on_pass)?;
    let total = outcome.passes_total;
    let capped = outcome.profile.capped_warning().map_or(String::new(), |w| format!("; {w}"));
    let note = format!(
        "{}: {} measurements, {} passes of {} steps ({} resumed from the checkpoint), {:.1} s; host {}{capped}",
        outcome.path.display(),
        fmt_count(outcome.profile.measurements.len() as u64),
        total,
        outcome.profile.header.protocol.steps.as_str(),
        outcome.resumed.min(total),
        started.elapsed().as_secs_f64(),
        outcome.profile.activity_note(),
    );
    Ok((outcome.path, outcome.profile, note))
}

fn solve(
    req: &PipelineRequest<'_>,
    inputs: &SolveInputs,
    budget: Budget,
    checkpoint: &Path,
    events: &mut dyn FnMut(PipelineEvent<'_>),
) -> Result<SolveResult, EvalError> {
    let request = SolveRequest {
        model: req.model,
        costs: &inputs.costs,
        pools: inputs.pools.clone(),
        budget,
        pins: inputs.pins.clone(),
        options: IlpOptions { formulation: req.formulation, time_limit: req.time_limit, ..IlpOptions::default() },
        profile: Some(checkpoint.display().to_string()),
        every_baseline: true,
    };
    Ok(placer_solve::solve(&request, &mut |line| events(PipelineEvent::Progress(line)))?)
}

/// The plan, every baseline the checker passed, and all-DRAM, run side by side.
fn measure(
    req: &PipelineRequest<'_>,
    host: &mut Host,
    result: &SolveResult,
    events: &mut dyn FnMut(PipelineEvent<'_>),
) -> Result<Vec<Measured>, EvalError> {
    let mut pools = || host.pool_set().map_err(EvalError::from);
    let progress = &mut |line: &str| events(PipelineEvent::Progress(line));
    run_interleaved(req.model, &mut pools, &from_solve(result), &req.measure, progress)
}

fn sweep(
    req: &PipelineRequest<'_>,
    host: &mut Host,
    inputs: &SolveInputs,
    checkpoint: &Path,
    events: &mut dyn FnMut(PipelineEvent<'_>),
) -> Result<Vec<SweepPoint>, EvalError> {
    let mut points = Vec::new();
    for tenth in 1..=10 {
        let share = f64::from(tenth) / 10.0;
        events(PipelineEvent::SweepBudget { share });
        let result = match solve(req, inputs, Budget::Fraction(share), checkpoint, events) {
            Ok(r) => r,
            // A budget below what any placement needs is a point with no plan, not the
            // end of the sweep.
            Err(EvalError::Solve(e)) if matches!(*e, SolveError::Infeasible { .. }) => {
                events(PipelineEvent::SweepNoPlan(&e));
                continue;
            }
            Err(e) => return Err(e),
        };
        let measured = measure(req, host, &result, events)?;
        let comparison = Comparison::new(&measured);
        events(PipelineEvent::Compared(&comparison));
        points.push(SweepPoint { share, budget_bytes: result.budget_bytes, comparison });
    }
    events(PipelineEvent::Swept(&points));
    Ok(points)
}

/// The (label, text) lines at the top of the report.
fn facts(
    req: &PipelineRequest<'_>,
    inputs: &SolveInputs,
    result: &SolveResult,
    checkpoint: &Path,
    profile_note: &str,
    measured: &[Measured],
) -> Vec<(String, String)> {
    let (model, plan) = (req.model, &result.plan);
    let pools: Vec<String> = inputs
        .pools
        .pools
        .iter()
        .map(|p| match &p.emulated_as {
            Some(d) => format!("{} (EMULATED {d}, {})", p.name, fmt_bytes(p.capacity)),
            None => format!("{} ({})", p.name, fmt_bytes(p.capacity)),
        })
        .collect();
    let mut facts = vec![
        ("model".to_string(), format!("{} from {}: {} kernels", model.name(), req.source, model.schedule().len())),
        ("pools".to_string(), pools.join(", ")),
        ("profile".to_string(), profile_note.to_string()),
        (
            "budget".to_string(),
            format!(
                "{} ({:.0}% of peak live memory, {})",
                fmt_bytes(result.budget_bytes),
                100.0 * result.budget_bytes as f64 / result.peak_bytes.max(1) as f64,
                fmt_bytes(result.peak_bytes)
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
            "{:.3} ms per step ({} kernels measured by the profile, {} predicted by its design, {} estimated), \
             all-DRAM {:.3} ms",
            plan.predicted.step_ns / 1e6,
            plan.predicted.measured_kernels,
            plan.predicted.predicted_kernels,
            plan.predicted.estimated_kernels,
            result.all_dram_ns / 1e6
        ),
    ));
    if let Some(m) = measured.first() {
        facts.push(("timing".to_string(), m.timing_note()));
    }
    facts.push(("checkpoint".to_string(), checkpoint.display().to_string()));
    facts
}
