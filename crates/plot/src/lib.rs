//! Small, dependency-free SVG charts for placer's reports: line and scatter series,
//! shaded x-ranges, horizontal reference lines and labelled markers.
//!
//! Output is deterministic (same chart, same bytes), so reports can be diffed.

use std::fmt::Write as _;

mod timeline;
pub use timeline::{Timeline, TimelineBar, TimelineRow};

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Line,
    Points,
}

#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub color: String,
    pub mark: Mark,
    pub points: Vec<(f64, f64)>,
}

/// A shaded range of x values (for example the backward pass of a schedule).
#[derive(Debug, Clone)]
pub struct Band {
    pub from: f64,
    pub to: f64,
    pub label: String,
    pub color: String,
}

/// A horizontal reference line (for example a DRAM budget).
#[derive(Debug, Clone)]
pub struct HLine {
    pub y: f64,
    pub label: String,
    pub color: String,
}

/// A labelled point of interest (for example the peak).
#[derive(Debug, Clone)]
pub struct Marker {
    pub x: f64,
    pub y: f64,
    pub label: String,
}

#[derive(Debug, Clone, Default)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Divides y values for tick labels (e.g. 2^30 to label bytes in GiB).
    pub y_unit: f64,
    pub series: Vec<Series>,
    pub bands: Vec<Band>,
    pub hlines: Vec<HLine>,
    pub markers: Vec<Marker>,
}

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 480.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 48.0;
const BOTTOM: f64 = 56.0;

/// An SVG document's opening: the root element, a white background and the title.
pub(crate) fn open_svg(width: f64, height: f64, title: &str, title_y: f64) -> String {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{title_y}" font-size="16" text-anchor="middle">{}</text>"#,
        width / 2.0,
        escape(title)
    );
    svg
}

/// Palette for series, bands and lines, chosen to stay distinguishable in print.
pub const COLORS: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

impl Chart {
    pub fn new(title: &str, x_label: &str, y_label: &str) -> Chart {
        Chart {
            title: title.to_string(),
            x_label: x_label.to_string(),
            y_label: y_label.to_string(),
            y_unit: 1.0,
            ..Chart::default()
        }
    }

    fn extent(&self) -> (f64, f64, f64, f64) {
        let xs = self.series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
        let ys = self.series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
        let (x0, x1) = min_max(xs.chain(self.bands.iter().flat_map(|b| [b.from, b.to])));
        let (_, y1) = min_max(ys.chain(self.hlines.iter().map(|h| h.y)));
        // y always starts at zero: these charts show amounts, and a floating baseline
        // exaggerates small differences.
        (x0, if x1 > x0 { x1 } else { x0 + 1.0 }, 0.0, if y1 > 0.0 { y1 * 1.05 } else { 1.0 })
    }

    pub fn to_svg(&self) -> String {
        let (x0, x1, y0, y1) = self.extent();
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        let sx = |x: f64| LEFT + (x - x0) / (x1 - x0) * plot_w;
        let sy = |y: f64| TOP + plot_h - (y - y0) / (y1 - y0) * plot_h;
        let mut svg = open_svg(WIDTH, HEIGHT, &self.title, 24.0);
        for b in &self.bands {
            let (a, z) = (sx(b.from), sx(b.to));
            let _ = writeln!(
                svg,
                r#"<rect x="{a:.1}" y="{TOP}" width="{:.1}" height="{plot_h}" fill="{}" fill-opacity="0.12"/>"#,
                (z - a).max(0.5),
                b.color
            );
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{}" fill="{}" text-anchor="middle">{}</text>"#,
                (a + z) / 2.0,
                TOP + 14.0,
                b.color,
                escape(&b.label)
            );
        }
        // Ticks are chosen in display units so that labels come out round.
        for t in ticks(y0 / self.y_unit, y1 / self.y_unit) {
            let y = sy(t * self.y_unit);
            let _ =
                writeln!(svg, r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/>"##, WIDTH - RIGHT);
            let _ = writeln!(
                svg,
                r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
                LEFT - 6.0,
                y + 4.0,
                tick_label(t)
            );
        }
        for t in ticks(x0, x1) {
            let x = sx(t);
            let _ = writeln!(
                svg,
                r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="#999"/>"##,
                TOP + plot_h,
                TOP + plot_h + 4.0
            );
            let _ = writeln!(
                svg,
                r#"<text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"#,
                TOP + plot_h + 18.0,
                tick_label(t)
            );
        }
        let _ = writeln!(
            svg,
            r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>"##
        );
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            LEFT + plot_w / 2.0,
            HEIGHT - 12.0,
            escape(&self.x_label)
        );
        let _ = writeln!(
            svg,
            r#"<text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {})">{}</text>"#,
            TOP + plot_h / 2.0,
            TOP + plot_h / 2.0,
            escape(&self.y_label)
        );
        for h in &self.hlines {
            let y = sy(h.y);
            let _ = writeln!(
                svg,
                r#"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="{}" stroke-dasharray="6 4"/>"#,
                WIDTH - RIGHT,
                h.color
            );
            let _ = writeln!(
                svg,
                r#"<text x="{}" y="{:.1}" fill="{}" text-anchor="end">{}</text>"#,
                WIDTH - RIGHT - 4.0,
                y - 4.0,
                h.color,
                escape(&h.label)
            );
        }
        for s in &self.series {
            match s.mark {
                Mark::Line => {
                    let pts: Vec<String> = decimate(&s.points, plot_w as usize, x0, x1)
                        .iter()
                        .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
                        .collect();
                    let _ = writeln!(
                        svg,
                        r#"<polyline fill="none" stroke="{}" stroke-width="1.5" points="{}"/>"#,
                        s.color,
                        pts.join(" ")
                    );
                }
                Mark::Points => {
                    for &(x, y) in &s.points {
                        let _ = writeln!(
                            svg,
                            r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{}" fill-opacity="0.7"/>"#,
                            sx(x),
                            sy(y),
                            s.color
                        );
                    }
                }
            }
        }
        for m in &self.markers {
            let (x, y) = (sx(m.x), sy(m.y));
            let _ = writeln!(svg, r#"<circle cx="{x:.1}" cy="{y:.1}" r="4" fill="none" stroke="black"/>"#);
            let anchor = if x > LEFT + plot_w * 0.7 { "end" } else { "start" };
            let dx = if anchor == "end" { -8.0 } else { 8.0 };
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
                x + dx,
                (y - 6.0).max(TOP + 28.0),
                escape(&m.label)
            );
        }
        // The legend sits in the lower right, where schedules usually end near zero.
        let legend_x = LEFT + plot_w * 0.78;
        for (i, s) in self.series.iter().enumerate() {
            let y = TOP + plot_h - 12.0 - 16.0 * (self.series.len() - 1 - i) as f64;
            let _ = writeln!(
                svg,
                r#"<rect x="{legend_x:.1}" y="{:.1}" width="12" height="3" fill="{}"/>"#,
                y - 4.0,
                s.color
            );
            let _ = writeln!(svg, r#"<text x="{:.1}" y="{y:.1}">{}</text>"#, legend_x + 18.0, escape(&s.label));
        }
        svg.push_str("</svg>\n");
        svg
    }
}

