//! Speed of the front end on the largest zoo graph (DenseNet-264, batch 32: 6,279 nodes,
//! 11,494 tensors, 3 MB of JSON): generating it, loading it, and analysing it.
//!
//! `serde_json_value` parses the same text into a plain `serde_json::Value`, with no
//! positions and no validation. It is the yardstick: `load / serde_json_value` says
//! what placer's spanned reader plus full validation cost over bare JSON parsing.
//! scripts/bench.sh prints these as a table of ratios.

use criterion::{Criterion, criterion_group, criterion_main};
use placer_ir::analysis::conflict_graph;
use placer_ir::{Liveness, MemoryProfile};
use std::hint::black_box;

fn front_end(c: &mut Criterion) {
    let model = placer_zoo::build("densenet264", 32).expect("zoo model");
    let text = model.to_json();
    let mut group = c.benchmark_group("densenet264_b32");
    group.sample_size(20);
    group.bench_function("zoo_build", |b| b.iter(|| placer_zoo::build(black_box("densenet264"), 32)));
    group
        .bench_function("serde_json_value", |b| b.iter(|| serde_json::from_str::<serde_json::Value>(black_box(&text))));
    group.bench_function("load", |b| b.iter(|| placer_ir::parse_model(black_box(&text))));
    group.bench_function("to_json", |b| b.iter(|| black_box(&model).to_json()));
    group.bench_function("liveness_and_peak", |b| {
        b.iter(|| MemoryProfile::new(&model, &Liveness::new(black_box(&model))))
    });
    group.bench_function("conflict_graph", |b| b.iter(|| conflict_graph(black_box(&model))));
    group.bench_function("content_hash", |b| b.iter(|| black_box(&model).content_hash()));
    group.finish();
}

criterion_group!(benches, front_end);
criterion_main!(benches);
