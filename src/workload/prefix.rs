//! How much of each prompt an engine's prefix cache already holds.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::InputError;

/// Share of each prompt's tokens whose KV the engine finds in its prefix cache: a system
/// prompt every request repeats, a conversation's earlier turns, a benchmark that cycles
/// through a few prompts. Those positions are not prefilled again (vLLM, SGLang and
/// TensorRT-LLM reuse cached blocks by default); the rest of the prompt is, attending to them.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PrefixShare(f64);

impl PrefixShare {
    pub const NONE: PrefixShare = PrefixShare(0.0);

    /// `share` of each prompt cached, 0 to 1; `None` outside.
    pub fn new(share: f64) -> Option<PrefixShare> {
        (share.is_finite() && (0.0..=1.0).contains(&share)).then_some(PrefixShare(share))
    }

    /// `share` of each prompt cached, or the one message that says what is valid (`given`
    /// is the value as the user wrote it).
    pub fn checked(share: Option<f64>, given: &str) -> Result<PrefixShare, InputError> {
        share.and_then(PrefixShare::new).ok_or_else(|| {
            InputError::value(format!(
                "prefix share '{given}' must be a share of each prompt from 0 to 1 (0.4) or a \
                 percentage (40%)"
            ))
        })
    }

    pub fn share(&self) -> f64 {
        self.0
    }

    pub fn is_none(&self) -> bool {
        self.0 == 0.0
    }

    /// Cached tokens of a `prompt`-token prompt (the engine keeps whole blocks of them and
    /// always computes the last token).
    pub fn of(&self, prompt: u32) -> u32 {
        (f64::from(prompt) * self.0).floor() as u32
    }
}

impl fmt::Display for PrefixShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.0} % of each prompt cached", self.0 * 100.0)
    }
}

impl FromStr for PrefixShare {
    type Err = InputError;

    /// Reads `0.4` or `40%`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        PrefixShare::checked(read_share(text), text)
    }
}

/// A share written as a number or a percentage (`0.4`, `40%`), unchecked; `None` when it is
/// neither.
pub fn read_share(text: &str) -> Option<f64> {
    let trimmed = text.trim();
    match trimmed.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().ok().map(|v| v / 100.0),
        None => trimmed.parse::<f64>().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_shares_and_percentages_and_refuses_the_rest() {
        assert_eq!("0.25".parse::<PrefixShare>().ok(), PrefixShare::new(0.25));
        assert_eq!("40%".parse::<PrefixShare>().ok(), PrefixShare::new(0.4));
        for bad in ["1.5", "-0.1", "abc", "NaN", "120%"] {
            let err = bad.parse::<PrefixShare>().unwrap_err().to_string();
            assert!(err.contains(bad), "{err}");
        }
    }

    #[test]
    fn cached_tokens_round_down() {
        let share = PrefixShare::new(0.5).unwrap();
        assert_eq!(share.of(101), 50);
        assert_eq!(PrefixShare::NONE.of(1000), 0);
    }
}
