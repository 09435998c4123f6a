//! What a profile says about the host it was measured on: busy intervals, passes that
//! ran to the repetition cap, and the checkpoint keeping both.

mod common;

use placer_host::HostActivity;
use placer_host::activity::Calibration;
use placer_profile::ActivitySample;

fn activity(others_cpus: f64) -> HostActivity {
    HostActivity {
        seconds: 0.5,
        cpus: 2,
        others_cpus,
        steal: 0.0,
        runnable_others: 2,
        load1: 2.0,
        calibration: Some(Calibration { median_ns: 300_000.0, spread: 0.02, memcpy_ns_per_byte: 0.08 }),
    }
}

#[test]
fn busy_intervals_are_counted_and_the_first_is_described() {
    let mut p = common::profile("m", 30);
    assert_eq!(p.activity_note(), "not recorded");
    p.host_activity = vec![
        ActivitySample { pass: None, activity: activity(0.1) },
        ActivitySample { pass: Some(0), activity: activity(0.2) },
    ];
    assert_eq!(p.activity_note(), "quiet in all 2 intervals checked");
    p.host_activity.push(ActivitySample { pass: Some(1), activity: activity(1.9) });
    p.host_activity.push(ActivitySample { pass: Some(2), activity: activity(1.5) });
    assert_eq!(p.busy_intervals(), (2, 4));
    assert_eq!(
        p.activity_note(),
        "BUSY in 2 of 4 intervals checked; first pass 2: other processes competed for the CPUs \
         (other processes used 1.9 of 2 CPUs, 2 runnable besides placer, load 2.0, steal 0.0%, \
         calibration kernel spread 2% (median 300 µs), memcpy 0.080 ns/B)"
    );
}

#[test]
fn the_host_s_memcpy_through_a_profile_is_every_check_s_timing() {
    let mut p = common::profile("m", 30);
    assert_eq!(p.memcpy_ns_per_byte(), None, "no checks");
    let timed = |ns: f64| {
        let mut a = activity(0.1);
        a.calibration = a.calibration.map(|c| Calibration { memcpy_ns_per_byte: ns, ..c });
        a
    };
    let mut unchecked = activity(0.1);
    unchecked.calibration = None;
    p.host_activity = [0.09, 0.3, 0.1, 0.12]
        .into_iter()
        .enumerate()
        .map(|(i, ns)| ActivitySample { pass: Some(i as u32), activity: timed(ns) })
        .chain([ActivitySample { pass: Some(4), activity: unchecked }])
        .collect();
    let stats = p.memcpy_ns_per_byte().expect("four checks timed it");
    assert_eq!((stats.count, stats.median, stats.min, stats.max), (4, 0.11, 0.09, 0.3));
}

#[test]
fn most_passes_at_the_repetition_cap_are_reported() {
    // 900 records: passes 0, 1 and 2.
    let mut p = common::profile("m", 900);
    let cap = p.header.protocol.max_reps;
    for m in &mut p.measurements {
        m.count = cap - 1;
    }
    assert_eq!(p.capped_warning(), None);
    let passes = p.capped_passes().1;
    // Every measurement of every pass but the first at the cap.
    for m in p.measurements.iter_mut().filter(|m| m.pass > 0) {
        m.count = cap;
    }
    assert_eq!(p.capped_passes(), (2, 3));
    assert_eq!(passes, 3);
    let warning = p.capped_warning().expect("most passes capped");
    assert!(warning.starts_with(&format!("{} of {passes} passes ran to the {cap}-step cap", passes - 1)), "{warning}");
}

#[test]
fn the_checkpoint_keeps_the_hosts_activity() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("p.ckpt");
    let mut p = common::profile("m", 30);
    p.host_activity = vec![ActivitySample { pass: Some(3), activity: activity(1.2) }];
    placer_profile::save_checkpoint(&path, &p).expect("saves");
    assert_eq!(placer_profile::load_checkpoint(&path).expect("loads").host_activity, p.host_activity);
}
