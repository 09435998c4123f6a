//! plan.json: where every tensor lives over the schedule, every move, and what the plan
//! is predicted to cost. Written by `placer solve`, read by the checker and (later) by
//! the executor.

use crate::SolveError;
use crate::baselines::Baseline;
use crate::cost::{CostModel, Costs, TimeSource};
use crate::ilp::{Formulation, IlpOutcome, LagrangianReport, ModelSize, WindowReport};
use crate::instance::Instance;
use crate::layout::{Layout, lay_out};
use crate::placement::{MoveKind, Placement};
use crate::pools::PoolFigures;
use placer_ir::Model;
use serde::{Deserialize, Serialize};
use std::path::Path;

pub const PLAN_FORMAT: &str = "placer-plan";
/// Version 2 added arena offsets (`offset`, `scratch_offset`, `arena_bytes`).
pub const PLAN_VERSION: u32 = 3;

/// How a plan's placement was chosen. Written by its name in plan.json (`ilp`,
/// `all-dram`, `2lm` or a baseline's), and an unknown name is an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum Strategy {
    /// The ILP's placement and moves.
    Ilp,
    /// Everything in DRAM with no budget: the reference every plan is compared with.
    AllDram,
    /// No placement: DRAM as a hardware cache in front of the slow pool (2LM), predicted.
    TwoLm,
    /// A placement rule without the ILP ([`Baseline`]).
    Baseline(Baseline),
}

impl Strategy {
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Ilp => "ilp",
            Strategy::AllDram => "all-dram",
            Strategy::TwoLm => "2lm",
            Strategy::Baseline(b) => b.name(),
        }
    }

    pub fn parse(name: &str) -> Option<Strategy> {
        match name {
            "ilp" => Some(Strategy::Ilp),
            "all-dram" => Some(Strategy::AllDram),
            "2lm" => Some(Strategy::TwoLm),
            other => Baseline::parse(other).map(Strategy::Baseline),
        }
    }
}

impl From<Strategy> for &'static str {
    fn from(s: Strategy) -> &'static str {
        s.name()
    }
}

impl TryFrom<String> for Strategy {
    type Error = String;

    fn try_from(name: String) -> Result<Strategy, String> {
        Strategy::parse(&name).ok_or_else(|| format!("unknown strategy '{name}'"))
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a plan comes from: the format, the model, how its placement was chosen, and
/// the profile its kernel times come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    pub format: String,
    pub version: u32,
    pub model: String,
    pub model_hash: String,
    pub strategy: Strategy,
    pub formulation: Option<Formulation>,
    /// True when a pool is emulated: the plan is then for the emulated device model,
    /// not a measurement of real hardware.
    pub emulated: bool,
    pub note: String,
    /// The checkpoint the kernel times come from, if any.
    pub profile: Option<String>,
}

/// What a plan was solved against: the pools and what moving between them costs, the
/// budget, and the cost model behind every kernel time not measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanInputs {
    pub pools: Vec<PoolFigures>,
    /// Bytes each pool may hold: the budget for DRAM, capacity for the others.
    pub capacity: Vec<u64>,
    pub budget_bytes: u64,
    pub peak_live_bytes: u64,
    pub move_ns_per_byte: Vec<Vec<f64>>,
    pub moves_measured: bool,
    /// CPU time a background copy takes per byte (`SolvePools::copy_cpu_ns_per_byte`).
    pub copy_cpu_ns_per_byte: Vec<Vec<f64>>,
    /// Whether the kernels' interference shares were measured by the profile.
    pub interference_calibrated: bool,
    pub cost_model: CostModel,
}

/// A placement plan (plan.json): where it comes from, what it was planned against, and
/// the plan itself. The first two are flattened into the file, whose fields stay as
/// they were before the split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    #[serde(flatten)]
    pub provenance: Provenance,
    #[serde(flatten)]
    pub inputs: PlanInputs,
    pub predicted: Predicted,
    pub solver: Option<SolverReport>,
    pub kernels: Vec<PlanKernel>,
    pub tensors: Vec<PlanTensor>,
    pub moves: Vec<PlanMove>,
    /// Predicted DRAM bytes in use at each step (scratch and in-flight copies included).
    pub dram_bytes: Vec<u64>,
    pub pool_peak_bytes: Vec<u64>,
    /// Bytes each pool's arena reserves: every span and scratch sits at a planned
    /// offset in it, so this is what the plan uses, fragmentation included. DRAM's is
    /// within the budget.
    pub arena_bytes: Vec<u64>,
    /// The most bytes live in one phase (a blocking copy holds both ends): what a
    /// perfect packing would need.
    pub phase_peak_bytes: Vec<u64>,
    /// Set for the EMULATED 2LM baseline: DRAM is a cache in front of this pool, and
    /// kernel times include its waits (crate::two_lm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_side_cache: Option<SideCache>,
}

