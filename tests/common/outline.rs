//! What stays the same between runs of output that holds measurements: the measured
//! figures replaced, or only the outline kept (headings, tables' headers and row
//! labels). Snapshots of timed output pin what a user reads without pinning the host.

/// `text` with every wall time shown as `N`: a number of seconds (`0.2 s`), or of
/// milliseconds after "placed in". For output whose only varying parts are how long
/// things took; predicted step times (also in ms) stay.
pub fn durations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        if bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric()) {
            let mut j = i;
            while j < bytes.len() && (bytes[j].is_ascii_digit() || bytes[j] == b'.') {
                j += 1;
            }
            let rest = &text[j..];
            let ends = |u: &str| rest.starts_with(u) && !rest[u.len()..].starts_with(|c: char| c.is_alphanumeric());
            let unit = ends(" s") || (ends(" ms") && out.ends_with("placed in "));
            if unit {
                out.push('N');
                i = j;
                continue;
            }
            out.push_str(&text[start..j]);
            i = j;
            continue;
        }
        let c = text[i..].chars().next().expect("a char");
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// The outline of a report: its headings (Markdown `#` lines, or lines that start at
/// the margin and end with no full stop), each table's header, and the first cell of
/// each of its rows. Paragraphs and measured cells are left out.
pub fn outline(text: &str) -> String {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    for (k, line) in lines.iter().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') {
            out.push(trimmed.to_string());
        } else if trimmed.starts_with('|') {
            let header = lines.get(k + 1).is_some_and(|next| next.trim_start().starts_with("|---"));
            if header {
                out.push(trimmed.to_string());
            } else if !trimmed.starts_with("|---") {
                let first = trimmed.trim_matches('|').split('|').next().unwrap_or("").trim();
                out.push(format!("| {first} | …"));
            }
        }
    }
    out.join("\n") + "\n"
}

/// The outline of the CLI's text output: each line at the margin up to its first colon
/// (a section title or the start of a note), and of each indented line its first cell
/// (the text before the first run of two spaces: a row's label), except rows labelled
/// by a number (which kernels head a list depends on the run) and warnings (a busy
/// host's).
pub fn text_outline(text: &str) -> String {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() || line.trim_start().starts_with("warning:") {
            continue;
        }
        if !line.starts_with(' ') {
            let head = line.split_once(':').map_or(line, |(h, _)| h);
            out.push(if head.len() < line.len() { format!("{head}: …") } else { line.to_string() });
            continue;
        }
        let body = line.trim_start();
        let first = body.split("  ").next().unwrap_or(body).trim();
        if first.parse::<f64>().is_err() {
            out.push(format!("  {first}"));
        }
    }
    out.join("\n") + "\n"
}
