//! Measuring a planned profile into its checkpoint: the stages' passes, pass by pass
//! with a save after each, the round checks, then the calibrations.

use super::{PassSchedule, ProfileOptions, QUIET_CHECK, checkpoint_name, schedule};
use crate::ProfileError;
use crate::design::verdict::{self, Judgement};
use crate::engine::Engine;
use crate::interference;
use crate::overhead;
use crate::pass_run::{PassContext, base_placement, reference_pass, run_pass};
use crate::passes::{self, Pick};
use crate::record::codec as checkpoint;
use crate::record::mismatch::mismatch;
use crate::record::{
    self, ActivitySample, Design, DesignRecord, KernelSource, Measurement, Profile, ProfileHeader, Protocol,
    RoundCheck, Steps,
};
use crate::tasks::Task;
use placer_exec::{ClockInfo, PoolAssignment};
use placer_host::activity::{CpuTimes, HostActivity, calibrate};
use placer_ir::{Model, NodeId};
use placer_pools::PoolSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Progress after each pass, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub passes_done: usize,
    pub passes_total: usize,
    /// Passes that were already in the checkpoint when this run started.
    pub resumed: usize,
    pub measurements: usize,
    /// The host's activity over the check before the first pass, or over the pass just
    /// measured, when it was busy ([`HostActivity::busy`]).
    pub busy: Option<HostActivity>,
}

/// What a profiling run leaves behind.
#[derive(Debug, Clone)]
pub struct ProfileOutcome {
    /// The checkpoint the profile was measured into.
    pub path: PathBuf,
    pub profile: Profile,
    /// Passes that were already in the checkpoint when this run started.
    pub resumed: usize,
    /// Passes of the whole run: the plan's passes times its rounds.
    pub passes_total: usize,
}

/// Plans the profile of `model` on `pools` with `options` and measures it into its
/// checkpoint in `dir` (created if missing), resuming what an earlier run of the same
/// settings left there. An existing checkpoint made with other settings is refused.
pub fn profile_into_dir(
    model: &Model,
    pools: PoolSet,
    host_fingerprint: &str,
    options: &ProfileOptions,
    dir: &Path,
    on_pass: &mut dyn FnMut(Progress),
) -> Result<ProfileOutcome, ProfileError> {
    let plan = schedule(model, &pools, host_fingerprint, options)?;
    let path = dir.join(checkpoint_name(model, &options.mode, options.shard, options.foreign.as_ref()));
    std::fs::create_dir_all(dir).map_err(|source| ProfileError::CreateDir { path: dir.to_path_buf(), source })?;
    run_to_checkpoint(model, pools, &plan, &path, false, on_pass)
}

