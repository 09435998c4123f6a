//! A synthetic profile shared by the checkpoint tests and the checkpoint bench
//! (`#[path]`-included there): what the checkpoint code sees of a real one, made up.

use placer_profile::{DesignSpec, Measurement, Mode, PoolInfo, Profile, ProfileHeader, Protocol};

/// A finished three-round profile of `model` with `records` measurements: each key
/// measured once per round (a third of the records per round), five pools' worth of
/// configuration bits, many nodes.
pub fn profile(model: &str, records: usize) -> Profile {
    Profile {
        header: ProfileHeader {
            format: "placer-profile".into(),
            version: 1,
            model_name: model.into(),
            model_hash: "ab".repeat(32),
            model_source: None,
            host_fingerprint: "f00d".into(),
            pools: vec![
                PoolInfo { name: "dram".into(), kind: placer_pools::PoolKind::Dram, emulated_as: None },
                PoolInfo {
                    name: "pmem".into(),
                    kind: placer_pools::PoolKind::Pmem,
                    emulated_as: Some("optane-dcpmm".into()),
                },
            ],
            emulated: true,
            protocol: Protocol {
                warmup: 1,
                reps: 3,
                max_reps: 9,
                precision: 0.01,
                seed: 1,
                rounds: 3,
                round_noise: 0.0,
                steps: placer_profile::Steps::Whole,
            },
            mode: Mode {
                max_simultaneous: 64,
                two_hop: false,
                sample: None,
                max_configs: 4096,
                negligible: 0.0,
                design: DesignSpec::full(),
            },
            pins: vec![],
            plan_hash: "cafe".into(),
            shard: None,
            footprint_fits: true,
            cache_bytes: None,
        },
        passes_total: 3000,
        passes_done: 3000,
        wall_seconds: 3600.0,
        clock_resolution_ns: 30.0,
        clock_overhead_ns: 30.0,
        reference_ns: vec![1000.0; 20_000],
        pass_drift: vec![1.0; 3000],
        round_checks: vec![],
        measurements: (0..records)
            .map(|i| Measurement {
                // A third of the keys per round, as three rounds would give; wrapping, as the
                // bench (a release build) always computed it.
                signature: ((i % (records / 3).max(1)) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                config: (0..5).map(|b| ((i >> b) & 1) as u16).collect(),
                node: format!("block{}.layer{}.conv", i % 97, i % 31),
                op: "conv2d_backward_filter".into(),
                pass: (i / 300) as u32,
                count: 7,
                median_ns: 1000.0 + (i % 5000) as f64,
                drift_corrected_ns: 1000.0 + (i % 5000) as f64,
                mad_ns: 10.0,
                min_ns: 990.0,
                max_ns: 1100.0,
                cv: 0.0148,
            })
            .collect(),
        design: None,
        interference: None,
        step_overhead: None,
        host_activity: Vec::new(),
        merged_from: Vec::new(),
        model_json: None,
        kernels: None,
    }
}

/// `count` complete one-round shards of a plan of `schedule_passes` passes per round, each
/// pass measuring `per_pass` keys of its own (so the merged keys are every pass's), the
/// reference pass 50 µs per kernel on every shard but `slow`'s, `slow_by` times that.
#[allow(dead_code)] // not every test binary that includes this module makes shards
pub fn shards(count: u32, schedule_passes: u32, per_pass: usize, slow: u32, slow_by: f64) -> Vec<Profile> {
    use placer_profile::Shard;
    (1..=count)
        .map(|index| {
            let mut p = profile("m", 0);
            let shard = Shard { index, count, schedule_passes };
            p.header.shard = Some(shard);
            p.header.protocol.rounds = 1;
            let len = shard.len();
            p.passes_total = len as u32;
            p.passes_done = len as u32;
            p.wall_seconds = 10.0;
            p.reference_ns = vec![if index == slow { 50_000.0 * slow_by } else { 50_000.0 }; 40];
            p.pass_drift = (0..len).map(|l| 1.0 + 0.001 * (l % 3) as f64).collect();
            p.measurements = (0..len)
                .flat_map(|local| {
                    let global = shard.global(local);
                    (0..per_pass).map(move |k| Measurement {
                        signature: (global * per_pass + k) as u64,
                        config: vec![(k % 2) as u16, 1],
                        node: format!("n{}", k % 40),
                        op: "matmul".into(),
                        pass: local as u32,
                        count: 3,
                        median_ns: 1000.0,
                        drift_corrected_ns: 1000.0,
                        mad_ns: 10.0,
                        min_ns: 990.0,
                        max_ns: 1100.0,
                        cv: 0.0148,
                    })
                })
                .collect();
            p
        })
        .collect()
}

/// Saves `shards` in `dir` as `NAME-shardIofN.ckpt`, returning their paths in order.
#[allow(dead_code)]
pub fn save_shards(dir: &std::path::Path, name: &str, shards: &[Profile]) -> Vec<std::path::PathBuf> {
    let n = shards.len();
    shards
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let path = dir.join(format!("{name}-shard{}of{n}.ckpt", i + 1));
            placer_profile::save_checkpoint(&path, p).expect("saves");
            path
        })
        .collect()
}
