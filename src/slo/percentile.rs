//! Which statistic of a latency distribution an SLO limits.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::InputError;

/// The statistic an SLO limit applies to: the mean or a percentile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Percentile {
    Mean,
    /// A percentile between 0 and 100 (exclusive of 0), e.g. 90.0 for p90.
    P(f64),
}

impl Percentile {
    /// True when a limit met at `self` proves the same limit at `asked`.
    ///
    /// A higher percentile bounds every lower one, so p99 ≤ X proves p90 ≤ X. The mean and a
    /// percentile bound nothing about each other in general (a long tail moves the mean past the
    /// median; a tight tail keeps it below), so the mean only proves the mean.
    pub fn proves(self, asked: Percentile) -> bool {
        match (self, asked) {
            (Percentile::Mean, Percentile::Mean) => true,
            (Percentile::P(have), Percentile::P(want)) => have + 1e-9 >= want,
            _ => false,
        }
    }
}

impl fmt::Display for Percentile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Percentile::Mean => write!(f, "mean"),
            Percentile::P(q) => write!(f, "p{}", crate::slo::duration::trim_number(*q)),
        }
    }
}

impl FromStr for Percentile {
    type Err = InputError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let lower = text.trim().to_ascii_lowercase();
        if lower == "mean" || lower == "avg" || lower == "average" {
            return Ok(Percentile::Mean);
        }
        let invalid = || {
            InputError::value(format!(
                "unknown percentile '{text}': use mean, p50, p90, p95, p99 or p99.9"
            ))
        };
        let digits = lower.strip_prefix('p').ok_or_else(invalid)?;
        let q: f64 = digits.parse().map_err(|_| invalid())?;
        if !(q > 0.0 && q < 100.0) {
            return Err(invalid());
        }
        Ok(Percentile::P(q))
    }
}

impl TryFrom<String> for Percentile {
    type Error = InputError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<Percentile> for String {
    fn from(p: Percentile) -> String {
        p.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        assert_eq!("p90".parse::<Percentile>().unwrap(), Percentile::P(90.0));
        assert_eq!("MEAN".parse::<Percentile>().unwrap(), Percentile::Mean);
        assert_eq!("p99.9".parse::<Percentile>().unwrap().to_string(), "p99.9");
        assert!("p100".parse::<Percentile>().is_err());
        assert!("90".parse::<Percentile>().is_err());
    }

    #[test]
    fn higher_percentiles_prove_lower_ones_only() {
        let p = |q| Percentile::P(q);
        assert!(p(99.0).proves(p(90.0)));
        assert!(p(90.0).proves(p(90.0)));
        assert!(!p(50.0).proves(p(90.0)));
        assert!(Percentile::Mean.proves(Percentile::Mean));
        assert!(!Percentile::Mean.proves(p(50.0)));
        assert!(!p(99.0).proves(Percentile::Mean));
    }
}