/// Measures every pass not yet in the checkpoint at `path` and saves after each one,
/// reporting progress once before the first pass (with what was resumed) and after
/// every pass. An existing checkpoint made with other settings is refused unless
/// `fresh`, in which case it is replaced.
///
/// A screening design runs in two stages: its designs and validation samples, then,
/// once they are judged ([`verdict::judge`], recorded in [`Profile::design`]), every
/// configuration of the families whose predictions missed.
pub fn run_to_checkpoint(
    model: &Model,
    pools: PoolSet,
    plan: &PassSchedule,
    path: &Path,
    fresh: bool,
    on_pass: &mut dyn FnMut(Progress),
) -> Result<ProfileOutcome, ProfileError> {
    // Held until this returns: every pass and save below is this process's alone.
    let _lock = crate::lock::lock(path)?;
    // So no write is under way: temporary files are what killed runs left mid-save.
    if path.parent().is_some_and(Path::exists) {
        placer_files::remove_stale_temps(path)
            .map_err(|e| ProfileError::Checkpoint { path: path.to_path_buf(), reason: e.to_string() })?;
    }
    let rounds = plan.header.protocol.rounds.max(1) as usize;
    let clock = ClockInfo::measure();
    let mut profile = match (path.exists() && !fresh).then(|| checkpoint::load(path)).transpose()? {
        Some(mut old) => {
            let mut ours = plan.header.clone();
            if plan.mixed_hosts {
                // The checkpoint keeps the host it began on; this host vouches it is alike.
                ours.host_fingerprint.clone_from(&old.header.host_fingerprint);
            }
            if let Some(why) = mismatch(&old.header, &ours) {
                let other_host = old.header.host_fingerprint != ours.host_fingerprint;
                let hint = if other_host && !old.merged_from.is_empty() {
                    " (a merge of shards from several hosts resumes elsewhere with --mixed-hosts)"
                } else {
                    ""
                };
                return Err(ProfileError::Mismatch {
                    reason: format!(
                        "checkpoint {}: {why}{hint}; use --fresh to start over (it will be replaced)",
                        path.display()
                    ),
                });
            }
            let ours = plan.foreign.as_ref().map(|f| &f.source);
            if old.kernels.as_ref() != ours {
                return Err(ProfileError::Mismatch {
                    reason: format!(
                        "checkpoint {}: it timed {}, this run times {}; use --fresh to start over (it will be replaced)",
                        path.display(),
                        KernelSource::label_of(old.kernels.as_ref()),
                        KernelSource::label_of(ours)
                    ),
                });
            }
            old.header.model_source = plan.header.model_source.clone();
            // A checkpoint of version 16 carries no model; the hash says this is it.
            old.model_json.get_or_insert_with(|| model.to_json());
            old
        }
        None => Profile {
            header: plan.header.clone(),
            passes_total: (plan.passes.len() * rounds) as u32,
            passes_done: 0,
            wall_seconds: 0.0,
            clock_resolution_ns: clock.resolution_ns,
            clock_overhead_ns: clock.overhead_ns,
            reference_ns: Vec::new(),
            pass_drift: Vec::new(),
            round_checks: Vec::new(),
            measurements: Vec::new(),
            design: None,
            interference: None,
            step_overhead: None,
            host_activity: Vec::new(),
            merged_from: Vec::new(),
            model_json: Some(model.to_json()),
            kernels: plan.foreign.as_ref().map(|f| f.source.clone()),
        },
    };
    profile.clock_resolution_ns = clock.resolution_ns;
    profile.clock_overhead_ns = clock.overhead_ns;
    let resumed = profile.passes_done as usize;
    // The latest sample's activity goes with each report when it was busy.
    let report = |profile: &Profile, on_pass: &mut dyn FnMut(Progress)| {
        let busy = profile.host_activity.last().map(|s| s.activity).filter(|a| a.busy().is_some());
        on_pass(Progress {
            passes_done: profile.passes_done as usize,
            passes_total: profile.passes_total as usize,
            resumed,
            measurements: profile.measurements.len(),
            busy,
        })
    };
    if profile.passes_done < profile.passes_total
        && let Some(activity) = HostActivity::watch(QUIET_CHECK)
    {
        profile.host_activity.push(ActivitySample { pass: None, activity });
        if plan.require_quiet {
            activity.require_quiet("before profiling")?;
        }
    }
    report(&profile, on_pass);
    let cx = RunContext { model, pools: &pools, plan, path };
    let mut runner: Option<Runner<'_>> = None;
    let first = Stage { tasks: &plan.measured, passes: &plan.passes, first_pass: 0 };
    let first_total = run_stage(&cx, &first, &mut profile, &mut runner, &mut |p| report(p, on_pass))?;
    // A shard stops after its share of the first stage: the design is judged, and the
    // second stage planned, from every shard's measurements once they are merged.
    if plan.header.mode.design.design == Design::Screen && plan.header.shard.is_none() {
        let judgement = judge_first_stage(model, plan, &profile, first_total as u32);
        let second = super::pack(model, &judgement.second_stage, &plan.header.mode, plan.header.protocol.steps);
        if profile.design.is_none() {
            profile.passes_total = (first_total + second.len() * rounds) as u32;
            profile.design = Some(DesignRecord {
                first_stage_seconds: profile.wall_seconds,
                first_stage_passes: plan.passes.len() as u32,
                first_stage_end: first_total as u32,
                second_stage_passes: second.len() as u32,
                families: judgement.families,
                predictions: judgement.predictions,
            });
            checkpoint::save(path, &profile)?;
        }
        let second = Stage { tasks: &judgement.second_stage, passes: &second, first_pass: first_total };
        run_stage(&cx, &second, &mut profile, &mut runner, &mut |p| report(p, on_pass))?;
    }
    if profile.interference.is_none() && !plan.skip_calibrations && calibrates_interference(&plan.header) {
        let base = base_placement(model, &plan.pins);
        let calibration = if matches!(plan.header.protocol.steps, Steps::Live | Steps::Isolated) {
            // A live engine runs whole steps only, and the calibration times one kernel
            // beside a copy: it gets an engine of its own once the passes' arenas are
            // gone, resident when the footprint fits, else holding one kernel at a time.
            drop(runner.take());
            let mut engine = calibration_engine(&cx, &base)?;
            interference::measure(&mut engine, model, &base, &profile.reference_ns)?
        } else {
            let runner = live(&cx, &mut runner, &mut profile)?;
            interference::measure(&mut runner.engine, model, &base, &profile.reference_ns)?
        };
        profile.wall_seconds += calibration.seconds;
        profile.interference = Some(calibration);
        checkpoint::save(path, &profile)?;
    }
    // Another framework's kernels get it only when their runner can time the
    // framework's own step: placer's executor's overhead is not theirs.
    if profile.step_overhead.is_none() && !plan.skip_calibrations && measures_step_overhead(&plan.header) {
        // The passes' engine goes first: the steps below reserve an arena of their own.
        drop(runner.take());
        let base = base_placement(model, &plan.pins);
        let foreign = runner_of(plan);
        // Copies beside the framework's step where the interference calibration measures
        // what copies cost: the solver charges a framework's copies from them.
        let copies = calibrates_interference(&plan.header);
        let seed = plan.header.protocol.seed;
        if let Some(overhead) = overhead::measure(model, &pools, &base, seed, foreign.as_ref(), copies)? {
            profile.wall_seconds += overhead.seconds;
            profile.step_overhead = Some(overhead);
            checkpoint::save(path, &profile)?;
        }
    }
    let passes_total = profile.passes_total as usize;
    Ok(ProfileOutcome { path: path.to_path_buf(), profile, resumed, passes_total })
}

