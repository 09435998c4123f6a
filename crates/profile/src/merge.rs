//! `placer profile merge`: shards of one pass plan (`--shard I/N`, measured on one host
//! after another or on several hosts at once) into one profile, after checking that
//! they belong together: the same model, protocol, mode and design, pools and pass plan,
//! every shard of the plan once, every first-round pass measured exactly once, and one
//! host unless mixed hosts are allowed. The merged profile is an ordinary unsharded one:
//! `solve` and `compare` read it, and `placer profile` resumes it (a screening design's
//! second stage and the interference calibration are measured then, on one host).

use crate::ProfileError;
use crate::profiler::checkpoint_name_of;
use crate::record::codec as checkpoint;
use crate::record::mismatch::{Sides, differences};
use crate::record::{Measurement, Profile, Shard, ShardSource};
use placer_exec::Stats;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Reference kernels shorter than this are left out of a host's relative speed: the
/// clock's own cost moves their medians.
pub const SPEED_KERNEL_NS: f64 = 10_000.0;

/// A host's relative time is *beyond its noise* when |ln relative time| exceeds this many
/// times its noise floor (and at least [`MIN_FLOOR`]).
pub const NOISE_FACTOR: f64 = 2.0;
/// The least noise floor assumed: a host whose passes repeat perfectly still differs by
/// this much between two moments.
pub const MIN_FLOOR: f64 = 0.01;

/// A merge's result.
#[derive(Debug, Clone)]
pub struct Merged {
    pub profile: Profile,
    /// One line per shard whose host ran the reference kernels faster or slower than the
    /// others beyond its own noise floor.
    pub disagreements: Vec<String>,
}

impl Merged {
    /// Whether resuming the merged profile still measures something: a screening
    /// design's second stage, or the interference calibration.
    pub fn needs_resume(&self) -> bool {
        !crate::profiler::is_finished(&self.profile)
    }
}

/// Where the merge writes when no output is given: the whole profile's checkpoint name
/// in the first shard's directory, where `placer profile` with the same settings (and
/// no `--shard`) resumes it.
pub fn default_output(first_shard: &Path, profile: &Profile) -> PathBuf {
    let name = checkpoint_name_of(&profile.header.model_name, &profile.header.model_hash, &profile.header.mode);
    first_shard.parent().unwrap_or(Path::new(".")).join(name)
}

