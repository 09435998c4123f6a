//! One `placer solve`: budget, feasibility, baselines, the ILP (sync first when async is
//! asked for, as its warm start), the plan, and the checker's verdict on all of them.

use crate::SolveError;
use crate::baselines::Baseline;
use crate::budget::Budget;
use crate::check::{CheckReport, check};
use crate::cost::Costs;
use crate::ilp::{self, Formulation, IlpOptions};
use crate::instance::Instance;
use crate::layout::{Layout, Packing, lay_out, lay_out_packing};
use crate::placement::Placement;
use crate::plan::{Plan, PlanContext, Strategy};
use crate::pools::SolvePools;
use crate::repair;
use crate::stages::{Stage, StageTime, Stages};
use crate::two_lm;
use placer_ir::Model;
use placer_profile::Pin;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct SolveRequest<'a> {
    pub model: &'a Model,
    pub costs: &'a Costs,
    pub pools: SolvePools,
    pub budget: Budget,
    pub pins: Vec<Pin>,
    pub options: IlpOptions,
    /// The checkpoint the costs came from, recorded in the plan.
    pub profile: Option<String>,
    /// Lay out and check every baseline (to print, write or run them all). Otherwise
    /// only the fastest one the checker passes is, as the ILP's start: the others are
    /// placed and scored, and their outcome says so.
    pub every_baseline: bool,
}

#[derive(Debug, Clone)]
pub struct Candidate {
    pub name: String,
    /// The plan and the checker's report on it, or why the strategy has no plan.
    pub outcome: Result<(Plan, CheckReport), String>,
}

#[derive(Debug, Clone)]
pub struct SolveResult {
    pub budget_bytes: u64,
    pub peak_bytes: u64,
    /// The budget holds every tensor at every step: the plan keeps all in DRAM.
    pub no_placement_needed: bool,
    /// Everything in DRAM with no budget: the reference time, and its plan.
    pub all_dram_ns: f64,
    pub all_dram: Plan,
    pub plan: Plan,
    pub check: CheckReport,
    pub baselines: Vec<Candidate>,
    /// Where the solve's time went (also in the plan's `SolverReport::stages`).
    pub stages: Vec<StageTime>,
}

fn plan_and_check(
    req: &SolveRequest<'_>,
    inst: &Instance,
    placement: &Placement,
    layout: Layout,
    ctx: &PlanContext<'_>,
    ilp: Option<(&ilp::IlpOutcome, Option<(String, f64)>)>,
) -> (Plan, CheckReport) {
    let plan = Plan::with_layout(ctx, placement, ilp, layout);
    let report = check(req.model, &plan, req.costs, &req.pools, inst.capacity[0]);
    (plan, report)
}

fn overshoot_reason(over: u64, budget: u64) -> String {
    format!(
        "its DRAM arena still needs {} over the {} budget after moving the tensors packed above it out of DRAM",
        placer_units::fmt_bytes(over),
        placer_units::fmt_bytes(budget)
    )
}

/// The all-DRAM reference's name in the solve's stages.
const ALL_DRAM: &str = "all-dram";

/// Everything in DRAM with no budget: the reference placement, its layout packed as
/// `packing` asks, and its plan.
fn all_dram(
    req: &SolveRequest<'_>,
    unlimited: &Instance,
    packing: Packing,
    stages: &mut Stages,
) -> (Placement, Layout, Plan) {
    let placement = Placement::fixed(unlimited, &vec![0; unlimited.tensors.len()]);
    let reference = PlanContext {
        model: req.model,
        inst: unlimited,
        costs: req.costs,
        strategy: Strategy::AllDram,
        formulation: None,
        profile: req.profile.clone(),
    };
    let t0 = Instant::now();
    let layout = lay_out_packing(req.model, unlimited, &placement, packing);
    stages.since(Stage::LayOut, ALL_DRAM, t0);
    let plan = Plan::with_layout(&reference, &placement, None, layout.clone());
    (placement, layout, plan)
}

