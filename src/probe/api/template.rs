//! Any HTTP JSON API, described in a small TOML file (`--api template --api-template FILE`):
//! where to send, the body with placeholders, and where in the answer the output text and its
//! token counts are (JSON Pointers, RFC 6901). For the services no built-in kind speaks: an
//! image classifier behind Paddle Serving, a company gateway, a model whose tensors have other
//! names.
//!
//! ```toml
//! path = "/v2/models/{model}/infer"          # {model} is replaced
//! body = '{"inputs": [{"name": "prompt", "shape": [1], "datatype": "BYTES", "data": [{{prompt}}]}],
//!          "parameters": {"max_tokens": {{max_tokens}}}}'
//! output = "/outputs/0/data/0"               # the generated text (or any value: its size)
//! output_tokens = "/outputs/1/data/0"        # optional: the server's token count
//! prompt_tokens = "/usage/prompt_tokens"     # optional
//! error = "/error"                           # optional: a non-null value here is a failure
//! stream_path = "/generate_stream"           # optional: stream server-sent events from here
//! stream_text = "/token/text"                # the text in each event (needs stream_path)
//! ```
//!
//! Placeholders: `{{prompt}}` (the prompt as a JSON string, quotes included), `{{max_tokens}}`,
//! `{{model}}` (a JSON string), `{{batch}}` (the items per request, 1 unless `--batch-size` or
//! a `--batch-sizes` sweep asks for more) and `{{prompts}}` (a JSON array of that many
//! prompts: an image service's batch of inputs). A stream ends with `[DONE]` or the body's
//! clean end.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Api, EventMeaning, Prompt, StreamEnd, Usage, WholeResponse};
use crate::error::InputError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiTemplate {
    pub path: String,
    pub body: String,
    pub output: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_text: Option<String>,
    /// Items per request (`{{batch}}`).
    #[serde(default = "one")]
    pub batch: u32,
}

fn one() -> u32 {
    1
}

impl ApiTemplate {
    /// Reads and checks a template file: every pointer well formed, and the body valid JSON
    /// once its placeholders are filled.
    pub fn load(path: &Path) -> Result<ApiTemplate, InputError> {
        let where_ = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|err| InputError::file(&where_, format!("cannot read it: {err}")))?;
        let template: ApiTemplate = toml::from_str(&text).map_err(|err| {
            InputError::file(
                &where_,
                format!("{err}(fields: path, body, output, output_tokens, prompt_tokens, error, stream_path, stream_text, batch)"),
            )
        })?;
        template
            .check()
            .map_err(|err| InputError::file(&where_, err))?;
        Ok(template)
    }

    fn check(&self) -> Result<(), String> {
        if !self.path.starts_with('/') {
            return Err(format!("path '{}' must start with /", self.path));
        }
        for (name, pointer) in [
            ("output", Some(&self.output)),
            ("output_tokens", self.output_tokens.as_ref()),
            ("prompt_tokens", self.prompt_tokens.as_ref()),
            ("error", self.error.as_ref()),
            ("stream_text", self.stream_text.as_ref()),
        ] {
            if let Some(pointer) = pointer {
                if !pointer.is_empty() && !pointer.starts_with('/') {
                    return Err(format!(
                        "{name} '{pointer}' is not a JSON Pointer: write /a/0/b (or \"\" for the whole answer)"
                    ));
                }
            }
        }
        if self.stream_path.is_some() != self.stream_text.is_some() {
            return Err("stream_path and stream_text go together".into());
        }
        if self.batch == 0 {
            return Err("batch must be at least 1".into());
        }
        let sample = Prompt {
            text: "a \"quoted\" prompt\n".into(),
            tokens: 4,
        };
        let body = self.fill(&sample, 16, "model");
        serde_json::from_str::<Value>(&body).map_err(|err| {
            format!("body is not JSON once its placeholders are filled ({err}): {body}")
        })?;
        Ok(())
    }

    /// Whether the body sends a batch (`{{batch}}` or `{{prompts}}`).
    pub fn batches(&self) -> bool {
        self.body.contains("{{batch}}") || self.body.contains("{{prompts}}")
    }

    /// The same API sending `batch` items per request.
    pub fn with_batch(&self, batch: u32) -> ApiTemplate {
        ApiTemplate {
            batch,
            ..self.clone()
        }
    }

    /// The body with its placeholders filled.
    fn fill(&self, prompt: &Prompt, max_tokens: u32, model: &str) -> String {
        let text = Value::from(prompt.text.as_str()).to_string();
        let mut body = self.body.clone();
        if body.contains("{{prompts}}") {
            let list = vec![text.as_str(); self.batch as usize].join(",");
            body = body.replace("{{prompts}}", &format!("[{list}]"));
        }
        body.replace("{{prompt}}", &text)
            .replace("{{max_tokens}}", &max_tokens.to_string())
            .replace("{{model}}", &Value::from(model).to_string())
            .replace("{{batch}}", &self.batch.to_string())
    }

    fn error_in(&self, value: &Value) -> Option<String> {
        let pointer = self.error.as_ref()?;
        match value.pointer(pointer)? {
            Value::Null | Value::Bool(false) => None,
            Value::String(text) => Some(text.clone()),
            other => Some(other.to_string()),
        }
    }

    fn count(value: &Value, pointer: Option<&String>) -> Option<u32> {
        let found = value.pointer(pointer?)?;
        found
            .as_u64()
            .or_else(|| found.as_str().and_then(|s| s.trim().parse().ok()))
            .map(|n| n as u32)
    }
}

