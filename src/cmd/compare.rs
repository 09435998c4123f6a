//! `placer compare A.ckpt B.ckpt [--tolerance T] [--min-us U] [--share S] [--json] [--svg FILE] [--top N]`

use crate::table::{Table, count};
use anyhow::Context as _;
use placer_profile::{Agreement, AgreementReport, CompareOptions, ProfileFacts, compare_with_repeat, scatter_svg};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The reference profile (a checkpoint written by `placer profile`), usually single mode.
    a: PathBuf,
    /// The profile compared against it; ratios are B/A.
    b: PathBuf,
    /// Relative difference of medians that counts as agreement (0.05 is ±5%).
    #[arg(long, default_value_t = 0.05)]
    tolerance: f64,
    /// Kernels faster than this in A (µs) are summarised apart: timer and launch
    /// overheads dominate them.
    #[arg(long, default_value_t = 50.0, value_name = "US")]
    min_us: f64,
    /// Share of the other kernels that must agree within --tolerance.
    #[arg(long, default_value_t = 0.95)]
    share: f64,
    /// Print the comparison (every kernel included) as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Also draw B's medians against A's into this SVG file (log-log).
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// How many of the worst-agreeing kernels to list.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// A repeat of A (same model, same mode, measured again): A against it is the noise
    /// floor, shown beside A against B.
    #[arg(long, value_name = "A2.ckpt")]
    repeat: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let a = placer_profile::load_checkpoint(&args.a)?;
    let b = placer_profile::load_checkpoint(&args.b)?;
    // A profile taken on a busy host disagrees with its repeat for reasons of the host.
    for (path, profile) in [(&args.a, &a), (&args.b, &b)] {
        if profile.busy_intervals().0 > 0 {
            errln!("warning: {} was measured on a busy host: {}", path.display(), profile.activity_note());
        }
    }
    let options = CompareOptions { tolerance: args.tolerance, min_us: args.min_us, share: args.share };
    let repeat = args.repeat.as_deref().map(placer_profile::load_checkpoint).transpose()?;
    let mut c = compare_with_repeat(&a, &b, repeat.as_ref(), &options).with_context(|| match &args.repeat {
        Some(r) => {
            format!("cannot compare {} with {} and its repeat {}", args.a.display(), args.b.display(), r.display())
        }
        None => format!("cannot compare {} with {}", args.a.display(), args.b.display()),
    })?;
    c.worst = c.worst_offenders(args.top);
    if let Some(path) = &args.svg {
        // Beside the target, then renamed, so a reader never sees half a file.
        placer_files::write_atomic(path, scatter_svg(&c))
            .map_err(|e| e.io)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&c)?)?;
    } else {
        out!("{}", render(&c, &args.a, &args.b))?;
    }
    if let Some(path) = &args.svg {
        errln!("wrote scatter plot to {}", path.display());
    }
    if c.meets {
        if !args.json {
            // On disagreement the verdict is the error line instead, so it is not printed twice.
            outln!("\n{}", c.verdict)?;
        }
        Ok(())
    } else {
        Err(crate::exit::Disagreement(c.verdict).into())
    }
}

fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "-".into(), |s| format!("{:.1}%", 100.0 * s))
}

fn ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "-".into(), |r| format!("{r:.3}"))
}

fn us(v: f64) -> String {
    if v >= 100.0 { format!("{v:.0}") } else { format!("{v:.1}") }
}

fn memory(f: &ProfileFacts) -> String {
    if f.emulated { "EMULATED pool(s)".into() } else { "real".into() }
}

