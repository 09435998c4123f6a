//! A profiling run from start (or from its checkpoint) to the end: plan, then measure
//! pass by pass, saving after every pass.

use crate::ProfileError;
use crate::design::verdict::{self, Judgement};
use crate::design::{self, FamilyPlan};
use crate::engine::Engine;
use crate::interference;
use crate::overhead;
use crate::pass_run::{PassContext, base_placement, reference_pass, run_pass};
use crate::passes::{self, Pick, PlanStats};
use crate::record::codec as checkpoint;
use crate::record::mismatch::mismatch;
use crate::record::{
    self, ActivitySample, Design, DesignRecord, DesignSpec, FORMAT_NAME, FORMAT_VERSION, Measurement, Mode, PinRule,
    PoolInfo, Profile, ProfileHeader, Protocol, ROUND_NOISE, RoundCheck, Shard, Steps,
};
use crate::tasks::{self, Pin, Task, TaskList};
use placer_exec::{ClockInfo, PoolAssignment};
use placer_host::activity::{CpuTimes, HostActivity, calibrate};
use placer_ir::{Model, NodeId};
use placer_pools::PoolSet;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the host is watched before a run's first pass.
pub const QUIET_CHECK: Duration = Duration::from_millis(300);

#[derive(Debug, Clone)]
pub struct ProfileOptions {
    pub mode: Mode,
    pub protocol: Protocol,
    /// `--pin` rules as given.
    pub pins: Vec<PinRule>,
    /// The model file profiled, if the model came from one; recorded in the header.
    pub model_source: Option<PathBuf>,
    /// A busy host ([`HostActivity::busy`]) stops the profile with an error instead of a
    /// warning (the checkpoint keeps what was measured).
    pub require_quiet: bool,
    /// `--shard I/N` as (I, N): measure only shard I's share of the first stage's
    /// passes ([`Shard`]), to be merged with the others' ([`crate::merge`]).
    pub shard: Option<(u32, u32)>,
    /// Resume a checkpoint begun on a host with another fingerprint (a merge of shards
    /// measured on a cluster's nodes, resumed on one of them or on a node like them),
    /// when nothing else differs.
    pub mixed_hosts: bool,
    /// Measure the passes only, not the interference and step-overhead calibrations
    /// that follow them: a quick profile (a test, a guest under a software CPU) whose
    /// solve then charges each copy's whole CPU time and no step overhead, and says so.
    /// Not part of the checkpoint's identity: a later run without it measures them.
    pub skip_calibrations: bool,
}

impl ProfileOptions {
    /// The protocol `placer pipeline` profiles with, the same as `placer profile`'s
    /// defaults: simultaneous passes of up to 64 configurations, a screening design, no
    /// sampling, one warm-up step, medians to 2%, `reps` timed steps per pass at least
    /// (and at least 9 at most), up to `rounds` rounds, each after the first going on
    /// past its round check only when the host moved.
    pub fn pipeline(reps: u32, rounds: u32) -> Self {
        ProfileOptions {
            mode: Mode {
                max_simultaneous: 64,
                two_hop: false,
                sample: None,
                max_configs: 256,
                negligible: tasks::NEGLIGIBLE_SHARE,
                design: DesignSpec::screen(),
            },
            protocol: Protocol {
                warmup: 1,
                reps,
                max_reps: reps.max(9),
                precision: 0.02,
                seed: 0x5EED,
                rounds,
                round_noise: ROUND_NOISE,
                steps: Steps::Picked,
            },
            pins: Vec::new(),
            model_source: None,
            require_quiet: false,
            shard: None,
            mixed_hosts: false,
            skip_calibrations: false,
        }
    }
}

/// A step of at most this many FLOPs is profiled in live steps by default
/// ([`default_steps`]): about half a second on the 2-core host this project is
/// measured on, so whole steps cost a profile little. BERT-tiny up to batch 128 and
/// LeNet are under it; BERT-tiny at batch 256 (92 G) and ResNet-50 at batch 32 (784 G)
/// are over.
pub const LIVE_STEP_FLOPS: u64 = 50_000_000_000;

/// Whether every tensor of `model` (its footprint) fits in three quarters of this
/// host's memory: then an engine can keep them all allocated. Decided from the host's
/// total memory, not what is free now, so a resumed run decides the same.
pub fn footprint_fits(model: &Model) -> bool {
    let footprint: u64 = model.tensors().iter().map(|t| t.bytes).sum();
    placer_pools::total_memory().is_none_or(|total| footprint <= total / 4 * 3)
}

