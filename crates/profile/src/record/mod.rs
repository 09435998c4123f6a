//! What a profile holds: a header saying what it was measured on and how, and one
//! measurement per (kernel signature, configuration). Checkpoints store exactly this.
//!
//! A leaf: it imports nothing else from the crate, so the code that measures, designs
//! and merges profiles depends on the record and never the other way round. It owns
//! the checkpoint format ([`codec`]) and what makes two headers differ ([`mismatch`]).

mod calibration;
pub(crate) mod codec;
mod in_situ;
pub(crate) mod mismatch;
mod pins;
mod screening;

pub use calibration::{
    CopiesBesideSteps, Interference, KernelPairs, OpInterference, SignatureInterference, StepOverhead,
    WAKE_UP_MIN_STEPS,
};
pub use in_situ::{IN_SITU_FORMAT, IN_SITU_VERSION, InSitu, InSituKernel};
pub use pins::{PinRule, PinRuleTarget};
pub use screening::{
    Design, DesignRecord, DesignSpec, DesignSummary, FamilyVerdict, Fit, LONG_KERNEL_NS, Prediction, ValidationPoint,
};

use placer_exec::Stats;
use placer_host::HostActivity;
use placer_pools::PoolKind;
use serde::{Deserialize, Serialize};

pub const FORMAT_NAME: &str = "placer-profile";
/// Bumped whenever the encoding of [`Profile`] changes, or what a recorded figure means;
/// older files are refused. 9: kernels timed from a launcher pinned to its core, and
/// interference shares with the copy thread kept off that core, as plans now run
/// (`placer_exec::as_launcher`). 10: buffers on huge pages where the host allows them
/// (kernel times move by about 10% with that). 11: emulated pools charged from a DRAM
/// baseline measured on huge pages (host cache version 2; the 4 KiB baseline read 1.5-1.7×
/// slower on this project's VM), so a profile timed against the older one is refused.
/// 12: NUMA buffers under 2 MiB share huge pages (placer-pools' alloc/small.rs) instead
/// of a 4 KiB-paged mapping each; small kernels ran 2-7× slower on the old ones.
/// 13: the interference calibration measures a fixed part per copy beside its share.
/// 14: a profile measures what a step costs beyond its kernels' medians
/// ([`StepOverhead`]), which every prediction now includes.
/// 15: that figure includes the kernels' wait for their pool's threads, which the
/// profile's woken timings leave out.
/// 16: every check of the host's activity times a memcpy too
/// (`placer_host::Calibration::memcpy_ns_per_byte`).
/// 17: the profiled model follows the body ([`Profile::model_json`]), so a checkpoint
/// can be solved without its model file.
/// 18: picked steps write the operands a step leaves in memory out of the caches before
/// each timed kernel ([`ProfileHeader::cache_bytes`]); they found saved activations and
/// weights in cache, and BERT-base's `layer_norm_backward` and `bias_grad` ran about 24%
/// faster there than in their plan.
/// 19: the interference calibration measures a share of their own for the longest-running
/// signatures ([`SignatureInterference`]); BERT-base's attention products were charged
/// their op's share, about twice what a copy cost them.
/// 20: another framework's profile times its whole step beside a copy thread too
/// ([`CopiesBesideSteps`]), which sets the level of its copies' charge.
pub const FORMAT_VERSION: u32 = 20;

/// One pool as the profile saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolInfo {
    pub name: String,
    pub kind: PoolKind,
    /// The device model when the pool is emulated.
    pub emulated_as: Option<String>,
}

impl PoolInfo {
    /// Every pool of `pools`, as a profile (or an in-situ record) states it.
    pub fn of(pools: &placer_pools::PoolSet) -> Vec<PoolInfo> {
        pools
            .pools()
            .iter()
            .map(|p| PoolInfo {
                name: p.name.clone(),
                kind: p.kind,
                emulated_as: p.emulation.as_ref().map(placer_pools::Emulation::label),
            })
            .collect()
    }
}

