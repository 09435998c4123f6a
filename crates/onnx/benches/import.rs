//! Import cost, side by side with building the same network in the zoo (the ratio is
//! what to read: both run in one process, on one noisy machine). The ONNX files come
//! from scripts/onnx/testdata.sh, run here if they are missing.

#![allow(clippy::unwrap_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use placer_onnx::{ImportOptions, import};
use std::hint::black_box;
use std::path::{Path, PathBuf};

fn testdata() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("onnx-testdata");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/onnx/testdata.sh");
    let status = std::process::Command::new("bash").arg(script).arg(&dir).status().unwrap();
    assert!(status.success(), "scripts/onnx/testdata.sh failed");
    dir
}

fn benches(c: &mut Criterion) {
    let data = testdata();
    let batch = |n| ImportOptions { batch: Some(n), ..Default::default() };
    let mut g = c.benchmark_group("import_b32");
    g.sample_size(10);
    g.bench_function("zoo_resnet50", |b| b.iter(|| black_box(placer_zoo::build("resnet50", 32).unwrap())));
    let resnet = data.join("light/light_resnet50.onnx");
    g.bench_function("onnx_resnet50", |b| b.iter(|| black_box(import(&resnet, &batch(32)).unwrap())));
    g.bench_function("zoo_densenet121", |b| b.iter(|| black_box(placer_zoo::build("densenet121", 32).unwrap())));
    let densenet = data.join("light/light_densenet121.onnx");
    g.bench_function("onnx_densenet121", |b| b.iter(|| black_box(import(&densenet, &batch(32)).unwrap())));
    let ort = data.join("ort_training/training_model.onnx");
    g.bench_function("onnx_ort_training_resnet50", |b| b.iter(|| black_box(import(&ort, &batch(32)).unwrap())));
    g.finish();
}

criterion_group!(import_benches, benches);
criterion_main!(import_benches);
