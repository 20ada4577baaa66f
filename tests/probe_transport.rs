//! The probe's own HTTP/1.1 client (plain `http://`) against a server that writes exactly the
//! bytes each case needs: connections kept for the next request only when a response was read
//! to its end, every body framing, interim responses, a response split at every byte, and the
//! request it sends; and the reqwest transport (HTTPS, proxies) reading the same responses alike.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use capplan::probe::client::{send, Endpoint};
use capplan::probe::record::{CountSource, FailureKind, RequestRecord};
use common::hello_prompt as prompt;
use common::stub::{
    chunk, content, done, end, sse_head, start, usage, whole, Act, Received, Script,
};

fn endpoint(base: &str, stream: bool, key: Option<&str>) -> Endpoint {
    common::chat_endpoint(
        base,
        stream,
        key,
        Duration::from_secs(10),
        Duration::from_secs(2),
    )
}

fn stream_acts() -> Vec<Act> {
    vec![
        sse_head(),
        content("a"),
        content("b"),
        usage(3, 2),
        done(),
        end(),
    ]
}

/// The same bytes as `acts`, each in its own write.
fn byte_by_byte(acts: Vec<Act>) -> Vec<Act> {
    let mut wire = Vec::new();
    for act in acts {
        if let Act::Bytes(bytes) = act {
            wire.extend(bytes);
        }
    }
    wire.into_iter().map(|b| Act::Bytes(vec![b])).collect()
}

/// A stream whose second HTTP chunk has a size that is not hex.
fn malformed_framing() -> Vec<Act> {
    vec![
        sse_head(),
        content("a"),
        Act::Bytes(b"zz\r\ndata: x\n\n\r\n".to_vec()),
        done(),
        end(),
    ]
}

/// A script answering `acts` and noting the connection each request came on.
fn noting(acts: Vec<Act>, connections: Arc<Mutex<Vec<u64>>>) -> Script {
    Arc::new(move |request: &Received| {
        connections.lock().unwrap().push(request.connection);
        acts.clone()
    })
}

async fn requests(base: &str, n: usize, stream: bool) -> Vec<RequestRecord> {
    let endpoint = endpoint(base, stream, None);
    let mut records = Vec::new();
    for _ in 0..n {
        records.push(send(&endpoint, &prompt(), 8).await.record);
    }
    records
}

#[tokio::test]
async fn a_response_read_to_its_end_leaves_the_connection_for_the_next_request() {
    let connections = Arc::new(Mutex::new(Vec::new()));
    let base = start(noting(stream_acts(), connections.clone())).await;
    let records = requests(&base, 5, true).await;
    assert!(records.iter().all(|r| r.ok), "{records:?}");
    assert_eq!(*connections.lock().unwrap(), vec![0; 5], "one connection");
}

/// A server that keeps the body open after `[DONE]`: the request is complete at `[DONE]`, and
/// the connection, whose body never ended, is not used again.
#[tokio::test]
async fn a_body_left_open_after_done_is_not_reused() {
    let connections = Arc::new(Mutex::new(Vec::new()));
    let acts = vec![sse_head(), content("a"), usage(3, 1), done(), Act::Hang];
    let base = start(noting(acts, connections.clone())).await;
    let records = requests(&base, 3, true).await;
    assert!(records.iter().all(|r| r.ok), "{records:?}");
    assert_eq!(*connections.lock().unwrap(), vec![0, 1, 2]);
}

