//! Token lengths of prompts and outputs: fixed, uniform, truncated normal, or a dataset's.

use std::fmt;
use std::str::FromStr;

use rand::{Rng, RngExt};
use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};

use crate::error::InputError;

/// A distribution of token counts (always at least 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TokenLengths {
    Fixed {
        tokens: u32,
    },
    /// Uniform over `min..=max`.
    Uniform {
        min: u32,
        max: u32,
    },
    /// Normal, redrawn until inside `min..=max`.
    Normal {
        mean: f64,
        sd: f64,
        min: u32,
        max: u32,
    },
    /// Drawn from a list (e.g. a dataset's lengths), with replacement.
    Empirical {
        tokens: Vec<u32>,
    },
}

impl TokenLengths {
    pub fn mean(&self) -> f64 {
        match self {
            TokenLengths::Fixed { tokens } => f64::from(*tokens),
            TokenLengths::Uniform { min, max } => (f64::from(*min) + f64::from(*max)) / 2.0,
            // The truncation is usually symmetric; close enough for sizing.
            TokenLengths::Normal { mean, .. } => *mean,
            TokenLengths::Empirical { tokens } => {
                tokens.iter().map(|&t| f64::from(t)).sum::<f64>() / tokens.len().max(1) as f64
            }
        }
    }

    pub fn max(&self) -> u32 {
        match self {
            TokenLengths::Fixed { tokens } => *tokens,
            TokenLengths::Uniform { max, .. } | TokenLengths::Normal { max, .. } => *max,
            TokenLengths::Empirical { tokens } => tokens.iter().copied().max().unwrap_or(1),
        }
    }

    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let value = match self {
            TokenLengths::Fixed { tokens } => *tokens,
            TokenLengths::Uniform { min, max } => rng.random_range(*min..=*max),
            TokenLengths::Normal { mean, sd, min, max } => match Normal::new(*mean, *sd) {
                Ok(normal) => {
                    let mut drawn = *mean;
                    for _ in 0..64 {
                        let x = normal.sample(rng);
                        if x >= f64::from(*min) && x <= f64::from(*max) {
                            drawn = x;
                            break;
                        }
                    }
                    drawn.round() as u32
                }
                Err(_) => mean.round() as u32,
            },
            TokenLengths::Empirical { tokens } => {
                if tokens.is_empty() {
                    1
                } else {
                    tokens[rng.random_range(0..tokens.len())]
                }
            }
        };
        value.max(1)
    }
}

impl FromStr for TokenLengths {
    type Err = InputError;

    /// `512`, `100..1000` (uniform), `normal:512,128` (truncated to 1..=4×mean),
    /// `normal:512,128,64..2048`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || {
            InputError::value(format!(
                "token length '{text}': use a count (512), a range (100..1000) or \
                 normal:MEAN,SD[,MIN..MAX]; counts must be at least 1"
            ))
        };
        let count = |part: &str| -> Result<u32, InputError> {
            part.trim()
                .parse::<u32>()
                .ok()
                .filter(|&v| v >= 1)
                .ok_or_else(invalid)
        };
        let text_trim = text.trim();
        if let Some(spec) = text_trim.strip_prefix("normal:") {
            let parts: Vec<&str> = spec.split(',').collect();
            if parts.len() < 2 || parts.len() > 3 {
                return Err(invalid());
            }
            let mean: f64 = parts[0].trim().parse().map_err(|_| invalid())?;
            let sd: f64 = parts[1].trim().parse().map_err(|_| invalid())?;
            if !(mean >= 1.0 && sd >= 0.0 && mean.is_finite() && sd.is_finite()) {
                return Err(invalid());
            }
            let (min, max) = match parts.get(2) {
                Some(range) => {
                    let (low, high) = range.split_once("..").ok_or_else(invalid)?;
                    (count(low)?, count(high)?)
                }
                None => (1, (4.0 * mean).ceil() as u32),
            };
            if min > max || mean < f64::from(min) || mean > f64::from(max) {
                return Err(invalid());
            }
            return Ok(TokenLengths::Normal { mean, sd, min, max });
        }
        if let Some((low, high)) = text_trim.split_once("..") {
            let (min, max) = (count(low)?, count(high)?);
            if min > max {
                return Err(invalid());
            }
            return Ok(TokenLengths::Uniform { min, max });
        }
        Ok(TokenLengths::Fixed {
            tokens: count(text_trim)?,
        })
    }
}

impl fmt::Display for TokenLengths {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenLengths::Fixed { tokens } => write!(f, "{tokens}"),
            TokenLengths::Uniform { min, max } => write!(f, "{min}..{max}"),
            TokenLengths::Normal { mean, sd, min, max } => {
                write!(f, "normal({mean}, {sd}) in {min}..{max}")
            }
            TokenLengths::Empirical { tokens } => {
                write!(f, "{} lengths, mean {:.0}", tokens.len(), self.mean())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn parses_every_form() {
        assert_eq!(
            "512".parse::<TokenLengths>().unwrap(),
            TokenLengths::Fixed { tokens: 512 }
        );
        assert_eq!(
            "100..1000".parse::<TokenLengths>().unwrap(),
            TokenLengths::Uniform {
                min: 100,
                max: 1000
            }
        );
        assert_eq!(
            "normal:512,128".parse::<TokenLengths>().unwrap(),
            TokenLengths::Normal {
                mean: 512.0,
                sd: 128.0,
                min: 1,
                max: 2048
            }
        );
        for bad in ["0", "-3", "10..5", "normal:5", "lots", "normal:10,1,20..30"] {
            assert!(bad.parse::<TokenLengths>().is_err(), "{bad}");
        }
    }

    #[test]
    fn samples_stay_in_range_with_the_right_mean() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let normal = TokenLengths::Normal {
            mean: 285.0,
            sd: 60.0,
            min: 200,
            max: 370,
        };
        let draws: Vec<u32> = (0..10_000).map(|_| normal.sample(&mut rng)).collect();
        assert!(draws.iter().all(|&d| (200..=370).contains(&d)));
        let mean = draws.iter().map(|&d| f64::from(d)).sum::<f64>() / draws.len() as f64;
        assert!((mean - 285.0).abs() < 3.0, "{mean}");
    }
}