/// How kernels are measured. Identical in both modes, so profiles compare.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Protocol {
    /// Untimed steps (of the kind `steps` says) at the start of every pass.
    pub warmup: u32,
    /// Timed steps per pass, at least.
    pub reps: u32,
    /// Timed steps per pass, at most (adaptive repetition stops here).
    pub max_reps: u32,
    /// A pass stops (after `reps` steps at least) once every picked kernel's median is
    /// known to this relative standard error, or to 1 µs ([`PRECISION_FLOOR_NS`]),
    /// whichever is looser: 1.2533·1.4826·MAD/√n ≤ max(precision·median, 1 µs). A
    /// kernel keeps no samples after its own median is known.
    pub precision: f64,
    /// Seed of the data every pass starts from.
    pub seed: u64,
    /// How many times the whole pass plan runs, at most. Samples taken in one pass are
    /// taken within a fraction of a second of each other and share that moment's luck on
    /// a shared host (cache neighbours, the other hyperthread); rounds minutes apart give
    /// each configuration several independent moments, merged by their median.
    pub rounds: u32,
    /// How far medians may move between rounds before another round is due: a round
    /// after the first starts with a re-run of the first passes of the round before
    /// ([`RoundCheck`]), and goes on only when their medians moved by more than this
    /// (robust spread, or shift, of the ratios). 0 runs every round.
    pub round_noise: f64,
    /// What a timed step of a pass runs.
    pub steps: Steps,
}

/// What a timed step of a pass runs. Either way a pass starts from tensors that a whole
/// training step has filled, so every kernel reads the values training gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Steps {
    /// The whole schedule: every picked kernel runs between its real neighbours, at the
    /// price of a whole training step per timed step, whatever was picked.
    Whole,
    /// Only the picked kernels and a few unpicked reference kernels (for the drift
    /// factor), each right after the producers of its inputs, in schedule order: a timed
    /// step costs what the picks cost, and every timed kernel reads inputs as fresh in
    /// cache as in training. docs/profiling.md gives the measured agreement with whole
    /// steps.
    Picked,
    /// Whole steps, as a plan runs them: each tensor placed in an arena only while it is
    /// live, so a pass needs the model's peak live memory, not its footprint, and each
    /// kernel is timed amid the reuse of freed bytes a plan's arena has. The default for
    /// cheap steps (see [`crate::profiler::default_steps`]); every pass starts from
    /// freshly filled weights and inputs.
    Live,
    /// Each picked kernel alone: only its own operands allocated, in the pools its
    /// configuration names, filled from the seed, and before each repetition put in the
    /// cache state a step leaves them in (inputs a kernel wrote rewritten, the rest
    /// written out of the caches). A pass needs one kernel's operands, and a repetition
    /// costs one kernel, whatever the model's size. The default when the footprint does
    /// not fit. The reference pass still runs whole live steps, and the kernels'
    /// all-DRAM times are set against it ([`crate::IsolationCheck`]).
    Isolated,
}

impl Steps {
    pub fn as_str(self) -> &'static str {
        match self {
            Steps::Whole => "whole",
            Steps::Picked => "picked",
            Steps::Live => "live",
            Steps::Isolated => "isolated",
        }
    }
}

/// Medians known to within this many ns are precise enough for any plan, however short
/// the kernel: the clock's own reading costs tens of ns.
pub const PRECISION_FLOOR_NS: f64 = 1_000.0;

/// The default [`Protocol::round_noise`]: medians that repeat within 2% minutes later.
pub const ROUND_NOISE: f64 = 0.02;

/// Single-config (`max_simultaneous == 1`) or simultaneous profiling, of every
/// configuration or of a design.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mode {
    pub max_simultaneous: u32,
    /// Conflicts also between nodes two tensors apart.
    pub two_hop: bool,
    /// Measure only a random sample of this many tasks (with this seed).
    pub sample: Option<(u32, u64)>,
    /// Nodes with more configurations than this have their inputs (then outputs)
    /// grouped into one location each.
    pub max_configs: u64,
    /// Operands moving at most this share of their kernel's bytes stay in the default
    /// pool (`NEGLIGIBLE_SHARE` by default; 0: only untouched ones).
    pub negligible: f64,
    /// Which configurations are measured, and how predictions of the others are judged.
    pub design: DesignSpec,
}

