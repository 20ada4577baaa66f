//! `capplan serve --pd`: a disaggregated deployment in scaled real time. What it is for is
//! what a client sees: prompts computed on prefill workers no longer stall the decode batch,
//! so the longest pause between two tokens of a decoding request stays near one decode step,
//! where the same workers serving aggregated pause for a whole prompt chunk.

use std::time::{Duration, Instant};

use capplan::catalog::Catalog;
use capplan::sim::disagg::KvHandover;
use capplan::sim::engine::EngineOptions;
use capplan::sim::predict::{engine_for, Calibration, Layout};
use capplan::sim::serve::backend::KvTransfer;
use capplan::sim::serve::fault::FaultPlan;
use capplan::sim::serve::{start, Engines, ServeConfig};
use capplan::sim::StepWork;
use futures_util::StreamExt;

/// Engine seconds per wall second: slow enough that a busy machine's timer lateness (tens of
/// milliseconds) stays well under the threshold the test sets (about 0.15 s of wall time).
const TIME_SCALE: f64 = 2.0;
const LONG_PROMPT: usize = 6000;
const DECODE_TOKENS: u32 = 120;

fn layout(catalog: &Catalog) -> Layout<'_> {
    let model = catalog.model("llama-3.1-8b").unwrap();
    let card = catalog.card("L4").unwrap();
    Layout::on_card(model, card, 1)
}

fn config() -> ServeConfig {
    ServeConfig {
        host: "127.0.0.1".into(),
        port: 0,
        time_scale: TIME_SCALE,
        seed: 1,
        model_name: "llama-3.1-8b".into(),
        output_tokens: capplan::workload::TokenLengths::Fixed { tokens: 16 },
        faults: FaultPlan::new(Vec::new(), 1).unwrap(),
        stall_for: Duration::from_secs(5),
        log: None,
    }
}

/// One streamed request: the content chunks' arrival times (wall seconds from sending) and the
/// completion tokens `usage` reports.
async fn stream(
    client: &reqwest::Client,
    base: &str,
    words: usize,
    tokens: u32,
) -> (Vec<f64>, u64) {
    let prompt = vec!["word"; words].join(" ");
    let body = serde_json::json!({
        "model": "llama-3.1-8b", "prompt": format!("{} {prompt}", rand_word()),
        "max_tokens": tokens, "ignore_eos": true, "stream": true,
        "stream_options": {"include_usage": true}
    });
    let start = Instant::now();
    let response = client
        .post(format!("{base}/v1/completions"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("the server answers");
    assert!(response.status().is_success());
    let mut chunks = response.bytes_stream();
    let (mut buffer, mut arrivals, mut usage) = (String::new(), Vec::new(), 0);
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.expect("the stream reads");
        let now = start.elapsed().as_secs_f64();
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let data = event.trim().trim_start_matches("data:").trim();
            let Ok(value) = serde_json::from_str::<serde_json::Value>(data) else {
                continue;
            };
            if value["choices"][0]["text"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
            {
                arrivals.push(now);
            }
            if let Some(n) = value["usage"]["completion_tokens"].as_u64() {
                usage = n;
            }
        }
    }
    (arrivals, usage)
}

/// A word unique to the request, so no prefix cache serves its prompt.
fn rand_word() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("u{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Two users decode long answers while a third sends long prompts one after another; returns
/// the longest pause between two tokens of any decoding request (engine seconds) and whether
/// every answer had all its tokens.
async fn longest_decode_pause(engines: Engines) -> (f64, bool) {
    capplan::probe::client::install_crypto();
    let server = start(engines, config()).await.expect("server starts");
    let base = server.url.clone();
    let client = reqwest::Client::new();
    let prompts = {
        let client = client.clone();
        let base = base.clone();
        tokio::spawn(async move {
            for _ in 0..6 {
                stream(&client, &base, LONG_PROMPT, 2).await;
            }
        })
    };
    let mut decoders = Vec::new();
    for _ in 0..2 {
        let client = client.clone();
        let base = base.clone();
        decoders.push(tokio::spawn(async move {
            let mut results = Vec::new();
            for _ in 0..2 {
                results.push(stream(&client, &base, 40, DECODE_TOKENS).await);
            }
            results
        }));
    }
    let (mut longest, mut complete) = (0.0_f64, true);
    for decoder in decoders {
        for (arrivals, usage) in decoder.await.expect("a decoding user") {
            complete &= usage == u64::from(DECODE_TOKENS);
            for pair in arrivals.windows(2) {
                longest = longest.max(pair[1] - pair[0]);
            }
        }
    }
    prompts.abort();
    (longest * TIME_SCALE, complete)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_on_prefill_workers_do_not_stall_the_decode_batch() {
    let catalog = Catalog::shipped().unwrap();
    let layout = layout(&catalog);
    let calibration = Calibration::for_card(layout.card, &layout.card.interconnect);
    let options = EngineOptions::default();
    let engine = || engine_for(&layout, &calibration, &options, true).unwrap().0;
    // What the model says one prompt chunk of the budget costs, against a decode step: the
    // aggregated engine's decoders wait for whole chunks, the decode workers never do.
    let perf = engine().perf().clone();
    let mut chunk = StepWork::default();
    chunk.add_prefill_chunk(0.0, options.token_budget as f64);
    let mut decode = StepWork::default();
    decode.add_decode(2.0, 2.0 * 100.0);
    let (chunk_s, step_s) = (perf.step_time(&chunk).total, perf.step_time(&decode).total);
    assert!(chunk_s > 4.0 * step_s, "{chunk_s} vs {step_s}");
    let threshold = (chunk_s + step_s) / 2.0;

    let (aggregated, whole) = longest_decode_pause(Engines::Aggregated(Box::new(engine()))).await;
    let handover = KvHandover::between(&layout, &layout, 0.0).unwrap();
    let fixed_s = handover.seconds(0.0);
    let disaggregated = Engines::Disaggregated {
        prefill: vec![engine()],
        decode: vec![engine()],
        transfer: KvTransfer {
            fixed_s,
            per_token_s: handover.seconds(1.0) - fixed_s,
        },
    };
    let (split, all) = longest_decode_pause(disaggregated).await;
    assert!(whole && all, "every answer has its tokens");
    assert!(
        aggregated > threshold,
        "aggregated: a decoder waits for a prompt chunk ({aggregated:.3} s, chunk {chunk_s:.3} s)"
    );
    assert!(
        split < threshold,
        "disaggregated: no decoder waits for a prompt ({split:.3} s, decode step {step_s:.3} s)"
    );
}
