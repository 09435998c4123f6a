//! Gantt-style timeline: one row per tensor, coloured bars for the memory pool it
//! occupies over the schedule steps, and black ticks where it moves.

use std::fmt::Write as _;

use crate::escape;

/// One stretch of a row in one category, over schedule steps `from..=to` (drawn at
/// least one pixel wide, so a tensor that lives for a single step stays visible).
#[derive(Debug, Clone)]
pub struct TimelineBar {
    pub from: f64,
    pub to: f64,
    /// Index into [`Timeline::categories`]; unknown indices are drawn grey.
    pub category: usize,
}

#[derive(Debug, Clone, Default)]
pub struct TimelineRow {
    pub label: String,
    pub bars: Vec<TimelineBar>,
    /// x positions of events (for example a move), drawn as small black ticks.
    pub marks: Vec<f64>,
}

#[derive(Debug, Clone, Default)]
pub struct Timeline {
    pub title: String,
    pub x_label: String,
    /// `(label, color)` of each category, shown in the legend.
    pub categories: Vec<(String, String)>,
    pub rows: Vec<TimelineRow>,
    /// Rows beyond this many are left out (and the subtitle says so).
    pub max_rows: usize,
}

const WIDTH: f64 = 960.0;
const RIGHT: f64 = 24.0;
/// Left margin without row labels, and with them.
const LEFT: f64 = 48.0;
const LABEL_LEFT: f64 = 170.0;
const TOP: f64 = 80.0;
const BOTTOM: f64 = 48.0;
/// Rows share about this much height, within [MIN_ROW, MAX_ROW] pixels each.
const PLOT_TARGET: f64 = 560.0;
const MIN_ROW: f64 = 3.0;
const MAX_ROW: f64 = 14.0;
/// Rows at least this tall get a label.
const LABEL_ROW: f64 = 9.0;
const LABEL_CHARS: usize = 24;
/// Height of the plot area of an empty chart.
const EMPTY_H: f64 = 40.0;
const UNKNOWN_COLOR: &str = "#999";

impl Timeline {
    pub fn new(title: &str, x_label: &str) -> Timeline {
        Timeline { title: title.to_string(), x_label: x_label.to_string(), max_rows: 400, ..Timeline::default() }
    }

    /// The x range over all rows (shown or not), widened to whole steps.
    fn extent(&self) -> (f64, f64) {
        let xs =
            self.rows.iter().flat_map(|r| r.bars.iter().flat_map(|b| [b.from, b.to]).chain(r.marks.iter().copied()));
        let (lo, hi) = xs
            .filter(|v| v.is_finite())
            .fold(None, |acc: Option<(f64, f64)>, v| Some(acc.map_or((v, v), |(a, b)| (a.min(v), b.max(v)))))
            .unwrap_or((0.0, 1.0));
        let (lo, hi) = (lo.floor(), hi.ceil());
        (lo, if hi > lo { hi } else { lo + 1.0 })
    }

