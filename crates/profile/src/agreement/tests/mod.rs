//! The agreement report checked by hand on small profiles.

use super::*;
use crate::DesignSpec;
use crate::record::{FORMAT_NAME, FORMAT_VERSION, Mode, ProfileHeader, Protocol, Steps};

fn pools() -> Vec<PoolInfo> {
    vec![
        PoolInfo { name: "dram".into(), kind: placer_pools::PoolKind::Dram, emulated_as: None },
        PoolInfo { name: "pmem".into(), kind: placer_pools::PoolKind::Pmem, emulated_as: None },
    ]
}

fn header(max_simultaneous: u32) -> ProfileHeader {
    ProfileHeader {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        model_name: "toy-b1".into(),
        model_hash: "00112233445566778899aabbccddeeff".into(),
        model_source: None,
        host_fingerprint: "host-a".into(),
        pools: pools(),
        emulated: false,
        protocol: Protocol {
            warmup: 2,
            reps: 10,
            max_reps: 50,
            precision: 0.01,
            seed: 7,
            rounds: 1,
            round_noise: 0.0,
            steps: Steps::Whole,
        },
        mode: Mode {
            max_simultaneous,
            two_hop: false,
            sample: None,
            max_configs: 4096,
            negligible: 0.0,
            design: DesignSpec::full(),
        },
        pins: vec![],
        plan_hash: "plan".into(),
        shard: None,
        footprint_fits: true,
        cache_bytes: None,
    }
}

/// A measurement of signature `sig` in config `[sig % 2, 0]`, median `us`.
fn m(sig: u64, us: f64, mad_us: f64, count: u32) -> Measurement {
    Measurement {
        signature: sig,
        config: vec![(sig % 2) as u16, 0],
        node: format!("n{sig}"),
        op: "conv2d".into(),
        pass: 0,
        count,
        median_ns: us * 1e3,
        drift_corrected_ns: us * 1e3,
        mad_ns: mad_us * 1e3,
        min_ns: us * 1e3,
        max_ns: us * 1e3,
        cv: 0.0,
    }
}

fn profile(max_simultaneous: u32, measurements: Vec<Measurement>) -> Profile {
    Profile {
        header: header(max_simultaneous),
        passes_total: 4,
        passes_done: 4,
        wall_seconds: 10.0,
        clock_resolution_ns: 1.0,
        clock_overhead_ns: 20.0,
        reference_ns: vec![],
        pass_drift: vec![],
        round_checks: vec![],
        measurements,
        design: None,
        interference: None,
        step_overhead: None,
        host_activity: Vec::new(),
        merged_from: Vec::new(),
        model_json: None,
        kernels: None,
    }
}

/// A profile whose signature i (from 0) has median `us[i]`, MAD 1 µs, 20 samples.
fn medians(max_simultaneous: u32, us: &[f64]) -> Profile {
    profile(max_simultaneous, us.iter().enumerate().map(|(i, &u)| m(i as u64, u, 1.0, 20)).collect())
}

fn close(x: f64, y: f64) -> bool {
    (x - y).abs() < 1e-9
}

#[test]
fn identical_profiles_agree_completely() {
    let a = medians(1, &[100.0, 200.0, 300.0, 1000.0]);
    let c = compare(&a, &a, &CompareOptions::default()).expect("same model");
    assert_eq!((c.matched, c.only_in_a, c.only_in_b), (4, 0, 0));
    assert_eq!(c.non_tiny.rows, 4);
    assert_eq!(c.non_tiny.within_5, Some(1.0));
    assert_eq!(c.non_tiny.median_ratio, Some(1.0));
    assert_eq!(c.non_tiny.geomean_ratio, Some(1.0));
    assert_eq!(c.non_tiny.significant, 0);
    assert!(c.meets && !c.emulated, "{c:?}");
    assert!(c.verdict.starts_with("profiles agree: 100.0% of 4"), "{}", c.verdict);
    assert_eq!(c.rows[1].config, "pmem,dram");
    assert_eq!(c.wall_ratio, Some(1.0));
    assert!(c.notes.is_empty(), "{:?}", c.notes);
}

