//! The calibrations a profile records after its passes: what a background copy costs
//! the kernels beside it (measured by `interference`), and what a step costs beyond its
//! kernels' medians (measured by `overhead`). Data only; the measuring lives there.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The calibration a profile records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interference {
    /// A copy thread's memcpy time per byte (DRAM to DRAM, 64 MiB copies from and to
    /// memory, their buffers evicted from the caches before each, alone, median): the
    /// CPU time of a copy whose pools are emulated. (Profiles before 2026-12-02 copied
    /// 16 MiB over cached buffers, which read up to twice as fast.)
    pub memcpy_ns_per_byte: f64,
    pub pairs: u32,
    pub ops: Vec<OpInterference>,
    /// Shares of their own for the model's longest-running signatures besides each op's
    /// longest, which the solver charges in place of their op's share.
    pub signatures: Vec<SignatureInterference>,
    pub seconds: f64,
}

/// One signature's share, measured as its op's is (the op's fixed part subtracted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignatureInterference {
    /// The kernels' signature (`placer_profile::signature`).
    pub signature: u64,
    pub op: String,
    /// A copy of `copy_bytes` beside the signature's first kernel in the schedule.
    pub share_pairs: KernelPairs,
    pub copy_bytes: u64,
    pub share: f64,
}

/// One op's measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpInterference {
    pub op: String,
    /// The fixed part's pairs: a copy of no bytes beside the op's shortest kernel of at
    /// least 20 µs (its longest when none is).
    pub fixed_pairs: KernelPairs,
    /// with − alone of `fixed_pairs`: what a copy costs this op whatever its size. Noise
    /// can make it negative; the solver charges no less than 0.
    pub fixed_ns: f64,
    /// The share's pairs: a copy of `copy_bytes` beside the op's longest kernel.
    pub share_pairs: KernelPairs,
    pub copy_bytes: u64,
    /// (with − alone − `fixed_ns`, at 0 at least) / min(`copy_bytes` ×
    /// `memcpy_ns_per_byte`, the kernel alone) of `share_pairs`: the share of the copy's
    /// CPU time, as the solver estimates it, that the kernel lost past the fixed part. (A copy beside a kernel runs slower
    /// than alone, `copy_ns`; the share absorbs that, so the solver's charge reproduces
    /// this measurement.) Noise can make it negative; the solver charges no less than 0.
    pub share: f64,
}

/// One kernel's pairs, alone and beside a copy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelPairs {
    pub node: String,
    pub pairs: u32,
    /// Medians over the pairs: the kernel alone and beside the copy (each timed from
    /// where the copy is handed over, or would be, to the kernel's end), and the copy.
    pub alone_ns: f64,
    pub with_ns: f64,
    pub copy_ns: f64,
}

impl Interference {
    /// Each op's share, by op name.
    pub fn shares(&self) -> BTreeMap<&str, f64> {
        self.ops.iter().map(|o| (o.op.as_str(), o.share)).collect()
    }

    /// The share of each signature measured on its own, by signature.
    pub fn signature_shares(&self) -> BTreeMap<u64, f64> {
        self.signatures.iter().map(|s| (s.signature, s.share)).collect()
    }

    /// Each op's fixed part, by op name.
    pub fn fixed_ns(&self) -> BTreeMap<&str, f64> {
        self.ops.iter().map(|o| (o.op.as_str(), o.fixed_ns)).collect()
    }
}

/// The fewest steps of each kind whose wake-up ([`StepOverhead::wake_up_ns`]) is added to
/// a plan's step. The wake-up is a difference of two sums of per-kernel medians. With 3
/// steps of each kind (steps of 5 s and more), each median is the middle of three steps
/// that the host's pace moves together by ±5-10% on this project's 2-core VM: DenseNet-264
/// b32 read +1,117 ms (9% of its kernels) and ResNet-200 b32 −1,007 ms, where in nine runs
/// of their plans a step took −2 to +677 ms beyond its kernels' medians added up, wake-up,
/// copies and all (docs/BENCHMARKS.md, "The wake-up of long steps"). Short steps take 9
/// to 41 of each.
pub const WAKE_UP_MIN_STEPS: u32 = 9;

