//! The simulated engine's speed: how long `predict` takes per layout (goal < 0.5 s), and how
//! many concurrent streams `serve` sustains on this machine with its timers on time, so that
//! probe benchmarks know the server is not the limit. Run with `cargo bench --bench sim`.

use std::time::{Duration, Instant};

use capplan::catalog::Catalog;
use capplan::sim::predict::{engine_for, predict, Calibration, Layout, PredictRequest};
use capplan::sim::serve::fault::FaultPlan;
use capplan::sim::serve::{start, ServeConfig};
use capplan::slo::{Percentile, Slo};
use capplan::workload::{PrefixShare, ThinkTime, TokenLengths, Workload};
use futures_util::StreamExt;

fn main() {
    predict_times();
    serve_capacity();
}

fn predict_times() {
    let catalog = Catalog::shipped().expect("catalog");
    let request = PredictRequest::new(
        Workload {
            input_tokens: TokenLengths::Uniform { min: 256, max: 768 },
            output_tokens: TokenLengths::Uniform { min: 128, max: 384 },
            think_time: ThinkTime::NONE,
            prefix_share: PrefixShare::NONE,
            speculation: None,
        },
        Slo {
            ttft_s: 2.0,
            tpot_s: Some(0.05),
            percentile: Percentile::P(90.0),
            e2e_s: None,
        },
    );
    let mut times = Vec::new();
    let mut slowest = (0.0, String::new());
    for model in &catalog.models {
        for card in &catalog.cards {
            for tp in [1, 2, 4, 8] {
                let layout = Layout::on_card(model, card, tp);
                let start = Instant::now();
                let calibration = Calibration::for_card(card, &card.interconnect);
                if predict(&layout, &calibration, &request).is_ok() {
                    let ms = start.elapsed().as_secs_f64() * 1e3;
                    if ms > slowest.0 {
                        slowest = (ms, format!("{} on {tp} × {}", model.name, card.name));
                    }
                    times.push(ms);
                }
            }
        }
    }
    times.sort_by(f64::total_cmp);
    println!(
        "predict: {} layouts, median {:.1} ms, p90 {:.1} ms, slowest {:.1} ms ({}); goal < 500 ms per layout → {}",
        times.len(),
        times[times.len() / 2],
        times[times.len() * 9 / 10],
        slowest.0,
        slowest.1,
        if slowest.0 < 500.0 { "met" } else { "MISSED" }
    );
}

/// Streams of 64 tokens at 10 ms per token (an H100-class decode step, scaled): how many can
/// run at once before steps end late or tokens reach the client late.
fn serve_capacity() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        for streams in [64usize, 256, 1024] {
            let (tokens_per_s, lateness_ms, late_share) = one_level(streams).await;
            println!(
                "serve: {streams} concurrent streams → {tokens_per_s:.0} tokens/s delivered, \
                 worst step lateness {lateness_ms:.1} ms, {:.1} % of steps late by > 2 ms",
                late_share * 100.0
            );
        }
    });
}

async fn one_level(streams: usize) -> (f64, f64, f64) {
    let catalog = Catalog::shipped().expect("catalog");
    let model = catalog.model("llama-3.1-8b").expect("model");
    let card = catalog.card("H100-SXM").expect("card");
    let layout = Layout::on_card(model, card, 1);
    let calibration = Calibration::for_card(card, &card.interconnect);
    let options = capplan::sim::engine::EngineOptions {
        max_running: streams,
        token_budget: (streams as u64).max(2048),
        ..Default::default()
    };
    let (engine, _) = engine_for(&layout, &calibration, &options, true).expect("fits");
    let config = ServeConfig {
        host: "127.0.0.1".into(),
        port: 0,
        time_scale: 1.0,
        seed: 1,
        model_name: model.name.clone(),
        output_tokens: TokenLengths::Fixed { tokens: 64 },
        faults: FaultPlan::default(),
        stall_for: Duration::from_secs(1),
        log: None,
    };
    let server = start(engine, config).await.expect("server up");
    let base = server.url.clone();
    capplan::probe::client::install_crypto();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(streams)
        .build()
        .expect("client");
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..streams {
        let client = client.clone();
        let url = format!("{base}/v1/completions");
        tasks.push(tokio::spawn(async move {
            let mut tokens = 0usize;
            for _ in 0..3 {
                let Ok(response) = client
                    .post(&url)
                    .body(r#"{"prompt": "a b c d", "max_tokens": 64, "ignore_eos": true, "stream": true}"#)
                    .send()
                    .await
                else {
                    continue;
                };
                let mut body = response.bytes_stream();
                while let Some(Ok(chunk)) = body.next().await {
                    tokens += chunk.windows(6).filter(|w| w == b"\"text\"").count();
                }
            }
            tokens
        }));
    }
    let mut tokens = 0;
    for task in tasks {
        tokens += task.await.unwrap_or(0);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let metrics = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    let value = |name: &str| -> f64 {
        metrics
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    drop(server);
    let steps = value("capplan_engine_steps_total").max(1.0);
    (
        tokens as f64 / elapsed,
        value("capplan_timer_max_lateness_seconds") * 1e3,
        value("capplan_timer_late_steps_total") / steps,
    )
}
