//! Hugging Face text-generation-inference's own API: `POST /generate_stream` (server-sent
//! events, one token each, no `[DONE]`: the event carrying `generated_text` is the last) and
//! `POST /generate` (one JSON object; timing headers, read by the client for any API).

use serde_json::{json, Value};

use super::{Api, EventMeaning, Prompt, StreamEnd, Usage, WholeResponse};

/// TGI's `/generate` and `/generate_stream`.
pub struct TgiGenerate;

/// `{"error": "...", "error_type": "..."}`, TGI's error object (also DJL's, and the v2
/// protocol's `{"error": "..."}` for Triton and KServe).
pub(super) fn error_of(value: &Value) -> Option<String> {
    match value.get("error")? {
        Value::Null => None,
        Value::String(text) => Some(text.clone()),
        other => Some(other.to_string()),
    }
}

/// Token counts in a `details` object: `generated_tokens`, and the prompt's as `input_length`
/// (TGI) or `prompt_tokens` (forks).
pub(super) fn details_usage(value: &Value) -> Option<Usage> {
    let details = value.get("details").filter(|d| d.is_object())?;
    let read = |key: &str| details.get(key).and_then(Value::as_u64).map(|v| v as u32);
    let usage = Usage {
        prompt_tokens: read("input_length").or_else(|| read("prompt_tokens")),
        completion_tokens: read("generated_tokens"),
    };
    (usage != Usage::default()).then_some(usage)
}

pub(super) fn parse(bytes: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(bytes).map_err(|err| format!("body is not JSON ({err})"))
}

/// A whole `{generated_text, details}` answer, bare or as the first of a list (TGI's `POST /`,
/// DJL's TGI-compatible mode).
pub(super) fn read_generated(value: &Value) -> Result<WholeResponse, String> {
    let value = match value {
        Value::Array(items) => items.first().ok_or("the response is an empty list")?,
        other => other,
    };
    if let Some(error) = error_of(value) {
        return Err(error);
    }
    if value
        .pointer("/details/finish_reason")
        .and_then(Value::as_str)
        == Some("error")
    {
        return Err("the server reports finish_reason error".into());
    }
    let text = value
        .get("generated_text")
        .and_then(Value::as_str)
        .ok_or("no generated_text in the response")?;
    Ok(WholeResponse {
        usage: details_usage(value),
        text_chars: text.chars().count(),
        text: text.to_string(),
        ..WholeResponse::default()
    })
}

impl Api for TgiGenerate {
    fn name(&self) -> &'static str {
        "tgi"
    }

    fn path(&self, _model: &str, stream: bool) -> String {
        if stream {
            "/generate_stream"
        } else {
            "/generate"
        }
        .into()
    }

    fn stream_end(&self) -> StreamEnd {
        StreamEnd::LastEvent
    }

    /// `details` for the token counts; greedy, so repeated runs ask the same work. TGI has no
    /// `ignore_eos`: a model may stop before `max_new_tokens`, and the counts say so.
    fn body(&self, _model: &str, prompt: &Prompt, max_tokens: u32, _: bool, _: bool) -> Value {
        json!({
            "inputs": prompt.text,
            "parameters": {"max_new_tokens": max_tokens, "details": true, "do_sample": false},
        })
    }

    fn read_event(&self, data: &str) -> Result<EventMeaning, String> {
        let value = parse(data.as_bytes()).map_err(|_| "event is not JSON".to_string())?;
        let mut meaning = EventMeaning {
            error: error_of(&value),
            usage: details_usage(&value),
            ..EventMeaning::default()
        };
        if let Some(token) = value.get("token").filter(|t| t.is_object()) {
            // Every token event is one generated token (an end-of-sequence token counts in
            // TGI's generated_tokens too); only non-special text is visible.
            let special = token.get("special").and_then(Value::as_bool) == Some(true);
            let text = token.get("text").and_then(Value::as_str).unwrap_or("");
            meaning.generated = true;
            if !special {
                meaning.visible = !text.is_empty();
                meaning.text_chars = text.chars().count();
                meaning.text.push_str(text);
            }
        }
        meaning.last = value.get("generated_text").is_some_and(|t| !t.is_null());
        meaning.finish_reason = value
            .pointer("/details/finish_reason")
            .and_then(Value::as_str)
            .map(String::from);
        Ok(meaning)
    }

    fn read_whole(&self, body: &[u8]) -> Result<WholeResponse, String> {
        read_generated(&parse(body)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_events_and_the_last_one() {
        let api = TgiGenerate;
        let first = api
            .read_event(r#"{"index":1,"token":{"id":5,"text":"Hi","logprob":-0.1,"special":false},"generated_text":null,"details":null}"#)
            .unwrap();
        assert!(first.generated && first.visible && !first.last);
        assert_eq!(first.text, "Hi");
        let eos = api
            .read_event(r#"{"index":3,"token":{"id":2,"text":"</s>","logprob":0.0,"special":true},"generated_text":"Hi there","details":{"finish_reason":"eos_token","generated_tokens":3,"seed":null,"input_length":7}}"#)
            .unwrap();
        assert!(eos.generated && !eos.visible && eos.last);
        assert_eq!(
            eos.usage,
            Some(Usage {
                prompt_tokens: Some(7),
                completion_tokens: Some(3)
            })
        );
        let error = api
            .read_event(r#"{"error":"Request failed during generation: CUDA OOM","error_type":"generation"}"#)
            .unwrap();
        assert!(error.error.unwrap().contains("CUDA OOM"));
    }

    #[test]
    fn whole_answers_bare_or_in_a_list() {
        let api = TgiGenerate;
        for body in [
            r#"{"generated_text":"abc","details":{"finish_reason":"length","generated_tokens":4}}"#,
            r#"[{"generated_text":"abc","details":{"finish_reason":"length","generated_tokens":4}}]"#,
        ] {
            let whole = api.read_whole(body.as_bytes()).unwrap();
            assert_eq!(whole.text, "abc");
            assert_eq!(whole.usage.unwrap().completion_tokens, Some(4));
        }
        assert!(api
            .read_whole(br#"{"error":"overloaded","error_type":"overloaded"}"#)
            .is_err());
        assert!(api.read_whole(br#"{"details":{}}"#).is_err());
        assert_eq!(api.path("m", true), "/generate_stream");
        assert_eq!(api.path("m", false), "/generate");
    }
}
