//! What hwloc says about a host's memory, read into the plain data of `topology.rs`
//! (live, or from an XML export), so the rest of the crate (and the tests) never touch
//! hwloc objects.

use crate::HostError;
use crate::topology::{HostTopology, MemAttrs, NumaNode, TopologySource};
use crate::xml_guard::{Bitmap, check_xml};
use hwlocality::Topology;
use hwlocality::memory::attribute::MemoryAttribute;
use hwlocality::object::TopologyObject;
use hwlocality::object::attributes::ObjectAttributes;
use hwlocality::object::types::ObjectType;
use hwlocality::topology::builder::{TopologyBuilder, TypeFilter};
use placer_pools::PoolKind;
use std::path::Path;

impl HostTopology {
    /// The topology of the machine this process runs on.
    pub fn this_host() -> Result<(HostTopology, Topology), HostError> {
        let hwloc_err = |reason: String| HostError::Hwloc { what: "this host".into(), reason };
        let topology = keep_memory_caches(Topology::builder())
            .map_err(hwloc_err)?
            .build()
            .map_err(|e| hwloc_err(e.to_string()))?;
        Ok((HostTopology::from_hwloc(&topology, TopologySource::ThisHost, ""), topology))
    }

    /// A topology exported with `lstopo --of xml` (hwloc 2.x format).
    pub fn from_xml_file(path: &Path) -> Result<HostTopology, HostError> {
        let bad = |reason: String| HostError::Topology { path: path.to_path_buf(), reason };
        if !path.is_file() {
            return Err(bad("no such file".into()));
        }
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        HostTopology::from_xml_str(&text, path)
    }

    /// A topology from the text of an hwloc 2.x XML export (`path` names it in messages).
    pub fn from_xml_str(text: &str, path: &Path) -> Result<HostTopology, HostError> {
        let bad = |reason: String| HostError::Topology { path: path.to_path_buf(), reason };
        if text.contains("<topology version=\"3.") {
            return Err(bad("hwloc 3.x XML; this build reads hwloc 2.x exports (lstopo --of xml from hwloc 2)".into()));
        }
        if !text.contains("<topology") {
            return Err(bad("not an hwloc XML export: no <topology> element".into()));
        }
        check_xml(text).map_err(bad)?;
        let builder = Topology::builder().from_xml(text).map_err(|e| bad(e.to_string()))?;
        let topology = keep_memory_caches(builder).map_err(bad)?.build().map_err(|_| {
            bad(format!(
                "hwloc rejected it as malformed (HWLOC_XML_VERBOSE=1 lstopo-no-graphics --input {} shows where)",
                path.display()
            ))
        })?;
        let host = HostTopology::from_hwloc(&topology, TopologySource::Xml { path: path.to_path_buf() }, text);
        if host.nodes.is_empty() {
            return Err(bad("it has no NUMA nodes".into()));
        }
        Ok(host)
    }

