//! Each API kind against a stub speaking exactly its wire format (the formats as their public
//! docs and routers define them: TGI's router, Triton's generate extension and KServe's v2
//! protocol, DJL's LMI schema): the right path and body go out, TTFT (where it streams), E2E
//! and token counts come back, and the server's timing headers land in the record. Time bounds
//! are generous margins around pauses the stub makes.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use capplan::probe::api::template::ApiTemplate;
use capplan::probe::api::{Api, ApiKind};
use capplan::probe::client::{send, Endpoint};
use capplan::probe::record::{CountSource, FailureKind, RequestRecord};
use common::hello_prompt as prompt;
use common::stub::{end, event, sse_head, start, wait_ms, whole_with, Act, Received, Script};

fn between(value: Option<f64>, low_ms: f64, high_ms: f64) -> bool {
    value.is_some_and(|v| v * 1e3 >= low_ms && v * 1e3 <= high_ms)
}

/// Sends one request with `api` to a stub answering with `acts`; returns the record and what
/// the stub received (request line and body).
async fn one(api: Arc<dyn Api>, stream: bool, acts: Vec<Act>) -> (RequestRecord, Received) {
    let seen: Arc<Mutex<Option<Received>>> = Arc::default();
    let keep = seen.clone();
    let script: Script = Arc::new(move |received: &Received| {
        *keep.lock().unwrap() = Some(received.clone());
        acts.clone()
    });
    let base = start(script).await;
    let endpoint = Endpoint::new(
        &base,
        api,
        "llama",
        None,
        stream,
        Duration::from_secs(10),
        Duration::from_secs(2),
        2,
    )
    .expect("client");
    let record = send(&endpoint, &prompt(), 4).await.record;
    let received = seen
        .lock()
        .unwrap()
        .clone()
        .expect("the stub got a request");
    (record, received)
}

fn kind(name: &str) -> Arc<dyn Api> {
    ApiKind::build(name, None).expect("built-in kind")
}

fn body_json(received: &Received) -> serde_json::Value {
    serde_json::from_str(&received.body).expect("the request body is JSON")
}

fn tgi_token(text: &str, special: bool) -> String {
    format!(
        r#"{{"index":1,"token":{{"id":1,"text":{},"logprob":-0.1,"special":{special}}},"generated_text":null,"details":null}}"#,
        serde_json::Value::from(text)
    )
}