#[test]
fn a_slower_subset_is_summarised_as_by_hand() {
    let ratios = [1.0, 1.0, 1.0, 1.0, 1.04, 1.08, 1.2, 1.2, 1.2, 0.75];
    let a = medians(1, &[1000.0; 10]);
    let b = medians(8, &ratios.map(|r| 1000.0 * r));
    let c = compare(&a, &b, &CompareOptions::default()).expect("same model");
    let n = &c.non_tiny;
    assert_eq!(n.rows, 10);
    // |r − 1| ≤ 0.05: the four 1.0s and 1.04; ≤ 0.10 adds 1.08.
    assert_eq!(n.within_5, Some(0.5));
    assert_eq!(n.within_10, Some(0.6));
    assert_eq!(n.within_tolerance, Some(0.5));
    // Sorted: 0.75 1 1 1 1 | 1.04 1.08 1.2 1.2 1.2 → (1 + 1.04) / 2.
    assert!(close(n.median_ratio.expect("rows"), 1.02));
    // exp((ln 1.04 + ln 1.08 + 3 ln 1.2 + ln 0.75) / 10), by hand: 1.0382602078.
    assert!((n.geomean_ratio.expect("rows") - 1.038_260_207_8).abs() < 1e-9);
    assert!(!c.meets);
    assert!(c.verdict.starts_with("profiles disagree: 50.0% of 10"), "{}", c.verdict);
    assert!(c.verdict.contains("worst 0.75x (conv2d n9 pmem,dram)"), "{}", c.verdict);
    // |ln 0.75| = 0.288 > ln 1.2 = 0.182 (three ties, in A's order) > ln 1.08 > ln 1.04.
    let worst: Vec<&str> = c.worst.iter().map(|r| r.node.as_str()).collect();
    assert_eq!(worst, ["n9", "n6", "n7", "n8", "n5", "n4", "n0", "n1", "n2", "n3"]);
    assert_eq!(c.worst_offenders(2).len(), 2);
    // MAD 1 µs over 20 samples: a 40 µs difference is far beyond noise, equality is not.
    assert_eq!(n.significant, 6);
}

#[test]
fn geometric_mean_and_median_of_two() {
    let a = medians(1, &[100.0, 100.0]);
    let b = medians(1, &[200.0, 800.0]);
    let c = compare(&a, &b, &CompareOptions::default()).expect("same model");
    assert!(close(c.non_tiny.geomean_ratio.expect("rows"), 4.0));
    assert!(close(c.non_tiny.median_ratio.expect("rows"), 5.0));
    assert_eq!(c.non_tiny.within_10, Some(0.0));
}

#[test]
fn significance_weighs_the_difference_against_the_spreads() {
    // se = 1.2533 · 1.4826 · 5 / √100 = 0.93 µs each; 3 · √2 · 0.93 = 3.9 µs ≪ 100 µs.
    assert!(significant(&m(0, 1000.0, 5.0, 100), &m(0, 1100.0, 5.0, 100)));
    // se = 1.2533 · 1.4826 · 200 / √10 = 117.5 µs each; 3 · √2 · 117.5 = 499 µs ≫ 10 µs.
    assert!(!significant(&m(0, 1000.0, 200.0, 10), &m(0, 1010.0, 200.0, 10)));
    assert!((median_se(5000.0, 100) - 929.071_29).abs() < 1e-6);
    assert!(!significant(&m(0, 1000.0, 0.0, 0), &m(0, 5000.0, 0.0, 0)), "no samples, no evidence");
}

#[test]
fn tiny_kernels_are_summarised_apart_and_do_not_decide() {
    let a = medians(1, &[1000.0, 2000.0, 10.0, 20.0]);
    let b = medians(2, &[1000.0, 2000.0, 30.0, 20.0]);
    let c = compare(&a, &b, &CompareOptions::default()).expect("same model");
    assert_eq!((c.non_tiny.rows, c.tiny.rows), (2, 2));
    assert_eq!(c.tiny.within_5, Some(0.5));
    assert!(c.rows[2].tiny && !c.rows[0].tiny);
    assert!(c.worst.iter().all(|r| !r.tiny));
    assert!(c.meets);
    assert!(c.notes.iter().any(|n| n.contains("2 kernel(s) under 50 µs")), "{:?}", c.notes);
}

