//! Prompts: synthetic ones of a token-length distribution, or a dataset's (JSONL in EvalScope's
//! openqa form `{"question": …}`, `{"prompt": …}`, or ShareGPT `{"conversations": [...]}`).
//!
//! Every prompt starts with a tag unique to the run, step and request, so no two requests share
//! a prefix: a server's prefix cache cannot make a later step look faster than the first.
//! Datasets are also read from a different offset at every step.

use super::api::Prompt;
use crate::workload::dataset::DatasetEntry;
use crate::workload::TokenLengths;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Common short English words: one token each in the usual tokenizers, one token each in
/// `capplan serve` (which counts words).
const WORDS: [&str; 48] = [
    "the", "of", "and", "to", "in", "is", "you", "that", "it", "he", "was", "for", "on", "are",
    "as", "with", "his", "they", "at", "be", "this", "have", "from", "or", "one", "had", "by",
    "word", "but", "not", "what", "all", "were", "we", "when", "your", "can", "said", "there",
    "use", "an", "each", "which", "she", "do", "how", "their", "if",
];

/// Where prompts come from.
#[derive(Debug, Clone)]
pub enum PromptSource {
    Synthetic { input: TokenLengths },
    Dataset { entries: Vec<DatasetEntry> },
}

impl PromptSource {
    /// The prompt of request `n` of step `step` (deterministic for a run).
    pub fn prompt(&self, run_tag: &str, step: u32, n: u64, seed: u64) -> Prompt {
        let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(step) << 40) ^ n);
        let tag = format!("{run_tag}-{step}-{n}");
        match self {
            PromptSource::Synthetic { input } => {
                let tokens = input.sample(&mut rng).max(2);
                let mut text = tag;
                for _ in 1..tokens {
                    text.push(' ');
                    text.push_str(WORDS[rng.random_range(0..WORDS.len())]);
                }
                Prompt { text, tokens }
            }
            PromptSource::Dataset { entries } => {
                // Each step starts at its own offset in the dataset.
                let index = (n as usize + step as usize * 7919) % entries.len().max(1);
                let entry = &entries[index];
                let text = format!("{tag} {}", entry.prompt);
                let tokens = text.split_whitespace().count() as u32;
                Prompt { text, tokens }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_prompts_have_the_length_and_unique_prefixes() {
        let source = PromptSource::Synthetic {
            input: TokenLengths::Fixed { tokens: 50 },
        };
        let a = source.prompt("r1", 0, 0, 7);
        let b = source.prompt("r1", 1, 0, 7);
        assert_eq!(a.text.split_whitespace().count(), 50);
        assert_eq!(a.tokens, 50);
        assert_ne!(
            a.text.split_whitespace().next(),
            b.text.split_whitespace().next(),
            "steps never share a prefix"
        );
        assert_eq!(a.text, source.prompt("r1", 0, 0, 7).text, "deterministic");
    }
}
