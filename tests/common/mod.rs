//! Running the built `capplan` binary from the repository root, as a user would.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use capplan::probe::api::{Api, OpenAiChat, Prompt};
use capplan::probe::client::Endpoint;

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the capplan binary off an async runtime's threads, so a stub server on that runtime
/// keeps serving while capplan talks to it.
pub async fn capplan_beside_the_stub<S: AsRef<str>>(args: &[S]) -> Run {
    let args: Vec<String> = args.iter().map(|s| s.as_ref().to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        capplan(&args)
    })
    .await
    .expect("the capplan run")
}

/// `capplan predict` of DeepSeek-R1 on H200s at TTFT ≤ 2 s, then `extra` flags.
pub fn predict_r1(extra: &[&str]) -> Run {
    let mut args = vec![
        "predict",
        "--model",
        "deepseek-r1",
        "--card",
        "H200",
        "--ttft",
        "2s",
    ];
    args.extend(extra);
    capplan(&args)
}

pub fn capplan(args: &[&str]) -> Run {
    capplan_in(env!("CARGO_MANIFEST_DIR").into(), args)
}

pub fn capplan_in(dir: PathBuf, args: &[&str]) -> Run {
    let output: Output = Command::new(env!("CARGO_BIN_EXE_capplan"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the capplan binary runs");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

pub fn json(run: &Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|err| {
        panic!(
            "stdout is not JSON ({err}):\n{}\n{}",
            run.stdout, run.stderr
        )
    })
}

/// A fresh scratch folder for one test, removed when the test is done with it — kept when
/// the test fails (dropped while panicking), with its path printed, so what it wrote can be
/// read.
pub struct Scratch(Option<tempfile::TempDir>);

impl Scratch {
    pub fn path(&self) -> &Path {
        self.0.as_ref().map_or(Path::new(""), |dir| dir.path())
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.path()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        self.path()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Some(dir) = self.0.take() {
                eprintln!("scratch folder kept: {}", dir.keep().display());
            }
        }
    }
}

pub fn scratch(name: &str) -> Scratch {
    let dir = tempfile::Builder::new()
        .prefix(&format!("capplan-test-{name}-"))
        .tempdir()
        .expect("scratch folder");
    Scratch(Some(dir))
}

/// The shipped `hardware/engines.toml` with its one line starting `key` (a key a single
/// profile sets) read as `line` instead: a catalog override one value away from the shipped.
pub fn shipped_engines_with(key: &str, line: &str) -> String {
    let shipped = std::fs::read_to_string("hardware/engines.toml").expect("hardware/engines.toml");
    let old = shipped
        .lines()
        .find(|l| l.starts_with(key))
        .unwrap_or_else(|| panic!("a {key} line in hardware/engines.toml"));
    let changed = shipped.replace(old, line);
    assert_ne!(changed, shipped, "{line} is already there");
    changed
}

/// A scratch catalog folder named `name` holding the shipped `hardware/engines.toml` with `line`
/// in place of the one starting `key` (see [`shipped_engines_with`]).
pub fn scratch_engines_with(name: &str, key: &str, line: &str) -> Scratch {
    let hardware = scratch(name);
    std::fs::write(
        hardware.path().join("engines.toml"),
        shipped_engines_with(key, line),
    )
    .unwrap();
    hardware
}

pub mod closed_loop;
pub mod simulated_run;

/// Starts `capplan serve` in-process on 127.0.0.1, port 0; returns its base URL. The server
/// lives as long as the test's runtime.
pub async fn start_server(
    model: &str,
    card: &str,
    tp: u32,
    time_scale: f64,
    faults: Vec<capplan::sim::serve::fault::FaultRule>,
    log: Option<PathBuf>,
) -> String {
    use capplan::catalog::Catalog;
    use capplan::sim::predict::{engine_for, Calibration, Layout};
    use capplan::sim::serve::fault::FaultPlan;
    use capplan::sim::serve::{start, ServeConfig};

    let catalog = Catalog::shipped().expect("catalog");
    let model = catalog.model(model).expect("model");
    let card = catalog.card(card).expect("card");
    let layout = Layout::on_card(model, card, tp);
    let calibration = Calibration::for_card(card, &card.interconnect);
    let (engine, _) =
        engine_for(&layout, &calibration, &Default::default(), true).expect("layout fits");
    let config = ServeConfig {
        host: "127.0.0.1".into(),
        port: 0,
        time_scale,
        seed: 1,
        model_name: model.name.clone(),
        output_tokens: capplan::workload::TokenLengths::Fixed { tokens: 64 },
        faults: FaultPlan::new(faults, 1).expect("faults"),
        stall_for: std::time::Duration::from_secs(3),
        log,
    };
    let server = start(engine, config).await.expect("server started");
    let url = server.url.clone();
    // The server lives until the test's runtime ends.
    std::mem::forget(server);
    url
}
pub mod stub;

/// An OpenAI chat endpoint at `base` for model `m` with four pooled connections, as the probe
/// makes one.
pub fn chat_endpoint(
    base: &str,
    stream: bool,
    key: Option<&str>,
    timeout: Duration,
    idle: Duration,
) -> Endpoint {
    let api: Arc<dyn Api> = Arc::new(OpenAiChat);
    Endpoint::new(
        base,
        api,
        "m",
        key.map(String::from),
        stream,
        timeout,
        idle,
        4,
    )
    .expect("client")
}

/// The prompt the client tests send: a run tag and three tokens.
pub fn hello_prompt() -> Prompt {
    Prompt {
        text: "tag-0-0 hello there".into(),
        tokens: 3,
    }
}