/// The steps a profile of `model` takes by default:
///
/// - live steps, which time every kernel in a whole step with each tensor in an arena
///   while it is live, as plans run: when the footprint does not fit
///   ([`footprint_fits`]), since they need only the peak live memory; and when a step
///   is cheap ([`LIVE_STEP_FLOPS`]), since a kernel then runs where a plan runs it. A
///   plan's arena reuses bytes others freed, and BERT-tiny b32's memory-bound kernels
///   ran 25-45% faster there than in a buffer of their own (docs/running.md);
/// - picked steps otherwise, which run only the kernels a pass measures and the
///   producers of their inputs, on resident tensors: far fewer kernels per pass on a
///   large model.
pub fn default_steps(model: &Model) -> Steps {
    let cheap = placer_ir::analysis::step_flops(model) <= LIVE_STEP_FLOPS;
    if !footprint_fits(model) || cheap { Steps::Live } else { Steps::Picked }
}

impl ProfileOptions {
    /// These options with `steps` (see [`default_steps`] for a model's default).
    pub fn with_steps(mut self, steps: Steps) -> Self {
        self.protocol.steps = steps;
        self
    }
}

/// Everything decided before the first measurement.
#[derive(Debug, Clone)]
pub struct PassPlan {
    /// Every configuration the rules leave, and the families they come in.
    pub tasks: TaskList,
    /// What the first stage measures: every task of `tasks` for a full design; the
    /// designs and validation samples for a screening design.
    pub measured: Vec<Task>,
    /// Each family's design (empty for a full design).
    pub families: Vec<FamilyPlan>,
    pub pins: Vec<Pin>,
    /// The first stage's passes (indices into `measured`).
    pub passes: Vec<Vec<Pick>>,
    pub stats: PlanStats,
    pub header: ProfileHeader,
    /// See [`ProfileOptions::require_quiet`]; not part of the checkpoint's identity.
    pub require_quiet: bool,
    /// See [`ProfileOptions::mixed_hosts`].
    pub mixed_hosts: bool,
    /// See [`ProfileOptions::skip_calibrations`].
    pub skip_calibrations: bool,
}

/// `<model>-<hash>-<mode>.ckpt`: one file per model and mode, so single and
/// simultaneous profiles of one model sit side by side; a shard's ends in
/// `-shardIofN.ckpt`.
pub fn checkpoint_name(model: &Model, mode: &Mode, shard: Option<(u32, u32)>) -> String {
    let name = checkpoint_name_of(model.name(), &model.content_hash(), mode);
    match shard {
        Some((i, n)) => format!("{}-shard{i}of{n}.ckpt", name.trim_end_matches(".ckpt")),
        None => name,
    }
}

/// [`checkpoint_name`] of a whole profile, from a header's model name and hash.
pub fn checkpoint_name_of(model_name: &str, model_hash: &str, mode: &Mode) -> String {
    let mut tag =
        if mode.max_simultaneous == 1 { "single".to_string() } else { format!("sim{}", mode.max_simultaneous) };
    if mode.two_hop {
        tag.push_str("-2hop");
    }
    if let Some((k, seed)) = mode.sample {
        tag.push_str(&format!("-sample{k}-{seed}"));
    }
    if mode.design.design == Design::Screen {
        tag.push_str("-screen");
    }
    format!("{}{tag}.ckpt", checkpoint_stem(model_name, model_hash))
}

/// How every checkpoint name [`checkpoint_name_of`] gives a model starts: `<model>-<hash>-`.
pub fn checkpoint_stem(model_name: &str, model_hash: &str) -> String {
    format!("{model_name}-{}-", model_hash.get(..12).unwrap_or(model_hash))
}

