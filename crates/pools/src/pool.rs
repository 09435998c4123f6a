//! One pool: identity, limits, backend, emulation and accounting.

use crate::alloc::numa::{NumaBinder, node_list};
use crate::emulation::Emulation;
use std::fmt;
use std::sync::Arc;

/// What kind of memory a pool is, as far as placement is concerned. Stored by its name
/// in every format (JSON, and the checkpoints' bincode, where it replaced a string), and
/// an unknown name is an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum PoolKind {
    /// DRAM local to the CPUs that run the model.
    Dram,
    /// DRAM on another socket.
    RemoteDram,
    /// High-bandwidth memory (HBM, MCDRAM).
    Hbm,
    /// Persistent memory used as volatile memory (Optane DCPMM).
    Pmem,
    /// Memory behind a CXL link (Type-3 expander).
    Cxl,
    /// Scratchpad memory.
    Spm,
    /// A CPU-less node whose technology neither hwloc nor the kernel named.
    Unknown,
}

impl PoolKind {
    pub fn name(self) -> &'static str {
        match self {
            PoolKind::Dram => "dram",
            PoolKind::RemoteDram => "remote-dram",
            PoolKind::Hbm => "hbm",
            PoolKind::Pmem => "pmem",
            PoolKind::Cxl => "cxl",
            PoolKind::Spm => "spm",
            PoolKind::Unknown => "unknown",
        }
    }

    pub fn parse(name: &str) -> Option<PoolKind> {
        [
            PoolKind::Dram,
            PoolKind::RemoteDram,
            PoolKind::Hbm,
            PoolKind::Pmem,
            PoolKind::Cxl,
            PoolKind::Spm,
            PoolKind::Unknown,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

impl From<PoolKind> for &'static str {
    fn from(kind: PoolKind) -> &'static str {
        kind.name()
    }
}

impl TryFrom<String> for PoolKind {
    type Error = String;

    fn try_from(name: String) -> Result<PoolKind, String> {
        PoolKind::parse(&name).ok_or_else(|| {
            format!("unknown pool kind '{name}' (kinds: dram, remote-dram, hbm, pmem, cxl, spm, unknown)")
        })
    }
}

impl fmt::Display for PoolKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a pool's bytes come from.
#[derive(Debug, Clone)]
pub enum Backend {
    /// The process heap, with no NUMA policy: the kernel's first-touch default.
    Heap,
    /// Anonymous pages bound to these NUMA nodes (hwloc `set_area_membind`, policy
    /// bind), with their placement checked after the first touch.
    Numa { nodes: Vec<u32>, binder: Arc<NumaBinder> },
    /// A libmemkind kind, and the NUMA nodes its pages must land on (the kmem-DAX nodes
    /// for `MEMKIND_DAX_KMEM`), checked like a NUMA pool's; empty: not checked.
    #[cfg(feature = "memkind")]
    Memkind { kind: Arc<crate::alloc::memkind::MemkindKind>, nodes: Vec<u32> },
}

impl Backend {
    pub fn describe(&self) -> String {
        match self {
            Backend::Heap => "heap (first-touch)".to_string(),
            Backend::Numa { nodes, .. } => format!("numa bind to node {}", node_list(nodes)),
            #[cfg(feature = "memkind")]
            Backend::Memkind { kind, nodes } if nodes.is_empty() => kind.label(),
            #[cfg(feature = "memkind")]
            Backend::Memkind { kind, nodes } => format!("{} on node {}", kind.label(), node_list(nodes)),
        }
    }

    /// The NUMA nodes this backend's pages are checked against (none: not checked).
    pub fn checked_nodes(&self) -> &[u32] {
        match self {
            Backend::Heap => &[],
            Backend::Numa { nodes, .. } => nodes,
            #[cfg(feature = "memkind")]
            Backend::Memkind { nodes, .. } => nodes,
        }
    }
}

/// A pool's identity and limits, plus running accounting.
#[derive(Debug, Clone)]
pub struct Pool {
    pub name: String,
    pub kind: PoolKind,
    /// Bytes this pool may hand out at once.
    pub capacity: u64,
    pub backend: Backend,
    /// `Some` when this pool's timing is emulated (a slow tier in DRAM, or a real
    /// node given a device's timing).
    pub emulation: Option<Emulation>,
    /// What the memory behind the backend is, as the host knows it: "DRAM",
    /// "PMEM, kmem-DAX dax0.0". Shown beside the backend, never used for decisions.
    pub memory: Option<String>,
    pub(crate) in_use: u64,
    pub(crate) peak: u64,
    pub(crate) pages: PageTally,
    /// Where a NUMA pool carves its buffers under a huge page.
    pub(crate) small: crate::alloc::small::Chunks,
}

/// Running count of where a NUMA pool's pages were found after allocation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PageTally {
    pub checked: u64,
    /// Pages found on a node outside the pool's node set.
    pub elsewhere: u64,
    /// Pages the kernel could not report (not present).
    pub unknown: u64,
}

impl PageTally {
    pub(crate) fn add(&mut self, placement: &crate::alloc::numa::PagePlacement) {
        self.checked += placement.queried;
        self.elsewhere += placement.elsewhere;
        self.unknown += placement.unknown;
    }

    /// Pages found where they belong.
    pub fn verified(&self) -> u64 {
        self.checked - self.elsewhere - self.unknown
    }
}

impl Pool {
    /// A heap-backed pool with no emulation.
    pub fn new(name: &str, kind: PoolKind, capacity: u64) -> Pool {
        Pool {
            name: name.to_string(),
            kind,
            capacity,
            backend: Backend::Heap,
            emulation: None,
            memory: None,
            in_use: 0,
            peak: 0,
            pages: PageTally::default(),
            small: crate::alloc::small::Chunks::default(),
        }
    }

    pub fn with_backend(mut self, backend: Backend) -> Pool {
        self.backend = backend;
        self
    }

    pub fn with_memory(mut self, memory: String) -> Pool {
        self.memory = Some(memory);
        self
    }

    pub fn with_emulation(mut self, emulation: Emulation) -> Pool {
        self.emulation = Some(emulation);
        self
    }

    pub fn in_use(&self) -> u64 {
        self.in_use
    }

    /// The most bytes this pool has had in use at once.
    pub fn peak(&self) -> u64 {
        self.peak
    }

    /// Where this pool's pages were found, summed over every allocation so far.
    pub fn page_tally(&self) -> PageTally {
        self.pages
    }

    pub fn is_emulated(&self) -> bool {
        self.emulation.is_some()
    }

    /// Where this pool's data really is: `numa bind to node 2 (pmem, kmem-DAX dax0.0)`.
    pub fn location(&self) -> String {
        let memory = self.memory.as_ref().map(|m| format!(" ({m})")).unwrap_or_default();
        format!("{}{memory}", self.backend.describe())
    }

    /// One line saying what this pool really is, never leaving emulation implicit.
    pub fn describe(&self) -> String {
        match &self.emulation {
            Some(e) => format!(
                "{} EMULATED as {} (data via {}; +{:.3} ns/B read, +{:.3} ns/B written)",
                self.kind,
                e.label(),
                self.location(),
                e.read_extra_ns_per_byte,
                e.write_extra_ns_per_byte
            ),
            None => format!("{}, real memory via {}", self.kind, self.location()),
        }
    }
}
