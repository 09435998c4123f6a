//! Designed profiles: measure a few configurations of each kernel signature, predict the
//! rest, and prove the predictions on a held-out sample (docs/profiling.md, "Designs").
//!
//! A *family* (one signature under one outcome of the rules, [`Family`]) has k free
//! factors (operands, or groups of operands, that choose their pool) over N pools:
//! N^k configurations. The screening design measures
//!
//! - the base: every factor in pool 0 (the fastest, DRAM);
//! - every factor alone in every other pool: k·(N−1) singles;
//! - every factor in the same other pool: N−1 corners,
//!
//! about 1 + k(N−1) + (N−1) instead of N^k, plus a seeded validation sample of the
//! configurations it predicts ([`validation_count`] per family). [`model::Fit`] is fitted
//! to the design; [`verdict`] judges it on the validation sample and sends a family whose
//! predictions miss back to be measured in full.

pub mod model;
pub mod verdict;

use crate::tasks::{Family, SplitMix64, Task, TaskList};
use placer_ir::NodeId;
use std::collections::BTreeMap;

/// Validation configurations for a family with `held_out` predicted configurations: one,
/// plus one per 64 held out, at most 4. Every screened family is checked at least once;
/// the large ones (a batch norm's backward has 246 held out of 256) a few times more.
pub fn validation_count(held_out: u128) -> usize {
    held_out.min(1 + held_out / 64).min(4) as usize
}

/// What one family measures in the first stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyDesign {
    /// Index into [`TaskList::families`].
    pub family: usize,
    /// N^k: every configuration of the family.
    pub space: u128,
    /// False when the design would measure the whole space anyway (k ≤ 1, or k = 2 over
    /// two pools): then `design` is every configuration and nothing is predicted.
    pub screened: bool,
    /// Factor values (one pool per factor) of the base, singles and corners; every
    /// configuration when not screened.
    pub design: Vec<Vec<u16>>,
    /// Factor values of the validation sample (empty when not screened).
    pub validation: Vec<Vec<u16>>,
}

impl FamilyDesign {
    /// Every configuration this family measures in the first stage.
    pub fn first_stage(&self) -> impl Iterator<Item = &Vec<u16>> {
        self.design.iter().chain(&self.validation)
    }
}

/// Every factor-value vector of `factors` factors over `pools` pools, in lexicographic
/// order (the order [`crate::tasks::enumerate`] expands configurations in).
pub fn all_values(factors: usize, pools: u16) -> Vec<Vec<u16>> {
    let mut all = vec![Vec::with_capacity(factors)];
    for _ in 0..factors {
        all = all.into_iter().flat_map(|prefix| (0..pools).map(move |p| [prefix.as_slice(), &[p]].concat())).collect();
    }
    all
}

/// The base, singles and corners of `factors` factors over `pools` pools, without
/// repeats (with one factor, its single is its corner).
pub fn screening_points(factors: usize, pools: u16) -> Vec<Vec<u16>> {
    let mut points = vec![vec![0; factors]];
    for f in 0..factors {
        for p in 1..pools {
            let mut v = vec![0; factors];
            v[f] = p;
            points.push(v);
        }
    }
    for p in 1..pools {
        points.push(vec![p; factors]);
    }
    let mut seen = std::collections::BTreeSet::new();
    points.retain(|v| seen.insert(v.clone()));
    points
}

/// Spaces up to this size are enumerated to draw the validation sample; larger ones are
/// sampled by rejection.
const ENUMERATE_UP_TO: u128 = 1 << 16;

/// The first-stage plan of one family.
pub fn design_family(index: usize, family: &Family, pools: u16, seed: u64) -> FamilyDesign {
    let k = family.factors().len();
    let space = u128::from(pools).saturating_pow(k as u32);
    let design = screening_points(k, pools);
    if design.len() as u128 >= space {
        return FamilyDesign {
            family: index,
            space,
            screened: false,
            design: all_values(k, pools),
            validation: Vec::new(),
        };
    }
    let held_out = space - design.len() as u128;
    let want = validation_count(held_out);
    let mut rng = SplitMix64::new(seed ^ family.signature.rotate_left(17));
    let validation = if space <= ENUMERATE_UP_TO {
        let mut candidates: Vec<Vec<u16>> = all_values(k, pools).into_iter().filter(|v| !design.contains(v)).collect();
        for i in 0..want {
            let j = i + rng.below((candidates.len() - i) as u64) as usize;
            candidates.swap(i, j);
        }
        candidates.truncate(want);
        candidates
    } else {
        let mut picked: Vec<Vec<u16>> = Vec::with_capacity(want);
        while picked.len() < want {
            let v: Vec<u16> = (0..k).map(|_| rng.below(u64::from(pools)) as u16).collect();
            if !design.contains(&v) && !picked.contains(&v) {
                picked.push(v);
            }
        }
        picked
    };
    FamilyDesign { family: index, space, screened: true, design, validation }
}

/// Every family's first-stage plan.
pub fn design_families(list: &TaskList, pools: u16, seed: u64) -> Vec<FamilyDesign> {
    list.families.iter().enumerate().map(|(i, f)| design_family(i, f, pools, seed)).collect()
}

/// Tasks for the given configurations (per family, as factor values), deduplicated on
/// (signature, configuration) with the instances of every family that asked for it.
pub fn tasks_for<'a>(families: &[Family], wanted: impl IntoIterator<Item = (usize, &'a Vec<u16>)>) -> Vec<Task> {
    let mut by_key: BTreeMap<(u64, Vec<u16>), Vec<NodeId>> = BTreeMap::new();
    for (f, values) in wanted {
        let family = &families[f];
        let instances = by_key.entry((family.signature, family.config(values))).or_default();
        for &n in &family.instances {
            if !instances.contains(&n) {
                instances.push(n);
            }
        }
    }
    by_key.into_iter().map(|((signature, config), instances)| Task { signature, config, instances }).collect()
}

/// The first stage's tasks: every family's design and validation sample.
pub fn first_stage_tasks(list: &TaskList, plans: &[FamilyDesign]) -> Vec<Task> {
    tasks_for(&list.families, plans.iter().flat_map(|p| p.first_stage().map(move |v| (p.family, v))))
}

#[cfg(test)]
mod tests;
