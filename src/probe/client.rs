//! Sending one request and timing its stream.
//!
//! The start is taken just before the request is handed to the transport; each event is timed
//! by the read that brought its first byte (see [`super::sse`]). A request that does not finish
//! cleanly is a failure with a kind, never a success with fewer tokens. One transport (HTTP/1.1,
//! TCP_NODELAY, a pool as large as the concurrency, no retries but one for a stale kept-alive
//! connection) serves all requests; see [`super::transport`] for which.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use super::api::{timings_from_headers, Api, Prompt, ServerTimings, StreamEnd, Usage};
use super::record::{CountSource, FailureKind, Phase, RequestRecord};
use super::sse::SseDecoder;
use super::transport::{Response, SendError, Transport};
use crate::workload::tokens::LocalTokenizer;

/// Installs rustls's ring provider, which every HTTPS-capable `reqwest::Client` in this crate's
/// build needs before it is created; installing twice is harmless.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Everything requests share.
pub struct Endpoint {
    pub base: String,
    pub api: Arc<dyn Api>,
    pub model: String,
    /// Sent as a bearer token; never written anywhere.
    api_key: Option<String>,
    pub stream: bool,
    /// Ask for usage in the stream (cleared if the server refuses `stream_options`).
    include_usage: AtomicBool,
    pub timeout: Duration,
    pub idle_timeout: Duration,
    transport: Transport,
    /// For the server's `/metrics` (rarely asked; never timed).
    client: reqwest::Client,
    /// Counts tokens when the server reports no usage.
    tokenizer: Option<Arc<LocalTokenizer>>,
    /// Where the server's Prometheus counters are (`--metrics-url`, default `<base>/metrics`).
    metrics_url: Option<String>,
    /// Cleared after a scrape fails (no `/metrics`, not Prometheus text): not asked again.
    metrics_alive: AtomicBool,
}

