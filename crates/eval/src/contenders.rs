//! Which plans run side by side, and under what names: a plan, the baselines the checker
//! passed at its budget, and all-DRAM as the reference, twice (A and A′).

use crate::EvalError;
use crate::compare::{ALL_DRAM, ALL_DRAM_AGAIN};
use crate::interleave::Contender;
use placer_host::Host;
use placer_ir::Model;
use placer_solve::{Budget, Candidate, IlpOptions, Plan, SolveRequest, SolveResult, Strategy};
use std::path::Path;

/// A plan's name in tables: the strategy, and the formulation for an ILP plan.
pub fn plan_label(plan: &Plan) -> String {
    if plan.memory_side_cache.is_some() {
        return placer_solve::TWO_LM_LABEL.to_string();
    }
    match plan.provenance.formulation {
        Some(f) if plan.provenance.strategy == Strategy::Ilp => format!("ilp ({})", f.name()),
        _ => plan.provenance.strategy.to_string(),
    }
}

/// A baseline that does not run beside the plan, and why.
#[derive(Debug, Clone, Copy)]
pub enum LeftOut<'a> {
    /// The plan names a profile that is no longer there: the baselines are costed by
    /// the cost model alone.
    ProfileGone { profile: &'a str },
    /// The checker found problems in the baseline's plan.
    FailedCheck { baseline: &'a str },
    /// The strategy could not place the model at this budget.
    NoPlan { baseline: &'a str, why: &'a str },
}

/// The solve's plan, every baseline the checker passed, and all-DRAM twice (unless the
/// plan already keeps everything in DRAM).
pub fn from_solve(result: &SolveResult) -> Vec<Contender> {
    let plan = Contender { name: plan_label(&result.plan), plan: result.plan.clone() };
    let baselines = checked(&result.baselines, &mut |_| {});
    if result.no_placement_needed {
        return [plan].into_iter().chain(baselines).collect();
    }
    [plan].into_iter().chain(around(baselines, &result.all_dram)).collect()
}

/// `baselines` between all-DRAM again (A′) and all-DRAM: the second copy says how fast
/// the host runs now against the profile (the anchor, [`crate::compare::Anchor`]) and,
/// set against the first, how far two runs of one plan differ in this run. Apart in the
/// round-robin, so the two do not always run back to back.
fn around(baselines: Vec<Contender>, all_dram: &Plan) -> Vec<Contender> {
    let copy = |name: &str| Contender { name: name.into(), plan: all_dram.clone() };
    [copy(ALL_DRAM_AGAIN)].into_iter().chain(baselines).chain([copy(ALL_DRAM)]).collect()
}

/// The baselines at `plan`'s budget and the all-DRAM reference twice, costed from the plan's
/// own profile when it is still there; `left_out` hears of each one that is not.
pub fn baselines_beside(
    model: &Model,
    host: &mut Host,
    plan: &Plan,
    left_out: &mut dyn FnMut(LeftOut<'_>),
) -> Result<Vec<Contender>, EvalError> {
    let (all_dram, candidates) = at_budget(model, host, plan, true, left_out)?;
    Ok(around(checked(&candidates, left_out), &all_dram))
}

/// All-DRAM twice (A′ and A), as the run's pace reference: it runs the profile's
/// reference placement, every tensor in DRAM, in whole steps as the plan runs. A gives
/// the in-situ record its all-DRAM kernels; A′ anchors the plan's step to the run's pace
/// ([`crate::compare::Anchor`]) and, set against A, is the floor under that error.
pub fn all_dram_beside(
    model: &Model,
    host: &mut Host,
    plan: &Plan,
    left_out: &mut dyn FnMut(LeftOut<'_>),
) -> Result<Vec<Contender>, EvalError> {
    let (all_dram, _) = at_budget(model, host, plan, false, left_out)?;
    Ok(around(Vec::new(), &all_dram))
}

/// All-DRAM and the baselines at `plan`'s budget (every one laid out and checked with
/// `every_baseline`), costed from the plan's own profile when it is still there.
fn at_budget(
    model: &Model,
    host: &mut Host,
    plan: &Plan,
    every_baseline: bool,
    left_out: &mut dyn FnMut(LeftOut<'_>),
) -> Result<(Plan, Vec<Candidate>), EvalError> {
    let profile = plan.provenance.profile.as_deref().map(Path::new).filter(|p| p.exists());
    if let (Some(named), None) = (&plan.provenance.profile, profile) {
        left_out(LeftOut::ProfileGone { profile: named });
    }
    // No probe: the baselines are static placements, which never move a tensor.
    let read = profile.map(|p| placer_profile::load_checkpoint(p).map(|read| (p, read))).transpose()?;
    let inputs = placer_solve::solve_inputs(model, host, read, &[], true, &mut |_| {})?;
    let request = SolveRequest {
        model,
        costs: &inputs.costs,
        pools: inputs.pools,
        budget: Budget::Bytes(plan.inputs.budget_bytes),
        pins: inputs.pins,
        options: IlpOptions::default(),
        profile: profile.map(|p| p.display().to_string()),
        every_baseline,
    };
    Ok(placer_solve::baselines(&request)?)
}

/// The candidates the checker passed, in order.
fn checked(candidates: &[Candidate], left_out: &mut dyn FnMut(LeftOut<'_>)) -> Vec<Contender> {
    let mut out = Vec::new();
    for c in candidates {
        match &c.outcome {
            Ok((plan, check)) if check.ok() => out.push(Contender { name: c.name.clone(), plan: plan.clone() }),
            Ok(_) => left_out(LeftOut::FailedCheck { baseline: &c.name }),
            Err(why) => left_out(LeftOut::NoPlan { baseline: &c.name, why }),
        }
    }
    out
}
