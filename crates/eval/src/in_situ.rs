//! A plan's run as an in-situ record ([`placer_profile::InSitu`]): each kernel's time as
//! it ran in the plan, for `placer compare` to judge a profile against, and all-DRAM's
//! beside it when it ran, twice (the host's pace in the run, and its floor).

use crate::compare::{ALL_DRAM, ALL_DRAM_AGAIN};
use crate::{EvalError, Measured};
use placer_exec::Stats;
use placer_ir::Model;
use placer_pools::PoolSet;
use placer_profile::{IN_SITU_FORMAT, IN_SITU_VERSION, InSitu, InSituKernel, PoolInfo};
use placer_solve::Plan;

/// The first of `measured`, a run of `plan` on `pools`, kernel by kernel over its timed
/// steps; all-DRAM's kernels from the same run, when it is among them.
pub fn in_situ(
    model: &Model,
    plan: &Plan,
    runs: &[Measured],
    pools: &PoolSet,
    host_fingerprint: &str,
) -> Result<InSitu, EvalError> {
    let measured = runs.first().ok_or_else(|| EvalError::Usage { reason: "no plan was run".into() })?;
    let names: Vec<&str> = pools.pools().iter().map(|p| p.name.as_str()).collect();
    let usage = |reason: String| EvalError::Usage { reason };
    let steps = &measured.report.steps;
    let mut kernels = Vec::with_capacity(plan.kernels.len());
    for (i, k) in plan.kernels.iter().enumerate() {
        let config = k
            .config
            .iter()
            .map(|pool| {
                names.iter().position(|n| n == pool).map(|p| p as u16).ok_or_else(|| {
                    usage(format!("the plan puts kernel {} in pool '{pool}', which this host does not have", k.node))
                })
            })
            .collect::<Result<Vec<u16>, EvalError>>()?;
        let samples: Vec<f64> = steps.iter().filter_map(|s| s.kernel_ns.get(i).copied()).collect();
        let stats = Stats::of(&samples).ok_or_else(|| usage("the run has no timed steps".into()))?;
        let op = model.node_id(&k.node).map(|n| model.node(n).op.to_string()).unwrap_or_default();
        kernels.push(InSituKernel {
            step: k.step,
            node: k.node.clone(),
            op,
            config,
            median_ns: stats.median,
            mad_ns: stats.mad,
            count: stats.count as u32,
            beside_copy: k.copies_ns > 0.0,
            charged_ns: k.interference_ns,
        });
    }
    // Kernels run in schedule order in every plan: kernel i is the schedule's node i.
    let medians_of = |name: &str| -> std::collections::BTreeMap<String, f64> {
        runs.iter()
            .skip(1)
            .find(|m| m.name == name)
            .map(|m| {
                model.schedule().iter().zip(&m.kernel_ns).map(|(&n, &ns)| (model.node(n).name.clone(), ns)).collect()
            })
            .unwrap_or_default()
    };
    let bytes = serde_json::to_vec(plan).map_err(|e| usage(format!("the plan does not serialise: {e}")))?;
    Ok(InSitu {
        format: IN_SITU_FORMAT.into(),
        version: IN_SITU_VERSION,
        model_name: model.name().to_string(),
        model_hash: model.content_hash(),
        host_fingerprint: host_fingerprint.to_string(),
        pools: PoolInfo::of(pools),
        plan: format!("{} at a budget of {} B", measured.name, plan.inputs.budget_bytes),
        plan_digest: InSitu::digest(&bytes),
        steps: steps.len() as u32,
        kernels,
        reference_ns: medians_of(ALL_DRAM),
        reference_again_ns: medians_of(ALL_DRAM_AGAIN),
    })
}