    pub fn to_svg(&self) -> String {
        let shown = &self.rows[..self.rows.len().min(self.max_rows)];
        let row_h = (PLOT_TARGET / shown.len().max(1) as f64).floor().clamp(MIN_ROW, MAX_ROW);
        let labelled = !shown.is_empty() && row_h >= LABEL_ROW;
        let left = if labelled { LABEL_LEFT } else { LEFT };
        let plot_w = WIDTH - left - RIGHT;
        let plot_h = if shown.is_empty() { EMPTY_H } else { shown.len() as f64 * row_h };
        let height = TOP + plot_h + BOTTOM;
        let (x0, x1) = self.extent();
        let sx = |x: f64| left + (x.clamp(x0, x1) - x0) / (x1 - x0) * plot_w;

        let mut svg = crate::open_svg(WIDTH, height, &self.title, 22.0);
        let n = self.rows.len();
        let note = match (n, shown.len()) {
            (1, 1) => "1 tensor".to_string(),
            (n, s) if s < n => format!("first {s} of {n} tensors"),
            (n, _) => format!("{n} tensors"),
        };
        let _ = writeln!(svg, r##"<text x="{}" y="40" fill="#555" text-anchor="middle">{note}</text>"##, WIDTH / 2.0);
        // Legend: one swatch per category, left to right above the plot.
        let mut lx = left;
        for (label, color) in &self.categories {
            let _ = writeln!(
                svg,
                r#"<rect class="legend" x="{lx:.1}" y="{}" width="10" height="10" fill="{}"/>"#,
                TOP - 24.0,
                escape(color)
            );
            let _ = writeln!(svg, r#"<text x="{:.1}" y="{}">{}</text>"#, lx + 14.0, TOP - 15.0, escape(label));
            lx += 14.0 + 7.0 * label.chars().count() as f64 + 16.0;
        }

        if shown.is_empty() {
            let _ = writeln!(
                svg,
                r##"<text x="{:.1}" y="{}" fill="#555" text-anchor="middle">no tensors</text>"##,
                left + plot_w / 2.0,
                TOP + EMPTY_H / 2.0 + 4.0
            );
        } else {
            for t in step_ticks(x0, x1) {
                let x = sx(t);
                let (y0, y1) = (TOP + plot_h, TOP + plot_h + 4.0);
                let _ = writeln!(svg, r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{y0}" stroke="#eee"/>"##);
                let _ = writeln!(svg, r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{y1}" stroke="#999"/>"##);
                let _ = writeln!(svg, r#"<text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"#, y0 + 18.0, t as i64);
            }
        }
        // Bars get a one-pixel gap between rows once rows are tall enough to spare it.
        let bar_h = if row_h >= 6.0 { row_h - 1.0 } else { row_h };
        let mut marks = String::new();
        for (i, row) in shown.iter().enumerate() {
            let y = TOP + i as f64 * row_h;
            if labelled {
                let _ = writeln!(
                    svg,
                    r#"<text x="{}" y="{:.1}" font-size="10" text-anchor="end">{}</text>"#,
                    left - 6.0,
                    y + row_h / 2.0 + 3.5,
                    escape(&truncate(&row.label, LABEL_CHARS))
                );
            }
            for b in row.bars.iter().filter(|b| b.from.is_finite() && b.to.is_finite()) {
                let (a, z) = (sx(b.from.min(b.to)), sx(b.from.max(b.to)));
                let color = self.categories.get(b.category).map_or(UNKNOWN_COLOR, |c| c.1.as_str());
                let _ = writeln!(
                    svg,
                    r#"<rect class="bar" x="{a:.1}" y="{y:.1}" width="{:.1}" height="{bar_h}" fill="{}"/>"#,
                    (z - a).max(1.0),
                    escape(color)
                );
            }
            for &m in row.marks.iter().filter(|m| m.is_finite()) {
                let _ = write!(marks, "M{:.1} {:.1}v{bar_h}", sx(m), y);
            }
        }
        if !marks.is_empty() {
            let _ = writeln!(svg, r#"<path class="marks" d="{marks}" stroke="black" stroke-width="1.5" fill="none"/>"#);
        }
        let _ = writeln!(
            svg,
            r##"<rect class="frame" x="{left}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>"##
        );
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            left + plot_w / 2.0,
            height - 10.0,
            escape(&self.x_label)
        );
        svg.push_str("</svg>\n");
        svg
    }
}

/// Whole-step ticks covering [lo, hi]: steps of 1, 2, 2.5 or 5 times a power of ten
/// (2.5 only from 25 up), the smallest giving at most 9 intervals, so 5 to 10 ticks
/// once the range spans a few steps.
fn step_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = hi - lo;
    if span <= 0.0 || !span.is_finite() {
        return vec![lo];
    }
    let mut magnitude = 1.0;
    let step = loop {
        let candidates: &[f64] = if magnitude >= 10.0 { &[1.0, 2.0, 2.5, 5.0] } else { &[1.0, 2.0, 5.0] };
        if let Some(s) = candidates.iter().map(|m| m * magnitude).find(|s| span / s <= 9.0) {
            break s;
        }
        magnitude *= 10.0;
    };
    let first = (lo / step).ceil() * step;
    (0..).map(|i| first + i as f64 * step).take_while(|&t| t <= hi).collect()
}

/// At most `max` characters, ending in an ellipsis when cut.
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::COLORS;

    fn chart(rows: usize) -> Timeline {
        let mut t = Timeline::new("memory <pools>", "step");
        t.categories = vec![("dram".into(), COLORS[0].into()), ("pmem".into(), COLORS[1].into())];
        for i in 0..rows {
            let bars = vec![
                TimelineBar { from: i as f64, to: i as f64 + 10.0, category: 0 },
                TimelineBar { from: i as f64 + 10.0, to: i as f64 + 40.0, category: 1 },
            ];
            t.rows.push(TimelineRow { label: format!("tensor {i}"), bars, marks: vec![i as f64 + 10.0] });
        }
        t
    }

    #[test]
    fn bars_legend_and_escaping() {
        let mut t = chart(2);
        t.rows[1].label = "grad <&> of a very long tensor name indeed".into();
        t.rows[1].bars.push(TimelineBar { from: 5.0, to: 5.0, category: 7 });
        let svg = t.to_svg();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches(r#"class="bar""#).count(), 5);
        assert_eq!(svg.matches(r#"class="legend""#).count(), 2);
        // Background, frame, two legend swatches and five bars.
        assert_eq!(svg.matches("<rect").count(), 9);
        assert_eq!(svg.matches(r#"class="marks""#).count(), 1);
        assert!(svg.contains("memory &lt;pools&gt;") && svg.contains("2 tensors"));
        assert!(svg.contains("grad &lt;&amp;&gt; of a very long…") && !svg.contains("<&>"));
        assert!(svg.contains(">tensor 0<"), "tall rows are labelled");
        assert_eq!(t.to_svg(), svg, "deterministic");
    }

    #[test]
    fn many_rows_are_cut_and_unlabelled() {
        let mut t = chart(1234);
        t.max_rows = 400;
        let svg = t.to_svg();
        assert!(svg.contains("first 400 of 1234 tensors"));
        assert_eq!(svg.matches(r#"class="bar""#).count(), 800);
        assert!(!svg.contains(">tensor 0<"), "3 px rows carry no labels");
        assert!(svg.contains(r#"height="1328""#), "80 + 400 * 3 + 48");
    }

    #[test]
    fn empty_timeline_still_renders() {
        let svg = Timeline::new("empty", "step").to_svg();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n") && svg.contains("no tensors"));
        assert_eq!(svg.matches(r#"class="bar""#).count(), 0);
    }

    #[test]
    fn ticks_are_whole_steps() {
        assert_eq!(step_ticks(0.0, 3.0), vec![0.0, 1.0, 2.0, 3.0]);
        for hi in [12.0, 97.0, 1_000.0, 1_234.0, 55_555.0] {
            let t = step_ticks(0.0, hi);
            assert!((5..=10).contains(&t.len()), "{hi}: {t:?}");
            assert!(t.iter().all(|v| v.fract() == 0.0 && *v <= hi));
        }
    }
}