#[test]
fn unmatched_keys_are_counted() {
    let a = medians(1, &[100.0, 100.0, 100.0, 100.0]);
    let mut b = medians(1, &[100.0, 100.0]);
    b.measurements.push(m(40, 100.0, 1.0, 20));
    // Same signature in another configuration is another key.
    let mut other = m(0, 100.0, 1.0, 20);
    other.config = vec![1, 1];
    b.measurements.push(other);
    let c = compare(&a, &b, &CompareOptions::default()).expect("same model");
    assert_eq!((c.matched, c.only_in_a, c.only_in_b), (2, 2, 2));
    assert!(c.notes.iter().any(|n| n.contains("2 measurement(s) only in A and 2 only in B")), "{:?}", c.notes);
}

#[test]
fn different_models_and_pools_are_refused() {
    let a = medians(1, &[100.0]);
    let mut b = a.clone();
    b.header.model_hash = "ffeeddccbbaa99887766554433221100".into();
    b.header.model_name = "other-b1".into();
    let err = compare(&a, &b, &CompareOptions::default()).expect_err("different models");
    assert!(matches!(err, ProfileError::Mismatch { .. }));
    let text = err.to_string();
    assert!(text.contains("toy-b1") && text.contains("other-b1") && !text.contains('\n'), "{text}");

    let mut b = a.clone();
    b.header.pools[1].emulated_as = Some("optane-pmem-100".into());
    let err = compare(&a, &b, &CompareOptions::default()).expect_err("different pools");
    assert!(err.to_string().contains("emulated as optane-pmem-100"), "{err}");
}

#[test]
fn bad_options_are_refused() {
    let a = medians(1, &[100.0]);
    for options in [
        CompareOptions { tolerance: -0.1, ..CompareOptions::default() },
        CompareOptions { min_us: f64::NAN, ..CompareOptions::default() },
        CompareOptions { share: 1.5, ..CompareOptions::default() },
    ] {
        let err = compare(&a, &a, &options).expect_err("bad option");
        assert!(matches!(err, ProfileError::Usage { .. }), "{err}");
    }
}

#[test]
fn hosts_protocols_and_emulation_are_noted() {
    let mut a = medians(1, &[100.0]);
    a.header.pools[1].emulated_as = Some("optane-pmem-100".into());
    a.header.emulated = true;
    let mut b = a.clone();
    b.header.host_fingerprint = "host-b".into();
    b.header.protocol.reps = 20;
    b.wall_seconds = 2.5;
    b.passes_done = 1;
    let c = compare(&a, &b, &CompareOptions::default()).expect("same model");
    assert!(c.emulated && c.a.emulated && c.b.emulated);
    assert!(c.verdict.contains("EMULATED"), "{}", c.verdict);
    assert_eq!(c.wall_ratio, Some(0.25));
    let notes = c.notes.join("\n");
    for needle in ["different hosts", "different measurement protocols", "B is incomplete", "EMULATED: 'pmem'"] {
        assert!(notes.contains(needle), "{needle} missing from {notes}");
    }
}

#[test]
fn nothing_to_judge_does_not_meet() {
    let a = medians(1, &[10.0]);
    let c = compare(&a, &a, &CompareOptions::default()).expect("same model");
    assert_eq!(c.non_tiny.rows, 0);
    assert_eq!(c.non_tiny.within_5, None);
    assert!(!c.meets);
    assert!(c.notes.iter().any(|n| n.contains("nothing to judge")), "{:?}", c.notes);
    let empty = profile(1, vec![]);
    assert!(!compare(&empty, &empty, &CompareOptions::default()).expect("same model").meets);
}