/// Text of a value: a string as is; anything else (an image class list, a number) as its JSON,
/// whose length stands in for the output's size.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

impl Api for ApiTemplate {
    fn name(&self) -> &'static str {
        "template"
    }

    fn path(&self, model: &str, stream: bool) -> String {
        let path = match (&self.stream_path, stream) {
            (Some(stream_path), true) => stream_path,
            _ => &self.path,
        };
        path.replace("{model}", model)
    }

    fn streams(&self) -> bool {
        self.stream_path.is_some()
    }

    fn stream_end(&self) -> StreamEnd {
        StreamEnd::BodyEnd
    }

    fn body(&self, model: &str, prompt: &Prompt, max_tokens: u32, _: bool, _: bool) -> Value {
        // Checked at load time; a body that still fails is sent as a string and the server's
        // answer says why.
        let body = self.fill(prompt, max_tokens, model);
        serde_json::from_str(&body).unwrap_or(Value::String(body))
    }

    fn read_event(&self, data: &str) -> Result<EventMeaning, String> {
        let value: Value =
            serde_json::from_str(data).map_err(|err| format!("event is not JSON ({err})"))?;
        let mut meaning = EventMeaning {
            error: self.error_in(&value),
            usage: self.usage(&value),
            ..EventMeaning::default()
        };
        if let Some(found) = self.stream_text.as_ref().and_then(|p| value.pointer(p)) {
            let text = text_of(found);
            meaning.text_chars = text.chars().count();
            meaning.generated = meaning.text_chars > 0;
            meaning.visible = meaning.generated;
            meaning.text = text;
        }
        Ok(meaning)
    }

    fn read_whole(&self, body: &[u8]) -> Result<WholeResponse, String> {
        let value = super::tgi::parse(body)?;
        if let Some(error) = self.error_in(&value) {
            return Err(error);
        }
        let found = value
            .pointer(&self.output)
            .ok_or_else(|| format!("nothing at {} in the response", self.output))?;
        let text = text_of(found);
        Ok(WholeResponse {
            usage: self.usage(&value),
            text_chars: text.chars().count(),
            text,
            ..WholeResponse::default()
        })
    }
}

impl ApiTemplate {
    fn usage(&self, value: &Value) -> Option<Usage> {
        let usage = Usage {
            prompt_tokens: Self::count(value, self.prompt_tokens.as_ref()),
            completion_tokens: Self::count(value, self.output_tokens.as_ref()),
        };
        (usage != Usage::default()).then_some(usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(extra: &str) -> Result<ApiTemplate, String> {
        let text = format!(
            "path = \"/v1/models/{{model}}:predict\"\nbody = '{{\"instances\": [{{\"prompt\": {{{{prompt}}}}, \"n\": {{{{max_tokens}}}}, \"batch\": {{{{batch}}}}}}]}}'\noutput = \"/predictions/0/text\"\noutput_tokens = \"/predictions/0/tokens\"\nerror = \"/error\"\n{extra}"
        );
        let template: ApiTemplate = toml::from_str(&text).map_err(|e| e.to_string())?;
        template.check()?;
        Ok(template)
    }

    #[test]
    fn fills_the_body_and_reads_the_answer() {
        let t = template("").unwrap();
        let prompt = Prompt {
            text: "say \"hi\"".into(),
            tokens: 3,
        };
        assert_eq!(t.path("m1", false), "/v1/models/m1:predict");
        let body = t.body("m1", &prompt, 32, false, false);
        assert_eq!(body["instances"][0]["prompt"], "say \"hi\"");
        assert_eq!(body["instances"][0]["n"], 32);
        assert_eq!(body["instances"][0]["batch"], 1);
        let whole = t
            .read_whole(br#"{"predictions":[{"text":"hello","tokens":"7"}]}"#)
            .unwrap();
        assert_eq!(whole.text, "hello");
        assert_eq!(whole.usage.unwrap().completion_tokens, Some(7));
        assert!(t.read_whole(br#"{"error":"busy"}"#).is_err());
        assert!(t.read_whole(br#"{"predictions":[]}"#).is_err());
        assert!(!t.streams());
    }

    #[test]
    fn bad_templates_say_what_is_wrong() {
        assert!(template("stream_path = \"/s\"")
            .unwrap_err()
            .contains("together"));
        let err = template("stream_path = \"/s\"\nstream_text = \"token\"").unwrap_err();
        assert!(err.contains("JSON Pointer"), "{err}");
        let bad: ApiTemplate =
            toml::from_str("path = \"/x\"\nbody = '{\"p\": {{prompt}'\noutput = \"\"").unwrap();
        assert!(bad.check().unwrap_err().contains("not JSON"));
    }

    #[test]
    fn streams_events_at_a_pointer() {
        let t =
            template("stream_path = \"/v1/models/{model}:stream\"\nstream_text = \"/token/text\"")
                .unwrap();
        assert!(t.streams());
        assert_eq!(t.path("m", true), "/v1/models/m:stream");
        let event = t.read_event(r#"{"token":{"text":"ab"}}"#).unwrap();
        assert!(event.generated && event.text == "ab");
    }
}
