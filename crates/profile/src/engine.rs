//! What runs a pass's steps: one executor holding the model's whole footprint, or, when
//! that does not fit, a plan executor per pass whose arenas hold each tensor only while
//! it is live; or, for kernels timed alone, an executor holding one kernel's operands at
//! a time, beside live whole steps for the reference pass.

use crate::ProfileError;
use crate::record::{Protocol, Steps};
use placer_exec::{ExecError, ExecPlan, Executor, PlanExecutor, PoolAssignment, SharedRunner};
use placer_ir::{Model, NodeId};
use placer_pools::PoolSet;

#[derive(Debug)]
pub struct Engine<'m> {
    seed: u64,
    kind: Kind<'m>,
    /// Another framework's kernels, given to every executor the engine makes.
    runner: Option<SharedRunner>,
}

#[derive(Debug)]
enum Kind<'m> {
    /// Every tensor allocated once (the footprint); a pass retags or moves what its
    /// placement changes and refills what steps update in place.
    Resident(Executor<'m>),
    /// Per pass, a plan executor over [`ExecPlan::resident`]: whole steps within the
    /// model's peak live memory. Made anew for every pass, so weights start afresh.
    Live { model: &'m Model, pools: PoolSet, exec: Option<PlanExecutor<'m>> },
    /// Live whole steps for the reference pass; between them, one executor that holds
    /// only the operands of the kernel being timed alone. Either is dropped before the
    /// other is made, so the two never hold memory at once.
    Isolated { live: Box<Kind<'m>>, alone: Option<(Executor<'m>, NodeId)> },
}

impl<'m> Engine<'m> {
    /// The engine `protocol.steps` calls for, in the placement `base`, timing `runner`'s
    /// kernels where it has them. Picked steps write out of a last-level cache of
    /// `cache_bytes` what a training step leaves in memory before each kernel
    /// ([`crate::ProfileHeader::cache_bytes`]); other steps ignore it.
    pub fn new(
        model: &'m Model,
        pools: PoolSet,
        base: &PoolAssignment,
        protocol: &Protocol,
        cache_bytes: Option<u64>,
        runner: Option<SharedRunner>,
    ) -> Result<Engine<'m>, ProfileError> {
        let kind = match protocol.steps {
            Steps::Live => Kind::Live { model, pools, exec: None },
            Steps::Isolated => Kind::Isolated { live: Box::new(Kind::Live { model, pools, exec: None }), alone: None },
            Steps::Whole | Steps::Picked => {
                let mut exec = Executor::new(model, pools, base, protocol.seed)?;
                exec.set_warm_pool(true);
                exec.set_runner(runner.clone());
                if let Some(bytes) = cache_bytes.filter(|_| protocol.steps == Steps::Picked) {
                    exec.set_cold_reads(placer_ir::analysis::cold_reads(model, bytes));
                }
                Kind::Resident(exec)
            }
        };
        Ok(Engine { seed: protocol.seed, kind, runner })
    }

    /// Puts every tensor where `placement` says, and what steps update back to its
    /// starting contents.
    pub fn start(&mut self, placement: &PoolAssignment) -> Result<(), ProfileError> {
        start(&mut self.kind, placement, self.seed, &self.runner)
    }

    /// Holds only `node`'s operands, each in its pool under `placement` and freshly
    /// filled from the seed, for [`Engine::run_alone`]. Only an isolated engine can.
    pub fn isolate(&mut self, node: NodeId, placement: &PoolAssignment) -> Result<(), ProfileError> {
        let Kind::Isolated { live, alone } = &mut self.kind else {
            return Err(plan_error("only an isolated engine times a kernel alone"));
        };
        let Kind::Live { model, pools, exec } = live.as_mut() else {
            return Err(plan_error("an isolated engine without live steps"));
        };
        // The live step's arenas go before any operand is allocated.
        *exec = None;
        if alone.is_none() {
            let mut fresh = Executor::holding_none(model, pools.clone())?;
            fresh.set_warm_pool(true);
            fresh.set_runner(self.runner.clone());
            *alone = Some((fresh, node));
        }
        let Some((held, isolated)) = alone else {
            return Err(plan_error("no executor to hold a kernel alone"));
        };
        held.hold(&model.node(node).operands(), placement, self.seed)?;
        *isolated = node;
        Ok(())
    }

    /// Makes `node` runnable on its own by [`Engine::step`]: an isolated engine holds
    /// its operands alone ([`Engine::isolate`]); an engine with every tensor resident
    /// already can. A live engine cannot.
    pub fn ready(&mut self, node: NodeId, placement: &PoolAssignment) -> Result<(), ProfileError> {
        match &self.kind {
            Kind::Isolated { .. } => self.isolate(node, placement),
            Kind::Resident(_) => Ok(()),
            Kind::Live { .. } => Err(plan_error("live memory runs whole steps only")),
        }
    }

    /// Runs the isolated kernel once, its operands first put in the cache state a step
    /// leaves them in ([`Executor::as_in_a_step`]); its time in ns, with what the
    /// emulated pools charge.
    pub fn run_alone(&mut self) -> Result<f64, ProfileError> {
        let Kind::Isolated { alone: Some((exec, node)), .. } = &mut self.kind else {
            return Err(plan_error("a kernel run alone before any was isolated"));
        };
        exec.as_in_a_step(*node)?;
        Ok(exec.step_nodes(&[*node])?.kernel_ns[0])
    }

    /// Whether a resident engine wakes every pool thread before each kernel, outside its
    /// timing (as passes do; see `Executor::set_warm_pool`). A live engine's plan
    /// executors always do.
    pub fn set_warm_pool(&mut self, warm: bool) {
        if let Kind::Resident(exec) = &mut self.kind {
            exec.set_warm_pool(warm);
        }
    }

    /// Runs `nodes` once, in order, and returns each one's time in ns. A live engine
    /// runs whole steps only: `nodes` must be the schedule. An isolated engine holding a
    /// kernel's operands runs that kernel only, as it is left in cache by the last run.
    pub fn step(&mut self, nodes: &[NodeId]) -> Result<Vec<f64>, ProfileError> {
        step(&mut self.kind, nodes)
    }
}

