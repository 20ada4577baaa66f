//! A plain closed-loop streaming client for tests: C workers, each sending its next request as
//! soon as the previous one ends. Deliberately simple (not the probe): it times the first
//! content chunk and the end of the stream, and reads the token count from `usage`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub ttft: f64,
    pub e2e: f64,
    pub tokens: u32,
}

impl Timing {
    pub fn tpot(&self) -> Option<f64> {
        (self.tokens > 1).then(|| (self.e2e - self.ttft) / f64::from(self.tokens - 1))
    }
}

/// Sends `warmup + measured` chat requests from `users` workers; returns the timings of the
/// requests that completed after the first `warmup` (wall seconds).
#[allow(clippy::too_many_arguments)]
pub async fn run(
    base: &str,
    model: &str,
    users: usize,
    input_tokens: (usize, usize),
    output_tokens: (u32, u32),
    warmup: usize,
    measured: usize,
    deadline: Duration,
) -> Vec<Timing> {
    capplan::probe::client::install_crypto();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(users)
        .tcp_nodelay(true)
        .build()
        .expect("client");
    let started = Arc::new(AtomicUsize::new(0));
    let done: Arc<Mutex<Vec<Timing>>> = Arc::new(Mutex::new(Vec::new()));
    let total = warmup + measured;
    let until = Instant::now() + deadline;
    let mut workers = Vec::new();
    for worker in 0..users {
        let client = client.clone();
        let started = started.clone();
        let done = done.clone();
        let url = format!("{base}/v1/chat/completions");
        let model = model.to_string();
        let mut rng = StdRng::seed_from_u64(1000 + worker as u64);
        workers.push(tokio::spawn(async move {
            while started.fetch_add(1, Ordering::SeqCst) < total && Instant::now() < until {
                let words = rng.random_range(input_tokens.0..=input_tokens.1);
                // A first word unique to the request: the server's prefix cache must find
                // nothing to reuse, as in a benchmark that does not repeat its prompts.
                let mut content = vec!["word".to_string(); words.max(1)];
                content[0] = format!("u{worker}-{}", rng.random::<u64>());
                let body = serde_json::json!({
                    "model": model,
                    "messages": [{"role": "user", "content": content.join(" ")}],
                    "max_tokens": rng.random_range(output_tokens.0..=output_tokens.1),
                    "ignore_eos": true, "stream": true,
                    "stream_options": {"include_usage": true}
                })
                .to_string();
                if let Some(timing) = one(&client, &url, body).await {
                    done.lock().unwrap().push(timing);
                }
            }
        }));
    }
    for worker in workers {
        let _ = worker.await;
    }
    let all = done.lock().unwrap().clone();
    all.into_iter().skip(warmup).collect()
}

async fn one(client: &reqwest::Client, url: &str, body: String) -> Option<Timing> {
    let start = Instant::now();
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    let mut first = None;
    let mut tokens = 0;
    let mut finished = false;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.ok()?;
        let now = Instant::now();
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let data = event.trim().trim_start_matches("data:").trim();
            if data == "[DONE]" {
                finished = true;
                continue;
            }
            let Ok(value) = serde_json::from_str::<serde_json::Value>(data) else {
                return None;
            };
            let content = value["choices"][0]["delta"]["content"]
                .as_str()
                .unwrap_or("");
            if first.is_none() && !content.is_empty() {
                first = Some(now.duration_since(start).as_secs_f64());
            }
            if let Some(n) = value["usage"]["completion_tokens"].as_u64() {
                tokens = n as u32;
            }
        }
    }
    finished.then(|| Timing {
        ttft: first.unwrap_or(f64::NAN),
        e2e: start.elapsed().as_secs_f64(),
        tokens,
    })
}

/// The `q` quantile (0..=1) by linear interpolation.
pub fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let position = q * (values.len() - 1) as f64;
    let low = position.floor() as usize;
    let high = (low + 1).min(values.len() - 1);
    values[low] + (values[high] - values[low]) * (position - low as f64)
}
