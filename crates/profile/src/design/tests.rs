use super::*;
use crate::tasks::Choice;

fn family(choices: Vec<Choice>) -> Family {
    Family { signature: 0xABCD, choices, instances: vec![NodeId(3), NodeId(9)] }
}

#[test]
fn the_design_is_base_singles_and_corners() {
    assert_eq!(screening_points(3, 2), vec![vec![0, 0, 0], vec![1, 0, 0], vec![0, 1, 0], vec![0, 0, 1], vec![1, 1, 1]]);
    // Three pools: 1 + k(N−1) + (N−1).
    assert_eq!(screening_points(4, 3).len(), 1 + 4 * 2 + 2);
    // One factor: its single is its corner.
    assert_eq!(screening_points(1, 2), vec![vec![0], vec![1]]);
}

#[test]
fn small_spaces_are_measured_in_full_and_large_ones_screened() {
    let two = design_family(0, &family(vec![Choice::Any, Choice::Any]), 2, 1);
    assert!(!two.screened && two.design.len() == 4 && two.validation.is_empty());
    let eight = design_family(0, &family(vec![Choice::Any; 8]), 2, 1);
    assert!(eight.screened);
    assert_eq!((eight.space, eight.design.len()), (256, 10));
    assert_eq!(eight.validation.len(), validation_count(246));
    assert_eq!(validation_count(246), 4);
    assert_eq!(validation_count(3), 1);
    assert_eq!(validation_count(0), 0);
}

#[test]
fn fixed_and_grouped_operands_are_not_factors() {
    let f = family(vec![Choice::Any, Choice::Fixed(1), Choice::Any, Choice::SameAs(0)]);
    assert_eq!(f.factors(), vec![0, 2]);
    assert_eq!(f.config(&[1, 0]), vec![1, 1, 0, 1]);
    assert_eq!(f.values(&[1, 1, 0, 1]), vec![1, 0]);
    let plan = design_family(0, &f, 2, 1);
    assert_eq!(plan.space, 4);
    assert!(!plan.screened);
}

#[test]
fn validation_is_seeded_held_out_and_distinct() {
    let f = family(vec![Choice::Any; 6]);
    let a = design_family(0, &f, 2, 7);
    assert_eq!(a, design_family(0, &f, 2, 7), "same seed, same sample");
    assert!(a.validation.iter().all(|v| !a.design.contains(v)), "validation is held out of the design");
    let distinct: std::collections::BTreeSet<_> = a.validation.iter().collect();
    assert_eq!(distinct.len(), a.validation.len());
    // Another seed draws another sample (for these sizes, almost surely).
    let others: Vec<_> = (8..16).map(|s| design_family(0, &f, 2, s).validation).collect();
    assert!(others.iter().any(|v| *v != a.validation));
}

#[test]
fn rejection_sampling_serves_spaces_too_large_to_list() {
    // 2^20 configurations (a user's --max-configs): the sample is drawn without listing.
    let plan = design_family(0, &family(vec![Choice::Any; 20]), 2, 3);
    assert_eq!(plan.space, 1 << 20);
    assert_eq!(plan.validation.len(), 4);
    assert!(plan.validation.iter().all(|v| v.len() == 20 && !plan.design.contains(v)));
}

#[test]
fn tasks_share_a_configuration_between_families_of_one_signature() {
    let a = Family { signature: 1, choices: vec![Choice::Any, Choice::Any], instances: vec![NodeId(1)] };
    let b = Family { signature: 1, choices: vec![Choice::Fixed(0), Choice::Any], instances: vec![NodeId(2)] };
    let c = Family { signature: 2, choices: vec![Choice::Any], instances: vec![NodeId(5)] };
    let families = vec![a, b, c];
    let (v00, v0, v1) = (vec![0, 0], vec![0], vec![1]);
    let tasks = tasks_for(&families, [(0, &v00), (1, &v0), (2, &v1)]);
    assert_eq!(tasks.len(), 2, "[0, 0] of signature 1 is one task for both families");
    assert_eq!(tasks[0].instances, vec![NodeId(1), NodeId(2)]);
    assert_eq!((tasks[1].signature, tasks[1].config.clone()), (2, vec![1]));
}
