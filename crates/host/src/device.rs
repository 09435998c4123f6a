//! Device models for the emulated tier: a slow device's figures next to the DRAM they
//! were measured against, with the source they come from. Only the ratios are used:
//! the host's own DRAM bandwidth is measured and scaled by them.

use crate::HostError;
use placer_pools::WaitModel;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The models in configs/devices/, compiled in so the binary works from any directory.
const BUILT_IN: [(&str, &str); 3] = [
    ("optane-dcpmm", include_str!("../../../configs/devices/optane-dcpmm.json")),
    ("cxl-type3", include_str!("../../../configs/devices/cxl-type3.json")),
    ("remote-socket", include_str!("../../../configs/devices/remote-socket.json")),
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figures {
    pub read_gbps: f64,
    pub write_gbps: f64,
    pub latency_ns: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceModel {
    pub format: String,
    pub version: u32,
    pub name: String,
    /// The pool kind it stands for: pmem, cxl, remote-dram, ...
    pub kind: String,
    pub description: String,
    /// Where the figures come from. Required: an uncited model is not accepted.
    pub source: String,
    pub reference_dram: Figures,
    pub device: Figures,
    /// How an emulated pool of this device charges a kernel: chosen on the command line
    /// (`DEVICE:MODEL`), not in the file, since it is placer's model of the device, not
    /// a published figure. Unless named, `WaitModel::default()` (additive).
    #[serde(skip)]
    pub wait: WaitModel,
}

impl DeviceModel {
    pub fn built_in_names() -> Vec<&'static str> {
        BUILT_IN.iter().map(|(n, _)| *n).collect()
    }

    /// A built-in model by name.
    pub fn named(name: &str) -> Result<DeviceModel, HostError> {
        let (_, text) = BUILT_IN.iter().find(|(n, _)| *n == name).ok_or_else(|| HostError::UnknownDevice {
            name: name.to_string(),
            known: DeviceModel::built_in_names().join(", "),
        })?;
        DeviceModel::parse(text, Path::new(&format!("configs/devices/{name}.json")))
    }

    /// A built-in name or a path to a model file, optionally followed by `:MODEL`, the
    /// wait model (`optane-dcpmm:additive`).
    pub fn resolve(spec: &str) -> Result<DeviceModel, HostError> {
        let (name_or_path, wait) = match spec.rsplit_once(':') {
            Some((device, model)) => {
                let wait = WaitModel::parse(model).ok_or_else(|| HostError::UnknownWaitModel {
                    name: model.to_string(),
                    spec: spec.to_string(),
                    known: WaitModel::ALL.map(WaitModel::as_str).join(", "),
                })?;
                (device, wait)
            }
            None => (spec, WaitModel::default()),
        };
        let mut model = DeviceModel::resolve_file(name_or_path)?;
        model.wait = wait;
        Ok(model)
    }

    fn resolve_file(name_or_path: &str) -> Result<DeviceModel, HostError> {
        if name_or_path.ends_with(".json") || name_or_path.contains('/') {
            let path = Path::new(name_or_path);
            let text = std::fs::read_to_string(path)
                .map_err(|e| HostError::Device { path: path.to_path_buf(), reason: e.to_string() })?;
            DeviceModel::parse(&text, path)
        } else {
            DeviceModel::named(name_or_path)
        }
    }

    pub fn parse(text: &str, path: &Path) -> Result<DeviceModel, HostError> {
        let bad = |reason: String| HostError::Device { path: path.to_path_buf(), reason };
        let model: DeviceModel = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        if model.format != "placer-device" || model.version != 1 {
            return Err(bad(format!(
                "format '{}' version {}; expected 'placer-device' version 1",
                model.format, model.version
            )));
        }
        if placer_pools::PoolKind::parse(&model.kind).is_none() {
            return Err(bad(format!("unknown kind '{}'", model.kind)));
        }
        if model.source.trim().is_empty() {
            return Err(bad("'source' is empty: every device model must cite where its figures come from".into()));
        }
        for (what, v) in [
            ("reference_dram.read_gbps", model.reference_dram.read_gbps),
            ("reference_dram.write_gbps", model.reference_dram.write_gbps),
            ("reference_dram.latency_ns", model.reference_dram.latency_ns),
            ("device.read_gbps", model.device.read_gbps),
            ("device.write_gbps", model.device.write_gbps),
            ("device.latency_ns", model.device.latency_ns),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(bad(format!("{what} must be a positive number, not {v}")));
            }
        }
        Ok(model)
    }

    /// The device with its wait model, as results name an emulated pool
    /// (`optane-dcpmm:additive`; the same as [`placer_pools::Emulation::label`]).
    pub fn label(&self) -> String {
        self.wait.label(&self.name)
    }

    pub fn kind(&self) -> placer_pools::PoolKind {
        placer_pools::PoolKind::parse(&self.kind).unwrap_or(placer_pools::PoolKind::Unknown)
    }

    /// Device bandwidth as a fraction of the reference DRAM's, for reads and writes.
    pub fn bandwidth_ratios(&self) -> (f64, f64) {
        (self.device.read_gbps / self.reference_dram.read_gbps, self.device.write_gbps / self.reference_dram.write_gbps)
    }

    pub fn latency_ratio(&self) -> f64 {
        self.device.latency_ns / self.reference_dram.latency_ns
    }

    /// The per-byte extra cost on a host whose DRAM reads and writes at these rates
    /// (bytes/s).
    pub fn emulation(&self, dram_read: f64, dram_write: f64) -> placer_pools::Emulation {
        let (r, w) = self.bandwidth_ratios();
        placer_pools::Emulation::from_bandwidths(&self.name, dram_read, dram_write, dram_read * r, dram_write * w)
            .with_wait(self.wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_models_load_and_cite_their_source() {
        for name in DeviceModel::built_in_names() {
            let m = DeviceModel::named(name).expect("built-in parses");
            assert_eq!(m.name, name);
            assert!(m.source.len() > 40, "{name}: {}", m.source);
            let (r, w) = m.bandwidth_ratios();
            assert!(r < 1.0 && w < 1.0, "{name} is slower than DRAM");
        }
        let optane = DeviceModel::named("optane-dcpmm").expect("built in");
        let (r, w) = optane.bandwidth_ratios();
        assert!((r - 37.6 / 105.6).abs() < 1e-12 && (w - 12.5 / 76.8).abs() < 1e-12);
    }

    #[test]
    fn emulation_scales_the_host_dram_by_the_model_ratios() {
        let optane = DeviceModel::named("optane-dcpmm").expect("built in");
        let e = optane.emulation(40e9, 30e9);
        let slow_read = 40e9 * 37.6 / 105.6;
        assert!((e.read_extra_ns_per_byte - (1e9 / slow_read - 1e9 / 40e9)).abs() < 1e-12);
    }

    #[test]
    fn a_wait_model_follows_the_device_after_a_colon() {
        let overlap = DeviceModel::resolve("optane-dcpmm:overlap").expect("known model");
        assert_eq!((overlap.name.as_str(), overlap.wait), ("optane-dcpmm", WaitModel::Overlap));
        assert_eq!(overlap.emulation(40e9, 30e9).label(), "optane-dcpmm:overlap");
        assert_eq!(overlap.label(), overlap.emulation(40e9, 30e9).label());
        assert_eq!(DeviceModel::resolve("optane-dcpmm").expect("known").wait, WaitModel::Additive);
        let err = DeviceModel::resolve("optane-dcpmm:sideways").expect_err("unknown model");
        assert_eq!(
            err.to_string(),
            "unknown wait model 'sideways' in 'optane-dcpmm:sideways'; wait models: additive, overlap"
        );
    }

    #[test]
    fn bad_models_are_refused_with_the_reason() {
        let err = DeviceModel::named("optane-pmem").expect_err("unknown");
        assert!(err.to_string().contains("optane-dcpmm, cxl-type3, remote-socket"), "{err}");
        let text =
            include_str!("../../../configs/devices/cxl-type3.json").replace("\"read_gbps\": 32.0", "\"read_gbps\": -1");
        let err = DeviceModel::parse(&text, Path::new("x.json")).expect_err("negative");
        assert!(err.to_string().contains("device.read_gbps must be a positive number"), "{err}");
        let err = DeviceModel::parse("{\"format\": 1", Path::new("x.json")).expect_err("malformed");
        assert!(err.to_string().starts_with("device model x.json:"), "{err}");
    }
}
