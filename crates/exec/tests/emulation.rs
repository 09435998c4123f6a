//! The emulated tier slows a training step by what the emulation formula
//! (docs/background.md, the emulated tier) predicts.
//!
//! One run, interleaved: a step with every activation in DRAM, then a step with every
//! activation in an emulated pool, and so on, so both see the same machine state. The
//! formula's prediction (from each kernel's declared bytes and the pool's per-byte
//! costs) is computed without any timing; the measured slowdown must match it within
//! the spread of the measurements themselves. This is the one test that reads a clock
//! to decide: the issue asks for it, and its tolerance comes from the data, not a
//! guess.

use placer_exec::{Executor, PoolAssignment, Stats};
use placer_ir::Role;
use placer_pools::{Emulation, Pool, PoolId, PoolKind, PoolSet, WaitModel};

/// A host whose DRAM reads at 30 GB/s and writes at 25 GB/s, emulating a device with
/// Optane's published ratios (37.6/105.6 read, 12.5/76.8 write).
fn optane() -> Emulation {
    Emulation::from_bandwidths("optane-dcpmm", 30e9, 25e9, 30e9 * 37.6 / 105.6, 25e9 * 12.5 / 76.8)
}

fn pools() -> PoolSet {
    pools_with(optane())
}

fn pools_with(emulation: Emulation) -> PoolSet {
    PoolSet::new(vec![
        Pool::new("dram", PoolKind::Dram, 1 << 34),
        Pool::new("pmem", PoolKind::Pmem, 1 << 34).with_emulation(emulation),
    ])
}

fn activations_in_pmem(model: &placer_ir::Model) -> PoolAssignment {
    let mut in_pmem = PoolAssignment::all_in(model, PoolId(0));
    for (slot, tensor) in in_pmem.0.iter_mut().zip(model.tensors()) {
        if tensor.role == Role::Activation {
            *slot = PoolId(1);
        }
    }
    assert!(in_pmem.0.contains(&PoolId(1)), "the model has activations");
    in_pmem
}

/// The overlap wait model, from each kernel's declared traffic and no clock: a kernel
/// long enough hides its reads and waits for its writes alone; a kernel of no time waits
/// the device's whole read time on top. Both are checked against sums made here from the
/// IR's traffic, not the executor's.
#[test]
fn the_overlap_model_charges_writes_and_only_the_reads_a_kernel_cannot_hide() {
    let model = placer_zoo::build("lenet-mnist", 8).expect("zoo");
    let emulation = optane().with_wait(WaitModel::Overlap);
    let exec =
        Executor::new(&model, pools_with(emulation.clone()), &activations_in_pmem(&model), 7).expect("allocates");
    let placement = activations_in_pmem(&model);
    let (mut hidden_some, mut charged_some) = (false, false);
    for &n in model.schedule() {
        let (mut read, mut written) = (0u64, 0u64);
        for (t, traffic) in placer_ir::ops::node_traffic(&model, n) {
            if placement.0[t.index()] == PoolId(1) {
                read += traffic.read;
                written += traffic.written;
            }
        }
        let writes = written as f64 * emulation.write_extra_ns_per_byte;
        let device_read = read as f64 * emulation.read_ns_per_byte;
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.max(1.0);
        assert!(close(exec.emulated_ns(n, 1e12), writes), "{}: a long kernel hides its reads", model.node(n).name);
        assert!(close(exec.emulated_ns(n, 0.0), writes + device_read), "{}", model.node(n).name);
        // Half the device's read time is hidden by a kernel that long.
        assert!(close(exec.emulated_ns(n, device_read / 2.0), writes + device_read / 2.0), "{}", model.node(n).name);
        hidden_some |= read > 0;
        charged_some |= written > 0;
    }
    assert!(hidden_some && charged_some, "activations are read and written");
}

/// A timed test on a shared host: up to three attempts, each measured afresh, and the
/// first within its band passes. A real fault (an executor that lets the pool park
/// during waits, a formula without its write term) is off in every attempt; a
/// neighbour's burst, or a noisy day's busy-wait overshoot, is not.
#[test]
#[allow(clippy::print_stdout)]
fn activations_in_the_emulated_pool_slow_the_step_by_the_predicted_amount() {
    let mut failures = Vec::new();
    for attempt in 1..=3 {
        match measure_emulated_slowdown() {
            Ok(figures) => {
                // Shown with --nocapture; docs/BENCHMARKS.md quotes it.
                println!("attempt {attempt}: {figures}");
                return;
            }
            Err(why) => failures.push(format!("attempt {attempt}: {why}")),
        }
    }
    panic!("every attempt missed:\n{}", failures.join("\n"));
}

