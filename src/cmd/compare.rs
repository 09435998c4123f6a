//! `placer compare A.ckpt B.ckpt [--repeat A2.ckpt [--repeat-b B2.ckpt]] [--tolerance T] [--min-us U]
//! [--share S] [--json] [--svg FILE] [--top N]`,
//! or `placer compare RUN.json PROFILE.ckpt [--repeat RUN2.json]`: a profile against the
//! kernels as they ran in a plan (`placer run --plan ... --in-situ RUN.json`).

use crate::table::{Table, count};
use anyhow::Context as _;
use placer_profile::{
    Agreement, AgreementReport, AllDramReference, CompareOptions, InSitu, InSituReport, ProfileError, ProfileFacts,
    ProfileTime, compare_in_situ, compare_with_repeat, scatter_svg,
};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The reference profile (a checkpoint written by `placer profile`), usually single
    /// mode; or a plan's run (`placer run --plan PLAN --in-situ RUN.json`), each kernel
    /// as it ran in the plan.
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
    /// A repeat of B (needs --repeat): the floor is then both profiles' noise, as B/A
    /// carries both. A profile measured in seconds strays with the host's pace of those
    /// seconds more than one measured over minutes.
    #[arg(long, value_name = "B2.ckpt", requires = "repeat")]
    repeat_b: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let options = CompareOptions { tolerance: args.tolerance, min_us: args.min_us, share: args.share };
    if InSitu::is_in_situ(&args.a) {
        return in_situ(&args, &options);
    }
    let a = placer_profile::load_checkpoint(&args.a)?;
    let b = placer_profile::load_checkpoint(&args.b)?;
    // A profile taken on a busy host disagrees with its repeat for reasons of the host.
    for (path, profile) in [(&args.a, &a), (&args.b, &b)] {
        if profile.busy_intervals().0 > 0 {
            errln!("warning: {} was measured on a busy host: {}", path.display(), profile.activity_note());
        }
    }
    let repeat = args.repeat.as_deref().map(placer_profile::load_checkpoint).transpose()?;
    let repeat_b = args.repeat_b.as_deref().map(placer_profile::load_checkpoint).transpose()?;
    let mut c = compare_with_repeat(&a, &b, repeat.as_ref(), repeat_b.as_ref(), &options).with_context(|| {
        let repeats: Vec<String> =
            [&args.repeat, &args.repeat_b].into_iter().flatten().map(|r| r.display().to_string()).collect();
        match repeats.as_slice() {
            [] => format!("cannot compare {} with {}", args.a.display(), args.b.display()),
            r => {
                format!("cannot compare {} with {} and repeat(s) {}", args.a.display(), args.b.display(), r.join(", "))
            }
        }
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
    verdict(c.meets, c.verdict, args.json)
}

/// Prints the verdict when it is agreement; on disagreement the verdict is the error
/// line instead (exit 3), so it is not printed twice.
fn verdict(meets: bool, verdict: String, json: bool) -> anyhow::Result<()> {
    if !meets {
        return Err(crate::exit::Disagreement(verdict).into());
    }
    if !json {
        outln!("\n{verdict}")?;
    }
    Ok(())
}

/// A profile (B) against a plan's run (A), with a second run of the plan as the floor.
fn in_situ(args: &Args, options: &CompareOptions) -> anyhow::Result<()> {
    let usage = |reason: String| -> anyhow::Result<()> { Err(ProfileError::Usage { reason }.into()) };
    if args.svg.is_some() {
        return usage("--svg draws two profiles against each other; it does not draw a run".into());
    }
    if args.repeat_b.is_some() {
        return usage("--repeat-b repeats a profile B; against a run, the floor is a second run (--repeat)".into());
    }
    if InSitu::is_in_situ(&args.b) {
        return usage(format!(
            "{} is a run too: B must be a profile (a checkpoint); a second run of the same plan is --repeat",
            args.b.display()
        ));
    }
    let run = InSitu::load(&args.a)?;
    let profile = placer_profile::load_checkpoint(&args.b)?;
    let repeat = args.repeat.as_deref().map(InSitu::load).transpose()?;
    let mut r = compare_in_situ(&run, &profile, repeat.as_ref(), options)
        .with_context(|| format!("cannot compare the run {} with {}", args.a.display(), args.b.display()))?;
    r.worst = r.worst_offenders(args.top);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&r)?)?;
    } else {
        out!("{}", render_in_situ(&r, &args.a, &args.b, args.top))?;
    }
    verdict(r.meets, r.verdict, args.json)
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
    let mut groups = vec![
        (format!("≥ {} µs", c.options.min_us), &c.non_tiny),
        (format!("< {} µs (tiny)", c.options.min_us), &c.tiny),
    ];
    let min = c.options.min_us;
    match (&c.floor, &c.a_repeat, &c.b_repeat) {
        (Some(floor), Some(a), Some(b)) => {
            groups.push((format!("A vs its repeat, ≥ {min} µs"), a));
            groups.push((format!("B vs its repeat, ≥ {min} µs"), b));
            groups.push((format!("noise floor: both repeats, ≥ {min} µs"), floor));
        }
        (Some(floor), ..) => groups.push((format!("noise floor: A vs repeat, ≥ {min} µs"), floor)),
        (None, ..) => {}
    }
    if let Some(p) = &c.predicted {
        groups.push((format!("predicted by a design vs measured, ≥ {min} µs"), p));
    }
    out.push_str(&agreement_table("kernels", "B/A", c.options.tolerance, &groups));

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

    out.push_str(&notes(&c.notes));
    out
}

