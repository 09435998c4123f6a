//! Loading and saving a checkpoint of 1M measurements (a big model's profile over
//! several rounds), and merging its rounds. Run with
//! `cargo bench -p placer-profile --bench checkpoint`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use placer_profile::{Measurement, Mode, PoolInfo, Profile, ProfileHeader, Protocol, checkpoint};
use std::path::Path;

const RECORDS: usize = 1_000_000;

fn profile() -> Profile {
    Profile {
        header: ProfileHeader {
            format: "placer-profile".into(),
            version: 1,
            model_name: "big".into(),
            model_hash: "ab".repeat(32),
            host_fingerprint: "f00d".into(),
            pools: vec![
                PoolInfo { name: "dram".into(), kind: "dram".into(), emulated_as: None },
                PoolInfo { name: "pmem".into(), kind: "pmem".into(), emulated_as: Some("optane-dcpmm".into()) },
            ],
            emulated: true,
            protocol: Protocol { warmup: 1, reps: 3, max_reps: 9, cv_target: 0.02, seed: 1, rounds: 3 },
            mode: Mode { max_simultaneous: 64, two_hop: false, sample: None, max_configs: 4096 },
            pins: vec![],
            plan_hash: "cafe".into(),
        },
        passes_total: 3000,
        passes_done: 3000,
        wall_seconds: 3600.0,
        clock_resolution_ns: 30.0,
        clock_overhead_ns: 30.0,
        reference_ns: vec![1000.0; 20_000],
        pass_drift: vec![1.0; 3000],
        measurements: (0..RECORDS)
            .map(|i| Measurement {
                // A third of the keys per round, as three rounds would give.
                signature: (i % (RECORDS / 3)) as u64 * 0x9E37_79B9_7F4A_7C15,
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
    }
}

#[allow(clippy::print_stderr)] // the size is part of the result
fn bench(c: &mut Criterion) {
    let p = profile();
    let bytes = checkpoint::encode(&p).expect("encodes");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big.ckpt");
    checkpoint::save(&path, &p).expect("saves");
    let mut group = c.benchmark_group("checkpoint_1M");
    group.sample_size(10).throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("decode", |b| b.iter(|| checkpoint::decode(&bytes, Path::new("big.ckpt")).expect("decodes")));
    group.bench_function("load_file", |b| b.iter(|| checkpoint::load(&path).expect("loads")));
    group.bench_function("save_file", |b| b.iter(|| checkpoint::save(&path, &p).expect("saves")));
    group.bench_function("merge_rounds", |b| b.iter(|| p.merged()));
    group.finish();
    eprintln!("checkpoint of {RECORDS} records: {:.1} MB", bytes.len() as f64 / 1e6);
}

criterion_group!(benches, bench);
criterion_main!(benches);
