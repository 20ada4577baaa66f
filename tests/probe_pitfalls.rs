//! The probe's client against a server that sends exactly the bytes each pitfall of
//! MEASURING.md describes. Each test names the pitfall; times are generous bounds around pauses
//! the stub itself makes (tens to hundreds of ms), not lucky runs.

mod common;

use std::sync::Arc;
use std::time::Duration;

use capplan::probe::client::{send, Endpoint};
use capplan::probe::record::{CountSource, FailureKind, RequestRecord};
use capplan::workload::tokens::LocalTokenizer;
use common::hello_prompt as prompt;
use common::stub::{
    chunk, content, done, end, event, head, sse_head, start, usage, wait_ms, whole, Act, Received,
    Script,
};

fn endpoint(base: &str, key: Option<&str>, idle_ms: u64, timeout_ms: u64) -> Endpoint {
    let (timeout, idle) = (
        Duration::from_millis(timeout_ms),
        Duration::from_millis(idle_ms),
    );
    common::chat_endpoint(base, true, key, timeout, idle)
}

async fn one(script: Script) -> RequestRecord {
    let base = start(script).await;
    send(&endpoint(&base, None, 2_000, 10_000), &prompt(), 8)
        .await
        .record
}

fn script(acts: Vec<Act>) -> Script {
    Arc::new(move |_: &Received| acts.clone())
}

const ROLE: &str = r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#;

fn between(value: Option<f64>, low_ms: f64, high_ms: f64) -> bool {
    value.is_some_and(|v| v * 1e3 >= low_ms && v * 1e3 <= high_ms)
}