impl Endpoint {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        base: &str,
        api: Arc<dyn Api>,
        model: &str,
        api_key: Option<String>,
        stream: bool,
        timeout: Duration,
        idle_timeout: Duration,
        pool: usize,
    ) -> anyhow::Result<Endpoint> {
        install_crypto();
        let connect_timeout = timeout.min(Duration::from_secs(30));
        let client = reqwest::Client::builder()
            .http1_only()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(pool.max(1))
            .connect_timeout(connect_timeout)
            .build()?;
        let base = base.trim_end_matches('/').to_string();
        Ok(Endpoint {
            transport: Transport::for_base(&base, client.clone(), connect_timeout, pool),
            base,
            api,
            model: model.to_string(),
            api_key,
            stream,
            include_usage: AtomicBool::new(true),
            timeout,
            idle_timeout,
            client,
            tokenizer: None,
            metrics_url: None,
            metrics_alive: AtomicBool::new(true),
        })
    }

    /// Sends through reqwest even where the probe's own client would serve (plain `http://`,
    /// no proxy): HTTPS and proxied endpoints always go that way, and tests use this to read
    /// the same streams through both.
    pub fn through_library(mut self) -> Endpoint {
        self.transport = Transport::Library(self.client.clone());
        self
    }

    /// Scrapes the server's counters at `url` (`None`: `<base>/metrics`).
    pub fn with_metrics_url(mut self, url: Option<String>) -> Endpoint {
        self.metrics_url = url;
        self
    }

    /// The server's Prometheus counters now, or `None` (no endpoint, an error, a timeout of
    /// 5 s; after one failure the server is not asked again).
    pub async fn scrape(&self) -> Option<super::metrics::Scrape> {
        if !self.metrics_alive.load(Ordering::Relaxed) {
            return None;
        }
        let url = match &self.metrics_url {
            Some(url) => url.clone(),
            // The query (an API version, a key) belongs to the API's path, not to /metrics.
            None => format!("{}/metrics", self.root_and_query().0),
        };
        let mut request = self.client.get(url).timeout(Duration::from_secs(5));
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let text = match request.send().await {
            Ok(response) if response.status().is_success() => response.text().await.ok(),
            _ => None,
        };
        let scrape = text
            .map(|t| super::metrics::Scrape::parse(&t))
            .filter(|s| !s.is_empty());
        if scrape.is_none() {
            self.metrics_alive.store(false, Ordering::Relaxed);
        }
        scrape
    }

    /// Counts tokens with `tokenizer` where the server reports no usage.
    pub fn with_tokenizer(mut self, tokenizer: Option<Arc<LocalTokenizer>>) -> Endpoint {
        self.tokenizer = tokenizer;
        self
    }

    /// Output tokens of `text`: the server's count, else the local tokenizer's, else
    /// `fallback` (an estimate, marked as such).
    fn output_count(
        &self,
        reported: Option<u32>,
        text: &str,
        fallback: (u32, CountSource),
    ) -> (u32, CountSource) {
        if let Some(tokens) = reported {
            return (tokens, CountSource::Usage);
        }
        match self.tokenizer.as_ref().and_then(|t| t.count(text)) {
            Some(tokens) => (tokens, CountSource::Tokenizer),
            None => fallback,
        }
    }

    /// Prompt tokens: the server's count, else the local tokenizer's, else what the prompt was
    /// built to have.
    fn input_count(&self, reported: Option<u32>, prompt: &Prompt) -> (u32, CountSource) {
        let fallback = (prompt.tokens, CountSource::Requested);
        match self.output_count(reported, &prompt.text, fallback) {
            (tokens, CountSource::Chunks) => (tokens, CountSource::Requested),
            counted => counted,
        }
    }

    /// Whether the server accepted `stream_options` (false after it refused it once).
    pub fn usage_requested(&self) -> bool {
        self.include_usage.load(Ordering::Relaxed)
    }

    /// The API's path appended to the base URL's path; a query string on the base (Azure's
    /// `?api-version=…`, a key) stays at the end.
    fn url(&self) -> String {
        let (root, query) = self.root_and_query();
        let path = self.api.path(&self.model, self.stream);
        format!("{root}{path}{query}")
    }

    /// The base URL without a trailing `/v1` (so a base ending in /v1 does not become /v1/v1),
    /// and its query string (`?…`, or empty).
    fn root_and_query(&self) -> (&str, &str) {
        let (base, query) = match self.base.find('?') {
            Some(at) => self.base.split_at(at),
            None => (self.base.as_str(), ""),
        };
        let base = base.trim_end_matches('/');
        (base.strip_suffix("/v1").unwrap_or(base), query)
    }
}

/// How long a finished stream's connection may take to end its body after the last event (most
/// servers end it in the same write or the next) before it is closed instead of reused.
const FINISH_LIMIT: Duration = Duration::from_millis(50);

/// What one request measured, before it is filed under a step.
#[derive(Debug, Clone)]
pub struct Measured {
    pub start: Instant,
    pub record: RequestRecord,
}

struct Failure {
    kind: FailureKind,
    status: Option<u16>,
    message: String,
}

fn fail(kind: FailureKind, message: impl Into<String>) -> Failure {
    Failure {
        kind,
        status: None,
        message: message.into(),
    }
}

/// What a request in flight has received so far, kept where the step that may cut it off
/// can read it: when its first generated chunk came and how many there were. Updated once per
/// generated chunk (one atomic add), read only when a level ends with the request unfinished.
#[derive(Debug, Default)]
pub struct Progress {
    /// The status of the response head, once it came (the server has the request).
    answered: std::sync::OnceLock<u16>,
    first_chunk: std::sync::OnceLock<Instant>,
    chunks: std::sync::atomic::AtomicU32,
}

impl Progress {
    fn chunk(&self, at: Instant) {
        if self.chunks.fetch_add(1, Ordering::Relaxed) == 0 {
            let _ = self.first_chunk.set(at);
        }
    }