/// One interleaved measurement: its figures, or why they miss the prediction.
fn measure_emulated_slowdown() -> Result<String, String> {
    let model = placer_zoo::build("lenet-mnist", 64).expect("zoo");
    let in_dram = PoolAssignment::all_in(&model, PoolId(0));
    let in_pmem = activations_in_pmem(&model);
    let mut fast = Executor::new(&model, pools(), &in_dram, 7).expect("allocates");
    let mut slow = Executor::new(&model, pools(), &in_pmem, 7).expect("allocates");
    assert!(fast.emulated_pools_in_use().is_empty());
    assert_eq!(slow.emulated_pools_in_use()[0].device, "optane-dcpmm:additive");

    let predicted_ms: f64 = model.schedule().iter().map(|&n| slow.emulated_ns(n, 0.0)).sum::<f64>() / 1e6;
    assert_eq!(model.schedule().iter().map(|&n| fast.emulated_ns(n, 0.0)).sum::<f64>(), 0.0);
    assert!(predicted_ms > 0.1, "the prediction is large enough to measure: {predicted_ms} ms");

    for _ in 0..3 {
        fast.step().expect("warm-up");
        slow.step().expect("warm-up");
    }
    let (mut fast_ms, mut slow_ms, mut waits_ms) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..41 {
        fast_ms.push(fast.step().expect("step").wall_ns / 1e6);
        let s = slow.step().expect("step");
        slow_ms.push(s.wall_ns / 1e6);
        waits_ms.push(s.emulated_wait_ns / 1e6);
    }
    let fast = Stats::of(&fast_ms).expect("samples");
    let slow = Stats::of(&slow_ms).expect("samples");
    let waits = Stats::of(&waits_ms).expect("samples");

    // Paired per-step excess: each emulated step minus the DRAM step just before it, so
    // slow drifts of the shared machine cancel. The tolerance is the measurement's own
    // spread: 1.5 standard deviations of one step's excess (1.4826·MAD estimates σ
    // robustly). Steps are not independent on a shared machine, so the standard error of
    // the median would understate it. Here the band is ±0.1-0.3 ms, 6-18% of the
    // prediction; an executor that let the pool park during waits measured +12%, and a
    // formula without its write term would predict a third less.
    let excess: Vec<f64> = slow_ms.iter().zip(&fast_ms).map(|(s, f)| s - f).collect();
    let excess = Stats::of(&excess).expect("samples");
    // A quiet stretch can make the spread tiny while the host still moves a step by a
    // few percent (a clean clone's run failed at −4.2% against a ±3% band), so the band
    // is never narrower than ±8% of the prediction: still well inside the +12% and −33%
    // failures it exists to catch.
    let tolerance = (1.5 * 1.4826 * excess.mad).max(0.08 * predicted_ms);
    let off = excess.median - predicted_ms;
    let figures = format!(
        "dram {:.3} ms (MAD {:.3}), emulated {:.3} ms (MAD {:.3}); step ratio measured {:.4}, predicted {:.4}; \
         excess {:.3} ms vs predicted {predicted_ms:.3} ms: off {off:+.3} ms, tolerance ±{tolerance:.3} ms",
        fast.median,
        fast.mad,
        slow.median,
        slow.mad,
        slow.median / fast.median,
        (fast.median + predicted_ms) / fast.median,
        excess.median,
    );
    if off.abs() > tolerance {
        return Err(format!("the step's excess is off: {figures}"));
    }
    // The executor waited what the formula says: never less (beyond the clock's reading),
    // and more only by what a busy-wait overshoots when the host takes its core away
    // while it spins, which is the same noise as the steps' (a clean clone's run on a
    // noisy day waited +9.7%, 0.15 ms, against a ±0.37 ms band).
    let over = waits.median - predicted_ms;
    if over < -0.01 * predicted_ms || over > tolerance {
        return Err(format!("waited {:.3} ms against {predicted_ms:.3} predicted: {figures}", waits.median));
    }
    Ok(figures)
}