impl Mode {
    pub fn label(&self) -> String {
        let base = if self.max_simultaneous == 1 {
            "single".to_string()
        } else {
            format!(
                "simultaneous (up to {} per pass{})",
                self.max_simultaneous,
                if self.two_hop { ", 2-hop" } else { "" }
            )
        };
        let base = match self.design.design {
            Design::Full => base,
            Design::Screen => format!(
                "{base}, screening design (validated within ±{:.0}% or the noise, {:.0} µs floor)",
                100.0 * self.design.tolerance,
                self.design.min_error_ns / 1e3
            ),
        };
        match self.sample {
            Some((k, seed)) => format!("{base}, sample of {k} (seed {seed})"),
            None => base,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileHeader {
    pub format: String,
    pub version: u32,
    pub model_name: String,
    pub model_hash: String,
    /// The absolute path of the model file that was profiled, when it came from a file:
    /// `placer solve` without a model finds the model again through it (and
    /// `model_hash` says whether the file still holds the same model). Not part of a
    /// checkpoint's identity: a resumed run records where the model is now.
    pub model_source: Option<String>,
    pub host_fingerprint: String,
    pub pools: Vec<PoolInfo>,
    /// True when any pool is emulated: these timings are then not measurements of the
    /// device the pool stands for.
    pub emulated: bool,
    pub protocol: Protocol,
    pub mode: Mode,
    /// The `--pin` rules, as given.
    pub pins: Vec<PinRule>,
    /// A digest of the task list and pass plan: a resumed run must follow the same plan.
    /// A shard records the whole plan's digest, so every shard of one plan records the
    /// same.
    pub plan_hash: String,
    /// The share of the plan's first-stage passes this profile measures (`--shard I/N`);
    /// `None` for a whole profile, and for shards merged into one.
    pub shard: Option<Shard>,
    /// Whether every tensor of the model fits in three quarters of the host's memory at
    /// once ([`crate::profiler::footprint_fits`]), decided when the profile began: a
    /// profile of live steps then still calibrates interference, on resident tensors.
    pub footprint_fits: bool,
    /// Picked steps only: the host's last-level cache, in bytes, by which each timed
    /// kernel's operands that a training step leaves in memory are written out of the
    /// caches before it runs ([`placer_ir::analysis::cold_reads`]). `None` for other
    /// steps (whole and live steps leave operands where the step does; kernels alone use
    /// `placer_exec::Executor::as_in_a_step`), and where the host does not say.
    pub cache_bytes: Option<u64>,
}

/// `--shard I/N`: one of `count` profiles that measure disjoint shares of one pass
/// plan, to be merged into one ([`crate::merge`]). Shard `index` (1-based) measures the
/// plan's first-stage passes `index - 1`, `index - 1 + count`, ... of every round:
/// interleaved, so every shard gets passes from the whole plan (which is packed most
/// constrained first) and shares differ in length by one pass at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
    /// Passes per round of the whole plan's first stage.
    pub schedule_passes: u32,
}

impl Shard {
    /// `I/N` with 1 <= I <= N <= 10,000.
    pub fn parse(text: &str) -> Result<(u32, u32), String> {
        let bad = || format!("expected a shard as I/N with 1 <= I <= N, such as 2/3; got '{text}'");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let (i, n) = (i.trim().parse::<u32>().map_err(|_| bad())?, n.trim().parse::<u32>().map_err(|_| bad())?);
        if i == 0 || i > n || n > 10_000 {
            return Err(bad());
        }
        Ok((i, n))
    }

    /// The whole plan's index of this shard's `local`-th pass within a round.
    pub fn global(&self, local: usize) -> usize {
        (self.index as usize - 1) + local * self.count as usize
    }

    /// How many of a round's passes this shard measures.
    pub fn len(&self) -> usize {
        (self.schedule_passes as usize).saturating_sub(self.index as usize - 1).div_ceil(self.count as usize)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `2/3`.
    pub fn label(&self) -> String {
        format!("{}/{}", self.index, self.count)
    }
}

/// One kernel signature in one configuration, measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Digest of the kernel signature (op, attributes, shapes, dtypes); with `config`,
    /// the key that profiles of the same model are joined on.
    pub signature: u64,
    /// The pool of each operand, in `Node::operands` order.
    pub config: Vec<u16>,
    /// The node instance that was measured (others with the same signature share it).
    pub node: String,
    pub op: String,
    /// Which pass measured it.
    pub pass: u32,
    /// Timed samples.
    pub count: u32,
    /// Median of the samples, as timed.
    pub median_ns: f64,
    /// Median of the samples after each was divided by its step's drift factor (see
    /// `Profile::reference_ns`). Kept for analysis, not used: on this VM it made single
    /// and simultaneous agree less (docs/BENCHMARKS.md), because the reference kernels
    /// are themselves disturbed by the picked kernels' emulated waits.
    pub drift_corrected_ns: f64,
    /// Median absolute deviation, ns.
    pub mad_ns: f64,
    pub min_ns: f64,
    pub max_ns: f64,
    /// 1.4826 · MAD / median.
    pub cv: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub header: ProfileHeader,
    pub passes_total: u32,
    pub passes_done: u32,
    /// Wall time spent profiling so far, over every run that contributed.
    pub wall_seconds: f64,
    pub clock_resolution_ns: f64,
    pub clock_overhead_ns: f64,
    /// Every node's median time in the reference pass (base placement, nothing picked),
    /// run before the first pass. In each timed step of a pass, the nodes that run as in
    /// the reference pass (not picked, no operand moved) give the step's drift factor:
    /// their summed time now over their summed time then.
    pub reference_ns: Vec<f64>,
    /// Median drift factor of each pass (1.0 = as fast as the reference pass).
    pub pass_drift: Vec<f64>,
    /// Every round check so far, in the order they were made.
    pub round_checks: Vec<RoundCheck>,
    pub measurements: Vec<Measurement>,
    /// A screening design's verdicts and predictions, once its first stage is measured
    /// (`None` for a full design, and before that).
    pub design: Option<DesignRecord>,
    /// What a background copy costs each op's kernels, measured after the last pass
    /// ([`crate::interference`]); `None` until then, and for profiles that do not
    /// measure it ([`crate::profiler::calibrates_interference`]).
    pub interference: Option<Interference>,
    /// What a whole step costs beyond its kernels' median times, measured after the
    /// last pass ([`crate::overhead`]); `None` until then, and for a shard.
    pub step_overhead: Option<StepOverhead>,
    /// The host's activity before the first pass of each run and during every pass:
    /// whether other processes, a hypervisor or unexplained jitter competed with the
    /// measurements ([`placer_host::activity`]).
    pub host_activity: Vec<ActivitySample>,
    /// The shards this profile was merged from, in shard order (empty for a profile
    /// measured as one).
    pub merged_from: Vec<ShardSource>,
    /// The profiled model as model.json (`Model::to_json`), whatever it was built from
    /// (a file, the zoo, an import): `placer solve` without a model reads it back from
    /// here. Stored after the body ([`codec`]), so reading a header never
    /// decodes it; `None` in checkpoints of version 16.
    #[serde(skip)]
    pub model_json: Option<String>,
    /// Whose kernels were timed, when not placer's own (`None`): another framework's,
    /// through a `placer_exec::KernelRunner`. Stored after the model ([`codec`]); absent
    /// from every earlier checkpoint, which placer's kernels timed.
    #[serde(skip)]
    pub kernels: Option<KernelSource>,
}

/// The kernels a profile timed when they were not placer's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelSource {
    /// What ran them, in words: `torch 2.15.0 (aten ops, eager, CPU)`.
    pub label: String,
    /// A short name for file names: `torch`.
    pub tag: String,
    /// Nodes the runner has no kernel for, timed with placer's own.
    pub placer_nodes: Vec<String>,
    /// Nodes charged no kernel time, only their operands' emulated wait: their work is
    /// done inside another node's kernel (a layout copy placer needs and torch's op does
    /// itself).
    pub folded_nodes: Vec<String>,
}

impl KernelSource {
    /// Whose kernels `source` says a profile timed, in words: its label, or placer's
    /// own when there is none.
    pub fn label_of(source: Option<&KernelSource>) -> String {
        source.map_or_else(|| "placer's kernels".to_string(), |k| k.label.clone())
    }