/// Every baseline at the request's budget, laid out and checked, and the all-DRAM
/// reference: what `placer run --compare-baselines` runs beside a plan.
pub fn baselines(req: &SolveRequest<'_>) -> Result<(Plan, Vec<Candidate>), SolveError> {
    let unlimited = Instance::new(req.model, req.costs, req.pools.clone(), u64::MAX, &req.pins);
    let (_, _, all_dram_plan) = all_dram(req, &unlimited, Packing::LargestFirst, &mut Stages::default());
    let mut inst = unlimited;
    inst.capacity[0] = req.budget.resolve(inst.peak_bytes).min(req.pools.pools[0].capacity);
    inst.feasibility()
        .map_err(|e| SolveError::Infeasible { reason: e.to_string(), smallest_feasible: Some(e.smallest_feasible) })?;
    let mut stages = Stages::default();
    let mut candidates: Vec<Candidate> =
        Baseline::ALL.iter().map(|&b| baseline_candidate(req, &inst, b, b.place(&inst), &mut stages).0).collect();
    candidates.push(two_lm_candidate(req, &inst, &all_dram_plan, &candidates));
    Ok((all_dram_plan, candidates))
}

/// The EMULATED 2LM baseline, made from all-slow's checked plan and checked itself. It
/// is a memory mode, not a placement: never a warm start, and not among the plans the
/// solver's result is held to.
fn two_lm_candidate(req: &SolveRequest<'_>, inst: &Instance, all_dram: &Plan, baselines: &[Candidate]) -> Candidate {
    let all_slow = baselines.iter().find(|c| c.name == Baseline::AllSlow.name()).map(|c| &c.outcome);
    let outcome = match all_slow {
        Some(Ok((slow, report))) if report.ok() => {
            two_lm::plan(req.model, slow, all_dram, req.costs, &req.pools).map(|plan| {
                let report = check(req.model, &plan, req.costs, &req.pools, inst.capacity[0]);
                (plan, report)
            })
        }
        _ => Err("all-slow, whose places it takes, has no plan at this budget".into()),
    };
    Candidate { name: two_lm::LABEL.into(), outcome }
}

/// One baseline's placement (`placed`, from `b.place`), fitted to the budget, planned and
/// checked; also the placement when the checker passed it.
fn baseline_candidate(
    req: &SolveRequest<'_>,
    inst: &Instance,
    b: Baseline,
    placed: Result<Placement, String>,
    stages: &mut Stages,
) -> (Candidate, Option<Placement>) {
    let ctx = PlanContext {
        model: req.model,
        inst,
        costs: req.costs,
        strategy: Strategy::Baseline(b),
        formulation: Some(Formulation::Static),
        profile: req.profile.clone(),
    };
    let mut good = None;
    let outcome = placed.and_then(|placement| {
        let t0 = Instant::now();
        let fitted = repair::fit_arena(req.model, inst, req.costs, placement);
        stages.since(Stage::LayOut, b.name(), t0);
        let (placement, layout, _) = fitted.map_err(|over| overshoot_reason(over, inst.capacity[0]))?;
        let t0 = Instant::now();
        let (plan, report) = plan_and_check(req, inst, &placement, layout, &ctx, None);
        stages.since(Stage::Check, b.name(), t0);
        if report.ok() {
            good = Some(placement);
        }
        Ok((plan, report))
    });
    (Candidate { name: b.name().to_string(), outcome }, good)
}

/// Runs the whole solve. `progress` receives one line per stage. A plan the checker
/// rejects is an error, never a result: no front end can write or run it by mistake.
pub fn solve(req: &SolveRequest<'_>, progress: &mut dyn FnMut(&str)) -> Result<SolveResult, SolveError> {
    req.options.check()?;
    let result = solve_unchecked(req, progress)?;
    if !result.check.ok() {
        return Err(SolveError::PlanCheck {
            count: result.check.problems.len(),
            problems: result.check.problems.iter().take(5).cloned().collect::<Vec<_>>().join("; "),
        });
    }
    Ok(result)
}

