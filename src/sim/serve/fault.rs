//! Faults the simulated server injects into a share of requests, so the probe's handling of
//! broken servers can be tested against known truth.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::error::InputError;

/// One way a response goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// The connection is cut part-way through the stream.
    Reset,
    /// HTTP 500 before any token.
    Http500,
    /// HTTP 429 (rate limited) before any token.
    Http429,
    /// The stream goes silent after its first token and stays open.
    Stall,
    /// An event whose JSON is cut off, part-way through the stream.
    Malformed,
    /// HTTP 200, then an `{"error": …}` event part-way through; the stream ends.
    ErrorInStream,
    /// Every token and the usage arrive, but no `data: [DONE]`.
    NoDone,
}

impl FaultKind {
    pub const ALL: [FaultKind; 7] = [
        FaultKind::Reset,
        FaultKind::Http500,
        FaultKind::Http429,
        FaultKind::Stall,
        FaultKind::Malformed,
        FaultKind::ErrorInStream,
        FaultKind::NoDone,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Reset => "reset",
            FaultKind::Http500 => "http500",
            FaultKind::Http429 => "http429",
            FaultKind::Stall => "stall",
            FaultKind::Malformed => "malformed",
            FaultKind::ErrorInStream => "error-in-stream",
            FaultKind::NoDone => "no-done",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `KIND:FRACTION`, e.g. `reset:0.05`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultRule {
    pub kind: FaultKind,
    pub fraction: f64,
}

impl FromStr for FaultRule {
    type Err = InputError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let names: Vec<&str> = FaultKind::ALL.iter().map(|k| k.name()).collect();
        let invalid = || {
            InputError::value(format!(
                "fault '{text}': use KIND:FRACTION with KIND one of {} and FRACTION in 0..=1 \
                 (e.g. reset:0.05)",
                names.join(", ")
            ))
        };
        let (kind, fraction) = text.split_once(':').ok_or_else(invalid)?;
        let kind = FaultKind::ALL
            .into_iter()
            .find(|k| k.name() == kind.trim())
            .ok_or_else(invalid)?;
        let fraction: f64 = fraction.trim().parse().map_err(|_| invalid())?;
        if !(0.0..=1.0).contains(&fraction) {
            return Err(invalid());
        }
        Ok(FaultRule { kind, fraction })
    }
}

/// Which requests get which fault: request n draws a deterministic uniform number from the
/// seed and n, and the rules' fractions are laid end to end over [0, 1).
#[derive(Debug, Clone, Default)]
pub struct FaultPlan {
    pub rules: Vec<FaultRule>,
    pub seed: u64,
}

impl FaultPlan {
    pub fn new(rules: Vec<FaultRule>, seed: u64) -> Result<FaultPlan, InputError> {
        let total: f64 = rules.iter().map(|r| r.fraction).sum();
        if total > 1.0 + 1e-9 {
            return Err(InputError::value(format!(
                "fault fractions add up to {total}, more than 1"
            )));
        }
        Ok(FaultPlan { rules, seed })
    }

    pub fn for_request(&self, n: u64) -> Option<FaultKind> {
        if self.rules.is_empty() {
            return None;
        }
        let u = unit_hash(self.seed, n);
        let mut edge = 0.0;
        for rule in &self.rules {
            edge += rule.fraction;
            if u < edge {
                return Some(rule.kind);
            }
        }
        None
    }
}

/// SplitMix64 of (seed, n) mapped to [0, 1): a stable, well-mixed draw per request.
fn unit_hash(seed: u64, n: u64) -> f64 {
    let mut z = seed
        .wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rules() {
        let rule: FaultRule = "reset:0.05".parse().unwrap();
        assert_eq!(rule.kind, FaultKind::Reset);
        assert_eq!(rule.fraction, 0.05);
        assert!("reset".parse::<FaultRule>().is_err());
        assert!("explode:0.1".parse::<FaultRule>().is_err());
        assert!("stall:1.5".parse::<FaultRule>().is_err());
    }

    #[test]
    fn fractions_hold_over_many_requests() {
        let plan = FaultPlan::new(
            vec![
                FaultRule {
                    kind: FaultKind::Reset,
                    fraction: 0.1,
                },
                FaultRule {
                    kind: FaultKind::Http500,
                    fraction: 0.2,
                },
            ],
            42,
        )
        .unwrap();
        let n = 20_000;
        let resets = (0..n)
            .filter(|&i| plan.for_request(i) == Some(FaultKind::Reset))
            .count();
        let errors = (0..n)
            .filter(|&i| plan.for_request(i) == Some(FaultKind::Http500))
            .count();
        // Binomial standard deviation for p = 0.1 over 20 000 is 42.
        assert!((resets as f64 - 2000.0).abs() < 200.0, "{resets}");
        assert!((errors as f64 - 4000.0).abs() < 250.0, "{errors}");
        assert_eq!(plan.for_request(7), plan.for_request(7));
        assert!(FaultPlan::new(
            vec![
                FaultRule {
                    kind: FaultKind::Stall,
                    fraction: 0.7
                };
                2
            ],
            1
        )
        .is_err());
    }
}