fn step(kind: &mut Kind<'_>, nodes: &[NodeId]) -> Result<Vec<f64>, ProfileError> {
    match kind {
        Kind::Resident(exec) => Ok(exec.step_nodes(nodes)?.kernel_ns),
        Kind::Live { model, exec, .. } => {
            let exec = exec.as_mut().ok_or_else(|| plan_error("a live step before any pass started"))?;
            if nodes != model.schedule() {
                return Err(plan_error("live memory runs whole steps only"));
            }
            Ok(exec.step()?.kernel_ns)
        }
        Kind::Isolated { alone: Some((exec, held)), .. } => {
            if nodes != [*held] {
                return Err(plan_error("an isolated engine runs the kernel it holds, and only it"));
            }
            Ok(exec.step_nodes(nodes)?.kernel_ns)
        }
        Kind::Isolated { live, alone: None } => step(live, nodes),
    }
}

fn plan_error(reason: &str) -> ProfileError {
    ExecError::Plan { reason: reason.to_string() }.into()
}

fn start<'m>(
    kind: &mut Kind<'m>,
    placement: &PoolAssignment,
    seed: u64,
    runner: &Option<SharedRunner>,
) -> Result<(), ProfileError> {
    match kind {
        Kind::Resident(exec) => {
            exec.set_placement(placement)?;
            exec.reset_state(seed)?;
        }
        Kind::Live { model, pools, exec } => {
            // The last pass's arenas go before the next ones are reserved.
            *exec = None;
            let plan = ExecPlan::resident(model, placement, pools.pools().len());
            let mut next = PlanExecutor::new(model, pools.clone(), plan, seed)?;
            next.set_warm_pool(true);
            next.set_runner(runner.clone());
            *exec = Some(next);
        }
        Kind::Isolated { live, alone } => {
            *alone = None;
            start(live, placement, seed, runner)?;
        }
    }
    Ok(())
}
