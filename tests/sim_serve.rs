//! `capplan serve` against `capplan predict`: the same engine in real (scaled) time and in
//! virtual time must agree, and the HTTP front must speak the OpenAI format.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use capplan::catalog::Catalog;
use capplan::sim::predict::{predict, Calibration, Layout, PredictRequest};
use capplan::slo::{Percentile, Slo};
use capplan::workload::{PrefixShare, ThinkTime, TokenLengths, Workload};
use common::closed_loop::{self, quantile};

/// Chat-sized requests on layouts whose KV cache fills before the running cap: past that point
/// new requests queue and TTFT climbs steeply and smoothly (many ~0.1 s steps, no 0.5 s
/// prefill stairs), so ±10 % of users is well outside sampling noise on either side of C*.
const INPUT: (usize, usize) = (100, 300);
const OUTPUT: (u32, u32) = (32, 96);
const TTFT_LIMIT: f64 = 1.0;
/// About 1000 tokens/s of engine time × 4 keeps client and server well inside two cores.
const TIME_SCALE: f64 = 4.0;

fn predicted_c_star(model: &str, card: &str, tp: u32) -> u32 {
    let catalog = Catalog::shipped().unwrap();
    let model = catalog.model(model).unwrap();
    let card = catalog.card(card).unwrap();
    let layout = Layout::on_card(model, card, tp);
    let request = PredictRequest::new(
        Workload {
            input_tokens: TokenLengths::Uniform {
                min: INPUT.0 as u32,
                max: INPUT.1 as u32,
            },
            output_tokens: TokenLengths::Uniform {
                min: OUTPUT.0,
                max: OUTPUT.1,
            },
            think_time: ThinkTime::NONE,
            prefix_share: PrefixShare::NONE,
            speculation: None,
        },
        Slo {
            ttft_s: TTFT_LIMIT,
            tpot_s: None,
            percentile: Percentile::P(90.0),
            e2e_s: None,
        },
    );
    predict(
        &layout,
        &Calibration::for_card(card, &card.interconnect),
        &request,
    )
    .unwrap()
    .c_star
}

/// p90 TTFT in engine seconds, measured by a plain closed-loop client against `serve`.
async fn served_p90_ttft(base: &str, model: &str, users: usize) -> f64 {
    let timings = closed_loop::run(
        base,
        model,
        users,
        INPUT,
        OUTPUT,
        users.max(10),
        (3 * users).clamp(150, 300),
        Duration::from_secs(120),
    )
    .await;
    assert!(
        timings.len() >= 100,
        "only {} requests finished",
        timings.len()
    );
    let mut ttfts: Vec<f64> = timings.iter().map(|t| t.ttft * TIME_SCALE).collect();
    quantile(&mut ttfts, 0.9)
}

async fn check_layout(model: &str, card: &str, tp: u32) {
    let c_star = predicted_c_star(model, card, tp);
    assert!(
        c_star >= 10,
        "{model} on {card}: C* {c_star} too small to test ±10 %"
    );
    let base = common::start_server(model, card, tp, TIME_SCALE, Vec::new(), None).await;
    let below = (0.9 * f64::from(c_star)).floor() as usize;
    let above = (1.1 * f64::from(c_star)).ceil() as usize;
    let at_below = served_p90_ttft(&base, model, below).await;
    let at_above = served_p90_ttft(&base, model, above).await;
    println!(
        "{model} on {tp} × {card}: predicted C* {c_star}; served p90 TTFT {at_below:.3} s at {below} users, \
         {at_above:.3} s at {above} users (limit {TTFT_LIMIT} s)"
    );
    // The served C* lies between 0.9 × and 1.1 × the predicted one.
    assert!(
        at_below <= TTFT_LIMIT,
        "{below} users should pass: {at_below}"
    );
    assert!(
        at_above > TTFT_LIMIT,
        "{above} users should fail: {at_above}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn predict_and_serve_agree_on_c_star_for_two_layouts() {
    check_layout("llama-13b", "A30", 2).await;
    check_layout("llama-3.1-8b", "L4", 1).await;
}

#[test]
fn serve_prints_its_url_first_and_speaks_openai() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_capplan"))
        .args([
            "serve",
            "--model",
            "llama-3.1-8b",
            "--card",
            "H100-SXM",
            "--port",
            "0",
            "--time-scale",
            "20",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("capplan serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("a first line");
    let base = first.trim().to_string();
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let result = runtime.block_on(async {
        capplan::probe::client::install_crypto();
        let client = reqwest::Client::new();
        let models: serde_json::Value = serde_json::from_slice(
            &client
                .get(format!("{base}/v1/models"))
                .send()
                .await?
                .bytes()
                .await?,
        )
        .unwrap();
        let whole: serde_json::Value = serde_json::from_slice(
            &client
                .post(format!("{base}/v1/completions"))
                .body(r#"{"model": "llama-3.1-8b", "prompt": "one two three", "max_tokens": 7}"#)
                .send()
                .await?
                .bytes()
                .await?,
        )
        .unwrap();
        let wrong_model = client
            .post(format!("{base}/v1/chat/completions"))
            .body(r#"{"model": "gpt-4", "messages": []}"#)
            .send()
            .await?
            .status();
        let metrics = client
            .get(format!("{base}/metrics"))
            .send()
            .await?
            .text()
            .await?;
        Ok::<_, reqwest::Error>((models, whole, wrong_model, metrics))
    });
    let _ = child.kill();
    let _ = child.wait();
    let (models, whole, wrong_model, metrics) = result.expect("requests succeed");
    assert_eq!(models["data"][0]["id"], "llama-3.1-8b");
    assert_eq!(whole["usage"]["prompt_tokens"], 3);
    assert_eq!(whole["usage"]["completion_tokens"], 7);
    assert_eq!(whole["choices"][0]["finish_reason"], "length");
    assert_eq!(wrong_model.as_u16(), 404);
    assert!(
        metrics.contains("capplan_generation_tokens_total 7"),
        "{metrics}"
    );
}
