//! What users do between requests: think time.

use std::fmt;
use std::str::FromStr;

use rand::{Rng, RngExt};
use rand_distr::{Distribution, Exp};
use serde::{Deserialize, Serialize};

use crate::error::InputError;
use crate::slo::duration::{format_seconds, parse_seconds, trim_number};

/// Pause between a response and the same user's next request.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ThinkTime {
    /// Always the same pause (0 = back to back).
    Fixed { seconds: f64 },
    /// Uniform between `min_s` and `max_s` (Locust's `between(a, b)`).
    Uniform { min_s: f64, max_s: f64 },
    /// Exponential with this mean (memoryless users).
    Exponential { mean_s: f64 },
}

impl ThinkTime {
    pub const NONE: ThinkTime = ThinkTime::Fixed { seconds: 0.0 };

    pub fn fixed(seconds: f64) -> ThinkTime {
        ThinkTime::Fixed { seconds }
    }

    pub fn mean_s(&self) -> f64 {
        match *self {
            ThinkTime::Fixed { seconds } => seconds,
            ThinkTime::Uniform { min_s, max_s } => (min_s + max_s) / 2.0,
            ThinkTime::Exponential { mean_s } => mean_s,
        }
    }

    /// Same mean think time, within 10 ms or 1 %: user counts taken at one transfer to the other.
    pub fn same_mean(&self, other: &ThinkTime) -> bool {
        let (a, b) = (self.mean_s(), other.mean_s());
        (a - b).abs() <= 0.01_f64.max(0.01 * a.max(b))
    }

    /// One pause, in seconds.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        match *self {
            ThinkTime::Fixed { seconds } => seconds,
            ThinkTime::Uniform { min_s, max_s } => {
                if max_s > min_s {
                    rng.random_range(min_s..max_s)
                } else {
                    min_s
                }
            }
            ThinkTime::Exponential { mean_s } => match Exp::new(1.0 / mean_s) {
                Ok(exp) => exp.sample(rng),
                Err(_) => 0.0,
            },
        }
    }

    /// Reads seconds as capacity tables write them: `0`, `2`, `1-3` (uniform 1 to 3 s).
    pub fn parse_table_seconds(text: &str) -> Result<ThinkTime, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(ThinkTime::NONE);
        }
        let read = |part: &str| -> Result<f64, String> {
            part.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| {
                    format!("think_time_s '{text}' must be seconds like 0, 2 or a range 1-3")
                })
        };
        match text.split_once('-') {
            Some((low, high)) => uniform(read(low)?, read(high)?)
                .map_err(|_| format!("think_time_s '{text}': the range must go from low to high")),
            None => Ok(ThinkTime::fixed(read(text)?)),
        }
    }
}

fn uniform(min_s: f64, max_s: f64) -> Result<ThinkTime, ()> {
    if max_s < min_s {
        return Err(());
    }
    Ok(if min_s == max_s {
        ThinkTime::fixed(min_s)
    } else {
        ThinkTime::Uniform { min_s, max_s }
    })
}

impl FromStr for ThinkTime {
    type Err = InputError;

    /// Reads a flag: `0s`, `2s`, `1s..3s` or `1..3s` (uniform), `exp:2s` (exponential).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || {
            InputError::value(format!(
                "think time '{text}' must be a duration of 0 or more (2s), a range from low to \
                 high (1s..3s), an exponential mean (exp:2s), or Locust's between(1, 5) or \
                 constant(2) in seconds"
            ))
        };
        // Locust's wait_time forms, in seconds: between(1, 5) and constant(2).
        let call = |name: &str| {
            text.trim()
                .strip_prefix(name)
                .and_then(|rest| rest.trim().strip_prefix('('))
                .and_then(|rest| rest.trim().strip_suffix(')'))
                .map(|args| {
                    args.split(',')
                        .map(|a| a.trim().parse::<f64>().ok().filter(|v| v.is_finite()))
                        .collect::<Option<Vec<f64>>>()
                })
        };
        if let Some(args) = call("between") {
            return match args.as_deref() {
                Some(&[low_s, high_s]) if low_s >= 0.0 && high_s >= low_s => {
                    uniform(low_s, high_s).map_err(|_| invalid())
                }
                _ => Err(invalid()),
            };
        }
        if let Some(args) = call("constant") {
            return match args.as_deref() {
                Some(&[seconds]) if seconds >= 0.0 => Ok(ThinkTime::fixed(seconds)),
                _ => Err(invalid()),
            };
        }
        if text.trim().starts_with("between") || text.trim().starts_with("constant") {
            return Err(invalid());
        }
        if let Some(mean) = text.trim().strip_prefix("exp:") {
            let mean_s = parse_seconds(mean)?;
            if mean_s <= 0.0 {
                return Err(invalid());
            }
            return Ok(ThinkTime::Exponential { mean_s });
        }
        let think = match text.split_once("..") {
            Some((low, high)) => {
                let high_s = parse_seconds(high)?;
                let unit = high.trim().trim_start_matches(|c: char| {
                    c.is_ascii_digit() || c == '.' || c == '-' || c == '+'
                });
                let low_s = match parse_seconds(low) {
                    Ok(value) => value,
                    Err(_) => parse_seconds(&format!("{}{unit}", low.trim()))?,
                };
                if low_s < 0.0 {
                    return Err(invalid());
                }
                uniform(low_s, high_s).map_err(|_| invalid())?
            }
            None => ThinkTime::fixed(parse_seconds(text)?),
        };
        if think.mean_s() < 0.0 {
            return Err(invalid());
        }
        Ok(think)
    }
}

