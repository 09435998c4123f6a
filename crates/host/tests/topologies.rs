//! Every test topology in configs/topologies/ gives the pools and tiers of the host it
//! models, and this machine gives DRAM plus an emulated tier.

use placer_host::{BackendSpec, EmulateChoice, Host, HostOptions, HostTopology};
use placer_pools::PoolKind;
use std::path::{Path, PathBuf};

fn topology(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/topologies").join(name)
}

fn open_xml(name: &str) -> Host {
    let cache = tempfile::tempdir().expect("tempdir");
    let options = HostOptions {
        topology_xml: Some(topology(name)),
        cache_dir: cache.path().to_path_buf(),
        ..HostOptions::default()
    };
    Host::open(&options).expect("topology loads")
}

/// (name, kind, GiB, NUMA nodes) of every pool.
fn pools(host: &Host) -> Vec<(String, PoolKind, u64, Vec<u32>)> {
    host.layout
        .pools
        .iter()
        .map(|p| {
            let nodes = match &p.backend {
                BackendSpec::Numa { nodes } | BackendSpec::Emulated { nodes, .. } => nodes.clone(),
                _ => Vec::new(),
            };
            (p.name.clone(), p.kind, p.capacity >> 30, nodes)
        })
        .collect()
}

fn pool(name: &str, kind: PoolKind, gib: u64, nodes: &[u32]) -> (String, PoolKind, u64, Vec<u32>) {
    (name.to_string(), kind, gib, nodes.to_vec())
}

#[test]
fn two_socket_optane_has_local_and_remote_dram_and_pmem_with_hmat_figures() {
    let host = open_xml("two-socket-optane.xml");
    assert_eq!(
        pools(&host),
        vec![
            pool("dram", PoolKind::Dram, 192, &[0]),
            pool("remote-dram", PoolKind::RemoteDram, 192, &[1]),
            pool("pmem", PoolKind::Pmem, 768, &[2]),
            pool("remote-pmem", PoolKind::Pmem, 768, &[3]),
        ]
    );
    assert!(!host.layout.two_level_memory);
    assert!(!host.layout.any_emulated(), "an XML host is planned with its real tiers only");
    let node = |i: u32| host.layout.topology.nodes.iter().find(|n| n.os_index == i).expect("node");
    assert_eq!((node(0).cpus, node(2).cpus), (4, 0), "Optane nodes are CPU-less");
    // 37.6 GB/s and 12.5 GB/s (Yang et al.) in MiB/s, as annotated.
    assert_eq!(
        (node(2).attrs.read_bw(), node(2).attrs.write_bw(), node(2).attrs.latency()),
        (Some(35858), Some(11921), Some(305))
    );
    assert_eq!(node(1).attrs.latency(), Some(140), "remote DRAM seen from package 0");
}

#[test]
fn xeon_max_in_flat_mode_has_an_hbm_tier() {
    let host = open_xml("xeon-max-flat.xml");
    let kinds: Vec<PoolKind> = host.layout.pools.iter().map(|p| p.kind).collect();
    assert_eq!(kinds, vec![PoolKind::Dram, PoolKind::Hbm, PoolKind::Hbm, PoolKind::RemoteDram]);
    assert_eq!(pools(&host)[1], pool("hbm", PoolKind::Hbm, 64, &[2]));
    assert_eq!(host.layout.tiers(), vec![PoolKind::Dram, PoolKind::Hbm, PoolKind::RemoteDram]);
}

