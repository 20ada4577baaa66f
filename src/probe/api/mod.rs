//! What differs between serving APIs: the request body and how to read a response. The probe's
//! timing, load and search never look inside; a new API (TGI, KServe v2, a JSON template) is one
//! more implementation of [`Api`].

pub mod openai;
mod openai_chunk;

use serde::Serialize;

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

/// A server's own account of where a request's time went (llama.cpp: `timings`; others later
/// from headers). Seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct ServerTimings {
    pub prompt_tokens: Option<u32>,
    /// Prompt processing (prefill), excluding any wait for a slot.
    pub prefill_s: Option<f64>,
    pub decode_tokens: Option<u32>,
    /// Generation, first token to last.
    pub decode_s: Option<f64>,
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

    /// Path under the base URL, e.g. `/v1/chat/completions`.
    fn path(&self) -> &'static str;

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