/// One row per group of kernels: how many, the shares within ±5%, ±10% and the
/// tolerance (when it is neither), the median and geometric mean of `ratio`, and how
/// many differ significantly.
fn agreement_table(what: &str, ratio_name: &str, tol: f64, groups: &[(String, &Agreement)]) -> String {
    // A tolerance of exactly 5% or 10% is already a column; otherwise it gets its own.
    let tol_is_5 = (tol - 0.05).abs() < 1e-12;
    let tol_is_10 = (tol - 0.10).abs() < 1e-12;
    let mut header = vec![
        what.to_string(),
        "count".into(),
        if tol_is_5 { "±5% (tolerance)".into() } else { "±5%".into() },
        if tol_is_10 { "±10% (tolerance)".into() } else { "±10%".into() },
    ];
    if !tol_is_5 && !tol_is_10 {
        header.push(format!("±{:.1}% (tolerance)", 100.0 * tol));
    }
    header.extend([format!("median {ratio_name}"), format!("geomean {ratio_name}"), "significant".into()]);
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut table = Table::new(&header);
    for (label, g) in groups {
        let mut row = vec![label.clone(), count(g.rows as u64), percent(g.within_5), percent(g.within_10)];
        if !tol_is_5 && !tol_is_10 {
            row.push(percent(g.within_tolerance));
        }
        row.extend([ratio(g.median_ratio), ratio(g.geomean_ratio), count(g.significant as u64)]);
        table.row(row);
    }
    table.render()
}

