//! Synthetic profiles for `placer compare` and `placer solve --profile`: known medians,
//! no measuring, so what the CLI prints about them is the same on every machine.

use placer_profile::{
    DesignSpec, FORMAT_NAME, FORMAT_VERSION, Measurement, Mode, PoolInfo, Profile, ProfileHeader, Protocol,
};
use std::path::{Path, PathBuf};

/// A profile of `model` in which kernel i has median `us[i]` (MAD 1 µs, 30 samples),
/// in configuration `[i % 2, 0]` over pools dram and an emulated pmem.
pub fn profile(model: &str, max_simultaneous: u32, wall_seconds: f64, us: &[f64]) -> Profile {
    let measurements = us
        .iter()
        .enumerate()
        .map(|(i, &u)| Measurement {
            signature: 1000 + i as u64,
            config: vec![(i % 2) as u16, 0],
            node: format!("conv{i}"),
            op: "conv2d".into(),
            pass: 0,
            count: 30,
            median_ns: u * 1e3,
            drift_corrected_ns: u * 1e3,
            mad_ns: 1e3,
            min_ns: u * 1e3,
            max_ns: u * 1e3,
            cv: 1.4826e3 / (u * 1e3),
        })
        .collect();
    Profile {
        header: ProfileHeader {
            format: FORMAT_NAME.into(),
            version: FORMAT_VERSION,
            model_name: model.into(),
            model_hash: format!("{:0>64}", model.len()),
            model_source: None,
            host_fingerprint: "test-host".into(),
            pools: vec![
                PoolInfo { name: "dram".into(), kind: placer_pools::PoolKind::Dram, emulated_as: None },
                PoolInfo {
                    name: "pmem".into(),
                    kind: placer_pools::PoolKind::Pmem,
                    emulated_as: Some("optane-dcpmm-gen1".into()),
                },
            ],
            emulated: true,
            protocol: Protocol {
                warmup: 2,
                reps: 10,
                max_reps: 40,
                precision: 0.01,
                seed: 1,
                rounds: 1,
                round_noise: 0.0,
                steps: placer_profile::Steps::Whole,
            },
            mode: Mode {
                max_simultaneous,
                two_hop: false,
                sample: None,
                max_configs: 4096,
                negligible: 0.0,
                design: DesignSpec::full(),
            },
            pins: vec![],
            plan_hash: format!("plan-{max_simultaneous}"),
            shard: None,
            footprint_fits: true,
            cache_bytes: None,
        },
        passes_total: 4,
        passes_done: 4,
        wall_seconds,
        clock_resolution_ns: 1.0,
        clock_overhead_ns: 20.0,
        reference_ns: vec![],
        pass_drift: vec![],
        round_checks: vec![],
        measurements,
        design: None,
        interference: None,
        step_overhead: None,
        host_activity: Vec::new(),
        merged_from: Vec::new(),
        model_json: None,
        kernels: None,
    }
}

/// Profile A's medians, µs: five kernels above the 50 µs bar and one tiny one.
pub const A_US: [f64; 6] = [120.0, 250.0, 800.0, 1500.0, 4000.0, 10.0];

/// Saves profiles A (single) and B (simultaneous, B's medians `b_us`) of model toy-b2
/// into a temp dir.
pub fn checkpoints(b_us: &[f64]) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (a, b) = save_pair(dir.path(), b_us);
    (dir, a, b)
}

/// Saves profiles A and B as `checkpoints` does, into `dir`.
pub fn save_pair(dir: &Path, b_us: &[f64]) -> (PathBuf, PathBuf) {
    let (a, b) = (dir.join("single.ckpt"), dir.join("simultaneous.ckpt"));
    placer_profile::save_checkpoint(&a, &profile("toy-b2", 1, 40.0, &A_US)).expect("save A");
    placer_profile::save_checkpoint(&b, &profile("toy-b2", 4, 10.0, b_us)).expect("save B");
    (a, b)
}
