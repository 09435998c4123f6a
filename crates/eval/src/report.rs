//! The report directory `placer pipeline` writes: summary.md for people, plan.json,
//! comparison.json and measured.json for programs, and SVG plots of DRAM over the schedule, predicted
//! against measured kernel times, the placement timeline and (with a sweep) step time
//! against budget.

use crate::EvalError;
use crate::compare::{ALL_DRAM, Comparison, FIRST_TOUCH, Standing, Versus};
use crate::interleave::Measured;
use placer_ir::Model;
use placer_plot::{COLORS, Chart, HLine, Mark, Series, Timeline, TimelineBar, TimelineRow};
use placer_solve::Plan;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One budget of a sweep: every strategy's measured step there.
#[derive(Debug, Clone, Serialize)]
pub struct SweepPoint {
    /// Share of peak live memory.
    pub share: f64,
    pub budget_bytes: u64,
    pub comparison: Comparison,
}

/// Everything the report shows.
#[derive(Debug)]
pub struct Report<'a> {
    pub model: &'a Model,
    /// The plan `placer solve` chose (the ILP's), written as plan.json.
    pub plan: &'a Plan,
    pub measured: &'a [Measured],
    /// (label, text) facts shown at the top: host, profile, budget, solver.
    pub facts: Vec<(String, String)>,
    pub sweep: Option<&'a [SweepPoint]>,
}

const MIB: f64 = 1048576.0;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> EvalError + '_ {
    move |e| EvalError::Report { path: path.to_path_buf(), reason: e.to_string() }
}

fn to_json<T: Serialize + ?Sized>(dir: &Path, value: &T) -> Result<String, EvalError> {
    serde_json::to_string_pretty(value)
        .map_err(|e| EvalError::Report { path: dir.to_path_buf(), reason: e.to_string() })
}

fn save(dir: &Path, name: &str, text: &str, written: &mut Vec<PathBuf>) -> Result<(), EvalError> {
    let path = dir.join(name);
    // Atomic, so a reader (or a rerun into the same directory) never sees half a plan.json.
    placer_files::write_atomic(&path, text).map_err(|e| io(&path)(e.io))?;
    written.push(path);
    Ok(())
}

