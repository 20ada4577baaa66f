//! `capplan serve`: the simulated engine behind an OpenAI-compatible HTTP front, in scaled real
//! time, for probes, tests and demos.
//!
//! Token times come from the engine (continuous batching over the performance model); the HTTP
//! layer only frames them. Streams start with a role-only chunk (not a token), carry one chunk
//! per engine step with however many tokens the step gave that stream, then a usage chunk when
//! `stream_options.include_usage` is set, then `data: [DONE]`. Sockets have TCP_NODELAY: without
//! it Nagle's algorithm and delayed ACKs add ~40 ms to a first token on loopback.

pub mod backend;
pub mod driver;
pub mod fault;
pub mod openai;
pub mod truth;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use self::backend::Backend;
pub use self::backend::Engines;
use self::driver::TokenEvent;
use self::fault::{FaultKind, FaultPlan};
use self::openai::{error_body, sse, token_count, token_text, Api, CompletionBody, Frames, DONE};
use self::truth::{TruthLog, TruthRecord};
use crate::sim::engine::EngineRequest;
use crate::sim::prefix_cache::{block_hashes, PrefixCache};
use crate::workload::TokenLengths;

/// How to run the server.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub host: String,
    pub port: u16,
    /// F: the engine runs F× faster than real time.
    pub time_scale: f64,
    pub seed: u64,
    /// The model name clients must use (and `/v1/models` lists).
    pub model_name: String,
    /// Output length when a request sets no `max_tokens` (the "EOS" the model would reach).
    pub output_tokens: TokenLengths,
    pub faults: FaultPlan,
    /// How long a stalled stream stays silent before the server closes it.
    pub stall_for: Duration,
    pub log: Option<PathBuf>,
}

struct AppState {
    engine: Backend,
    config: ServeConfig,
    requests: AtomicU64,
    truth: Option<TruthLog>,
    lengths: Mutex<StdRng>,
    /// How late the first token of each request finished OK went out against the engine's
    /// schedule, in engine seconds (wall lateness × time scale): sum and count. On a quiet
    /// machine it is a few milliseconds; a busy one that delays the engine's timer or the
    /// response tasks shows here, for the requests a client measured.
    first_token_lateness: Mutex<(f64, u64)>,
    /// Blocks of earlier prompts the engine still holds (prefix caching, on by default in
    /// vLLM, SGLang and TensorRT-LLM 1.x); `None` for a profile without it.
    prefix_cache: Option<Mutex<PrefixCache>>,
    /// Tokens per KV block: the prefix cache's unit.
    prefix_block: usize,
}

/// Binds, reports the base URL through `ready`, and serves until `shutdown` completes.
pub async fn serve<F>(
    engines: impl Into<Engines>,
    config: ServeConfig,
    ready: impl FnOnce(String),
    shutdown: F,
) -> anyhow::Result<()>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    use axum::serve::ListenerExt;

    let listener = tokio::net::TcpListener::bind((config.host.as_str(), config.port))
        .await
        .map_err(|err| {
            anyhow::anyhow!("cannot listen on {}:{}: {err}", config.host, config.port)
        })?;
    let address = listener.local_addr()?;
    let truth = match &config.log {
        Some(path) => Some(TruthLog::create(path).map_err(|err| {
            crate::error::InputError::file(
                path.display().to_string(),
                format!("cannot create: {err}"),
            )
        })?),
        None => None,
    };
    let engines = engines.into();
    let first = engines
        .first_config()
        .ok_or_else(|| anyhow::anyhow!("a disaggregated deployment needs prefill workers"))?;
    // The prefix cache is the prompt-taking engine's (a disaggregated pool's prefill workers
    // are taken to share one).
    let block = first.kv_block_tokens;
    let state = Arc::new(AppState {
        prefix_cache: first
            .prefix_caching
            .then(|| Mutex::new(PrefixCache::new(first.kv_capacity / block))),
        prefix_block: block as usize,
        engine: Backend::start(engines, config.time_scale),
        lengths: Mutex::new(StdRng::seed_from_u64(config.seed)),
        config,
        requests: AtomicU64::new(0),
        truth,
        first_token_lateness: Mutex::new((0.0, 0)),
    });
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
        .route("/metrics", get(metrics))
        .route("/health", get(|| async { "ok" }))
        .fallback(|| async {
            (
                StatusCode::NOT_FOUND,
                axum::Json(error_body("no such route", "not_found", 404)),
            )
        })
        // Bodies are read and bounded by `read_body`, which answers an oversized one.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(state);
    ready(format!("http://{address}"));
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}

