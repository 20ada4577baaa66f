//! The request mix: token lengths of prompts and outputs, and think time between requests.

pub mod dataset;
pub mod lengths;
pub mod prefix;
pub mod speculation;
pub mod think;
pub mod tokens;

use std::fmt;

use serde::Serialize;

pub use lengths::TokenLengths;
pub use prefix::PrefixShare;
pub use speculation::Speculation;
pub use think::ThinkTime;

/// What users send: prompt and output lengths, and how long they pause between requests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workload {
    pub input_tokens: TokenLengths,
    pub output_tokens: TokenLengths,
    pub think_time: ThinkTime,
    /// Share of each prompt the engine's prefix cache already holds.
    #[serde(skip_serializing_if = "PrefixShare::is_none")]
    pub prefix_share: PrefixShare,
    /// Speculative decoding and how often the workload accepts its drafts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speculation: Option<Speculation>,
}

impl Workload {
    /// The assumption when nobody says otherwise: a chat turn of 512 tokens in and 256 out,
    /// users back to back (in-flight requests = users, the conservative reading).
    pub fn default_chat() -> Workload {
        Workload::fixed(512, 256)
    }

    /// Every request `input` tokens in and `output` out, users back to back, nothing cached,
    /// no speculation.
    pub fn fixed(input: u32, output: u32) -> Workload {
        Workload {
            input_tokens: TokenLengths::Fixed { tokens: input },
            output_tokens: TokenLengths::Fixed { tokens: output },
            think_time: ThinkTime::NONE,
            prefix_share: PrefixShare::NONE,
            speculation: None,
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} tokens in, {} out, think time {}",
            self.input_tokens, self.output_tokens, self.think_time
        )?;
        if !self.prefix_share.is_none() {
            write!(f, ", {}", self.prefix_share)?;
        }
        if let Some(speculation) = &self.speculation {
            write!(f, ", {speculation}")?;
        }
        Ok(())
    }
}