pub fn plan(
    model: &Model,
    pools: &PoolSet,
    host_fingerprint: &str,
    options: &ProfileOptions,
) -> Result<PassPlan, ProfileError> {
    let names: Vec<String> = pools.pools().iter().map(|p| p.name.clone()).collect();
    let pins = options.pins.iter().map(|p| Pin::resolve(p, model, &names)).collect::<Result<Vec<_>, _>>()?;
    let pool_count = names.len() as u16;
    let mut list = tasks::enumerate(model, pool_count, &pins, tasks::Rules::of(&options.mode))?;
    let spec = &options.mode.design;
    let (measured, families) = match (spec.design, options.mode.sample) {
        (Design::Full, None) => (list.tasks.clone(), Vec::new()),
        (Design::Full, Some((k, seed))) => {
            list.tasks = tasks::sample(std::mem::take(&mut list.tasks), k as usize, seed);
            (list.tasks.clone(), Vec::new())
        }
        (Design::Screen, None) => {
            let families = design::plan_families(&list, pool_count, spec.seed);
            (design::first_stage_tasks(&list, &families), families)
        }
        (Design::Screen, Some(_)) => {
            return Err(ProfileError::Usage {
                reason: "--sample draws from every configuration; use it with --design full".into(),
            });
        }
    };
    let max_per_pass = options.mode.max_simultaneous as usize;
    let mut passes = passes::plan(model, &measured, max_per_pass, options.mode.two_hop);
    let stats = passes::stats(&passes, passes::lower_bound(model, &measured, max_per_pass, options.mode.two_hop));
    let mut h = Sha256::new();
    for t in &measured {
        h.update(t.signature.to_le_bytes());
        h.update(t.config.iter().flat_map(|c| c.to_le_bytes()).collect::<Vec<u8>>());
    }
    for (i, pass) in passes.iter().enumerate() {
        h.update((i as u64).to_le_bytes());
        for pick in pass {
            h.update((pick.task as u64).to_le_bytes());
            h.update(pick.node.0.to_le_bytes());
        }
    }
    let plan_hash: String = h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect();
    // A shard plans the whole profile, as every other shard does, and keeps its share.
    let shard = options
        .shard
        .map(|(index, count)| {
            if count as usize > passes.len() {
                return Err(ProfileError::Usage {
                    reason: format!(
                        "--shard {index}/{count}: the plan has {} passes per round, too few for {count} shards; use \
                         at most {}",
                        passes.len(),
                        passes.len()
                    ),
                });
            }
            Ok(Shard { index, count, plan_passes: passes.len() as u32 })
        })
        .transpose()?;
    if let Some(shard) = shard {
        passes = (0..shard.len()).map(|local| std::mem::take(&mut passes[shard.global(local)])).collect();
    }
    let header = ProfileHeader {
        format: FORMAT_NAME.to_string(),
        version: FORMAT_VERSION,
        model_name: model.name().to_string(),
        model_hash: model.content_hash(),
        model_source: options
            .model_source
            .as_ref()
            .map(|path| {
                std::path::absolute(path)
                    .map(|p| p.display().to_string())
                    .map_err(|e| ProfileError::Usage { reason: format!("{}: {e}", path.display()) })
            })
            .transpose()?,
        host_fingerprint: host_fingerprint.to_string(),
        pools: pools
            .pools()
            .iter()
            .map(|p| PoolInfo {
                name: p.name.clone(),
                kind: p.kind,
                emulated_as: p.emulation.as_ref().map(placer_pools::Emulation::label),
            })
            .collect(),
        emulated: pools.any_emulated(),
        protocol: options.protocol.clone(),
        mode: options.mode.clone(),
        pins: options.pins.clone(),
        plan_hash,
        shard,
        footprint_fits: footprint_fits(model),
    };
    Ok(PassPlan {
        tasks: list,
        measured,
        families,
        pins,
        passes,
        stats,
        header,
        require_quiet: options.require_quiet,
        mixed_hosts: options.mixed_hosts,
        skip_calibrations: options.skip_calibrations,
    })
}

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
    let plan = plan(model, &pools, host_fingerprint, options)?;
    let path = dir.join(checkpoint_name(model, &options.mode, options.shard));
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
    plan: &PassPlan,
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
    let mut runner: Option<Runner<'_>> = None;
    let first = Stage { tasks: &plan.measured, passes: &plan.passes, first_pass: 0 };
    let first_total =
        run_stage(model, &pools, plan, &first, &mut profile, path, &mut runner, &mut |p| report(p, on_pass))?;
    // A shard stops after its share of the first stage: the design is judged, and the
    // second stage planned, from every shard's measurements once they are merged.
    if plan.header.mode.design.design == Design::Screen && plan.header.shard.is_none() {
        let judgement = judge_first_stage(model, plan, &profile, first_total as u32);
        let second = passes::plan(
            model,
            &judgement.second_stage,
            plan.header.mode.max_simultaneous as usize,
            plan.header.mode.two_hop,
        );
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
        run_stage(model, &pools, plan, &second, &mut profile, path, &mut runner, &mut |p| report(p, on_pass))?;
    }
    if profile.interference.is_none() && !plan.skip_calibrations && calibrates_interference(&plan.header) {
        let calibration = if plan.header.protocol.steps == Steps::Live {
            // A live engine runs whole steps only, and the calibration times one kernel
            // beside a copy: it gets a resident engine (the footprint fits, or it would
            // not calibrate), once the passes' arenas are gone.
            drop(runner.take());
            let mut engine = resident_engine(model, &pools, plan)?;
            interference::measure(&mut engine, model, &profile.reference_ns)?
        } else {
            let runner = live(&mut runner, model, &pools, plan, &mut profile, path)?;
            interference::measure(&mut runner.engine, model, &profile.reference_ns)?
        };
        profile.wall_seconds += calibration.seconds;
        profile.interference = Some(calibration);
        checkpoint::save(path, &profile)?;
    }
    if profile.step_overhead.is_none() && !plan.skip_calibrations && measures_step_overhead(&plan.header) {
        // The passes' engine goes first: the steps below reserve an arena of their own.
        drop(runner.take());
        let base = base_placement(model, &plan.pins);
        let overhead = overhead::measure(model, &pools, &base, plan.header.protocol.seed)?;
        profile.wall_seconds += overhead.seconds;
        profile.step_overhead = Some(overhead);
        checkpoint::save(path, &profile)?;
    }
    let passes_total = profile.passes_total as usize;
    Ok(ProfileOutcome { path: path.to_path_buf(), profile, resumed, passes_total })
}