    /// `torch 2.15.0 (aten ops, eager, CPU); 3 nodes by placer's kernels, 12 folded`.
    pub fn describe(&self) -> String {
        format!(
            "{}; {} node(s) timed by placer's kernels, {} folded into another node's kernel",
            self.label,
            self.placer_nodes.len(),
            self.folded_nodes.len()
        )
    }
}

/// One shard of a merged profile: where and how it was measured, and how fast its host
/// ran the reference kernels every shard runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardSource {
    pub shard: Shard,
    /// The shard's checkpoint file, as given to the merge.
    pub file: String,
    pub host_fingerprint: String,
    /// Passes it measured (all rounds), and measurements.
    pub passes: u32,
    pub measurements: u32,
    pub wall_seconds: f64,
    /// Median over the reference kernels of this shard's reference-pass time over the
    /// shards' median time for the same kernel (the other shard's, when there are two):
    /// 1.10 is a host 10% slower than the median host.
    pub relative_time: f64,
    /// The noise floor of that figure, in log terms ([`crate::merge::noise_floor`]):
    /// its standard error, or the host against itself minutes apart if wider.
    pub noise: f64,
}

/// The host's activity over one interval of a profile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ActivitySample {
    /// The pass measured over the interval; `None` for the check before a run's first pass.
    pub pass: Option<u32>,
    pub activity: HostActivity,
}

