//! Sizes and counts as users write and read them: `64GB`, `16GiB`, `1.5 GiB`,
//! `25,557,032`. A leaf every layer can depend on (the host, the solver, the binary)
//! without pulling in what they depend on.

/// Parses a byte count: a plain integer, or a number with a unit (B, KB, MB, GB, TB in
/// powers of 1000; KiB, MiB, GiB, TiB in powers of 1024). `64GB` is 64·10⁹ bytes.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number.parse().map_err(|_| format!("'{text}' is not a size such as 64GB or 16GiB"))?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        other => return Err(format!("'{text}': unknown unit '{other}' (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)")),
    };
    let bytes = value * scale;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("'{text}' is too large"));
    }
    Ok(bytes.round() as u64)
}

/// Bytes in binary units, for display.
pub fn fmt_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{v:.1} {}", UNITS[unit]) }
}

/// A count with thousands separators, for display: `25,557,032`.
pub fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_both_unit_systems() {
        assert_eq!(parse_bytes("64GB"), Ok(64_000_000_000));
        assert_eq!(parse_bytes("16GiB"), Ok(16 << 30));
        assert_eq!(parse_bytes("1.5 MiB"), Ok(3 << 19));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(parse_bytes("12 parsecs").expect_err("unit").contains("unknown unit 'parsecs'"));
        assert!(parse_bytes("GB").is_err());
        assert!(parse_bytes("1e30TB").is_err());
    }

    #[test]
    fn sizes_print_in_binary_units() {
        assert_eq!(fmt_bytes(512), "512 B");
        assert_eq!(fmt_bytes(3 << 29), "1.5 GiB");
    }
}