/// Whether a profile with `header` measures what background copies cost its kernels
/// ([`interference`]): when there is a second pool to copy to, and every tensor can be
/// kept resident, as the calibration's single kernels need (a live profile's passes
/// hold only what is live; it calibrates on an engine of its own when the footprint
/// fits). A shard does not: the merged profile measures it once, when it is resumed.
pub fn calibrates_interference(header: &ProfileHeader) -> bool {
    header.pools.len() > 1 && (header.protocol.steps != Steps::Live || header.footprint_fits) && header.shard.is_none()
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
fn judge_first_stage(model: &Model, plan: &PassPlan, profile: &Profile, first_total: u32) -> Judgement {
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
#[allow(clippy::too_many_arguments)]
fn run_stage<'m>(
    model: &'m Model,
    pools: &PoolSet,
    plan: &PassPlan,
    stage: &Stage<'_>,
    profile: &mut Profile,
    path: &Path,
    runner: &mut Option<Runner<'m>>,
    report: &mut dyn FnMut(&Profile),
) -> Result<usize, ProfileError> {
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
            let runner = live(runner, model, pools, plan, profile, path)?;
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

/// The runner, made on first use: the executor in the base placement, and the reference
/// pass if the checkpoint has none yet.
/// An engine with every tensor resident in the base placement, its data filled by whole
/// steps as the passes' engines are, for a live profile's interference calibration.
fn resident_engine<'m>(model: &'m Model, pools: &PoolSet, plan: &PassPlan) -> Result<Engine<'m>, ProfileError> {
    let protocol = Protocol { steps: Steps::Whole, ..plan.header.protocol.clone() };
    let base = base_placement(model, &plan.pins);
    let mut engine = Engine::new(model, pools.clone(), &base, &protocol)?;
    fill_by_steps(&mut engine, model, &base, &protocol)?;
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

fn live<'r, 'm>(
    runner: &'r mut Option<Runner<'m>>,
    model: &'m Model,
    pools: &PoolSet,
    plan: &PassPlan,
    profile: &mut Profile,
    path: &Path,
) -> Result<&'r mut Runner<'m>, ProfileError> {
    if let Some(r) = runner {
        return Ok(r);
    }
    let base = base_placement(model, &plan.pins);
    let mut engine = Engine::new(model, pools.clone(), &base, &plan.header.protocol)?;
    let start = Instant::now();
    if profile.reference_ns.is_empty() {
        profile.reference_ns = reference_pass(&mut engine, model, &base, &plan.header.protocol)?;
        profile.wall_seconds += start.elapsed().as_secs_f64();
        checkpoint::save(path, profile)?;
    } else {
        // Resumed: the saved reference times stand, but this process's tensors are fresh
        // allocations, filled again.
        fill_by_steps(&mut engine, model, &base, &plan.header.protocol)?;
        profile.wall_seconds += start.elapsed().as_secs_f64();
    }
    Ok(runner.insert(Runner { engine, base, conflicts: passes::conflicts(model, false) }))
}
