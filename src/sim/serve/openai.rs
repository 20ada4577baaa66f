//! The OpenAI-compatible wire format: what requests carry, and the JSON and SSE frames sent back.

use serde::Deserialize;
use serde_json::{json, Value};

/// The fields of `/v1/chat/completions` and `/v1/completions` the simulator uses; others are
/// accepted and ignored, as real servers do.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct CompletionBody {
    pub model: Option<String>,
    pub messages: Option<Vec<Value>>,
    pub prompt: Option<Value>,
    pub max_tokens: Option<u32>,
    pub max_completion_tokens: Option<u32>,
    pub min_tokens: Option<u32>,
    pub ignore_eos: Option<bool>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct StreamOptions {
    pub include_usage: Option<bool>,
}

/// A prompt's tokens as the simulator counts them: at least one.
pub fn token_count(units: &[PromptUnit<'_>]) -> u32 {
    u32::try_from(units.len()).unwrap_or(u32::MAX).max(1)
}

/// A text's tokens as the simulator counts them: its whitespace-separated words.
fn words(text: &str) -> impl Iterator<Item = PromptUnit<'_>> {
    text.split_whitespace().map(PromptUnit::Word)
}

/// One token of a prompt as the server counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PromptUnit<'a> {
    Word(&'a str),
    Id(Option<i64>),
}

/// Which endpoint a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Chat,
    Completions,
}

impl Api {
    pub fn path(self) -> &'static str {
        match self {
            Api::Chat => "/v1/chat/completions",
            Api::Completions => "/v1/completions",
        }
    }

    fn object(self, streaming: bool) -> &'static str {
        match (self, streaming) {
            (Api::Chat, true) => "chat.completion.chunk",
            (Api::Chat, false) => "chat.completion",
            (Api::Completions, _) => "text_completion",
        }
    }
}

impl CompletionBody {
    /// Prompt tokens, counted the simulator's way: one token per whitespace-separated word
    /// (token-id arrays count their ids). Probes that know this rule can send exact lengths.
    pub fn prompt_tokens(&self, api: Api) -> Result<u32, String> {
        Ok(token_count(&self.prompt_units(api)?))
    }

    /// The prompt as the server counts it — words of every message's text (chat) or of the
    /// prompt, and token ids — in order: its length is the prompt's tokens, and the prefix
    /// cache names blocks by it.
    pub fn prompt_units(&self, api: Api) -> Result<Vec<PromptUnit<'_>>, String> {
        let mut units = Vec::new();
        match api {
            Api::Chat => {
                let messages = self
                    .messages
                    .as_ref()
                    .ok_or("'messages' is required for chat completions")?;
                for message in messages {
                    match message.get("content") {
                        Some(Value::String(content)) => units.extend(words(content)),
                        Some(Value::Array(parts)) => {
                            for part in parts.iter().filter_map(|p| p.get("text")) {
                                if let Some(content) = part.as_str() {
                                    units.extend(words(content));
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            Api::Completions => match self.prompt.as_ref().ok_or("'prompt' is required")? {
                Value::String(prompt) => units.extend(words(prompt)),
                Value::Array(items) => {
                    for item in items {
                        match item {
                            Value::String(prompt) => units.extend(words(prompt)),
                            Value::Number(id) => units.push(PromptUnit::Id(id.as_i64())),
                            Value::Array(ids) => {
                                units.extend(ids.iter().map(|id| PromptUnit::Id(id.as_i64())))
                            }
                            _ => {}
                        }
                    }
                }
                _ => return Err("'prompt' must be a string or an array".into()),
            },
        }
        Ok(units)
    }

    /// The first word of the prompt (of the last message for chat), at most 64 characters.
    pub fn prompt_head(&self) -> String {
        let text = match (&self.messages, &self.prompt) {
            (Some(messages), _) => messages
                .last()
                .and_then(|m| m.get("content"))
                .and_then(Value::as_str)
                .unwrap_or(""),
            (None, Some(Value::String(text))) => text.as_str(),
            _ => "",
        };
        text.split_whitespace()
            .next()
            .unwrap_or("")
            .chars()
            .take(64)
            .collect()
    }

    pub fn max_tokens(&self) -> Option<u32> {
        self.max_completion_tokens.or(self.max_tokens)
    }

    pub fn streaming(&self) -> bool {
        self.stream.unwrap_or(false)
    }

    pub fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }

    /// Output length: the engine's natural length (drawn from the workload), capped by
    /// `max_tokens`, at least `min_tokens`; exactly `max_tokens` with `ignore_eos`.
    pub fn output_tokens(&self, natural: u32) -> u32 {
        let max = self.max_tokens().unwrap_or(u32::MAX).max(1);
        if self.ignore_eos.unwrap_or(false) && self.max_tokens().is_some() {
            return max;
        }
        let min = self.min_tokens.unwrap_or(1).clamp(1, max);
        natural.clamp(min, max)
    }
}

const WORDS: [&str; 16] = [
    "the", "engine", "streams", "one", "token", "at", "a", "time", "while", "the", "batch",
    "grows", "and", "queues", "form", "slowly",
];

/// The text of `count` tokens starting at token `first` of request `id` (one word each).
pub fn token_text(id: u64, first: u32, count: u32) -> String {
    let mut text = String::new();
    for i in first..first + count {
        let word = WORDS[((id as usize).wrapping_mul(7) + i as usize) % WORDS.len()];
        text.push_str(word);
        text.push(' ');
    }
    text
}

/// Frames one SSE event.
pub fn sse(value: &Value) -> String {
    format!("data: {value}\n\n")
}

pub const DONE: &str = "data: [DONE]\n\n";

pub struct Frames<'a> {
    pub api: Api,
    pub id: String,
    pub created: u64,
    pub model: &'a str,
}

impl Frames<'_> {
    /// The role-only first chunk of a chat stream (no content: not a token).
    pub fn role(&self) -> Value {
        json!({
            "id": self.id, "object": self.api.object(true), "created": self.created, "model": self.model,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}]
        })
    }

