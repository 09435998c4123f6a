//! What the side-by-side examples share: a profile's first stage planned for this host,
//! one resident engine, and its reference pass, as `placer profile` starts.

use placer_exec::PoolAssignment;
use placer_host::{Host, HostOptions};
use placer_ir::{Model, NodeId};
use placer_profile::{PassSchedule, ProfileOptions, lab::Engine, lab::base_placement, lab::reference_pass};

pub struct Bench<'m> {
    pub options: ProfileOptions,
    pub plan: PassSchedule,
    pub base: PoolAssignment,
    /// One resident engine, which runs picked and whole steps alike.
    pub engine: Engine<'m>,
    /// The reference pass's median per node.
    pub reference_ns: Vec<f64>,
    pub conflicts: Vec<Vec<NodeId>>,
}

pub fn open(model: &Model) -> Result<Bench<'_>, Box<dyn std::error::Error>> {
    let mut host = Host::open(&HostOptions::default())?;
    let pools = host.pool_set()?;
    let options = ProfileOptions::pipeline(3, 1);
    let plan = placer_profile::schedule_profile(model, &pools, &host.fingerprint, &options)?;
    let base = base_placement(model, &plan.pins);
    let mut engine = Engine::new(model, pools, &base, &options.protocol, placer_host::last_level_cache_bytes(), None)?;
    let reference_ns = reference_pass(&mut engine, model, &base, &options.protocol)?;
    let conflicts = placer_profile::conflicts(model, false);
    Ok(Bench { options, plan, base, engine, reference_ns, conflicts })
}