#[tokio::test]
async fn tgi_stream_ends_at_the_event_with_generated_text() {
    let (record, received) = one(
        kind("tgi"),
        true,
        vec![
            sse_head(),
            wait_ms(150),
            event(&tgi_token("Hello", false)),
            wait_ms(40),
            event(&tgi_token(" big", false)),
            wait_ms(40),
            event(&tgi_token(" world", false)),
            wait_ms(40),
            event(r#"{"index":4,"token":{"id":2,"text":"</s>","logprob":0.0,"special":true},"generated_text":"Hello big world","details":{"finish_reason":"eos_token","generated_tokens":4,"seed":null,"input_length":9}}"#),
            // TGI closes after the last event; a stub that keeps the connection open must not
            // hold the request.
            Act::Hang,
        ],
    )
    .await;
    assert!(
        received.head.starts_with("POST /generate_stream "),
        "{}",
        received.head
    );
    let body = body_json(&received);
    assert_eq!(body["inputs"], "tag-0-0 hello there");
    assert_eq!(body["parameters"]["max_new_tokens"], 4);
    assert!(record.ok, "{record:?}");
    assert!(between(record.ttft_s, 145.0, 700.0), "{record:?}");
    assert!(between(Some(record.e2e_s), 260.0, 1_200.0), "{record:?}");
    assert_eq!((record.output_tokens, record.input_tokens), (4, 9));
    assert_eq!(record.output_tokens_from, CountSource::Usage);
    assert_eq!(record.chunks, 4);
    // (E2E − TTFT) over the three gaps of ~40 ms.
    assert!(between(record.tpot_s, 35.0, 200.0), "{record:?}");
}

#[tokio::test]
async fn tgi_stream_without_its_last_event_is_truncated() {
    let (record, _) = one(
        kind("tgi"),
        true,
        vec![sse_head(), event(&tgi_token("Hi", false)), end()],
    )
    .await;
    assert!(!record.ok);
    assert_eq!(record.error_kind, Some(FailureKind::Truncated));
}

#[tokio::test]
async fn tgi_generate_reads_details_and_timing_headers() {
    let (record, received) = one(
        kind("tgi"),
        false,
        vec![
            wait_ms(120),
            whole_with(
                200,
                "application/json",
                &[
                    ("x-compute-type", "gpu+optimized"),
                    ("x-total-time", "118"),
                    ("x-validation-time", "1"),
                    ("x-queue-time", "37"),
                    ("x-inference-time", "80"),
                    ("x-time-per-token", "20"),
                    ("x-prompt-tokens", "9"),
                    ("x-generated-tokens", "4"),
                ],
                r#"{"generated_text":"Hello big world","details":{"finish_reason":"length","generated_tokens":4,"seed":null,"prefill":[],"tokens":[]}}"#,
            ),
        ],
    )
    .await;
    assert!(
        received.head.starts_with("POST /generate "),
        "{}",
        received.head
    );
    assert!(record.ok, "{record:?}");
    assert!(!record.streamed);
    assert!(between(Some(record.e2e_s), 115.0, 700.0), "{record:?}");
    assert_eq!((record.output_tokens, record.input_tokens), (4, 9));
    let server = record.server.expect("header timings");
    assert_eq!(server.queue_s, Some(0.037));
    assert_eq!(server.inference_s, Some(0.08));
    assert_eq!(server.time_per_token_s, Some(0.02));
    assert_eq!(server.total_s, Some(0.118));
    assert_eq!(server.compute_s(), Some(0.08));
}

#[tokio::test]
async fn triton_generate_stream_ends_with_the_body() {
    let text = |t: &str| {
        event(&format!(
            r#"{{"model_name":"llama","model_version":"1","sequence_end":false,"text_output":{}}}"#,
            serde_json::Value::from(t)
        ))
    };
    let (record, received) = one(
        kind("triton"),
        true,
        vec![
            sse_head(),
            wait_ms(100),
            text("One"),
            wait_ms(30),
            text(" two"),
            wait_ms(30),
            text(" three"),
            end(),
        ],
    )
    .await;
    assert!(
        received
            .head
            .starts_with("POST /v2/models/llama/generate_stream "),
        "{}",
        received.head
    );
    let body = body_json(&received);
    assert_eq!(
        (body["max_tokens"].as_u64(), body["stream"].as_bool()),
        (Some(4), Some(true))
    );
    assert!(record.ok, "{record:?}");
    assert!(between(record.ttft_s, 95.0, 600.0), "{record:?}");
    assert!(between(Some(record.e2e_s), 155.0, 900.0), "{record:?}");
    // No usage in Triton's events: one token per event, and the record says so.
    assert_eq!(record.output_tokens, 3);
    assert_eq!(record.output_tokens_from, CountSource::Chunks);

    // A connection cut mid-stream is not a clean end.
    let (cut, _) = one(
        kind("triton"),
        true,
        vec![sse_head(), text("One"), Act::Reset],
    )
    .await;
    assert!(!cut.ok, "{cut:?}");
    // An error event after the 200 head is a failure.
    let (error, _) = one(
        kind("triton"),
        true,
        vec![
            sse_head(),
            text("One"),
            event(r#"{"error":"in ensemble: boom"}"#),
            end(),
        ],
    )
    .await;
    assert_eq!(error.error_kind, Some(FailureKind::StreamError));
}

#[tokio::test]
async fn kserve_infer_is_e2e_only_with_its_tensors() {
    let (record, received) = one(
        kind("kserve"),
        false,
        vec![
            wait_ms(90),
            whole_with(
                200,
                "application/json",
                &[],
                r#"{"model_name":"llama","model_version":"1","outputs":[{"name":"text_output","shape":[1],"datatype":"BYTES","data":["Hello big world"]},{"name":"output_tokens","shape":[1],"datatype":"INT32","data":[4]}]}"#,
            ),
        ],
    )
    .await;
    assert!(
        received.head.starts_with("POST /v2/models/llama/infer "),
        "{}",
        received.head
    );
    let body = body_json(&received);
    assert_eq!(body["inputs"][0]["name"], "text_input");
    assert_eq!(body["inputs"][0]["data"][0], "tag-0-0 hello there");
    assert!(record.ok, "{record:?}");
    assert_eq!(record.ttft_s, None, "no stream, no TTFT");
    assert!(between(Some(record.e2e_s), 85.0, 600.0), "{record:?}");
    assert_eq!(record.output_tokens, 4);
    assert_eq!(record.output_tokens_from, CountSource::Usage);
    assert!(!kind("kserve").streams());
}

#[tokio::test]
async fn djl_invocations_count_details_and_fail_on_error_finish() {
    let (record, received) = one(
        kind("djl"),
        false,
        vec![
            wait_ms(80),
            whole_with(
                200,
                "application/json",
                &[],
                r#"{"generated_text":"Deep Learning is","details":{"finish_reason":"length","generated_tokens":4,"inputs":"tag-0-0 hello there"}}"#,
            ),
        ],
    )
    .await;
    assert!(
        received.head.starts_with("POST /invocations "),
        "{}",
        received.head
    );
    assert_eq!(body_json(&received)["parameters"]["max_new_tokens"], 4);
    assert!(record.ok, "{record:?}");
    assert!(between(Some(record.e2e_s), 75.0, 600.0), "{record:?}");
    assert_eq!(record.output_tokens, 4);

    let (failed, _) = one(
        kind("djl"),
        false,
        vec![whole_with(
            424,
            "application/json",
            &[],
            r#"{"generated_text":"","details":{"finish_reason":"error","generated_tokens":null,"inputs":null,"tokens":null}}"#,
        )],
    )
    .await;
    assert_eq!(failed.error_kind, Some(FailureKind::Http));
    assert_eq!(failed.http_status, Some(424));
}

#[tokio::test]
async fn a_template_describes_any_json_api() {
    let dir = common::scratch("api-template");
    let file = dir.join("classifier.toml");
    std::fs::write(
        &file,
        r#"path = "/predict/{model}"
body = '{"images": [{{prompt}}], "batch": {{batch}}, "top_k": {{max_tokens}}}'
output = "/result/classes"
output_tokens = "/result/count"
error = "/err_msg"
batch = 8
"#,
    )
    .unwrap();
    let template = ApiTemplate::load(&file).expect("a valid template");
    let api: Arc<dyn Api> = Arc::new(template);
    let (record, received) = one(
        api.clone(),
        false,
        vec![
            wait_ms(60),
            whole_with(
                200,
                "application/json",
                &[("x-queue-time", "12"), ("x-inference-time", "40")],
                r#"{"err_msg":null,"result":{"classes":["cat","dog"],"count":2}}"#,
            ),
        ],
    )
    .await;
    assert!(
        received.head.starts_with("POST /predict/llama "),
        "{}",
        received.head
    );
    let body = body_json(&received);
    assert_eq!(
        (body["batch"].as_u64(), body["top_k"].as_u64()),
        (Some(8), Some(4))
    );
    assert!(record.ok, "{record:?}");
    assert_eq!(record.output_tokens, 2);
    let server = record.server.unwrap();
    assert_eq!(
        (server.queue_s, server.compute_s()),
        (Some(0.012), Some(0.04))
    );

    let (failed, _) = one(
        api,
        false,
        vec![whole_with(
            200,
            "application/json",
            &[],
            r#"{"err_msg":"model busy"}"#,
        )],
    )
    .await;
    assert_eq!(failed.error_kind, Some(FailureKind::StreamError));
    assert!(failed.error.unwrap().contains("model busy"));

    // A broken template is refused with the file named.
    std::fs::write(&file, "path = \"predict\"\nbody = '{}'\noutput = \"/x\"\n").unwrap();
    let err = ApiTemplate::load(&file).unwrap_err().to_string();
    assert!(
        err.contains("classifier.toml") && err.contains("must start with /"),
        "{err}"
    );
}

/// A whole probe through the CLI against a TGI `/generate` stub with timing headers: the
/// server's queue and compute time land in `steps.csv` and `run.json` beside the client's E2E.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_cli_reports_the_servers_timings_per_level() {
    let script: Script = Arc::new(|_: &Received| {
        vec![
            wait_ms(30),
            whole_with(
                200,
                "application/json",
                &[
                    ("x-queue-time", "5"),
                    ("x-inference-time", "20"),
                    ("x-prompt-tokens", "21"),
                    ("x-generated-tokens", "4"),
                ],
                r#"{"generated_text":"a b c d"}"#,
            ),
        ]
    });
    let base = start(script).await;
    let out = common::scratch("probe-api-tgi");
    let run = common::capplan_beside_the_stub(&[
        "probe",
        "--url",
        &base,
        "--api",
        "tgi",
        "--no-stream",
        "--model",
        "llama-3.1-8b",
        "--card",
        "L4",
        "--ttft",
        "5s",
        "--percentile",
        "mean",
        "--concurrency",
        "2",
        "--warmup",
        "2",
        "--window",
        "20",
        "--input-tokens",
        "16",
        "--output-tokens",
        "4",
        "--out",
        out.to_str().unwrap(),
        "--format",
        "json",
    ])
    .await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let report = common::json(&run);
    let step = &report["steps"][0];
    assert!(
        close(step["server_queue"]["mean"].as_f64(), 0.005),
        "{step}"
    );
    assert!(
        close(step["server_compute"]["mean"].as_f64(), 0.02),
        "{step}"
    );
    assert!(close(step["output_tokens_mean"].as_f64(), 4.0), "{step}");
    assert!(close(step["input_tokens_mean"].as_f64(), 21.0), "{step}");
    let e2e = step["e2e"]["mean"].as_f64().unwrap();
    assert!((0.029..0.5).contains(&e2e), "E2E {e2e}");

    let dir = std::path::PathBuf::from(report["run_dir"].as_str().unwrap());
    let mut steps = csv::Reader::from_path(dir.join("steps.csv")).unwrap();
    let headers = steps.headers().unwrap().clone();
    let row = steps.records().next().unwrap().unwrap();
    let cell = |name: &str| {
        let at = headers
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("{name}"));
        row[at].parse::<f64>().unwrap()
    };
    assert!(close(Some(cell("server_queue_mean_s")), 0.005));
    assert!(close(Some(cell("server_compute_p90_s")), 0.02));
    assert!(close(Some(cell("output_tokens_mean")), 4.0));
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(run_json["config"]["api"], "tgi");
    assert!(close(
        run_json["server_timings"][0]["queue"]["mean"].as_f64(),
        0.005
    ));
}

