//! `placer topo --probe`: bandwidth and latency of every pool, measured on buffers
//! allocated through the pool's own backend. For an emulated pool the same loops run on
//! its DRAM pages and then wait what the emulation charges for the bytes they moved, so
//! the figure shown is what a kernel in that pool experiences, and is labelled as such.

use crate::HostError;
use crate::bandwidth::{Spread, chase_ns, copy_seconds, read_seconds, write_seconds};
use placer_pools::{Buffer, PageTally, PoolId, PoolSet, busy_wait_ns};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy)]
pub struct ProbeOptions {
    /// Bytes per buffer; far larger than the last-level cache so DRAM is what is timed.
    pub bytes: u64,
    pub repeats: usize,
    pub threads: usize,
    /// Dependent loads in the latency chase.
    pub chase_steps: usize,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            bytes: 512 << 20,
            repeats: 5,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            chase_steps: 4 << 20,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolProbe {
    pub pool: String,
    /// The device model when the pool is emulated; figures then include its waits.
    pub emulated_as: Option<String>,
    pub bytes: u64,
    pub read_gbps: Spread,
    pub write_gbps: Spread,
    pub copy_gbps: Spread,
    pub latency_ns: Spread,
    /// Where the NUMA backend found this pool's pages (all zero for other backends).
    pub pages_checked: u64,
    pub pages_elsewhere: u64,
}

/// Copy bandwidth from one pool to another: the solver's movement cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyProbe {
    pub from: String,
    pub to: String,
    pub gbps: Spread,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolsProbe {
    pub threads: usize,
    pub pools: Vec<PoolProbe>,
    pub copies: Vec<CopyProbe>,
}

fn words(buffer: &mut Buffer) -> Result<&mut [u64], HostError> {
    let bytes = buffer.bytes_mut();
    let len = bytes.len() / 8 * 8;
    bytemuck::try_cast_slice_mut(&mut bytes[..len]).map_err(|e| HostError::Probe { reason: e.to_string() })
}

fn gbps(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / seconds / 1e9
}

fn buffer_bytes(pools: &PoolSet, pool: PoolId, wanted: u64) -> u64 {
    // Two buffers must fit for the copy; keep a little headroom under the capacity.
    let room = pools.pool(pool).capacity.saturating_sub(pools.pool(pool).in_use()) / 3;
    wanted.min(room) / 4096 * 4096
}

/// Probes one pool: read, write, copy within it, and idle latency.
pub fn probe_pool(pools: &mut PoolSet, pool: PoolId, options: &ProbeOptions) -> Result<PoolProbe, HostError> {
    let bytes = buffer_bytes(pools, pool, options.bytes);
    if bytes < 1 << 20 {
        return Err(HostError::Probe {
            reason: format!("pool '{}' has too little free capacity to probe", pools.pool(pool).name),
        });
    }
    let before: PageTally = pools.pool(pool).page_tally();
    let mut a = pools.allocate(pool, bytes)?;
    let mut b = pools.allocate(pool, bytes)?;
    let (mut read, mut write, mut copy) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..options.repeats {
        let secs = read_seconds(words(&mut a)?, options.threads);
        let extra = busy_wait_ns(pools.emulated_ns(pool, bytes, 0)).as_secs_f64();
        read.push(gbps(bytes, secs + extra));
        let secs = write_seconds(words(&mut a)?, options.threads, r as u64);
        let extra = busy_wait_ns(pools.emulated_ns(pool, 0, bytes)).as_secs_f64();
        write.push(gbps(bytes, secs + extra));
        let secs = copy_seconds(words(&mut a)?, words(&mut b)?, options.threads);
        let extra = busy_wait_ns(pools.emulated_ns(pool, bytes, bytes)).as_secs_f64();
        copy.push(gbps(bytes, secs + extra));
    }
    let chase_bytes = bytes.min(256 << 20);
    let chase_words = (chase_bytes / 8) as usize;
    let steps = options.chase_steps;
    let mut latency = Vec::new();
    for r in 0..options.repeats.min(3) {
        let ns = chase_ns(&mut words(&mut a)?[..chase_words], steps, 0x9E37_79B9 + r as u64);
        // Each dependent load reads one line; the emulation charges it the per-byte
        // read cost of 64 bytes, the only latency model the formula has.
        latency.push(ns + pools.emulated_ns(pool, 64, 0));
    }
    let after = pools.pool(pool).page_tally();
    let p = pools.pool(pool);
    let probe = PoolProbe {
        pool: p.name.clone(),
        emulated_as: p.emulation.as_ref().map(placer_pools::Emulation::label),
        bytes,
        read_gbps: Spread::of(read),
        write_gbps: Spread::of(write),
        copy_gbps: Spread::of(copy),
        latency_ns: Spread::of(latency),
        pages_checked: after.checked - before.checked,
        pages_elsewhere: after.elsewhere - before.elsewhere,
    };
    pools.free(a);
    pools.free(b);
    Ok(probe)
}

/// Copy bandwidth between two different pools, in that direction.
pub fn probe_copy(
    pools: &mut PoolSet,
    from: PoolId,
    to: PoolId,
    options: &ProbeOptions,
) -> Result<CopyProbe, HostError> {
    let bytes = buffer_bytes(pools, from, options.bytes).min(buffer_bytes(pools, to, options.bytes));
    let mut src = pools.allocate(from, bytes)?;
    let mut dst = pools.allocate(to, bytes)?;
    write_seconds(words(&mut src)?, options.threads, 1);
    let mut samples = Vec::new();
    for _ in 0..options.repeats {
        let secs = copy_seconds(words(&mut src)?, words(&mut dst)?, options.threads);
        let extra = pools.emulated_ns(from, bytes, 0) + pools.emulated_ns(to, 0, bytes);
        let waited = busy_wait_ns(extra).as_secs_f64();
        samples.push(gbps(bytes, secs + waited));
    }
    pools.free(src);
    pools.free(dst);
    Ok(CopyProbe { from: pools.pool(from).name.clone(), to: pools.pool(to).name.clone(), gbps: Spread::of(samples) })
}

/// Every pool, then every ordered pair of pools.
pub fn probe_all(pools: &mut PoolSet, options: &ProbeOptions) -> Result<PoolsProbe, HostError> {
    let ids: Vec<PoolId> = pools.ids().collect();
    let mut probes = Vec::new();
    for &id in &ids {
        probes.push(probe_pool(pools, id, options)?);
    }
    let mut copies = Vec::new();
    for &from in &ids {
        for &to in &ids {
            if from != to {
                copies.push(probe_copy(pools, from, to, options)?);
            }
        }
    }
    Ok(PoolsProbe { threads: options.threads, pools: probes, copies })
}
