//! What a solve needs besides the model and the budget, gathered from a host and a
//! profile: the pools and their move costs (probing the host once when nothing measured
//! its copies), the kernel costs (measured where the profile has them, the cost model
//! elsewhere), and the pins. A profile from another model or other pools is refused.

use crate::SolveError;
use crate::cost::Costs;
use crate::pools::SolvePools;
use placer_host::{Host, ProbeOptions, TopologySource};
use placer_ir::Model;
use placer_profile::{Anchor, Pin, PinRule, Profile, ProfileError};
use std::path::Path;

/// What a solve needs besides the model and the budget.
#[derive(Debug)]
pub struct SolveInputs {
    pub pools: SolvePools,
    pub costs: Costs,
    pub pins: Vec<Pin>,
    /// The profile the measured costs came from, if one was given.
    pub profile: Option<Profile>,
}

/// What gathering the inputs tells its caller before it is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputsEvent {
    /// No cached probe covers this host's pools and copies: copy bandwidth is being
    /// measured now (and cached for the next solve).
    Probing,
}

/// Pools and move costs for `host`, kernel costs from `profile` (read from the
/// checkpoint at its path, and checked against the model and pools) and the cost model,
/// and the pins (the profile's and `extra_pins`). `no_probe` estimates moves from read and write
/// bandwidth instead of measuring copies when the host cache has none.
pub fn solve_inputs(
    model: &Model,
    host: &mut Host,
    profile: Option<(&Path, Profile)>,
    extra_pins: &[PinRule],
    no_probe: bool,
    events: &mut dyn FnMut(InputsEvent),
) -> Result<SolveInputs, SolveError> {
    let mut pools = solve_pools(host, no_probe, events)?;
    if let Some((path, p)) = &profile {
        check_profile(p, model, &pools, path)?;
    }
    let profile = profile.map(|(_, p)| p);
    let names = pools.names();
    let mut pins: Vec<Pin> = Vec::new();
    for rule in profile.iter().flat_map(|p| p.header.pins.iter()).chain(extra_pins) {
        pins.push(Pin::resolve(rule, model, &names)?);
    }
    let mut measurements = profile.as_ref().map(Profile::merged).unwrap_or_default();
    let mut predictions = profile.as_ref().map(|p| p.predictions().to_vec()).unwrap_or_default();
    // Kernels timed alone: on the step's level (placer_profile::Anchor).
    let anchor = match &profile {
        Some(p) => Anchor::of(model, p)?,
        None => Anchor::default(),
    };
    for m in &mut measurements {
        m.median_ns = anchor.apply(m.signature, m.median_ns);
    }
    for p in &mut predictions {
        p.predicted_ns = anchor.apply(p.signature, p.predicted_ns);
    }
    let mut costs = Costs::new(model, &pools, &measurements).with_predictions(&predictions);
    if let Some(p) = &profile {
        costs = costs.with_negligible(model, p.header.mode.negligible);
        if let Some(overhead) = &p.step_overhead {
            costs = costs.with_step_overhead(overhead.step_ns());
        }
        if let Some(calibration) = &p.interference {
            costs = costs.with_interference(model, calibration);
            pools =
                pools.with_memcpy(calibration.memcpy_ns_per_byte, "measured by the profile's interference calibration");
            // Another framework's step beside a copy thread: the level of the charge, and
            // how long a copy takes there.
            if let Some(o) = &p.step_overhead
                && let (Some(loss), Some(beside)) = (o.copy_loss_ns_per_byte(), &o.copies)
            {
                costs = costs.with_copy_level(loss, calibration.memcpy_ns_per_byte);
                pools = pools.with_memcpy_beside(beside.memcpy_ns_per_byte);
            }
        }
    }
    Ok(SolveInputs { pools, costs, pins, profile })
}

/// Pools with their capacities and bandwidths, and move costs from the cached probe (or
/// a fresh one, cached for next time). Only this host is probed, only when it has more
/// than one pool, and only when the cache lacks a pool.
pub fn solve_pools(
    host: &mut Host,
    no_probe: bool,
    events: &mut dyn FnMut(InputsEvent),
) -> Result<SolvePools, SolveError> {
    let this_host = matches!(host.layout.topology.source, TopologySource::ThisHost);
    let names: Vec<&str> = host.layout.pools.iter().map(|p| p.name.as_str()).collect();
    let probed_here = |host: &Host| {
        host.cache
            .as_ref()
            .and_then(|c| c.probe.as_ref())
            .is_some_and(|p| names.iter().all(|n| p.pools.iter().any(|pp| pp.pool == *n)))
    };
    if this_host && !no_probe && names.len() > 1 && !probed_here(host) {
        events(InputsEvent::Probing);
        host.probe_moves(&ProbeOptions { bytes: 128 << 20, repeats: 3, ..ProbeOptions::default() })
            .map_err(SolveError::Probe)?;
    }
    let baseline = if this_host { Some(host.baseline()?.0) } else { None };
    let probe = host.cache.as_ref().and_then(|c| c.probe.clone());
    Ok(SolvePools::from_host(&host.layout, baseline.as_ref(), probe.as_ref()))
}

/// Refuses a profile measured on another model (by content hash) or on other pools
/// (by name, in order): its times would be mixed into the wrong solve.
pub fn check_profile(profile: &Profile, model: &Model, pools: &SolvePools, path: &Path) -> Result<(), ProfileError> {
    let h = &profile.header;
    let mismatch = |reason: String| ProfileError::Mismatch { reason: format!("profile {}: {reason}", path.display()) };
    if h.model_hash != model.content_hash() {
        return Err(mismatch(format!(
            "it was measured on model '{}', not this '{}' (content differs)",
            h.model_name,
            model.name()
        )));
    }
    let theirs: Vec<&str> = h.pools.iter().map(|p| p.name.as_str()).collect();
    let ours = pools.names();
    if theirs != ours.iter().map(String::as_str).collect::<Vec<_>>() {
        return Err(mismatch(format!("its pools are {}, this host's are {}", theirs.join(", "), ours.join(", "))));
    }
    // A pool emulated here and in the profile must be the same emulated device: another
    // device or wait model would put the profile's times beside other waits. (A profile
    // of emulated pools may still plan for a real host of the same pools.)
    for (theirs, ours) in h.pools.iter().zip(&pools.pools) {
        if let (Some(a), Some(b)) = (&theirs.emulated_as, &ours.emulated_as)
            && a != b
        {
            return Err(mismatch(format!(
                "its pool '{}' was EMULATED as {a}, this host's is EMULATED as {b} (--emulate chooses)",
                ours.name
            )));
        }
    }
    Ok(())
}
