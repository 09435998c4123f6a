//! A profiling run from start (or from its checkpoint) to the end: plan (here), then
//! measure pass by pass, saving after every pass ([`run`]).

use crate::ProfileError;
use crate::design::{self, FamilyDesign};
use crate::passes::{self, Pick, ScheduleStats};
use crate::record::{
    Design, DesignSpec, FORMAT_NAME, FORMAT_VERSION, Mode, PinRule, PoolInfo, ProfileHeader, Protocol, ROUND_NOISE,
    Shard, Steps,
};
use crate::tasks::{self, Pin, Task, TaskList};
use placer_ir::Model;
use placer_pools::PoolSet;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::time::Duration;

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
    /// Time another framework's kernels instead of placer's own, where it has them.
    /// Recorded in the checkpoint ([`Profile::kernels`]) and in its file name.
    pub foreign: Option<Foreign>,
}

/// Another framework's kernels, and what the checkpoint records of them.
#[derive(Debug, Clone)]
pub struct Foreign {
    pub runner: placer_exec::SharedRunner,
    pub source: crate::record::KernelSource,
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
            foreign: None,
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
/// - live steps when a step is cheap ([`LIVE_STEP_FLOPS`]): every kernel is timed in a
///   whole step with each tensor in an arena while it is live, where a plan runs it. A
///   plan's arena reuses bytes others freed, and BERT-tiny b32's memory-bound kernels
///   ran 25-45% faster there than in a buffer of their own (docs/running.md);
/// - kernels alone when the footprint does not fit ([`footprint_fits`]): a pass then
///   holds one kernel's operands, and a repetition costs one kernel, where live steps
///   would cost a whole step each (about 170 s a pass on ResNet-200 b32 here);
/// - picked steps otherwise, which run only the kernels a pass measures and the
///   producers of their inputs, on resident tensors: far fewer kernels per pass on a
///   large model.
pub fn default_steps(model: &Model) -> Steps {
    let cheap = placer_ir::analysis::step_flops(model) <= LIVE_STEP_FLOPS;
    if cheap {
        Steps::Live
    } else if !footprint_fits(model) {
        Steps::Isolated
    } else {
        Steps::Picked
    }
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
pub struct PassSchedule {
    /// Every configuration the rules leave, and the families they come in.
    pub tasks: TaskList,
    /// What the first stage measures: every task of `tasks` for a full design; the
    /// designs and validation samples for a screening design.
    pub measured: Vec<Task>,
    /// Each family's design (empty for a full design).
    pub families: Vec<FamilyDesign>,
    pub pins: Vec<Pin>,
    /// The first stage's passes (indices into `measured`).
    pub passes: Vec<Vec<Pick>>,
    pub stats: ScheduleStats,
    pub header: ProfileHeader,
    /// See [`ProfileOptions::require_quiet`]; not part of the checkpoint's identity.
    pub require_quiet: bool,
    /// See [`ProfileOptions::mixed_hosts`].
    pub mixed_hosts: bool,
    /// See [`ProfileOptions::skip_calibrations`].
    pub skip_calibrations: bool,
    /// See [`ProfileOptions::foreign`].
    pub foreign: Option<Foreign>,
}

/// `<model>-<hash>-<mode>.ckpt`: one file per model and mode, so single and
/// simultaneous profiles of one model sit side by side; a shard's ends in
/// `-shardIofN.ckpt`, and one of another framework's kernels in `-<tag>.ckpt`
/// (`-torch.ckpt`).
pub fn checkpoint_name(model: &Model, mode: &Mode, shard: Option<(u32, u32)>, foreign: Option<&Foreign>) -> String {
    let mut name = checkpoint_name_of(model.name(), &model.content_hash(), mode);
    if let Some(f) = foreign {
        name = format!("{}-{}.ckpt", name.trim_end_matches(".ckpt"), f.source.tag);
    }
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

/// `tasks` packed into passes as steps of kind `steps` allow: any picks together when
/// each runs alone, else as one step allows ([`passes::schedule`]).
pub fn pack(model: &Model, tasks: &[Task], mode: &Mode, steps: Steps) -> Vec<Vec<Pick>> {
    let max_per_pass = mode.max_simultaneous as usize;
    match steps {
        Steps::Isolated => passes::schedule_alone(tasks, max_per_pass),
        Steps::Whole | Steps::Picked | Steps::Live => passes::schedule(model, tasks, max_per_pass, mode.two_hop),
    }
}

pub fn schedule(
    model: &Model,
    pools: &PoolSet,
    host_fingerprint: &str,
    options: &ProfileOptions,
) -> Result<PassSchedule, ProfileError> {
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
            let families = design::design_families(&list, pool_count, spec.seed);
            (design::first_stage_tasks(&list, &families), families)
        }
        (Design::Screen, Some(_)) => {
            return Err(ProfileError::Usage {
                reason: "--sample draws from every configuration; use it with --design full".into(),
            });
        }
    };
    let max_per_pass = options.mode.max_simultaneous as usize;
    let mut passes = pack(model, &measured, &options.mode, options.protocol.steps);
    let bound = match options.protocol.steps {
        Steps::Isolated => measured.len().div_ceil(max_per_pass.max(1)),
        _ => passes::lower_bound(model, &measured, max_per_pass, options.mode.two_hop),
    };
    let stats = passes::stats(&passes, bound);
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
            Ok(Shard { index, count, schedule_passes: passes.len() as u32 })
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
        pools: PoolInfo::of(pools),
        emulated: pools.any_emulated(),
        protocol: options.protocol.clone(),
        mode: options.mode.clone(),
        pins: options.pins.clone(),
        plan_hash,
        shard,
        footprint_fits: footprint_fits(model),
        cache_bytes: (options.protocol.steps == Steps::Picked).then(placer_host::last_level_cache_bytes).flatten(),
    };
    Ok(PassSchedule {
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
        foreign: options.foreign.clone(),
    })
}

mod run;

pub use run::{
    ProfileOutcome, Progress, calibrates_interference, check_passes, is_finished, measures_step_overhead,
    profile_into_dir, run_to_checkpoint,
};
