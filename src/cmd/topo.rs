//! `placer topo [--probe] [--topology FILE.xml] [--host FILE] [--emulate ...] [--json]`

use crate::args::HostArgs;
use crate::table::{Table, bytes};
use placer_host::probe::PoolsProbe;
use placer_host::{DramBaseline, Host, LayoutOrigin, ProbeOptions, TopologySource};
use serde::Serialize;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    host: HostArgs,
    /// Measure every pool (read, write, copy, latency) and every pair of pools (copy),
    /// with all cores, and cache the figures for this host.
    #[arg(long)]
    probe: bool,
    /// Bytes per probe buffer, e.g. 512MiB; keep it well above the last-level cache.
    #[arg(long, default_value = "512MiB", value_parser = parse_size)]
    probe_bytes: u64,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
}

fn parse_size(text: &str) -> Result<u64, String> {
    placer_units::parse_bytes(text)
}

#[derive(Serialize)]
struct Output<'a> {
    host: &'a placer_host::HostLayout,
    fingerprint: &'a str,
    /// True when any pool is emulated: its figures are not measurements of the device.
    emulated: bool,
    baseline: Option<DramBaseline>,
    probe: Option<&'a PoolsProbe>,
    /// Whether `probe` was measured by this command or read from the cache.
    probe_cached: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut host = args.host.open()?;
    let (probe, probe_cached) = if args.probe {
        let options = ProbeOptions { bytes: args.probe_bytes, ..ProbeOptions::default() };
        let (probe, _) = host.probe(&options)?;
        (Some(probe), false)
    } else {
        let cached = host.cache.as_ref().and_then(|c| c.probe.clone());
        let matches = cached
            .as_ref()
            .is_some_and(|p| p.pools.iter().map(|x| &x.pool).eq(host.layout.pools.iter().map(|x| &x.name)));
        (cached.filter(|_| matches), true)
    };
    let baseline = host.cache.as_ref().map(|c| c.baseline);
    if args.json {
        let out = Output {
            host: &host.layout,
            fingerprint: &host.fingerprint,
            emulated: host.layout.any_emulated(),
            baseline,
            probe: probe.as_ref(),
            probe_cached,
        };
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
    } else {
        out!("{}", render(&host, baseline, probe.as_ref(), probe_cached))?;
    }
    Ok(())
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

