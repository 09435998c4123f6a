//! [`Host`]: a layout plus what is needed to use it on this machine.

use crate::HostError;
use crate::cache::{self, DramBaseline, HostCache};
use crate::hostfile;
use crate::layout::{BackendSpec, EmulateChoice, HostLayout, PoolSpec};
use crate::probe::{self, PoolsProbe, ProbeOptions};
use crate::topology::{HostTopology, TopologySource};
use placer_pools::{Backend, NumaBinder, Pool, PoolError, PoolId, PoolKind, PoolSet};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct HostOptions {
    /// An hwloc XML export to plan for instead of this machine.
    pub topology_xml: Option<PathBuf>,
    /// A host file that replaces the discovered pool layout.
    pub host_file: Option<PathBuf>,
    pub emulate: EmulateChoice,
    pub cache_dir: PathBuf,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            topology_xml: None,
            host_file: None,
            emulate: EmulateChoice::Default,
            cache_dir: cache::default_dir(),
        }
    }
}

#[derive(Debug)]
pub struct Host {
    pub layout: HostLayout,
    pub fingerprint: String,
    pub cache: Option<HostCache>,
    cache_dir: PathBuf,
    /// Present only for the live host: binding needs the real topology.
    binder: Option<Result<Arc<NumaBinder>, String>>,
}

impl Host {
    pub fn open(options: &HostOptions) -> Result<Host, HostError> {
        let (topology, binder) = match &options.topology_xml {
            Some(path) => (HostTopology::from_xml_file(path)?, None),
            None => {
                let (topology, hwloc) = HostTopology::this_host()?;
                let binder = NumaBinder::new(hwloc).map(Arc::new).map_err(|e| e.to_string());
                (topology, Some(binder))
            }
        };
        let fingerprint = cache::fingerprint(&topology);
        let layout = match &options.host_file {
            Some(path) => hostfile::load(path, topology)?,
            None => HostLayout::discover(topology, &options.emulate)?,
        };
        let cache = match layout.topology.source {
            TopologySource::ThisHost => cache::load(&options.cache_dir, &fingerprint)?,
            TopologySource::Xml { .. } => None,
        };
        Ok(Host { layout, fingerprint, cache, cache_dir: options.cache_dir.clone(), binder })
    }

    pub fn cache_path(&self) -> PathBuf {
        cache::path_for(&self.cache_dir, &self.fingerprint)
    }

    fn require_this_host(&self) -> Result<(), HostError> {
        match &self.layout.topology.source {
            TopologySource::ThisHost => Ok(()),
            TopologySource::Xml { path } => Err(HostError::NotThisHost { path: path.clone() }),
        }
    }

    /// The DRAM baseline emulation scales from: cached, or measured now (a fraction of a
    /// second) and cached. Returns whether it was measured now.
    pub fn baseline(&mut self) -> Result<(DramBaseline, bool), HostError> {
        if let Some(cache) = &self.cache {
            return Ok((cache.baseline, false));
        }
        let baseline =
            self.measure_baseline(&ProbeOptions { bytes: 256 << 20, repeats: 3, ..ProbeOptions::default() })?;
        self.store(baseline, None)?;
        Ok((baseline, true))
    }

    fn measure_baseline(&self, options: &ProbeOptions) -> Result<DramBaseline, HostError> {
        self.require_this_host()?;
        let spec = self.home_dram()?;
        let mut pools = PoolSet::new(vec![self.real_pool(spec)?]);
        let p = probe::probe_pool(&mut pools, PoolId(0), options)?;
        Ok(DramBaseline {
            read_gbps: p.read_gbps.median,
            write_gbps: p.write_gbps.median,
            latency_ns: p.latency_ns.median,
            threads: options.threads,
        })
    }

    fn home_dram(&self) -> Result<&PoolSpec, HostError> {
        self.layout.pools.iter().find(|p| p.kind == PoolKind::Dram && !p.is_emulated()).ok_or(HostError::NoDram)
    }

    fn store(&mut self, baseline: DramBaseline, probe: Option<PoolsProbe>) -> Result<(), HostError> {
        cache::store(&self.cache_dir, &self.fingerprint, baseline, probe)?;
        self.cache = cache::load(&self.cache_dir, &self.fingerprint)?;
        Ok(())
    }

    /// Measures every pool and every pair, then caches the result with a fresh baseline:
    /// what `placer topo --probe` does, the one way to change what emulated pools charge.
    pub fn probe(&mut self, options: &ProbeOptions) -> Result<(PoolsProbe, DramBaseline), HostError> {
        self.require_this_host()?;
        let baseline = self.measure_baseline(options)?;
        self.probe_with(baseline, options)
    }

    /// Measures every pool and pair like [`Self::probe`], but keeps the cached DRAM
    /// baseline when there is one. Emulated pools charge per byte from that baseline, so
    /// re-measuring it (it moves by tens of percent on a shared host) between a profile
    /// and a run would change the emulated device under the profile's timings: every
    /// emulated plan then ran 30-40% faster than predicted in the first pipeline on a
    /// fresh cache. `solve` probes this way when it needs move costs.
    pub fn probe_moves(&mut self, options: &ProbeOptions) -> Result<(PoolsProbe, DramBaseline), HostError> {
        self.require_this_host()?;
        let (baseline, _) = self.baseline()?;
        self.probe_with(baseline, options)
    }