impl Report<'_> {
    /// Writes the report into `dir` (created if need be); returns the files written.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, EvalError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let mut written = Vec::new();
        save(dir, "plan.json", &to_json(dir, self.plan)?, &mut written)?;
        save(dir, "measured.json", &to_json(dir, self.measured)?, &mut written)?;
        save(dir, "comparison.json", &to_json(dir, &Comparison::new(self.measured))?, &mut written)?;
        save(dir, "dram.svg", &self.dram_chart().to_svg(), &mut written)?;
        save(dir, "kernels.svg", &self.kernel_chart().to_svg(), &mut written)?;
        save(dir, "timeline.svg", &self.timeline().to_svg(), &mut written)?;
        if let Some(sweep) = self.sweep {
            save(dir, "sweep.svg", &sweep_chart(sweep).to_svg(), &mut written)?;
            save(dir, "sweep.json", &to_json(dir, sweep)?, &mut written)?;
        }
        save(dir, "summary.md", &self.summary(), &mut written)?;
        Ok(written)
    }

    fn ilp(&self) -> Option<&Measured> {
        self.measured.first()
    }

    /// The emulated pools any plan used, named with their device models.
    fn emulated(&self) -> Option<String> {
        let pools: std::collections::BTreeSet<String> = self
            .measured
            .iter()
            .flat_map(|m| m.report.emulated.iter())
            .map(|e| format!("'{}' as {}", e.pool, e.device))
            .collect();
        (!pools.is_empty()).then(|| pools.into_iter().collect::<Vec<_>>().join(", "))
    }

    fn dram_chart(&self) -> Chart {
        let mut chart = Chart::new(
            &format!("{}: DRAM in use at each kernel, measured by the arena", self.model.name()),
            "schedule step",
            "DRAM in use, MiB",
        );
        chart.y_unit = MIB;
        for (i, name) in [self.plan_name(), FIRST_TOUCH, ALL_DRAM].iter().enumerate() {
            if let Some(m) = self.measured.iter().find(|m| m.name == *name) {
                chart.series.push(Series {
                    label: m.name.clone(),
                    color: COLORS[i].into(),
                    mark: Mark::Line,
                    points: m.dram_bytes.iter().enumerate().map(|(s, &b)| (s as f64, b as f64)).collect(),
                });
            }
        }
        chart.hlines.push(HLine {
            y: self.plan.inputs.budget_bytes as f64,
            label: format!("budget {:.1} MiB", self.plan.inputs.budget_bytes as f64 / MIB),
            color: "#555".into(),
        });
        chart
    }

    fn plan_name(&self) -> &str {
        self.ilp().map_or("", |m| m.name.as_str())
    }

    fn kernel_chart(&self) -> Chart {
        let mut chart = Chart::new(
            &format!("{}: each kernel of the plan, predicted against measured (median)", self.model.name()),
            "predicted µs",
            "measured µs",
        );
        if let Some(m) = self.ilp() {
            let points: Vec<(f64, f64)> =
                m.predicted_kernel_ns.iter().zip(&m.kernel_ns).map(|(p, k)| (p / 1e3, k / 1e3)).collect();
            let top = points.iter().map(|p| p.0.max(p.1)).fold(0.0, f64::max);
            chart.series.push(Series {
                label: "measured = predicted".into(),
                color: "#999".into(),
                mark: Mark::Line,
                points: vec![(0.0, 0.0), (top, top)],
            });
            chart.series.push(Series { label: m.name.clone(), color: COLORS[0].into(), mark: Mark::Points, points });
        }
        chart
    }

    fn timeline(&self) -> Timeline {
        let pools: Vec<&str> = self.plan.inputs.pools.iter().map(|p| p.name.as_str()).collect();
        let mut t = Timeline::new(
            &format!(
                "{}: where each tensor lives over the schedule ({})",
                self.model.name(),
                self.plan.provenance.strategy
            ),
            "schedule step",
        );
        t.categories =
            pools.iter().enumerate().map(|(i, p)| (p.to_string(), COLORS[i % COLORS.len()].into())).collect();
        // Tensors that move first, then the largest: the rows a reader looks for.
        let mut order: Vec<usize> = (0..self.plan.tensors.len()).collect();
        order.sort_by_key(|&i| {
            let t = &self.plan.tensors[i];
            (t.placement.len() == 1, std::cmp::Reverse(t.bytes), i)
        });
        for i in order {
            let tensor = &self.plan.tensors[i];
            let bars = tensor
                .placement
                .iter()
                .map(|s| TimelineBar {
                    from: s.from as f64,
                    to: s.to as f64 + 1.0,
                    category: pools.iter().position(|p| *p == s.pool).unwrap_or(usize::MAX),
                })
                .collect();
            let marks =
                self.plan.moves.iter().filter(|m| m.tensor == tensor.name).map(|m| m.before_step as f64).collect();
            t.rows.push(TimelineRow { label: tensor.name.clone(), bars, marks });
        }
        t
    }

    fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# placer pipeline: {}\n", self.model.name());
        if let Some(pools) = self.emulated() {
            let _ = writeln!(
                s,
                "> **EMULATED.** Pools {pools} are DRAM with modelled waits (docs/hosts.md): every time \
                 below is a prediction and a measurement *of the emulation*, not of that device.\n"
            );
        }
        let _ = writeln!(s, "| | |\n|---|---|");
        for (k, v) in &self.facts {
            let _ = writeln!(s, "| {k} | {} |", v.replace('|', "\\|"));
        }
        let comparison = Comparison::new(self.measured);
        let _ = writeln!(s, "\n## Measured side by side\n");
        let _ = writeln!(
            s,
            "Every plan ran in this process, its timed steps interleaved with the others' \
             ({} each), so host drift affects them alike. Predictions come from the profile; \
             all-DRAM's own error says what the host and cache context did to the plan with no \
             placement (docs/running.md).\n",
            self.ilp().map_or(0, |m| m.step_ns.count)
        );
        s.push_str(&comparison_markdown(&comparison));
        if let Some(anchor) = &comparison.anchor {
            let _ = writeln!(s, "\n{}", anchor.note());
        }
        s.push_str(&standing_section(&comparison, self.plan));
        if let Some(m) = self.ilp() {
            let r = &m.report;
            let _ = writeln!(
                s,
                "\nThe plan: {} blocking and {} background moves, {:.1} MiB copied per step; DRAM arena {:.2} MiB \
                 reserved, {:.2} MiB peak in use (measured by the arena), budget {:.2} MiB.",
                r.blocking_moves,
                r.background_moves,
                r.bytes_moved as f64 / MIB,
                r.reserved_bytes[0] as f64 / MIB,
                r.peak_bytes[0] as f64 / MIB,
                self.plan.inputs.budget_bytes as f64 / MIB
            );
        }
        if let Some(m) = self.ilp() {
            let charged: Vec<f64> = self.plan.kernels.iter().map(|k| k.interference_ns).collect();
            if let Some(mut fit) = crate::compare::CopyFit::of(&m.predicted_kernel_ns, &charged, &m.kernel_ns) {
                let solver = self.plan.inputs.copy_cpu_ns_per_byte.first().and_then(|row| row.get(1)).copied();
                fit.memcpy_ns_per_byte = m.report.copy_memcpy_ns_per_byte.zip(solver);
                fit.calibrated = self.plan.inputs.interference_calibrated;
                let _ = writeln!(s, "\n{}", fit.note());
            }
        }
        let pools: Vec<String> = self.plan.inputs.pools.iter().map(|p| p.name.clone()).collect();
        if let Some(note) = crate::compare::huge_pages_note(self.measured, &pools) {
            let _ = writeln!(s, "\n{note}");
        }
        if let Some(sweep) = self.sweep {
            let _ = writeln!(s, "\n## Budget sweep\n");
            s.push_str(&sweep_markdown(sweep));
            let _ = writeln!(s, "\n![step time against budget](sweep.svg)");
        }
        let _ = writeln!(
            s,
            "\n## Plots\n\n![DRAM over the schedule](dram.svg)\n\n![predicted against measured](kernels.svg)\n\n\
             ![placement timeline](timeline.svg)\n\nplan.json is the plan; measured.json every measurement."
        );
        s
    }
}