    /// The record of a request `start`ed with a prompt of `input_tokens` and cut off at
    /// `now`: a failure with no kind (the client, not the server, ended it), the response's
    /// status if its head came, its first chunk's time if one came, and the generated chunks
    /// as its output count (an estimate).
    pub fn cancelled(&self, start: Instant, now: Instant, input_tokens: u32) -> RequestRecord {
        let mut record = failed(
            start,
            fail(FailureKind::Truncated, "cancelled: the level ended"),
            input_tokens,
        )
        .record;
        record.error_kind = None;
        record.phase = Phase::Cancelled;
        record.e2e_s = now.saturating_duration_since(start).as_secs_f64();
        record.ttft_s = self
            .first_chunk
            .get()
            .map(|at| at.saturating_duration_since(start).as_secs_f64());
        record.chunks = self.chunks.load(Ordering::Relaxed);
        record.output_tokens = record.chunks;
        record.http_status = self.answered.get().copied();
        record
    }
}

/// Sends `prompt` asking for `max_tokens`, and measures it.
pub async fn send(endpoint: &Endpoint, prompt: &Prompt, max_tokens: u32) -> Measured {
    send_tracked(endpoint, prompt, max_tokens, None).await
}

/// [`send`], keeping `progress` up to date while the stream is read.
pub async fn send_tracked(
    endpoint: &Endpoint,
    prompt: &Prompt,
    max_tokens: u32,
    progress: Option<&Progress>,
) -> Measured {
    let mut measured = exchange(endpoint, prompt, max_tokens, progress).await;
    // A server may echo the request (its Authorization header included) in an error body.
    if let (Some(key), Some(error)) = (&endpoint.api_key, &mut measured.record.error) {
        if !key.is_empty() && error.contains(key.as_str()) {
            *error = error.replace(key.as_str(), "[api key removed]");
        }
    }
    measured
}

