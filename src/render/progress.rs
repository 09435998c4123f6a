//! Progress the libraries report while a verb runs: terminal lines, and the profiler's
//! pass bar (on stderr).

use placer_profile::Progress;
use placer_solve::InputsEvent;

/// What gathering a solve's inputs reports: a probe of the copies, which takes a while.
pub fn inputs_event(event: InputsEvent) -> std::io::Result<()> {
    match event {
        InputsEvent::Probing => {
            outln!("measuring copy bandwidth between pools (cached for next time; --no-probe skips it)")
        }
    }
}

/// The progress bar of a profiling run, fed by the profiler's per-pass reports.
#[derive(Debug)]
pub struct PassBar {
    bar: indicatif::ProgressBar,
    /// Whether a busy host was already reported: one warning line per run.
    warned: std::cell::Cell<bool>,
}

impl PassBar {
    /// A bar of `passes` passes (0: taken from the first report), labelled by mode.
    pub fn new(single: bool, passes: usize) -> anyhow::Result<Self> {
        let bar = indicatif::ProgressBar::new(passes as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} passes, {msg}, ETA {eta}")
                .map_err(|e| anyhow::anyhow!("progress bar template: {e}"))?
                .progress_chars("=> "),
        );
        bar.set_prefix(if single { "single" } else { "simultaneous" });
        Ok(PassBar { bar, warned: std::cell::Cell::new(false) })
    }

    pub fn update(&self, p: Progress) {
        if let Some(activity) = p.busy.filter(|_| !self.warned.replace(true)) {
            let when = if p.passes_done == p.resumed {
                "before profiling".to_string()
            } else {
                format!("during pass {}", p.passes_done)
            };
            if let Some(warning) = activity.warning(&when) {
                // Above the bar, which stays; later busy passes are counted in the summary.
                self.bar.suspend(|| errln!("warning: {warning}"));
            }
        }
        if p.passes_done == p.resumed {
            // The first report: passes resumed from the checkpoint took no time in this
            // run, so they must not count towards the ETA.
            if self.bar.length() == Some(0) {
                self.bar.set_length(p.passes_total as u64);
            }
            self.bar.set_position(p.passes_done as u64);
            self.bar.reset_eta();
        } else {
            // A screening design learns its second stage's size after the first stage.
            if self.bar.length() != Some(p.passes_total as u64) {
                self.bar.set_length(p.passes_total as u64);
            }
            self.bar.set_position(p.passes_done as u64);
        }
        self.bar.set_message(format!("{} measurements", p.measurements));
    }

    /// Clears the bar once the run is done; a failed run leaves it where it stopped.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
