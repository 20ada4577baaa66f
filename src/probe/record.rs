//! One finished request, as written to `requests.ndjson` the moment it finishes.

use serde::{Deserialize, Serialize};

/// Why a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// Could not connect or send.
    Connect,
    /// The per-request deadline passed.
    Timeout,
    /// The stream went silent for longer than the idle timeout.
    Idle,
    /// A non-2xx status.
    Http,
    /// An error inside a 200 response: an `{"error": …}` event, `event: error`, an event that is
    /// not the API's JSON, or a body that is not an event stream.
    StreamError,
    /// The connection broke mid-stream.
    Reset,
    /// The stream ended cleanly but without `[DONE]`, or cut mid-event.
    Truncated,
}

impl FailureKind {
    pub const ALL: [FailureKind; 7] = [
        FailureKind::Connect,
        FailureKind::Timeout,
        FailureKind::Idle,
        FailureKind::Http,
        FailureKind::StreamError,
        FailureKind::Reset,
        FailureKind::Truncated,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FailureKind::Connect => "connect",
            FailureKind::Timeout => "timeout",
            FailureKind::Idle => "idle",
            FailureKind::Http => "http",
            FailureKind::StreamError => "stream_error",
            FailureKind::Reset => "reset",
            FailureKind::Truncated => "truncated",
        }
    }
}

/// Where a token count came from, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CountSource {
    /// The server's `usage`.
    Usage,
    /// Counted with the local `tokenizer.json` given with `--tokenizer` (no usage came back).
    Tokenizer,
    /// What the probe asked for (prompt built to a length; no usage came back).
    Requested,
    /// Content chunks counted: an estimate (servers may put several tokens in a chunk).
    Chunks,
}

/// Which part of a step a request belonged to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Sent before the measurement window (written, not counted).
    Warmup,
    /// Counted in the step's statistics.
    Measured,
    /// Sent after the window was full, to hold the load until the last measured request
    /// finished (written, not counted).
    Tail,
    /// Still in flight when the level ended and cut off: written with what it had received
    /// (the server did the work, and a probe's cost counts it), never counted.
    Cancelled,
}

/// A finished request: success or failure with its kind. Times in seconds; `start_s` from the
/// start of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub step: u32,
    /// The request's number within its step (its prompt starts with `<run>-<step>-<index>`).
    #[serde(default)]
    pub index: u64,
    pub concurrency: u32,
    pub phase: Phase,
    pub start_s: f64,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<FailureKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// First generated token (content, reasoning or tool call).
    pub ttft_s: Option<f64>,
    /// First visible (non-reasoning) content.
    pub ttft_visible_s: Option<f64>,
    pub tpot_s: Option<f64>,
    pub e2e_s: f64,
    pub input_tokens: u32,
    pub input_tokens_from: CountSource,
    pub output_tokens: u32,
    pub output_tokens_from: CountSource,
    pub chunks: u32,
    /// Mean and largest inter-token latency within this request.
    pub itl_mean_s: Option<f64>,
    pub itl_max_s: Option<f64>,
    /// Inter-token latencies of this request (for step percentiles; not written to disk).
    #[serde(skip)]
    pub itl_s: Vec<f64>,
    /// Streamed or not (a non-streaming request has E2E only).
    pub streamed: bool,
    /// The server's own timing of this request, when it reported one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<super::api::ServerTimings>,
}

impl RequestRecord {
    /// Multiplies every duration by `factor`: a server running `factor`× faster than real
    /// time is read in its own seconds.
    pub fn scale_times(&mut self, factor: f64) {
        if factor == 1.0 {
            return;
        }
        let s = |v: &mut f64| *v *= factor;
        s(&mut self.e2e_s);
        for value in [
            &mut self.ttft_s,
            &mut self.ttft_visible_s,
            &mut self.tpot_s,
            &mut self.itl_mean_s,
            &mut self.itl_max_s,
        ]
        .into_iter()
        .flatten()
        {
            s(value);
        }
        self.itl_s.iter_mut().for_each(s);
    }

    /// TPOT from E2E and TTFT: (e2e − ttft) / (tokens − 1).
    pub fn tpot_of(e2e: f64, ttft: Option<f64>, tokens: u32) -> Option<f64> {
        match ttft {
            Some(ttft) if tokens > 1 => Some((e2e - ttft) / f64::from(tokens - 1)),
            _ => None,
        }
    }
}