async fn exchange(
    endpoint: &Endpoint,
    prompt: &Prompt,
    max_tokens: u32,
    progress: Option<&Progress>,
) -> Measured {
    let mut retried_without_usage = false;
    let mut retried_stale = false;
    loop {
        let include_usage =
            endpoint.stream && endpoint.api.asks_for_usage() && endpoint.usage_requested();
        let body = endpoint.api.body(
            &endpoint.model,
            prompt,
            max_tokens,
            endpoint.stream,
            include_usage,
        );
        let (url, body) = (endpoint.url(), body.to_string());
        let start = Instant::now();
        let deadline = start + endpoint.timeout;
        let sending = endpoint
            .transport
            .post(&url, body, endpoint.api_key.as_deref());
        let sent = tokio::time::timeout_at(deadline.into(), sending).await;
        let mut response = match sent {
            Err(_) => {
                return failed(
                    start,
                    fail(FailureKind::Timeout, "no response before the deadline"),
                    prompt.tokens,
                )
            }
            Ok(Err(SendError::Stale)) if !retried_stale => {
                // A kept-alive connection the server had already closed (llama.cpp closes
                // every few requests without saying so): the request never reached it, so it
                // is sent again, once, on a new connection, timed from the new send.
                retried_stale = true;
                continue;
            }
            Ok(Err(SendError::Stale)) => {
                return failed(
                    start,
                    fail(
                        FailureKind::Connect,
                        "request failed: the server closed the connection without a response",
                    ),
                    prompt.tokens,
                );
            }
            Ok(Err(SendError::Failed(message))) => {
                return failed(start, fail(FailureKind::Connect, message), prompt.tokens);
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if let Some(progress) = progress {
            let _ = progress.answered.set(status);
        }
        if !(200..300).contains(&status) {
            let text = read_text(&mut response, deadline).await;
            // Some servers answer `stream_options` with 400: retry once without, remember it.
            if status == 400 && include_usage && !retried_without_usage {
                endpoint.include_usage.store(false, Ordering::Relaxed);
                retried_without_usage = true;
                continue;
            }
            return failed(
                start,
                Failure {
                    kind: FailureKind::Http,
                    status: Some(status),
                    message: format!(
                        "HTTP {}: {}",
                        status,
                        text.chars().take(300).collect::<String>()
                    ),
                },
                prompt.tokens,
            );
        }
        let headers = timings_from_headers(response.headers());
        let mut measured = if endpoint.stream {
            read_stream(
                endpoint, response, start, deadline, prompt, max_tokens, progress,
            )
            .await
        } else {
            read_whole(endpoint, &mut response, start, deadline, prompt).await
        };
        if let Some(headers) = headers {
            with_header_timings(&mut measured.record, headers);
        }
        return measured;
    }
}

/// Adds what the response headers said to a record: their timings where the body gave none,
/// and their token counts where the body reported no usage (a count from headers is the
/// server's own, as good as `usage`).
fn with_header_timings(record: &mut RequestRecord, headers: ServerTimings) {
    record.server = Some(record.server.unwrap_or_default().or(headers));
    if !record.ok {
        return;
    }
    if let (Some(tokens), false) = (
        headers.decode_tokens,
        record.output_tokens_from == CountSource::Usage,
    ) {
        record.output_tokens = tokens;
        record.output_tokens_from = CountSource::Usage;
        record.tpot_s = RequestRecord::tpot_of(record.e2e_s, record.ttft_s, tokens);
    }
    if let (Some(tokens), false) = (
        headers.prompt_tokens,
        record.input_tokens_from == CountSource::Usage,
    ) {
        record.input_tokens = tokens;
        record.input_tokens_from = CountSource::Usage;
    }
}

async fn read_text(response: &mut Response, deadline: Instant) -> String {
    match response.bytes(deadline).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => String::new(),
    }
}

/// The record of a request that ended in `failure`; its prompt was built to `input_tokens`.
fn failed(start: Instant, failure: Failure, input_tokens: u32) -> Measured {
    let e2e = start.elapsed().as_secs_f64();
    Measured {
        start,
        record: RequestRecord {
            step: 0,
            index: 0,
            concurrency: 0,
            phase: Phase::Measured,
            start_s: 0.0,
            ok: false,
            error_kind: Some(failure.kind),
            http_status: failure.status,
            error: Some(failure.message),
            ttft_s: None,
            ttft_visible_s: None,
            tpot_s: None,
            e2e_s: e2e,
            input_tokens,
            input_tokens_from: CountSource::Requested,
            output_tokens: 0,
            output_tokens_from: CountSource::Chunks,
            chunks: 0,
            itl_mean_s: None,
            itl_max_s: None,
            itl_s: Vec::new(),
            streamed: true,
            server: None,
        },
    }
}

/// One generated chunk: when it arrived and how much text it carried.
struct Chunk {
    at: Instant,
    chars: usize,
}

/// What a stream has said so far, fed each read as it arrives.
///
/// Laid out by hand (`repr(C)`, the fields every read touches first, the whole aligned to a
/// cache line): a probe wakes each of hundreds of streams once per token, and by then the
/// others have pushed this one's state out of the CPU cache, so the client's cost per token is
/// mostly how many cache lines of it a read touches, not how many instructions it runs.
#[repr(C, align(64))]
struct StreamReader<'a> {
    endpoint: &'a Endpoint,
    chunks: Vec<Chunk>,
    whole_events: usize,
    first_visible: Option<Instant>,
    /// The stream said it is complete (`[DONE]`, or the API's last event).
    done: bool,
    last_event_completes: bool,
    decoder: SseDecoder,
    // Touched only when an event reports them, or at the end.
    usage: Usage,
    /// Kept only when a local tokenizer may have to count it.
    text: String,
    server_timings: Option<ServerTimings>,
    failure: Option<Failure>,
    progress: Option<&'a Progress>,
}