/// An export by an hwloc that set no subtypes: 8 DDR nodes and 8 HBM nodes, each pair
/// under one sub-NUMA cluster with the same CPUs. The HBM must come out apart from DDR,
/// labelled as an inference.
#[test]
fn flat_hbm_without_subtypes_is_inferred_from_capacity_locality_and_cpu_model() {
    let host = open_xml("xeon-max-9462-snc4-flat.xml");
    assert_eq!(
        pools(&host),
        vec![
            pool("dram", PoolKind::Dram, 504, &[0, 1, 2, 3]),
            pool("hbm", PoolKind::Hbm, 64, &[8, 9, 10, 11]),
            pool("remote-hbm", PoolKind::Hbm, 64, &[12, 13, 14, 15]),
            pool("remote-dram", PoolKind::RemoteDram, 504, &[4, 5, 6, 7]),
        ]
    );
    let topology = &host.layout.topology;
    for node in &topology.nodes {
        let hbm = node.os_index >= 8;
        assert_eq!(node.subtype, None, "the export has no subtypes");
        assert_eq!(node.inferred.is_some(), hbm, "node {}: only the HBM is inferred", node.os_index);
        assert_eq!(node.cpus, if hbm { 0 } else { 4 }, "node {}: the CPUs are the DDR node's", node.os_index);
    }
    let why = topology.nodes.iter().find(|n| n.os_index == 9).and_then(|n| n.inferred.clone()).expect("inferred");
    assert!(why.contains("HBM2e") && why.contains("shares CPUs 4-7 with node 1") && why.contains("Max 9462"), "{why}");
    assert!(host.layout.pools[1].notes[0].starts_with("inferred, node 8:"), "{:?}", host.layout.pools[1].notes);

    let knl = open_xml("knl-snc4-flat.xml");
    assert_eq!(
        pools(&knl),
        vec![pool("dram", PoolKind::Dram, 96, &[0, 1, 2, 3]), pool("hbm", PoolKind::Hbm, 16, &[4, 5, 6, 7])]
    );
    let why = knl.layout.topology.nodes.iter().find_map(|n| n.inferred.clone()).expect("inferred");
    assert!(why.contains("MCDRAM") && why.contains("Xeon Phi"), "{why}");
}

/// The same shape with the CPU model taken away is still an on-package tier, but the
/// label says the CPU did not back it up; and a host file overrides the inference.
#[test]
fn an_unknown_cpu_weakens_the_inference_and_a_host_file_overrides_it() {
    let mut topo = HostTopology::from_xml_file(&topology("knl-snc4-flat.xml")).expect("loads");
    topo.cpu_model = Some("Some Future CPU".into());
    topo.classify();
    let hbm = topo.nodes.iter().find(|n| n.os_index == 4).expect("node 4");
    assert_eq!(hbm.kind, PoolKind::Hbm);
    let why = hbm.inferred.as_deref().unwrap_or_default();
    assert!(why.contains("not one known to carry on-package memory"), "{why}");

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("knl.json");
    let body = r#"{ "format": "placer-host", "version": 1, "name": "knl-as-i-know-it",
        "pools": [ { "name": "ddr", "kind": "dram", "backend": { "type": "numa", "nodes": [0, 1, 2, 3] } },
                   { "name": "mcdram", "kind": "hbm", "backend": { "type": "numa", "nodes": [4, 5, 6, 7] } } ] }"#;
    std::fs::write(&file, body).expect("write");
    let options = HostOptions {
        topology_xml: Some(topology("knl-snc4-flat.xml")),
        host_file: Some(file),
        cache_dir: dir.path().to_path_buf(),
        ..HostOptions::default()
    };
    let host = Host::open(&options).expect("host file");
    let names: Vec<&str> = host.layout.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["ddr", "mcdram"]);
}

