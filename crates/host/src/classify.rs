//! What technology each NUMA node is. hwloc's subtype says so when hwloc knows; when
//! it does not (older hwloc exports, CPU-less nodes the firmware did not describe), the
//! node's shape is read the way a careful person would, and the result is labelled as
//! an inference with the evidence it rests on.
//!
//! Two shapes are recognised:
//! - **A flat on-package tier** (HBM on Xeon Max, MCDRAM on Xeon Phi): several NUMA
//!   nodes at the same locality (the same CPUs), none with a subtype or a memory
//!   attribute, where one is at most half the size of another. The smaller one is the
//!   on-package memory; the CPU model says how sure that is.
//! - **Far DRAM** (another socket's memory, or an expander the firmware calls plain
//!   memory): a CPU-less node with no subtype that the kernel keeps in the same memory
//!   tier as local DRAM, and that HMAT says is slower to reach.

use crate::discover::{HostTopology, NumaNode};
use placer_pools::PoolKind;

/// CPU models that carry on-package memory usable in flat mode, with what the vendor
/// calls it. Matched as substrings of hwloc's `CPUModel`.
const ON_PACKAGE: [(&str, &str); 3] = [
    // Intel Xeon CPU Max 9400 series (Sapphire Rapids with 64 GB HBM2e per socket).
    ("Xeon(R) CPU Max", "HBM2e"),
    // Intel Xeon Phi x200 (Knights Landing, 16 GB MCDRAM).
    ("Xeon Phi", "MCDRAM"),
    // Fujitsu A64FX (32 GiB HBM2 and no DDR: every node is HBM).
    ("A64FX", "HBM2"),
];

/// A node's kind, and why, when it was not named by hwloc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Class {
    pub kind: PoolKind,
    /// The reasoning behind an inferred kind; `None` when hwloc's subtype or the node's
    /// CPUs settled it.
    pub inferred: Option<String>,
}

/// Classifies every node of `topology`, in order.
pub(crate) fn classify(topology: &HostTopology) -> Vec<Class> {
    topology.nodes.iter().map(|node| classify_node(topology, node)).collect()
}

fn classify_node(topology: &HostTopology, node: &NumaNode) -> Class {
    let named = |kind| Class { kind, inferred: None };
    let dram = || if topology.is_local(node) { PoolKind::Dram } else { PoolKind::RemoteDram };
    match node.subtype.as_deref().map(str::to_ascii_uppercase).as_deref() {
        Some("NVM") => return named(PoolKind::Pmem),
        Some("HBM" | "MCDRAM") => return named(PoolKind::Hbm),
        Some("CXL-DRAM") => return named(PoolKind::Cxl),
        Some("SPM") => return named(PoolKind::Spm),
        Some("DRAM") => return named(dram()),
        Some(_) => return named(PoolKind::Unknown),
        None => {}
    }
    if let Some(class) = on_package_tier(topology, node) {
        return class;
    }
    if node.cpus > 0 {
        return named(dram());
    }
    far_dram(topology, node).unwrap_or_else(|| named(PoolKind::Unknown))
}

/// A node with no subtype and no memory attribute that shares its locality with a node
/// at least twice its size, also unnamed and unattributed.
fn on_package_tier(topology: &HostTopology, node: &NumaNode) -> Option<Class> {
    let bare = |n: &NumaNode| n.subtype.is_none() && n.attrs == Default::default() && n.memory_side_cache.is_none();
    if !bare(node) || node.capacity == 0 {
        return None;
    }
    let locality = node.locality.as_deref()?;
    let bigger = topology
        .nodes
        .iter()
        .filter(|n| n.os_index != node.os_index && bare(n) && n.package == node.package)
        .filter(|n| n.locality.as_deref() == Some(locality))
        .filter(|n| n.capacity >= node.capacity.saturating_mul(2))
        .max_by_key(|n| n.capacity)?;
    let model = topology.cpu_model.as_deref();
    let known = model.and_then(|m| ON_PACKAGE.iter().find(|(part, _)| m.contains(part)));
    let (what, cpu) = match (known, model) {
        (Some((_, memory)), Some(m)) => (memory.to_string(), format!("CPU '{m}' carries {memory}")),
        (_, Some(m)) => ("HBM".to_string(), format!("but CPU '{m}' is not one known to carry on-package memory")),
        (_, None) => ("HBM".to_string(), "but the CPU model is not known".to_string()),
    };
    Some(Class {
        kind: PoolKind::Hbm,
        inferred: Some(format!(
            "on-package {what}, flat mode: no subtype or memory attributes; shares CPUs {locality} with node {}, \
             {:.1}x its size; {cpu}",
            bigger.os_index,
            bigger.capacity as f64 / node.capacity as f64,
        )),
    })
}