impl<'a> StreamReader<'a> {
    fn new(
        endpoint: &'a Endpoint,
        max_tokens: u32,
        progress: Option<&'a Progress>,
    ) -> StreamReader<'a> {
        StreamReader {
            endpoint,
            progress,
            decoder: SseDecoder::new(),
            // Room for the tokens asked for (and the role and usage chunks), so a usual stream
            // never regrows its list mid-stream; capped, so a long `max_tokens` that the server
            // may not fill does not reserve memory per request up front.
            chunks: Vec::with_capacity(max_tokens.min(1024) as usize + 2),
            first_visible: None,
            usage: Usage::default(),
            text: String::new(),
            server_timings: None,
            done: false,
            whole_events: 0,
            last_event_completes: endpoint.api.stream_end() == StreamEnd::LastEvent,
            failure: None,
        }
    }

    /// Takes the bytes of one read that returned at `at`; returns whether reading is over (the
    /// stream completed, or failed).
    fn take(&mut self, bytes: &[u8], at: Instant) -> bool {
        let mut rest = bytes;
        while let Some(event) = self.decoder.next_event(&mut rest, at) {
            self.whole_events += 1;
            if event.data.trim() == "[DONE]" {
                // Servers may keep the connection open after [DONE]; we are finished.
                self.done = true;
                return true;
            }
            if event.event == Some("error") {
                self.failure = Some(fail(
                    FailureKind::StreamError,
                    format!("error event: {}", clip(event.data)),
                ));
                return true;
            }
            let meaning = match self.endpoint.api.read_event(event.data) {
                Ok(meaning) => meaning,
                Err(problem) => {
                    self.failure = Some(fail(
                        FailureKind::StreamError,
                        format!("{problem}: {}", clip(event.data)),
                    ));
                    return true;
                }
            };
            let first_byte_at = event.first_byte_at;
            if let Some(error) = meaning.error {
                self.failure = Some(fail(
                    FailureKind::StreamError,
                    format!("error in the stream: {}", clip(&error)),
                ));
                return true;
            }
            if meaning.server_timings.is_some() {
                self.server_timings = meaning.server_timings;
            }
            if let Some(reported) = meaning.usage {
                // Running totals: the last report is the total.
                let usage = &mut self.usage;
                usage.prompt_tokens = reported.prompt_tokens.or(usage.prompt_tokens);
                usage.completion_tokens = reported.completion_tokens.or(usage.completion_tokens);
            }
            if meaning.generated {
                if self.endpoint.tokenizer.is_some() {
                    self.text.push_str(&meaning.text);
                }
                self.chunks.push(Chunk {
                    at: first_byte_at,
                    chars: meaning.text_chars.max(1),
                });
                if let Some(progress) = self.progress {
                    progress.chunk(first_byte_at);
                }
            }
            if meaning.visible && self.first_visible.is_none() {
                self.first_visible = Some(first_byte_at);
            }
            if meaning.last && self.last_event_completes {
                self.done = true;
                return true;
            }
        }
        false
    }
}

