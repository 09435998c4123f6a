//! The host: which memory pools it has, what each one is, and how fast.
//!
//! - [`discover`]: hwloc's view of the NUMA nodes (live, or from an XML export).
//! - [`layout`]: nodes grouped into pools, one per tier; or [`hostfile`]'s layout.
//! - [`device`]: device models for emulated tiers, each citing its source.
//! - [`bandwidth`] and [`probe`]: bandwidth and latency, measured per pool and per pair.
//! - [`cache`]: probe results kept per host fingerprint.
//! - [`Host`]: ties them together and turns a layout into a live
//!   [`placer_pools::PoolSet`].

pub mod activity;
pub mod bandwidth;
pub mod cache;
mod capacity;
mod classify;
pub mod device;
pub mod discover;
pub mod hostfile;
pub mod layout;
pub mod probe;

mod host;
mod xml_guard;

pub use activity::HostActivity;
pub use cache::{DramBaseline, HostCache};
pub use device::DeviceModel;
pub use discover::{HostTopology, MemAttrs, NumaNode, Source};
pub use host::{Host, HostOptions};
pub use layout::{BackendSpec, Emulate, EmulateChoice, HostLayout, LayoutOrigin, PoolSpec};
pub use probe::{PoolsProbe, ProbeOptions};

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

/// Parses a byte count: a plain integer, or a number with a unit (B, KB, MB, GB, TB in
/// powers of 1000; KiB, MiB, GiB, TiB in powers of 1024). `64GB` is 64·10⁹ bytes.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number.parse().map_err(|_| format!("'{text}' is not a size such as 64GB or 16GiB"))?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        other => return Err(format!("'{text}': unknown unit '{other}' (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)")),
    };
    let bytes = value * scale;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("'{text}' is too large"));
    }
    Ok(bytes.round() as u64)
}

/// Bytes in binary units, for display.
pub fn fmt_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{v:.1} {}", UNITS[unit]) }
}

/// A count with thousands separators, for display: `25,557,032`.
pub fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_both_unit_systems() {
        assert_eq!(parse_bytes("64GB"), Ok(64_000_000_000));
        assert_eq!(parse_bytes("16GiB"), Ok(16 << 30));
        assert_eq!(parse_bytes("1.5 MiB"), Ok(3 << 19));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(parse_bytes("12 parsecs").expect_err("unit").contains("unknown unit 'parsecs'"));
        assert!(parse_bytes("GB").is_err());
        assert!(parse_bytes("1e30TB").is_err());
    }

    #[test]
    fn sizes_print_in_binary_units() {
        assert_eq!(fmt_bytes(512), "512 B");
        assert_eq!(fmt_bytes(3 << 29), "1.5 GiB");
    }
}