/// Non-streaming answers framed by `Content-Length` and by the server closing the connection
/// (an HTTP/1.0-style body): both read whole; only the first connection is kept.
#[tokio::test]
async fn whole_bodies_by_length_and_by_close() {
    let body = r#"{"choices":[{"message":{"content":"four words right here"}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#;
    let connections = Arc::new(Mutex::new(Vec::new()));
    let base = start(noting(
        vec![whole(200, "application/json", body)],
        connections.clone(),
    ))
    .await;
    let records = requests(&base, 2, false).await;
    assert!(records.iter().all(|r| r.ok), "{records:?}");
    assert_eq!(
        (records[0].output_tokens, records[0].output_tokens_from),
        (4, CountSource::Usage)
    );
    assert_eq!(*connections.lock().unwrap(), vec![0, 0]);

    let connections = Arc::new(Mutex::new(Vec::new()));
    let by_close = vec![
        Act::Bytes(
            format!("HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{body}").into_bytes(),
        ),
        Act::Close,
    ];
    let base = start(noting(by_close, connections.clone())).await;
    let records = requests(&base, 2, false).await;
    assert!(records.iter().all(|r| r.ok), "{records:?}");
    assert_eq!(records[1].output_tokens, 4);
    assert_eq!(
        *connections.lock().unwrap(),
        vec![0, 1],
        "closed, so not kept"
    );
}

/// `100 Continue` before the response, chunk extensions and trailers: read past, and the
/// connection is kept (the body did end).
#[tokio::test]
async fn interim_responses_extensions_and_trailers() {
    let connections = Arc::new(Mutex::new(Vec::new()));
    let data = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n";
    let acts = vec![
        Act::Bytes(b"HTTP/1.1 100 Continue\r\n\r\n".to_vec()),
        sse_head(),
        Act::Bytes(format!("{:X};name=value\r\n{data}\r\n", data.len()).into_bytes()),
        usage(3, 1),
        done(),
        Act::Bytes(b"0\r\nx-checksum: 1\r\n\r\n".to_vec()),
    ];
    let base = start(noting(acts, connections.clone())).await;
    let records = requests(&base, 2, true).await;
    assert!(records.iter().all(|r| r.ok), "{records:?}");
    assert_eq!((records[0].chunks, records[0].output_tokens), (1, 1));
    assert_eq!(*connections.lock().unwrap(), vec![0, 0]);
}

/// Every byte of the response in its own write: the head, chunk sizes, CRLFs and events are
/// all split across reads, and the stream reads exactly as when it came in one piece.
#[tokio::test]
async fn a_response_written_byte_by_byte() {
    let acts = byte_by_byte(stream_acts());
    let base = start(Arc::new(move |_: &Received| acts.clone())).await;
    let record = requests(&base, 1, true).await.remove(0);
    assert!(record.ok, "{record:?}");
    assert_eq!(
        (record.chunks, record.output_tokens, record.input_tokens),
        (2, 2, 3)
    );
}

/// Broken framing mid-stream is a broken connection, not a short success.
#[tokio::test]
async fn malformed_chunk_framing_is_a_reset() {
    let acts = malformed_framing();
    let base = start(Arc::new(move |_: &Received| acts.clone())).await;
    let record = requests(&base, 1, true).await.remove(0);
    assert_eq!(record.error_kind, Some(FailureKind::Reset), "{record:?}");
    assert!(
        record.error.as_deref().unwrap_or("").contains("chunk"),
        "{record:?}"
    );
    assert_eq!(record.chunks, 1, "what arrived before is kept");
}

/// The request on the wire: path, Host, JSON content type, the bearer key, a body whose
/// length is what `Content-Length` says (the stub reads exactly that many bytes).
#[tokio::test]
async fn the_request_it_sends() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let noted = seen.clone();
    let base = start(Arc::new(move |request: &Received| {
        noted
            .lock()
            .unwrap()
            .push((request.head.clone(), request.body.clone()));
        stream_acts()
    }))
    .await;
    let endpoint = endpoint(&format!("{base}/v1"), true, Some("sk-local-test"));
    let record = send(&endpoint, &prompt(), 8).await.record;
    assert!(record.ok, "{record:?}");
    let (head, body) = seen.lock().unwrap().remove(0);
    let lower = head.to_ascii_lowercase();
    assert!(
        head.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
        "{head}"
    );
    let authority = base.trim_start_matches("http://");
    assert!(
        lower.contains(&format!("\r\nhost: {authority}\r\n")),
        "{head}"
    );
    assert!(
        lower.contains("\r\ncontent-type: application/json\r\n"),
        "{head}"
    );
    assert!(
        head.contains("\r\nAuthorization: Bearer sk-local-test\r\n"),
        "{head}"
    );
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON body");
    assert_eq!(json["max_tokens"], 8);
    assert_eq!(json["stream"], true);
}