#[test]
fn scatter_is_deterministic_and_shows_both_series() {
    let a = medians(1, &[1000.0, 2000.0, 10.0]);
    let b = medians(2, &[1100.0, 2000.0, 30.0]);
    let c = compare(&a, &b, &CompareOptions::default()).expect("same model");
    let svg = scatter_svg(&c);
    assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    assert!(svg.contains("log10 µs") && svg.contains("tiny (&lt; 50 µs)") && svg.contains("B = 1.1·A (+10%)"));
    assert_eq!(svg.matches("<circle").count(), 3 + 1, "three kernels and the worst-offender marker");
    assert_eq!(scatter_svg(&c), svg);

    let a = medians(1, &[0.5, 100.0]);
    let svg = scatter_svg(&compare(&a, &a, &CompareOptions::default()).expect("same model"));
    assert!(svg.contains("log10 ns"), "sub-µs medians switch the axes to ns");
    let empty = profile(1, vec![]);
    assert!(scatter_svg(&compare(&empty, &empty, &CompareOptions::default()).expect("same")).contains("</svg>"));
}

/// A, B 4% slower on every kernel, and A again (its repeat) 1% slower.
fn shifted() -> (Profile, Profile, Profile) {
    let us = [100.0, 200.0, 400.0, 800.0];
    (medians(1, &us), medians(8, &us.map(|u| u * 1.04)), medians(1, &us.map(|u| u * 1.01)))
}

#[test]
fn a_shift_beyond_the_floor_is_named_with_its_cause() {
    let (mut a, mut b, repeat) = shifted();
    let o = CompareOptions::default();
    // Different step contexts come first.
    b.header.protocol.steps = Steps::Picked;
    let c = compare_with_repeat(&a, &b, Some(&repeat), None, &o).expect("same model");
    let bias = c.bias.expect("4% beyond a 1% floor");
    assert_eq!(bias.cause, BiasCause::StepContext);
    assert!(c.verdict.contains("4.0% slower than A's (median B/A 1.040, beyond the floor's 1.010)"), "{}", c.verdict);
    assert!(c.verdict.contains("A ran whole steps and B picked steps"), "{}", c.verdict);
    // Same steps: a reference pass 4% slower too says the host slowed down.
    b.header.protocol.steps = Steps::Whole;
    a.reference_ns = vec![100e3, 200e3, 30e3];
    b.reference_ns = vec![104e3, 208e3, 90e3];
    let c = compare_with_repeat(&a, &b, Some(&repeat), None, &o).expect("same model");
    let bias = c.bias.expect("beyond the floor");
    assert_eq!((bias.cause, bias.pace_ratio), (BiasCause::HostPace, Some(1.04)), "the 30 µs node is below min_us");
    // A reference pass as fast as A's leaves the packing.
    b.reference_ns = vec![100e3, 200e3, 30e3];
    let c = compare_with_repeat(&a, &b, Some(&repeat), None, &o).expect("same model");
    assert_eq!(c.bias.expect("beyond the floor").cause, BiasCause::Neighbours);
    assert!(c.verdict.contains("neighbours in the pass: A is single"), "{}", c.verdict);
    // A measured in three rounds and B in one: B's medians are one moment's.
    let once = a.measurements.clone();
    a.measurements.extend(once.iter().cloned().chain(once.iter().cloned()));
    let c = compare_with_repeat(&a, &b, Some(&repeat), None, &o).expect("same model");
    assert_eq!(c.bias.expect("beyond the floor").cause, BiasCause::Rounds);
    assert!(c.verdict.contains("A's kernels were measured in 3 round(s) and B's in 1"), "{}", c.verdict);
    // Both in several rounds, if not as many: the packing again.
    b.measurements.extend(b.measurements.clone());
    let c = compare_with_repeat(&a, &b, Some(&repeat), None, &o).expect("same model");
    assert_eq!(c.bias.expect("beyond the floor").cause, BiasCause::Neighbours);
}

