use placer_pools::*;

fn two_pools() -> PoolSet {
    PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 1 << 20), Pool::new("slow", PoolKind::Dram, 4096)])
}

#[test]
fn buffers_are_aligned_zeroed_and_typed() {
    let mut pools = two_pools();
    let mut b = pools.allocate(PoolId(0), 100).expect("fits");
    assert_eq!(b.bytes().as_ptr() as usize % ALIGN, 0);
    assert!(b.bytes().iter().all(|&x| x == 0));
    assert_eq!(b.as_f32().expect("100 bytes are 25 floats").len(), 25);
    b.as_f32_mut().expect("view")[3] = 1.5;
    assert_eq!(b.as_f32().expect("view")[3], 1.5);
    let odd = pools.allocate(PoolId(0), 6).expect("fits");
    assert!(matches!(odd.as_i32(), Err(PoolError::BadView { len: 6, .. })));
}

#[test]
fn capacity_is_enforced_and_accounted_at_allocation_granularity() {
    let mut pools = two_pools();
    let slow = pools.find("slow").expect("exists");
    let a = pools.allocate(slow, 4000).expect("fits");
    assert_eq!(pools.pool(slow).in_use(), 4032);
    let err = pools.allocate(slow, 100).expect_err("full");
    assert!(err.to_string().contains("pool 'slow' is full"), "{err}");
    pools.free(a);
    assert_eq!(pools.pool(slow).in_use(), 0);
    assert_eq!(pools.pool(slow).peak(), 4032);
    assert!(pools.allocate(slow, 4096).is_ok());
}

#[test]
fn moves_copy_contents_and_fail_without_losing_data() {
    let mut pools = two_pools();
    let mut b = pools.allocate(PoolId(0), 64).expect("fits");
    b.bytes_mut()[7] = 42;
    let moved = pools.move_to(b, PoolId(1)).expect("fits");
    assert_eq!((moved.pool(), moved.bytes()[7]), (PoolId(1), 42));
    assert_eq!(pools.pool(PoolId(0)).in_use(), 0);
    let big = pools.allocate(PoolId(0), 8192).expect("fits");
    let (back, err) = pools.move_to(big, PoolId(1)).expect_err("too big for slow");
    assert_eq!(back.pool(), PoolId(0));
    assert!(matches!(err, PoolError::Full { .. }));
}

#[test]
fn unknown_pools_are_named_in_the_error() {
    let err = two_pools().find("pmem").expect_err("unknown");
    assert_eq!(err.to_string(), "unknown pool 'pmem'; pools: dram, slow");
}

#[test]
fn the_system_refusing_memory_is_an_error_not_an_abort() {
    let mut pools = PoolSet::new(vec![Pool::new("huge", PoolKind::Dram, u64::MAX)]);
    let err = pools.allocate(PoolId(0), u64::MAX / 2).expect_err("cannot be satisfied");
    assert!(matches!(err, PoolError::OutOfMemory { .. }), "{err}");
}

/// A NUMA backend bound to `node` on this host.
fn numa_backend(node: u32) -> Backend {
    let topology = hwlocality::Topology::new().expect("hwloc reads this host");
    let binder = std::sync::Arc::new(NumaBinder::new(topology).expect("this host can bind memory"));
    Backend::Numa { nodes: vec![node], binder }
}

#[test]
fn numa_pools_bind_to_node_0_and_every_page_is_verified_there() {
    let topology = hwlocality::Topology::new().expect("hwloc reads this host");
    let binder = std::sync::Arc::new(NumaBinder::new(topology).expect("this host can bind memory"));
    assert!(binder.nodes().contains(&0), "{:?}", binder.nodes());
    let backend = Backend::Numa { nodes: vec![0], binder };
    let mut pools = PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 1 << 30).with_backend(backend)]);
    let mut b = pools.allocate(PoolId(0), 8 << 20).expect("8 MiB fits");
    assert_eq!(b.bytes().as_ptr() as usize % ALIGN, 0);
    assert!(b.bytes().iter().all(|&x| x == 0));
    b.as_f32_mut().expect("view")[12345] = 2.5;
    let tally = pools.pool(PoolId(0)).page_tally();
    assert_eq!(tally.checked, (8 << 20) / 4096, "{tally:?}");
    assert_eq!((tally.elsewhere, tally.unknown), (0, 0), "{tally:?}");
    let moved = pools.move_to(b, PoolId(0)).expect("same pool is a no-op");
    assert_eq!(moved.as_f32().expect("view")[12345], 2.5);
}

