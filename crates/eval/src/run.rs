//! `placer run` as library calls: a model's training steps with every tensor of a role in
//! a chosen pool, or a plan executed (beside the baselines at its budget, if asked).

use crate::EvalError;
use crate::contenders::{LeftOut, all_dram_beside, baselines_beside, plan_label};
use crate::interleave::{Contender, MeasureOptions, Measured, run_interleaved};
use placer_exec::{Executor, PoolAssignment, RunOptions, RunReport};
use placer_host::{Host, HostError};
use placer_ir::{Model, Role};
use placer_pools::{PoolId, PoolSet};
use placer_solve::Plan;

/// Every tensor in pool 0 (local DRAM), then each `ROLE=POOL` rule in order (`all=POOL`
/// for every tensor), checked against the model's roles and the host's pools; later
/// rules override earlier ones.
pub fn assign_roles(model: &Model, pools: &PoolSet, rules: &[String]) -> Result<PoolAssignment, EvalError> {
    let mut assignment = PoolAssignment::all_in(model, PoolId(0));
    for rule in rules {
        let (role, pool) = rule
            .split_once('=')
            .ok_or_else(|| HostError::Usage { reason: format!("--place '{rule}': expected ROLE=POOL") })?;
        let pool = pools.find(pool).map_err(|source| EvalError::Place { rule: rule.clone(), source })?;
        let role = match role {
            "all" => None,
            name => Some(Role::parse(name).ok_or_else(|| HostError::Usage {
                reason: format!(
                    "--place {rule}: unknown role '{name}' (roles: all, {})",
                    Role::ALL.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(", ")
                ),
            })?),
        };
        for (slot, tensor) in assignment.0.iter_mut().zip(model.tensors()) {
            if role.is_none_or(|r| tensor.role == r) {
                *slot = pool;
            }
        }
    }
    Ok(assignment)
}

/// A plain run's report, and the executor that made it (its pools, with their peaks and
/// page placement, are part of what is shown).
#[derive(Debug)]
pub struct PlainRun<'m> {
    pub report: RunReport,
    pub executor: Executor<'m>,
    /// The host's activity just before the timed steps ([`crate::check_host`]).
    pub host: Option<placer_host::HostActivity>,
}

/// Runs `options.warmup` untimed and `options.iterations` timed training steps of
/// `model` with tensors placed by `rules` (see [`assign_roles`]).
pub fn run_plain<'m>(
    model: &'m Model,
    pools: PoolSet,
    rules: &[String],
    options: &RunOptions,
    require_quiet: bool,
) -> Result<PlainRun<'m>, EvalError> {
    let assignment = assign_roles(model, &pools, rules)?;
    let mut executor = Executor::new(model, pools, &assignment, options.seed).map_err(EvalError::run)?;
    let host = crate::check_host("before the run", require_quiet)?;
    let report = executor.run(options).map_err(EvalError::run)?;
    Ok(PlainRun { report, executor, host })
}

/// What running a plan tells its caller before it is done.
#[derive(Debug, Clone, Copy)]
pub enum PlanRunEvent<'a> {
    /// A baseline asked for will not run beside the plan.
    LeftOut(LeftOut<'a>),
    /// A line of progress from the interleaved runs.
    Progress(&'a str),
}

/// What runs beside a plan, interleaved with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beside {
    Nothing,
    /// All-DRAM twice: the pace reference of an in-situ record ([`crate::in_situ`]) and
    /// the anchor of the plan's step.
    AllDram,
    /// Every baseline the checker passes at the plan's budget, and all-DRAM twice.
    Baselines,
}

/// Executes `plan` for real on `host`, with what `beside` asks interleaved. The plan is
/// measured first in the result.
pub fn run_plan(
    model: &Model,
    host: &mut Host,
    plan: Plan,
    beside: Beside,
    options: &MeasureOptions,
    events: &mut dyn FnMut(PlanRunEvent<'_>),
) -> Result<Vec<Measured>, EvalError> {
    let mut contenders = vec![Contender { name: plan_label(&plan), plan }];
    {
        let mut left_out = |l: LeftOut<'_>| events(PlanRunEvent::LeftOut(l));
        match beside {
            Beside::Nothing => {}
            Beside::AllDram => contenders.extend(all_dram_beside(model, host, &contenders[0].plan, &mut left_out)?),
            Beside::Baselines => {
                let baselines = baselines_beside(model, host, &contenders[0].plan, &mut left_out)?;
                contenders.extend(baselines);
            }
        }
    }
    let mut pools = || host.pool_set().map_err(EvalError::from);
    run_interleaved(model, &mut pools, &contenders, options, &mut |line| events(PlanRunEvent::Progress(line)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_pools::{Pool, PoolKind};

    fn pools() -> PoolSet {
        PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 1 << 30), Pool::new("pmem", PoolKind::Pmem, 1 << 30)])
    }

    #[test]
    fn roles_go_where_the_rules_say_and_later_rules_win() -> Result<(), Box<dyn std::error::Error>> {
        let model = placer_zoo::build("lenet-mnist", 2)?;
        let rules = ["all=pmem".to_string(), "weight=dram".to_string()];
        let assignment = assign_roles(&model, &pools(), &rules)?;
        for (pool, tensor) in assignment.0.iter().zip(model.tensors()) {
            let expected = if tensor.role == Role::Weight { PoolId(0) } else { PoolId(1) };
            assert_eq!(*pool, expected, "{}", tensor.name);
        }
        Ok(())
    }

    #[test]
    fn bad_rules_are_refused_with_the_rule_named() -> Result<(), Box<dyn std::error::Error>> {
        let model = placer_zoo::build("lenet-mnist", 2)?;
        let refused = |rule: &str| match assign_roles(&model, &pools(), &[rule.to_string()]) {
            Ok(_) => panic!("{rule} was accepted"),
            Err(e) => e,
        };
        assert!(matches!(refused("weight"), EvalError::Host(e) if matches!(*e, HostError::Usage { .. })));
        assert!(matches!(refused("bogus=pmem"), EvalError::Host(e) if e.to_string().contains("unknown role")));
        let unknown_pool = refused("weight=hbm");
        assert!(matches!(unknown_pool, EvalError::Place { ref rule, .. } if rule == "weight=hbm"));
        Ok(())
    }
}
