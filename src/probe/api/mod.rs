//! What differs between serving APIs: the path, the request body, how a stream ends and how to
//! read a response. The probe's timing, load and search never look inside; each API kind is one
//! implementation of [`Api`].

pub mod djl;
mod headers;
pub mod kind;
pub mod openai;
mod openai_chunk;
pub mod template;
pub mod tgi;
pub mod triton;

use serde::Serialize;

pub use headers::timings_from_headers;
pub use kind::ApiKind;
pub use openai::{OpenAiChat, OpenAiCompletions};

/// The prompt of one request.
#[derive(Debug, Clone)]
pub struct Prompt {
    pub text: String,
    /// Tokens the prompt was built to have (the server's usage is preferred when it reports).
    pub tokens: u32,
}

/// Token counts a server reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
}

/// A server's own account of where a request's time went: llama.cpp's `timings` in the body,
/// TGI-style timing headers (`x-queue-time`, `x-inference-time`, …). Seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct ServerTimings {
    pub prompt_tokens: Option<u32>,
    /// Prompt processing (prefill), excluding any wait for a slot.
    pub prefill_s: Option<f64>,
    pub decode_tokens: Option<u32>,
    /// Generation, first token to last.
    pub decode_s: Option<f64>,
    /// Waiting in the server's queue before its batch took the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_s: Option<f64>,
    /// Prefill and decode together (TGI's `x-inference-time`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inference_s: Option<f64>,
    /// The server's time per generated token (TGI's includes the prefill).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_per_token_s: Option<f64>,
    /// The server's whole handling of the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_s: Option<f64>,
}

impl ServerTimings {
    /// Each field from `self`, else from `other`.
    pub fn or(self, other: ServerTimings) -> ServerTimings {
        ServerTimings {
            prompt_tokens: self.prompt_tokens.or(other.prompt_tokens),
            prefill_s: self.prefill_s.or(other.prefill_s),
            decode_tokens: self.decode_tokens.or(other.decode_tokens),
            decode_s: self.decode_s.or(other.decode_s),
            queue_s: self.queue_s.or(other.queue_s),
            inference_s: self.inference_s.or(other.inference_s),
            time_per_token_s: self.time_per_token_s.or(other.time_per_token_s),
            total_s: self.total_s.or(other.total_s),
        }
    }

    /// Compute time: prefill + decode where both are known, else inference.
    pub fn compute_s(&self) -> Option<f64> {
        match (self.prefill_s, self.decode_s) {
            (Some(prefill), Some(decode)) => Some(prefill + decode),
            _ => self.inference_s,
        }
    }
}

/// How an API's stream says it is complete; a stream that stops any other way is truncated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// `data: [DONE]` (OpenAI).
    DoneMarker,
    /// An event the API reads as the last one ([`EventMeaning::last`]; TGI's carries
    /// `generated_text`), or `[DONE]`.
    LastEvent,
    /// The body's clean end after at least one whole event (Triton's generate_stream closes
    /// its chunked body; a cut connection is still an error).
    BodyEnd,
}

/// What one stream event says, as far as timing and counting go.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventMeaning {
    /// Carries generated output: content, reasoning or a tool call (a role-only or empty chunk
    /// does not).
    pub generated: bool,
    /// Carries visible (non-reasoning) content.
    pub visible: bool,
    /// Characters of generated text (to share a chunk's tokens when ITL is estimated).
    pub text_chars: usize,
    /// The generated text itself (reasoning, then content), for a local tokenizer to count
    /// when the server reports no usage.
    pub text: String,
    pub usage: Option<Usage>,
    /// The server's own timing of the request, when it reports one (llama.cpp's `timings`).
    pub server_timings: Option<ServerTimings>,
    /// An error the server put inside the stream.
    pub error: Option<String>,
    pub finish_reason: Option<String>,
    /// The API marks this event as the stream's last (see [`StreamEnd::LastEvent`]).
    pub last: bool,
}

/// A whole (non-streaming) response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WholeResponse {
    pub usage: Option<Usage>,
    pub server_timings: Option<ServerTimings>,
    pub text_chars: usize,
    pub text: String,
}

pub trait Api: Send + Sync {
    fn name(&self) -> &'static str;

    /// Path under the base URL, e.g. `/v1/chat/completions`, `/v2/models/{model}/infer`.
    fn path(&self, model: &str, stream: bool) -> String;

    /// Whether the API can stream tokens (KServe v2 infer, DJL's JSON cannot: E2E only).
    fn streams(&self) -> bool {
        true
    }

    /// Whether `include_usage` means anything to it (OpenAI's `stream_options`): a server that
    /// answers it with HTTP 400 is then asked again without it.
    fn asks_for_usage(&self) -> bool {
        false
    }

    fn stream_end(&self) -> StreamEnd {
        StreamEnd::DoneMarker
    }

    /// The JSON body asking for exactly `max_tokens` output tokens.
    fn body(
        &self,
        model: &str,
        prompt: &Prompt,
        max_tokens: u32,
        stream: bool,
        include_usage: bool,
    ) -> serde_json::Value;

    /// Reads one event's data; `Err` when it is not the JSON this API sends.
    fn read_event(&self, data: &str) -> Result<EventMeaning, String>;

    fn read_whole(&self, body: &[u8]) -> Result<WholeResponse, String>;
}
