//! `capplan serve` against what a careless or hostile client sends: bytes that are not HTTP, a
//! body that is not JSON, a negative `max_tokens`, a 10 MB upload, and a crowd of idle
//! connections — each answered (or survived) and the server still serving after it.

mod common;

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const LIMIT: Duration = Duration::from_secs(20);

fn address(base: &str) -> String {
    base.trim_start_matches("http://").to_string()
}

/// Writes `request` (head and body) on a new connection and reads the whole answer.
async fn exchange(base: &str, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(address(base)).await.expect("connects");
    stream.write_all(request).await.expect("writes");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(LIMIT, stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

fn post(body: &[u8]) -> Vec<u8> {
    let mut request = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    request
}

/// A small request the server must still answer with a full completion.
async fn still_serving(base: &str) {
    let answer = exchange(
        base,
        &post(br#"{"model": "llama-3.1-8b", "prompt": "one two three", "max_tokens": 4}"#),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"completion_tokens\":4"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn careless_clients_get_answers_and_the_server_goes_on() {
    let base = common::start_server("llama-3.1-8b", "H100-SXM", 1, 50.0, Vec::new(), None).await;

    // Bytes that are not HTTP at all.
    let answer = exchange(&base, b"\x00\xff\x13garbage\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer:?}");
    // A body that is not JSON.
    let answer = exchange(&base, &post(b"{\"model\": \"llama-3.1-8b\", \"prompt\": ")).await;
    assert!(
        answer.starts_with("HTTP/1.1 400") && answer.contains("invalid JSON"),
        "{answer}"
    );
    // A negative max_tokens.
    let answer = exchange(
        &base,
        &post(br#"{"model": "llama-3.1-8b", "prompt": "hi", "max_tokens": -5}"#),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");

    // A 10 MB upload is read to its end and answered 413, not cut off mid-upload.
    let mut body = br#"{"model": "llama-3.1-8b", "prompt": ""#.to_vec();
    body.resize(10 << 20, b'a');
    body.extend_from_slice(b"\"}");
    let answer = exchange(&base, &post(&body)).await;
    assert!(
        answer.starts_with("HTTP/1.1 413"),
        "{:?}",
        &answer[..answer.len().min(200)]
    );
    assert!(answer.contains("at most"), "{answer}");
    still_serving(&base).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_of_idle_connections_does_not_stop_it() {
    let base = common::start_server("llama-3.1-8b", "H100-SXM", 1, 50.0, Vec::new(), None).await;
    // 2 000 idle connections, or as many as this process may open (each takes a descriptor
    // on both sides).
    let crowd = open_file_limit().map_or(2000, |limit| ((limit.saturating_sub(200)) / 2).min(2000));
    let mut idle = Vec::with_capacity(crowd);
    for _ in 0..crowd {
        match TcpStream::connect(address(&base)).await {
            Ok(stream) => idle.push(stream),
            Err(err) => panic!("connection {} of {crowd} refused: {err}", idle.len() + 1),
        }
    }
    // Half of them start a request and never finish it.
    for stream in idle.iter_mut().step_by(2) {
        let _ = stream
            .write_all(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
            .await;
    }
    tokio::time::timeout(LIMIT, still_serving(&base))
        .await
        .expect("served beside the idle crowd");
    assert!(crowd >= 100, "only {crowd} connections could be tried here");
    drop(idle);
    still_serving(&base).await;
}

/// The soft limit on open descriptors, where `/proc` tells.
fn open_file_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}