/// Whether a profile with `header` measures what background copies cost its kernels
/// ([`interference`]): when there is a second pool to copy to. Its single kernels run
/// on resident tensors, or, when the footprint does not fit, each alone with only its
/// operands held. A shard does not: the merged profile measures it once, when it is
/// resumed.
pub fn calibrates_interference(header: &ProfileHeader) -> bool {
    header.pools.len() > 1 && header.shard.is_none()
}

/// Whether a profile with `header` measures what a step costs beyond its kernels
/// ([`overhead`]): every profile but a shard's, whose merged profile measures it once.
pub fn measures_step_overhead(header: &ProfileHeader) -> bool {
    header.shard.is_none()
}

/// Whether resuming `profile` would measure nothing more: every pass done (a screening
/// design's first stage judged), and the interference and step overhead measured where
/// they are due.
pub fn is_finished(profile: &Profile) -> bool {
    profile.is_complete()
        && (profile.interference.is_some() || !calibrates_interference(&profile.header))
        && (profile.step_overhead.is_some() || !measures_step_overhead(&profile.header))
}

/// The first stage's verdicts, from the first stage's measurements only (so a resumed
/// run, with second-stage measurements in the checkpoint, decides the same).
fn judge_first_stage(model: &Model, plan: &PassSchedule, profile: &Profile, first_total: u32) -> Judgement {
    let first = record::merge(profile.measurements.iter().filter(|m| m.pass < first_total));
    verdict::judge(
        model,
        &plan.tasks,
        &plan.families,
        &first,
        &profile.reference_ns,
        plan.header.pools.len() as u16,
        &plan.header.mode.design,
    )
}

