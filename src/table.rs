//! Plain-text tables and human-readable numbers for terminal output.

/// Formats a byte count with a binary unit: `1.5 GiB`.
pub fn bytes(b: u64) -> String {
    placer_units::fmt_bytes(b)
}

/// Formats a count with thousands separators: `25,557,032`.
pub fn count(n: u64) -> String {
    placer_units::fmt_count(n)
}

/// Formats a large quantity with an SI suffix: `4.1 G`.
pub fn si(v: f64) -> String {
    let (scaled, suffix) = match v {
        v if v >= 1e15 => (v / 1e15, " P"),
        v if v >= 1e12 => (v / 1e12, " T"),
        v if v >= 1e9 => (v / 1e9, " G"),
        v if v >= 1e6 => (v / 1e6, " M"),
        v if v >= 1e3 => (v / 1e3, " k"),
        v => (v, ""),
    };
    if suffix.is_empty() { format!("{v}") } else { format!("{scaled:.2}{suffix}") }
}

/// A table with a header row; columns are left-aligned unless they hold numbers.
#[derive(Debug, Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table { rows: vec![header.iter().map(|h| h.to_string()).collect()] }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let width: Vec<usize> = (0..cols)
            .map(|c| self.rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0))
            .collect();
        let numeric: Vec<bool> = (0..cols)
            .map(|c| {
                self.rows[1..].iter().filter_map(|r| r.get(c)).all(|s| s.starts_with(|ch: char| ch.is_ascii_digit()))
            })
            .collect();
        let mut out = String::new();
        for (i, row) in self.rows.iter().enumerate() {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(c, s)| {
                    if numeric[c] && i > 0 {
                        format!("{s:>w$}", w = width[c])
                    } else {
                        format!("{s:<w$}", w = width[c])
                    }
                })
                .collect();
            out.push_str("  ");
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 << 29), "1.5 GiB");
        assert_eq!(count(25_557_032), "25,557,032");
        assert_eq!(count(12), "12");
        assert_eq!(si(4.09e9), "4.09 G");
    }

    #[test]
    fn tables_align_numbers_right() {
        let mut t = Table::new(&["op", "count"]);
        t.row(vec!["conv2d".into(), "5".into()]);
        t.row(vec!["relu".into(), "120".into()]);
        assert_eq!(t.render(), "  op      count\n  conv2d      5\n  relu      120\n");
    }
}