/// A server started in the background of the current tokio runtime (for tests, benchmarks and
/// the probe's in-process simulator). Dropping it stops the server.
pub struct RunningServer {
    pub url: String,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// Starts [`serve`] on the current runtime and waits until it listens.
pub async fn start(
    engines: impl Into<Engines>,
    config: ServeConfig,
) -> anyhow::Result<RunningServer> {
    let engines = engines.into();
    let (url_tx, url_rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (failed_tx, failed_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let result = serve(
            engines,
            config,
            move |url| {
                let _ = url_tx.send(url);
            },
            async {
                let _ = stop_rx.await;
            },
        )
        .await;
        if let Err(err) = result {
            let _ = failed_tx.send(err);
        }
    });
    tokio::select! {
        url = url_rx => Ok(RunningServer {
            url: url.map_err(|_| anyhow::anyhow!("the server stopped before listening"))?,
            _stop: stop_tx,
        }),
        failed = failed_rx => Err(failed.unwrap_or_else(|_| anyhow::anyhow!("the server stopped before listening"))),
    }
}

async fn chat(State(state): State<Arc<AppState>>, body: Body) -> Response {
    match read_body(body).await {
        Ok(raw) => handle(state, Api::Chat, raw).await,
        Err(refused) => refused,
    }
}

async fn completions(State(state): State<Arc<AppState>>, body: Body) -> Response {
    match read_body(body).await {
        Ok(raw) => handle(state, Api::Completions, raw).await,
        Err(refused) => refused,
    }
}

/// Largest request body the server takes (prompts of a few hundred thousand tokens).
const MAX_BODY: usize = 4 << 20;
/// Largest body it reads to its end before answering 413: a client still uploading when the
/// answer comes would see its connection cut, not the answer.
const MAX_DRAINED: usize = 64 << 20;

/// The request's body, or the response refusing it: a body over [`MAX_BODY`] is read to its
/// end (without keeping it) and answered 413; one over [`MAX_DRAINED`] has its connection cut.
async fn read_body(body: Body) -> Result<Bytes, Response> {
    use futures_util::StreamExt;
    let mut stream = body.into_data_stream();
    let mut kept: Vec<u8> = Vec::new();
    let mut total = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|err| {
            error_response(
                StatusCode::BAD_REQUEST,
                &format!("could not read the request body: {err}"),
                "invalid_request_error",
            )
        })?;
        total += chunk.len();
        if total > MAX_DRAINED {
            // Answering now would be lost in the upload; the connection closes with the error.
            return Err(StatusCode::PAYLOAD_TOO_LARGE.into_response());
        }
        if total <= MAX_BODY {
            kept.extend_from_slice(&chunk);
        }
    }
    if total > MAX_BODY {
        return Err(error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("the request body is {total} bytes; this server takes at most {MAX_BODY}"),
            "invalid_request_error",
        ));
    }
    Ok(Bytes::from(kept))
}