/// Equal up to the rounding of a mean (and of the 6-decimal CSV cells).
fn close(value: Option<f64>, want: f64) -> bool {
    value.is_some_and(|v| (v - want).abs() <= 1e-6 * want.abs().max(1.0))
}

/// A latency-only SLO (no TTFT limit) on a whole-response API, DJL-like: users pausing
/// between(1, 5) s as in the Locust report would be the think time; here back to back to keep
/// the test short. Requests past the timeout count as failures (not as latency), so a server
/// that answers slowly for some requests fails on its error rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_only_slo_on_a_whole_response_api() {
    let script: Script = Arc::new(|received: &Received| {
        // Every fifth request hangs past the client's timeout.
        if received.n % 5 == 4 {
            return vec![Act::Hang];
        }
        vec![
            wait_ms(20),
            whole_with(
                200,
                "application/json",
                &[],
                r#"{"generated_text":"ok","details":{"finish_reason":"length","generated_tokens":2}}"#,
            ),
        ]
    });
    let base = start(script).await;
    let out = common::scratch("probe-latency-only");
    let run = common::capplan_beside_the_stub(&[
        "probe",
        "--url",
        &base,
        "--api",
        "djl",
        "--model",
        "llama-3.1-8b",
        "--card",
        "L4",
        "--e2e",
        "500ms",
        "--percentile",
        "p90",
        "--concurrency",
        "2",
        "--warmup",
        "2",
        "--window",
        "60",
        "--timeout",
        "300ms",
        "--input-tokens",
        "16",
        "--output-tokens",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--format",
        "json",
    ])
    .await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let report = common::json(&run);
    assert_eq!(report["config"]["slo"]["ttft_s"], serde_json::Value::Null);
    let step = &report["steps"][0];
    // A fifth of the requests timed out: failures by kind, not latencies.
    let timeouts = step["failures_by_kind"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k[0] == "timeout")
        .and_then(|k| k[1].as_u64())
        .unwrap_or(0);
    let requests = step["requests"].as_u64().unwrap();
    assert!(
        timeouts * 10 >= requests,
        "{timeouts} timeouts of {requests}"
    );
    let e2e_max = step["e2e"]["p99"].as_f64().unwrap();
    assert!(
        e2e_max < 0.3,
        "timed-out requests are not latencies: p99 {e2e_max}"
    );
    // The error budget (1 %) fails the level; E2E alone would have passed.
    assert_eq!(report["result"]["c_star"], 0, "{}", report["limit"]);
    assert!(
        report["limit"].as_str().unwrap().contains("errors"),
        "{}",
        report["limit"]
    );
    assert!(!report["limit"].as_str().unwrap().contains("TTFT"));
}