fn render_in_situ(r: &InSituReport, run: &Path, profile: &Path, top: usize) -> String {
    let hash = r.model_hash.get(..16).unwrap_or(&r.model_hash);
    let mut out = format!("model {} ({hash}), pools {}\n", r.model_name, r.pools.join(", "));
    if r.emulated {
        out.push_str("EMULATED: at least one pool is emulated; these timings are not measurements of its device\n");
    }
    let mut facts = Table::new(&["", "A: the run (each kernel in the plan)", "B: the profile"]);
    facts.row(vec!["file".into(), run.display().to_string(), profile.display().to_string()]);
    facts.row(vec!["what".into(), format!("{}, {} timed step(s)", r.plan, r.run_steps), r.profile.mode.clone()]);
    facts.row(vec![
        "kernels".into(),
        format!("{} in the schedule", count(r.kernels as u64)),
        r.profile.kernels.clone(),
    ]);
    let pace = match &r.pace {
        Some(p) => format!(
            "all-DRAM, run beside the plan: profile/run {:.3} over {} kernel(s), a shift common to every placement",
            p.ratio, p.nodes
        ),
        None => "not known (see the notes)".into(),
    };
    facts.row(vec!["host's pace".into(), pace, String::new()]);
    out.push('\n');
    out.push_str(&facts.render());
    out.push_str(&format!(
        "\nthe profile's time over the run's, per kernel of the schedule ({} left out: configuration not in the \
         profile)\n",
        count(r.unknown as u64)
    ));
    let min = r.options.min_us;
    let mut groups = vec![
        (format!("≥ {min} µs"), &r.all),
        (format!("≥ {min} µs, measured by the profile"), &r.measured),
        (format!("≥ {min} µs, predicted by its design"), &r.predicted),
        (format!("≥ {min} µs, beside a background copy"), &r.beside_copy),
    ];
    if let Some(charged) = &r.beside_copy_charged {
        groups.push((format!("≥ {min} µs, beside a copy, plus the plan's charge"), charged));
    }
    if r.beside_copy.rows > 0 {
        groups.push((format!("≥ {min} µs, apart from copies"), &r.apart_from_copies));
    }
    if let (Some(p), Some(paced)) = (&r.pace, &r.paced) {
        groups.push((format!("≥ {min} µs, divided by the pace's {:.3}", p.ratio), paced));
    }
    groups.push((format!("< {min} µs (tiny)"), &r.tiny));
    let judged = match (&r.pace, r.judged_paced) {
        (Some(p), true) => format!("judged: ≥ {min} µs, the profile plus the charge, at the pace's {:.3}", p.ratio),
        _ => format!("judged: ≥ {min} µs, the profile plus the charge"),
    };
    groups.push((judged, &r.judged));
    if let Some(floor) = &r.floor {
        let label = match r.floor_pace {
            Some(shift) => format!("noise floor: run vs repeat, ≥ {min} µs, at the repeat's pace {shift:.3}"),
            None => format!("noise floor: run vs repeat, ≥ {min} µs"),
        };
        groups.push((label, floor));
    }
    let tol = r.options.tolerance;
    out.push_str(&agreement_table("kernels", "B/A", tol, &groups));
    if !r.copy_charges.is_empty() {
        let paced = if r.judged_paced { " at the profile's pace" } else { "" };
        out.push_str(&format!(
            "\nkernels beside a background copy, per op: what the copies cost them (the run{paced} less the profile) \
             against the plan's charge\n"
        ));
        let mut t = Table::new(&["op", "kernels", "cost ms", "charged ms", "charged/cost"]);
        for c in r.copy_charges.iter().take(top) {
            let ratio = if c.copies_cost_ms > 0.0 {
                format!("{:.2}", c.copies_charged_ms / c.copies_cost_ms)
            } else {
                "-".into()
            };
            t.row(vec![
                c.op.clone(),
                c.kernels.to_string(),
                format!("{:.1}", c.copies_cost_ms),
                format!("{:.1}", c.copies_charged_ms),
                ratio,
            ]);
        }
        let (cost, charged) =
            r.copy_charges.iter().fold((0.0, 0.0), |(a, b), c| (a + c.copies_cost_ms, b + c.copies_charged_ms));
        let n: usize = r.copy_charges.iter().map(|c| c.kernels).sum();
        let ratio = if cost > 0.0 { format!("{:.2}", charged / cost) } else { "-".into() };
        t.row(vec!["all".into(), n.to_string(), format!("{cost:.1}"), format!("{charged:.1}"), ratio]);
        out.push_str(&t.render());
    }
    if let Some(all_dram) = &r.all_dram {
        out.push_str(&render_all_dram(all_dram, min, tol, top));
    }
    // The groups and the worst kernels are of the judged rows: prediction over run.
    let judged_as = match (&r.pace, r.judged_paced) {
        (Some(p), true) => format!("the prediction over the run at the pace's {:.3}", p.ratio),
        _ => "the prediction over the run".into(),
    };
    for (title, list) in [("op", &r.per_op), ("pools of its operands", &r.per_config)] {
        out.push_str(&format!(
            "\nper {title}, kernels of at least {min} µs, {judged_as} ({} group(s){})\n",
            list.len(),
            if list.len() > top { format!(", the {top} largest") } else { String::new() }
        ));
        let rows: Vec<(String, &Agreement)> = list.iter().take(top).map(|g| (g.name.clone(), &g.agreement)).collect();
        out.push_str(&agreement_table(title, "B/A", tol, &rows));
    }
    if !r.worst.is_empty() {
        out.push_str(&format!("\nworst {} kernel(s) of at least {min} µs, by |ln B/A|: {judged_as}\n", r.worst.len()));
        let run_at = if r.judged_paced { "run µs at pace" } else { "run µs" };
        let mut worst = Table::new(&[
            "step",
            "op",
            "node",
            "pools",
            run_at,
            "predicted µs",
            "of it charge",
            "from",
            "B/A",
            "significant",
        ]);
        for w in &r.worst {
            worst.row(vec![
                w.step.to_string(),
                w.row.op.clone(),
                w.row.node.clone(),
                w.row.config.clone(),
                us(w.row.a_us),
                us(w.row.b_us),
                us(w.charged_us),
                match w.from {
                    ProfileTime::Measured => "measured".into(),
                    ProfileTime::Predicted => "predicted".into(),
                },
                format!("{:.3}", w.row.ratio),
                if w.row.significant { "yes".into() } else { "no".into() },
            ]);
        }
        out.push_str(&worst.render());
    }
    out.push_str(&notes(&r.notes));
    out
}