    fn from_hwloc(topology: &Topology, source: TopologySource, xml_text: &str) -> HostTopology {
        let packages: Vec<&TopologyObject> = topology.objects_with_type(ObjectType::Package).collect();
        // The first CPU's package, unless it has no NUMA node: then the first package in
        // CPU order that has one, else the first that has one at all (a process on that
        // CPU still runs, but all its memory is far; pool 0 must be the nearest there is).
        let with_memory: Vec<u64> = topology
            .objects_with_type(ObjectType::NUMANode)
            .filter_map(package_of)
            .map(|p| p.global_persistent_index())
            .collect();
        let first_pu = topology.objects_with_type(ObjectType::PU).next();
        let first = first_pu.and_then(|pu| package_of(pu)).or_else(|| packages.first().copied());
        let home = match first {
            Some(p) if !with_memory.is_empty() && !with_memory.contains(&p.global_persistent_index()) => topology
                .objects_with_type(ObjectType::PU)
                .filter_map(package_of)
                .find(|p| with_memory.contains(&p.global_persistent_index()))
                .or_else(|| packages.iter().copied().find(|p| with_memory.contains(&p.global_persistent_index()))),
            _ => first,
        };
        let os = |p: Option<&TopologyObject>| p.and_then(|p| p.os_index()).and_then(|i| u32::try_from(i).ok());
        let home_note = (os(home) != os(first)).then(|| {
            let name = |p: Option<u32>| p.map_or("?".to_string(), |i| format!("P#{i}"));
            format!(
                "home package {}: the first CPU's package ({}) has no NUMA node this process may use",
                name(os(home)),
                name(os(first))
            )
        });
        let initiator = home.and_then(|p| p.cpuset()).map(|c| c.clone_target());
        let attr = |a: MemoryAttribute<'_>, node: &TopologyObject| -> Option<u64> {
            let initiator = initiator.clone()?;
            a.value(Some(initiator.into()), node).ok().flatten()
        };
        let live = source == TopologySource::ThisHost;
        let kernel_tiers = if live { kernel_memory_tiers() } else { Vec::new() };
        let kmem = if live { kmem_dax_devices() } else { Vec::new() };
        // Knights Landing's MCDRAM in cache mode: hwloc shows it as an L3 cache of subtype
        // MemorySideCache over the nodes it caches, not as a MemCache above them.
        let side_caches: Vec<(Vec<usize>, u64)> = topology
            .objects_with_type(ObjectType::L3Cache)
            .filter(|o| o.subtype().is_some_and(|s| s.to_bytes() == b"MemorySideCache"))
            .map(|o| {
                let nodes = o.nodeset().map(|set| set.iter_set().map(usize::from).collect()).unwrap_or_default();
                let size = match o.attributes() {
                    Some(ObjectAttributes::Cache(c)) => c.size().map_or(0, |s| s.get()),
                    _ => 0,
                };
                (nodes, size)
            })
            .collect();
        let mut nodes: Vec<NumaNode> = topology
            .objects_with_type(ObjectType::NUMANode)
            .map(|n| {
                let capacity = match n.attributes() {
                    Some(ObjectAttributes::NUMANode(a)) => a.local_memory().map_or(0, |m| m.get()),
                    _ => 0,
                };
                let behind_cache = n.ancestors().take_while(|a| a.object_type() == ObjectType::MemCache).count() > 0;
                let os_index = n.os_index().and_then(|i| u32::try_from(i).ok()).unwrap_or(u32::MAX);
                let memory_side_cache =
                    behind_cache.then(|| memory_cache_size(&source, os_index, xml_text)).or_else(|| {
                        side_caches
                            .iter()
                            .find(|(nodes, _)| nodes.contains(&(os_index as usize)))
                            .map(|(_, size)| *size)
                    });
                NumaNode {
                    os_index,
                    capacity,
                    cpus: local_cpus(&source, n),
                    package: package_of(n).and_then(|p| p.os_index()).and_then(|i| u32::try_from(i).ok()),
                    locality: n.cpuset().map(|c| format_list(c.iter_set().map(usize::from))),
                    subtype: n.subtype().map(|s| s.to_string_lossy().into_owned()),
                    kind: PoolKind::Unknown,
                    inferred: None,
                    kmem_dax: kmem.iter().find(|(node, _)| *node == os_index).map(|(_, dev)| dev.clone()),
                    kernel_tier: kernel_tiers.iter().find(|(n, _)| *n == os_index).map(|(_, t)| *t),
                    memory_side_cache,
                    capacity_note: None,
                    attrs: MemAttrs {
                        bandwidth_mibps: attr(MemoryAttribute::bandwidth(topology), n),
                        read_bandwidth_mibps: attr(MemoryAttribute::read_bandwidth(topology), n),
                        write_bandwidth_mibps: attr(MemoryAttribute::write_bandwidth(topology), n),
                        latency_ns: attr(MemoryAttribute::latency(topology), n),
                        read_latency_ns: attr(MemoryAttribute::read_latency(topology), n),
                        write_latency_ns: attr(MemoryAttribute::write_latency(topology), n),
                    },
                }
            })
            .collect();
        if live {
            crate::capacity::cross_check(&mut nodes, &crate::capacity::KernelMemory::read());
        }
        let cpu_model = packages.iter().find_map(|p| p.info("CPUModel")).map(|s| s.to_string_lossy().into_owned());
        let mut host = HostTopology {
            source,
            packages: packages.len() as u32,
            cpus: topology.cpuset().weight().unwrap_or(0),
            home_package: os(home),
            home_note,
            nodes,
            cpu_model,
            virtual_machine: live && hypervisor_flag(),
        };
        host.classify();
        host
    }
}

/// The size of the memory-side cache in front of node `os_index`. hwlocality does not
/// expose MemCache attributes, so this asks the kernel (live host) or the XML itself.
fn memory_cache_size(source: &TopologySource, os_index: u32, xml_text: &str) -> u64 {
    match source {
        TopologySource::ThisHost => {
            let path = format!("/sys/devices/system/node/node{os_index}/memory_side_cache/index1/size");
            std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
        }
        TopologySource::Xml { .. } => xml_text
            .split("<object type=\"MemCache\"")
            .skip(1)
            .find_map(|object| {
                let head = object.split('>').next()?;
                let nodeset = Bitmap::parse(xml_attr(head, "nodeset")?).ok()?;
                nodeset.bit(os_index as usize).then(|| xml_attr(head, "cache_size")?.parse().ok()).flatten()
            })
            .unwrap_or(0),
    }
}