/// A body that arrives as one HTTP chunk holding several events, then an event split over
/// two chunks: each event is timed by the read that brought its first byte.
#[tokio::test]
async fn events_and_http_chunks_need_not_line_up() {
    let two = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\n\n";
    let acts = vec![
        sse_head(),
        chunk(two),
        chunk("data: {\"choices\":[{\"index\":0,\"del"),
        Act::Wait(Duration::from_millis(120)),
        chunk("ta\":{\"content\":\"c\"}}]}\n\n"),
        usage(3, 3),
        done(),
        end(),
    ];
    let base = start(Arc::new(move |_: &Received| acts.clone())).await;
    let record = requests(&base, 1, true).await.remove(0);
    assert!(record.ok, "{record:?}");
    assert_eq!(record.chunks, 3);
    // "c" began arriving before the pause: its gap to "b" is far below the pause.
    let last_gap = record.itl_s.last().copied().unwrap_or(f64::NAN);
    assert!(last_gap < 0.1, "{record:?}");
}

/// HTTPS and proxied endpoints are read through reqwest instead of the probe's own client; the
/// timing code above both is the same. The same responses — whole, written byte by byte, events
/// split across HTTP chunks, broken framing, a stream gone silent — give the same records
/// through either.
#[tokio::test]
async fn the_library_transport_reads_every_response_as_the_direct_one_does() {
    let split = vec![
        sse_head(),
        content("a"),
        chunk("data: {\"choices\":[{\"index\":0,\"del"),
        Act::Wait(Duration::from_millis(120)),
        chunk("ta\":{\"content\":\"b\"}}]}\n\n"),
        usage(3, 2),
        done(),
        end(),
    ];
    let silent = vec![sse_head(), content("a"), Act::Hang];
    for (case, acts) in [
        ("whole", stream_acts()),
        ("byte by byte", byte_by_byte(stream_acts())),
        ("split event", split),
        ("broken framing", malformed_framing()),
        ("silent", silent),
    ] {
        let base = start(Arc::new(move |_: &Received| acts.clone())).await;
        let through = |library: bool| {
            let idle = Duration::from_millis(400);
            let endpoint = common::chat_endpoint(&base, true, None, Duration::from_secs(10), idle);
            if library {
                endpoint.through_library()
            } else {
                endpoint
            }
        };
        let direct = send(&through(false), &prompt(), 8).await.record;
        let library = send(&through(true), &prompt(), 8).await.record;
        let seen = |r: &RequestRecord| {
            (
                r.ok,
                r.error_kind,
                r.chunks,
                r.output_tokens,
                r.input_tokens,
            )
        };
        assert_eq!(
            seen(&direct),
            seen(&library),
            "{case}: {direct:?} vs {library:?}"
        );
        // What each case must give, so two transports agreeing on nothing would not pass.
        let expected = match case {
            "broken framing" => (false, Some(FailureKind::Reset), 1),
            "silent" => (false, Some(FailureKind::Idle), 1),
            _ => (true, None, 2),
        };
        assert_eq!(
            (library.ok, library.error_kind, library.chunks),
            expected,
            "{case}: {library:?}"
        );
        if case == "split event" {
            // "b" began arriving before the pause: timed by its first byte either way.
            for record in [&direct, &library] {
                assert!(record.ok && record.itl_s[0] < 0.1, "{case}: {record:?}");
            }
        }
    }
}
