//! The corpus of real hwloc exports (tests/data/hwloc-corpus, made by
//! scripts/hwloc-corpus.sh from hwloc's own test suite): every file that hwloc 2.9 itself
//! loads must give pools, and the pools of every file are the ones reviewed in
//! snapshots/corpus__pool_layouts.snap. A refusal of a file hwloc loads is a failure.

use placer_host::{BackendSpec, Host, HostOptions, PoolSpec};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hwloc-corpus")
}

/// (file, whether hwloc 2.9 loads it) for every row of SOURCES.md.
fn sources() -> Vec<(String, bool)> {
    let text = std::fs::read_to_string(corpus().join("SOURCES.md")).expect("SOURCES.md");
    text.lines()
        .filter_map(|line| {
            let mut cells = line.split('|').map(str::trim).skip(1);
            let file = cells.next()?.strip_prefix('`')?.strip_suffix('`')?.to_string();
            let loads = cells.nth(1)? == "yes";
            Some((file, loads))
        })
        .collect()
}

fn open(path: &Path) -> Result<Host, String> {
    let cache = tempfile::tempdir().expect("tempdir");
    let options = HostOptions {
        topology_xml: Some(path.to_path_buf()),
        cache_dir: cache.path().to_path_buf(),
        ..HostOptions::default()
    };
    Host::open(&options).map_err(|e| e.to_string())
}

/// `name=kind[nodes] size`, as the snapshot lists a pool.
fn describe(pool: &PoolSpec) -> String {
    let nodes = match &pool.backend {
        BackendSpec::Numa { nodes } | BackendSpec::Emulated { nodes, .. } => {
            nodes.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
        }
        other => format!("{other:?}"),
    };
    let mib = pool.capacity >> 20;
    let size = if mib >= 1024 { format!("{:.1}GiB", mib as f64 / 1024.0) } else { format!("{mib}MiB") };
    format!("{}={}[{nodes}] {size}", pool.name, pool.kind)
}

#[test]
fn every_export_hwloc_loads_gets_pools() {
    let sources = sources();
    assert!(sources.len() >= 100, "SOURCES.md lists {} files", sources.len());
    let mut refused = Vec::new();
    let mut layouts = String::new();
    for (file, hwloc_loads) in &sources {
        let path = corpus().join(file);
        assert!(path.is_file(), "{file} is listed in SOURCES.md but missing");
        let line = match open(&path) {
            Ok(host) => {
                let pools: Vec<String> = host.layout.pools.iter().map(describe).collect();
                let two_lm = if host.layout.two_level_memory { " (2LM)" } else { "" };
                format!("{}{two_lm}", pools.join("  "))
            }
            Err(e) => {
                // One line that names the file, whatever the reason.
                assert!(!e.contains('\n') && e.contains(file.rsplit('/').next().expect("name")), "{file}: {e}");
                if *hwloc_loads {
                    refused.push(format!("{file}: {e}"));
                }
                format!("refused: {}", e.rsplit(": ").next().unwrap_or(&e))
            }
        };
        writeln!(layouts, "{file}: {line}").expect("write");
    }
    assert!(refused.is_empty(), "placer refused {} exports that hwloc loads:\n{}", refused.len(), refused.join("\n"));
    insta::assert_snapshot!("pool_layouts", layouts);
}