impl Profile {
    /// Intervals that were busy, of all recorded.
    pub fn busy_intervals(&self) -> (usize, usize) {
        let busy = self.host_activity.iter().filter(|s| s.activity.busy().is_some()).count();
        (busy, self.host_activity.len())
    }

    /// Passes in which some kernel ran to the protocol's repetition cap (its median was
    /// not known to the precision asked), of all passes with measurements.
    pub fn capped_passes(&self) -> (usize, usize) {
        let cap = self.header.protocol.max_reps;
        let mut passes: std::collections::BTreeMap<u32, bool> = std::collections::BTreeMap::new();
        for m in &self.measurements {
            *passes.entry(m.pass).or_default() |= m.count >= cap;
        }
        (passes.values().filter(|&&c| c).count(), passes.len())
    }

    /// The host's memcpy speed over every check of this profile that timed it, ns per
    /// byte; `None` when none did.
    pub fn memcpy_ns_per_byte(&self) -> Option<Stats> {
        let timed: Vec<f64> =
            self.host_activity.iter().filter_map(|s| Some(s.activity.calibration?.memcpy_ns_per_byte)).collect();
        Stats::of(&timed)
    }

    /// Seconds of [`Profile::wall_seconds`] spent on the interference and step-overhead
    /// calibrations, not on passes.
    pub fn calibration_seconds(&self) -> f64 {
        self.interference.as_ref().map_or(0.0, |i| i.seconds) + self.step_overhead.as_ref().map_or(0.0, |o| o.seconds)
    }

    /// What the host did while this profile was measured, in one line: quiet, or busy
    /// in how many intervals and how (the first busy one's figures).
    pub fn activity_note(&self) -> String {
        let (busy, total) = self.busy_intervals();
        let first = self.host_activity.iter().find_map(|s| Some((s.pass, s.activity.busy()?, s.activity)));
        match first {
            _ if total == 0 => "not recorded".to_string(),
            None => format!("quiet in all {total} intervals checked"),
            Some((pass, why, a)) => {
                let when = pass.map_or("before the first pass".to_string(), |p| format!("pass {}", p + 1));
                format!("BUSY in {busy} of {total} intervals checked; first {when}: {why} ({})", a.describe())
            }
        }
    }

    /// The warning when most passes ran to the repetition cap, with the figures.
    pub fn capped_warning(&self) -> Option<String> {
        let (capped, total) = self.capped_passes();
        (total > 0 && 2 * capped > total).then(|| {
            format!(
                "{capped} of {total} passes ran to the {}-step cap: kernels did not settle to ±{:.0}% \
                 (a noisy host, or --precision tighter than this host allows)",
                self.header.protocol.max_reps,
                100.0 * self.header.protocol.precision
            )
        })
    }
}

/// A round check compares kernels at least this long (those the design's goals are
/// about, whose medians timer noise does not move)...
pub const CHECK_KERNEL_NS: f64 = 1e6;
/// ...or, when fewer are, this many of the longest.
pub const CHECK_MIN_PAIRS: usize = 10;

/// The re-run of a round's first passes at the start of the next round: the same
/// configurations measured again minutes apart, in the same run (A against A′). Their
/// agreement decides whether the round goes on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundCheck {
    /// Global index of the first pass re-run, and of the pass it re-ran.
    pub first_pass: u32,
    pub rerun_of: u32,
    /// Passes re-run.
    pub passes: u32,
    /// Configurations compared: those measured in both of kernels of at least
    /// [`CHECK_KERNEL_NS`], or the [`CHECK_MIN_PAIRS`] longest when fewer are that long.
    pub pairs: u32,
    /// Median of ln(now / then) over the pairs: a drift of the whole host.
    pub shift: f64,
    /// Robust spread of ln(now / then) over √2 (1.4826·MAD/√2): how far one
    /// measurement strays.
    pub spread: f64,
    /// Of the pairs, how many agree within ±5%.
    pub within_5pct: u32,
    /// Whether the rest of the round (and any later round) was dropped.
    pub quiet: bool,
}

