//! Host files (configs/hosts/*.json): the user's own pool layout, overriding discovery.
//!
//! ```json
//! { "format": "placer-host", "version": 1, "name": "...", "description": "...",
//!   "pools": [ { "name": "dram", "kind": "dram", "backend": { "type": "numa", "nodes": [0] },
//!                "capacity": "16GiB" }, ... ] }
//! ```

use crate::HostError;
use crate::device::DeviceModel;
use crate::layout::{BackendSpec, HostLayout, LayoutOrigin, PoolSpec};
use crate::topology::{HostTopology, MemAttrs};
use placer_pools::PoolKind;
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostFile {
    format: String,
    version: u32,
    name: String,
    #[serde(default)]
    #[allow(dead_code)]
    description: String,
    pools: Vec<PoolEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PoolEntry {
    name: String,
    kind: String,
    backend: BackendEntry,
    /// Bytes, or a string such as "16GiB" or "64GB". Defaults to the nodes' capacity
    /// (or the memory available now, for heap and memkind pools).
    capacity: Option<Capacity>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Capacity {
    Bytes(u64),
    Text(String),
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
enum BackendEntry {
    Numa { nodes: Vec<u32> },
    Heap,
    Emulated { device: String, nodes: Option<Vec<u32>> },
    MemkindDaxKmem,
    MemkindPmem { dir: PathBuf, max_bytes: Capacity },
    MemkindDefault,
}

/// Reads a host file and checks it against the topology it will run on.
pub fn load(path: &Path, topology: HostTopology) -> Result<HostLayout, HostError> {
    let bad = |reason: String| HostError::HostFile { path: path.to_path_buf(), reason };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let file: HostFile = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    if file.format != "placer-host" || file.version != 1 {
        return Err(bad(format!(
            "format '{}' version {}; expected 'placer-host' version 1",
            file.format, file.version
        )));
    }
    if file.pools.is_empty() {
        return Err(bad("it lists no pools".into()));
    }
    let known_nodes: Vec<u32> = topology.nodes.iter().map(|n| n.os_index).collect();
    let mut pools: Vec<PoolSpec> = Vec::new();
    for entry in file.pools {
        let in_pool = |reason: String| bad(format!("pool '{}': {reason}", entry.name));
        if entry.name.is_empty() || !entry.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(in_pool("a pool name is letters, digits, '-' and '_'".into()));
        }
        if pools.iter().any(|p| p.name == entry.name) {
            return Err(in_pool("the name is used twice".into()));
        }
        let kind = PoolKind::parse(&entry.kind).ok_or_else(|| {
            in_pool(format!("unknown kind '{}' (kinds: dram, remote-dram, hbm, pmem, cxl, spm, unknown)", entry.kind))
        })?;
        let check_nodes = |nodes: &[u32]| -> Result<(), HostError> {
            if nodes.is_empty() {
                return Err(in_pool("it names no NUMA nodes".into()));
            }
            match nodes.iter().find(|n| !known_nodes.contains(n)) {
                Some(n) => Err(in_pool(format!(
                    "NUMA node {n} does not exist on this host (nodes: {})",
                    known_nodes.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
                ))),
                None => Ok(()),
            }
        };
        let nodes_capacity = |nodes: &[u32]| -> u64 {
            topology.nodes.iter().filter(|n| nodes.contains(&n.os_index)).map(|n| n.capacity).sum()
        };
        let available = || placer_pools::available_memory().unwrap_or(u64::MAX);
        let mut device = None;
        let mut attrs = MemAttrs::default();
        let (backend, default_capacity) = match entry.backend {
            BackendEntry::Numa { nodes } => {
                check_nodes(&nodes)?;
                attrs = topology.nodes.iter().find(|n| n.os_index == nodes[0]).map(|n| n.attrs).unwrap_or_default();
                let capacity = nodes_capacity(&nodes);
                (BackendSpec::Numa { nodes }, capacity)
            }
            BackendEntry::Heap => (BackendSpec::Heap, available()),
            BackendEntry::Emulated { device: name, nodes } => {
                let model = DeviceModel::resolve(&name).map_err(|e| in_pool(e.to_string()))?;
                let nodes = nodes.unwrap_or_else(|| {
                    topology.nodes.iter().filter(|n| n.cpus > 0).take(1).map(|n| n.os_index).collect()
                });
                check_nodes(&nodes)?;
                let capacity = nodes_capacity(&nodes);
                let spec = BackendSpec::Emulated { device: model.name.clone(), nodes };
                device = Some(model);
                (spec, capacity)
            }
            BackendEntry::MemkindDaxKmem => (BackendSpec::MemkindDaxKmem, available()),
            BackendEntry::MemkindPmem { dir, max_bytes } => {
                let max_bytes = capacity_bytes(&max_bytes).map_err(|e| in_pool(format!("max_bytes: {e}")))?;
                (BackendSpec::MemkindPmem { dir, max_bytes }, max_bytes)
            }
            BackendEntry::MemkindDefault => (BackendSpec::MemkindDefault, available()),
        };
        let capacity = match &entry.capacity {
            Some(c) => capacity_bytes(c).map_err(|e| in_pool(format!("capacity: {e}")))?,
            None => default_capacity,
        };
        let notes = match (&device, &backend) {
            (Some(d), BackendSpec::Emulated { nodes, .. }) => vec![format!(
                "emulated {}: data bound to node {}, slowed per byte by the device model",
                d.label(),
                placer_pools::node_list(nodes)
            )],
            _ => Vec::new(),
        };
        pools.push(PoolSpec { name: entry.name, kind, capacity, backend, device, attrs, notes });
    }
    let two_level_memory = topology.two_level_memory();
    Ok(HostLayout {
        topology,
        origin: LayoutOrigin::HostFile { path: path.to_path_buf(), name: file.name },
        pools,
        two_level_memory,
    })
}

fn capacity_bytes(c: &Capacity) -> Result<u64, String> {
    match c {
        Capacity::Bytes(b) => Ok(*b),
        Capacity::Text(t) => placer_units::parse_bytes(t),
    }
}
