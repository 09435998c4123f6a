//! Host files: the shipped ones load, every kind of mistake is a one-line error naming
//! the file and the pool, and a three-tier layout works end to end on this machine.

use placer_host::{DramBaseline, EmulateChoice, Host, HostOptions, cache};
use placer_pools::PoolId;
use std::path::{Path, PathBuf};

fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/hosts").join(name)
}

fn options(host_file: &Path, cache_dir: &Path) -> HostOptions {
    HostOptions {
        topology_xml: None,
        host_file: Some(host_file.to_path_buf()),
        emulate: EmulateChoice::Default,
        cache_dir: cache_dir.to_path_buf(),
    }
}

const BASELINE: DramBaseline = DramBaseline { read_gbps: 30.0, write_gbps: 25.0, latency_ns: 100.0, threads: 2 };

/// A host with a known DRAM baseline already cached, so no test measures anything.
fn open_with_baseline(host_file: &Path, dir: &Path) -> Host {
    let host = Host::open(&options(host_file, dir)).expect("host file loads");
    cache::store(dir, &host.fingerprint, BASELINE, None).expect("cache written");
    Host::open(&options(host_file, dir)).expect("host file loads")
}

#[test]
fn three_tiers_work_end_to_end_on_this_machine() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut host = open_with_baseline(&shipped("emulated-three-tier.json"), dir.path());
    assert_eq!(host.layout.pools.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["dram", "cxl", "pmem"]);
    let mut pools = host.pool_set().expect("pools come up");
    for id in pools.ids().collect::<Vec<_>>() {
        let mut b = pools.allocate(id, 1 << 20).expect("allocates");
        b.bytes_mut()[4095] = 9;
        let moved = pools.move_to(b, PoolId((id.0 + 1) % 3)).expect("moves");
        assert_eq!(moved.bytes()[4095], 9);
    }
    // The emulated pools charge what their device models say against the baseline.
    let optane = pools.pool(PoolId(2)).emulation.as_ref().expect("pmem is emulated");
    let slow_read = 30e9 * 37.6 / 105.6;
    assert!((optane.read_extra_ns_per_byte - (1e9 / slow_read - 1e9 / 30e9)).abs() < 1e-12);
    assert!(pools.pool(PoolId(0)).emulation.is_none());
    assert_eq!(pools.pool(PoolId(1)).emulation.as_ref().map(|e| e.device.as_str()), Some("cxl-type3"));
}

#[test]
fn shipped_host_files_parse() {
    for name in ["emulated-three-tier.json", "memkind-fsdax.json", "memkind-dax-kmem.json"] {
        let dir = tempfile::tempdir().expect("tempdir");
        Host::open(&options(&shipped(name), dir.path())).expect(name);
    }
    // Written for a 2-socket Optane host: checked against that host's topology.
    let dir = tempfile::tempdir().expect("tempdir");
    let xml = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/topologies/two-socket-optane.xml");
    let opts = HostOptions { topology_xml: Some(xml), ..options(&shipped("two-socket-optane.json"), dir.path()) };
    let host = Host::open(&opts).expect("fits that host");
    assert_eq!(host.layout.pools.len(), 3);
}

fn host_file_error(body: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("host.json");
    std::fs::write(&path, body).expect("write");
    let err = Host::open(&options(&path, dir.path())).expect_err("bad host file");
    let msg = err.to_string();
    assert!(msg.starts_with(&format!("host file {}: ", path.display())), "{msg}");
    assert!(!msg.contains('\n'), "one line: {msg}");
    msg
}