fn render(c: &AgreementReport, a: &Path, b: &Path) -> String {
    let mut facts = Table::new(&["", "A", "B"]);
    facts.row(vec!["file".into(), a.display().to_string(), b.display().to_string()]);
    facts.row(vec!["mode".into(), c.a.mode.clone(), c.b.mode.clone()]);
    facts.row(vec!["kernels".into(), c.a.kernels.clone(), c.b.kernels.clone()]);
    facts.row(vec!["host".into(), c.a.host_fingerprint.clone(), c.b.host_fingerprint.clone()]);
    facts.row(vec!["memory".into(), memory(&c.a), memory(&c.b)]);
    let passes = |f: &ProfileFacts| format!("{} of {}", f.passes_done, f.passes_total);
    facts.row(vec!["passes".into(), passes(&c.a), passes(&c.b)]);
    let wall_b = match c.wall_ratio {
        Some(r) => format!("{:.1} s ({r:.2}x A)", c.b.wall_seconds),
        None => format!("{:.1} s", c.b.wall_seconds),
    };
    facts.row(vec!["wall time".into(), format!("{:.1} s", c.a.wall_seconds), wall_b]);
    facts.row(vec!["measurements".into(), count(c.a.measurements as u64), count(c.b.measurements as u64)]);

    let hash = c.model_hash.get(..16).unwrap_or(&c.model_hash);
    let mut out = format!("model {} ({hash}), pools {}\n", c.model_name, c.pools.join(", "));
    if c.emulated {
        out.push_str("EMULATED: at least one pool is emulated; these timings are not measurements of its device\n");
    }
    out.push('\n');
    out.push_str(&facts.render());

    out.push_str(&format!(
        "\nmedians B/A over {} kernel(s) measured by both ({} only in A, {} only in B)\n",
        count(c.matched as u64),
        count(c.only_in_a as u64),
        count(c.only_in_b as u64)
    ));
    // A tolerance of exactly 5% or 10% is already a column; otherwise it gets its own.
    let tol = c.options.tolerance;
    let tol_is_5 = (tol - 0.05).abs() < 1e-12;
    let tol_is_10 = (tol - 0.10).abs() < 1e-12;
    let mut header = vec![
        "kernels".to_string(),
        "count".into(),
        if tol_is_5 { "±5% (tolerance)".into() } else { "±5%".into() },
        if tol_is_10 { "±10% (tolerance)".into() } else { "±10%".into() },
    ];
    if !tol_is_5 && !tol_is_10 {
        header.push(format!("±{:.1}% (tolerance)", 100.0 * tol));
    }
    header.extend(["median B/A".into(), "geomean B/A".into(), "significant".into()]);
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut summary = Table::new(&header);
    let summary_row = |label: String, g: &Agreement| {
        let mut row = vec![label, count(g.rows as u64), percent(g.within_5), percent(g.within_10)];
        if !tol_is_5 && !tol_is_10 {
            row.push(percent(g.within_tolerance));
        }
        row.extend([ratio(g.median_ratio), ratio(g.geomean_ratio), count(g.significant as u64)]);
        row
    };
    summary.row(summary_row(format!("≥ {} µs", c.options.min_us), &c.non_tiny));
    summary.row(summary_row(format!("< {} µs (tiny)", c.options.min_us), &c.tiny));
    if let Some(floor) = &c.floor {
        summary.row(summary_row(format!("noise floor: A vs repeat, ≥ {} µs", c.options.min_us), floor));
    }
    if let Some(p) = &c.predicted {
        summary.row(summary_row(format!("predicted by a design vs measured, ≥ {} µs", c.options.min_us), p));
    }
    out.push_str(&summary.render());

    if !c.worst.is_empty() {
        out.push_str(&format!(
            "\nworst {} kernel(s) of at least {} µs, by |ln B/A|\n",
            c.worst.len(),
            c.options.min_us
        ));
        let mut worst = Table::new(&["op", "node", "config", "A µs", "B µs", "B/A", "significant"]);
        for r in &c.worst {
            worst.row(vec![
                r.op.clone(),
                r.node.clone(),
                r.config.clone(),
                us(r.a_us),
                us(r.b_us),
                format!("{:.3}", r.ratio),
                if r.significant { "yes".into() } else { "no".into() },
            ]);
        }
        out.push_str(&worst.render());
    }

    if !c.notes.is_empty() {
        out.push_str("\nnotes\n");
        for note in &c.notes {
            out.push_str(&format!("  - {note}\n"));
        }
    }
    out
}