/// A CPU-less node with no subtype, in the kernel's DRAM tier, that HMAT says is
/// slower to reach than the local DRAM.
fn far_dram(topology: &HostTopology, node: &NumaNode) -> Option<Class> {
    let local = topology.nodes.iter().find(|n| n.cpus > 0 && n.subtype.as_deref().is_none_or(|s| s == "DRAM"))?;
    let (tier, dram_tier) = (node.kernel_tier?, local.kernel_tier?);
    if tier != dram_tier {
        return None;
    }
    let (latency, local_latency) = (node.attrs.latency()?, local.attrs.latency()?);
    let read_bw = node.attrs.read_bw().zip(local.attrs.read_bw());
    if latency <= local_latency && read_bw.is_none_or(|(far, near)| far >= near) {
        return None;
    }
    let bandwidth = read_bw.map(|(far, near)| format!(", read {far} MiB/s against {near}")).unwrap_or_default();
    Some(Class {
        kind: PoolKind::RemoteDram,
        inferred: Some(format!(
            "far DRAM (another socket's, or an expander's): no CPUs or subtype; in the kernel's memory tier \
             {tier} with local DRAM (node {}); HMAT latency {latency} ns against {local_latency}{bandwidth}",
            local.os_index
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::{MemAttrs, Source};

    fn node(os_index: u32, cpus: usize, capacity_mib: u64, tier: u32, latency: u64, read_bw: u64) -> NumaNode {
        NumaNode {
            os_index,
            capacity: capacity_mib << 20,
            cpus,
            package: Some(0),
            locality: Some("0-1".into()),
            subtype: None,
            kind: PoolKind::Unknown,
            inferred: None,
            kmem_dax: None,
            kernel_tier: Some(tier),
            memory_side_cache: None,
            attrs: MemAttrs { read_bandwidth_mibps: Some(read_bw), latency_ns: Some(latency), ..MemAttrs::default() },
        }
    }

    /// The QEMU guest's layout, as its kernel and hwloc 2.9 showed it: a CPU-less node
    /// with no subtype, in DRAM's kernel tier, slower by HMAT. It was "unknown" (pool
    /// `node1`) before this rule.
    #[test]
    fn a_cpu_less_node_in_drams_kernel_tier_and_slower_by_hmat_is_far_dram() {
        let mut pmem = node(2, 0, 768, 22, 305, 37600);
        pmem.subtype = Some("NVM".into());
        let mut host = HostTopology {
            source: Source::ThisHost,
            packages: 1,
            cpus: 2,
            home_package: Some(0),
            nodes: vec![node(0, 2, 1536, 4, 102, 105600), node(1, 0, 512, 4, 140, 34000), pmem],
            cpu_model: None,
            virtual_machine: true,
        };
        host.classify();
        let kinds: Vec<PoolKind> = host.nodes.iter().map(|n| n.kind).collect();
        assert_eq!(kinds, vec![PoolKind::Dram, PoolKind::RemoteDram, PoolKind::Pmem]);
        let why = host.nodes[1].inferred.as_deref().unwrap_or_default();
        assert!(why.contains("memory tier 4") && why.contains("140 ns against 102"), "{why}");
        assert_eq!(host.nodes[2].inferred, None, "hwloc named node 2");

        // In a tier of its own, or no slower than local DRAM, it stays unknown: the
        // evidence does not say what it is.
        host.nodes[1].kernel_tier = Some(22);
        host.classify();
        assert_eq!(host.nodes[1].kind, PoolKind::Unknown);
        host.nodes[1] = node(1, 0, 512, 4, 102, 105600);
        host.classify();
        assert_eq!(host.nodes[1].kind, PoolKind::Unknown);
    }
}
