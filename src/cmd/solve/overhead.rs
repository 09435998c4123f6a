//! The step overhead as `solve` prints it: what the profile measured a step to cost
//! beyond its kernels, and which parts every plan's step adds.

use super::ms;

/// The solve's "step overhead" row: what the profile measured a step to cost beyond its
/// kernels, and which parts of it every plan's step adds.
pub(super) fn step_overhead(
    overhead: Option<&placer_profile::StepOverhead>,
    kernels: Option<&placer_profile::KernelSource>,
) -> String {
    match (overhead, kernels) {
        (Some(o), None) => format!(
            "{} added to every step: {} between kernels, {} by which the kernels' medians fall short of a step's kernel total, and {} (measured by the profile over {} whole steps of the base placement as `placer run` runs them, alternating with as many woken: {} a step)",
            ms(o.step_ns()),
            ms(o.between_kernels_ns()),
            ms(o.medians_short_ns()),
            if o.counts_wake_up() {
                format!("{} the kernels wait for their pool's threads, which the profile wakes", ms(o.wake_up_ns()))
            } else {
                format!(
                    "not the {} by which the kernels ran longer than woken: {} steps of each kind cannot tell it from the host's drift (at least {} can)",
                    ms(o.wake_up_ns()),
                    o.steps,
                    placer_profile::WAKE_UP_MIN_STEPS
                )
            },
            o.steps,
            ms(o.wall_ns)
        ),
        (Some(o), Some(k)) => format!(
            "{} added to every step: {} between kernels and {} by which the kernels' medians fall short of a step's kernel total (measured by the profile over {} whole steps of the user's own training loop, {} a step, alternating with as many steps of its kernels in the base placement: {})",
            ms(o.step_ns()),
            ms(o.between_kernels_ns()),
            ms(o.medians_short_ns()),
            o.steps,
            ms(o.wall_ns),
            k.label
        ),
        (None, None) => "none added: the profile did not measure it".into(),
        (None, Some(_)) => {
            "none added: the profile was not given the loop's own step to time (placer_torch.profile(..., step=...))"
                .into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::step_overhead;
    use placer_profile::StepOverhead;

    fn measured(steps: u32) -> StepOverhead {
        StepOverhead {
            steps,
            kernels: 6279,
            wall_ns: 12_316.6e6,
            kernel_sums_ns: 12_280.2e6,
            kernel_medians_ns: 12_136.6e6,
            woken_kernel_medians_ns: 11_019.8e6,
            seconds: 127.7,
            copies: None,
        }
    }

    #[test]
    fn the_step_overhead_row_says_whether_the_wake_up_is_added() {
        assert_eq!(
            step_overhead(Some(&measured(3)), None),
            "180.000 ms added to every step: 36.400 ms between kernels, 143.600 ms by which the kernels' medians \
             fall short of a step's kernel total, and not the 1116.800 ms by which the kernels ran longer than \
             woken: 3 steps of each kind cannot tell it from the host's drift (at least 9 can) (measured by the \
             profile over 3 whole steps of the base placement as `placer run` runs them, alternating with as many \
             woken: 12316.600 ms a step)"
        );
        let counted = step_overhead(Some(&measured(9)), None);
        assert!(
            counted.starts_with("1296.800 ms added to every step: 36.400 ms between kernels, 143.600 ms by which")
                && counted
                    .contains("and 1116.800 ms the kernels wait for their pool's threads, which the profile wakes"),
            "{counted}"
        );
    }
}