fn min_max(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values
        .filter(|v| v.is_finite())
        .fold(None, |acc: Option<(f64, f64)>, v| Some(acc.map_or((v, v), |(a, b)| (a.min(v), b.max(v)))))
        .unwrap_or((0.0, 1.0))
}

/// Keeps at most two points per horizontal pixel (the lowest and highest), so a
/// 10,000-step schedule draws fast and its peaks survive.
fn decimate(points: &[(f64, f64)], pixels: usize, x0: f64, x1: f64) -> Vec<(f64, f64)> {
    if points.len() <= 2 * pixels.max(1) {
        return points.to_vec();
    }
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(2 * pixels);
    let bucket = |x: f64| (((x - x0) / (x1 - x0)) * pixels as f64) as usize;
    let mut i = 0;
    while i < points.len() {
        let b = bucket(points[i].0);
        let mut lo = points[i];
        let mut hi = points[i];
        while i < points.len() && bucket(points[i].0) == b {
            if points[i].1 < lo.1 {
                lo = points[i];
            }
            if points[i].1 > hi.1 {
                hi = points[i];
            }
            i += 1;
        }
        if lo.0 <= hi.0 {
            out.extend([lo, hi]);
        } else {
            out.extend([hi, lo]);
        }
    }
    out
}

/// Round tick positions (1, 2 or 5 times a power of ten) covering [lo, hi].
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = hi - lo;
    if span <= 0.0 || !span.is_finite() {
        return vec![lo];
    }
    let raw = span / 6.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * magnitude).find(|&s| s >= raw).unwrap_or(10.0 * magnitude);
    let first = (lo / step).ceil() * step;
    (0..).map(|i| first + i as f64 * step).take_while(|&t| t <= hi + step * 1e-9).collect()
}

fn tick_label(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = ticks(0.0, 3.7e9);
        assert_eq!(t[1] - t[0], 1e9);
        assert!(*t.last().expect("ticks") <= 3.7e9);
    }

    #[test]
    fn decimation_keeps_the_peak() {
        let points: Vec<(f64, f64)> = (0..100_000).map(|i| (i as f64, if i == 54_321 { 99.0 } else { 1.0 })).collect();
        let kept = decimate(&points, 800, 0.0, 99_999.0);
        assert!(kept.len() <= 1_602, "{}", kept.len());
        assert!(kept.iter().any(|p| p.1 == 99.0));
    }

    #[test]
    fn svg_is_well_formed_and_escaped() {
        let mut chart = Chart::new("a < b & c", "step", "bytes");
        chart.series.push(Series {
            label: "live".into(),
            color: COLORS[0].into(),
            mark: Mark::Line,
            points: vec![(0.0, 1.0), (1.0, 3.0)],
        });
        chart.markers.push(Marker { x: 1.0, y: 3.0, label: "peak \"x\"".into() });
        let svg = chart.to_svg();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("a &lt; b &amp; c") && svg.contains("peak &quot;x&quot;"));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert_eq!(chart.to_svg(), svg, "deterministic");
    }

    #[test]
    fn empty_chart_still_renders() {
        let svg = Chart::new("empty", "x", "y").to_svg();
        assert!(svg.contains("</svg>"));
    }
}
