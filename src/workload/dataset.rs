//! Datasets of prompts (JSONL): EvalScope's openqa form `{"question": …}`, `{"prompt": …}`
//! (with an optional `answer`/`response`/`completion`), and ShareGPT-style conversations
//! (`{"conversations": [{"from": "human", "value": …}, {"from": "gpt", …}]}` or OpenAI-style
//! `{"messages": [{"role": "user", "content": …}, …]}`). The probe sends the prompts;
//! `predict` takes their lengths.

use std::path::Path;

use serde_json::Value;

use super::tokens::{estimate_tokens, LocalTokenizer};
use super::TokenLengths;
use crate::error::InputError;

/// One dataset entry: a prompt, and the reply when the dataset has one.
#[derive(Debug, Clone)]
pub struct DatasetEntry {
    pub prompt: String,
    pub reply: Option<String>,
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
        return Some(DatasetEntry { prompt, reply });
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
    let reply = turns[first_human + 1..]
        .iter()
        .find(|t| matches!(speaker(t).as_str(), "gpt" | "assistant" | "bot"))
        .and_then(said);
    Some(DatasetEntry { prompt, reply })
}

/// A dataset's token lengths, for the performance model.
#[derive(Debug, Clone)]
pub struct DatasetLengths {
    pub input: TokenLengths,
    /// `None` unless every entry has a reply.
    pub output: Option<TokenLengths>,
    /// `tokenizer` or `estimate` (four ASCII characters or one other character per token).
    pub counted_by: &'static str,
}

impl DatasetLengths {
    pub fn of(entries: &[DatasetEntry], tokenizer: Option<&LocalTokenizer>) -> DatasetLengths {
        let count = |text: &str| {
            tokenizer
                .and_then(|t| t.count(text))
                .unwrap_or_else(|| estimate_tokens(text))
                .max(1)
        };
        let input = entries.iter().map(|e| count(&e.prompt)).collect();
        let replies: Option<Vec<u32>> = entries
            .iter()
            .map(|e| e.reply.as_deref().map(count))
            .collect();
        DatasetLengths {
            input: TokenLengths::Empirical { tokens: input },
            output: replies.map(|tokens| TokenLengths::Empirical { tokens }),
            counted_by: if tokenizer.is_some() {
                "tokenizer"
            } else {
                "estimate"
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> crate::scratch::ScratchFile {
        crate::scratch::ScratchFile::new(name, text)
    }

    #[test]
    fn reads_the_three_dataset_forms() {
        let path = write(
            "d.jsonl",
            r#"{"question": "what is two plus two"}
{"prompt": "write a haiku", "completion": "old pond frog jumps in"}
{"conversations": [{"from": "system", "value": "be nice"}, {"from": "human", "value": "hello there"}, {"from": "gpt", "value": "hi how are you"}]}
{"messages": [{"role": "user", "content": "and you?"}, {"role": "assistant", "content": "fine"}]}

"#,
        );
        let entries = read_dataset(&path).unwrap();
        assert_eq!(entries.len(), 4);
        assert_eq!(entries[0].prompt, "what is two plus two");
        assert_eq!(entries[0].reply, None);
        assert_eq!(entries[1].reply.as_deref(), Some("old pond frog jumps in"));
        assert_eq!(entries[2].prompt, "hello there");
        assert_eq!(entries[2].reply.as_deref(), Some("hi how are you"));
        assert_eq!(entries[3].reply.as_deref(), Some("fine"));

        let bad = write("bad.jsonl", "{\"question\": \"ok\"}\n{\"text\": \"no\"}\n");
        let err = read_dataset(&bad).unwrap_err().to_string();
        assert!(err.contains("bad.jsonl:2"), "{err}");
    }

    #[test]
    fn lengths_come_from_the_tokenizer_or_the_estimate() {
        let entries = vec![
            DatasetEntry {
                prompt: "hello world".into(),
                reply: Some("hello".into()),
            },
            DatasetEntry {
                prompt: "hello, world! hello".into(),
                reply: Some("world world".into()),
            },
        ];
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/word-level-tokenizer.json");
        let tokenizer = LocalTokenizer::load(&path).unwrap();
        let exact = DatasetLengths::of(&entries, Some(&tokenizer));
        assert_eq!(exact.input, TokenLengths::Empirical { tokens: vec![2, 5] });
        assert_eq!(
            exact.output,
            Some(TokenLengths::Empirical { tokens: vec![1, 2] })
        );
        let estimated = DatasetLengths::of(&entries, None);
        // 11 and 19 characters: ⌈2.75⌉ = 3 and ⌈4.75⌉ = 5.
        assert_eq!(
            estimated.input,
            TokenLengths::Empirical { tokens: vec![3, 5] }
        );
        assert_eq!(estimated.counted_by, "estimate");
        // One entry without a reply: no output lengths from the dataset.
        let mut partial = entries;
        partial[1].reply = None;
        assert!(DatasetLengths::of(&partial, None).output.is_none());
    }
}