#[test]
fn binding_to_a_node_that_does_not_exist_is_a_clear_error() {
    let mut pools = PoolSet::new(vec![Pool::new("pmem", PoolKind::Pmem, 1 << 30).with_backend(numa_backend(7))]);
    let err = pools.allocate(PoolId(0), 4096).expect_err("node 7 does not exist");
    assert!(err.to_string().contains("NUMA node 7 does not exist on this host"), "{err}");
    assert_eq!(pools.pool(PoolId(0)).in_use(), 0);
}

#[test]
fn a_topology_from_xml_cannot_bind_on_this_machine() {
    let dir = tempfile::tempdir().expect("tempdir");
    let xml = dir.path().join("t.xml");
    let topology = hwlocality::Topology::new().expect("hwloc reads this host");
    topology.export_xml_file(Some(&xml), Default::default()).expect("export");
    let other = hwlocality::Topology::builder().from_xml_file(&xml).map(|b| b.build()).expect("xml");
    let other = other.expect("builds");
    let err = NumaBinder::new(other).expect_err("describes another machine");
    assert!(err.to_string().contains("describes another machine"), "{err}");
}

#[test]
fn emulated_pools_say_so_when_described() {
    let pool = Pool::new("pmem", PoolKind::Pmem, 1 << 30).with_emulation(Emulation::from_bandwidths(
        "optane-dcpmm",
        40e9,
        30e9,
        14e9,
        5e9,
    ));
    assert!(pool.describe().contains("EMULATED as optane-dcpmm"), "{}", pool.describe());
    assert!(PoolSet::new(vec![pool]).any_emulated());
}

#[test]
fn retagging_moves_accounting_between_pools_that_share_memory_only() {
    let emulation = Emulation::from_bandwidths("slow", 30e9, 25e9, 10e9, 5e9);
    let mut pools = PoolSet::new(vec![
        Pool::new("dram", PoolKind::Dram, 1 << 20),
        Pool::new("pmem", PoolKind::Pmem, 4096).with_emulation(emulation),
    ]);
    assert!(pools.same_memory(PoolId(0), PoolId(1)), "two heap pools share memory");
    let mut b = pools.allocate(PoolId(0), 1000).expect("fits");
    b.bytes_mut()[3] = 7;
    let address = b.bytes().as_ptr();
    let b = pools.retag(b, PoolId(1)).expect("fits");
    assert_eq!((b.pool(), b.bytes().as_ptr(), b.bytes()[3]), (PoolId(1), address, 7), "same bytes, new pool");
    assert_eq!((pools.pool(PoolId(0)).in_use(), pools.pool(PoolId(1)).in_use()), (0, 1024));
    let big = pools.allocate(PoolId(0), 8192).expect("fits");
    let (back, err) = pools.retag(big, PoolId(1)).expect_err("pmem is full");
    assert!(matches!(err, PoolError::Full { .. }));
    assert_eq!((back.pool(), pools.pool(PoolId(0)).in_use()), (PoolId(0), 8192));
}

/// The `THPeligible` flag of the mapping that holds `address`, from /proc/self/smaps.
fn thp_eligible(address: usize) -> Option<bool> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ')
            && let Some((start, end)) = range.split_once('-')
            && let (Ok(s), Ok(e)) = (usize::from_str_radix(start, 16), usize::from_str_radix(end, 16))
        {
            inside = (s..e).contains(&address);
            continue;
        }
        if inside && let Some(flag) = line.strip_prefix("THPeligible:") {
            return Some(flag.trim() == "1");
        }
    }
    None
}

#[test]
fn large_numa_buffers_start_on_a_huge_page_and_ask_for_huge_pages() {
    let mut pools = PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 1 << 30).with_backend(numa_backend(0))]);
    let large = pools.allocate(PoolId(0), (5 << 20) + 12345).expect("fits");
    assert_eq!(large.bytes().as_ptr() as usize % HUGE_PAGE, 0);
    assert_eq!(large.bytes().len(), (5 << 20) + 12345);
    let small = pools.allocate(PoolId(0), 1000).expect("fits");
    assert_eq!(small.bytes().as_ptr() as usize % ALIGN, 0);
    let mode = transparent_huge_pages();
    let eligible = thp_eligible(large.bytes().as_ptr() as usize);
    match mode.as_deref() {
        // Under `madvise`, only the advice makes a mapping eligible.
        Some("always") | Some("madvise") => assert_eq!(eligible, Some(true), "THP {mode:?}"),
        Some("never") => assert_eq!(eligible, Some(false), "THP {mode:?}"),
        _ => assert_eq!(eligible, None, "no THP on this kernel, yet smaps has the flag"),
    }
}