async fn read_stream(
    endpoint: &Endpoint,
    mut response: Response,
    start: Instant,
    deadline: Instant,
    prompt: &Prompt,
    max_tokens: u32,
    progress: Option<&Progress>,
) -> Measured {
    let is_event_stream = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let body_end_completes = endpoint.api.stream_end() == StreamEnd::BodyEnd;
    let mut reader = StreamReader::new(endpoint, max_tokens, progress);

    // One timer per request, re-armed only when it is due: resetting a timer for every chunk
    // costs more CPU than the rest of reading it. When it is due, the stream has been silent
    // for the idle timeout only if nothing arrived since it was armed. It is polled (its waker
    // registered) once after each arming and whenever the task wakes without a read to take,
    // not after every read: a read that comes after its time is checked against it instead.
    // Also the stream's end once it completes (a stream completes only on a read).
    let mut last_read = Instant::now();
    let mut due = (last_read + endpoint.idle_timeout).min(deadline);
    let timer = tokio::time::sleep_until(due.into());
    tokio::pin!(timer);
    let mut timer_polled = false;
    let mut just_read = false;
    loop {
        let mut skip_timer = just_read && timer_polled;
        let read = std::future::poll_fn(|cx| match response.poll_chunk(cx) {
            Poll::Ready(read) => Poll::Ready(Some(read)),
            Poll::Pending if std::mem::take(&mut skip_timer) => Poll::Pending,
            Poll::Pending => {
                timer_polled = true;
                timer.as_mut().poll(cx).map(|()| None)
            }
        })
        .await;
        let now = match read {
            // The timer fired.
            None => Instant::now(),
            Some(Err(message)) => {
                reader.failure = Some(fail(FailureKind::Reset, message));
                break;
            }
            Some(Ok(None)) => {
                // A clean end of the body completes a stream only for APIs that end that way,
                // and only after whole events (a cut one is truncated).
                reader.done =
                    body_end_completes && reader.whole_events > 0 && !reader.decoder.has_partial();
                break;
            }
            Some(Ok(Some(at))) => {
                last_read = at;
                just_read = true;
                if reader.take(response.last_chunk(), at) {
                    break;
                }
                if at < due {
                    continue;
                }
                at
            }
        };
        just_read = false;
        if now >= deadline {
            reader.failure = Some(fail(
                FailureKind::Timeout,
                "the request's deadline passed mid-stream",
            ));
            break;
        }
        let idle_until = last_read + endpoint.idle_timeout;
        if now >= idle_until {
            reader.failure = Some(fail(
                FailureKind::Idle,
                format!("no byte for {:.1} s", endpoint.idle_timeout.as_secs_f64()),
            ));
            break;
        }
        due = idle_until.min(deadline);
        timer.as_mut().reset(due.into());
        timer_polled = false;
    }
    let StreamReader {
        decoder,
        chunks,
        first_visible,
        usage,
        text,
        server_timings,
        done,
        mut failure,
        ..
    } = reader;

    if done && failure.is_none() {
        // Untimed: the request ended at its last event. Reading the body's end keeps the
        // connection for the user's next request.
        response.finish(FINISH_LIMIT).await;
    }
    if failure.is_none() && !done {
        failure = Some(if !is_event_stream && chunks.is_empty() {
            fail(
                FailureKind::StreamError,
                "the response is not an event stream",
            )
        } else if chunks.is_empty() && decoder.invalid_lines > 0 {
            fail(
                FailureKind::StreamError,
                "the body holds no server-sent event (no data: line)",
            )
        } else if decoder.has_partial() {
            fail(
                FailureKind::Truncated,
                "the stream ended in the middle of an event",
            )
        } else if chunks.is_empty() {
            fail(FailureKind::Truncated, "the stream ended without any event")
        } else {
            fail(FailureKind::Truncated, "the stream ended without [DONE]")
        });
    }
    if let Some(failure) = failure {
        let mut measured = failed(start, failure, prompt.tokens);
        measured.record.chunks = chunks.len() as u32;
        measured.record.ttft_s = chunks
            .first()
            .map(|c| c.at.duration_since(start).as_secs_f64());
        return measured;
    }

    let (output_tokens, output_from) = endpoint.output_count(
        usage.completion_tokens,
        &text,
        (chunks.len() as u32, CountSource::Chunks),
    );
    let (input_tokens, input_from) = endpoint.input_count(usage.prompt_tokens, prompt);
    let e2e = last_read.duration_since(start).as_secs_f64();
    let ttft = chunks
        .first()
        .map(|c| c.at.duration_since(start).as_secs_f64());
    let itl = inter_token_latencies(&chunks, output_tokens);
    let itl_mean = (!itl.is_empty()).then(|| itl.iter().sum::<f64>() / itl.len() as f64);
    let itl_max = itl.iter().copied().reduce(f64::max);
    Measured {
        start,
        record: RequestRecord {
            step: 0,
            index: 0,
            concurrency: 0,
            phase: Phase::Measured,
            start_s: 0.0,
            ok: true,
            error_kind: None,
            http_status: None,
            error: None,
            ttft_s: ttft,
            ttft_visible_s: first_visible.map(|t| t.duration_since(start).as_secs_f64()),
            tpot_s: RequestRecord::tpot_of(e2e, ttft, output_tokens),
            e2e_s: e2e,
            input_tokens,
            input_tokens_from: input_from,
            output_tokens,
            output_tokens_from: output_from,
            chunks: chunks.len() as u32,
            itl_mean_s: itl_mean,
            itl_max_s: itl_max,
            itl_s: itl,
            streamed: true,
            server: server_timings,
        },
    }
}

