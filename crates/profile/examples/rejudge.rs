//! Judges a screening design's first stage again, from a checkpoint's first-stage
//! measurements, with this build's verdict rules; prints the summary and the second
//! stage it would plan. For studying the rules on a real profile without measuring it
//! again: `cargo run --release -p placer-profile --example rejudge -- MODEL.json CKPT`.

#![allow(clippy::print_stdout)] // a command-line tool: printing is its output

use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, model, ckpt] = args.as_slice() else {
        return Err("usage: rejudge MODEL.json CHECKPOINT".into());
    };
    let model = placer_ir::load_model(Path::new(model))?;
    let profile = placer_profile::load_checkpoint(Path::new(ckpt))?;
    println!(
        "checkpoint: {} of {} passes, {} measurements, {:.0} s measuring",
        profile.passes_done,
        profile.passes_total,
        profile.measurements.len(),
        profile.wall_seconds
    );
    let record = profile.design.as_ref().ok_or("not a judged screening design yet")?;
    println!("first stage: {:.0} s", record.first_stage_seconds);
    let h = &profile.header;
    let pools = h.pools.len() as u16;
    let names: Vec<String> = h.pools.iter().map(|p| p.name.clone()).collect();
    let pins = h.pins.iter().map(|p| placer_profile::Pin::resolve(p, &model, &names)).collect::<Result<Vec<_>, _>>()?;
    let list = placer_profile::enumerate_tasks(&model, pools, &pins, placer_profile::Rules::of(&h.mode))?;
    let plans = placer_profile::design_families(&list, pools, h.mode.design.seed);
    let first =
        placer_profile::merge_measurements(profile.measurements.iter().filter(|m| m.pass < record.first_stage_end));
    println!("recorded: {:?}, second stage {} passes", record.summary(), record.second_stage_passes);
    let j = placer_profile::judge(&model, &list, &plans, &first, &profile.reference_ns, pools, &h.mode.design);
    let second = placer_profile::pack_passes(&model, &j.second_stage, &h.mode, h.protocol.steps);
    let again = placer_profile::DesignRecord {
        first_stage_seconds: record.first_stage_seconds,
        first_stage_passes: record.first_stage_passes,
        first_stage_end: record.first_stage_end,
        second_stage_passes: second.len() as u32,
        families: j.families,
        predictions: j.predictions,
    };
    println!("rejudged: {:?}, second stage {} passes", again.summary(), second.len());
    for f in again.fallbacks() {
        println!(
            "  {} ({}, {} configurations): {}",
            f.node,
            f.op,
            f.configurations,
            f.fallback.as_deref().unwrap_or("")
        );
    }
    Ok(())
}
