//! What the solver needs to know about each pool: capacity, bandwidth (for the cost
//! model's priors) and the cost of moving a byte between every pair (for moves).

use placer_host::{DeviceModel, DramBaseline, HostLayout, PoolsProbe};
use placer_pools::PoolKind;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolFigures {
    pub name: String,
    pub kind: PoolKind,
    /// Bytes the pool can hold. For pool 0 (local DRAM) the budget replaces this.
    pub capacity: u64,
    /// The device model when the pool is emulated.
    pub emulated_as: Option<String>,
    pub read_gbps: f64,
    pub write_gbps: f64,
    /// Where the bandwidths come from: "probe", "device model", "HMAT" or "baseline".
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SolvePools {
    pub pools: Vec<PoolFigures>,
    /// `move_ns_per_byte[from][to]`: what moving one byte costs (0 on the diagonal).
    pub move_ns_per_byte: Vec<Vec<f64>>,
    /// True when every pair's cost comes from a measured copy (`placer topo --probe`);
    /// otherwise estimated as a read from one pool then a write to the other.
    pub moves_measured: bool,
    /// `copy_cpu_ns_per_byte[from][to]`: the CPU time a background copy takes per byte,
    /// which is what it can take from the kernel beside it
    /// ([`crate::cost::KernelCost::copy_loss_ns`]). A copy between real pools keeps its
    /// thread busy for the whole move. An emulated pool's wait is a sleep, so a copy
    /// to or from one takes a DRAM memcpy's time ([`SolvePools::with_memcpy`]).
    pub copy_cpu_ns_per_byte: Vec<Vec<f64>>,
    /// Where the memcpy figure of copies touching an emulated pool comes from.
    pub memcpy_source: String,
}

/// The device model whose figures stand in for a pool nobody measured, by kind.
fn stand_in_device(kind: PoolKind) -> Option<&'static str> {
    match kind {
        PoolKind::Pmem => Some("optane-dcpmm"),
        PoolKind::Cxl => Some("cxl-type3"),
        PoolKind::RemoteDram => Some("remote-socket"),
        PoolKind::Dram | PoolKind::Hbm | PoolKind::Spm | PoolKind::Unknown => None,
    }
}

impl SolvePools {
    /// Figures for every pool of `layout`: the cached probe where it measured the pool,
    /// else the DRAM baseline scaled by the pool's device model, else HMAT attributes,
    /// else the stand-in device model for the pool's kind.
    pub fn from_host(layout: &HostLayout, baseline: Option<&DramBaseline>, probe: Option<&PoolsProbe>) -> SolvePools {
        let reference = DeviceModel::named("optane-dcpmm").ok();
        let dram = baseline
            .map(|b| (b.read_gbps, b.write_gbps))
            .or_else(|| reference.as_ref().map(|d| (d.reference_dram.read_gbps, d.reference_dram.write_gbps)));
        let (dram_read, dram_write) = dram.unwrap_or((20.0, 15.0));
        let pools: Vec<PoolFigures> = layout
            .pools
            .iter()
            .map(|spec| {
                let probed = probe.and_then(|p| p.pools.iter().find(|pp| pp.pool == spec.name));
                let device = spec
                    .device
                    .clone()
                    .or_else(|| stand_in_device(spec.kind).and_then(|name| DeviceModel::named(name).ok()));
                let (read_gbps, write_gbps, source) = if let Some(p) = probed {
                    (p.read_gbps.median, p.write_gbps.median, "probe")
                } else if let (Some(d), true) = (&spec.device, baseline.is_some()) {
                    let (r, w) = d.bandwidth_ratios();
                    (dram_read * r, dram_write * w, "device model on the measured DRAM baseline")
                } else if let (Some(r), Some(w)) = (spec.attrs.read_bw(), spec.attrs.write_bw()) {
                    (r as f64 * 1.048_576e-3, w as f64 * 1.048_576e-3, "HMAT")
                } else if let Some(d) = device.filter(|_| spec.kind != PoolKind::Dram) {
                    let (r, w) = d.bandwidth_ratios();
                    (dram_read * r, dram_write * w, "stand-in device model")
                } else {
                    (dram_read, dram_write, "DRAM baseline")
                };
                PoolFigures {
                    name: spec.name.clone(),
                    kind: spec.kind,
                    capacity: spec.capacity,
                    emulated_as: spec.device.as_ref().map(DeviceModel::label),
                    read_gbps,
                    write_gbps,
                    source: source.to_string(),
                }
            })
            .collect();
        let n = pools.len();
        let mut measured = true;
        let mut move_ns_per_byte = vec![vec![0.0; n]; n];

        for (i, from) in pools.iter().enumerate() {
            for (j, to) in pools.iter().enumerate() {
                if i == j {
                    continue;
                }
                let copy = probe.and_then(|p| p.copies.iter().find(|c| c.from == from.name && c.to == to.name));
                move_ns_per_byte[i][j] = match copy {
                    Some(c) if c.gbps.median > 0.0 => 1.0 / c.gbps.median,
                    _ => {
                        measured = false;
                        1.0 / from.read_gbps + 1.0 / to.write_gbps
                    }
                };
            }
        }
        // A copy keeps its thread busy for the whole move, except what an emulated pool
        // sleeps: those pairs take a memcpy's time, estimated here.
        SolvePools {
            pools,
            copy_cpu_ns_per_byte: move_ns_per_byte.clone(),
            move_ns_per_byte,
            moves_measured: measured && n > 1,
            memcpy_source: String::new(),
        }
        .with_memcpy(1.0 / dram_read + 1.0 / dram_write, "estimated: a read and a write at the DRAM baseline")
    }

