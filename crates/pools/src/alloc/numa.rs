//! NUMA-bound regions: anonymous pages bound to a node set through hwloc, touched
//! once, then asked where they really are (`move_pages` in query mode).

use crate::PoolError;
use hwlocality::Topology;
use hwlocality::memory::binding::{MemoryBindingFlags, MemoryBindingPolicy};
use hwlocality::memory::nodeset::NodeSet;
use hwlocality::object::types::ObjectType;
use memmap2::MmapMut;
use std::collections::BTreeMap;
use std::fmt;

/// Binds memory on the live host. Holds the host's topology, which hwloc needs for
/// every binding call.
pub struct NumaBinder {
    topology: Topology,
    nodes: Vec<u32>,
}

impl fmt::Debug for NumaBinder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NumaBinder").field("nodes", &self.nodes).finish_non_exhaustive()
    }
}

impl NumaBinder {
    /// A binder for the machine this process runs on. A topology loaded from XML
    /// describes some other machine and cannot bind anything here.
    pub fn new(topology: Topology) -> Result<NumaBinder, PoolError> {
        let unavailable = |reason: &str| PoolError::BackendUnavailable {
            backend: "NUMA binding".to_string(),
            reason: reason.to_string(),
        };
        if !topology.is_this_system() {
            return Err(unavailable("the topology was loaded from a file and describes another machine"));
        }
        let supported = topology.feature_support().memory_binding().is_some_and(|m| m.set_area());
        if !supported {
            return Err(unavailable("hwloc reports that this system cannot bind memory areas"));
        }
        let nodes = topology
            .objects_with_type(ObjectType::NUMANode)
            .filter_map(|n| n.os_index().and_then(|i| u32::try_from(i).ok()))
            .collect();
        Ok(NumaBinder { topology, nodes })
    }

    /// The OS indices of this host's NUMA nodes.
    pub fn nodes(&self) -> &[u32] {
        &self.nodes
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Maps `len` bytes, binds them to `nodes`, touches every page so the kernel places
    /// it now, and reports where the pages landed.
    pub(crate) fn allocate(
        &self,
        pool: &str,
        nodes: &[u32],
        len: usize,
    ) -> Result<(MappedRegion, PagePlacement), PoolError> {
        let bind_err = |reason: String| PoolError::Bind {
            pool: pool.to_string(),
            nodes: node_list(nodes),
            bytes: len as u64,
            reason,
        };
        if let Some(missing) = nodes.iter().find(|n| !self.nodes.contains(n)) {
            return Err(bind_err(format!(
                "NUMA node {missing} does not exist on this host (nodes: {})",
                node_list(&self.nodes)
            )));
        }
        // A zero-length map is an error; keep one page so every buffer has an address.
        // Buffers of a huge page or more start on a huge-page boundary (the map is that
        // much longer; the slack is never touched) so that all of them can be backed by
        // huge pages, not only the aligned middle of each.
        let offset_slack = if len >= HUGE_PAGE { HUGE_PAGE } else { 0 };
        let map = MmapMut::map_anon(len.max(1) + offset_slack)
            .map_err(|_| PoolError::OutOfMemory { pool: pool.to_string(), requested: len as u64 })?;
        // Transparent huge pages where the host allows them on request (`madvise`
        // mode). With 4 KiB pages each buffer's physical pages are scattered anew, and
        // the same kernel on the same data ran 10% faster or slower depending on which
        // buffers it got: a profile's buffers and a plan's arena then disagreed with
        // each other by more than the host's noise (docs/running.md). A host that
        // refuses (THP off, or no THP support) keeps 4 KiB pages, which work as they
        // always did, so a refusal is not an error; `placer topo` says which.
        let _ = map.advise(memmap2::Advice::HugePage);
        let mut set = NodeSet::new();
        for &n in nodes {
            set.set(n as usize);
        }
        self.topology
            .bind_memory_area::<[u8], _>(&map[..], &set, MemoryBindingPolicy::Bind, MemoryBindingFlags::STRICT)
            .map_err(|e| bind_err(e.to_string()))?;
        let mut region = MappedRegion { map, len };
        let placement = PagePlacement::touch_and_query(region.bytes_mut(), nodes);
        Ok((region, placement))
    }
}

#[derive(Debug)]
pub(crate) struct MappedRegion {
    map: MmapMut,
    len: usize,
}

impl MappedRegion {
    /// Where the buffer starts in the map: the first huge-page boundary when the map
    /// has the slack for it (computed, not stored, to keep every `Buffer` small).
    fn offset(&self) -> usize {
        let slack = self.map.len() - self.len.max(1);
        self.map.as_ptr().align_offset(HUGE_PAGE).min(slack)
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        let offset = self.offset();
        &self.map[offset..offset + self.len]
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        let offset = self.offset();
        &mut self.map[offset..offset + self.len]
    }
}

/// The huge page size placer aligns large buffers to (x86-64's and arm64's usual 2 MiB).
pub const HUGE_PAGE: usize = 2 << 20;

/// The bytes of a `len`-byte buffer that huge pages can back: it starts on a huge-page
/// boundary (see `allocate`), and its tail past the last whole one gets small pages.
pub fn whole_huge_pages(len: u64) -> u64 {
    len / HUGE_PAGE as u64 * HUGE_PAGE as u64
}

/// Where the pages of one buffer were found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PagePlacement {
    /// Pages asked about. Large buffers are sampled evenly, up to [`MAX_PAGES_QUERIED`].
    pub queried: u64,
    /// Pages found per NUMA node.
    pub per_node: BTreeMap<u32, u64>,
    /// Pages the kernel could not place (not present, or the query was refused).
    pub unknown: u64,
    /// Pages found on a node outside the requested set.
    pub elsewhere: u64,
}