async fn models(State(state): State<Arc<AppState>>) -> Response {
    axum::Json(json!({
        "object": "list",
        "data": [{"id": state.config.model_name, "object": "model", "created": unix_now(), "owned_by": "capplan"}]
    }))
    .into_response()
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let g = state.engine.gauges();
    let kv_usage = g.kv_used as f64 / g.kv_capacity.max(1) as f64;
    let (late_sum, late_count) = state
        .first_token_lateness
        .lock()
        .map(|t| *t)
        .unwrap_or((0.0, 0));
    let text = format!(
        "# HELP capplan_requests_running Requests in the running batch.\n\
         # TYPE capplan_requests_running gauge\ncapplan_requests_running {}\n\
         # HELP capplan_requests_waiting Requests queued for admission.\n\
         # TYPE capplan_requests_waiting gauge\ncapplan_requests_waiting {}\n\
         # HELP capplan_kv_cache_usage_ratio Share of KV-cache positions in use.\n\
         # TYPE capplan_kv_cache_usage_ratio gauge\ncapplan_kv_cache_usage_ratio {kv_usage}\n\
         # HELP capplan_prompt_tokens_total Prompt tokens prefilled.\n\
         # TYPE capplan_prompt_tokens_total counter\ncapplan_prompt_tokens_total {}\n\
         # HELP capplan_prefix_cache_hit_tokens_total Prompt tokens taken from the prefix cache.\n\
         # TYPE capplan_prefix_cache_hit_tokens_total counter\ncapplan_prefix_cache_hit_tokens_total {}\n\
         # HELP capplan_generation_tokens_total Tokens generated.\n\
         # TYPE capplan_generation_tokens_total counter\ncapplan_generation_tokens_total {}\n\
         # HELP capplan_requests_finished_total Requests finished by the engine.\n\
         # TYPE capplan_requests_finished_total counter\ncapplan_requests_finished_total {}\n\
         # HELP capplan_preemptions_total Sequences preempted for KV space.\n\
         # TYPE capplan_preemptions_total counter\ncapplan_preemptions_total {}\n\
         # HELP capplan_engine_steps_total Engine iterations.\n\
         # TYPE capplan_engine_steps_total counter\ncapplan_engine_steps_total {}\n\
         # HELP capplan_engine_busy_seconds_total Engine seconds spent in iterations (engine time).\n\
         # TYPE capplan_engine_busy_seconds_total counter\ncapplan_engine_busy_seconds_total {}\n\
         # HELP capplan_timer_late_steps_total Steps that ended more than 2 ms after their schedule.\n\
         # TYPE capplan_timer_late_steps_total counter\ncapplan_timer_late_steps_total {}\n\
         # HELP capplan_timer_max_lateness_seconds Worst lateness of a step's end (wall time).\n\
         # TYPE capplan_timer_max_lateness_seconds gauge\ncapplan_timer_max_lateness_seconds {}\n\
         # HELP capplan_first_token_lateness_seconds How late first tokens went out against the engine's schedule (engine seconds).\n\
         # TYPE capplan_first_token_lateness_seconds summary\n\
         capplan_first_token_lateness_seconds_sum {}\ncapplan_first_token_lateness_seconds_count {}\n",
        g.running,
        g.waiting,
        g.counters.prompt_tokens,
        g.counters.cached_prompt_tokens,
        g.counters.generated_tokens,
        g.counters.finished,
        g.counters.preemptions,
        g.counters.steps,
        g.counters.busy_seconds,
        g.late_steps,
        g.max_lateness_s,
        late_sum,
        late_count,
    );
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn error_response(status: StatusCode, message: &str, kind: &str) -> Response {
    (
        status,
        axum::Json(error_body(message, kind, status.as_u16())),
    )
        .into_response()
}

/// Everything a response needs to know about its request.
struct Exchange {
    state: Arc<AppState>,
    api: Api,
    id: u64,
    created: u64,
    prompt: u32,
    output: u32,
    max_tokens: Option<u32>,
    fault: Option<FaultKind>,
    include_usage: bool,
    arrival: Instant,
    arrival_virtual: f64,
    record: TruthRecord,
}

impl Exchange {
    fn frames(&self) -> Frames<'_> {
        Frames {
            api: self.api,
            id: format!("cmpl-{}", self.id),
            created: self.created,
            model: &self.state.config.model_name,
        }
    }

    fn finish_reason(&self) -> &'static str {
        if Some(self.output) == self.max_tokens {
            "length"
        } else {
            "stop"
        }
    }

    fn since_start(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.state.engine.origin())
            .as_secs_f64()
    }

    fn log(&mut self, status: &str) {
        self.record.status = status.to_string();
        if let (true, Some(wall), Some(engine)) = (
            status == "ok",
            self.record.ttft_s,
            self.record.engine_ttft_s,
        ) {
            let late = (wall * self.state.config.time_scale - engine).max(0.0);
            if let Ok(mut totals) = self.state.first_token_lateness.lock() {
                totals.0 += late;
                totals.1 += 1;
            }
        }
        if let Some(truth) = &self.state.truth {
            truth.write(&self.record);
        }
    }
}

