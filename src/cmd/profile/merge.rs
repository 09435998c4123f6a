//! `placer profile merge SHARD.ckpt... [-o MERGED.ckpt] [--mixed-hosts]`

use crate::table::{Table, count};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The shards' checkpoints (`placer profile MODEL --shard I/N`), every shard of one plan.
    #[arg(required = true, num_args = 2..)]
    shards: Vec<PathBuf>,
    /// Where the merged checkpoint goes; by default the whole profile's checkpoint name
    /// beside the first shard, where `placer profile MODEL` with the same settings
    /// resumes it.
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    /// Merge shards measured on hosts with different fingerprints (a fingerprint
    /// includes the host name, so every cluster's shards need this); each host's speed
    /// on the reference kernels is then compared with the others' and recorded.
    #[arg(long)]
    mixed_hosts: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let started = Instant::now();
    let (merged, out) = placer_profile::merge_files(&args.shards, args.output.as_deref(), args.mixed_hosts)?;
    let seconds = started.elapsed().as_secs_f64();
    let p = &merged.profile;
    let mut t = Table::new(&["shard", "file", "host", "passes", "measurements", "wall s", "ref. time", "noise floor"]);
    for s in &p.merged_from {
        t.row(vec![
            s.shard.label(),
            s.file.clone(),
            s.host_fingerprint.clone(),
            count(u64::from(s.passes)),
            count(u64::from(s.measurements)),
            format!("{:.1}", s.wall_seconds),
            format!("{:.3}x", s.relative_time),
            format!("±{:.1}%", 100.0 * s.noise),
        ]);
    }
    out!("{}", t.render())?;
    outln!(
        "ref. time: each host's reference-pass time over the median shard's (the other's, with two), kernels of \
         {:.0} µs or more; \
         noise floor: that median's standard error over the kernels, or the host against itself minutes apart (its \
         round checks, A against A') when wider",
        placer_profile::SPEED_KERNEL_NS / 1e3
    )?;
    for line in &merged.disagreements {
        errln!("warning: {line}");
    }
    outln!(
        "merged {} measurements of {} passes per round from {} shards into {} in {seconds:.2} s",
        count(p.measurements.len() as u64),
        p.merged_from.first().map_or(0, |s| s.shard.schedule_passes),
        p.merged_from.len(),
        out.display()
    )?;
    if merged.needs_resume() {
        // `placer profile` finds it only under the whole profile's name.
        let whole = placer_profile::default_output(&out, p);
        let moved = if whole == out { String::new() } else { format!(" after moving it to {}", whole.display()) };
        outln!(
            "still to measure, on one host: {}; resume with placer profile MODEL (the shards' settings, without \
             --shard) --checkpoint-dir {}{moved}",
            if p.header.mode.design.design == placer_profile::Design::Screen {
                "the screening design's second stage and the interference calibration"
            } else {
                "the interference calibration"
            },
            out.parent().map_or_else(|| ".".to_string(), |d| d.display().to_string())
        )?;
    }
    if p.header.emulated {
        outln!(
            "EMULATED: some pools' timing is emulated by a device model; these timings are not measurements of the devices they stand for."
        )?;
    }
    Ok(())
}