    pub fn content(&self, text: &str, finish_reason: Option<&str>) -> Value {
        let choice = match self.api {
            Api::Chat => {
                json!({"index": 0, "delta": {"content": text}, "logprobs": null, "finish_reason": finish_reason})
            }
            Api::Completions => {
                json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish_reason})
            }
        };
        json!({
            "id": self.id, "object": self.api.object(true), "created": self.created, "model": self.model,
            "choices": [choice]
        })
    }

    /// A chunk that only closes the choice (its last token went out earlier).
    pub fn finish(&self, finish_reason: &str) -> Value {
        let choice = match self.api {
            Api::Chat => {
                json!({"index": 0, "delta": {}, "logprobs": null, "finish_reason": finish_reason})
            }
            Api::Completions => {
                json!({"index": 0, "text": "", "logprobs": null, "finish_reason": finish_reason})
            }
        };
        json!({
            "id": self.id, "object": self.api.object(true), "created": self.created, "model": self.model,
            "choices": [choice]
        })
    }

    pub fn usage(&self, prompt: u32, completion: u32) -> Value {
        json!({
            "id": self.id, "object": self.api.object(true), "created": self.created, "model": self.model,
            "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        })
    }

    /// The whole response of a non-streaming request.
    pub fn complete(&self, text: &str, finish_reason: &str, prompt: u32, completion: u32) -> Value {
        let choice = match self.api {
            Api::Chat => {
                json!({"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": null, "finish_reason": finish_reason})
            }
            Api::Completions => {
                json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish_reason})
            }
        };
        json!({
            "id": self.id, "object": self.api.object(false), "created": self.created, "model": self.model,
            "choices": [choice],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        })
    }
}

/// An OpenAI-style error body.
pub fn error_body(message: &str, kind: &str, code: u16) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_prompt_words() {
        let body: CompletionBody = serde_json::from_value(json!({
            "messages": [{"role": "system", "content": "be brief"},
                         {"role": "user", "content": [{"type": "text", "text": "one two three"}]}]
        }))
        .unwrap();
        assert_eq!(body.prompt_tokens(Api::Chat).unwrap(), 5);
        let body: CompletionBody =
            serde_json::from_value(json!({"prompt": [[1, 2, 3, 4]]})).unwrap();
        assert_eq!(body.prompt_tokens(Api::Completions).unwrap(), 4);
        let body: CompletionBody = serde_json::from_value(json!({})).unwrap();
        assert!(body.prompt_tokens(Api::Chat).is_err());
    }

    #[test]
    fn output_length_rules() {
        let body = |v: Value| -> CompletionBody { serde_json::from_value(v).unwrap() };
        assert_eq!(body(json!({"max_tokens": 50})).output_tokens(200), 50);
        assert_eq!(body(json!({"max_tokens": 500})).output_tokens(200), 200);
        assert_eq!(
            body(json!({"max_tokens": 500, "ignore_eos": true})).output_tokens(200),
            500
        );
        assert_eq!(
            body(json!({"max_tokens": 500, "min_tokens": 300})).output_tokens(200),
            300
        );
        assert_eq!(body(json!({})).output_tokens(200), 200);
    }
}