/// Pitfall 1: a role-only (or empty-content) first chunk is not a token.
#[tokio::test]
async fn ttft_starts_at_the_first_content_not_the_role_chunk() {
    let record = one(script(vec![
        sse_head(),
        event(ROLE),
        event(r#"{"choices":[{"index":0,"delta":{"content":null}}]}"#),
        wait_ms(200),
        content("Hi"),
        content(" there"),
        usage(3, 2),
        done(),
        end(),
    ]))
    .await;
    assert!(record.ok, "{record:?}");
    assert!(between(record.ttft_s, 195.0, 1_000.0), "{record:?}");
    assert_eq!(record.chunks, 2, "role and null chunks are not chunks");
    assert_eq!(record.output_tokens, 2);
    assert_eq!(record.output_tokens_from, CountSource::Usage);
}

/// Pitfall 2: reasoning is generated output (TTFT) but not visible content.
#[tokio::test]
async fn reasoning_starts_ttft_and_visible_content_is_timed_apart() {
    for field in ["reasoning_content", "reasoning"] {
        let record = one(script(vec![
            sse_head(),
            event(ROLE),
            wait_ms(50),
            event(&format!(
                r#"{{"choices":[{{"index":0,"delta":{{"{field}":"hmm"}}}}]}}"#
            )),
            wait_ms(200),
            content("Answer"),
            usage(3, 2),
            done(),
            end(),
        ]))
        .await;
        assert!(record.ok, "{field}: {record:?}");
        let (ttft, visible) = (record.ttft_s.unwrap(), record.ttft_visible_s.unwrap());
        assert!(ttft >= 0.045 && ttft < visible, "{field}: {record:?}");
        assert!(visible - ttft >= 0.19, "{field}: {record:?}");
    }
}

/// Pitfall 3: one chunk can carry several tokens; a chunk gap is not a token gap.
#[tokio::test]
async fn several_tokens_per_chunk_divide_the_gap() {
    let record = one(script(vec![
        sse_head(),
        content("aa bb"),
        wait_ms(100),
        content("cc dd"),
        wait_ms(100),
        content("ee ff"),
        usage(3, 6),
        done(),
        end(),
    ]))
    .await;
    assert!(record.ok, "{record:?}");
    assert_eq!((record.output_tokens, record.chunks), (6, 3));
    // Each later chunk holds a third of the 6 tokens: 2 tokens per 100 ms gap.
    assert_eq!(record.itl_s.len(), 2);
    for itl in &record.itl_s {
        assert!((0.045..0.2).contains(itl), "{:?}", record.itl_s);
    }
    // TPOT over tokens, not chunks: ~200 ms over 5 gaps.
    assert!(between(record.tpot_s, 38.0, 120.0), "{record:?}");
}

/// Pitfall 4: usage as running totals, in the last text chunk, or in its own chunk.
#[tokio::test]
async fn usage_in_every_form_gives_the_final_total() {
    let running = |n: u32| {
        event(&format!(
            r#"{{"choices":[{{"index":0,"delta":{{"content":"t{n}"}}}}],"usage":{{"prompt_tokens":3,"completion_tokens":{n}}}}}"#
        ))
    };
    let record = one(script(vec![
        sse_head(),
        running(1),
        running(2),
        running(3),
        done(),
        end(),
    ]))
    .await;
    assert_eq!(
        (record.output_tokens, record.output_tokens_from),
        (3, CountSource::Usage)
    );
    let record = one(script(vec![
        sse_head(),
        content("a"),
        event(
            r#"{"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
        ),
        done(),
        end(),
    ]))
    .await;
    assert_eq!(
        (record.output_tokens, record.input_tokens),
        (2, 3),
        "usage inside the last text chunk"
    );
}

/// Pitfall 4 and 8: no usage at all: chunks are counted and the count is marked estimated.
#[tokio::test]
async fn without_usage_chunks_are_counted_and_marked() {
    let record = one(script(vec![
        sse_head(),
        content("a"),
        content("b"),
        content("c"),
        done(),
        end(),
    ]))
    .await;
    assert!(record.ok);
    assert_eq!(
        (record.output_tokens, record.output_tokens_from),
        (3, CountSource::Chunks)
    );
    assert_eq!(record.input_tokens_from, CountSource::Requested);
}

/// Pitfall 4: a server that answers `stream_options` with HTTP 400 gets one retry without it,
/// and is not asked again.
#[tokio::test]
async fn stream_options_refused_with_400_is_retried_once_without() {
    let script: Script = Arc::new(|request: &Received| {
        if request.body.contains("stream_options") {
            vec![whole(
                400,
                "application/json",
                r#"{"error":{"message":"unknown field stream_options"}}"#,
            )]
        } else {
            vec![sse_head(), content("a"), content("b"), done(), end()]
        }
    });
    let base = start(script).await;
    let endpoint = endpoint(&base, None, 2_000, 10_000);
    let first = send(&endpoint, &prompt(), 8).await.record;
    assert!(first.ok, "{first:?}");
    assert!(!endpoint.usage_requested());
    let second = send(&endpoint, &prompt(), 8).await.record;
    assert!(second.ok);
    assert_eq!(second.output_tokens_from, CountSource::Chunks);
}

/// Pitfall 5: SSE framing — `\r\n\r\n`, `data:` without a space, comments, events split across
/// HTTP chunks and several events in one.
#[tokio::test]
async fn framing_variants_are_read_alike() {
    let record = one(script(vec![
        sse_head(),
        chunk(": keep-alive\r\n\r\n"),
        chunk("data:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\r\n\r\ndata: {\"choi"),
        wait_ms(30),
        chunk("ces\":[{\"index\":0,\"delta\":{\"content\":\"é\"}}]}\r\n\r\n"),
        chunk("id: 9\nevent: message\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n: ping\n\ndata: [DONE]\n\n"),
        end(),
    ]))
    .await;
    assert!(record.ok, "{record:?}");
    assert_eq!((record.chunks, record.output_tokens), (2, 2));
}

/// Pitfall 6: errors inside a 200 stream: an `{"error": …}` object, `event: error`, a body
/// that is not events, a content type that is not an event stream.
#[tokio::test]
async fn errors_inside_a_200_response_are_failures() {
    let cases: Vec<(&str, Vec<Act>)> = vec![
        (
            "error object",
            vec![
                sse_head(),
                content("a"),
                event(r#"{"error":{"message":"out of memory","code":500}}"#),
                done(),
                end(),
            ],
        ),
        (
            "event: error",
            vec![
                sse_head(),
                content("a"),
                chunk("event: error\ndata: {\"message\":\"overloaded\"}\n\n"),
                done(),
                end(),
            ],
        ),
        (
            "no data lines",
            vec![sse_head(), chunk("Internal Server Error\n\n"), end()],
        ),
        (
            "JSON body",
            vec![whole(
                200,
                "application/json",
                r#"{"choices":[{"message":{"content":"whole"}}]}"#,
            )],
        ),
    ];
    for (name, acts) in cases {
        let record = one(script(acts)).await;
        assert!(!record.ok, "{name}: {record:?}");
        assert_eq!(
            record.error_kind,
            Some(FailureKind::StreamError),
            "{name}: {record:?}"
        );
    }
}

/// Pitfall 7: a stream that ends without `[DONE]`, one cut mid-event, one reset mid-way.
#[tokio::test]
async fn streams_that_end_badly_are_failures_with_their_kind() {
    let no_done = one(script(vec![sse_head(), content("a"), content("b"), end()])).await;
    assert_eq!(
        no_done.error_kind,
        Some(FailureKind::Truncated),
        "{no_done:?}"
    );
    let cut = one(script(vec![
        sse_head(),
        content("a"),
        chunk("data: {\"choices\":[{\"ind"),
        end(),
    ]))
    .await;
    assert_eq!(cut.error_kind, Some(FailureKind::Truncated), "{cut:?}");
    let reset = one(script(vec![
        sse_head(),
        content("a"),
        wait_ms(20),
        Act::Reset,
    ]))
    .await;
    assert_eq!(reset.error_kind, Some(FailureKind::Reset), "{reset:?}");
    assert_eq!(reset.chunks, 1, "what arrived before the reset is kept");
}

/// Pitfall 7: a silent stream fails on the idle timeout, long before the request deadline.
#[tokio::test]
async fn a_silent_stream_fails_on_the_idle_timeout() {
    let base = start(script(vec![sse_head(), content("a"), Act::Hang])).await;
    let record = send(&endpoint(&base, None, 300, 60_000), &prompt(), 8)
        .await
        .record;
    assert_eq!(record.error_kind, Some(FailureKind::Idle), "{record:?}");
    assert!((0.29..5.0).contains(&record.e2e_s), "{record:?}");
}

/// Pitfall 7: the per-request deadline holds even when bytes keep coming.
#[tokio::test]
async fn the_deadline_holds_while_tokens_trickle() {
    let mut acts = vec![sse_head()];
    for _ in 0..40 {
        acts.push(content("a"));
        acts.push(wait_ms(50));
    }
    acts.extend([done(), end()]);
    let base = start(script(acts)).await;
    let record = send(&endpoint(&base, None, 2_000, 400), &prompt(), 8)
        .await
        .record;
    assert_eq!(record.error_kind, Some(FailureKind::Timeout), "{record:?}");
    assert!((0.39..5.0).contains(&record.e2e_s), "{record:?}");
}

/// Pitfall 7: a server that keeps the connection open after `[DONE]`: the request ends at
/// `[DONE]`.
#[tokio::test]
async fn a_stream_open_after_done_ends_at_done() {
    let record = one(script(vec![
        sse_head(),
        content("a"),
        wait_ms(100),
        content("b"),
        done(),
        Act::Hang,
    ]))
    .await;
    assert!(record.ok, "{record:?}");
    assert!((0.095..2.0).contains(&record.e2e_s), "{record:?}");
}

/// HTTP errors keep their status; a closed port is a connect failure.
#[tokio::test]
async fn http_status_and_connect_failures() {
    let record = one(script(vec![whole(
        429,
        "application/json",
        r#"{"error":"slow down"}"#,
    )]))
    .await;
    assert_eq!(
        (record.error_kind, record.http_status),
        (Some(FailureKind::Http), Some(429))
    );
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let record = send(&endpoint(&closed, None, 1_000, 2_000), &prompt(), 8)
        .await
        .record;
    assert_eq!(record.error_kind, Some(FailureKind::Connect), "{record:?}");
}

/// The API key goes to the server, never into a record — even when the server echoes it.
#[tokio::test]
async fn a_key_echoed_by_the_server_never_reaches_the_record() {
    const KEY: &str = "sk-test-5ecret-key-0123456789";
    let script: Script = Arc::new(|request: &Received| {
        let echoed = request.head.replace(['\r', '\n'], " ");
        vec![whole(401, "text/plain", &format!("unauthorized: {echoed}"))]
    });
    let base = start(script).await;
    let record = send(&endpoint(&base, Some(KEY), 1_000, 2_000), &prompt(), 8)
        .await
        .record;
    assert_eq!(record.http_status, Some(401));
    let written = serde_json::to_string(&record).unwrap();
    assert!(written.contains("unauthorized"), "{written}");
    assert!(
        written.contains("[api key removed]"),
        "the echo was there: {written}"
    );
    assert!(!written.contains(KEY), "{written}");
    assert!(!written.contains("5ecret"), "{written}");
}

/// The request's own HTTP chunks need not line up with events: a head alone first, then data.
#[tokio::test]
async fn a_head_sent_early_does_not_start_ttft() {
    let record = one(script(vec![
        head(200, "text/event-stream; charset=utf-8"),
        wait_ms(150),
        content("a"),
        content("b"),
        usage(3, 2),
        done(),
        end(),
    ]))
    .await;
    assert!(record.ok, "{record:?}");
    assert!(between(record.ttft_s, 145.0, 1_000.0), "{record:?}");
}

/// Pitfall 8: without usage, a local tokenizer.json counts (and says so); never silently.
#[tokio::test]
async fn a_local_tokenizer_counts_when_usage_is_missing() {
    let base = start(script(vec![
        sse_head(),
        content("hello, "),
        content("world!"),
        done(),
        end(),
    ]))
    .await;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/word-level-tokenizer.json");
    let tokenizer = Arc::new(LocalTokenizer::load(&path).expect("tokenizer"));
    let endpoint = endpoint(&base, None, 2_000, 10_000).with_tokenizer(Some(tokenizer));
    let record = send(&endpoint, &prompt(), 8).await.record;
    assert!(record.ok, "{record:?}");
    // "hello" "," "world" "!" in two chunks.
    assert_eq!(
        (
            record.output_tokens,
            record.output_tokens_from,
            record.chunks
        ),
        (4, CountSource::Tokenizer, 2)
    );
    assert_eq!(record.input_tokens_from, CountSource::Tokenizer);
}

/// A kept-alive connection the server closes on the next request without answering (what
/// llama.cpp's HTTP server does every few requests): sent again once, on a new connection.
#[tokio::test]
async fn a_stale_kept_alive_connection_is_retried_once() {
    let script: Script = Arc::new(|request: &Received| {
        if request.n == 1 {
            vec![Act::Close]
        } else {
            vec![sse_head(), content("a"), usage(3, 1), done(), end()]
        }
    });
    let base = start(script).await;
    let endpoint = endpoint(&base, None, 2_000, 10_000);
    let first = send(&endpoint, &prompt(), 8).await.record;
    assert!(first.ok, "{first:?}");
    let second = send(&endpoint, &prompt(), 8).await.record;
    assert!(second.ok, "retried on a new connection: {second:?}");
    // A server that closes every connection without answering still fails, once retried.
    let base = start(script_closing_always()).await;
    let record = send(&endpoint_for(&base), &prompt(), 8).await.record;
    assert_eq!(record.error_kind, Some(FailureKind::Connect), "{record:?}");
}

fn script_closing_always() -> Script {
    Arc::new(|_: &Received| vec![Act::Close])
}

fn endpoint_for(base: &str) -> Endpoint {
    endpoint(base, None, 2_000, 10_000)
}
