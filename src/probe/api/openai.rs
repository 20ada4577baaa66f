//! OpenAI-compatible chat and text completions (vLLM, SGLang, TGI's Messages API, llama.cpp,
//! Ollama, MindIE, …).

use serde_json::{json, Value};

use super::openai_chunk::Chunk;
use super::{Api, EventMeaning, Prompt, Usage, WholeResponse};

/// `POST /v1/chat/completions`.
pub struct OpenAiChat;

/// `POST /v1/completions`.
pub struct OpenAiCompletions;

/// Asks for exactly `max_tokens`: `ignore_eos` and `min_tokens` (vLLM, SGLang) make the server
/// generate the length the workload asks for instead of stopping at its own EOS.
fn common_body(model: &str, max_tokens: u32, stream: bool, include_usage: bool) -> Value {
    let mut body = json!({
        "model": model,
        "max_tokens": max_tokens,
        "min_tokens": max_tokens,
        "ignore_eos": true,
        "stream": stream,
        "temperature": 0.0,
        "cache_prompt": false,
    });
    if stream && include_usage {
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

fn usage_of(value: &Value) -> Option<Usage> {
    let usage = value.get("usage")?;
    if usage.is_null() {
        return None;
    }
    let read = |key: &str| usage.get(key).and_then(Value::as_u64).map(|v| v as u32);
    Some(Usage {
        prompt_tokens: read("prompt_tokens"),
        completion_tokens: read("completion_tokens"),
    })
}

fn timings_of(value: &Value) -> Option<super::ServerTimings> {
    let timings: super::openai_chunk::TimingsBody =
        serde_json::from_value(value.get("timings")?.clone()).ok()?;
    Some(timings.seconds())
}

fn error_of(value: &Value) -> Option<String> {
    let error = value.get("error")?;
    if error.is_null() {
        return None;
    }
    Some(
        error
            .get("message")
            .and_then(Value::as_str)
            .map(String::from)
            .unwrap_or_else(|| error.to_string()),
    )
}

/// Appends the text in `value` (a string, a list of parts, or a part with `text`/`content`) to
/// `out`; returns the characters appended.
fn collect_text(value: Option<&Value>, out: &mut String) -> usize {
    match value {
        Some(Value::String(text)) => {
            out.push_str(text);
            text.chars().count()
        }
        Some(Value::Array(items)) => items.iter().map(|i| collect_text(Some(i), out)).sum(),
        Some(Value::Object(map)) => map
            .get("text")
            .or_else(|| map.get("content"))
            .map(|v| collect_text(Some(v), out))
            .unwrap_or(0),
        _ => 0,
    }
}

fn parse(data: &str) -> Result<Value, String> {
    serde_json::from_str(data).map_err(|err| format!("event is not JSON ({err})"))
}

/// The meaning of a chunk in the common shape, or `None` when it needs the general reader (not
/// that shape, or an `error` inside).
fn read_chunk(data: &str) -> Option<EventMeaning> {
    let chunk: Chunk = serde_json::from_str(data).ok()?;
    if chunk.error.is_some() {
        return None;
    }
    // The choices were folded into a meaning as they were read (see `Choices`).
    let mut meaning = chunk.choices.map(|c| c.0).unwrap_or_default();
    meaning.usage = chunk.usage.map(|u| Usage {
        prompt_tokens: u.prompt_tokens.map(|v| v as u32),
        completion_tokens: u.completion_tokens.map(|v| v as u32),
    });
    meaning.server_timings = chunk.timings.as_ref().map(|t| t.seconds());
    Some(meaning)
}

impl Api for OpenAiChat {
    fn name(&self) -> &'static str {
        "chat"
    }

    fn path(&self, _model: &str, _stream: bool) -> String {
        "/v1/chat/completions".into()
    }

    fn asks_for_usage(&self) -> bool {
        true
    }

    fn body(
        &self,
        model: &str,
        prompt: &Prompt,
        max_tokens: u32,
        stream: bool,
        include_usage: bool,
    ) -> Value {
        let mut body = common_body(model, max_tokens, stream, include_usage);
        body["messages"] = json!([{"role": "user", "content": prompt.text}]);
        body
    }

    fn read_event(&self, data: &str) -> Result<EventMeaning, String> {
        if let Some(meaning) = read_chunk(data) {
            return Ok(meaning);
        }
        let value = parse(data)?;
        let mut meaning = EventMeaning {
            usage: usage_of(&value),
            error: error_of(&value),
            ..EventMeaning::default()
        };
        if let Some(choices) = value.get("choices").and_then(Value::as_array) {
            for choice in choices {
                let delta = choice.get("delta").or_else(|| choice.get("message"));
                if let Some(delta) = delta {
                    let reasoning = collect_text(delta.get("reasoning_content"), &mut meaning.text)
                        + collect_text(delta.get("reasoning"), &mut meaning.text)
                        + collect_text(delta.get("reasoning_details"), &mut meaning.text);
                    let content = collect_text(delta.get("content"), &mut meaning.text);
                    let tools = delta
                        .get("tool_calls")
                        .and_then(Value::as_array)
                        .is_some_and(|calls| !calls.is_empty());
                    meaning.visible |= content > 0;
                    meaning.generated |= content > 0 || reasoning > 0 || tools;
                    meaning.text_chars += content + reasoning;
                }
                if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                    meaning.finish_reason = Some(reason.to_string());
                }
            }
        }
        Ok(meaning)
    }

    fn read_whole(&self, body: &[u8]) -> Result<WholeResponse, String> {
        let value: Value =
            serde_json::from_slice(body).map_err(|err| format!("body is not JSON ({err})"))?;
        if let Some(error) = error_of(&value) {
            return Err(error);
        }
        let mut whole = WholeResponse {
            usage: usage_of(&value),
            server_timings: timings_of(&value),
            ..WholeResponse::default()
        };
        for choice in value
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let message = choice.get("message");
            let field = |name: &str| message.and_then(|m| m.get(name));
            whole.text_chars += collect_text(field("reasoning_content"), &mut whole.text)
                + collect_text(field("reasoning"), &mut whole.text)
                + collect_text(field("content"), &mut whole.text);
        }
        Ok(whole)
    }
}

