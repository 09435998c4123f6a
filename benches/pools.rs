//! What each allocation backend costs: allocating, binding, touching and verifying a
//! 64 MiB buffer, and moving one between pools. scripts/bench-hosts.sh prints these as
//! ratios to the plain heap, measured in the same run.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use placer_host::HostTopology;
use placer_pools::{Backend, NumaBinder, Pool, PoolId, PoolKind, PoolSet};
use std::sync::Arc;

const BYTES: u64 = 64 << 20;

fn pools() -> PoolSet {
    let (_, topology) = HostTopology::this_host().expect("hwloc reads this host");
    let binder = Arc::new(NumaBinder::new(topology).expect("this host binds memory"));
    let mut list = vec![
        Pool::new("heap", PoolKind::Dram, u64::MAX),
        Pool::new("numa", PoolKind::Dram, u64::MAX).with_backend(Backend::Numa { nodes: vec![0], binder }),
    ];
    #[cfg(feature = "memkind")]
    {
        let kind = placer_pools::MemkindKind::open(&placer_pools::MemkindSpec::Default).expect("default kind");
        list.push(
            Pool::new("memkind", PoolKind::Dram, u64::MAX).with_backend(Backend::Memkind { kind, nodes: Vec::new() }),
        );
    }
    PoolSet::new(list)
}

fn allocate(c: &mut Criterion) {
    let mut pools = pools();
    let mut group = c.benchmark_group("allocate_64MiB");
    group.throughput(Throughput::Bytes(BYTES)).sample_size(20);
    for id in pools.ids().collect::<Vec<_>>() {
        let name = pools.pool(id).name.clone();
        group.bench_function(name, |b| {
            b.iter(|| {
                let buffer = pools.allocate(id, BYTES).expect("allocates");
                pools.free(buffer);
            })
        });
    }
    group.finish();
}

fn move_between(c: &mut Criterion) {
    let mut pools = pools();
    let mut group = c.benchmark_group("move_64MiB");
    group.throughput(Throughput::Bytes(BYTES)).sample_size(20);
    for (from, to) in [(0u16, 0u16), (0, 1), (1, 0)] {
        let (from, to) = (PoolId(from), PoolId(to));
        let name = format!("{}_to_{}", pools.pool(from).name, pools.pool(to).name);
        group.bench_function(name, |b| {
            b.iter(|| {
                // Allocate-and-copy into the target, then drop the moved buffer, so each
                // iteration starts from a fresh source like the executor's moves.
                let source = pools.allocate(from, BYTES).expect("allocates");
                let moved = if from == to {
                    let mut copy = pools.allocate(to, BYTES).expect("allocates");
                    copy.bytes_mut().copy_from_slice(source.bytes());
                    pools.free(source);
                    copy
                } else {
                    pools.move_to(source, to).map_err(|(_, e)| e).expect("moves")
                };
                pools.free(moved);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, allocate, move_between);
criterion_main!(benches);