fn solve_unchecked(req: &SolveRequest<'_>, progress: &mut dyn FnMut(&str)) -> Result<SolveResult, SolveError> {
    let began = Instant::now();
    // The time limit bounds everything from here: baselines, every ILP stage, the
    // arena's fit, and the checks.
    let deadline = began + Duration::from_secs_f64(req.options.time_limit);
    let mut stages = Stages::default();
    let unlimited = Instance::new(req.model, req.costs, req.pools.clone(), u64::MAX, &req.pins);
    let peak = unlimited.peak_bytes;
    // A budget above what DRAM can hold is capped at DRAM's capacity.
    let asked = req.budget.resolve(peak);
    let budget = asked.min(req.pools.pools[0].capacity);
    if budget < asked {
        progress(&format!(
            "the budget ({}) is more than DRAM holds; planning for its capacity ({})",
            placer_units::fmt_bytes(asked),
            placer_units::fmt_bytes(budget)
        ));
    }
    let pinned_elsewhere = unlimited.tensors.iter().any(|t| t.pinned.is_some_and(|p| p != 0));
    // Where everything may fit, all-DRAM is packed as tightly as a plan: it may be the
    // plan. Otherwise it is only the reference, whose arena need only fit the pool.
    let may_fit = budget >= peak && !pinned_elsewhere;
    let t0 = Instant::now();
    let (all_dram, all_dram_layout, all_dram_plan) =
        all_dram(req, &unlimited, if may_fit { Packing::Tightest } else { Packing::LargestFirst }, &mut stages);
    let all_dram_seconds = t0.elapsed().as_secs_f64();
    let all_dram_ns = all_dram_plan.predicted.step_ns;
    let mut inst = unlimited;
    inst.capacity[0] = budget;
    let context = |strategy: Strategy, formulation: Option<Formulation>| PlanContext {
        model: req.model,
        inst: &inst,
        costs: req.costs,
        strategy,
        formulation,
        profile: req.profile.clone(),
    };
    // Everything fits at every step; it also has to pack into the budget, which
    // fragmentation can prevent even then (the ILP then moves a little out of DRAM).
    if may_fit && all_dram_plan.arena_bytes[0] <= budget {
        progress("the budget holds peak live memory: every tensor stays in DRAM");
        let t0 = Instant::now();
        let (plan, check) =
            plan_and_check(req, &inst, &all_dram, all_dram_layout, &context(Strategy::AllDram, None), None);
        stages.since(Stage::Check, "plan", t0);
        return Ok(SolveResult {
            budget_bytes: budget,
            peak_bytes: peak,
            no_placement_needed: true,
            all_dram_ns,
            all_dram: all_dram_plan,
            plan,
            check,
            baselines: Vec::new(),
            stages: stages.0,
        });
    }
    inst.feasibility()
        .map_err(|e| SolveError::Infeasible { reason: e.to_string(), smallest_feasible: Some(e.smallest_feasible) })?;

    // Baselines take milliseconds to place and score, and seconds each to lay out and
    // check on the largest graphs: that is done fastest first, and stops once one has
    // passed (it starts the ILP), unless every baseline is asked for; then it stops at a
    // quarter of the time limit.
    let t0 = Instant::now();
    let mut order: Vec<(f64, Baseline, Result<Placement, String>)> = Baseline::ALL
        .iter()
        .map(|&b| {
            let placed = b.place(&inst);
            (placed.as_ref().map_or(f64::INFINITY, |p| p.evaluate(&inst, req.costs).step_ns), b, placed)
        })
        .collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0));
    stages.since(Stage::Place, "baselines", t0);
    let mut baselines: Vec<Candidate> = Vec::new();
    let mut best: Option<(String, Placement, f64)> = None;
    // The quickest lay-out-and-check so far: what the next one costs at least, and what
    // the ILP's plan will cost at the end.
    let mut plan_seconds = f64::INFINITY;
    // Once one baseline has passed, more are laid out only within a quarter of the limit:
    // the rest of it is the ILP's.
    let baselines_until = deadline.min(began + Duration::from_secs_f64(req.options.time_limit * BASELINE_SHARE));
    for (predicted_ns, b, placed) in order {
        if let Some((first, _, _)) = best.as_ref().filter(|_| !req.every_baseline) {
            let outcome = Err(format!(
                "predicted {:.3} ms by its placement, no faster than {first}: not laid out or checked (--baselines lays out every baseline)",
                predicted_ns / 1e6
            ));
            baselines.push(Candidate { name: b.name().to_string(), outcome });
            continue;
        }
        let next_ends =
            Instant::now() + Duration::from_secs_f64(if plan_seconds.is_finite() { plan_seconds } else { 0.0 });
        if best.is_some() && next_ends > baselines_until {
            let outcome = Err("not laid out or checked: the time limit was reached first".to_string());
            baselines.push(Candidate { name: b.name().to_string(), outcome });
            continue;
        }
        let t0 = Instant::now();
        let (candidate, placement) = baseline_candidate(req, &inst, b, placed, &mut stages);
        plan_seconds = plan_seconds.min(t0.elapsed().as_secs_f64());
        if let (Some(placement), Ok((plan, _))) = (placement, &candidate.outcome)
            && best.as_ref().is_none_or(|(_, _, t)| plan.predicted.step_ns < *t)
        {
            best = Some((b.name().to_string(), placement, plan.predicted.step_ns));
        }
        baselines.push(candidate);
    }
    baselines.sort_by_key(|c| Baseline::ALL.iter().position(|b| b.name() == c.name));
    baselines.push(if req.every_baseline {
        two_lm_candidate(req, &inst, &all_dram_plan, &baselines)
    } else {
        let outcome = Err("not made: it takes all-slow's checked plan (--baselines lays out every baseline)".into());
        Candidate { name: two_lm::LABEL.into(), outcome }
    });
    let first_plan_seconds = best.as_ref().map(|_| began.elapsed().as_secs_f64());
    progress(&format!("baselines: {} placed in {:.0} ms", Baseline::ALL.len(), began.elapsed().as_secs_f64() * 1e3));
    // With no baseline that fits (pools too small for any static placement), the ILP
    // starts from nothing: moves may still make a plan possible.
    let best_baseline = best.clone();
    let (warm, warm_label) = match best {
        Some((name, placement, ns)) => {
            progress(&format!("warm start: {name}, predicted {:.3} ms", ns / 1e6));
            (Some(placement), Some((name, ns)))
        }
        None => {
            progress("no baseline fits: the solver starts without a plan");
            (None, None)
        }
    };

    // What is kept back from the ILP for the last stage: laying out and checking its
    // plan (and, at worst, a plan the guarantee returns instead). An async plan with
    // hundreds of moves lays out slower than a baseline, more so when its arena needs a
    // repair. Kept: the most of three times the quickest baseline's, four times the
    // all-DRAM reference's (every tensor, packed once), and 4% of the limit. On
    // DenseNet-264 b32 the plan took 1.4-3.7 s against greedy's 0.3-1.3 s and the
    // reference's 0.5-0.9 s.
    let reserve = if plan_seconds.is_finite() {
        (3.0 * plan_seconds).max(4.0 * all_dram_seconds).max(RESERVE_SHARE * req.options.time_limit)
    } else {
        0.0
    };
    let left = || deadline.saturating_duration_since(Instant::now()).as_secs_f64();
    let formulation = req.options.formulation;
    let (start, start_label) = if formulation == Formulation::Async
        && req.options.sync_first
        && req.options.time_limit >= SYNC_FIRST_MIN_SECONDS
        && !ilp::windowed(&inst, &req.options)
    {
        let sync_opts = IlpOptions {
            formulation: Formulation::Sync,
            time_limit: (req.options.time_limit / 3.0).min(left() - reserve).max(MIN_STAGE_SECONDS),
            log_file: req.options.log_file.as_ref().map(|p| p.with_extension("sync.log")),
            ..req.options.clone()
        };
        progress(&format!(
            "sync formulation first (its plan starts the async solve), limit {:.0} s",
            sync_opts.time_limit
        ));
        let sync = ilp::solve(&inst, warm.as_ref(), &sync_opts, progress)?;
        stages.0.extend(sync.stages.iter().cloned());
        let sync_ns = sync.placement.evaluate(&inst, req.costs).step_ns;
        progress(&format!("sync: {} in {:.1} s, predicted {:.3} ms", sync.status, sync.solve_seconds, sync_ns / 1e6));
        (Some(sync.placement), Some((format!("sync ILP ({})", sync.status), sync_ns)))
    } else {
        (warm, warm_label)
    };
    let opts = IlpOptions { time_limit: (left() - reserve).max(MIN_STAGE_SECONDS), ..req.options.clone() };
    progress(&format!(
        "{} formulation: solving (limit {:.0} s, gap {:.2}%)",
        formulation.name(),
        opts.time_limit,
        opts.gap * 100.0
    ));
    let outcome = ilp::solve(&inst, start.as_ref(), &opts, progress)?;
    stages.0.extend(outcome.stages.iter().cloned());
    // The plan has to pack into the budget too: what sticks out leaves DRAM.
    let t0 = Instant::now();
    let fitted = repair::fit_arena(req.model, &inst, req.costs, outcome.placement.clone());
    stages.since(Stage::LayOut, "plan", t0);
    let fitted = match fitted {
        Ok(fitted) => Some(fitted),
        Err(over) => {
            progress(&format!("the solver's plan is not used: {}", overshoot_reason(over, budget)));
            None
        }
    };
    let solver_plan = fitted.map(|(placement, layout, repaired)| {
        if let Some(r) = repaired {
            progress(&format!(
                "the plan's DRAM arena did not pack within the budget: {} tensors ({}) moved out of DRAM for their whole life",
                r.tensors,
                placer_units::fmt_bytes(r.bytes)
            ));
        }
        let ilp = Some((&outcome, start_label.clone()));
        let t0 = Instant::now();
        let (mut plan, report) = plan_and_check(req, &inst, &placement, layout, &context(Strategy::Ilp, Some(formulation)), ilp);
        stages.since(Stage::Check, "plan", t0);
        if let Some(s) = &mut plan.solver
            && repaired.is_some()
        {
            // The gaps are of the plan as repaired, which costs at least what it solved to.
            s.repaired = repaired;
            s.set_objective(s.objective_ns.max(plan.predicted.step_ns - s.base_ns));
        }
        (plan, report)
    });
    // The guarantee: never return a plan predicted slower than one the solve had. Their
    // predicted times are known already (a plan's is its placement's evaluation), so
    // only one that beats the solver's is laid out and checked.
    let mut seen: Vec<(String, Placement, f64)> = best_baseline.into_iter().collect();
    if formulation == Formulation::Async
        && let (Some(sync), Some((label, ns))) = (&start, &start_label)
    {
        seen.push((label.clone(), sync.clone(), *ns));
    }
    let solver_ns = solver_plan.as_ref().filter(|(_, r)| r.ok()).map_or(f64::INFINITY, |(p, _)| p.predicted.step_ns);
    let mut kept = None;
    while let Some(i) = faster_than(solver_ns, &seen.iter().map(|s| s.2).collect::<Vec<_>>()) {
        let (label, placement, _) = seen.swap_remove(i);
        let t0 = Instant::now();
        let layout = lay_out(req.model, &inst, &placement);
        // The plan returned instead of the solver's: the plan's stage.
        stages.since(Stage::LayOut, "plan", t0);
        if layout.arena_bytes[0] > budget {
            continue;
        }
        let ctx = context(Strategy::Ilp, Some(formulation));
        let t0 = Instant::now();
        let (other, other_report) =
            plan_and_check(req, &inst, &placement, layout, &ctx, Some((&outcome, start_label.clone())));
        stages.since(Stage::Check, "plan", t0);
        if other_report.ok() {
            kept = Some((label, other, other_report));
            break;
        }
    }
    let (mut plan, report) = match (kept, solver_plan) {
        (Some((label, mut other, other_report)), _) => {
            progress(&format!(
                "the solver's plan was predicted {:.3} ms, slower than {label} at {:.3} ms: returning {label}",
                solver_ns / 1e6,
                other.predicted.step_ns / 1e6
            ));
            if let Some(s) = &mut other.solver {
                s.kept = Some((label, solver_ns));
            }
            (other, other_report)
        }
        (None, Some(solved)) => solved,
        (None, None) => {
            return Err(SolveError::Solver {
                reason: "the solver's plan does not pack into the budget, and no baseline fits it".into(),
            });
        }
    };
    if let Some(s) = &mut plan.solver {
        s.total_seconds = began.elapsed().as_secs_f64();
        s.stages = stages.0.clone();
        if let Some(first) = first_plan_seconds {
            s.first_feasible_seconds = Some(first);
        }
    }
    Ok(SolveResult {
        budget_bytes: budget,
        peak_bytes: peak,
        no_placement_needed: false,
        all_dram_ns,
        all_dram: all_dram_plan,
        plan,
        check: report,
        baselines,
        stages: stages.0,
    })
}