/// A guest's device model can time a pool the host really has (`DEVICE@POOL`): the data
/// stays bound to that pool's nodes. A pool that is not there is named in the error.
#[test]
fn a_device_model_can_time_a_real_pool_in_place() {
    let cache = tempfile::tempdir().expect("tempdir");
    let open = |spec: &str| {
        let options = HostOptions {
            topology_xml: Some(topology("two-socket-optane.xml")),
            emulate: EmulateChoice::parse(spec)?,
            cache_dir: cache.path().to_path_buf(),
            ..HostOptions::default()
        };
        Host::open(&options)
    };
    let host = open("optane-dcpmm:overlap@pmem").expect("emulated in place");
    let pmem = host.layout.pools.iter().find(|p| p.name == "pmem").expect("pmem pool");
    assert_eq!(pmem.backend, BackendSpec::Emulated { device: "optane-dcpmm".into(), nodes: vec![2] });
    assert_eq!(pmem.device.as_ref().map(|d| d.label()), Some("optane-dcpmm:overlap".to_string()));
    assert!(pmem.notes.iter().any(|n| n.contains("timing EMULATED") && n.contains("node 2")), "{:?}", pmem.notes);
    assert_eq!(host.layout.pools.len(), 4, "no pool is added");

    let err = open("optane-dcpmm@nvm").expect_err("no such pool").to_string();
    assert!(err.contains("no pool 'nvm'") && err.contains("dram, remote-dram, pmem, remote-pmem"), "{err}");
    let err = open("optane-dcpmm@").expect_err("empty pool").to_string();
    assert!(err.contains("no pool after '@'"), "{err}");
}

/// The QEMU guest's own export (scripts/vm/guest.sh, `lstopo-no-graphics --of xml`,
/// hwloc 2.9 in the guest): node 1 is CPU-less DRAM at the far socket's HMAT figures,
/// with no subtype, and an export has no kernel tiers, so HMAT alone must split it off;
/// before, it was merged into `dram`.
#[test]
fn the_guests_own_export_splits_far_dram_by_hmat_alone() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/guest-export.xml");
    let cache = tempfile::tempdir().expect("tempdir");
    let options =
        HostOptions { topology_xml: Some(path), cache_dir: cache.path().to_path_buf(), ..HostOptions::default() };
    let host = Host::open(&options).expect("the guest's export loads");
    let kinds: Vec<(String, PoolKind, Vec<u32>)> =
        pools(&host).into_iter().map(|(name, kind, _, nodes)| (name, kind, nodes)).collect();
    let want = [
        ("dram", PoolKind::Dram, vec![0]),
        ("remote-dram", PoolKind::RemoteDram, vec![1]),
        ("pmem", PoolKind::Pmem, vec![2]),
    ];
    assert_eq!(kinds, want.map(|(n, k, v)| (n.to_string(), k, v)).to_vec());
    let why = host.layout.topology.nodes[1].inferred.clone().unwrap_or_default();
    assert!(why.contains("HMAT alone") && why.contains("140 ns against 102"), "{why}");
}

#[test]
fn a_cxl_expander_is_its_own_tier() {
    let host = open_xml("cxl-expander.xml");
    assert_eq!(pools(&host), vec![pool("dram", PoolKind::Dram, 128, &[0]), pool("cxl", PoolKind::Cxl, 256, &[1])]);
    assert_eq!(host.layout.topology.nodes[1].attrs.latency(), Some(170));
}

#[test]
fn two_level_memory_is_reported_and_has_no_placeable_slow_tier() {
    let host = open_xml("two-level-memory.xml");
    assert!(host.layout.two_level_memory);
    assert!(host.layout.pools.iter().all(|p| matches!(p.kind, PoolKind::Dram | PoolKind::RemoteDram)));
    assert_eq!(host.layout.topology.nodes[0].memory_side_cache, Some(192 << 30));
    assert!(host.layout.pools[0].notes[0].contains("2LM"), "{:?}", host.layout.pools[0].notes);
}

#[test]
fn three_tiers_come_out_in_speed_order() {
    let host = open_xml("three-tier.xml");
    assert_eq!(host.layout.tiers(), vec![PoolKind::Dram, PoolKind::Cxl, PoolKind::Pmem]);
    assert_eq!(host.layout.pools.len(), 3);
}

#[test]
fn an_exported_one_node_machine_is_one_dram_pool() {
    let host = open_xml("this-machine.xml");
    assert_eq!(pools(&host).len(), 1);
    assert_eq!(host.layout.pools[0].kind, PoolKind::Dram);
}

#[test]
fn an_xml_host_can_be_listed_but_not_allocated() {
    let mut host = open_xml("cxl-expander.xml");
    let err = host.pool_set().expect_err("another machine");
    assert!(err.to_string().contains("describes another machine"), "{err}");
}