#[test]
fn a_shift_within_the_floor_or_within_one_percent_is_not_a_bias() {
    let (a, b, _) = shifted();
    let o = CompareOptions::default();
    let wide = medians(1, &[105.0, 210.0, 420.0, 840.0]);
    let c = compare_with_repeat(&a, &b, Some(&wide), None, &o).expect("same model");
    assert_eq!(c.bias, None, "A's repeat shifted 5%: 4% is inside it");
    let near = medians(8, &[100.5, 201.0, 402.0, 804.0]);
    let c = compare_with_repeat(&a, &near, Some(&a), None, &o).expect("same model");
    assert_eq!(c.bias, None, "0.5% is negligible");
    assert!(c.verdict.starts_with("profiles agree: 100.0% of 4"), "{}", c.verdict);
}

#[test]
fn the_share_needed_is_at_most_the_floors_and_a_missing_floor_is_said() {
    let a = medians(1, &[1000.0; 10]);
    let ratios = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.2, 0.8, 1.2, 0.8];
    let b = medians(8, &ratios.map(|r| 1000.0 * r));
    let o = CompareOptions::default();
    let alone = compare_with_repeat(&a, &b, None, None, &o).expect("same model");
    assert!(!alone.meets);
    assert!(
        alone.verdict.contains("(needed 95.0%)") && alone.verdict.contains("; no noise floor"),
        "{}",
        alone.verdict
    );
    assert!(alone.notes.iter().any(|n| n.starts_with("no noise floor")), "{:?}", alone.notes);
    // A repeat that agrees with A on only 60% of kernels: B's 60% is as good as it gets.
    let noisy = medians(1, &ratios.map(|r| 1000.0 * r.recip()));
    let c = compare_with_repeat(&a, &b, Some(&noisy), None, &o).expect("same model");
    assert!(c.meets, "{}", c.verdict);
    assert!(c.verdict.starts_with("profiles agree: 60.0% of 10"), "{}", c.verdict);
    assert!(c.verdict.contains("(needed 60.0%, the floor's)"), "{}", c.verdict);
    assert_eq!(c.floor.as_ref().and_then(|f| f.within_tolerance), Some(0.6));
    // A quiet repeat keeps the 95% asked for.
    let c = compare_with_repeat(&a, &b, Some(&a), None, &o).expect("same model");
    assert!(!c.meets && c.verdict.contains("(needed 95.0%)"), "{}", c.verdict);
}

#[test]
fn with_both_repeats_the_floor_is_both_profiles_noise() {
    // A repeats exactly; B's repeat strays ±10% on half the kernels, as a profile
    // measured in seconds strays with the host's pace. B/A strays the same way.
    let a = medians(1, &[1000.0; 10]);
    let strays = [1.0, 1.0, 1.0, 1.0, 1.0, 1.1, 0.9, 1.1, 0.9, 1.1];
    let mut b = medians(8, &strays.map(|r| 1000.0 * r));
    b.wall_seconds = 2.0;
    let b_again = medians(8, &[1000.0; 10]);
    let o = CompareOptions::default();
    let a_only = compare_with_repeat(&a, &b, Some(&a), None, &o).expect("same model");
    assert!(!a_only.meets, "A's floor alone needs 95%: {}", a_only.verdict);
    let both = compare_with_repeat(&a, &b, Some(&a), Some(&b_again), &o).expect("same model");
    // Per kernel (ln 1 + ln r)/√2: ±10% becomes ±7.2%, so the floor is the 5 of 10 at 1.
    let floor = both.floor.as_ref().expect("a floor");
    assert_eq!((floor.rows, floor.within_tolerance), (10, Some(0.5)));
    assert_eq!(both.a_repeat.as_ref().and_then(|f| f.within_tolerance), Some(1.0));
    assert_eq!(both.b_repeat.as_ref().and_then(|f| f.within_tolerance), Some(0.5));
    assert!(both.meets, "{}", both.verdict);
    assert!(both.verdict.contains("(needed 50.0%, the floor's)"), "{}", both.verdict);
    let note = both.notes.iter().find(|n| n.starts_with("B agrees with its repeat on 50.0%")).expect("the note");
    assert!(note.contains("A with its on 100.0% (likely because B was measured in 2 s and A in 10 s"), "{note}");
    // Without A's repeat, B's means nothing: refused.
    let alone = compare_with_repeat(&a, &b, None, Some(&b_again), &o);
    assert!(matches!(alone, Err(ProfileError::Usage { .. })), "{alone:?}");
}