impl Api for OpenAiCompletions {
    fn name(&self) -> &'static str {
        "completions"
    }

    fn path(&self, _model: &str, _stream: bool) -> String {
        "/v1/completions".into()
    }

    fn asks_for_usage(&self) -> bool {
        true
    }

    fn body(
        &self,
        model: &str,
        prompt: &Prompt,
        max_tokens: u32,
        stream: bool,
        include_usage: bool,
    ) -> Value {
        let mut body = common_body(model, max_tokens, stream, include_usage);
        body["prompt"] = json!(prompt.text);
        body
    }

    fn read_event(&self, data: &str) -> Result<EventMeaning, String> {
        if let Some(meaning) = read_chunk(data) {
            return Ok(meaning);
        }
        let value = parse(data)?;
        let mut meaning = EventMeaning {
            usage: usage_of(&value),
            error: error_of(&value),
            ..EventMeaning::default()
        };
        if let Some(choices) = value.get("choices").and_then(Value::as_array) {
            for choice in choices {
                let chars = collect_text(choice.get("text"), &mut meaning.text);
                meaning.generated |= chars > 0;
                meaning.visible |= chars > 0;
                meaning.text_chars += chars;
                if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                    meaning.finish_reason = Some(reason.to_string());
                }
            }
        }
        Ok(meaning)
    }

    fn read_whole(&self, body: &[u8]) -> Result<WholeResponse, String> {
        let value: Value =
            serde_json::from_slice(body).map_err(|err| format!("body is not JSON ({err})"))?;
        if let Some(error) = error_of(&value) {
            return Err(error);
        }
        let mut whole = WholeResponse {
            usage: usage_of(&value),
            server_timings: timings_of(&value),
            ..WholeResponse::default()
        };
        for choice in value
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            whole.text_chars += collect_text(choice.get("text"), &mut whole.text);
        }
        Ok(whole)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(data: &str) -> EventMeaning {
        OpenAiChat.read_event(data).unwrap()
    }

    #[test]
    fn a_role_only_or_empty_first_chunk_is_not_a_token() {
        // MEASURING 1: vLLM's benchmark counted this chunk as the first token.
        let role = chat(
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
        );
        assert!(!role.generated);
        let null = chat(r#"{"choices":[{"index":0,"delta":{"content":null}}]}"#);
        assert!(!null.generated);
        let token = chat(r#"{"choices":[{"index":0,"delta":{"content":"Hi"}}]}"#);
        assert!(token.generated && token.visible);
    }

    #[test]
    fn reasoning_is_generated_output_but_not_visible() {
        // MEASURING 2: three spellings of reasoning.
        for field in [
            r#""reasoning_content":"let me think""#,
            r#""reasoning":"let me think""#,
            r#""reasoning_details":[{"type":"reasoning.text","text":"let me think"}]"#,
        ] {
            let meaning = chat(&format!(r#"{{"choices":[{{"delta":{{{field}}}}}]}}"#));
            assert!(meaning.generated, "{field}");
            assert!(!meaning.visible, "{field}");
        }
        let tool =
            chat(r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f"}}]}}]}"#);
        assert!(tool.generated && !tool.visible);
    }

    #[test]
    fn usage_in_its_own_chunk_or_inside_the_last_one() {
        // MEASURING 4: `choices: []` with usage, or usage beside the last text.
        let own = chat(
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":64,"total_tokens":76}}"#,
        );
        assert_eq!(own.usage.unwrap().completion_tokens, Some(64));
        assert!(!own.generated);
        let inside = chat(
            r#"{"choices":[{"delta":{"content":"end"},"finish_reason":"length"}],"usage":{"completion_tokens":64}}"#,
        );
        assert!(inside.generated);
        assert_eq!(inside.finish_reason.as_deref(), Some("length"));
        assert_eq!(inside.usage.unwrap().completion_tokens, Some(64));
        let none = chat(r#"{"choices":[{"delta":{"content":"x"}}],"usage":null}"#);
        assert!(none.usage.is_none());
    }

    #[test]
    fn errors_inside_a_200_stream_are_seen() {
        // MEASURING 6.
        let error = chat(r#"{"error":{"message":"out of memory","type":"internal"}}"#);
        assert_eq!(error.error.as_deref(), Some("out of memory"));
        assert!(OpenAiChat
            .read_event("{\"choices\": [{\"delta\": {\"content\": \"brok")
            .is_err());
        assert!(OpenAiChat.read_event("not json at all").is_err());
    }

    #[test]
    fn completions_read_text() {
        let meaning = OpenAiCompletions
            .read_event(r#"{"choices":[{"index":0,"text":"two words","finish_reason":null}]}"#)
            .unwrap();
        assert!(meaning.generated);
        assert_eq!(meaning.text_chars, 9);
    }

    #[test]
    fn bodies_ask_for_exact_lengths_and_usage() {
        let prompt = Prompt {
            text: "hello".into(),
            tokens: 1,
        };
        let body = OpenAiChat.body("m", &prompt, 64, true, true);
        assert_eq!(body["max_tokens"], 64);
        assert_eq!(body["ignore_eos"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["messages"][0]["content"], "hello");
        let plain = OpenAiCompletions.body("m", &prompt, 8, true, false);
        assert!(plain.get("stream_options").is_none());
        assert_eq!(plain["prompt"], "hello");
    }

    #[test]
    fn a_real_llama_cpp_stream_gives_usage_and_its_timings() {
        use crate::probe::sse::SseDecoder;
        let bytes = include_bytes!("../../../tests/fixtures/llamacpp/chat-stream.sse");
        let mut decoder = SseDecoder::new();
        let mut events = Vec::new();
        decoder.feed(bytes, std::time::Instant::now(), &mut events);
        let meanings: Vec<EventMeaning> = events
            .iter()
            .filter(|e| e.data.trim() != "[DONE]")
            .map(|e| OpenAiChat.read_event(&e.data).unwrap())
            .collect();
        // llama.cpp opens with a role-only chunk (`content: null`): not a token.
        assert!(!meanings[0].generated);
        assert!(meanings[1].generated && meanings[1].visible);
        let last = meanings.last().unwrap();
        assert_eq!(last.usage.unwrap().completion_tokens, Some(32));
        let timings = last.server_timings.unwrap();
        assert_eq!(timings.prompt_tokens, Some(12));
        assert!((timings.prefill_s.unwrap() - 0.125082).abs() < 1e-12);
        assert_eq!(timings.decode_tokens, Some(32));
        assert!((timings.decode_s.unwrap() - 0.36399).abs() < 1e-12);
    }
}