async fn handle(state: Arc<AppState>, api: Api, raw: Bytes) -> Response {
    let arrival = Instant::now();
    let arrival_virtual = state.engine.virtual_now();
    let id = state.requests.fetch_add(1, Ordering::Relaxed);
    let mut record = TruthRecord {
        request: id,
        endpoint: api.path().to_string(),
        arrival_s: arrival
            .saturating_duration_since(state.engine.origin())
            .as_secs_f64(),
        ..TruthRecord::default()
    };
    let log = |record: &mut TruthRecord, status: &str| {
        record.status = status.to_string();
        if let Some(truth) = &state.truth {
            truth.write(record);
        }
    };

    let body: CompletionBody = match serde_json::from_slice(&raw) {
        Ok(body) => body,
        Err(err) => {
            log(&mut record, "bad-request");
            return error_response(
                StatusCode::BAD_REQUEST,
                &format!("invalid JSON body: {err}"),
                "invalid_request_error",
            );
        }
    };
    if let Some(model) = &body.model {
        if model != &state.config.model_name {
            log(&mut record, "bad-request");
            return error_response(
                StatusCode::NOT_FOUND,
                &format!(
                    "The model `{model}` does not exist; this server serves `{}`.",
                    state.config.model_name
                ),
                "not_found_error",
            );
        }
    }
    let units = match body.prompt_units(api) {
        Ok(units) => units,
        Err(message) => {
            log(&mut record, "bad-request");
            return error_response(StatusCode::BAD_REQUEST, &message, "invalid_request_error");
        }
    };
    let prompt = token_count(&units);
    let natural = match state.lengths.lock() {
        Ok(mut rng) => state.config.output_tokens.sample(&mut *rng),
        Err(_) => state.config.output_tokens.mean().round() as u32,
    };
    let output = body.output_tokens(natural);
    record.stream = body.streaming();
    record.input_tokens = prompt;
    record.prompt_head = body.prompt_head();
    let fault = state.config.faults.for_request(id);
    record.fault = fault.map(|f| f.name().to_string());

    match fault {
        Some(FaultKind::Http500) => {
            log(&mut record, "fault");
            return error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "simulated engine failure",
                "internal_server_error",
            );
        }
        Some(FaultKind::Http429) => {
            log(&mut record, "fault");
            let mut response = error_response(
                StatusCode::TOO_MANY_REQUESTS,
                "simulated rate limit",
                "rate_limit_error",
            );
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            return response;
        }
        _ => {}
    }

    let capacity = state.engine.gauges().kv_capacity;
    if u64::from(prompt) + u64::from(output) > capacity {
        log(&mut record, "refused");
        return error_response(
            StatusCode::BAD_REQUEST,
            &format!(
                "{prompt} prompt + {output} output tokens exceed this instance's KV cache of {capacity} tokens"
            ),
            "invalid_request_error",
        );
    }
    let hashes = block_hashes(&units, state.prefix_block);
    let cached = match state.prefix_cache.as_ref().map(Mutex::lock) {
        Some(Ok(mut cache)) => cache.reuse(&hashes) * state.prefix_block,
        _ => 0,
    };
    let Some(events) = state.engine.submit(EngineRequest {
        id,
        input_tokens: prompt,
        output_tokens: output,
        cached_tokens: u32::try_from(cached).unwrap_or(u32::MAX),
    }) else {
        log(&mut record, "refused");
        return error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "engine stopped",
            "server_error",
        );
    };

    let exchange = Exchange {
        state: state.clone(),
        api,
        id,
        created: unix_now(),
        prompt,
        output,
        max_tokens: body.max_tokens(),
        fault,
        include_usage: body.include_usage(),
        arrival,
        arrival_virtual,
        record,
    };
    if body.streaming() {
        let (body_tx, body_rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
        tokio::spawn(stream(exchange, events, body_tx));
        Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(Body::from_stream(ReceiverStream::new(body_rx)))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
    } else {
        whole(exchange, events).await
    }
}

