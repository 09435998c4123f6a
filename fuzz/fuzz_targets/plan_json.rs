//! plan.json text (`placer_solve::Plan::parse`), then what placer does with a plan it
//! read: resolve it for a host (`exec_plan`, as `placer run --plan` does) and check it
//! (`check`, which reads any plan as a file's contents). The plans are checked against
//! the model the seeds were solved for (`placer zoo mlp -b 2`, see scripts/fuzz.sh) on
//! a fixed pair of pools, dram and an emulated pmem, so that a mutated plan gets past
//! the content hash and the pool names.
#![no_main]

use libfuzzer_sys::fuzz_target;
use placer_ir::Model;
use placer_pools::{Pool, PoolKind, PoolSet};
use placer_solve::{Costs, Plan, PoolFigures, SolvePools};
use std::path::Path;
use std::sync::LazyLock;

struct Fixed {
    model: Model,
    pool_set: PoolSet,
    pools: SolvePools,
    costs: Costs,
}

static FIXED: LazyLock<Fixed> = LazyLock::new(|| {
    let model = placer_zoo::build("mlp", 2).expect("the zoo builds mlp at batch 2");
    let figures = |name: &str, read_gbps: f64, write_gbps: f64, emulated_as: Option<&str>| PoolFigures {
        name: name.into(),
        kind: name.into(),
        capacity: 1 << 34,
        emulated_as: emulated_as.map(Into::into),
        read_gbps,
        write_gbps,
        source: "fuzz".into(),
    };
    let pools = SolvePools {
        pools: vec![figures("dram", 32.0, 30.0, None), figures("pmem", 11.4, 4.8, Some("optane-dcpmm:additive"))],
        move_ns_per_byte: vec![vec![0.0, 0.24], vec![0.12, 0.0]],
        moves_measured: false,
        copy_cpu_ns_per_byte: vec![vec![0.0, 0.035], vec![0.035, 0.0]],
        memcpy_source: "fuzz".into(),
    };
    let costs = Costs::new(&model, &pools, &[]);
    let pool_set =
        PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 1 << 34), Pool::new("pmem", PoolKind::Pmem, 1 << 34)]);
    Fixed { model, pool_set, pools, costs }
});

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(plan) = Plan::parse(text, Path::new("fuzz.plan.json")) else { return };
    let f = &*FIXED;
    let _ = placer_solve::exec_plan(&plan, &f.model, &f.pool_set);
    let _ = placer_solve::check(&f.model, &plan, &f.costs, &f.pools, plan.budget_bytes);
});