/// What whole steps cost beyond their kernels' median times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepOverhead {
    /// Timed steps of each kind (as runs run them, and threads woken).
    pub steps: u32,
    /// Kernels per step.
    pub kernels: u32,
    /// The median step's wall time, ns.
    pub wall_ns: f64,
    /// The median over steps of a step's kernel times added up, ns.
    pub kernel_sums_ns: f64,
    /// Each kernel's median time over the steps, added up, ns.
    pub kernel_medians_ns: f64,
    /// The same over the interleaved steps with every pool thread woken before each
    /// kernel, as the profile times them: what a prediction adds, ns.
    pub woken_kernel_medians_ns: f64,
    /// How long the measurement took, s.
    pub seconds: f64,
    /// The framework's whole steps again, with a copy thread memcpying beside them
    /// (another framework's step only, on a host with a pool to copy to).
    pub copies: Option<CopiesBesideSteps>,
}

/// Another framework's whole step with a copy thread memcpying beside it, as a plan's
/// copies run in that framework: the thread unpinned, paced to copy a fixed share of the
/// time, from and to memory. Its kernels are timed alone by the interference
/// calibration, pinned as placer's executor runs them; a framework's step puts its own
/// threads, dispatch and interpreter between them, and on this project's VM torch's step
/// lost 2-3× what the calibration charged the same copies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopiesBesideSteps {
    /// Timed steps, alternating with [`StepOverhead`]'s.
    pub steps: u32,
    /// The median step's wall time with the copies, ns.
    pub wall_ns: f64,
    /// The median bytes copied in a step.
    pub bytes: f64,
    /// The median over steps of the copies' memcpy time per byte beside the step: how
    /// long a copy takes there, where the interference calibration's
    /// `memcpy_ns_per_byte` is its time alone.
    pub memcpy_ns_per_byte: f64,
    /// The copy thread's pacing: the share of its time it copies, sleeping the rest.
    pub duty: f64,
}

impl StepOverhead {
    /// What the framework's step lost per byte a copy thread moved beside it, ns/B (at 0
    /// at least: noise can make the difference negative); `None` where it was not
    /// measured.
    pub fn copy_loss_ns_per_byte(&self) -> Option<f64> {
        let c = self.copies.as_ref()?;
        Some(((c.wall_ns - self.wall_ns) / c.bytes.max(1.0)).max(0.0))
    }

    /// What a step costs beyond the sum of its kernels' medians, ns: the figure the
    /// solver adds to every plan's step. The wake-up is in it only where it is counted
    /// ([`Self::counts_wake_up`]).
    pub fn step_ns(&self) -> f64 {
        let wake_up = if self.counts_wake_up() { self.wake_up_ns() } else { 0.0 };
        self.between_kernels_ns() + self.medians_short_ns() + wake_up
    }

    /// Whether enough steps of each kind were timed for the wake-up to be told from the
    /// host's drift ([`WAKE_UP_MIN_STEPS`]).
    pub fn counts_wake_up(&self) -> bool {
        self.steps >= WAKE_UP_MIN_STEPS
    }

    /// The part spent between kernels: wall time less the step's own kernel total
    /// (median over steps), ns.
    pub fn between_kernels_ns(&self) -> f64 {
        self.wall_ns - self.kernel_sums_ns
    }

    /// The part by which a sum of medians falls short of a step's kernel total, ns.
    pub fn medians_short_ns(&self) -> f64 {
        self.kernel_sums_ns - self.kernel_medians_ns
    }

    /// The part the kernels wait for their pool's threads when nothing woke them, ns:
    /// their medians as runs time them less as the profile does, as measured (counted in
    /// [`Self::step_ns`] or not).
    pub fn wake_up_ns(&self) -> f64 {
        self.kernel_medians_ns - self.woken_kernel_medians_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overhead(steps: u32) -> StepOverhead {
        StepOverhead {
            steps,
            kernels: 100,
            wall_ns: 1_000e6,
            kernel_sums_ns: 990e6,
            kernel_medians_ns: 980e6,
            woken_kernel_medians_ns: 900e6,
            seconds: 1.0,
            copies: None,
        }
    }

    #[test]
    fn the_wake_up_is_added_only_where_enough_steps_tell_it_from_drift() {
        // 10 ms between kernels, 10 ms of medians' shortfall, 80 ms of wake-up as measured.
        let counted = overhead(WAKE_UP_MIN_STEPS);
        assert!(counted.counts_wake_up());
        assert!((counted.step_ns() - 100e6).abs() < 1e-3);
        assert!((counted.step_ns() - (counted.wall_ns - counted.woken_kernel_medians_ns)).abs() < 1e-3);
        let long = overhead(3);
        assert!(!long.counts_wake_up());
        assert!((long.step_ns() - 20e6).abs() < 1e-3, "{}", long.step_ns());
        // Kept in the record either way.
        assert_eq!(long.wake_up_ns(), counted.wake_up_ns());
    }
}