/// Timing of the tokens a response has sent so far.
#[derive(Default)]
struct Progress {
    sent: u32,
    chunks: u32,
    first: Option<(Instant, f64)>,
    last: Option<(Instant, f64)>,
}

impl Progress {
    fn tokens(&mut self, count: u32, virtual_s: f64) {
        let now = Instant::now();
        if self.first.is_none() {
            self.first = Some((now, virtual_s));
        }
        self.last = Some((now, virtual_s));
        self.sent += count;
        self.chunks += 1;
    }

    fn record_into(&self, exchange: &mut Exchange) {
        exchange.record.sent_tokens = self.sent;
        exchange.record.chunks = self.chunks;
        exchange.record.output_tokens = exchange.output;
        if let (Some((first, first_v)), Some((last, last_v))) = (self.first, self.last) {
            exchange.record.first_token_s = Some(exchange.since_start(first));
            exchange.record.finish_s = Some(exchange.since_start(last));
            exchange.record.ttft_s = Some(first.duration_since(exchange.arrival).as_secs_f64());
            exchange.record.e2e_s = Some(last.duration_since(exchange.arrival).as_secs_f64());
            exchange.record.engine_ttft_s = Some((first_v - exchange.arrival_virtual).max(0.0));
            if self.sent > 1 {
                let n = f64::from(self.sent - 1);
                exchange.record.tpot_s = Some(last.duration_since(first).as_secs_f64() / n);
                exchange.record.engine_tpot_s = Some((last_v - first_v) / n);
            }
        }
    }
}