fn xml_attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = tag[start..].find('"')?;
    Some(&tag[start..start + len])
}

/// hwloc drops memory-side caches by default; 2LM detection needs them.
fn keep_memory_caches(builder: TopologyBuilder) -> Result<TopologyBuilder, String> {
    builder.with_type_filter(ObjectType::MemCache, TypeFilter::KeepAll).map_err(|e| e.to_string())
}

/// CPUs local to a node. hwloc gives a CPU-less node the cpuset of the object it hangs
/// from, so on this host the kernel's own list is asked; for an XML topology a node
/// whose subtype names a device technology (NVM, HBM, CXL-DRAM, ...) is taken to be
/// CPU-less, as it is on every platform that has one.
fn local_cpus(source: &TopologySource, node: &TopologyObject) -> usize {
    let hwloc_weight = node.cpuset().and_then(|c| c.weight()).unwrap_or(0);
    match source {
        TopologySource::ThisHost => node
            .os_index()
            .and_then(|i| std::fs::read_to_string(format!("/sys/devices/system/node/node{i}/cpulist")).ok())
            .map_or(hwloc_weight, |list| count_cpu_list(list.trim())),
        TopologySource::Xml { .. } => match node.subtype().map(|s| s.to_string_lossy().to_ascii_uppercase()) {
            Some(s) if s != "DRAM" => 0,
            _ => hwloc_weight,
        },
    }
}

/// Counts the CPUs in a kernel cpu list such as `0-3,8,10-11`.
fn count_cpu_list(list: &str) -> usize {
    parse_list(list).len()
}

/// The members of a kernel list such as `0-3,8,10-11` (CPUs or NUMA nodes).
fn parse_list(list: &str) -> Vec<u32> {
    list.split(',')
        .filter(|part| !part.is_empty())
        .flat_map(|part| match part.split_once('-') {
            Some((a, b)) => match (a.parse::<u32>(), b.parse::<u32>()) {
                (Ok(a), Ok(b)) if b >= a => (a..=b).collect(),
                _ => Vec::new(),
            },
            None => part.parse::<u32>().into_iter().collect(),
        })
        .collect()
}

/// A kernel-style list of indices: `0-3,8`.
fn format_list(indices: impl Iterator<Item = usize>) -> String {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for i in indices {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == i => *end = i,
            _ => ranges.push((i, i)),
        }
    }
    let parts: Vec<String> =
        ranges.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
    parts.join(",")
}

/// (node, tier) for every node in the kernel's memory tiers; empty before Linux 6.1.
fn kernel_memory_tiers() -> Vec<(u32, u32)> {
    let Ok(entries) = std::fs::read_dir("/sys/devices/virtual/memory_tiering") else {
        return Vec::new();
    };
    let mut tiers = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(tier) = name.strip_prefix("memory_tier").and_then(|t| t.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(list) = std::fs::read_to_string(entry.path().join("nodelist")) {
            tiers.extend(parse_list(list.trim()).into_iter().map(|node| (node, tier)));
        }
    }
    tiers
}

/// (node, device) for every device-DAX device the `kmem` driver onlined as system RAM.
fn kmem_dax_devices() -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/sys/bus/dax/devices") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let driver = std::fs::read_link(path.join("driver")).ok();
        if driver.as_deref().and_then(Path::file_name).is_none_or(|d| d != "kmem") {
            continue;
        }
        let node = std::fs::read_to_string(path.join("target_node")).ok().and_then(|s| s.trim().parse().ok());
        if let Some(node) = node {
            found.push((node, entry.file_name().to_string_lossy().into_owned()));
        }
    }
    found.sort();
    found
}

/// True when /proc/cpuinfo lists the `hypervisor` CPU flag (set by every mainstream
/// hypervisor, QEMU's software CPU included).
fn hypervisor_flag() -> bool {
    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|info| {
        info.lines().any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"))
    })
}

fn package_of(object: &TopologyObject) -> Option<&TopologyObject> {
    object.ancestors().find(|a| a.object_type() == ObjectType::Package)
}

#[cfg(test)]
mod tests {
    use super::count_cpu_list;

    #[test]
    fn kernel_cpu_lists_are_counted() {
        assert_eq!(count_cpu_list("0-3,8,10-11"), 7);
        assert_eq!(count_cpu_list(""), 0);
        assert_eq!(count_cpu_list("5"), 1);
        assert_eq!(super::parse_list("0,2-3"), vec![0, 2, 3]);
        assert_eq!(super::format_list([0, 1, 2, 3, 8, 10, 11].into_iter()), "0-3,8,10-11");
    }
}