impl Plan {
    /// As the solver scores a step (its base plus what the placement adds): the proven
    /// floor no plan at this budget scores under, and its score of its own plan. The
    /// plan's predicted step (`predicted.step_ns`, the profile replayed) can differ from
    /// the score by a few percent. `None` for a plan no ILP made, or one written before
    /// the base was recorded.
    pub fn solver_floor_and_score_ns(&self) -> Option<(f64, f64)> {
        self.solver.as_ref().filter(|s| s.base_ns > 0.0).map(|s| (s.base_ns + s.bound_ns, s.base_ns + s.objective_ns))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Predicted {
    /// Σ max(kernel + slowdown from copies beside it, those copies) + blocking moves +
    /// `step_overhead_ns`.
    pub step_ns: f64,
    pub kernel_ns: f64,
    /// Σ of what background copies slow their kernels by.
    pub interference_ns: f64,
    pub sync_move_ns: f64,
    /// Copy time that did not fit under its kernel.
    pub exposed_copy_ns: f64,
    pub measured_kernels: usize,
    /// Kernel times a screening design predicted (validated on held-out measurements).
    #[serde(default)]
    pub predicted_kernels: usize,
    pub estimated_kernels: usize,
    /// What a step costs beyond its kernels, as the profile measured it
    /// (`placer_profile::overhead`): the time between kernels, and the sum of medians'
    /// shortfall. 0 for plans from an older profile, or none.
    #[serde(default)]
    pub step_overhead_ns: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SolverReport {
    pub status: String,
    /// What the placement adds to the all-DRAM step time, as the solver scored it.
    pub objective_ns: f64,
    pub bound_ns: f64,
    /// The all-DRAM step the objective adds to, as the solver scored it: no plan at this
    /// budget scores under `base_ns + bound_ns` (`Plan::solver_floor_and_score_ns`).
    #[serde(default)]
    pub base_ns: f64,
    /// Relative gap on `objective_ns`.
    pub gap: f64,
    /// Relative gap on the whole step time (objective + every kernel's base time).
    pub gap_of_step: f64,
    pub build_seconds: f64,
    pub solve_seconds: f64,
    /// From the start of `solve` (instance, baselines, every ILP stage) to the plan.
    pub total_seconds: f64,
    /// From the start of `solve` to the first feasible plan: the warm start's
    /// heuristics, or HiGHS's first solution when it had no start.
    pub first_feasible_seconds: Option<f64>,
    pub size: ModelSize,
    /// The placement HiGHS started from, and its predicted step time.
    pub warm_start: Option<(String, f64)>,
    /// The window-by-window improvement of the start (large async models).
    pub windows: Option<WindowReport>,
    /// The Lagrangian bound (large async models), whether or not it was the best bound.
    #[serde(default)]
    pub lagrangian: Option<LagrangianReport>,
    /// Tensors moved out of DRAM after the solve so that its arena packs within the budget.
    #[serde(default)]
    pub repaired: Option<crate::repair::Repair>,
    /// When the solver's own plan was predicted slower than a plan the solve already
    /// had (a baseline, or the sync plan an async solve started from), that plan is
    /// returned instead: its name, and the solver's plan's predicted step time.
    #[serde(default)]
    pub kept: Option<(String, f64)>,
    /// Where the whole solve's time went, stage by stage, in the order they ran.
    #[serde(default)]
    pub stages: Vec<crate::StageTime>,
}

impl SolverReport {
    /// Sets what the placement adds (a repair can raise it after the solve), and both
    /// gaps against the bound.
    pub fn set_objective(&mut self, objective_ns: f64) {
        self.objective_ns = objective_ns;
        let over = objective_ns - self.bound_ns;
        self.gap = if objective_ns.abs() > 0.0 { over / objective_ns.abs() } else { 0.0 };
        self.gap_of_step = over.max(0.0) / (objective_ns + self.base_ns);
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanKernel {
    pub step: usize,
    pub node: String,
    /// Pool of each operand, in `Node::operands` order.
    pub config: Vec<String>,
    pub time_ns: f64,
    pub source: TimeSource,
    /// Async copies that run during this kernel, ns.
    pub copies_ns: f64,
    /// What those copies slow the kernel by, ns.
    pub interference_ns: f64,
    /// Where its scratch sits in DRAM's arena.
    pub scratch_offset: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanSpan {
    pub from: usize,
    pub to: usize,
    pub pool: String,
    /// Where it sits in the pool's arena.
    pub offset: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanTensor {
    pub name: String,
    /// Bytes as allocated (page-rounded).
    pub bytes: u64,
    pub placement: Vec<PlanSpan>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanMove {
    pub tensor: String,
    pub from: String,
    pub to: String,
    pub bytes: u64,
    pub kind: MoveKind,
    /// The tensor is in `to` from this step on (the schedule length: end of the step).
    pub before_step: usize,
    /// Async: the step whose kernel the copy overlaps.
    pub overlaps: Option<usize>,
}

/// What went into a plan besides the placement.
#[derive(Debug, Clone)]
pub struct PlanContext<'a> {
    pub model: &'a Model,
    pub inst: &'a Instance,
    pub costs: &'a Costs,
    pub strategy: Strategy,
    pub formulation: Option<Formulation>,
    pub profile: Option<String>,
}

impl Plan {
    pub fn new(
        ctx: &PlanContext<'_>,
        placement: &Placement,
        ilp: Option<(&IlpOutcome, Option<(String, f64)>)>,
    ) -> Plan {
        Plan::with_layout(ctx, placement, ilp, lay_out(ctx.model, ctx.inst, placement))
    }

    /// As [`Plan::new`], with the placement's layout already made.
    pub fn with_layout(
        ctx: &PlanContext<'_>,
        placement: &Placement,
        ilp: Option<(&IlpOutcome, Option<(String, f64)>)>,
        layout: Layout,
    ) -> Plan {
        let inst = ctx.inst;
        let names = inst.pools.names();
        let eval = placement.evaluate(inst, ctx.costs);
        let kernels: Vec<PlanKernel> = inst
            .kernels
            .iter()
            .enumerate()
            .map(|(i, k)| PlanKernel {
                step: i,
                node: k.name.clone(),
                config: placement.config(inst, i).iter().map(|&p| names[p as usize].clone()).collect(),
                time_ns: eval.kernel_ns[i],
                source: eval.sources[i],
                copies_ns: eval.async_ns[i],
                interference_ns: eval.interference_ns[i],
                scratch_offset: layout.scratch[i],
            })
            .collect();
        let tensors = inst
            .tensors
            .iter()
            .zip(&placement.spans)
            .zip(&layout.offsets)
            .map(|((t, spans), offsets)| PlanTensor {
                name: t.name.clone(),
                bytes: t.bytes,
                placement: spans
                    .iter()
                    .enumerate()
                    .map(|(j, &(from, pool))| PlanSpan {
                        from,
                        to: spans.get(j + 1).map_or(t.last, |s| s.0 - 1),
                        pool: names[pool as usize].clone(),
                        offset: offsets[j],
                    })
                    .collect(),
            })
            .collect();
        let moves = placement
            .moves
            .iter()
            .map(|m| PlanMove {
                tensor: inst.tensors[m.tensor].name.clone(),
                from: names[m.from as usize].clone(),
                to: names[m.to as usize].clone(),
                bytes: inst.tensors[m.tensor].bytes,
                kind: m.kind,
                before_step: m.at,
                overlaps: (m.kind == MoveKind::Async).then(|| m.at - 1),
            })
            .collect();
        let kernel_ns: f64 = eval.kernel_ns.iter().sum();
        let slowed: Vec<f64> = eval.kernel_ns.iter().zip(&eval.interference_ns).map(|(k, i)| k + i).collect();
        let hidden: f64 = slowed.iter().zip(&eval.async_ns).map(|(k, a)| k.max(*a)).sum();
        let interference_ns: f64 = eval.interference_ns.iter().sum();
        let emulated = inst.pools.any_emulated();
        Plan {
            provenance: Provenance {
                format: PLAN_FORMAT.into(),
                version: PLAN_VERSION,
                model: ctx.model.name().to_string(),
                model_hash: ctx.model.content_hash(),
                strategy: ctx.strategy,
                formulation: ctx.formulation,
                emulated,
                note: if emulated {
                    "EMULATED: a pool's timing is emulated by a device model (docs/hosts.md); times are predictions for its \
                     device model, not measurements of that device"
                        .into()
                } else {
                    String::new()
                },
                profile: ctx.profile.clone(),
            },
            inputs: PlanInputs {
                pools: inst.pools.pools.clone(),
                capacity: inst.capacity.clone(),
                budget_bytes: inst.capacity[0],
                peak_live_bytes: inst.peak_bytes,
                move_ns_per_byte: inst.pools.move_ns_per_byte.clone(),
                moves_measured: inst.pools.moves_measured,
                copy_cpu_ns_per_byte: inst.pools.copy_cpu_ns_per_byte.clone(),
                interference_calibrated: ctx.costs.interference_calibrated,
                cost_model: ctx.costs.model.clone(),
            },
            predicted: Predicted {
                step_ns: eval.step_ns,
                kernel_ns,
                interference_ns,
                sync_move_ns: eval.sync_ns,
                exposed_copy_ns: hidden - kernel_ns - interference_ns,
                measured_kernels: eval.count(TimeSource::Measured),
                predicted_kernels: eval.count(TimeSource::Predicted),
                estimated_kernels: eval.count(TimeSource::Estimated),
                step_overhead_ns: ctx.costs.step_overhead_ns,
            },
            solver: ilp.map(|(o, warm)| {
                let mut report = SolverReport {
                    status: o.status.clone(),
                    objective_ns: o.objective_ns,
                    bound_ns: o.bound_ns,
                    base_ns: o.base_ns,
                    gap: 0.0,
                    gap_of_step: 0.0,
                    build_seconds: o.build_seconds,
                    solve_seconds: o.solve_seconds,
                    total_seconds: o.build_seconds + o.solve_seconds,
                    first_feasible_seconds: o.first_feasible_seconds,
                    size: o.size,
                    warm_start: warm,
                    windows: o.windows,
                    lagrangian: o.lagrangian,
                    repaired: None,
                    kept: None,
                    stages: Vec::new(),
                };
                report.set_objective(o.objective_ns);
                report
            }),
            kernels,
            tensors,
            moves,
            pool_peak_bytes: (0..inst.pools.len()).map(|p| eval.peak(p)).collect(),
            dram_bytes: eval.bytes[0].clone(),
            arena_bytes: layout.arena_bytes,
            phase_peak_bytes: layout.phase_peak_bytes,
            memory_side_cache: None,
        }
    }

    /// Writes atomically ([`placer_files::write_atomic`]).
    pub fn save(&self, path: &Path) -> Result<(), SolveError> {
        let err = |reason: String| SolveError::PlanFile { path: path.to_path_buf(), reason };
        let text = serde_json::to_string_pretty(self).map_err(|e| err(e.to_string()))?;
        placer_files::write_atomic(path, text).map_err(|e| err(e.io.to_string()))
    }

    pub fn load(path: &Path) -> Result<Plan, SolveError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SolveError::PlanFile { path: path.to_path_buf(), reason: e.to_string() })?;
        Plan::parse(&text, path)
    }

    /// A plan from plan.json text (`path` names it in messages), refused when it is
    /// not this placer's plan format and version.
    pub fn parse(text: &str, path: &Path) -> Result<Plan, SolveError> {
        let err = |reason: String| SolveError::PlanFile { path: path.to_path_buf(), reason };
        let plan: Plan = serde_json::from_str(text).map_err(|e| err(e.to_string()))?;
        if plan.provenance.format != PLAN_FORMAT || plan.provenance.version != PLAN_VERSION {
            return Err(err(format!(
                "not a {PLAN_FORMAT} version {PLAN_VERSION} file (format '{}', version {})",
                plan.provenance.format, plan.provenance.version
            )));
        }
        Ok(plan)
    }
}

/// plan.json's record of the cache a 2LM plan runs behind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideCache {
    /// The pool behind the cache: every tensor placed there is reached through it.
    pub pool: String,
    pub cache_bytes: u64,
    pub line_bytes: u64,
}