fn render(host: &Host, baseline: Option<DramBaseline>, probe: Option<&PoolsProbe>, cached: bool) -> String {
    let layout = &host.layout;
    let topo = &layout.topology;
    let mut facts = Table::new(&["host", &describe_source(&topo.source)]);
    facts.row(vec![
        "machine".into(),
        format!(
            "{} package(s), {} CPU(s){}, {} NUMA node(s); fingerprint {}",
            topo.packages,
            topo.cpus,
            topo.cpu_model.as_deref().map(|m| format!(" ({m})")).unwrap_or_default(),
            topo.nodes.len(),
            host.fingerprint
        ),
    ]);
    if topo.virtual_machine {
        facts.row(vec![
            "virtual machine".into(),
            "the CPUs carry the hypervisor flag: every NUMA node is as fast as the hypervisor's memory behind it, \
             whatever hwloc and the firmware call it"
                .into(),
        ]);
    }
    facts.row(vec![
        "memory mode".into(),
        if layout.two_level_memory {
            "2LM (memory mode): memory sits behind a memory-side cache (Optane's DRAM, or KNL's MCDRAM \
             in cache mode) that is not placeable; only the pools below are"
                .into()
        } else {
            "flat: every tier is placeable".into()
        },
    ]);
    facts.row(vec![
        "pool layout".into(),
        match &layout.origin {
            LayoutOrigin::Discovered => "discovered: one pool per tier".into(),
            LayoutOrigin::HostFile { path, name } => format!("host file {} ('{name}')", path.display()),
        },
    ]);
    facts.row(vec!["tiers".into(), layout.tiers().iter().map(|k| k.to_string()).collect::<Vec<_>>().join(" > ")]);
    if matches!(topo.source, TopologySource::ThisHost) {
        facts.row(vec!["huge pages".into(), huge_pages(placer_pools::transparent_huge_pages().as_deref())]);
    }
    if let Some(b) = baseline {
        facts.row(vec![
            "DRAM baseline".into(),
            format!(
                "read {:.1} GB/s, write {:.1} GB/s, latency {:.0} ns ({} threads; measured here, cached in {})",
                b.read_gbps,
                b.write_gbps,
                b.latency_ns,
                b.threads,
                host.cache_path().display()
            ),
        ]);
    }
    let mut out = facts.render();

    out.push_str(
        "\nNUMA nodes (bandwidth and latency as published by the firmware (HMAT), seen from the home package)\n",
    );
    let mut nodes = Table::new(&[
        "node",
        "package",
        "CPUs",
        "capacity",
        "subtype",
        "kind",
        "onlined by",
        "kernel tier",
        "read MiB/s",
        "write MiB/s",
        "latency ns",
        "memory-side cache",
    ]);
    for n in &topo.nodes {
        nodes.row(vec![
            n.os_index.to_string(),
            opt(n.package),
            n.cpus.to_string(),
            bytes(n.capacity),
            opt(n.subtype.clone()),
            if n.inferred.is_some() { format!("{} (inferred)", n.kind) } else { n.kind.to_string() },
            opt(n.kmem_dax.as_ref().map(|d| format!("kmem-DAX {d}"))),
            opt(n.kernel_tier),
            opt(n.attrs.read_bw()),
            opt(n.attrs.write_bw()),
            opt(n.attrs.latency()),
            opt(n.memory_side_cache.map(bytes)),
        ]);
    }
    out.push_str(&nodes.render());
    for n in topo.nodes.iter() {
        if let Some(why) = &n.inferred {
            out.push_str(&format!("  inferred, node {}: {} is {why}\n", n.os_index, n.kind));
        }
    }
    if topo.nodes.iter().any(|n| n.inferred.is_some()) {
        out.push_str("  (an inference is not a measurement: name the pools in a host file, --host, to override it)\n");
    }

    out.push_str("\npools\n");
    let mut pools = Table::new(&["pool", "kind", "capacity", "backend", "notes"]);
    for p in &layout.pools {
        let kind = match &p.device {
            Some(d) => format!("{} (EMULATED: {})", p.kind, d.label()),
            None => p.kind.to_string(),
        };
        pools.row(vec![p.name.clone(), kind, bytes(p.capacity), backend(&p.backend), p.notes.join("; ")]);
    }
    out.push_str(&pools.render());

    if let Some(probe) = probe {
        out.push_str(&format!(
            "\nmeasured per pool ({} threads; median [min-max] of repeats{})\n",
            probe.threads,
            if cached { "; from the cache, rerun with --probe to refresh" } else { "" }
        ));
        let mut t =
            Table::new(&["pool", "what", "read GB/s", "write GB/s", "copy GB/s", "latency ns", "pages on its nodes"]);
        for p in &probe.pools {
            t.row(vec![
                p.pool.clone(),
                match &p.emulated_as {
                    Some(d) => format!("EMULATED {d}: DRAM + modelled waits"),
                    None => "measured".into(),
                },
                spread(p.read_gbps),
                spread(p.write_gbps),
                spread(p.copy_gbps),
                format!("{:.0}", p.latency_ns.median),
                if p.pages_checked == 0 {
                    "-".into()
                } else {
                    format!("{}/{}", p.pages_checked - p.pages_elsewhere, p.pages_checked)
                },
            ]);
        }
        out.push_str(&t.render());
        out.push_str("\ncopy between pools (GB/s of bytes moved; the solver's movement cost)\n");
        let mut t = Table::new(&["from", "to", "GB/s"]);
        for c in &probe.copies {
            t.row(vec![c.from.clone(), c.to.clone(), spread(c.gbps)]);
        }
        out.push_str(&t.render());
    } else if matches!(topo.source, TopologySource::ThisHost) {
        out.push_str("\nno measurements yet for this layout: run `placer topo --probe`\n");
    }
    for p in layout.pools.iter().filter(|p| p.is_emulated()) {
        if let Some(d) = &p.device {
            out.push_str(&format!(
                "\nEMULATED: pool '{}' is not real {} memory. Its data is bound to node {} and every kernel \
                 that touches it waits the extra time the '{}' model predicts ({}), in the {} wait model \
                 (docs/hosts.md).\n",
                p.name,
                p.kind,
                emulated_nodes(&p.backend),
                d.name,
                d.source,
                d.wait
            ));
        }
    }
    out
}

fn emulated_nodes(b: &placer_host::BackendSpec) -> String {
    match b {
        placer_host::BackendSpec::Emulated { nodes, .. } => placer_pools::node_list(nodes),
        _ => "-".into(),
    }
}

fn spread(s: placer_host::bandwidth::Spread) -> String {
    format!("{:.1} [{:.1}-{:.1}]", s.median, s.min, s.max)
}

/// What the host's transparent huge page mode means for placer's buffers.
fn huge_pages(mode: Option<&str>) -> String {
    match mode {
        Some(m @ ("always" | "madvise")) => {
            format!(
                "transparent huge pages '{m}': NUMA-bound buffers get huge pages when the kernel has them free (those under 2 MiB share them)"
            )
        }
        Some(m) => format!(
            "transparent huge pages '{m}': every buffer has 4 KiB pages, and kernel times vary more from one buffer to the next"
        ),
        None => "no transparent huge pages in this kernel: every buffer has 4 KiB pages".into(),
    }
}

fn describe_source(source: &TopologySource) -> String {
    match source {
        TopologySource::ThisHost => "this machine (live hwloc discovery)".into(),
        TopologySource::Xml { path } => format!("{} (hwloc XML export: planning only)", path.display()),
    }
}

fn backend(b: &placer_host::BackendSpec) -> String {
    use placer_host::BackendSpec as B;
    let nodes = placer_pools::node_list;
    match b {
        B::Numa { nodes: n } => format!("numa bind node {}", nodes(n)),
        B::Heap => "heap".into(),
        B::Emulated { nodes: n, .. } => format!("numa bind node {} + waits", nodes(n)),
        B::MemkindDaxKmem => "memkind MEMKIND_DAX_KMEM".into(),
        B::MemkindPmem { dir, max_bytes } => format!("memkind pmem {} (max {})", dir.display(), bytes(*max_bytes)),
        B::MemkindDefault => "memkind default".into(),
    }
}