#[test]
fn small_numa_buffers_share_a_huge_page_side_by_side_and_never_overlap() {
    let mut pools = PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 1 << 30).with_backend(numa_backend(0))]);
    let mut a = pools.allocate(PoolId(0), 1000).expect("fits");
    let b = pools.allocate(PoolId(0), 3000).expect("fits");
    let (pa, pb) = (a.bytes().as_ptr() as usize, b.bytes().as_ptr() as usize);
    // One chunk, one huge page: b follows a on the next cache line.
    assert_eq!(pa / HUGE_PAGE, pb / HUGE_PAGE, "{pa:#x} {pb:#x}");
    assert_eq!(pb, pa + 1024);
    assert_eq!((pa % ALIGN, pb % ALIGN), (0, 0));
    assert!(thp_eligible(pa) != Some(false) || transparent_huge_pages().as_deref() == Some("never"));
    a.bytes_mut().fill(0xAA);
    assert!(b.bytes().iter().all(|&x| x == 0), "writing a reached b");
    // Freed bytes are never handed out again: a new buffer starts zeroed, after b.
    pools.free(a);
    let c = pools.allocate(PoolId(0), 64).expect("fits");
    assert!(c.bytes().as_ptr() as usize >= pb + 3000);
    assert!(c.bytes().iter().all(|&x| x == 0));
    assert_eq!(pools.pool(PoolId(0)).in_use(), 3008 + 64);
    // A full chunk is followed by a fresh one; the pages of each are checked once.
    let most = pools.allocate(PoolId(0), (HUGE_PAGE - 1024) as u64).expect("fits");
    assert_ne!(most.bytes().as_ptr() as usize / HUGE_PAGE, pb / HUGE_PAGE);
    assert_eq!(pools.pool(PoolId(0)).page_tally().checked, 2 * (HUGE_PAGE as u64 / 4096));
    let empty = pools.allocate(PoolId(0), 0).expect("an empty buffer is a buffer");
    assert!(empty.bytes().is_empty());
}

#[test]
fn a_copied_pool_carves_chunks_of_its_own() {
    let pool = Pool::new("dram", PoolKind::Dram, 1 << 30).with_backend(numa_backend(0));
    let mut first = PoolSet::new(vec![pool.clone()]);
    let a = first.allocate(PoolId(0), 100).expect("fits");
    let mut second = PoolSet::new(vec![first.pool(PoolId(0)).clone()]);
    let mut b = second.allocate(PoolId(0), 100).expect("fits");
    assert_ne!(a.bytes().as_ptr() as usize / HUGE_PAGE, b.bytes().as_ptr() as usize / HUGE_PAGE);
    b.bytes_mut().fill(1);
    assert!(a.bytes().iter().all(|&x| x == 0));
}

#[test]
fn an_arena_says_how_much_of_it_the_host_put_on_huge_pages() {
    let len = (6 << 20) + 4096;
    let mut pools = PoolSet::new(vec![
        Pool::new("dram", PoolKind::Dram, 1 << 30).with_backend(numa_backend(0)),
        Pool::new("heap", PoolKind::Dram, 1 << 30),
        Pool::new("small", PoolKind::Dram, 1 << 30).with_backend(numa_backend(0)),
    ]);
    let arenas = Arenas::reserve(&mut pools, &[len, len, 1 << 20]).expect("reserved");
    let huge = arenas.huge_page_bytes();
    // The heap does not ask for huge pages, and an arena under one cannot have one.
    assert_eq!(huge[1..], [None, None]);
    assert_eq!(whole_huge_pages(len), 6 << 20);
    match transparent_huge_pages().as_deref() {
        // Whether the host had them free is its business (the tail past the last whole
        // huge page may get one too, where the mapping's slack covers it); never more
        // than the arena.
        Some("always") | Some("madvise") => {
            let bytes = huge[0].expect("measured where the kernel says");
            assert!(bytes <= len, "{bytes}");
        }
        _ => assert!(huge[0].is_none_or(|b| b == 0), "{huge:?}"),
    }
    arenas.release_all(&mut pools);
}