    /// These pools with `ns_per_byte` as a memcpy's time, measured by `source`, for
    /// every copy to or from an emulated pool.
    pub fn with_memcpy(mut self, ns_per_byte: f64, source: &str) -> SolvePools {
        for (i, j) in self.emulated_pairs() {
            self.copy_cpu_ns_per_byte[i][j] = ns_per_byte;
        }
        self.memcpy_source = source.to_string();
        self
    }

    /// These pools with every copy to or from an emulated pool taking at least
    /// `ns_per_byte`: a memcpy's time beside another framework's step (its profile's
    /// `placer_profile::CopiesBesideSteps`), slower than alone. A background copy takes
    /// its memcpy, then sleeps what the device model charges beyond it, so the longer of
    /// the two is the copy's time; the probe times it on an idle host.
    pub fn with_memcpy_beside(mut self, ns_per_byte: f64) -> SolvePools {
        if ns_per_byte.is_finite() {
            for (i, j) in self.emulated_pairs() {
                self.move_ns_per_byte[i][j] = self.move_ns_per_byte[i][j].max(ns_per_byte);
            }
        }
        self
    }

    /// Every (from, to) pair of distinct pools of which at least one is emulated: the
    /// copies whose memcpy is a copy thread's, between DRAM buffers.
    fn emulated_pairs(&self) -> Vec<(usize, usize)> {
        let emulated = |p: usize| self.pools[p].emulated_as.is_some();
        let n = self.pools.len();
        (0..n)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .filter(|&(i, j)| i != j && (emulated(i) || emulated(j)))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.pools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pools.is_empty()
    }

    pub fn names(&self) -> Vec<String> {
        self.pools.iter().map(|p| p.name.clone()).collect()
    }

    /// Pools from fastest to slowest by read bandwidth, pool 0 first.
    pub fn by_speed(&self) -> Vec<u16> {
        let mut order: Vec<u16> = (0..self.pools.len() as u16).collect();
        order.sort_by(|&a, &b| {
            (a != 0).cmp(&(b != 0)).then(self.pools[b as usize].read_gbps.total_cmp(&self.pools[a as usize].read_gbps))
        });
        order
    }

    pub fn any_emulated(&self) -> bool {
        self.pools.iter().any(|p| p.emulated_as.is_some())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// DRAM and an emulated pool, copies measured at 0.2 ns/B one way and 0.4 the other.
    pub(crate) fn two_pools() -> SolvePools {
        let pool = |name: &str, kind, emulated_as: Option<&str>| PoolFigures {
            name: name.into(),
            kind,
            capacity: 1 << 30,
            emulated_as: emulated_as.map(str::to_string),
            read_gbps: 10.0,
            write_gbps: 10.0,
            source: "test".into(),
        };
        SolvePools {
            pools: vec![pool("dram", PoolKind::Dram, None), pool("pmem", PoolKind::Pmem, Some("optane-dcpmm"))],
            move_ns_per_byte: vec![vec![0.0, 0.4], vec![0.2, 0.0]],
            moves_measured: true,
            copy_cpu_ns_per_byte: vec![vec![0.0, 0.1], vec![0.1, 0.0]],
            memcpy_source: "test".into(),
        }
    }

    #[test]
    fn a_copy_beside_a_framework_step_takes_at_least_its_memcpy_there() {
        let pools = two_pools().with_memcpy_beside(0.3);
        assert_eq!(pools.move_ns_per_byte, vec![vec![0.0, 0.4], vec![0.3, 0.0]], "the slower of the two");
        assert_eq!(pools.copy_cpu_ns_per_byte, two_pools().copy_cpu_ns_per_byte, "CPU time stays the memcpy's alone");
    }
}