fn pct(x: Option<f64>) -> String {
    x.map_or("–".into(), |e| format!("{:+.1}%", 100.0 * e))
}

fn times(x: Option<f64>) -> String {
    x.map_or("–".into(), |v| format!("{v:.2}×"))
}

fn versus_text(v: &Versus) -> String {
    if v.level {
        format!("level with it: the two medians differ by less than their MADs together ({:.2}×)", v.ratio)
    } else if v.ratio > 1.0 {
        format!("**{:.2}× faster**", v.ratio)
    } else {
        format!("**{:.2}× slower**", 1.0 / v.ratio)
    }
}

/// The plan (the first row of `comparison`) against the best baseline and 2LM, and what
/// the solver proved about the rest: the section that says how much placement can win
/// on this host at all. The report's summary.md has it; `placer pipeline` prints it too.
pub fn standing_section(comparison: &Comparison, plan: &Plan) -> String {
    let Some(st) = Standing::of(comparison, plan.solver_floor_and_score_ns()) else { return String::new() };
    let mut s = String::from("\n## Where the plan stands\n\n");
    if let Some(b) = &st.best_baseline {
        let _ = writeln!(
            s,
            "- Against the best baseline, {} ({:.3} ms): the plan is {}.",
            b.name,
            b.measured_ms,
            versus_text(b)
        );
    }
    if let Some(t) = &st.two_lm {
        let _ = writeln!(s, "- Against {} ({:.3} ms): the plan is {}.", t.name, t.measured_ms, versus_text(t));
    }
    if let (Some((floor, score)), Some(best)) = (st.solver_ms, st.best_baseline_predicted_ms) {
        let _ = writeln!(
            s,
            "- The solver proved that, as it scores a step (every kernel at its all-DRAM time plus what the \
             placement adds, from its fit of the profile, and the step's overhead), no plan at this budget scores under **{floor:.3} ms**; \
             it scored this plan at {score:.3} ms (predicted above at {:.3} ms, the profile replayed by the checker). \
             The best baseline is predicted at {best:.3} ms: against that floor, placement could gain at most \
             **{:.1}%** over it here.",
            plan.predicted.step_ns / 1e6,
            100.0 * (best - floor).max(0.0) / best
        );
    }
    if let (Some(dram), Some(slow), Some((floor, _))) =
        (st.all_dram_predicted_ms, st.all_slow_predicted_ms, st.solver_ms)
    {
        let share = plan.inputs.budget_bytes as f64 / plan.inputs.peak_live_bytes.max(1) as f64;
        let _ = writeln!(
            s,
            "- What limits the gain: with every tensor in the slow pool the step is predicted at {slow:.3} ms, \
             with unlimited DRAM {dram:.3} ms. A budget of {:.1} MiB ({:.0}% of peak live memory) can buy back at \
             most {:.3} of those {:.3} ms ({:.0}%); the rest is what this model's traffic costs on the slow pool when \
             DRAM holds only that much. The emulated pool's cost per byte comes from this host's DRAM bandwidth \
             (docs/hosts.md), so another host, or a real device, moves every figure here.",
            plan.inputs.budget_bytes as f64 / MIB,
            100.0 * share,
            (slow - floor).max(0.0),
            (slow - dram).max(0.0),
            100.0 * (slow - floor).max(0.0) / (slow - dram).max(f64::MIN_POSITIVE)
        );
    }
    s
}

