//! The solver's fast parts on DenseNet-264 b32 (6,279 kernels, 11,494 tensors), cost
//! model only: building the instance, every baseline, the plan builder and the
//! checker's replay; and a static ILP on ResNet-50 b32. Run with
//! `cargo bench -p placer-solve --bench solve`; `scripts/bench-solve.sh` covers the ILP
//! formulations at scale.

use criterion::{Criterion, criterion_group, criterion_main};
use placer_solve::{
    Baseline, Budget, Costs, Formulation, IlpOptions, Instance, Plan, PlanContext, PoolFigures, SolvePools, Strategy,
    check, lay_out, solve_ilp,
};

fn pools() -> SolvePools {
    let pool = |name: &str, capacity: u64, read: f64, write: f64| PoolFigures {
        name: name.into(),
        kind: placer_pools::PoolKind::parse(name).expect("a pool kind"),
        capacity,
        emulated_as: None,
        read_gbps: read,
        write_gbps: write,
        source: "bench".into(),
    };
    SolvePools {
        pools: vec![pool("dram", 64 << 30, 30.0, 25.0), pool("pmem", 512 << 30, 10.0, 4.0)],
        move_ns_per_byte: vec![vec![0.0, 1.0 / 3.5], vec![1.0 / 9.0, 0.0]],
        moves_measured: true,
        copy_cpu_ns_per_byte: vec![vec![0.05; 2]; 2],
        memcpy_source: "test".into(),
    }
}

fn bench(c: &mut Criterion) {
    let model = placer_zoo::build("densenet264", 32).expect("zoo");
    let costs = Costs::new(&model, &pools(), &[]);
    let mut inst = Instance::new(&model, &costs, pools(), u64::MAX, &[]);
    inst.capacity[0] = Budget::Fraction(0.25).resolve(inst.peak_bytes);
    let mut group = c.benchmark_group("densenet264-b32");
    group.sample_size(10);
    group.bench_function("instance", |b| b.iter(|| Instance::new(&model, &costs, pools(), 1 << 30, &[])));
    for baseline in Baseline::ALL {
        group.bench_function(format!("baseline {}", baseline.name()), |b| b.iter(|| baseline.place(&inst)));
    }
    let placement = Baseline::Greedy.place(&inst).expect("greedy fits");
    let ctx = PlanContext {
        model: &model,
        inst: &inst,
        costs: &costs,
        strategy: Strategy::Baseline(Baseline::Greedy),
        formulation: None,
        profile: None,
    };
    group.bench_function("layout", |b| b.iter(|| lay_out(&model, &inst, &placement)));
    group.bench_function("plan (layout included)", |b| b.iter(|| Plan::new(&ctx, &placement, None)));
    let plan = Plan::new(&ctx, &placement, None);
    group.bench_function("check", |b| b.iter(|| check(&model, &plan, &costs, &pools(), inst.capacity[0])));
    group.finish();

    let model = placer_zoo::build("resnet50", 32).expect("zoo");
    let costs = Costs::new(&model, &pools(), &[]);
    let mut inst = Instance::new(&model, &costs, pools(), u64::MAX, &[]);
    inst.capacity[0] = Budget::Fraction(0.25).resolve(inst.peak_bytes);
    let warm = Baseline::Greedy.place(&inst).expect("greedy fits");
    let opts = IlpOptions { formulation: Formulation::Static, gap: 0.0, ..IlpOptions::default() };
    let mut group = c.benchmark_group("resnet50-b32");
    group.sample_size(10);
    group.bench_function("static ILP to optimality", |b| b.iter(|| solve_ilp(&inst, Some(&warm), &opts, &mut |_| {})));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