/// The share of the time limit baselines may use once one of them has passed.
const BASELINE_SHARE: f64 = 0.25;
/// Below this time limit the async solve starts from the best baseline, not from the
/// sync stage's plan. On DenseNet-264 b32 at 25% with a 20 s limit, the sync stage took a
/// third of the time and returned greedy's plan unimproved; without it the proven gap
/// was 7.9% against 10.7%. Nor does a windowed solve start from it at any limit: the
/// bound's priced start, improved tensor by tensor, replaces it. On DenseNet-264 b32 at
/// 25% with 120 s the sync stage took 8.7 s and the solve proved 0.56% in 33 s; without
/// it, 0.76% in 18 s (docs/BENCHMARKS.md).
const SYNC_FIRST_MIN_SECONDS: f64 = 60.0;
/// The least share of the time limit kept back for laying out and checking the ILP's plan.
const RESERVE_SHARE: f64 = 0.04;

/// The least time an ILP stage is given when the deadline is (nearly) reached: enough
/// to build its model and hand back its start with the box bound.
const MIN_STAGE_SECONDS: f64 = 0.01;

/// Which of the plans predicted at `times` to return instead of the solver's own
/// (predicted at `solver_ns`): the fastest, if it is faster.
fn faster_than(solver_ns: f64, times: &[f64]) -> Option<usize> {
    times.iter().enumerate().filter(|(_, t)| **t < solver_ns).min_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::faster_than;

    #[test]
    fn the_solver_s_plan_is_kept_unless_a_seen_plan_is_predicted_faster() {
        assert_eq!(faster_than(19.172, &[19.120, 19.5]), Some(0), "the sync start was faster");
        assert_eq!(faster_than(19.0, &[19.3, 19.120, 19.05]), None, "the solver's plan was the fastest");
        assert_eq!(faster_than(19.2, &[19.3, 19.120, 19.05]), Some(2), "the fastest of the faster");
        assert_eq!(faster_than(19.120, &[19.120]), None, "a tie keeps the solver's plan");
        assert_eq!(faster_than(1.0, &[]), None);
    }
}