impl fmt::Display for ThinkTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ThinkTime::Fixed { seconds: 0.0 } => write!(f, "none"),
            ThinkTime::Fixed { seconds } => write!(f, "{}", format_seconds(seconds)),
            ThinkTime::Uniform { min_s, max_s } => {
                write!(f, "{}–{} s uniform", trim_number(min_s), trim_number(max_s))
            }
            ThinkTime::Exponential { mean_s } => {
                write!(f, "exponential, mean {}", format_seconds(mean_s))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn reads_flags_and_table_cells() {
        assert_eq!("2s".parse::<ThinkTime>().unwrap(), ThinkTime::fixed(2.0));
        let range = "1..3s".parse::<ThinkTime>().unwrap();
        assert_eq!(
            range,
            ThinkTime::Uniform {
                min_s: 1.0,
                max_s: 3.0
            }
        );
        assert_eq!("1s..3s".parse::<ThinkTime>().unwrap(), range);
        assert!("3s..1s".parse::<ThinkTime>().is_err());
        assert_eq!(
            "exp:2s".parse::<ThinkTime>().unwrap(),
            ThinkTime::Exponential { mean_s: 2.0 }
        );
        assert_eq!(ThinkTime::parse_table_seconds("1-3").unwrap(), range);
        assert_eq!(ThinkTime::parse_table_seconds("").unwrap(), ThinkTime::NONE);
        assert!(ThinkTime::parse_table_seconds("soon").is_err());
        assert!(range.same_mean(&ThinkTime::fixed(2.0)));
        assert!(!range.same_mean(&ThinkTime::NONE));
    }

    #[test]
    fn reads_locusts_wait_time_forms() {
        assert_eq!(
            "between(1, 5)".parse::<ThinkTime>().unwrap(),
            ThinkTime::Uniform {
                min_s: 1.0,
                max_s: 5.0
            }
        );
        assert_eq!(
            " between( 0.5 ,0.5 ) ".parse::<ThinkTime>().unwrap(),
            ThinkTime::fixed(0.5)
        );
        assert_eq!(
            "constant(2)".parse::<ThinkTime>().unwrap(),
            ThinkTime::fixed(2.0)
        );
        for bad in [
            "between(5, 1)",
            "between(1)",
            "between(a, b)",
            "constant(-1)",
            "between(1, 5",
        ] {
            let err = bad.parse::<ThinkTime>().unwrap_err().to_string();
            assert!(err.contains("between(1, 5)"), "{bad}: {err}");
        }
    }

    #[test]
    fn samples_have_the_stated_mean() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for think in [
            ThinkTime::fixed(2.0),
            ThinkTime::Uniform {
                min_s: 1.0,
                max_s: 3.0,
            },
            ThinkTime::Exponential { mean_s: 2.0 },
        ] {
            let n = 20_000;
            let mean: f64 = (0..n).map(|_| think.sample(&mut rng)).sum::<f64>() / n as f64;
            // Standard error of an exponential mean over 20 000 draws is 2/√20000 ≈ 0.014.
            assert!((mean - 2.0).abs() < 0.06, "{think}: {mean}");
        }
    }
}
