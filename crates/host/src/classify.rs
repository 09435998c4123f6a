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
//!   memory): a node with no subtype, no CPUs of its own, that HMAT says is slower to
//!   reach than the home DRAM node, and that the kernel keeps in DRAM's memory tier.
//!   Where no kernel tier is known (an XML export, a kernel before 6.1), HMAT alone
//!   decides, when it says the node is clearly slower: at most 4/5 of the home node's
//!   bandwidth, or at least 5/4 of its latency ([`CLEARLY_SLOWER`]). In an export, hwloc
//!   lends a CPU-less node its neighbour's CPUs, so there the CPU count is no evidence.

use crate::topology::{HostTopology, NumaNode, TopologySource};
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

impl HostTopology {
    /// Sets every node's `kind` (and `inferred`). An on-package tier inferred from an
    /// XML export loses the CPUs hwloc lent it from its neighbour.
    pub fn classify(&mut self) {
        let classes = classify(self);
        for (node, class) in self.nodes.iter_mut().zip(classes) {
            if class.inferred.is_some() && class.kind == PoolKind::Hbm {
                node.cpus = 0;
            }
            node.kind = class.kind;
            node.inferred = class.inferred;
        }
    }
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
    let live = topology.source == TopologySource::ThisHost;
    if node.cpus > 0 && live {
        return named(dram());
    }
    match far_dram(topology, node) {
        Some(class) => class,
        None if node.cpus > 0 => named(dram()),
        // In an export, a node under a package whose CPUs are all gone (offline, or
        // outside the cgroup) is still that package's memory: hwloc would otherwise have
        // lent it the package's CPUs.
        None if !live && node.package.is_some() => named(dram()),
        None => named(PoolKind::Unknown),
    }
}

/// How much slower HMAT must say a node is, with no kernel tier to back it, before it
/// is a tier of its own: a fifth less bandwidth, or a quarter more latency. Nodes of one
/// socket differ by a few per cent (sub-NUMA clusters); a far socket's or an expander's
/// differ by 30% and more.
const CLEARLY_SLOWER: f64 = 1.25;

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

/// A node with no subtype and no CPUs of its own (on a live host; an export cannot
/// tell), slower by HMAT than the home DRAM node: in the kernel's DRAM tier and slower
/// at all, or, with no kernel tier known, clearly slower ([`CLEARLY_SLOWER`]).
fn far_dram(topology: &HostTopology, node: &NumaNode) -> Option<Class> {
    let live = topology.source == TopologySource::ThisHost;
    if node.subtype.is_some() || live && node.cpus > 0 {
        return None;
    }
    // The home DRAM node: local, with CPUs, unnamed or named DRAM, and the fastest by
    // HMAT (in an export every node at the home package's locality has CPUs).
    let local = topology
        .nodes
        .iter()
        .filter(|n| n.os_index != node.os_index && n.cpus > 0 && topology.is_local(n))
        .filter(|n| n.subtype.as_deref().is_none_or(|s| s.eq_ignore_ascii_case("DRAM")))
        .filter(|n| n.attrs.latency().is_some() || n.attrs.read_bw().is_some())
        .min_by_key(|n| (std::cmp::Reverse(n.attrs.read_bw().unwrap_or(0)), n.attrs.latency().unwrap_or(u64::MAX)))?;
    let latency = node.attrs.latency().zip(local.attrs.latency());
    let read_bw = node.attrs.read_bw().zip(local.attrs.read_bw());
    let (slower, tier_note) = match (node.kernel_tier, local.kernel_tier) {
        (Some(tier), Some(dram_tier)) => {
            let slower = latency.is_some_and(|(far, near)| far > near) || read_bw.is_some_and(|(far, near)| far < near);
            (tier == dram_tier && slower, format!("in the kernel's memory tier {tier} with local DRAM"))
        }
        _ => {
            let clearly = |worse: u64, better: u64| worse as f64 >= CLEARLY_SLOWER * better as f64;
            let slower = latency.is_some_and(|(far, near)| clearly(far, near))
                || read_bw.is_some_and(|(far, near)| clearly(near, far));
            (slower, "no kernel memory tier; HMAT alone says it is clearly slower".to_string())
        }
    };
    if !slower {
        return None;
    }
    let latency = latency.map(|(far, near)| format!("; HMAT latency {far} ns against {near}")).unwrap_or_default();
    let bandwidth = read_bw.map(|(far, near)| format!(", read {far} MiB/s against {near}")).unwrap_or_default();
    Some(Class {
        kind: PoolKind::RemoteDram,
        inferred: Some(format!(
            "far DRAM (another socket's, or an expander's): no subtype{}; {tier_note} (node {}){latency}{bandwidth}",
            if live { " or CPUs" } else { "" },
            local.os_index
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::MemAttrs;

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
            capacity_note: None,
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
            source: TopologySource::ThisHost,
            packages: 1,
            cpus: 2,
            home_package: Some(0),
            home_note: None,
            nodes: vec![node(0, 2, 1536, 4, 102, 105600), node(1, 0, 512, 4, 140, 34000), pmem],
            cpu_model: None,
            virtual_machine: true,
        };
        host.classify();
        let kinds: Vec<PoolKind> = host.nodes.iter().map(|n| n.kind).collect();
        assert_eq!(kinds, vec![PoolKind::Dram, PoolKind::RemoteDram, PoolKind::Pmem]);
        let why = host.nodes[1].inferred.as_deref().unwrap_or_default();
        assert!(why.contains("memory tier 4") && why.contains("140 ns against 102"), "{why}");
        assert!(why.contains("no subtype or CPUs"), "{why}");
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

    /// The guest's export as lstopo wrote it: no kernel tiers, and hwloc lends node 1
    /// node 0's CPUs. HMAT alone decides: half the bandwidth is a tier of its own, a few
    /// per cent is not.
    #[test]
    fn in_an_export_hmat_alone_splits_a_clearly_slower_node_off() {
        let exported = |far: NumaNode| {
            let mut near = node(0, 2, 1536, 0, 10, 10000);
            near.kernel_tier = None;
            let mut host = HostTopology {
                source: TopologySource::Xml { path: "guest.xml".into() },
                packages: 1,
                cpus: 2,
                home_package: Some(0),
                home_note: None,
                nodes: vec![near, NumaNode { kernel_tier: None, ..far }],
                cpu_model: None,
                virtual_machine: false,
            };
            host.classify();
            (host.nodes[1].kind, host.nodes[1].inferred.clone().unwrap_or_default())
        };
        let (kind, why) = exported(node(1, 2, 512, 0, 20, 5000));
        assert_eq!(kind, PoolKind::RemoteDram, "{why}");
        assert!(why.contains("HMAT alone") && why.contains("read 5000 MiB/s against 10000"), "{why}");
        assert_eq!(exported(node(1, 2, 512, 0, 10, 5000)).0, PoolKind::RemoteDram, "bandwidth alone");
        assert_eq!(exported(node(1, 2, 512, 0, 13, 10000)).0, PoolKind::RemoteDram, "latency alone");
        assert_eq!(exported(node(1, 2, 512, 0, 11, 9000)), (PoolKind::Dram, String::new()), "within a fifth");
        let mut named = node(1, 2, 512, 0, 20, 5000);
        named.subtype = Some("DRAM".into());
        assert_eq!(exported(named).0, PoolKind::Dram, "hwloc's subtype wins");
    }
}