#[test]
fn bad_topology_files_are_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        ("missing.xml", None, "no such file"),
        ("garbage.xml", Some("this is not xml"), "not an hwloc XML export"),
        ("v3.xml", Some("<?xml version=\"1.0\"?>\n<topology version=\"3.0\">\n</topology>\n"), "hwloc 3.x XML"),
        (
            "broken.xml",
            Some("<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n<object type=\"Machine\"\n"),
            "topology",
        ),
    ];
    for (name, text, expected) in cases {
        let path = dir.path().join(name);
        if let Some(text) = text {
            std::fs::write(&path, text).expect("write");
        }
        let err = HostTopology::from_xml_file(&path).expect_err(name);
        let msg = err.to_string();
        assert!(msg.starts_with("topology ") && msg.contains(name) && msg.contains(expected), "{name}: {msg}");
    }
}

/// Found by `scripts/fuzz.sh` (target `hwloc_xml`, minimised): hwloc 2.9's own XML
/// reader (Debian's, without libxml2) killed placer on each of these: SIGSEGV (a NULL
/// read) on the first two, an assertion's abort on the others (a bitmap starting with
/// a comma; a machine left without NUMA nodes: a cache in front of none, hwloc having
/// dropped the one outside its parent, or read `MemCa;he` as a cache). They are now
/// refused before hwloc sees them.
#[test]
fn fuzz_xml_that_crashed_hwloc_is_refused_before_it() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let cases = [
        ("fuzz-hwloc-unterminated.xml", "not well-formed XML"),
        ("fuzz-hwloc-no-complete-cpuset.xml", "<object> at line 2, column 3: a cpuset and no complete_cpuset"),
        ("fuzz-hwloc-bitmap-leading-comma.xml", "allowed_nodeset=\",0x00000001\" starts with a comma"),
        ("fuzz-hwloc-memcache-without-numa.xml", "line 3, column 7: a memory-side cache with no NUMA node below it"),
        ("fuzz-hwloc-numa-outside-parent.xml", "line 4, column 7: its cpuset is not within its parent's"),
        ("fuzz-hwloc-type-prefix.xml", "line 3, column 7: type \"MemCa;he\" is not an hwloc object type"),
        ("fuzz-hwloc-cpuset-without-nodeset.xml", "line 2, column 3: a cpuset without a nodeset"),
        (
            "fuzz-hwloc-numa-empty-nodeset.xml",
            "line 12, column 9: a NUMA node whose nodeset does not hold its os_index",
        ),
    ];
    for (name, expected) in cases {
        let path = fixtures.join(name);
        let msg = HostTopology::from_xml_file(&path).expect_err(name).to_string();
        assert!(msg.starts_with("topology ") && msg.contains(name) && msg.contains(expected), "{name}: {msg}");
    }
    // Every committed export writes its sets in pairs, and still loads.
    for entry in std::fs::read_dir(topology("")).expect("configs/topologies") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "xml") {
            HostTopology::from_xml_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
}

#[test]
fn this_machine_gets_dram_plus_an_emulated_pmem_pool_by_default() {
    let cache = tempfile::tempdir().expect("tempdir");
    let options = HostOptions { cache_dir: cache.path().to_path_buf(), ..HostOptions::default() };
    let host = Host::open(&options).expect("this host");
    let layout = &host.layout;
    let real_tiers = layout.pools.iter().filter(|p| !p.is_emulated()).map(|p| p.kind).collect::<Vec<_>>();
    if real_tiers.iter().all(|k| *k == PoolKind::Dram) {
        let emulated = layout.pools.iter().find(|p| p.is_emulated()).expect("an emulated tier is added");
        assert_eq!((emulated.name.as_str(), emulated.kind), ("pmem", PoolKind::Pmem));
        assert_eq!(emulated.device.as_ref().map(|d| d.name.as_str()), Some("optane-dcpmm"));
    }
    let none = HostOptions { emulate: EmulateChoice::None, ..options };
    assert!(!Host::open(&none).expect("this host").layout.any_emulated());
}
