//! From a topology to pools: which pools a host has, what each is, and where its bytes
//! come from. Either discovered (one pool per tier) or read from a host file.

use crate::HostError;
use crate::device::DeviceModel;
use crate::topology::{HostTopology, MemAttrs, NumaNode, TopologySource};
use placer_pools::PoolKind;
use serde::Serialize;
use std::path::PathBuf;

/// Where a pool's bytes come from, before anything is allocated.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum BackendSpec {
    /// Pages bound to these NUMA nodes.
    Numa { nodes: Vec<u32> },
    /// The process heap, first-touch placement.
    Heap,
    /// Slow-tier emulation: pages bound to `nodes` (DRAM), plus waiting per byte.
    Emulated { device: String, nodes: Vec<u32> },
    /// memkind's MEMKIND_DAX_KMEM kind (PMEM in KMEM-DAX mode).
    MemkindDaxKmem,
    /// A memkind file-backed kind in an fsdax directory.
    MemkindPmem { dir: PathBuf, max_bytes: u64 },
    /// memkind's default kind.
    MemkindDefault,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolSpec {
    pub name: String,
    pub kind: PoolKind,
    pub capacity: u64,
    pub backend: BackendSpec,
    /// The device model behind an emulated pool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceModel>,
    /// What hwloc (HMAT) says about this pool's memory, from the home package.
    pub attrs: MemAttrs,
    /// Anything a user must know: 2LM caching, a shared capacity, a clamped emulation.
    pub notes: Vec<String>,
}

