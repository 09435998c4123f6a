//! `--budget`: a byte count (`64GB`, `64GiB`, `512MiB`) or a share of peak live memory
//! (`0.25`, `25%`).

use placer_units::parse_bytes;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    Bytes(u64),
    /// A share of peak live memory, in (0, 1].
    Fraction(f64),
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "budget '{text}': {reason}; use a size such as 64GB, 64GiB or 512MiB, or a share of peak live memory such as 0.25 or 25%"
)]
pub struct BudgetError {
    pub text: String,
    pub reason: String,
}

impl Budget {
    pub fn parse(text: &str) -> Result<Budget, BudgetError> {
        let err = |reason: &str| BudgetError { text: text.to_string(), reason: reason.to_string() };
        let t = text.trim();
        if t.is_empty() {
            return Err(err("empty"));
        }
        if t.starts_with('-') {
            return Err(err("negative"));
        }
        if let Some(percent) = t.strip_suffix('%') {
            let p: f64 = percent.trim().parse().map_err(|_| err("not a percentage"))?;
            if !(p > 0.0 && p <= 100.0) {
                return Err(err("a percentage must be above 0 and at most 100"));
            }
            return Ok(Budget::Fraction(p / 100.0));
        }
        if t.chars().all(|c| c.is_ascii_digit() || c == '.') {
            let f: f64 = t.parse().map_err(|_| err("not a number"))?;
            if !(f > 0.0 && f <= 1.0) {
                return Err(err("a bare number is a share of peak live memory and must be above 0 and at most 1"));
            }
            return Ok(Budget::Fraction(f));
        }
        let bytes = parse_bytes(t).map_err(|reason| BudgetError { text: text.to_string(), reason })?;
        if bytes == 0 {
            return Err(err("zero bytes"));
        }
        Ok(Budget::Bytes(bytes))
    }

    /// The budget in bytes, given peak live memory.
    pub fn resolve(self, peak_bytes: u64) -> u64 {
        match self {
            Budget::Bytes(b) => b,
            Budget::Fraction(f) => (peak_bytes as f64 * f).floor() as u64,
        }
    }
}

impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Budget::Bytes(b) => write!(f, "{}", placer_units::fmt_bytes(*b)),
            Budget::Fraction(x) => write!(f, "{:.0}% of peak live memory", x * 100.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_forms() {
        assert_eq!(Budget::parse("64GB"), Ok(Budget::Bytes(64_000_000_000)));
        assert_eq!(Budget::parse("64GiB"), Ok(Budget::Bytes(64 << 30)));
        assert_eq!(Budget::parse("512MiB"), Ok(Budget::Bytes(512 << 20)));
        assert_eq!(Budget::parse("0.25"), Ok(Budget::Fraction(0.25)));
        assert_eq!(Budget::parse("25%"), Ok(Budget::Fraction(0.25)));
        assert_eq!(Budget::parse("100%"), Ok(Budget::Fraction(1.0)));
        assert_eq!(Budget::Fraction(0.25).resolve(1000), 250);
    }

    #[test]
    fn bad_forms_name_the_accepted_ones() {
        for bad in ["64 GBs", "-1GB", "-0.5", "0", "0%", "0GB", "", "150%", "64", "1.5", "abc%", "1..2"] {
            let e = Budget::parse(bad).expect_err(bad).to_string();
            assert!(e.contains(&format!("'{bad}'")), "{e}");
            assert!(e.contains("64GiB") && e.contains("25%"), "{e}");
        }
        assert!(Budget::parse("64 GBs").expect_err("unit").to_string().contains("unknown unit 'gbs'"));
    }
}
