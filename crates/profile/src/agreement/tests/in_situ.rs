//! A profile against a plan's run (`compare_in_situ`), on LeNet b2.

use super::*;
use crate::record::{IN_SITU_FORMAT, IN_SITU_VERSION, InSitu, InSituKernel};
use crate::tasks::signature;

/// LeNet b2, and a profile of it that measured every node with all operands in
/// DRAM: node i at 100·(i+1) µs.
pub(in crate::agreement) fn lenet() -> (placer_ir::Model, Profile) {
    let model = placer_zoo::build("lenet-mnist", 2).expect("zoo model");
    let ms = model
        .schedule()
        .iter()
        .enumerate()
        .map(|(i, &n)| Measurement {
            signature: signature(&model, n),
            config: vec![0; model.node(n).operands().len()],
            node: model.node(n).name.clone(),
            ..m(0, 100.0 * (i + 1) as f64, 1.0, 20)
        })
        .collect();
    let mut p = profile(8, ms);
    p.header.model_hash = model.content_hash();
    p.header.model_name = model.name().to_string();
    p.model_json = Some(model.to_json());
    (model, p)
}

/// A run of that model: every kernel in DRAM, at the profile's time × `factor(step)`.
pub(in crate::agreement) fn run(model: &placer_ir::Model, digest: &str, factor: impl Fn(usize) -> f64) -> InSitu {
    let kernels = model
        .schedule()
        .iter()
        .enumerate()
        .map(|(step, &n)| InSituKernel {
            step,
            node: model.node(n).name.clone(),
            op: model.node(n).op.to_string(),
            config: vec![0; model.node(n).operands().len()],
            median_ns: 100e3 * (step + 1) as f64 * factor(step),
            mad_ns: 1e3,
            count: 20,
            beside_copy: step == 3,
            charged_ns: 0.0,
        })
        .collect();
    InSitu {
        format: IN_SITU_FORMAT.into(),
        version: IN_SITU_VERSION,
        model_name: model.name().to_string(),
        model_hash: model.content_hash(),
        host_fingerprint: "host-a".into(),
        pools: pools(),
        plan: "ilp (sync) at a budget of 1 B".into(),
        plan_digest: digest.into(),
        steps: 20,
        kernels,
        reference_ns: Default::default(),
        reference_again_ns: Default::default(),
    }
}

#[test]
fn a_profile_that_timed_every_kernel_as_it_ran_agrees() -> Result<(), ProfileError> {
    let (model, p) = lenet();
    let r = compare_in_situ(&run(&model, "d", |_| 1.0), &p, None, &CompareOptions::default())?;
    assert_eq!(
        (r.kernels, r.unknown, r.all.rows, r.measured.rows, r.predicted.rows),
        (model.schedule().len(), 0, model.schedule().len(), model.schedule().len(), 0)
    );
    assert_eq!((r.all.within_tolerance, r.all.median_ratio), (Some(1.0), Some(1.0)));
    assert_eq!(r.beside_copy.rows, 1);
    assert!(r.meets, "{}", r.verdict);
    assert!(r.verdict.contains("; no noise floor;"), "{}", r.verdict);
    // Every op of the model is a group, and the groups hold every row.
    assert_eq!(r.per_op.iter().map(|g| g.agreement.rows).sum::<usize>(), r.all.rows);
    assert_eq!(r.per_config.iter().map(|g| g.agreement.rows).sum::<usize>(), r.all.rows);
    Ok(())
}

#[test]
fn kernels_slower_in_the_plan_disagree_unless_the_floor_is_as_wide() -> Result<(), ProfileError> {
    let (model, p) = lenet();
    let options = CompareOptions::default();
    // Half the kernels ran 20% slower in the plan than the profile timed them.
    let slow = run(&model, "d", |s| if s % 2 == 0 { 1.2 } else { 1.0 });
    let r = compare_in_situ(&slow, &p, None, &options)?;
    assert!(!r.meets, "{}", r.verdict);
    let half = r.all.within_tolerance.expect("rows");
    assert!((0.45..=0.55).contains(&half), "{half}");
    assert!(r.worst.iter().all(|w| (w.row.ratio - 1.0 / 1.2).abs() < 1e-9));
    // A repeat that moved as much: the profile can agree no better than the run agrees with itself.
    let again = run(&model, "d", |s| if s % 2 == 0 { 1.0 } else { 1.2 });
    let judged = compare_in_situ(&slow, &p, Some(&again), &options)?;
    let floor = judged.floor.as_ref().and_then(|f| f.within_tolerance).expect("floor");
    assert!(floor <= half + 0.05, "floor {floor}, half {half}");
    assert_eq!(judged.meets, half + 1e-9 >= floor, "{}", judged.verdict);
    assert!(judged.verdict.contains("the floor's"), "{}", judged.verdict);
    Ok(())
}

