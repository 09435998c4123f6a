#![cfg(feature = "memkind")]
//! The memkind backend end to end, through the public API only.

use placer_pools::{ALIGN, Backend, MemkindKind, MemkindSpec, Pool, PoolError, PoolId, PoolKind, PoolSet};
use std::sync::Arc;

const MIB: u64 = 1 << 20;

fn memkind_pool(name: &str, kind: Arc<MemkindKind>, capacity: u64) -> Pool {
    Pool::new(name, PoolKind::Pmem, capacity).with_backend(Backend::Memkind { kind, nodes: Vec::new() })
}

fn default_kind() -> Arc<MemkindKind> {
    MemkindKind::open(&MemkindSpec::Default).expect("MEMKIND_DEFAULT is available everywhere")
}

fn unavailable(spec: &MemkindSpec) -> (String, String) {
    match MemkindKind::open(spec) {
        Err(PoolError::BackendUnavailable { backend, reason }) => (backend, reason),
        Err(other) => panic!("expected BackendUnavailable for {spec:?}, got {other}"),
        Ok(kind) => panic!("expected {spec:?} to be refused, but it opened: {kind:?}"),
    }
}

#[test]
fn the_default_kind_allocates_zeroed_aligned_buffers_that_survive_moves() {
    let kind = default_kind();
    assert_eq!(kind.label(), "memkind MEMKIND_DEFAULT");
    let mut pools = PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 16 * MIB), memkind_pool("mk", kind, 16 * MIB)]);
    let (dram, mk) = (PoolId(0), PoolId(1));
    assert_eq!(pools.pool(mk).describe(), "pmem, real memory via memkind MEMKIND_DEFAULT");

    let mut b = pools.allocate(mk, 1000 * 4).expect("fits");
    assert_eq!(b.pool(), mk);
    assert_eq!(b.len_bytes(), 4000);
    assert_eq!(b.bytes().as_ptr() as usize % ALIGN, 0);
    assert!(b.bytes().iter().all(|&x| x == 0));
    assert_eq!(pools.pool(mk).in_use(), 4032);
    for (i, x) in b.as_f32_mut().expect("4000 bytes are 1000 floats").iter_mut().enumerate() {
        *x = i as f32 * 0.5;
    }

    let there = pools.move_to(b, dram).expect("fits in dram");
    assert_eq!(pools.pool(mk).in_use(), 0);
    assert_eq!(there.as_f32().expect("view")[999], 499.5);
    let back = pools.move_to(there, mk).expect("fits back");
    assert_eq!(back.pool(), mk);
    assert_eq!(back.bytes().as_ptr() as usize % ALIGN, 0);
    let floats = back.as_f32().expect("view");
    assert!(floats.iter().enumerate().all(|(i, &x)| x == i as f32 * 0.5));
    assert_eq!(pools.pool(dram).in_use(), 0);
    pools.free(back);
    assert_eq!(pools.pool(mk).in_use(), 0);
    assert_eq!(pools.pool(mk).peak(), 4032);

    // Many odd sizes, including zero: every one aligned and zeroed, even where freed
    // memory is reused.
    let mut held = Vec::new();
    for len in [0u64, 1, 63, 64, 65, 4095, 4096, 100_000, 3 * MIB + 7] {
        let mut b = pools.allocate(mk, len).expect("fits");
        assert_eq!(b.len_bytes() as u64, len);
        assert_eq!(b.bytes().as_ptr() as usize % ALIGN, 0, "{len} bytes");
        assert!(b.bytes().iter().all(|&x| x == 0), "{len} bytes not zeroed");
        b.bytes_mut().fill(0xFF);
        held.push(b);
    }
    for b in held {
        pools.free(b);
    }
    let again = pools.allocate(mk, 3 * MIB + 7).expect("fits");
    assert!(again.bytes().iter().all(|&x| x == 0), "reused memory not zeroed");
}