    fn probe_with(
        &mut self,
        baseline: DramBaseline,
        options: &ProbeOptions,
    ) -> Result<(PoolsProbe, DramBaseline), HostError> {
        let mut pools = self.pool_set_with(baseline)?;
        let result = probe::probe_all(&mut pools, options)?;
        self.store(baseline, Some(result.clone()))?;
        Ok((result, baseline))
    }

    /// The layout's pools, live: NUMA pools bound, memkind kinds opened, emulated pools
    /// charging per the cached (or freshly measured) DRAM baseline.
    pub fn pool_set(&mut self) -> Result<PoolSet, HostError> {
        self.require_this_host()?;
        if self.layout.any_emulated() {
            let (baseline, _) = self.baseline()?;
            self.pool_set_with(baseline)
        } else {
            let pools = self.layout.pools.iter().map(|spec| self.real_pool(spec)).collect::<Result<_, _>>()?;
            Ok(PoolSet::new(pools))
        }
    }

    fn pool_set_with(&self, baseline: DramBaseline) -> Result<PoolSet, HostError> {
        let mut pools = Vec::new();
        for spec in &self.layout.pools {
            let mut pool = self.real_pool(spec)?;
            if let Some(device) = &spec.device {
                pool = pool.with_emulation(device.emulation(baseline.read_gbps * 1e9, baseline.write_gbps * 1e9));
            }
            pools.push(pool);
        }
        Ok(PoolSet::new(pools))
    }

    /// A pool with its real backend (for an emulated pool: the DRAM it lives in).
    fn real_pool(&self, spec: &PoolSpec) -> Result<Pool, HostError> {
        let numa = |nodes: &Vec<u32>| -> Result<Backend, HostError> {
            match &self.binder {
                Some(Ok(binder)) => Ok(Backend::Numa { nodes: nodes.clone(), binder: binder.clone() }),
                Some(Err(reason)) => {
                    Err(PoolError::BackendUnavailable { backend: "NUMA binding".into(), reason: reason.clone() }.into())
                }
                None => Err(HostError::NoDram),
            }
        };
        let backend = match &spec.backend {
            BackendSpec::Numa { nodes } | BackendSpec::Emulated { nodes, .. } => numa(nodes)?,
            BackendSpec::Heap => Backend::Heap,
            BackendSpec::MemkindDaxKmem | BackendSpec::MemkindPmem { .. } | BackendSpec::MemkindDefault => {
                let kmem: Vec<u32> =
                    self.layout.topology.nodes.iter().filter(|n| n.kmem_dax.is_some()).map(|n| n.os_index).collect();
                memkind_backend(&spec.backend, kmem)?
            }
        };
        let pool = Pool::new(&spec.name, spec.kind, spec.capacity).with_backend(backend);
        Ok(match self.memory_label(pool.backend.checked_nodes()) {
            Some(label) => pool.with_memory(label),
            None => pool,
        })
    }

    /// What the nodes behind a pool are, as the topology knows them: `pmem, kmem-DAX
    /// dax0.0` (one entry per distinct description).
    fn memory_label(&self, nodes: &[u32]) -> Option<String> {
        let mut labels: Vec<String> = Vec::new();
        for node in self.layout.topology.nodes.iter().filter(|n| nodes.contains(&n.os_index)) {
            let mut label = node.kind.to_string();
            if let Some(dax) = &node.kmem_dax {
                label.push_str(&format!(", kmem-DAX {dax}"));
            }
            if node.inferred.is_some() {
                label.push_str(", inferred");
            }
            if !labels.contains(&label) {
                labels.push(label);
            }
        }
        (!labels.is_empty()).then(|| labels.join("; "))
    }
}

/// A memkind kind. `MEMKIND_DAX_KMEM`'s pages are checked against the kmem-DAX nodes
/// the kernel reports (`kmem`); the other kinds' pages are not checked.
#[cfg(feature = "memkind")]
fn memkind_backend(spec: &BackendSpec, kmem: Vec<u32>) -> Result<Backend, HostError> {
    use placer_pools::{MemkindKind, MemkindSpec};
    let (spec, nodes) = match spec {
        BackendSpec::MemkindDaxKmem => (MemkindSpec::DaxKmem, kmem),
        BackendSpec::MemkindPmem { dir, max_bytes } => {
            (MemkindSpec::Pmem { dir: dir.clone(), max_bytes: *max_bytes }, Vec::new())
        }
        _ => (MemkindSpec::Default, Vec::new()),
    };
    Ok(Backend::Memkind { kind: MemkindKind::open(&spec)?, nodes })
}

#[cfg(not(feature = "memkind"))]
fn memkind_backend(_: &BackendSpec, _: Vec<u32>) -> Result<Backend, HostError> {
    Err(PoolError::BackendUnavailable {
        backend: "memkind".into(),
        reason: "placer was built without its 'memkind' feature".into(),
    }
    .into())
}