/// Streams one response as SSE, injecting its fault if it has one.
async fn stream(
    mut exchange: Exchange,
    mut events: mpsc::UnboundedReceiver<TokenEvent>,
    body: mpsc::Sender<Result<Bytes, std::io::Error>>,
) {
    let send = |text: String| {
        let body = body.clone();
        async move { body.send(Ok(Bytes::from(text))).await.is_ok() }
    };
    let fault = exchange.fault;
    let fault_at = (exchange.output / 2).max(1);
    let mut progress = Progress::default();
    let mut malformed_sent = false;
    let status;

    if exchange.api == Api::Chat && !send(sse(&exchange.frames().role())).await {
        exchange.state.engine.cancel(exchange.id);
        exchange.log("cancelled");
        return;
    }
    'events: loop {
        let Some(event) = events.recv().await else {
            status = "cancelled";
            break;
        };
        let (mut count, mut virtual_s, mut finished) = match event {
            TokenEvent::Tokens { count, virtual_s } => (count, virtual_s, false),
            TokenEvent::Finished { .. } => {
                let reason = exchange.finish_reason();
                let _ = send(sse(&exchange.frames().finish(reason))).await;
                status = "ok";
                break;
            }
            TokenEvent::Refused(message) => {
                let _ = send(sse(&error_body(&message, "invalid_request_error", 400))).await;
                status = "refused";
                break;
            }
        };
        // Tokens that are already here go out in one chunk, as servers do under load.
        while let Ok(next) = events.try_recv() {
            match next {
                TokenEvent::Tokens {
                    count: more,
                    virtual_s: at,
                } => {
                    count += more;
                    virtual_s = at;
                }
                TokenEvent::Finished { .. } => {
                    finished = true;
                    break;
                }
                TokenEvent::Refused(_) => {}
            }
        }

        let reaches_fault = progress.sent + count >= fault_at;
        match fault {
            Some(FaultKind::Reset) if reaches_fault => {
                let _ = body
                    .send(Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "simulated connection reset",
                    )))
                    .await;
                exchange.state.engine.cancel(exchange.id);
                status = "fault";
                break 'events;
            }
            Some(FaultKind::ErrorInStream) if reaches_fault => {
                let error = json!({"error": {"message": "simulated engine failure mid-stream", "type": "internal_server_error", "code": 500}});
                let _ = send(sse(&error)).await;
                exchange.state.engine.cancel(exchange.id);
                status = "fault";
                break 'events;
            }
            Some(FaultKind::Malformed) if reaches_fault && !malformed_sent => {
                malformed_sent = true;
                let _ = send(
                    "data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"brok\n\n"
                        .into(),
                )
                .await;
            }
            _ => {}
        }

        let text = token_text(exchange.id, progress.sent, count);
        let reason = finished.then(|| exchange.finish_reason());
        if !send(sse(&exchange.frames().content(&text, reason))).await {
            exchange.state.engine.cancel(exchange.id);
            status = "cancelled";
            break;
        }
        progress.tokens(count, virtual_s);

        if fault == Some(FaultKind::Stall) {
            exchange.state.engine.cancel(exchange.id);
            let stall_for = exchange.state.config.stall_for;
            tokio::select! {
                _ = body.closed() => {}
                _ = tokio::time::sleep(stall_for) => {}
            }
            status = "fault";
            break;
        }
        if finished {
            status = "ok";
            break;
        }
    }

    if status == "ok" {
        if exchange.include_usage {
            let usage = exchange.frames().usage(exchange.prompt, progress.sent);
            let _ = send(sse(&usage)).await;
        }
        if fault != Some(FaultKind::NoDone) {
            let _ = send(DONE.to_string()).await;
        }
    }
    progress.record_into(&mut exchange);
    let status = if fault.is_some() && status == "ok" {
        "fault"
    } else {
        status
    };
    exchange.log(status);
}

/// A non-streaming response: the whole completion at once.
async fn whole(
    mut exchange: Exchange,
    mut events: mpsc::UnboundedReceiver<TokenEvent>,
) -> Response {
    let mut progress = Progress::default();
    loop {
        match events.recv().await {
            Some(TokenEvent::Tokens { count, virtual_s }) => progress.tokens(count, virtual_s),
            Some(TokenEvent::Finished { .. }) => break,
            Some(TokenEvent::Refused(message)) => {
                exchange.log("refused");
                return error_response(StatusCode::BAD_REQUEST, &message, "invalid_request_error");
            }
            None => {
                exchange.log("cancelled");
                return error_response(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "engine stopped",
                    "server_error",
                );
            }
        }
    }
    progress.record_into(&mut exchange);
    let text = token_text(exchange.id, 0, progress.sent);
    let value: Value = exchange.frames().complete(
        &text,
        exchange.finish_reason(),
        exchange.prompt,
        progress.sent,
    );
    let response = match exchange.fault {
        Some(FaultKind::Reset) => Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from_stream(futures_util::stream::once(async {
                Err::<Bytes, _>(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "simulated connection reset",
                ))
            })))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response()),
        Some(FaultKind::Stall) => {
            tokio::time::sleep(exchange.state.config.stall_for).await;
            error_response(StatusCode::GATEWAY_TIMEOUT, "simulated stall", "timeout")
        }
        Some(FaultKind::Malformed) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            "{\"choices\": [{\"message\": {\"content\": \"brok",
        )
            .into_response(),
        Some(FaultKind::ErrorInStream) => (
            StatusCode::OK,
            axum::Json(error_body(
                "simulated engine failure",
                "internal_server_error",
                500,
            )),
        )
            .into_response(),
        _ => axum::Json(value).into_response(),
    };
    exchange.log(if exchange.fault.is_some() {
        "fault"
    } else {
        "ok"
    });
    response
}
