//! What running a plan costs over running the same placement directly: LeNet, batch 64,
//! every tensor in DRAM, once through `Executor` (one buffer per tensor, allocated
//! once) and once through `PlanExecutor` (arena slots placed and freed at every step,
//! views checked per kernel). Criterion runs the two side by side, so their ratio holds
//! on a drifting host.

use criterion::{Criterion, criterion_group, criterion_main};
use placer_exec::{ExecPlan, Executor, PlanExecutor, PlannedSpan, PoolAssignment, reserved_bytes};
use placer_ir::Model;
use placer_pools::{PoolId, PoolSet};

/// Every tensor in DRAM at its own offset, scratch after them: a layout with no reuse.
fn no_reuse(model: &Model) -> ExecPlan {
    let mut at = 0;
    let spans = model
        .tensors()
        .iter()
        .map(|t| {
            let span = PlannedSpan { from: 0, pool: PoolId(0), offset: at };
            at += reserved_bytes(t.bytes);
            vec![span]
        })
        .collect();
    let scratch = 64 << 20;
    ExecPlan {
        spans,
        moves: Vec::new(),
        scratch_offsets: vec![at; model.schedule().len()],
        arena_bytes: vec![at + scratch],
        budget_bytes: u64::MAX,
        side_cache: None,
        one_packing: false,
    }
}

fn bench(c: &mut Criterion) {
    let model = placer_zoo::build("lenet-mnist", 64).expect("zoo");
    let mut plain =
        Executor::new(&model, PoolSet::host_dram(), &PoolAssignment::all_in(&model, PoolId(0)), 1).expect("plain");
    let mut planned = PlanExecutor::new(&model, PoolSet::host_dram(), no_reuse(&model), 1).expect("planned");
    let mut group = c.benchmark_group("lenet-b64 step, all in DRAM");
    group.sample_size(30);
    group.bench_function("executor", |b| b.iter(|| plain.step().expect("step")));
    group.bench_function("plan executor", |b| b.iter(|| planned.step().expect("step")));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