fn comparison_markdown(c: &Comparison) -> String {
    let mut s = String::from(
        "| strategy | measured ms | ±MAD | predicted ms | error | anchored | speedup vs first-touch | vs all-DRAM | DRAM peak MiB | moves |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in &c.rows {
        let _ = writeln!(
            s,
            "| {} | {:.3} | {:.3} | {:.3} | {} | {} | {} | {} | {:.2} | {} + {} |",
            r.name,
            r.measured_ms,
            r.mad_ms,
            r.predicted_ms,
            pct(Some(r.error)),
            pct(r.anchored_error),
            times(r.speedup_vs_first_touch),
            times(r.slowdown_vs_all_dram),
            r.dram_peak_bytes as f64 / MIB,
            r.blocking_moves,
            r.background_moves
        );
    }
    s
}

fn strategies(sweep: &[SweepPoint]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for p in sweep {
        for r in &p.comparison.rows {
            if !names.contains(&r.name) {
                names.push(r.name.clone());
            }
        }
    }
    names
}

fn sweep_markdown(sweep: &[SweepPoint]) -> String {
    let names = strategies(sweep);
    let mut s = format!("| budget | {} |\n|---|{}\n", names.join(" | "), "---:|".repeat(names.len()));
    for p in sweep {
        let cells: Vec<String> = names
            .iter()
            .map(|n| p.comparison.row(n).map_or("–".into(), |r| format!("{:.3} ms", r.measured_ms)))
            .collect();
        let _ =
            writeln!(s, "| {:.0}% ({:.2} MiB) | {} |", p.share * 100.0, p.budget_bytes as f64 / MIB, cells.join(" | "));
    }
    s
}

fn sweep_chart(sweep: &[SweepPoint]) -> Chart {
    let mut chart =
        Chart::new("measured step time against the DRAM budget", "budget, % of peak live memory", "step, ms");
    for (i, name) in strategies(sweep).iter().enumerate() {
        let points =
            sweep.iter().filter_map(|p| p.comparison.row(name).map(|r| (p.share * 100.0, r.measured_ms))).collect();
        chart.series.push(Series {
            label: name.clone(),
            color: COLORS[i % COLORS.len()].into(),
            mark: Mark::Line,
            points,
        });
    }
    chart
}
