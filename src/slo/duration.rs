//! Durations as users type them: `3s`, `3.15s`, `100ms`, `250us`, `2m`.
//!
//! A bare number is refused rather than guessed: `--tpot 100` could mean 100 ms or 100 s, and a
//! planner that guesses wrong buys the wrong fleet.

use crate::error::InputError;

/// Parses a duration with a unit into seconds.
pub fn parse_seconds(text: &str) -> Result<f64, InputError> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let expected = "expected a number and a unit: ns, us, ms, s, m or h (e.g. 3s, 3.15s, 100ms)";
    let value: f64 = number
        .parse()
        .map_err(|_| InputError::value(format!("cannot read duration '{text}': {expected}")))?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "" => {
            return Err(InputError::value(format!(
                "duration '{text}' has no unit: write {number}s or {number}ms"
            )))
        }
        _ => {
            return Err(InputError::value(format!(
                "cannot read duration '{text}': {expected}"
            )))
        }
    };
    if !value.is_finite() {
        return Err(InputError::value(format!(
            "cannot read duration '{text}': {expected}"
        )));
    }
    Ok(value * scale)
}

/// Parses a duration that must be above zero (an SLO limit).
pub fn parse_positive_seconds(text: &str) -> Result<f64, InputError> {
    let seconds = parse_seconds(text)?;
    if seconds <= 0.0 {
        return Err(InputError::value(format!(
            "duration '{text}' must be above zero"
        )));
    }
    Ok(seconds)
}

/// Formats seconds the way people read latency limits: `3.15 s`, `100 ms`.
pub fn format_seconds(seconds: f64) -> String {
    if seconds >= 1.0 {
        format!("{} s", trim_number(seconds))
    } else if seconds >= 1e-3 {
        format!("{} ms", trim_number(seconds * 1e3))
    } else {
        format!("{} us", trim_number(seconds * 1e6))
    }
}

/// A number with at most three decimals and no trailing zeros.
pub fn trim_number(value: f64) -> String {
    let text = format!("{value:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_units() {
        assert_eq!(parse_seconds("3s").unwrap(), 3.0);
        assert!((parse_seconds("3.15s").unwrap() - 3.15).abs() < 1e-12);
        assert!((parse_seconds("100ms").unwrap() - 0.1).abs() < 1e-12);
        assert!((parse_seconds("250us").unwrap() - 250e-6).abs() < 1e-15);
        assert_eq!(parse_seconds("2m").unwrap(), 120.0);
        assert_eq!(parse_seconds(" 1.5 s ").unwrap(), 1.5);
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        for bad in ["3x", "", "s", "fast", "1..2s", "3 parsecs"] {
            let err = parse_seconds(bad).unwrap_err().to_string();
            assert!(err.contains(bad.trim()), "{err}");
            assert!(err.contains("ms"), "message lists valid units: {err}");
        }
        let err = parse_seconds("100").unwrap_err().to_string();
        assert!(err.contains("no unit") && err.contains("100ms"), "{err}");
        assert!(parse_positive_seconds("0s").is_err());
        assert!(parse_positive_seconds("-1s").is_err());
    }

    #[test]
    fn formats_for_people() {
        assert_eq!(format_seconds(3.15), "3.15 s");
        assert_eq!(format_seconds(0.1), "100 ms");
        assert_eq!(format_seconds(2.0), "2 s");
    }
}