/// What a profiling run works with from its start to its end, unchanged by it: the
/// model, its pools, the plan and the checkpoint's path. (What changes, the profile and
/// the passes' engine, travels beside it.)
struct RunContext<'m, 'a> {
    model: &'m Model,
    pools: &'a PoolSet,
    plan: &'a PassSchedule,
    path: &'a Path,
}

/// The passes of one stage, run `rounds` times from global pass index `first_pass`.
struct Stage<'a> {
    tasks: &'a [Task],
    passes: &'a [Vec<Pick>],
    first_pass: usize,
}

/// What every pass shares, made once, on the first pass that needs it.
struct Runner<'m> {
    engine: Engine<'m>,
    base: PoolAssignment,
    conflicts: Vec<Vec<NodeId>>,
}

/// How many passes of a round the next round re-runs first to decide whether it is
/// needed: an eighth, at least two (or all, when there are fewer).
pub fn check_passes(per_round: usize) -> usize {
    per_round.div_ceil(8).max(2).min(per_round)
}

/// The check of the re-run `[start, start + c)` of `stage` against the same passes one
/// round earlier.
fn round_check(profile: &Profile, start: usize, per_round: usize, c: usize, limit: f64) -> RoundCheck {
    let within = |from: usize| {
        let range = from as u32..(from + c) as u32;
        profile.measurements.iter().filter(move |m| range.contains(&m.pass))
    };
    // Passes are compared offset by offset: the same picks in the same order.
    let then: Vec<&Measurement> = within(start - per_round).collect();
    let now: Vec<&Measurement> = within(start).collect();
    RoundCheck::of(start as u32, (start - per_round) as u32, c as u32, &then, &now, limit)
}

/// Runs the rounds of `stage` that the checkpoint does not hold yet, saving after each
/// pass, and returns the global index of the pass after the stage's last. A round after
/// the first starts by re-running the first [`check_passes`] passes of the round
/// before; when their medians repeat within `round_noise` ([`RoundCheck`]) the round
/// stops there and no other follows. Until that is known, `passes_total` counts every
/// round the stage may run, so an interrupted profile never looks complete.
fn run_stage<'m>(
    cx: &RunContext<'m, '_>,
    stage: &Stage<'_>,
    profile: &mut Profile,
    runner: &mut Option<Runner<'m>>,
    report: &mut dyn FnMut(&Profile),
) -> Result<usize, ProfileError> {
    let (model, plan, path) = (cx.model, cx.plan, cx.path);
    let protocol = &plan.header.protocol;
    let rounds = protocol.rounds.max(1) as usize;
    let per_round = stage.passes.len();
    if per_round == 0 {
        return Ok(stage.first_pass);
    }
    let c = check_passes(per_round);
    for round in 0..rounds {
        let start = stage.first_pass + round * per_round;
        let end = start + per_round;
        if round > 0 && profile.round_checks.iter().any(|k| k.first_pass as usize == start && k.quiet) {
            return Ok(start + c);
        }
        let todo = (profile.passes_done as usize).max(start)..end;
        if !todo.is_empty() {
            let runner = live(cx, runner, profile)?;
            let reference_ns = profile.reference_ns.clone();
            let cx = PassContext {
                model,
                tasks: stage.tasks,
                base: &runner.base,
                protocol,
                conflicts: &runner.conflicts,
                reference_ns: &reference_ns,
            };
            for i in todo {
                let started = Instant::now();
                let cpu = CpuTimes::now().map(|t| (t, started));
                let result = run_pass(&mut runner.engine, &cx, &stage.passes[i - start], i as u32)?;
                // The calibration kernel costs ~15 ms: after every pass that took a second,
                // and every eighth pass of short ones.
                let calibration = (started.elapsed().as_secs_f64() > 1.0 || i % 8 == 0).then(calibrate);
                let activity = cpu.and_then(|start| HostActivity::since(&start, calibration));
                profile.measurements.extend(result.measurements);
                profile.pass_drift.push(result.drift);
                profile.passes_done = i as u32 + 1;
                profile.wall_seconds += started.elapsed().as_secs_f64();
                let checked = round > 0 && i + 1 == start + c;
                if checked {
                    let check = round_check(profile, start, per_round, c, protocol.round_noise);
                    if check.quiet {
                        // The host held still: what this stage may still have run is dropped
                        // from the total in the same save as the pass that decided it.
                        profile.passes_total -= ((rounds - round - 1) * per_round + per_round - c) as u32;
                    }
                    profile.round_checks.push(check);
                }
                if let Some(activity) = activity {
                    profile.host_activity.push(ActivitySample { pass: Some(i as u32), activity });
                }
                checkpoint::save(path, profile)?;
                report(profile);
                if let (true, Some(activity)) = (plan.require_quiet, activity) {
                    activity.require_quiet(&format!("during pass {}", i + 1))?;
                }
                if checked && profile.round_checks.last().is_some_and(|k| k.quiet) {
                    return Ok(start + c);
                }
            }
        }
    }
    Ok(stage.first_pass + rounds * per_round)
}

