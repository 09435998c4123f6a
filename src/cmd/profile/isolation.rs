//! The summary's rows for a profile of kernels timed alone: how their all-DRAM times
//! compare with the reference pass's whole steps, overall and per op class.

use crate::table::Table;
use placer_profile::{ISOLATION_TOLERANCE, IsolationCheck, Profile};

/// Op classes listed, most kernels first; the rest are counted in one line.
const CLASSES_SHOWN: usize = 8;

pub(super) fn rows(t: &mut Table, model: &placer_ir::Model, profile: &Profile) -> anyhow::Result<()> {
    let Some(check) = IsolationCheck::of(model, profile)? else {
        return Ok(());
    };
    t.row(vec!["alone vs step".into(), check.summary()]);
    let pace = check.pace();
    let classes = check.classes();
    for c in classes.iter().take(CLASSES_SHOWN) {
        let shift = c.median_ratio / pace - 1.0;
        let verdict = if shift.abs() <= ISOLATION_TOLERANCE {
            "carries over".to_string()
        } else if shift > 0.0 {
            format!(
                "{:+.1}% alone beyond the pace; likely cause: in the step its producers left its inputs in cache",
                100.0 * shift
            )
        } else {
            format!(
                "{:+.1}% alone beyond the pace; likely cause: in the step it shares the caches and memory with its neighbours' data",
                100.0 * shift
            )
        };
        t.row(vec![
            format!("  {}", c.op),
            format!(
                "{} kernel(s), {} within ±{:.0}% once paced; median ratio {:.3}: {verdict}",
                c.kernels,
                c.within,
                100.0 * ISOLATION_TOLERANCE,
                c.median_ratio
            ),
        ]);
    }
    if classes.len() > CLASSES_SHOWN {
        let rest: usize = classes[CLASSES_SHOWN..].iter().map(|c| c.kernels).sum();
        t.row(vec!["  others".into(), format!("{rest} kernel(s) in {} more classes", classes.len() - CLASSES_SHOWN)]);
    }
    Ok(())
}
