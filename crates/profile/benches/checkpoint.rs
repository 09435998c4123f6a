//! Loading and saving a checkpoint of 1M measurements (a big model's profile over
//! several rounds), merging its rounds, and merging 8 shards of 125,000 measurements
//! each into one checkpoint (`placer profile merge`: load, check, combine, save). Run
//! with `cargo bench -p placer-profile --bench checkpoint`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::path::Path;

#[path = "../tests/common/mod.rs"]
mod common;

const RECORDS: usize = 1_000_000;

#[allow(clippy::print_stderr)] // the size is part of the result
fn bench(c: &mut Criterion) {
    let p = common::profile("big", RECORDS);
    let bytes = placer_profile::encode_checkpoint(&p).expect("encodes");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big.ckpt");
    placer_profile::save_checkpoint(&path, &p).expect("saves");
    let mut group = c.benchmark_group("checkpoint_1M");
    group.sample_size(10).throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("decode", |b| {
        b.iter(|| placer_profile::decode_checkpoint(&bytes, Path::new("big.ckpt")).expect("decodes"))
    });
    group.bench_function("load_file", |b| b.iter(|| placer_profile::load_checkpoint(&path).expect("loads")));
    group.bench_function("save_file", |b| b.iter(|| placer_profile::save_checkpoint(&path, &p).expect("saves")));
    group.bench_function("merge_rounds", |b| b.iter(|| p.merged()));
    group.finish();
    eprintln!("checkpoint of {RECORDS} records: {:.1} MB", bytes.len() as f64 / 1e6);
}

/// 8 shards of a plan of 8,000 passes, 125 measurements a pass: 1M in all.
fn shards(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let paths = common::save_shards(dir.path(), "big", &common::shards(8, 8_000, 125, 0, 1.0));
    let out = dir.path().join("merged.ckpt");
    let mut group = c.benchmark_group("merge_8_shards_1M");
    group.sample_size(10).throughput(Throughput::Elements(RECORDS as u64));
    group.bench_function("merge_files", |b| {
        b.iter(|| placer_profile::merge_files(&paths, Some(&out), false).expect("merges"))
    });
    group.finish();
}

criterion_group!(benches, bench, shards);
criterion_main!(benches);
