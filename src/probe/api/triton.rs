//! Triton and KServe's Open Inference Protocol (v2): Triton's generate extension
//! (`POST /v2/models/{model}/generate` whole, `/generate_stream` as server-sent events that end
//! when the body does, no `[DONE]`), and the tensor API every v2 server has
//! (`POST /v2/models/{model}/infer`, whole only). The tensor and field names are TensorRT-LLM's
//! and Triton's vLLM backend's conventions (`text_input`, `max_tokens`, `text_output`); a model
//! with other names is probed with `--api template`.

use serde_json::{json, Value};

use super::tgi::{error_of, parse};
use super::{Api, EventMeaning, Prompt, StreamEnd, WholeResponse};

/// Triton's generate extension.
pub struct TritonGenerate;

/// KServe v2 / Triton `infer` with a BYTES prompt tensor.
pub struct KServeInfer;

fn text_output(value: &Value) -> Option<&str> {
    value.get("text_output").and_then(Value::as_str)
}

impl Api for TritonGenerate {
    fn name(&self) -> &'static str {
        "triton"
    }

    fn path(&self, model: &str, stream: bool) -> String {
        let suffix = if stream { "_stream" } else { "" };
        format!("/v2/models/{model}/generate{suffix}")
    }

    fn stream_end(&self) -> StreamEnd {
        StreamEnd::BodyEnd
    }

    fn body(&self, _model: &str, prompt: &Prompt, max_tokens: u32, stream: bool, _: bool) -> Value {
        json!({"text_input": prompt.text, "max_tokens": max_tokens, "stream": stream})
    }

    fn read_event(&self, data: &str) -> Result<EventMeaning, String> {
        let value = parse(data.as_bytes()).map_err(|_| "event is not JSON".to_string())?;
        let mut meaning = EventMeaning {
            error: error_of(&value),
            ..EventMeaning::default()
        };
        if let Some(text) = text_output(&value) {
            meaning.text_chars = text.chars().count();
            meaning.generated = meaning.text_chars > 0;
            meaning.visible = meaning.generated;
            meaning.text.push_str(text);
        }
        Ok(meaning)
    }

    fn read_whole(&self, body: &[u8]) -> Result<WholeResponse, String> {
        let value = parse(body)?;
        if let Some(error) = error_of(&value) {
            return Err(error);
        }
        let text = text_output(&value).ok_or("no text_output in the response")?;
        Ok(WholeResponse {
            text_chars: text.chars().count(),
            text: text.to_string(),
            ..WholeResponse::default()
        })
    }
}

impl Api for KServeInfer {
    fn name(&self) -> &'static str {
        "kserve"
    }

    fn path(&self, model: &str, _stream: bool) -> String {
        format!("/v2/models/{model}/infer")
    }

    fn streams(&self) -> bool {
        false
    }

    fn body(&self, _model: &str, prompt: &Prompt, max_tokens: u32, _: bool, _: bool) -> Value {
        json!({"inputs": [
            {"name": "text_input", "shape": [1], "datatype": "BYTES", "data": [prompt.text]},
            {"name": "max_tokens", "shape": [1], "datatype": "INT32", "data": [max_tokens]},
        ]})
    }

    fn read_event(&self, _data: &str) -> Result<EventMeaning, String> {
        Err("KServe v2 infer does not stream".into())
    }

    /// The `text_output` tensor (else the first BYTES one); its data may be flat or nested.
    fn read_whole(&self, body: &[u8]) -> Result<WholeResponse, String> {
        let value = parse(body)?;
        if let Some(error) = error_of(&value) {
            return Err(error);
        }
        let outputs = value
            .get("outputs")
            .and_then(Value::as_array)
            .ok_or("no outputs in the response")?;
        let named = |name: &str| {
            outputs
                .iter()
                .find(|o| o.get("name").and_then(Value::as_str) == Some(name))
        };
        let output = named("text_output")
            .or_else(|| {
                outputs
                    .iter()
                    .find(|o| o.get("datatype").and_then(Value::as_str) == Some("BYTES"))
            })
            .ok_or("no text_output (or BYTES) tensor in the outputs")?;
        let mut data = output.get("data").ok_or("the output tensor has no data")?;
        while let Value::Array(items) = data {
            data = items.first().ok_or("the output tensor is empty")?;
        }
        let text = data.as_str().ok_or("the output tensor holds no text")?;
        // Some models add their token count as a tensor.
        let count = ["output_tokens", "generated_tokens", "sequence_length"]
            .iter()
            .find_map(|name| named(name))
            .and_then(|o| o.get("data"))
            .and_then(|d| d.as_array().and_then(|a| a.first()).or(Some(d)))
            .and_then(Value::as_u64);
        Ok(WholeResponse {
            usage: count.map(|tokens| super::Usage {
                prompt_tokens: None,
                completion_tokens: Some(tokens as u32),
            }),
            text_chars: text.chars().count(),
            text: text.to_string(),
            ..WholeResponse::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generate_paths_events_and_errors() {
        let api = TritonGenerate;
        assert_eq!(
            api.path("ensemble", true),
            "/v2/models/ensemble/generate_stream"
        );
        assert_eq!(api.path("ensemble", false), "/v2/models/ensemble/generate");
        let event = api
            .read_event(r#"{"model_name":"ensemble","model_version":"1","sequence_end":false,"text_output":" world"}"#)
            .unwrap();
        assert!(event.generated && event.visible && !event.last);
        let empty = api
            .read_event(r#"{"model_name":"ensemble","text_output":""}"#)
            .unwrap();
        assert!(!empty.generated);
        assert!(api
            .read_event(r#"{"error":"in ensemble 'ensemble': failed"}"#)
            .unwrap()
            .error
            .is_some());
        assert_eq!(
            api.read_whole(br#"{"model_name":"m","text_output":"abc"}"#)
                .unwrap()
                .text,
            "abc"
        );
    }

    #[test]
    fn infer_reads_the_text_tensor() {
        let api = KServeInfer;
        let body = br#"{"model_name":"m","outputs":[{"name":"output_tokens","shape":[1],"datatype":"INT32","data":[12]},{"name":"text_output","shape":[1,1],"datatype":"BYTES","data":[["hello there"]]}]}"#;
        let whole = api.read_whole(body).unwrap();
        assert_eq!(whole.text, "hello there");
        assert_eq!(whole.usage.unwrap().completion_tokens, Some(12));
        assert!(api.read_whole(br#"{"error":"unknown model"}"#).is_err());
        assert!(api
            .read_whole(br#"{"outputs":[{"name":"x","datatype":"FP32","data":[1.0]}]}"#)
            .is_err());
        let request = api.body(
            "m",
            &Prompt {
                text: "hi".into(),
                tokens: 1,
            },
            8,
            false,
            false,
        );
        assert_eq!(request["inputs"][0]["datatype"], "BYTES");
        assert_eq!(request["inputs"][1]["data"][0], 8);
    }
}
