//! A host's memory as plain data: NUMA nodes with their capacity, locality, technology,
//! HMAT attributes and memory-side caches. Made by `discover.rs` from hwloc (live or an
//! XML export), given kinds by `classify.rs`, grouped into pools by `layout.rs`; nothing
//! here touches hwloc.

use placer_pools::PoolKind;
use serde::Serialize;
use std::path::PathBuf;

/// Where a topology came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TopologySource {
    /// The machine this process runs on.
    ThisHost,
    /// An hwloc XML export of some other machine: pools can be listed but not used.
    Xml { path: PathBuf },
}

/// Memory attributes of one node as seen from the home package's CPUs (HMAT, or
/// hwloc's own defaults). Bandwidths in MiB/s and latencies in ns, as hwloc gives them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MemAttrs {
    pub bandwidth_mibps: Option<u64>,
    pub read_bandwidth_mibps: Option<u64>,
    pub write_bandwidth_mibps: Option<u64>,
    pub latency_ns: Option<u64>,
    pub read_latency_ns: Option<u64>,
    pub write_latency_ns: Option<u64>,
}

impl MemAttrs {
    /// Read bandwidth, else the average, in MiB/s.
    pub fn read_bw(&self) -> Option<u64> {
        self.read_bandwidth_mibps.or(self.bandwidth_mibps)
    }

    pub fn write_bw(&self) -> Option<u64> {
        self.write_bandwidth_mibps.or(self.bandwidth_mibps)
    }

    pub fn latency(&self) -> Option<u64> {
        self.read_latency_ns.or(self.latency_ns)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NumaNode {
    pub os_index: u32,
    pub capacity: u64,
    /// How many CPUs (PUs) are local to this node; 0 for PMEM, CXL and HBM nodes.
    pub cpus: usize,
    /// The package this node is attached to, when it is attached below one.
    pub package: Option<u32>,
    /// The CPUs this node is local to, as hwloc gives them (the cpuset of the object it
    /// hangs from, so a CPU-less node shares its neighbour's): nodes with the same
    /// locality sit at the same place in the machine.
    pub locality: Option<String>,
    /// hwloc's subtype (DRAM, HBM, NVM, CXL-DRAM, SPM, MCDRAM, GPUMemory), if known.
    pub subtype: Option<String>,
    /// What this node is, from the subtype, else inferred (see `inferred`).
    pub kind: PoolKind,
    /// Why `kind` was inferred, when no subtype named it (classify.rs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inferred: Option<String>,
    /// The device-DAX device whose memory the kernel's `kmem` driver onlined as this
    /// node (`daxctl reconfigure-device --mode=system-ram`), e.g. `dax0.0`. Live hosts
    /// only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kmem_dax: Option<String>,
    /// The kernel's memory tier (`/sys/devices/virtual/memory_tiering`, Linux 6.1+):
    /// lower is faster; DRAM is usually tier 4, PMEM and CXL nodes sit in higher ones.
    /// Live hosts only.
    pub kernel_tier: Option<u32>,
    /// A memory-side cache in front of this node (2LM / cache mode): `Some(bytes)`, or
    /// `Some(0)` when its size is not known.
    pub memory_side_cache: Option<u64>,
    /// Where `capacity` came from when the kernel disagreed with hwloc, and why that
    /// figure was used (capacity.rs). Live hosts only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_note: Option<String>,
    pub attrs: MemAttrs,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostTopology {
    pub source: TopologySource,
    pub packages: u32,
    pub cpus: usize,
    /// The package whose CPUs run the model: the one holding the first CPU, or, when
    /// that package has no memory this process may use (its node offline, or outside a
    /// cgroup's cpuset), the first package in CPU order that has. Nodes of other packages
    /// are "remote".
    pub home_package: Option<u32>,
    /// Why the home package is not the first CPU's, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub home_note: Option<String>,
    pub nodes: Vec<NumaNode>,
    /// CPU model name, when hwloc reports it.
    pub cpu_model: Option<String>,
    /// The CPUs carry the `hypervisor` flag: this is a virtual machine, and its NUMA
    /// nodes are as fast as the host's memory behind them, whatever they are called.
    /// Live hosts only.
    #[serde(default)]
    pub virtual_machine: bool,
}

impl HostTopology {
    /// True when some node sits behind a memory-side cache: DRAM caching the slow tier
    /// (Optane Memory Mode, "2LM"), or MCDRAM caching DDR (Knights Landing's cache mode,
    /// which hwloc shows as an L3 cache of subtype MemorySideCache). The cache is not a
    /// placeable tier.
    pub fn two_level_memory(&self) -> bool {
        self.nodes.iter().any(|n| n.memory_side_cache.is_some())
    }

    /// True when the node belongs to the home package (or the host has only one).
    pub fn is_local(&self, node: &NumaNode) -> bool {
        node.package.is_none() || node.package == self.home_package || self.packages <= 1
    }
}