fn with_pools(pools: &str) -> String {
    format!(r#"{{"format": "placer-host", "version": 1, "name": "t", "pools": [{pools}]}}"#)
}

#[test]
fn mistakes_in_host_files_are_named() {
    let dram = r#"{"name": "dram", "kind": "dram", "backend": {"type": "numa", "nodes": [0]}}"#;
    let cases = [
        ("{\"format\": \"placer-host\",\n  \"version\": 1,\n  \"pools\": [", "line 3"),
        (r#"{"format": "placer-model", "version": 1, "name": "t", "pools": []}"#, "expected 'placer-host' version 1"),
        (&with_pools(""), "it lists no pools"),
        (&with_pools(&format!("{dram}, {dram}")), "pool 'dram': the name is used twice"),
        (
            &with_pools(r#"{"name": "x", "kind": "optane", "backend": {"type": "heap"}}"#),
            "pool 'x': unknown kind 'optane'",
        ),
        (
            &with_pools(r#"{"name": "far", "kind": "pmem", "backend": {"type": "numa", "nodes": [0, 9]}}"#),
            "pool 'far': NUMA node 9 does not exist on this host",
        ),
        (
            &with_pools(r#"{"name": "p", "kind": "pmem", "backend": {"type": "emulated", "device": "optane-v9"}}"#),
            "pool 'p': unknown device model 'optane-v9'",
        ),
        (
            &with_pools(r#"{"name": "d", "kind": "dram", "backend": {"type": "heap"}, "capacity": "12 parsecs"}"#),
            "pool 'd': capacity: '12 parsecs': unknown unit",
        ),
        (&with_pools(r#"{"name": "d", "kind": "dram", "backend": {"type": "tape"}}"#), "unknown variant `tape`"),
        (
            &with_pools(r#"{"name": "d", "kind": "dram", "backend": {"type": "heap"}, "speed": 3}"#),
            "unknown field `speed`",
        ),
        (&with_pools(r#"{"name": "a b", "kind": "dram", "backend": {"type": "heap"}}"#), "pool 'a b': a pool name is"),
    ];
    for (body, expected) in cases {
        let msg = host_file_error(body);
        assert!(msg.contains(expected), "expected '{expected}' in: {msg}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope.json");
    let err = Host::open(&options(&missing, dir.path())).expect_err("missing");
    assert!(err.to_string().contains("nope.json"), "{err}");
}

#[test]
fn a_corrupt_cache_is_reported_not_ignored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let host = Host::open(&options(&shipped("emulated-three-tier.json"), dir.path())).expect("loads");
    std::fs::write(host.cache_path(), "{ half a file").expect("write");
    let err = Host::open(&options(&shipped("emulated-three-tier.json"), dir.path())).expect_err("corrupt");
    assert!(err.to_string().starts_with("host cache "), "{err}");
}

#[test]
fn a_full_pool_refuses_and_keeps_what_it_has() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("small.json");
    std::fs::write(
        &path,
        with_pools(
            r#"{"name": "dram", "kind": "dram", "backend": {"type": "numa", "nodes": [0]}, "capacity": "1MiB"}"#,
        ),
    )
    .expect("write");
    let mut pools = Host::open(&options(&path, dir.path())).expect("loads").pool_set().expect("pools");
    let kept = pools.allocate(PoolId(0), 768 << 10).expect("fits");
    let err = pools.allocate(PoolId(0), 512 << 10).expect_err("full");
    assert!(err.to_string().contains("pool 'dram' is full"), "{err}");
    assert_eq!(pools.pool(PoolId(0)).in_use(), 768 << 10);
    assert_eq!(kept.len_bytes(), 768 << 10);
}

#[cfg(feature = "memkind")]
#[test]
fn memkind_pools_come_up_or_say_why_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = Host::open(&options(&shipped("memkind-dax-kmem.json"), dir.path()))
        .expect("loads")
        .pool_set()
        .expect_err("no PMEM on this machine");
    assert!(err.to_string().contains("MEMKIND_DAX_KMEM is not available"), "{err}");

    let pmem_dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("fsdax.json");
    let pool = format!(
        r#"{{"name": "pmem", "kind": "pmem", "backend": {{"type": "memkind-pmem", "dir": "{}", "max_bytes": "64MiB"}}}}"#,
        pmem_dir.path().display()
    );
    std::fs::write(&path, with_pools(&pool)).expect("write");
    let mut pools = Host::open(&options(&path, dir.path())).expect("loads").pool_set().expect("file-backed kind opens");
    let mut b = pools.allocate(PoolId(0), 8 << 20).expect("allocates");
    b.as_f32_mut().expect("view")[100] = 3.0;
    assert_eq!(b.as_f32().expect("view")[100], 3.0);
}

/// What emulated pools charge comes from the cached DRAM baseline, so a probe made for
/// move costs (`solve`, `pipeline`) must keep it: a profile timed against one baseline
/// and run against another ran 30-40% off its prediction. `topo --probe` (`probe`)
/// still replaces it with what it measured.
#[test]
fn a_probe_for_move_costs_keeps_the_baseline_emulated_pools_charge_by() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut host = open_with_baseline(&shipped("emulated-three-tier.json"), dir.path());
    let small = placer_host::ProbeOptions { bytes: 8 << 20, repeats: 1, chase_steps: 1 << 12, ..Default::default() };
    let (probe, baseline) = host.probe_moves(&small).expect("probes");
    assert_eq!(baseline, BASELINE);
    assert_eq!(probe.pools.len(), 3, "every pool measured");
    let cached = host.cache.as_ref().expect("cached");
    assert_eq!(cached.baseline, BASELINE);
    assert!(cached.probe.is_some(), "the probe itself is cached");
    let pools = host.pool_set().expect("pools come up");
    let optane = pools.pool(PoolId(2)).emulation.as_ref().expect("pmem is emulated");
    assert!((optane.read_extra_ns_per_byte - (1e9 / (30e9 * 37.6 / 105.6) - 1e9 / 30e9)).abs() < 1e-12);

    let (_, measured) = host.probe(&small).expect("probes");
    assert_ne!(measured, BASELINE, "a fresh measurement, not the planted 30/25 GB/s");
    // The cache is JSON: a float may come back one unit in the last place off.
    let cached = host.cache.as_ref().expect("cached").baseline;
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs();
    assert!(close(cached.read_gbps, measured.read_gbps) && close(cached.write_gbps, measured.write_gbps), "{cached:?}");
}
