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

/// The server's Prometheus counters are scraped around each level: against `capplan serve`
/// (in-process, `--sim`) the engine's finished-request counter and busy time show up per level
/// in steps.csv and run.json; a busy share is a fraction of the level's time.
#[test]
fn levels_carry_the_servers_scraped_counters() {
    let out = common::scratch("scrape");
    let run = common::capplan(&[
        "probe",
        "--sim",
        "--model",
        "llama-3.1-8b",
        "--card",
        "H100-SXM",
        "--ttft",
        "10s",
        "--concurrency",
        "2,4",
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
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let report = common::json(&run);
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