#[test]
#[allow(clippy::print_stderr, reason = "say why the test checked nothing on a machine with PMEM")]
fn dax_kmem_without_pmem_is_a_clear_error() {
    // Skip only if this machine really has PMEM onlined as system RAM.
    let (backend, reason) = match MemkindKind::open(&MemkindSpec::DaxKmem) {
        Ok(kind) => {
            eprintln!("MEMKIND_DAX_KMEM is available here ({kind:?}); nothing to check");
            return;
        }
        Err(PoolError::BackendUnavailable { backend, reason }) => (backend, reason),
        Err(other) => panic!("expected BackendUnavailable, got {other}"),
    };
    assert_eq!(backend, "memkind MEMKIND_DAX_KMEM");
    assert!(reason.contains("memkind_check_available"), "{reason}");
    // memkind 1.14 answers MEMKIND_ERROR_UNAVAILABLE (-1), "<memkind> Requested memory
    // kind is not available".
    assert!(reason.contains("not available"), "{reason}");
    assert!(reason.contains("daxctl"), "{reason}");
    let err = PoolError::BackendUnavailable { backend, reason };
    assert!(err.to_string().starts_with("memkind MEMKIND_DAX_KMEM is not available: "), "{err}");
}

#[test]
fn a_file_backed_kind_allocates_in_a_directory() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let spec = MemkindSpec::Pmem { dir: dir.path().to_path_buf(), max_bytes: 32 * MIB };
    let kind = MemkindKind::open(&spec).expect("a file-backed kind in a temporary directory");
    assert_eq!(kind.label(), format!("memkind pmem file-backed kind in {} (max 32 MiB)", dir.path().display()));

    let mut pools = PoolSet::new(vec![memkind_pool("pmem", Arc::clone(&kind), 32 * MIB)]);
    let pmem = pools.find("pmem").expect("exists");
    let mut buffers = Vec::new();
    for i in 0..8u8 {
        let mut b = pools.allocate(pmem, 512 * 1024 + u64::from(i)).expect("fits in the kind");
        assert_eq!(b.bytes().as_ptr() as usize % ALIGN, 0);
        assert!(b.bytes().iter().all(|&x| x == 0));
        b.bytes_mut().fill(i + 1);
        buffers.push(b);
    }
    for (i, b) in buffers.iter().enumerate() {
        assert!(b.bytes().iter().all(|&x| usize::from(x) == i + 1), "buffer {i} changed");
    }
    assert!(pools.pool(pmem).in_use() >= 8 * 512 * 1024);
    for b in buffers {
        pools.free(b);
    }
    assert_eq!(pools.pool(pmem).in_use(), 0);
    // memkind unlinks its backing file as soon as it is created: nothing to clean up.
    assert_eq!(std::fs::read_dir(dir.path()).expect("list the directory").count(), 0);

    // The kind outlives the set; dropping the last handle destroys it.
    drop(pools);
    assert_eq!(Arc::strong_count(&kind), 1);
    drop(kind);
}

#[test]
fn a_full_file_backed_kind_is_out_of_memory_not_an_abort() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let spec = MemkindSpec::Pmem { dir: dir.path().to_path_buf(), max_bytes: 16 * MIB };
    let kind = MemkindKind::open(&spec).expect("minimum-size file-backed kind");
    // The pool believes in far more than the kind has: memkind must be the one saying no.
    let mut pools = PoolSet::new(vec![memkind_pool("pmem", kind, 1 << 40)]);
    let err = pools.allocate(PoolId(0), 64 * MIB).expect_err("larger than the kind");
    assert!(matches!(err, PoolError::OutOfMemory { .. }), "{err}");
    assert_eq!(pools.pool(PoolId(0)).in_use(), 0);
    // Still usable afterwards.
    let b = pools.allocate(PoolId(0), MIB).expect("fits");
    assert!(b.bytes().iter().all(|&x| x == 0));
}

