//! Node capacities cross-checked against the kernel. hwloc reads each node's size from
//! sysfs once; the kernel's own figures can disagree: a virtual machine whose node grows
//! as memory is plugged in (virtio-mem, a balloon) shows a node smaller than
//! /proc/meminfo's total, and a sandbox may show a sysfs that is not the machine's. Every
//! budget is checked against these figures, so a disagreement is resolved here, and the
//! figure used is said, with why, on the node ([`crate::NumaNode::capacity_note`]).

use crate::topology::NumaNode;

/// What the kernel says: each node's `MemTotal` from
/// /sys/devices/system/node/node<i>/meminfo, and /proc/meminfo's `MemTotal`, in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KernelMemory {
    pub nodes: Vec<(u32, u64)>,
    pub total: Option<u64>,
}

impl KernelMemory {
    /// This host's figures; whatever cannot be read is left out.
    pub(crate) fn read() -> KernelMemory {
        let nodes = std::fs::read_dir("/sys/devices/system/node")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let index = entry.file_name().to_str()?.strip_prefix("node")?.parse::<u32>().ok()?;
                let text = std::fs::read_to_string(entry.path().join("meminfo")).ok()?;
                Some((index, mem_total(&text)?))
            })
            .collect();
        let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| mem_total(&t));
        KernelMemory { nodes, total }
    }
}

/// A disagreement smaller than this share of the larger figure is rounding (huge pages
/// reserved at boot, a page or two of accounting) and is not reported.
const TOLERANCE: f64 = 0.02;

fn differ(a: u64, b: u64) -> bool {
    a.abs_diff(b) as f64 > TOLERANCE * a.max(b) as f64
}

/// Sets each node's capacity from the kernel's figures where they disagree with
/// hwloc's, and says which figure was used and why:
/// - a node's own meminfo wins over hwloc's reading of it (the node changed since, or
///   hwloc read another sysfs);
/// - with one node holding memory, /proc/meminfo's total wins over the node's figure:
///   every page the kernel has is that node's;
/// - with several, the nodes' figures stand (nothing says which node holds the
///   difference), and each node says so.
pub(crate) fn cross_check(nodes: &mut [NumaNode], kernel: &KernelMemory) {
    let fmt = placer_units::fmt_bytes;
    for node in nodes.iter_mut() {
        let Some(&(_, sysfs)) = kernel.nodes.iter().find(|(i, _)| *i == node.os_index) else { continue };
        if differ(node.capacity, sysfs) {
            node.capacity_note = Some(format!(
                "capacity {} from the kernel's node{}/meminfo, which hwloc read as {}",
                fmt(sysfs),
                node.os_index,
                fmt(node.capacity)
            ));
            node.capacity = sysfs;
        }
    }
    let Some(total) = kernel.total else { return };
    let sum: u64 = nodes.iter().map(|n| n.capacity).sum();
    if !differ(sum, total) {
        return;
    }
    let with_memory: Vec<usize> = (0..nodes.len()).filter(|&i| nodes[i].capacity > 0).collect();
    if let [only] = with_memory[..] {
        let node = &mut nodes[only];
        node.capacity_note = Some(format!(
            "capacity {} from /proc/meminfo, not the {} that NUMA node {} reports: with one node every page \
             the kernel has is its (a VM's node that grows as memory is plugged in, or a sandbox's sysfs, \
             shows less)",
            fmt(total),
            fmt(node.capacity),
            node.os_index
        ));
        node.capacity = total;
        return;
    }
    for node in nodes.iter_mut().filter(|n| n.capacity > 0) {
        let note = format!(
            "capacity {} as NUMA node {} reports it; the nodes add up to {}, /proc/meminfo says {}, and nothing \
             says which node holds the difference",
            fmt(node.capacity),
            node.os_index,
            fmt(sum),
            fmt(total)
        );
        node.capacity_note = Some(match node.capacity_note.take() {
            Some(first) => format!("{first}; {note}"),
            None => note,
        });
    }
}

/// `MemTotal:` (or `Node N MemTotal:`) in kB, as bytes.
fn mem_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.contains("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().rev().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::MemAttrs;
    use placer_pools::PoolKind;

    fn node(os_index: u32, gib: u64) -> NumaNode {
        NumaNode {
            os_index,
            capacity: gib << 30,
            cpus: 2,
            package: Some(0),
            locality: None,
            subtype: None,
            kind: PoolKind::Dram,
            inferred: None,
            kmem_dax: None,
            kernel_tier: None,
            memory_side_cache: None,
            capacity_note: None,
            attrs: MemAttrs::default(),
        }
    }

    #[test]
    fn the_kernels_own_figures_are_parsed() {
        assert_eq!(mem_total("MemTotal:       24684084 kB\nMemFree: 1 kB\n"), Some(24684084 * 1024));
        assert_eq!(mem_total("Node 0 MemTotal:        6121676 kB\n"), Some(6121676 * 1024));
        assert_eq!(mem_total("nothing"), None);
    }

    /// The KVM guest of the issue: hwloc (and the node's meminfo) said 4.3 GiB,
    /// /proc/meminfo 126 GiB.
    #[test]
    fn one_node_takes_proc_meminfos_total_and_says_so() {
        let mut nodes = vec![NumaNode { capacity: 4_617_089_843, ..node(0, 0) }];
        let kernel = KernelMemory { nodes: vec![(0, 4_617_089_843)], total: Some(126 << 30) };
        cross_check(&mut nodes, &kernel);
        assert_eq!(nodes[0].capacity, 126 << 30);
        let note = nodes[0].capacity_note.as_deref().unwrap_or_default();
        assert!(
            note.contains("from /proc/meminfo") && note.contains("126.0 GiB") && note.contains("4.3 GiB"),
            "{note}"
        );
    }

    #[test]
    fn agreement_within_rounding_says_nothing() {
        let mut nodes = vec![node(0, 64), node(1, 64)];
        let kernel = KernelMemory { nodes: vec![(0, 64 << 30), (1, (64 << 30) - (100 << 20))], total: Some(128 << 30) };
        cross_check(&mut nodes, &kernel);
        assert!(nodes.iter().all(|n| n.capacity_note.is_none()));
        assert_eq!(nodes[1].capacity, 64 << 30, "hwloc's figure stands within rounding");
    }

    #[test]
    fn a_nodes_own_meminfo_wins_and_several_nodes_say_the_total_differs() {
        let mut nodes = vec![node(0, 32), node(1, 64)];
        let kernel = KernelMemory { nodes: vec![(0, 48 << 30)], total: Some(200 << 30) };
        cross_check(&mut nodes, &kernel);
        assert_eq!((nodes[0].capacity, nodes[1].capacity), (48 << 30, 64 << 30));
        let first = nodes[0].capacity_note.as_deref().unwrap_or_default();
        assert!(
            first.contains("node0/meminfo, which hwloc read as 32.0 GiB") && first.contains("200.0 GiB"),
            "{first}"
        );
        let second = nodes[1].capacity_note.as_deref().unwrap_or_default();
        assert!(second.contains("add up to 112.0 GiB") && second.contains("which node holds"), "{second}");
    }
}
