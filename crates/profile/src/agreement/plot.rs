//! The agreement report drawn: B's kernel medians against A's.

use super::AgreementReport;
use placer_plot::{COLORS, Chart, Mark, Marker, Series};

/// A log-log scatter of A's median (x) against B's (y) with the y = x line and the ±10%
/// lines (y = 0.9x, 1.1x); tiny kernels are their own series. placer-plot has linear axes
/// whose y starts at zero, so the chart plots log10 of the medians in µs, or in ns when a
/// median is under 1 µs (whose log10 µs would fall below the axis); the axis labels say
/// which.
pub fn scatter_svg(c: &AgreementReport) -> String {
    let all = || c.rows.iter().flat_map(|r| [r.a_us, r.b_us]);
    let (unit, scale) = if all().all(|v| v >= 1.0) { ("µs", 1.0) } else { ("ns", 1e3) };
    let log = |v: f64| (v * scale).log10();
    let (lo, hi) = all().map(log).fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| (l.min(v), h.max(v)));
    let (lo, hi) = if lo.is_finite() && hi.is_finite() { (lo, hi.max(lo + 1.0)) } else { (0.0, 1.0) };
    let emulated = if c.emulated { " [EMULATED]" } else { "" };
    let mut chart = Chart::new(
        &format!("{}: kernel medians, B ({}) against A ({}){emulated}", c.model_name, c.b.mode, c.a.mode),
        &format!("A median, log10 {unit}"),
        &format!("B median, log10 {unit}"),
    );
    let line = |label: &str, color: &str, factor: f64| Series {
        label: label.into(),
        color: color.into(),
        mark: Mark::Line,
        points: vec![(lo, lo + factor.log10()), (hi, hi + factor.log10())],
    };
    chart.series.push(line("B = A", "#333333", 1.0));
    chart.series.push(line("B = 1.1·A (+10%)", COLORS[2], 1.1));
    chart.series.push(line("B = 0.9·A (−10%)", COLORS[2], 0.9));
    let points = |tiny: bool| -> Vec<(f64, f64)> {
        c.rows.iter().filter(|r| r.tiny == tiny).map(|r| (log(r.a_us), log(r.b_us))).collect()
    };
    chart.series.push(Series {
        label: format!("kernels ≥ {} µs", c.options.min_us),
        color: COLORS[0].into(),
        mark: Mark::Points,
        points: points(false),
    });
    chart.series.push(Series {
        label: format!("tiny (< {} µs)", c.options.min_us),
        color: COLORS[3].into(),
        mark: Mark::Points,
        points: points(true),
    });
    if let Some(w) = c.worst.first() {
        chart.markers.push(Marker {
            x: log(w.a_us),
            y: log(w.b_us),
            label: format!("worst: {} {} {:.2}x", w.op, w.node, w.ratio),
        });
    }
    chart.to_svg()
}