/// Gaps between consecutive generated chunks, each divided by the tokens in the later chunk.
/// Tokens per chunk are the request's token count shared by characters (exact when a server
/// sends one token per chunk: then every chunk gets one).
fn inter_token_latencies(chunks: &[Chunk], tokens: u32) -> Vec<f64> {
    if chunks.len() < 2 {
        return Vec::new();
    }
    let one_per_chunk = tokens as usize == chunks.len();
    let total_chars: usize = chunks.iter().map(|c| c.chars).sum();
    chunks
        .windows(2)
        .map(|pair| {
            let gap = pair[1].at.duration_since(pair[0].at).as_secs_f64();
            let share = if one_per_chunk || total_chars == 0 {
                1.0
            } else {
                (f64::from(tokens) * pair[1].chars as f64 / total_chars as f64).max(1.0)
            };
            gap / share
        })
        .collect()
}

async fn read_whole(
    endpoint: &Endpoint,
    response: &mut Response,
    start: Instant,
    deadline: Instant,
    prompt: &Prompt,
) -> Measured {
    let body = match response.bytes(deadline).await {
        Err(_) if Instant::now() >= deadline => {
            return failed(
                start,
                fail(FailureKind::Timeout, "no whole body before the deadline"),
                prompt.tokens,
            )
        }
        Err(message) => return failed(start, fail(FailureKind::Reset, message), prompt.tokens),
        Ok(body) => body,
    };
    let e2e = start.elapsed().as_secs_f64();
    match endpoint.api.read_whole(&body) {
        Err(problem) => failed(
            start,
            fail(FailureKind::StreamError, clip(&problem)),
            prompt.tokens,
        ),
        Ok(whole) => {
            let usage = whole.usage.unwrap_or_default();
            // Without usage or a tokenizer, a whole response is one chunk: a poor estimate,
            // and marked as one.
            let (output_tokens, output_from) = endpoint.output_count(
                usage.completion_tokens,
                &whole.text,
                (u32::from(whole.text_chars > 0), CountSource::Chunks),
            );
            let (input_tokens, input_from) = endpoint.input_count(usage.prompt_tokens, prompt);
            let mut measured = failed(start, fail(FailureKind::Http, ""), prompt.tokens);
            let record = &mut measured.record;
            record.ok = true;
            record.error_kind = None;
            record.error = None;
            record.e2e_s = e2e;
            record.output_tokens = output_tokens;
            record.output_tokens_from = output_from;
            record.input_tokens = input_tokens;
            record.input_tokens_from = input_from;
            record.server = whole.server_timings;
            record.streamed = false;
            measured
        }
    }
}

fn clip(text: &str) -> String {
    let clipped: String = text.chars().take(200).collect();
    if clipped.len() < text.len() {
        format!("{clipped}…")
    } else {
        clipped
    }
}
