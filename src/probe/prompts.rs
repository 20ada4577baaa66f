//! Prompts: synthetic ones of a token-length distribution, or a dataset's (JSONL in EvalScope's
//! openqa form `{"question": …}`, `{"prompt": …}`, or ShareGPT `{"conversations": [...]}`).
//!
//! Every prompt starts with a tag unique to the run, step and request, so no two requests share
//! a prefix: a server's prefix cache cannot make a later step look faster than the first.
//! Datasets are also read from a different offset at every step.

use std::path::Path;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::Value;

use super::api::Prompt;
use crate::error::InputError;
use crate::workload::TokenLengths;

/// Common short English words: one token each in the usual tokenizers, one token each in
/// `capplan serve` (which counts words).
const WORDS: [&str; 48] = [
    "the", "of", "and", "to", "in", "is", "you", "that", "it", "he", "was", "for", "on", "are",
    "as", "with", "his", "they", "at", "be", "this", "have", "from", "or", "one", "had", "by",
    "word", "but", "not", "what", "all", "were", "we", "when", "your", "can", "said", "there",
    "use", "an", "each", "which", "she", "do", "how", "their", "if",
];

/// One dataset entry: a prompt, and the reply length if the dataset has one.
#[derive(Debug, Clone)]
pub struct DatasetEntry {
    pub prompt: String,
    pub reply_words: Option<u32>,
}

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

/// Reads a JSONL dataset; a line that is none of the known forms is an error naming the line.
pub fn read_dataset(path: &Path) -> Result<Vec<DatasetEntry>, InputError> {
    let location = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|err| InputError::file(&location, format!("cannot read: {err}")))?;
    let mut entries = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let here = format!("{location}:{}", index + 1);
        let value: Value = serde_json::from_str(line)
            .map_err(|err| InputError::file(&here, format!("not JSON: {err}")))?;
        let entry = parse_entry(&value).ok_or_else(|| {
            InputError::file(
                &here,
                "expected {\"question\": …}, {\"prompt\": …} or {\"conversations\": [{\"from\": \"human\", \"value\": …}, …]}",
            )
        })?;
        entries.push(entry);
    }
    if entries.is_empty() {
        return Err(InputError::file(location, "the dataset has no entries"));
    }
    Ok(entries)
}

fn parse_entry(value: &Value) -> Option<DatasetEntry> {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(String::from);
    if let Some(prompt) = text(value.get("question")).or_else(|| text(value.get("prompt"))) {
        let reply = text(value.get("answer"))
            .or_else(|| text(value.get("response")))
            .or_else(|| text(value.get("completion")));
        return Some(DatasetEntry {
            prompt,
            reply_words: reply.map(|r| r.split_whitespace().count() as u32),
        });
    }
    let turns = value
        .get("conversations")
        .or_else(|| value.get("messages"))?
        .as_array()?;
    let speaker = |turn: &Value| {
        text(turn.get("from"))
            .or_else(|| text(turn.get("role")))
            .unwrap_or_default()
    };
    let said = |turn: &Value| text(turn.get("value")).or_else(|| text(turn.get("content")));
    let first_human = turns
        .iter()
        .position(|t| matches!(speaker(t).as_str(), "human" | "user"))?;
    let prompt = said(&turns[first_human])?;
    let reply_words = turns[first_human + 1..]
        .iter()
        .find(|t| matches!(speaker(t).as_str(), "gpt" | "assistant" | "bot"))
        .and_then(said)
        .map(|r| r.split_whitespace().count() as u32);
    Some(DatasetEntry {
        prompt,
        reply_words,
    })
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

    #[test]
    fn reads_the_three_dataset_forms() {
        let dir = std::env::temp_dir().join(format!("capplan-ds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("d.jsonl");
        std::fs::write(
            &path,
            r#"{"question": "what is two plus two"}
{"prompt": "write a haiku", "completion": "old pond frog jumps in"}
{"conversations": [{"from": "system", "value": "be nice"}, {"from": "human", "value": "hello there"}, {"from": "gpt", "value": "hi how are you"}]}

"#,
        )
        .unwrap();
        let entries = read_dataset(&path).unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].prompt, "what is two plus two");
        assert_eq!(entries[1].reply_words, Some(5));
        assert_eq!(entries[2].prompt, "hello there");
        assert_eq!(entries[2].reply_words, Some(4));

        std::fs::write(&path, "{\"question\": \"ok\"}\n{\"text\": \"no\"}\n").unwrap();
        let err = read_dataset(&path).unwrap_err().to_string();
        assert!(err.contains("d.jsonl:2"), "{err}");
    }
}