impl PoolSpec {
    pub fn is_emulated(&self) -> bool {
        matches!(self.backend, BackendSpec::Emulated { .. })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum LayoutOrigin {
    /// One pool per tier, from the topology.
    Discovered,
    HostFile {
        path: PathBuf,
        name: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostLayout {
    pub topology: HostTopology,
    pub origin: LayoutOrigin,
    pub pools: Vec<PoolSpec>,
    /// Some memory sits behind a memory-side cache (Optane Memory Mode's DRAM, Knights
    /// Landing's MCDRAM in cache mode): the cache is not a placeable tier.
    pub two_level_memory: bool,
}

/// What to emulate on top of the discovered pools.
#[derive(Debug, Clone, PartialEq)]
pub enum EmulateChoice {
    /// Emulate `optane-dcpmm` when this host has nothing but DRAM; never on an XML
    /// topology (it describes a real host's real tiers) or a 2LM host.
    Default,
    None,
    Devices(Vec<Emulate>),
}

/// One device to emulate: as a new pool in local DRAM, or as the timing of a pool the
/// host really has (`optane-dcpmm@pmem`: the data stays bound to that pool's nodes, and
/// every kernel waits what the device model charges, e.g. in a VM whose PMEM node is
/// really the hypervisor's DRAM).
#[derive(Debug, Clone, PartialEq)]
pub struct Emulate {
    pub device: DeviceModel,
    /// The discovered pool whose timing is emulated; `None` adds a new pool in DRAM.
    pub on: Option<String>,
}

impl EmulateChoice {
    /// Parses `--emulate`: `none`, or a comma-separated list of `DEVICE[:MODEL][@POOL]`
    /// where DEVICE is a built-in model name or a model file.
    pub fn parse(list: &str) -> Result<EmulateChoice, HostError> {
        if list.trim() == "none" {
            return Ok(EmulateChoice::None);
        }
        let devices = list
            .split(',')
            .map(|item| {
                let (device, on) = match item.trim().rsplit_once('@') {
                    Some((device, pool)) => (device, Some(pool.trim().to_string())),
                    None => (item.trim(), None),
                };
                if on.as_deref() == Some("") {
                    return Err(HostError::Usage { reason: format!("--emulate '{item}': no pool after '@'") });
                }
                Ok(Emulate { device: DeviceModel::resolve(device)?, on })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(EmulateChoice::Devices(devices))
    }
}

impl HostLayout {
    /// One pool per tier: local DRAM first (the executor's scratch space lives in pool
    /// 0), then faster and slower tiers; remote nodes get their own pools.
    pub fn discover(topology: HostTopology, emulate: &EmulateChoice) -> Result<HostLayout, HostError> {
        let mut groups: Vec<(String, PoolKind, Vec<&NumaNode>)> = Vec::new();
        for node in &topology.nodes {
            let kind = node.kind;
            let name = match (kind, topology.is_local(node)) {
                (PoolKind::Unknown, _) => format!("node{}", node.os_index),
                (PoolKind::Dram | PoolKind::RemoteDram, _) | (_, true) => kind.name().to_string(),
                (_, false) => format!("remote-{}", kind.name()),
            };
            match groups.iter_mut().find(|(n, _, _)| *n == name) {
                Some((_, _, nodes)) => nodes.push(node),
                None => groups.push((name, kind, vec![node])),
            }
        }
        groups.sort_by_key(|(name, kind, _)| (tier_order(*kind), name.starts_with("remote-"), name.clone()));
        let two_level_memory = topology.two_level_memory();
        let mut pools: Vec<PoolSpec> = groups
            .into_iter()
            .map(|(name, kind, nodes)| {
                let mut notes = Vec::new();
                let inferred: Vec<&NumaNode> = nodes.iter().copied().filter(|n| n.inferred.is_some()).collect();
                if let Some(first) = inferred.first() {
                    let others: Vec<String> = inferred[1..].iter().map(|n| n.os_index.to_string()).collect();
                    let likewise = if others.is_empty() {
                        String::new()
                    } else {
                        format!(" (likewise nodes {})", others.join(", "))
                    };
                    notes.push(format!(
                        "inferred, node {}: {}{likewise}",
                        first.os_index,
                        first.inferred.as_deref().unwrap_or_default()
                    ));
                }
                if topology.virtual_machine && kind != PoolKind::Dram {
                    notes.push(format!(
                        "virtual machine: this node is as fast as the hypervisor's memory behind it, not as {kind}"
                    ));
                }
                notes.extend(nodes.iter().filter_map(|n| n.capacity_note.clone()));
                if kind == PoolKind::Dram
                    && let Some(note) = &topology.home_note
                {
                    notes.push(note.clone());
                }
                if let Some(cache) = nodes.iter().find_map(|n| n.memory_side_cache) {
                    let size = if cache > 0 { format!("{} ", placer_units::fmt_bytes(cache)) } else { String::new() };
                    notes.push(format!(
                        "2LM: behind a {size}memory-side cache (Optane's DRAM, or KNL's MCDRAM in cache mode); the cache is not placeable"
                    ));
                }
                PoolSpec {
                    name,
                    kind,
                    capacity: nodes.iter().map(|n| n.capacity).sum(),
                    backend: BackendSpec::Numa { nodes: nodes.iter().map(|n| n.os_index).collect() },
                    device: None,
                    attrs: nodes[0].attrs,
                    notes,
                }
            })
            .collect();
        let only_dram = pools.iter().all(|p| p.kind == PoolKind::Dram);
        let devices = match emulate {
            EmulateChoice::Default if only_dram && !two_level_memory && topology.source == TopologySource::ThisHost => {
                vec![Emulate { device: DeviceModel::named("optane-dcpmm")?, on: None }]
            }
            EmulateChoice::Default | EmulateChoice::None => Vec::new(),
            EmulateChoice::Devices(d) => d.clone(),
        };
        for Emulate { device, on } in devices {
            if let Some(target) = on {
                emulate_on(&mut pools, &target, device)?;
                continue;
            }
            let home = pools.iter().find(|p| p.kind == PoolKind::Dram).ok_or(HostError::NoDram)?;
            let nodes = match &home.backend {
                BackendSpec::Numa { nodes } => nodes.clone(),
                _ => return Err(HostError::NoDram),
            };
            let mut name = device.kind().name().to_string();
            if pools.iter().any(|p| p.name == name) {
                name = format!("{name}-emulated");
            }
            let notes = vec![format!(
                "emulated: data lives in pool '{}' ({}); its capacity is shared with that pool",
                home.name,
                placer_units::fmt_bytes(home.capacity)
            )];
            pools.push(PoolSpec {
                name,
                kind: device.kind(),
                capacity: home.capacity,
                backend: BackendSpec::Emulated { device: device.name.clone(), nodes },
                device: Some(device),
                attrs: MemAttrs::default(),
                notes,
            });
        }
        Ok(HostLayout { topology, origin: LayoutOrigin::Discovered, pools, two_level_memory })
    }

    /// Each node whose capacity the kernel's figures changed, and why (capacity.rs): what
    /// every budget checked against a pool's capacity rests on.
    pub fn capacity_notes(&self) -> Vec<String> {
        self.topology.nodes.iter().filter_map(|n| n.capacity_note.clone()).collect()
    }

    pub fn any_emulated(&self) -> bool {
        self.pools.iter().any(PoolSpec::is_emulated)
    }

    /// The distinct tiers, slowest last.
    pub fn tiers(&self) -> Vec<PoolKind> {
        let mut kinds: Vec<PoolKind> = self.pools.iter().map(|p| p.kind).collect();
        kinds.sort_by_key(|k| tier_order(*k));
        kinds.dedup();
        kinds
    }
}

/// Gives the real pool `target` the timing of `device`: its data stays bound where it
/// is, and every kernel that touches it waits what the device model charges.
fn emulate_on(pools: &mut [PoolSpec], target: &str, device: DeviceModel) -> Result<(), HostError> {
    let names = || pools.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ");
    let unknown = || HostError::Usage {
        reason: format!("--emulate {}@{target}: this host has no pool '{target}' (pools: {})", device.name, names()),
    };
    let index = pools.iter().position(|p| p.name == target).ok_or_else(unknown)?;
    let pool = &mut pools[index];
    let nodes = match &pool.backend {
        BackendSpec::Numa { nodes } => nodes.clone(),
        _ => {
            return Err(HostError::Usage {
                reason: format!("--emulate {}@{target}: pool '{target}' is already emulated", device.name),
            });
        }
    };
    pool.notes.push(format!(
        "timing EMULATED as {}; the data is really bound to node {}",
        device.label(),
        placer_pools::node_list(&nodes)
    ));
    pool.backend = BackendSpec::Emulated { device: device.name.clone(), nodes };
    pool.device = Some(device);
    Ok(())
}

/// Fast tiers before slow ones, for display and for a stable pool order.
pub fn tier_order(kind: PoolKind) -> u8 {
    match kind {
        PoolKind::Dram => 0,
        PoolKind::Hbm => 1,
        PoolKind::Spm => 2,
        PoolKind::RemoteDram => 3,
        PoolKind::Cxl => 4,
        PoolKind::Pmem => 5,
        PoolKind::Unknown => 6,
    }
}