#[test]
fn pool_capacity_is_enforced_before_memkind_is_asked() {
    let mut pools = PoolSet::new(vec![memkind_pool("small", default_kind(), 4096)]);
    let a = pools.allocate(PoolId(0), 4000).expect("fits");
    let err = pools.allocate(PoolId(0), 100).expect_err("full");
    match &err {
        PoolError::Full { pool, requested, in_use, capacity } => {
            assert_eq!((pool.as_str(), *requested, *in_use, *capacity), ("small", 100, 4032, 4096));
        }
        other => panic!("expected Full, got {other}"),
    }
    assert_eq!(pools.pool(PoolId(0)).in_use(), 4032);
    let err = pools.allocate(PoolId(0), 1 << 20).expect_err("larger than the pool");
    assert!(matches!(err, PoolError::Full { .. }), "{err}");
    assert_eq!(pools.pool(PoolId(0)).in_use(), 4032);
    pools.free(a);
    assert_eq!(pools.pool(PoolId(0)).in_use(), 0);
}

#[test]
fn the_system_refusing_memory_is_an_error_not_an_abort() {
    let mut pools = PoolSet::new(vec![memkind_pool("huge", default_kind(), u64::MAX)]);
    let err = pools.allocate(PoolId(0), 1 << 60).expect_err("no machine has an exabyte");
    assert!(matches!(err, PoolError::OutOfMemory { .. }), "{err}");
    assert_eq!(pools.pool(PoolId(0)).in_use(), 0);
}

#[test]
fn bad_file_backed_kinds_name_their_directory() {
    let dir = tempfile::tempdir().expect("temporary directory");

    let small = MemkindSpec::Pmem { dir: dir.path().to_path_buf(), max_bytes: MIB };
    let (backend, reason) = unavailable(&small);
    assert!(backend.contains(&dir.path().display().to_string()), "{backend}");
    assert!(reason.contains(&dir.path().display().to_string()), "{reason}");
    assert!(reason.contains("MEMKIND_PMEM_MIN_SIZE"), "{reason}");
    assert!(reason.contains("16 MiB"), "{reason}");

    let missing = dir.path().join("no-such-dir");
    let (backend, reason) = unavailable(&MemkindSpec::Pmem { dir: missing.clone(), max_bytes: 32 * MIB });
    let name = missing.display().to_string();
    assert!(backend.contains(&name), "{backend}");
    assert!(reason.contains(&name), "{reason}");
    assert!(reason.contains("No such file or directory"), "{reason}");

    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a directory").expect("write a file");
    let (_, reason) = unavailable(&MemkindSpec::Pmem { dir: file.clone(), max_bytes: 32 * MIB });
    assert_eq!(reason, format!("{} is not a directory", file.display()));
}

/// A memkind pool that names its nodes has its pages checked like a NUMA pool's (the
/// guest check found MEMKIND_DAX_KMEM pools reported no page at all). MEMKIND_DEFAULT
/// on a one-node host lands on node 0; a wrong node is reported as elsewhere.
#[test]
fn a_memkind_pool_with_nodes_has_its_pages_verified() {
    let pool = |nodes: Vec<u32>| {
        Pool::new("mk", PoolKind::Pmem, 64 * MIB).with_backend(Backend::Memkind { kind: default_kind(), nodes })
    };
    let mut pools = PoolSet::new(vec![pool(vec![0])]);
    assert_eq!(pools.pool(PoolId(0)).describe(), "pmem, real memory via memkind MEMKIND_DEFAULT on node 0");
    let _kept = pools.allocate(PoolId(0), 8 * MIB).expect("fits");
    let tally = pools.pool(PoolId(0)).page_tally();
    assert!(tally.checked >= 2048, "{tally:?}");
    assert_eq!(tally.verified(), tally.checked, "{tally:?}");

    let mut wrong = PoolSet::new(vec![pool(vec![7])]);
    let _kept = wrong.allocate(PoolId(0), MIB).expect("fits");
    let tally = wrong.pool(PoolId(0)).page_tally();
    assert_eq!((tally.elsewhere, tally.verified()), (tally.checked, 0), "{tally:?}");
}
