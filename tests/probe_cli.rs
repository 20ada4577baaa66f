//! `capplan probe` as a user runs it: exit codes, and secrets kept out of everything it writes.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use common::stub::{content, done, end, event, sse_head, start, usage, Received, Script};

/// Every file under `dir`, read as text.
fn all_text(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            text += &all_text(&path);
        } else {
            text += &String::from_utf8_lossy(&std::fs::read(&path).unwrap());
        }
    }
    text
}

#[test]
fn require_users_exits_3_when_c_star_is_short() {
    let out = common::scratch("require");
    let run = common::capplan(&[
        "probe",
        "--sim",
        "--model",
        "llama-3.1-8b",
        "--card",
        "H100-SXM",
        // In real time, so that a busy machine's client lag (multiplied by the time scale when
        // scaled) cannot excuse the failure as the machine's.
        "--sim-time-scale",
        "1",
        // No server answers within 1 ms: the first level fails, C* = 0.
        "--ttft",
        "1ms",
        "--concurrency",
        "1",
        "--window",
        "20",
        "--output-tokens",
        "8",
        "--require-users",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("below the required 2"),
        "{}",
        run.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_reach_the_server_and_no_file_or_output() {
    const PASSWORD: &str = "pa55-w0rd-in-url";
    const QUERY_KEY: &str = "qk-secret-777";
    const API_KEY: &str = "sk-env-key-31337";
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let heads = seen.clone();
    let script: Script = Arc::new(move |request: &Received| {
        if let Ok(mut heads) = heads.lock() {
            heads.push(request.head.clone());
        }
        vec![
            sse_head(),
            event(r#"{"choices":[{"index":0,"delta":{"role":"assistant"}}]}"#),
            content("a"),
            content("b"),
            usage(5, 2),
            done(),
            end(),
        ]
    });
    let base = start(script).await;
    let url =
        base.replace("http://", &format!("http://user:{PASSWORD}@")) + "/?api_key=" + QUERY_KEY;
    let out = common::scratch("secrets");
    let args: Vec<String> = [
        "probe",
        "--url",
        &url,
        "--api-key-env",
        "CAPPLAN_TEST_API_KEY",
        "--model",
        "llama-3.1-8b",
        "--card",
        "L4",
        "--ttft",
        "5s",
        "--concurrency",
        "2",
        "--warmup",
        "2",
        "--window",
        "60",
        "--out",
        out.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    let run = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_capplan"))
            .args(&args)
            .env("CAPPLAN_TEST_API_KEY", API_KEY)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("runs")
    })
    .await
    .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert_eq!(run.status.code(), Some(0), "{stdout}\n{stderr}");
    // The key was sent...
    let heads = seen.lock().unwrap().join("\n");
    assert!(heads.contains(&format!("Bearer {API_KEY}")), "{heads}");
    assert!(
        heads.contains(&format!("POST /v1/chat/completions?api_key={QUERY_KEY} ")),
        "the API path goes before the base URL's query: {heads}"
    );
    // ...and is nowhere in what the probe wrote or printed.
    let written = all_text(&out) + &stdout + &stderr;
    assert!(
        written.contains("REDACTED"),
        "the URL is recorded, redacted"
    );
    for secret in [PASSWORD, QUERY_KEY, API_KEY] {
        assert!(!written.contains(secret), "{secret} leaked");
    }

    // Resuming that run needs the URL again: its credentials were not stored.
    let dir = std::fs::read_dir(out.join("llama-3.1-8b").join("L4-tp1"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let resumed = common::capplan(&["probe", "--resume", dir.to_str().unwrap()]);
    assert_eq!(resumed.code, 2, "{}", resumed.stderr);
    assert!(resumed.stderr.contains("--url"), "{}", resumed.stderr);
    assert!(!resumed.stderr.contains(PASSWORD));
}

/// `probe --sim` of llama-3.1-8b on an H100 with 64-token prompts, 16-token replies, 2 warm-up
/// and 20 counted requests a level into `out`, then `extra`; the JSON report.
fn small_sim_probe(out: &std::path::Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "probe",
        "--sim",
        "--model",
        "llama-3.1-8b",
        "--card",
        "H100-SXM",
        "--ttft",
        "10s",
        "--warmup",
        "2",
        "--window",
        "20",
        "--input-tokens",
        "64",
        "--output-tokens",
        "16",
        "--out",
        out.to_str().unwrap(),
        "--format",
        "json",
    ];
    args.extend(extra);
    let run = common::capplan(&args);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    common::json(&run)
}

/// The server's Prometheus counters are scraped around each level: against `capplan serve`
/// (in-process, `--sim`) the engine's finished-request counter and busy time show up per level
/// in steps.csv and run.json; a busy share is a fraction of the level's time.
#[test]
fn levels_carry_the_servers_scraped_counters() {
    let out = common::scratch("scrape");
    let report = small_sim_probe(&out, &["--concurrency", "2,4"]);
    for step in report["steps"].as_array().unwrap() {
        let scraped = &step["server_metrics"];
        assert_eq!(scraped["engine"], "capplan", "{step}");
        // Every request the level sent finished inside the two scrapes (warm-up, counted, tail).
        let finished = scraped["requests"].as_f64().unwrap();
        let sent = step["sent"].as_f64().unwrap();
        // (a previous level's cancelled tail may still finish on the server meanwhile).
        assert!(
            finished >= 20.0 && finished <= sent + 4.0,
            "{finished} of {sent}"
        );
        let busy = scraped["busy_share"].as_f64().unwrap();
        assert!(busy > 0.0 && busy <= 1.05, "busy share {busy}");
    }
    let dir = std::path::PathBuf::from(report["run_dir"].as_str().unwrap());
    let steps = std::fs::read_to_string(dir.join("steps.csv")).unwrap();
    assert!(steps.lines().next().unwrap().contains("metrics_busy_share"));
    assert!(
        steps.lines().nth(1).unwrap().contains(",capplan,"),
        "{steps}"
    );
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(
        run_json["server_timings"][0]["metrics"]["engine"],
        "capplan"
    );
}

/// `probe --sim` runs the deployment the probe says it measures — here one prefill and one
/// decode worker speculating — records it in run.json, and streams every reply whole (the
/// decode worker's accepted runs never overshoot a reply's length).
#[test]
fn a_simulated_probe_runs_and_records_the_deployment_it_names() {
    let out = common::scratch("probe-pd");
    let report = small_sim_probe(
        &out,
        &[
            "--concurrency",
            "2",
            "--pd",
            "1:1",
            "--speculative",
            "eagle:2@0.6",
        ],
    );
    let step = &report["steps"][0];
    assert_eq!(step["output_tokens_mean"], 16.0, "{step}");
    assert_eq!(step["server_metrics"]["engine"], "capplan");
    let dir = std::path::PathBuf::from(report["run_dir"].as_str().unwrap());
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    let layout = &run_json["config"]["layout"];
    assert_eq!(layout["pd"]["decode"], 1, "{layout}");
    assert_eq!(layout["speculation"]["draft_tokens"], 2, "{layout}");
}

/// The layout and SLO the prefix-cache test probes and predicts.
const L4_8B: [&str; 6] = ["--model", "llama-3.1-8b", "--card", "L4", "--ttft", "10s"];

/// Mean TTFT of a `probe --sim` level of 4 users sending 2 000-token prompts, with `extra`,
/// and how late the simulated server sent first tokens against its own schedule (both in
/// engine seconds).
fn probed_mean_ttft(name: &str, extra: &[&str]) -> (f64, f64) {
    let out = common::scratch(name);
    let mut args = vec!["probe", "--sim"];
    args.extend(L4_8B);
    args.extend([
        "--concurrency",
        "4",
        "--window",
        "20",
        "--input-tokens",
        "2000",
        "--output-tokens",
        "16",
        "--out",
        out.to_str().unwrap(),
        "--format",
        "json",
    ]);
    args.extend(extra);
    let run = common::capplan(&args);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let step = &common::json(&run)["steps"][0];
    (
        step["ttft"]["mean"].as_f64().unwrap(),
        step["server_metrics"]["first_token_lateness_s"]
            .as_f64()
            .unwrap_or(0.0),
    )
}

#[test]
fn a_shared_prefix_is_served_from_the_simulated_prefix_cache_as_predicted() {
    // 90 % of every prompt common to the level: the server prefills the rest only.
    let (unique, _) = probed_mean_ttft("prefix-none", &[]);
    let (shared, late) = probed_mean_ttft("prefix-shared", &["--prefix-share", "0.9"]);
    assert!(
        shared < 0.5 * unique,
        "mean TTFT {shared:.3} s with 90 % shared vs {unique:.3} s with unique prompts"
    );
    // predict, told the same share, bounds what the served engine did. A user's first token
    // takes at least one prefill alone (predict's TTFT at 1 user) and at most the four users'
    // prefills back to back (all four arriving in one iteration), plus however late the
    // time-scaled server delivered it. Where in that range a run lands depends on how the
    // users fell into step, which varies from run to run.
    let mut args = vec!["predict"];
    args.extend(L4_8B);
    args.extend([
        "--input-tokens",
        "2000",
        "--output-tokens",
        "16",
        "--prefix-share",
        "0.9",
        "--format",
        "json",
    ]);
    let predicted = common::capplan(&args);
    assert_eq!(predicted.code, 0, "{}", predicted.stderr);
    let curve = common::json(&predicted)["curve"].clone();
    let alone = curve
        .as_array()
        .unwrap()
        .iter()
        .find(|level| level["concurrency"] == 1)
        .map(|level| level["ttft"]["mean"].as_f64().unwrap())
        .expect("the predicted curve starts at 1 user");
    assert!(
        shared >= 0.95 * alone && shared <= 4.0 * alone + late,
        "probed {shared:.3} s (first tokens {late:.3} s late) outside one to four prefills of \
         {alone:.3} s"
    );
    // A dataset's prompts are the dataset's: a prefix share does not apply.
    let mut args = vec!["probe", "--sim"];
    args.extend(L4_8B);
    args.extend(["--dataset", "x.jsonl", "--prefix-share", "0.5"]);
    let run = common::capplan(&args);
    assert_eq!(run.code, 2, "{}", run.stderr);
}