/// Loads the shard checkpoints at `paths`, merges them ([`merge`]) and saves the result
/// at `out` (or [`default_output`]), which must not exist yet, under `out`'s lock, so
/// no profile writes it meanwhile. Returns the merge and where it was written.
pub fn merge_files(
    paths: &[PathBuf],
    out: Option<&Path>,
    mixed_hosts: bool,
) -> Result<(Merged, PathBuf), ProfileError> {
    let shards =
        paths.iter().map(|p| Ok((p.clone(), checkpoint::load(p)?))).collect::<Result<Vec<_>, ProfileError>>()?;
    let merged = merge(shards, mixed_hosts)?;
    let out = match out {
        Some(out) => out.to_path_buf(),
        None => default_output(&paths[0], &merged.profile),
    };
    if let Some(p) = paths.iter().find(|p| same_file(p, &out)) {
        return Err(refuse(format!(
            "the output {} is one of the shards ({}); choose another -o",
            out.display(),
            p.display()
        )));
    }
    let _lock = crate::lock::lock(&out)?;
    // What is there may hold more than the shards do (a finished merge's second stage).
    if out.exists() {
        return Err(refuse(format!(
            "{} exists already: merge never replaces a checkpoint; move it aside, or choose another -o",
            out.display()
        )));
    }
    checkpoint::save(&out, &merged.profile)?;
    Ok((merged, out))
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

fn refuse(reason: String) -> ProfileError {
    ProfileError::Merge { reason }
}

/// `1/3 (ck/a.ckpt)`.
fn who(shard: &Shard, path: &Path) -> String {
    format!("shard {} ({})", shard.label(), path.display())
}

/// Up to ten 1-based pass numbers, then how many more.
fn pass_list(passes: &[usize]) -> String {
    let shown: Vec<String> = passes.iter().take(10).map(|p| (p + 1).to_string()).collect();
    match passes.len() {
        n if n > 10 => format!("{} and {} more", shown.join(", "), n - 10),
        _ => shown.join(", "),
    }
}

/// Merges shard profiles, named by their paths, into one profile of the whole plan.
/// Refused, with one line naming what and where: fewer than two files, a file that is
/// not a shard or not complete, headers that differ in any field (model, protocol, mode
/// and design, pools, pins, pass plan), shards of different counts, a shard given twice
/// or missing (naming the passes measured twice or never), and shards from hosts with
/// different fingerprints unless `mixed_hosts`.
pub fn merge(mut shards: Vec<(PathBuf, Profile)>, mixed_hosts: bool) -> Result<Merged, ProfileError> {
    if shards.len() < 2 {
        return Err(refuse(format!("merge needs two shards or more, got {}", shards.len())));
    }
    for (path, p) in &shards {
        let shard = p.header.shard.ok_or_else(|| {
            refuse(format!(
                "{} is not a shard (it was profiled without --shard); merge takes shards only",
                path.display()
            ))
        })?;
        if !p.is_complete() {
            return Err(refuse(format!(
                "{} is incomplete ({} of {} passes): resume it with the same placer profile --shard {} command",
                who(&shard, path),
                p.passes_done,
                p.passes_total,
                shard.label()
            )));
        }
    }
    shards.sort_by_key(|(_, p)| p.header.shard.map(|s| s.index));
    // Every one is a shard (checked above), in shard order.
    let specs: Vec<Shard> = shards.iter().filter_map(|(_, p)| p.header.shard).collect();
    let (first_path, first) = &shards[0];
    let first_shard = specs[0];
    for ((path, p), shard) in shards.iter().zip(&specs).skip(1) {
        let mut theirs = p.header.clone();
        theirs.shard = None;
        let other_host = theirs.host_fingerprint != first.header.host_fingerprint;
        if mixed_hosts {
            theirs.host_fingerprint.clone_from(&first.header.host_fingerprint);
        }
        let mut ours = first.header.clone();
        ours.shard = None;
        let (a, b) = (format!("in {}", who(&first_shard, first_path)), format!("in {}", who(shard, path)));
        if let Some(why) = differences(&ours, &theirs, Sides { a: &a, b: &b }) {
            let hint = if other_host && !mixed_hosts {
                " (shards measured on other hosts merge with --mixed-hosts)"
            } else {
                ""
            };
            return Err(refuse(format!("the shards do not belong together: {why}{hint}")));
        }
        if p.kernels != first.kernels {
            return Err(refuse(format!(
                "the shards do not belong together: {} timed {}, {} timed {}",
                who(&first_shard, first_path),
                kernels_of(first),
                who(shard, path),
                kernels_of(p)
            )));
        }
        if shard.count != first_shard.count || shard.schedule_passes != first_shard.schedule_passes {
            return Err(refuse(format!(
                "the shards do not belong together: shard count {} in {}, {} in {}",
                first_shard.count,
                who(&first_shard, first_path),
                shard.count,
                who(shard, path)
            )));
        }
    }
    coverage(&shards, &specs)?;
    Ok(combine(shards, &specs))
}

/// Every first-round pass of the plan measured by exactly one shard, judged from the
/// measurements themselves (a shard given twice measures its passes twice; one left
/// out leaves its passes unmeasured).
fn coverage(shards: &[(PathBuf, Profile)], specs: &[Shard]) -> Result<(), ProfileError> {
    let schedule_passes = specs[0].schedule_passes as usize;
    let mut measured_by: Vec<Vec<usize>> = vec![Vec::new(); schedule_passes];
    for (i, ((_, p), shard)) in shards.iter().zip(specs).enumerate() {
        let len = shard.len();
        let mut seen = vec![false; len];
        for m in &p.measurements {
            let local = m.pass as usize;
            if local < len && !seen[local] {
                seen[local] = true;
                measured_by[shard.global(local)].push(i);
            }
        }
    }
    let twice: Vec<usize> = (0..schedule_passes).filter(|&g| measured_by[g].len() > 1).collect();
    if let Some(&g) = twice.first() {
        let names: Vec<String> = measured_by[g].iter().map(|&i| who(&specs[i], &shards[i].0)).collect();
        return Err(refuse(format!(
            "pass(es) {} measured twice: pass {} by {}",
            pass_list(&twice),
            g + 1,
            names.join(" and ")
        )));
    }
    let missing: Vec<usize> = (0..schedule_passes).filter(|&g| measured_by[g].is_empty()).collect();
    if !missing.is_empty() {
        let count = specs[0].count;
        let absent: Vec<String> =
            (1..=count).filter(|i| !specs.iter().any(|s| s.index == *i)).map(|i| format!("{i}/{count}")).collect();
        let because =
            if absent.is_empty() { String::new() } else { format!(" (shard {} not given)", absent.join(", ")) };
        return Err(refuse(format!(
            "{} of {} passes not measured by any shard: pass(es) {}{because}",
            missing.len(),
            schedule_passes,
            pass_list(&missing)
        )));
    }
    Ok(())
}

/// The merged profile: measurements and per-pass records renumbered into the whole
/// plan's passes (shard pass `l` of round `r` is the plan's pass
/// `r·schedule_passes + global(l)`), reference times the shards' per-kernel median, and
/// every shard's source with its host's relative time.
fn combine(shards: Vec<(PathBuf, Profile)>, specs: &[Shard]) -> Merged {
    let schedule_passes = specs[0].schedule_passes as usize;
    let rounds = shards[0].1.header.protocol.rounds.max(1) as usize;
    let renumber = |shard: &Shard, local: u32| -> u32 {
        let len = shard.len().max(1);
        let (round, l) = (local as usize / len, local as usize % len);
        (round * schedule_passes + shard.global(l)) as u32
    };
    let reference_ns = median_reference(&shards, None);
    let mut measurements: Vec<Measurement> = Vec::new();
    let mut drift: BTreeMap<u32, f64> = BTreeMap::new();
    let mut activity = Vec::new();
    let mut sources = Vec::new();
    let mut disagreements = Vec::new();
    let mut wall = 0.0;
    for ((path, p), shard) in shards.iter().zip(specs) {
        measurements.extend(p.measurements.iter().map(|m| Measurement { pass: renumber(shard, m.pass), ..m.clone() }));
        for (local, d) in p.pass_drift.iter().enumerate() {
            drift.insert(renumber(shard, local as u32), *d);
        }
        activity.extend(
            p.host_activity.iter().map(|s| crate::record::ActivitySample {
                pass: s.pass.map(|l| renumber(shard, l)),
                activity: s.activity,
            }),
        );
        // Against the median host: the shards' median time per kernel; with two shards,
        // against the other one (a median of two would put each half against itself).
        let other;
        let others = if shards.len() > 2 {
            &reference_ns
        } else {
            other = median_reference(&shards, Some(path));
            &other
        };
        let (relative_time, standard_error) = relative_time(&p.reference_ns, others);
        let noise = noise_floor(p, standard_error);
        let floor = noise.max(MIN_FLOOR);
        if relative_time.ln().abs() > NOISE_FACTOR * floor {
            disagreements.push(format!(
                "{} (host {}) ran the reference kernels at {relative_time:.3}x the median shard's time, \
                 beyond {NOISE_FACTOR}x its noise floor of ±{:.1}%",
                who(shard, path),
                p.header.host_fingerprint,
                100.0 * floor
            ));
        }
        wall += p.wall_seconds;
        sources.push(ShardSource {
            shard: *shard,
            file: path.display().to_string(),
            host_fingerprint: p.header.host_fingerprint.clone(),
            passes: p.passes_done,
            measurements: p.measurements.len() as u32,
            wall_seconds: p.wall_seconds,
            relative_time,
            noise,
        });
    }
    measurements.sort_by_key(|m| m.pass);
    let (_, first) = &shards[0];
    let mut header = first.header.clone();
    header.shard = None;
    // Every round of the first stage is accounted for, as in a profile whose rounds all
    // ran: resuming goes straight to judging the design (or to the calibration).
    let passes = (schedule_passes * rounds) as u32;
    let profile = Profile {
        header,
        passes_total: passes,
        passes_done: passes,
        wall_seconds: wall,
        clock_resolution_ns: first.clock_resolution_ns,
        clock_overhead_ns: first.clock_overhead_ns,
        reference_ns,
        pass_drift: drift.into_values().collect(),
        round_checks: Vec::new(),
        measurements,
        design: None,
        interference: None,
        step_overhead: None,
        host_activity: activity,
        merged_from: sources,
        model_json: first.model_json.clone(),
        kernels: first.kernels.clone(),
    };
    Merged { profile, disagreements }
}

/// Whose kernels a profile timed, in words.
fn kernels_of(p: &Profile) -> String {
    crate::record::KernelSource::label_of(p.kernels.as_ref())
}

/// Each kernel's median reference-pass time over the shards, leaving out the one at
/// `except`.
fn median_reference(shards: &[(PathBuf, Profile)], except: Option<&PathBuf>) -> Vec<f64> {
    let nodes = shards.iter().map(|(_, p)| p.reference_ns.len()).max().unwrap_or(0);
    (0..nodes)
        .map(|n| {
            let times: Vec<f64> = shards
                .iter()
                .filter(|(q, _)| Some(q) != except)
                .filter_map(|(_, p)| p.reference_ns.get(n).copied())
                .collect();
            Stats::of(&times).map_or(0.0, |s| s.median)
        })
        .collect()
}

/// Median over the reference kernels (of at least [`SPEED_KERNEL_NS`] in both) of
/// `mine[n] / others[n]`, `others` being the shards' median times (the other shard's,
/// with two), and that median's standard error in log terms (1.2533·1.4826·MAD of
/// ln ratio / √kernels); (1, 0) when no kernel is that long.
pub fn relative_time(mine: &[f64], others: &[f64]) -> (f64, f64) {
    let logs: Vec<f64> = mine
        .iter()
        .zip(others)
        .filter(|(m, c)| **m >= SPEED_KERNEL_NS && **c >= SPEED_KERNEL_NS)
        .map(|(m, c)| (m / c).ln())
        .collect();
    Stats::of(&logs).map_or((1.0, 0.0), |s| (s.median.exp(), 1.2533 * 1.4826 * s.mad / (logs.len() as f64).sqrt()))
}

/// A host's noise floor for its relative time: the larger of the figure's own standard
/// error (how well its kernels agree on it) and the largest |shift| of the host's round
/// checks, the same kind of figure (a median ratio over many kernels) taken on the host
/// against itself minutes apart (A against A′), when it ran more than one round.
pub fn noise_floor(profile: &Profile, standard_error: f64) -> f64 {
    let shift = profile.round_checks.iter().filter(|k| k.pairs > 0).map(|k| k.shift.abs()).fold(0.0, f64::max);
    shift.max(standard_error)
}