#[test]
fn configurations_the_profile_never_measured_are_counted_and_left_out() -> Result<(), ProfileError> {
    let (model, p) = lenet();
    let mut r = run(&model, "d", |_| 1.0);
    for k in r.kernels.iter_mut().take(3) {
        k.config.iter_mut().for_each(|c| *c = 1);
    }
    let report = compare_in_situ(&r, &p, None, &CompareOptions::default())?;
    assert_eq!((report.unknown, report.all.rows), (3, model.schedule().len() - 3));
    assert!(report.notes.iter().any(|n| n.starts_with("3 kernel(s) ran in a configuration")), "{:?}", report.notes);
    Ok(())
}

#[test]
fn another_model_another_plan_or_a_profile_without_its_model_is_refused() {
    let (model, p) = lenet();
    let options = CompareOptions::default();
    let ok = run(&model, "d", |_| 1.0);
    let mut other = ok.clone();
    other.model_hash = "ffff".into();
    let err = |r: Result<InSituReport, ProfileError>| r.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err(compare_in_situ(&other, &p, None, &options)).starts_with("the run is of model"));
    let another_plan = run(&model, "e", |_| 1.0);
    assert!(
        err(compare_in_situ(&ok, &p, Some(&another_plan), &options)).starts_with("the repeat is a run of another plan")
    );
    let mut bare = p.clone();
    bare.model_json = None;
    assert!(err(compare_in_situ(&ok, &bare, None, &options)).contains("does not carry its model"));
}

#[test]
fn a_shift_beyond_the_floor_is_named_with_its_likely_cause() -> Result<(), ProfileError> {
    let (model, mut p) = lenet();
    let options = CompareOptions::default();
    // Kernels beside a background copy 30% slower, the others as profiled: the copy thread.
    let mut copies = run(&model, "d", |s| if s % 2 == 0 { 1.3 } else { 1.0 });
    copies.kernels.iter_mut().for_each(|k| k.beside_copy = k.step % 2 == 0);
    let r = compare_in_situ(&copies, &p, None, &options)?;
    let bias = r.bias.as_ref().expect("a shift");
    assert_eq!(bias.cause, BiasCause::CopyThread, "{}", bias.text);
    assert!(r.verdict.contains("likely cause: the copy thread"), "{}", r.verdict);
    assert_eq!(r.beside_copy_charged, None, "the run kept no charge");
    // The plan charged those kernels exactly what they lost: with the charge they agree.
    copies.kernels.iter_mut().filter(|k| k.beside_copy).for_each(|k| k.charged_ns = 0.3 * k.median_ns / 1.3);
    let r = compare_in_situ(&copies, &p, None, &options)?;
    assert_eq!(r.beside_copy.within_tolerance, Some(0.0));
    let charged = r.beside_copy_charged.as_ref().expect("a charge was kept");
    assert_eq!((charged.rows, charged.within_tolerance), (r.beside_copy.rows, Some(1.0)));
    // The verdict judges the profile plus the charge: every kernel agrees.
    assert!(!r.judged_paced && r.judged.within_tolerance == Some(1.0) && r.meets, "{}", r.verdict);
    // The groups and the worst kernels are of the judged rows, the charge in their B.
    assert!(r.per_op.iter().chain(&r.per_config).all(|g| g.agreement.within_tolerance == Some(1.0)));
    assert!(r.worst.iter().all(|w| (w.row.ratio - 1.0).abs() < 1e-9), "{:?}", r.worst);
    let charged = r.worst.iter().find(|w| w.beside_copy).expect("a kernel beside a copy");
    assert!((charged.row.b_us - charged.row.a_us).abs() < 1e-6 && charged.charged_us > 0.0, "{charged:?}");
    // Per op, the copies cost what was charged.
    assert_eq!(
        r.copy_charges.iter().map(|c| c.kernels).sum::<usize>(),
        r.rows.iter().filter(|x| x.beside_copy).count()
    );
    for c in &r.copy_charges {
        assert!((c.copies_charged_ms - c.copies_cost_ms).abs() < 1e-6 * c.copies_cost_ms.max(1.0), "{c:?}");
    }
    // Charged twice what they lost: that is out again.
    copies.kernels.iter_mut().for_each(|k| k.charged_ns *= 2.0);
    let r = compare_in_situ(&copies, &p, None, &options)?;
    assert!(r.notes.iter().any(|n| n.contains("the charge overstates")), "{:?}", r.notes);
    assert!(!r.meets, "half the kernels charged twice their loss: {}", r.verdict);
    let twice = r.copy_charges.iter().map(|c| c.copies_charged_ms / c.copies_cost_ms);
    assert!(twice.into_iter().all(|x| (x - 2.0).abs() < 1e-6), "{:?}", r.copy_charges);
    assert_eq!(r.beside_copy_charged.and_then(|a| a.within_tolerance), Some(0.0));
    // Every kernel 10% slower in the plan: not the copies; the profile's whole steps say no more.
    let slower = run(&model, "d", |_| 1.1);
    let r = compare_in_situ(&slower, &p, None, &options)?;
    assert_eq!(r.bias.as_ref().map(|b| b.cause), Some(BiasCause::Unknown));
    assert!(r.verdict.contains("the profile's times are 9.1% shorter than the run's"), "{}", r.verdict);
    p.header.protocol.steps = Steps::Picked;
    let r = compare_in_situ(&slower, &p, None, &options)?;
    assert_eq!(r.bias.as_ref().map(|b| b.cause), Some(BiasCause::StepContext));
    // Within a floor that moved as much, no shift is named.
    let r = compare_in_situ(&slower, &p, Some(&run(&model, "d", |_| 1.0)), &options)?;
    assert_eq!(r.bias, None, "{}", r.verdict);
    Ok(())
}

