//! The host: which memory pools it has, what each one is, and how fast.
//!
//! - [`discover`]: hwloc's view of the NUMA nodes (live, or from an XML export).
//! - [`layout`]: nodes grouped into pools, one per tier; or [`hostfile`]'s layout.
//! - [`device`]: device models for emulated tiers, each citing its source.
//! - [`bandwidth`] and [`probe`]: bandwidth and latency, measured per pool and per pair.
//! - [`cache`]: probe results kept per host fingerprint.
//! - [`last_level_cache_bytes`]: the CPU's last-level cache, from sysfs.
//! - [`Host`]: ties them together and turns a layout into a live
//!   [`placer_pools::PoolSet`].

pub mod activity;
pub mod bandwidth;
pub mod cache;
mod capacity;
mod classify;
mod cpu_cache;
pub mod device;
mod discover;
pub mod hostfile;
pub mod layout;
pub mod probe;

mod host;
mod topology;
mod xml_guard;

pub use activity::HostActivity;
pub use cache::{DramBaseline, HostCache};
pub use cpu_cache::last_level_cache_bytes;
pub use device::DeviceModel;
pub use host::{Host, HostOptions};
pub use layout::{BackendSpec, Emulate, EmulateChoice, HostLayout, LayoutOrigin, PoolSpec};
pub use probe::{PoolsProbe, ProbeOptions};
pub use topology::{HostTopology, MemAttrs, NumaNode, TopologySource};

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("hwloc could not read {what}: {reason}")]
    Hwloc { what: String, reason: String },
    #[error("topology {path}: {reason}", path = path.display())]
    Topology { path: PathBuf, reason: String },
    #[error("host file {path}: {reason}", path = path.display())]
    HostFile { path: PathBuf, reason: String },
    #[error("device model {path}: {reason}", path = path.display())]
    Device { path: PathBuf, reason: String },
    #[error("unknown device model '{name}'; built-in models: {known}")]
    UnknownDevice { name: String, known: String },
    #[error("unknown wait model '{name}' in '{spec}'; wait models: {known}")]
    UnknownWaitModel { name: String, spec: String, known: String },
    #[error("no local DRAM pool to emulate a slow tier in")]
    NoDram,
    #[error(
        "the topology in {path} describes another machine: its pools can be listed, not allocated, probed or run on",
        path = path.display()
    )]
    NotThisHost { path: PathBuf },
    #[error("probe: {reason}")]
    Probe { reason: String },
    #[error("host cache {path}: {reason}", path = path.display())]
    Cache { path: PathBuf, reason: String },
    #[error("{reason}")]
    Usage { reason: String },
    /// `--require-quiet` and the host was busy ([`HostActivity::busy`]).
    #[error("busy host {when}: {why} ({figures}); refused by --require-quiet")]
    NotQuiet { when: String, why: String, figures: String },
    #[error(transparent)]
    Pool(#[from] placer_pools::PoolError),
}
