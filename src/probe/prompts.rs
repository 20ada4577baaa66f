//! Prompts: synthetic ones of a token-length distribution, or a dataset's (JSONL in EvalScope's
//! openqa form `{"question": …}`, `{"prompt": …}`, or ShareGPT `{"conversations": [...]}`).
//!
//! Every prompt starts with a tag unique to the run, step and request, so no two requests share
//! a prefix: a server's prefix cache cannot make a later step look faster than the first.
//! Datasets are also read from a different offset at every step. Asked for a prefix share,
//! synthetic prompts instead open with that share of words common to every request of the
//! step (a system prompt the step's first request brings into the cache), then the tag.
//! The shared words are drawn from one stream per step, so a shorter prefix is the start of a
//! longer one, as a system prompt is the start of every conversation that uses it.

use super::api::Prompt;
use crate::workload::dataset::DatasetEntry;
use crate::workload::{PrefixShare, TokenLengths};
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

/// Seeds the stream of a step's shared words apart from its requests' own.
const SHARED: u64 = 0x5_4A_52_45_44;

/// Where prompts come from.
#[derive(Debug, Clone)]
pub enum PromptSource {
    Synthetic {
        input: TokenLengths,
        prefix_share: PrefixShare,
    },
    Dataset {
        entries: Vec<DatasetEntry>,
    },
}

impl PromptSource {
    /// The prompt of request `n` of step `step` (deterministic for a run).
    pub fn prompt(&self, run_tag: &str, step: u32, n: u64, seed: u64) -> Prompt {
        let step_seed = seed ^ (u64::from(step) << 40);
        let mut rng = StdRng::seed_from_u64(step_seed ^ n);
        let tag = format!("{run_tag}-{step}-{n}");
        match self {
            PromptSource::Synthetic {
                input,
                prefix_share,
            } => {
                let tokens = input.sample(&mut rng).max(2);
                // The shared words, the tag, then the request's own words.
                let shared = prefix_share.of(tokens).min(tokens - 1);
                let mut text = String::new();
                if shared > 0 {
                    let mut common = StdRng::seed_from_u64(step_seed ^ SHARED);
                    text.push_str(&format!("{run_tag}-{step}-shared"));
                    for _ in 1..shared {
                        text.push(' ');
                        text.push_str(WORDS[common.random_range(0..WORDS.len())]);
                    }
                    text.push(' ');
                }
                text.push_str(&tag);
                for _ in (shared + 1)..tokens {
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
            prefix_share: PrefixShare::NONE,
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

    #[test]
    fn a_prefix_share_opens_every_prompt_of_a_step_with_the_same_words() {
        let source = PromptSource::Synthetic {
            input: TokenLengths::Uniform { min: 40, max: 80 },
            prefix_share: PrefixShare::new(0.5).unwrap(),
        };
        let words = |step: u32, n: u64| {
            let prompt = source.prompt("r1", step, n, 7);
            let words: Vec<String> = prompt.text.split_whitespace().map(String::from).collect();
            assert_eq!(words.len() as u32, prompt.tokens, "the length is kept");
            words
        };
        let (a, b) = (words(0, 0), words(0, 1));
        let shared =
            |x: &[String], y: &[String]| x.iter().zip(y).take_while(|(p, q)| p == q).count();
        // Half of each prompt (the shorter one's half at least) is common, then they differ.
        let common = shared(&a, &b);
        assert!(
            common >= a.len().min(b.len()) / 2 - 1,
            "{common} of {} and {}",
            a.len(),
            b.len()
        );
        assert!(
            common < a.len().min(b.len()),
            "the tag keeps the rest apart"
        );
        // Another step shares nothing with this one.
        assert_eq!(shared(&a, &words(1, 0)), 0);
    }
}
