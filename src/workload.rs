//! What users do between requests: think time.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::error::InputError;
use crate::slo::duration::{format_seconds, parse_seconds, trim_number};

/// Pause between a response and the user's next request: none, fixed, or uniform in a range.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ThinkTime {
    pub min_s: f64,
    pub max_s: f64,
}

impl ThinkTime {
    pub const NONE: ThinkTime = ThinkTime {
        min_s: 0.0,
        max_s: 0.0,
    };

    pub fn fixed(seconds: f64) -> ThinkTime {
        ThinkTime {
            min_s: seconds,
            max_s: seconds,
        }
    }

    pub fn mean_s(&self) -> f64 {
        (self.min_s + self.max_s) / 2.0
    }

    /// Same mean think time, within 10 ms or 1 %: user counts taken at one transfer to the other.
    pub fn same_mean(&self, other: &ThinkTime) -> bool {
        let (a, b) = (self.mean_s(), other.mean_s());
        (a - b).abs() <= 0.01_f64.max(0.01 * a.max(b))
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
        let think = match text.split_once('-') {
            Some((low, high)) => ThinkTime {
                min_s: read(low)?,
                max_s: read(high)?,
            },
            None => ThinkTime::fixed(read(text)?),
        };
        if think.max_s < think.min_s {
            return Err(format!(
                "think_time_s '{text}': the range must go from low to high"
            ));
        }
        Ok(think)
    }
}

impl FromStr for ThinkTime {
    type Err = InputError;

    /// Reads a flag: `0s`, `2s`, `1s..3s` or `1..3s` (uniform).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
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
                ThinkTime {
                    min_s: low_s,
                    max_s: high_s,
                }
            }
            None => ThinkTime::fixed(parse_seconds(text)?),
        };
        if think.min_s < 0.0 || think.max_s < think.min_s {
            return Err(InputError::value(format!(
                "think time '{text}' must be 0 or more, and a range must go from low to high (1s..3s)"
            )));
        }
        Ok(think)
    }
}

impl fmt::Display for ThinkTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.max_s == 0.0 {
            write!(f, "none")
        } else if self.min_s == self.max_s {
            write!(f, "{}", format_seconds(self.min_s))
        } else {
            write!(
                f,
                "{}–{} s uniform",
                trim_number(self.min_s),
                trim_number(self.max_s)
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_flags_and_table_cells() {
        assert_eq!("2s".parse::<ThinkTime>().unwrap(), ThinkTime::fixed(2.0));
        let range = "1..3s".parse::<ThinkTime>().unwrap();
        assert_eq!((range.min_s, range.max_s), (1.0, 3.0));
        assert_eq!("1s..3s".parse::<ThinkTime>().unwrap(), range);
        assert!("3s..1s".parse::<ThinkTime>().is_err());
        assert_eq!(ThinkTime::parse_table_seconds("1-3").unwrap(), range);
        assert_eq!(ThinkTime::parse_table_seconds("").unwrap(), ThinkTime::NONE);
        assert!(ThinkTime::parse_table_seconds("soon").is_err());
        assert!(range.same_mean(&ThinkTime::fixed(2.0)));
        assert!(!range.same_mean(&ThinkTime::NONE));
    }
}