#[test]
fn the_hosts_pace_from_all_dram_beside_the_plan_explains_a_uniform_shift() -> Result<(), ProfileError> {
    let (model, p) = lenet();
    // The run came 10% slower, all-DRAM beside it too: the host, not the plan.
    let mut slower = run(&model, "d", |_| 1.1);
    let names = model.schedule().iter().map(|&n| model.node(n).name.clone());
    slower.reference_ns = names.enumerate().map(|(i, name)| (name, 110e3 * (i + 1) as f64)).collect();
    let r = compare_in_situ(&slower, &p, None, &CompareOptions::default())?;
    let pace = r.pace.as_ref().expect("pace");
    assert!((pace.ratio - 1.0 / 1.1).abs() < 1e-9 && pace.nodes == model.schedule().len(), "{pace:?}");
    assert_eq!(r.bias.as_ref().map(|b| b.cause), Some(BiasCause::HostPace), "{}", r.verdict);
    assert_eq!(r.all.within_tolerance, Some(0.0), "as measured, every kernel is 10% off");
    assert_eq!(r.paced.as_ref().and_then(|a| a.within_tolerance), Some(1.0));
    // The verdict judges the prediction at the host's pace: the profile is right.
    assert!(r.judged_paced && r.judged.within_tolerance == Some(1.0), "{:?}", r.judged);
    assert!(r.meets && r.verdict.contains("at the host's pace in the run (0.909"), "{}", r.verdict);
    // A repeat on a host 10% slower again: its own pace divides the floor, which stays tight.
    let mut slower_still = run(&model, "d", |_| 1.21);
    slower_still.reference_ns = slower.reference_ns.iter().map(|(n, &t)| (n.clone(), t * 1.1)).collect();
    let r = compare_in_situ(&slower, &p, Some(&slower_still), &CompareOptions::default())?;
    assert!(r.floor_pace.is_some_and(|f| (f - 1.1).abs() < 1e-9), "{:?}", r.floor_pace);
    assert_eq!(r.floor.as_ref().and_then(|f| f.within_tolerance), Some(1.0));
    assert!(r.meets, "{}", r.verdict);
    // The shift as measured is set against the floor as measured: a repeat 20% slower
    // than the run (its all-DRAM too) holds a 10% shift within its floor.
    let mut slower_by_a_fifth = run(&model, "d", |_| 1.1 * 1.2);
    slower_by_a_fifth.reference_ns = slower.reference_ns.iter().map(|(n, &t)| (n.clone(), t * 1.2)).collect();
    let r = compare_in_situ(&slower, &p, Some(&slower_by_a_fifth), &CompareOptions::default())?;
    assert_eq!(r.floor.as_ref().and_then(|f| f.within_tolerance), Some(1.0), "paced, the floor is tight");
    assert_eq!(r.bias, None, "{}", r.verdict);
    // Without all-DRAM in the run, the pace is not known, and said so.
    slower.reference_ns.clear();
    let r = compare_in_situ(&slower, &p, None, &CompareOptions::default())?;
    assert!(r.pace.is_none() && r.notes.iter().any(|n| n.contains("pace is not known")), "{:?}", r.notes);
    Ok(())
}
