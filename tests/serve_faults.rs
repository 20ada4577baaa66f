//! `serve --fault`: every kind of broken response is produced as described and logged, so the
//! probe's tests can check their classification against the server's own record.

mod common;

use std::time::Duration;

use capplan::sim::serve::fault::{FaultKind, FaultRule};
use futures_util::StreamExt;

/// What a client observed of one streaming request.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Seen {
    Clean,
    Status(u16),
    /// The body broke off with a transport error.
    Broken,
    /// No byte for longer than the idle timeout.
    Silent,
    /// An event whose data is not JSON.
    NotJson,
    /// An `{"error": …}` event inside the 200 stream.
    ErrorEvent,
    /// Ended after usage without `[DONE]`.
    NoDone,
}

async fn observe(client: &reqwest::Client, url: &str) -> Seen {
    let body = r#"{"model": "llama-3.1-8b", "messages": [{"role": "user", "content": "hi there"}],
                  "max_tokens": 8, "ignore_eos": true, "stream": true,
                  "stream_options": {"include_usage": true}}"#;
    let response = match client.post(url).body(body).send().await {
        Ok(response) => response,
        Err(_) => return Seen::Broken,
    };
    if !response.status().is_success() {
        return Seen::Status(response.status().as_u16());
    }
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    loop {
        match tokio::time::timeout(Duration::from_millis(800), stream.next()).await {
            Err(_) => return Seen::Silent,
            Ok(None) => break,
            Ok(Some(Err(_))) => return Seen::Broken,
            Ok(Some(Ok(bytes))) => text.push_str(&String::from_utf8_lossy(&bytes)),
        }
    }
    let mut done = false;
    for event in text.split("\n\n").filter(|e| !e.trim().is_empty()) {
        let data = event.trim().trim_start_matches("data:").trim();
        if data == "[DONE]" {
            done = true;
            continue;
        }
        match serde_json::from_str::<serde_json::Value>(data) {
            Err(_) => return Seen::NotJson,
            Ok(value) if value.get("error").is_some() => return Seen::ErrorEvent,
            Ok(_) => {}
        }
    }
    if done {
        Seen::Clean
    } else {
        Seen::NoDone
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_is_served_and_logged() {
    let dir = common::scratch("faults");
    let log = dir.join("truth.ndjson");
    let rules: Vec<FaultRule> = FaultKind::ALL
        .iter()
        .map(|&kind| FaultRule {
            kind,
            fraction: 0.1,
        })
        .collect();
    let base = common::start_server(
        "llama-3.1-8b",
        "H100-SXM",
        1,
        50.0,
        rules,
        Some(log.clone()),
    )
    .await;
    capplan::probe::client::install_crypto();
    let client = reqwest::Client::new();
    let url = format!("{base}/v1/chat/completions");
    let mut seen = Vec::new();
    for _ in 0..60 {
        seen.push(observe(&client, &url).await);
    }
    // The server writes a stalled request's record when it closes the stream: wait for them.
    tokio::time::sleep(Duration::from_secs(4)).await;

    let text = std::fs::read_to_string(&log).expect("truth log");
    let mut records: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("log lines are JSON"))
        .collect();
    records.sort_by_key(|r| r["request"].as_u64());
    assert_eq!(records.len(), 60, "one record per request");

    let mut kinds_seen = std::collections::HashSet::new();
    for (record, observed) in records.iter().zip(&seen) {
        let expected = match record["fault"].as_str() {
            None => Seen::Clean,
            Some("http500") => Seen::Status(500),
            Some("http429") => Seen::Status(429),
            Some("reset") => Seen::Broken,
            Some("stall") => Seen::Silent,
            Some("malformed") => Seen::NotJson,
            Some("error-in-stream") => Seen::ErrorEvent,
            Some("no-done") => Seen::NoDone,
            Some(other) => panic!("unknown fault {other}"),
        };
        assert_eq!(
            *observed, expected,
            "request {}: {record}",
            record["request"]
        );
        if let Some(kind) = record["fault"].as_str() {
            kinds_seen.insert(kind.to_string());
            assert_eq!(record["status"], "fault");
        } else {
            assert_eq!(record["status"], "ok");
            assert_eq!(record["sent_tokens"], 8);
        }
    }
    // With 10 % each over 60 requests, every kind shows up (the plan is deterministic).
    assert_eq!(kinds_seen.len(), FaultKind::ALL.len(), "{kinds_seen:?}");
}