/// An engine of its own for a live or isolated profile's interference calibration, in
/// `base`: every tensor resident, its data filled by whole steps as the passes' engines
/// are, when the footprint fits; otherwise one that holds a kernel's operands at a time.
fn calibration_engine<'m>(cx: &RunContext<'m, '_>, base: &PoolAssignment) -> Result<Engine<'m>, ProfileError> {
    let (model, plan) = (cx.model, cx.plan);
    let steps = if plan.header.footprint_fits { Steps::Whole } else { Steps::Isolated };
    let protocol = Protocol { steps, ..plan.header.protocol.clone() };
    let mut engine = Engine::new(model, cx.pools.clone(), base, &protocol, None, runner_of(plan))?;
    if steps == Steps::Whole {
        fill_by_steps(&mut engine, model, base, &protocol)?;
    }
    Ok(engine)
}

/// Fills a fresh engine's tensors as the reference pass did, by whole steps in `base`,
/// so that kernels read the values training gives them, not zeros.
fn fill_by_steps(
    engine: &mut Engine<'_>,
    model: &Model,
    base: &PoolAssignment,
    protocol: &Protocol,
) -> Result<(), ProfileError> {
    engine.start(base)?;
    for _ in 0..protocol.warmup.max(1) {
        engine.step(model.schedule())?;
    }
    Ok(())
}

fn runner_of(plan: &PassSchedule) -> Option<placer_exec::SharedRunner> {
    plan.foreign.as_ref().map(|f| f.runner.clone())
}

/// The runner, made on first use: the executor in the base placement, and the reference
/// pass if the checkpoint has none yet.
fn live<'r, 'm>(
    cx: &RunContext<'m, '_>,
    runner: &'r mut Option<Runner<'m>>,
    profile: &mut Profile,
) -> Result<&'r mut Runner<'m>, ProfileError> {
    if let Some(r) = runner {
        return Ok(r);
    }
    let (model, plan, path) = (cx.model, cx.plan, cx.path);
    let base = base_placement(model, &plan.pins);
    let mut engine =
        Engine::new(model, cx.pools.clone(), &base, &plan.header.protocol, plan.header.cache_bytes, runner_of(plan))?;
    let start = Instant::now();
    if profile.reference_ns.is_empty() {
        profile.reference_ns = reference_pass(&mut engine, model, &base, &plan.header.protocol)?;
        profile.wall_seconds += start.elapsed().as_secs_f64();
        checkpoint::save(path, profile)?;
    } else if plan.header.protocol.steps != Steps::Isolated {
        // Resumed: the saved reference times stand, but this process's tensors are fresh
        // allocations, filled again (a kernel timed alone fills its own).
        fill_by_steps(&mut engine, model, &base, &plan.header.protocol)?;
        profile.wall_seconds += start.elapsed().as_secs_f64();
    }
    Ok(runner.insert(Runner { engine, base, conflicts: passes::conflicts(model, false) }))
}