impl RoundCheck {
    /// Compares `now` with `then`, the same picks measured in an earlier round, on the
    /// long kernels (whose times matter, and whose medians timer noise does not move);
    /// quiet when both shift and spread are within `limit` (and a limit of 0 is never
    /// quiet, nor is a check without pairs).
    pub fn of(
        first_pass: u32,
        rerun_of: u32,
        passes: u32,
        then: &[&Measurement],
        now: &[&Measurement],
        limit: f64,
    ) -> Self {
        let before: std::collections::HashMap<(u64, &[u16]), f64> =
            then.iter().map(|m| ((m.signature, m.config.as_slice()), m.median_ns)).collect();
        let mut pairs: Vec<(f64, f64)> = now
            .iter()
            .filter_map(|m| {
                let t = *before.get(&(m.signature, m.config.as_slice()))?;
                (t >= PRECISION_FLOOR_NS && m.median_ns >= PRECISION_FLOOR_NS).then_some((t, m.median_ns))
            })
            .collect();
        pairs.sort_by(|a, b| b.0.total_cmp(&a.0));
        let long = pairs.iter().take_while(|(t, _)| *t >= CHECK_KERNEL_NS).count();
        pairs.truncate(long.max(CHECK_MIN_PAIRS));
        let ratios: Vec<f64> = pairs.iter().map(|(then, now)| (now / then).ln()).collect();
        let (shift, spread) = Stats::of(&ratios).map_or((0.0, 0.0), |s| (s.median, 1.4826 * s.mad / 2f64.sqrt()));
        RoundCheck {
            first_pass,
            rerun_of,
            passes,
            pairs: ratios.len() as u32,
            shift,
            spread,
            within_5pct: ratios.iter().filter(|r| r.exp() >= 0.95 && r.exp() <= 1.05).count() as u32,
            quiet: limit > 0.0 && !ratios.is_empty() && shift.abs() <= limit && spread <= limit,
        }
    }
}

impl Profile {
    /// Every planned pass is measured (and a screening design's first stage judged).
    pub fn is_complete(&self) -> bool {
        // A shard measures its share of the first stage only: the design is judged on
        // the merge of every shard, when the merged profile is resumed.
        self.passes_done >= self.passes_total
            && (self.header.mode.design.design == Design::Full || self.design.is_some() || self.header.shard.is_some())
    }

    /// The configurations a design predicted instead of measuring (none for a full
    /// design).
    pub fn predictions(&self) -> &[Prediction] {
        self.design.as_ref().map_or(&[], |d| d.predictions.as_slice())
    }

    /// This profile's measurements, rounds [`merge`]d.
    pub fn merged(&self) -> Vec<Measurement> {
        merge(&self.measurements)
    }
}

/// One measurement per (signature, config): rounds merged. The median is the median
/// of the rounds' medians; the spread is the larger of the rounds' typical MAD and
/// the MAD between rounds, so disagreement between moments counts as noise.
pub fn merge<'a>(measurements: impl IntoIterator<Item = &'a Measurement>) -> Vec<Measurement> {
    let mut groups: std::collections::BTreeMap<(u64, &[u16]), Vec<&Measurement>> = Default::default();
    let mut order = Vec::new();
    for m in measurements {
        let key = (m.signature, m.config.as_slice());
        let group = groups.entry(key).or_default();
        if group.is_empty() {
            order.push(key);
        }
        group.push(m);
    }
    order
        .into_iter()
        .filter_map(|key| {
            let group = groups.get(&key)?;
            let first = group.first()?;
            if group.len() == 1 {
                return Some((*first).clone());
            }
            let rounds = Stats::of(&group.iter().map(|m| m.median_ns).collect::<Vec<_>>())?;
            let (median, between) = (rounds.median, rounds.mad);
            let within = median_of(&group.iter().map(|m| m.mad_ns).collect::<Vec<_>>());
            let mad = between.max(within);
            Some(Measurement {
                pass: group.iter().map(|m| m.pass).max().unwrap_or(first.pass),
                count: group.iter().map(|m| m.count).sum(),
                median_ns: median,
                drift_corrected_ns: median_of(&group.iter().map(|m| m.drift_corrected_ns).collect::<Vec<_>>()),
                mad_ns: mad,
                min_ns: group.iter().map(|m| m.min_ns).fold(f64::INFINITY, f64::min),
                max_ns: group.iter().map(|m| m.max_ns).fold(0.0, f64::max),
                cv: if median > 0.0 { 1.4826 * mad / median } else { 0.0 },
                ..(*first).clone()
            })
        })
        .collect()
}

fn median_of(values: &[f64]) -> f64 {
    Stats::of(values).map_or(f64::NAN, |s| s.median)
}
