//! SageMaker / DJL Serving LMI's JSON API: `POST /invocations` with `{"inputs", "parameters"}`,
//! answered whole with `{"generated_text", "details"}` (or a list of them). DJL streams JSON
//! lines rather than server-sent events, so capplan probes it without streaming: E2E and token
//! counts, no TTFT.

use serde_json::{json, Value};

use super::tgi::{parse, read_generated};
use super::{Api, EventMeaning, Prompt, WholeResponse};

pub struct DjlJson;

impl Api for DjlJson {
    fn name(&self) -> &'static str {
        "djl"
    }

    fn path(&self, _model: &str, _stream: bool) -> String {
        "/invocations".into()
    }

    fn streams(&self) -> bool {
        false
    }

    fn body(&self, _model: &str, prompt: &Prompt, max_tokens: u32, _: bool, _: bool) -> Value {
        json!({
            "inputs": prompt.text,
            "parameters": {"max_new_tokens": max_tokens, "details": true, "do_sample": false},
        })
    }

    fn read_event(&self, _data: &str) -> Result<EventMeaning, String> {
        Err("DJL's JSON API is probed without streaming".into())
    }

    fn read_whole(&self, body: &[u8]) -> Result<WholeResponse, String> {
        let value: Value = parse(body)?;
        // The dynamic-batch schema answers [{"generated_text": ...}] without details.
        read_generated(&value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lmi_answers_and_errors() {
        let api = DjlJson;
        let whole = api
            .read_whole(br#"{"generated_text":"Deep Learning is","details":{"finish_reason":"length","generated_tokens":8,"inputs":"What is Deep Learning?"}}"#)
            .unwrap();
        assert_eq!(whole.usage.unwrap().completion_tokens, Some(8));
        assert_eq!(
            whole.usage.unwrap().prompt_tokens,
            None,
            "details.inputs is text"
        );
        assert!(api
            .read_whole(br#"{"generated_text":"","details":{"finish_reason":"error","generated_tokens":null}}"#)
            .is_err());
        assert_eq!(
            api.read_whole(br#"[{"generated_text":"x"}]"#).unwrap().text,
            "x"
        );
        let body = api.body(
            "m",
            &Prompt {
                text: "hi".into(),
                tokens: 1,
            },
            64,
            false,
            false,
        );
        assert_eq!(body["parameters"]["max_new_tokens"], 64);
        assert!(!api.streams());
    }
}