pub const MAX_PAGES_QUERIED: usize = 1 << 16;

impl PagePlacement {
    /// Writes a zero to every page of `bytes` (zeroed memory the kernel has not
    /// placed yet, so nothing changes) so that each page is placed now, then asks where.
    pub(crate) fn touch_and_query(bytes: &mut [u8], wanted: &[u32]) -> PagePlacement {
        let page = page_size();
        for offset in (0..bytes.len()).step_by(page) {
            bytes[offset] = 0;
        }
        PagePlacement::query(bytes, wanted)
    }

    pub(crate) fn query(bytes: &[u8], wanted: &[u32]) -> PagePlacement {
        let page = page_size();
        let pages = bytes.len().div_ceil(page);
        let stride = pages.div_ceil(MAX_PAGES_QUERIED).max(1);
        let addresses: Vec<*const u8> = (0..pages).step_by(stride).map(|p| bytes[p * page..].as_ptr()).collect();
        let mut placement = PagePlacement { queried: addresses.len() as u64, ..PagePlacement::default() };
        match query_page_nodes(&addresses) {
            Ok(status) => {
                for s in status {
                    match u32::try_from(s) {
                        Ok(node) => {
                            *placement.per_node.entry(node).or_default() += 1;
                            if !wanted.contains(&node) {
                                placement.elsewhere += 1;
                            }
                        }
                        Err(_) => placement.unknown += 1,
                    }
                }
            }
            Err(_) => placement.unknown = placement.queried,
        }
        placement
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions; it only reads a configuration value.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

/// The NUMA node of each page, or a negative errno for a page that has none, from
/// `move_pages(2)` with no target nodes (query mode).
fn query_page_nodes(addresses: &[*const u8]) -> std::io::Result<Vec<i32>> {
    let mut status = vec![i32::MIN; addresses.len()];
    // SAFETY: pid 0 is this process; `addresses` holds `count` page addresses inside a
    // live mapping that outlives the call; a null `nodes` pointer selects query mode, in
    // which the kernel only writes `count` ints into `status`, which has that length.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0 as libc::c_long,
            addresses.len() as libc::c_ulong,
            addresses.as_ptr(),
            std::ptr::null::<i32>(),
            status.as_mut_ptr(),
            0 as libc::c_int,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(status)
}

/// NUMA nodes as the kernel's node lists spell them: `0,2`.
pub fn node_list(nodes: &[u32]) -> String {
    nodes.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// The host's transparent huge page mode (`always`, `madvise` or `never`), or `None`
/// when the kernel has no THP. Under `always` and `madvise` placer's NUMA-bound buffers
/// get huge pages where the kernel has them free; under `never`, 4 KiB pages.
pub fn transparent_huge_pages() -> Option<String> {
    let text = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let start = text.find('[')?;
    let end = start + text[start..].find(']')?;
    Some(text[start + 1..end].to_string())
}

/// The bytes of this process's anonymous memory on transparent huge pages
/// (`AnonHugePages` in `/proc/self/smaps_rollup`), or `None` when the kernel does not
/// say. Read before and after a buffer is first touched, the difference is what that
/// buffer got.
pub fn anon_huge_page_bytes() -> Option<u64> {
    parse_anon_huge_pages(&std::fs::read_to_string("/proc/self/smaps_rollup").ok()?)
}

fn parse_anon_huge_pages(text: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix("AnonHugePages:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_pages_are_read_from_the_rollup() {
        let text = "00400000-ffffffffff600000 ---p 00000000 00:00 0  [rollup]\nRss:  4202496 kB\n\
                    AnonHugePages:   4194304 kB\nShmemPmdMapped:        0 kB\n";
        assert_eq!(parse_anon_huge_pages(text), Some(4 << 30));
        assert_eq!(parse_anon_huge_pages("Rss: 12 kB\n"), None, "no such line");
        assert_eq!(parse_anon_huge_pages("AnonHugePages: lots\n"), None, "not a number");
        #[cfg(target_os = "linux")]
        assert!(anon_huge_page_bytes().is_some(), "Linux has had smaps_rollup since 4.14");
    }
}