#[test]
fn the_joint_floor_is_the_scaled_sum_of_log_ratios() {
    let row = |sig: u64, ratio: f64, tiny: bool| Row {
        signature: sig,
        node: format!("n{sig}"),
        op: "conv2d".into(),
        config: "dram".into(),
        a_us: 100.0,
        b_us: 100.0 * ratio,
        a_mad_us: 1.0,
        b_mad_us: 1.0,
        a_count: 5,
        b_count: 5,
        ratio,
        significant: sig == 1,
        tiny,
    };
    let a_rows = [row(0, 1.02, false), row(1, 1.06, false), row(2, 1.5, true), row(3, 1.0, false)];
    let b_rows = [row(0, 1.03, false), row(1, 0.94, false), row(2, 1.0, false)];
    let f = Agreement::of(joint_floor(&a_rows, &b_rows).iter(), 0.05);
    // Kernel 3 has no repeat of B and kernel 2 is tiny in A: two rows.
    assert_eq!((f.rows, f.significant), (2, 1));
    let expect = |x: f64, y: f64| (x.ln() + y.ln()) / std::f64::consts::SQRT_2;
    assert!(close(f.geomean_ratio.expect("rows").ln(), (expect(1.02, 1.03) + expect(1.06, 0.94)) / 2.0));
    // exp(ln(1.02·1.03)/√2) = 1.0356 and exp(ln(1.06·0.94)/√2) = 0.9975: both within 5%.
    assert_eq!(f.within_5, Some(1.0));
}

#[test]
fn a_share_short_of_the_floor_by_chance_agrees_and_beyond_it_does_not() {
    // 100 kernels; the repeat agrees with A on the first 62.
    let a = medians(1, &[1000.0; 100]);
    let ratios = |within: &dyn Fn(usize) -> bool| -> Vec<f64> {
        (0..100).map(|i| if within(i) { 1000.0 } else { 1100.0 }).collect()
    };
    let repeat = medians(1, &ratios(&|i| i < 62));
    let o = CompareOptions::default();
    // B: 55 within, 22 only in the floor and 15 only in B/A: z = (22 - 15 - 1)/√37.
    let b = medians(8, &ratios(&|i| i < 40 || (62..77).contains(&i)));
    let c = compare_with_repeat(&a, &b, Some(&repeat), None, &o).expect("same model");
    assert_eq!(c.paired, Some(Paired { kernels: 100, worse: 22, better: 15, z: 6.0 / 37f64.sqrt() }));
    assert!(c.meets, "{}", c.verdict);
    assert!(
        c.verdict.starts_with(
            "profiles agree: 55.0% of 100 kernel(s) of at least 50 µs within ±5.0% (the floor's 62.0%: 22 kernel(s) \
             within it only in the floor, 15 only here; short of it within chance (McNemar z 0.99 ≤ 1.645))"
        ),
        "{}",
        c.verdict
    );
    // B: 35 within, 32 only in the floor and 5 only in B/A: z = 26/√37, beyond chance.
    let b = medians(8, &ratios(&|i| i < 30 || (62..67).contains(&i)));
    let c = compare_with_repeat(&a, &b, Some(&repeat), None, &o).expect("same model");
    assert!(!c.meets, "{}", c.verdict);
    assert!(c.verdict.contains("short of it beyond chance (McNemar z 4.27 > 1.645)"), "{}", c.verdict);
    // Too few kernels differ to tell chance: the floor's share is needed outright.
    let b = medians(8, &ratios(&|i| i < 55));
    let c = compare_with_repeat(&a, &b, Some(&repeat), None, &o).expect("same model");
    assert_eq!(c.paired.map(|p| (p.worse, p.better)), Some((7, 0)));
    assert!(!c.meets && c.verdict.contains("under 20 differ, too few to call it chance"), "{}", c.verdict);
}

// -- a profile against a plan's run ---------------------------------------------------

pub(super) mod in_situ;