/// The notes under a report, one per line; nothing without any.
fn notes(notes: &[String]) -> String {
    if notes.is_empty() {
        return String::new();
    }
    let lines: String = notes.iter().map(|n| format!("  - {n}\n")).collect();
    format!("\nnotes\n{lines}")
}

/// All-DRAM's run beside the plan as the second reference: the profile against it, the
/// plan's own kernels against it, and the latter per op.
fn render_all_dram(r: &AllDramReference, min: f64, tol: f64, top: usize) -> String {
    let within = |a: &Agreement| percent(a.within_tolerance);
    let mut t = Table::new(&["", "count", "within", "median"]);
    for (label, a) in [
        ("the profile / all-DRAM's run, at the pace".to_string(), &r.profile),
        ("the plan's kernels all in DRAM / all-DRAM's, apart from copies".into(), &r.plan_apart),
        ("the plan's kernels all in DRAM / all-DRAM's, beside a copy".into(), &r.plan_beside_copy),
    ] {
        t.row(vec![label, count(a.rows as u64), within(a), ratio(a.median_ratio)]);
    }
    match &r.itself {
        Some(a) => t.row(vec![
            "all-DRAM run again (A′) / all-DRAM's, the floor".into(),
            count(a.rows as u64),
            within(a),
            ratio(a.median_ratio),
        ]),
        None => t.row(vec![
            "all-DRAM run again (A′): not in this record, so no floor".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ]),
    }
    let mut per_op = Table::new(&[
        "op",
        "apart",
        "within",
        "median",
        "beside a copy",
        "within",
        "median",
        "copies cost ms",
        "charged ms",
    ]);
    for p in r.per_op.iter().take(top) {
        let (a, b) = (&p.apart, &p.beside_copy);
        per_op.row(vec![
            p.op.clone(),
            count(a.rows as u64),
            within(a),
            ratio(a.median_ratio),
            count(b.rows as u64),
            within(b),
            ratio(b.median_ratio),
            if b.rows > 0 { format!("{:.1}", p.copies_cost_ms) } else { "-".into() },
            if b.rows > 0 { format!("{:.1}", p.copies_charged_ms) } else { "-".into() },
        ]);
    }
    format!(
        "\nall-DRAM, run beside the plan, as a second reference (kernels of at least {min} µs in it; within ±{}): \
         how well the profile predicts kernels the plan does not touch, and what the plan does to its own, which is in \
         the run and in no profile of kernels\n{}\nper \
         op: the plan's kernels whose operands all sat in DRAM over the same nodes in all-DRAM's run, and beside a copy what \
         it cost them there (plan less all-DRAM) against the plan's charge ({} op(s){})\n{}",
        percent(Some(tol)),
        t.render(),
        r.per_op.len(),
        if r.per_op.len() > top { format!(", the {top} largest") } else { String::new() },
        per_op.render()
    )
}
