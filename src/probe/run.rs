//! A whole probe: set up the endpoint, prompts and run folder, search for C*, write it all down.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::api::template::ApiTemplate;
use super::api::{Api, ApiKind};
use super::client::Endpoint;
use super::prompts::PromptSource;
use super::run_dir;
use super::search::{bracket, next_level_guided, Bracket, Ramp};
use super::soak::{run_soak, Soak, SoakReport, SOAK_FILE};
use super::step::{run_step, ProbeContext, StepSpec, StepSummary};
use super::verdict::{min_samples, Verdict};
use crate::error::InputError;
use crate::fit::knee::{find_knee, BatchKnee, BatchPoint};
use crate::slo::{format_seconds, Slo};
use crate::workload::dataset::read_dataset;
use crate::workload::tokens::LocalTokenizer;
use crate::workload::{PrefixShare, ThinkTime, TokenLengths};

/// What is being probed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Target {
    /// A real endpoint. `time_scale` > 1 when it runs that many times faster than real time
    /// (`capplan serve --time-scale`, a scaled test stub): think times and timeouts are
    /// divided by it and measured times multiplied, so the run reads in the server's seconds.
    Url {
        url: String,
        #[serde(default = "real_time", skip_serializing_if = "is_real_time")]
        time_scale: f64,
    },
    /// capplan's simulated engine, started in-process, running `time_scale`× fast, with
    /// `faults` (`KIND:FRACTION`) injected.
    Sim {
        time_scale: f64,
        faults: Vec<String>,
    },
}

fn real_time() -> f64 {
    1.0
}

fn is_real_time(scale: &f64) -> bool {
    *scale == 1.0
}

impl Target {
    /// How many times faster than real time the server runs.
    pub fn time_scale(&self) -> f64 {
        match self {
            Target::Url { time_scale, .. } | Target::Sim { time_scale, .. } => *time_scale,
        }
    }
}

/// How users load the server within a level, beyond closed-loop concurrency and think time
/// (the shapes Locust and perf_analyzer users know).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoadShape {
    /// Each user sends this many requests per level and stops (Locust's per-user budget);
    /// prompts come from one queue shared by all users, so none is sent twice in a level. The
    /// level then ends when every user has spent its budget, and counts every request after
    /// the warm-up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests_per_user: Option<usize>,
    /// Users started per second (Locust's spawn rate); `None`: all at once. Requests that
    /// start before the last user has started are warm-up, never counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawn_rate: Option<f64>,
    /// perf_analyzer's stability rule: a level is measured in windows of `--window` requests
    /// until the last three agree within this share (max ÷ min − 1 ≤ it) on requests per
    /// second and on the SLO's percentile of latency, then judged on those three; at most ten
    /// windows, after which the level is marked unstable and judged on all of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stability: Option<f64>,
    /// Items per request (`{{batch}}` / `{{prompts}}` of a template API) at every level.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<u32>,
    /// A batch-size sweep: one level per size at the one concurrency given, then the knee
    /// (the size after which latency per item jumps).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub batch_sizes: Vec<u32>,
    /// How much dearer an item must get, against the cheapest batch so far, to be a knee
    /// (`None`: 5 %).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub knee_jump: Option<f64>,
    /// A soak: the one level held this long, with statistics per interval (no search).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soak: Option<Soak>,
}

/// A knee is a rise of at least 5 % in latency per item: the Paddle Serving sweep's step is
/// 7.5 %, and its noise between neighbouring batches below 2 %.
pub const DEFAULT_KNEE_JUMP: f64 = 0.05;

/// Where prompts come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Input {
    Synthetic {
        tokens: TokenLengths,
        /// Share of each prompt common to every request of a level (`--prefix-share`).
        #[serde(default, skip_serializing_if = "PrefixShare::is_none")]
        prefix_share: PrefixShare,
    },
    Dataset {
        path: PathBuf,
    },
}

/// The layout behind the endpoint, as the user describes it (for the capacity point).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayoutInfo {
    pub model: String,
    pub card: String,
    pub tp: u32,
    pub cards_per_node: Option<u32>,
    pub instances_per_node: u32,
    /// Instances sharing one card behind this URL (two server processes on one GPU, load
    /// balanced): the run measures all of them together, and a capacity point made from it
    /// divides C* among them.
    #[serde(default = "one_instance", skip_serializing_if = "is_one_instance")]
    pub instances_per_card: u32,
    pub interconnect: String,
    /// The layout beyond `tp` and the deployment behind the URL, recorded for the capacity
    /// point: pipeline stages, expert ranks, attention replicas; prefill and decode workers;
    /// speculative decoding.
    #[serde(default = "one_instance", skip_serializing_if = "is_one_instance")]
    pub pp: u32,
    #[serde(default = "one_instance", skip_serializing_if = "is_one_instance")]
    pub ep: u32,
    #[serde(default = "one_instance", skip_serializing_if = "is_one_instance")]
    pub attention_dp: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pd: Option<crate::catalog::PdSplit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculation: Option<crate::workload::Speculation>,
}

fn one_instance() -> u32 {
    1
}

fn is_one_instance(value: &u32) -> bool {
    *value == 1
}

/// Everything that defines a run; stored in `run.json` so `--resume` needs nothing else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeConfig {
    pub target: Target,
    /// `chat`, `completions`, `tgi`, `triton`, `kserve`, `djl` or `template`.
    pub api: String,
    /// The request and response description of `--api template` (kept whole, so a resumed
    /// run needs no file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_template: Option<ApiTemplate>,
    /// The model name sent in requests.
    pub served_model: String,
    pub stream: bool,
    pub layout: LayoutInfo,
    pub slo: Slo,
    pub e2e_limit_s: Option<f64>,
    pub max_error_rate: f64,
    pub input: Input,
    pub output_tokens: TokenLengths,
    pub think_time: ThinkTime,
    pub ramp: Ramp,
    /// Requests discarded at the start of each step; `None`: as many as the concurrency (≥ 5).
    pub warmup: Option<usize>,
    /// Requests counted per judgement; `None`: 2 × concurrency, 50..=500.
    pub window: Option<usize>,
    pub timeout_s: f64,
    pub idle_timeout_s: f64,
    /// The environment variable holding the API key (the key itself is never stored).
    pub api_key_env: Option<String>,
    /// Where the server's Prometheus counters are; `None`: `<base>/metrics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_url: Option<String>,
    /// A local `tokenizer.json` that counts tokens when the server reports no usage.
    #[serde(default)]
    pub tokenizer: Option<PathBuf>,
    pub seed: u64,
    /// Per-user budgets, spawn rate, stability windows, batch sizes.
    #[serde(default)]
    pub load: LoadShape,
    /// Threads the client reads streams on (see [`runtime_for`]).
    #[serde(default = "one_thread")]
    pub client_threads: usize,
    /// The command line, for the record.
    pub command: Vec<String>,
}

fn one_thread() -> usize {
    1
}

/// The async runtime a probe of `config` runs on.
///
/// Against a URL the client runs on one thread unless asked for more: every token arrives as a
/// TCP segment, and on one thread a wake-up reads whatever segments arrived meanwhile, with no
/// hand-over between threads — measured with `cargo bench --bench client`, the cheapest way to
/// read hundreds of streams per core. One thread keeps up with about a thousand streams at
/// 10 ms per token on a laptop-class core; beyond that the self-check flags the client as the
/// bottleneck and `--client-threads` spreads the users over more. The simulated engine of
/// `--sim` runs in the same process, so it gets every core.
pub fn runtime_for(config: &ProbeConfig) -> std::io::Result<tokio::runtime::Runtime> {
    match (&config.target, config.client_threads) {
        (Target::Url { .. }, 0 | 1) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        (Target::Url { .. }, threads) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build(),
        (Target::Sim { .. }, _) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    }
}

impl ProbeConfig {
    fn api(&self) -> Result<Arc<dyn Api>, InputError> {
        self.api_with_batch(self.load.batch.unwrap_or(1))
    }

    /// The API sending `batch` items per request (only a template API can).
    fn api_with_batch(&self, batch: u32) -> Result<Arc<dyn Api>, InputError> {
        let template = self.api_template.as_ref().map(|t| t.with_batch(batch));
        ApiKind::build(&self.api, template.as_ref())
    }

    /// Checks what the flags cannot: batches need a template whose body sends them, and a
    /// sweep needs its one concurrency.
    pub fn check_load(&self) -> Result<(), InputError> {
        let wants_batch =
            self.load.batch.is_some_and(|b| b != 1) || !self.load.batch_sizes.is_empty();
        if wants_batch && !self.api_template.as_ref().is_some_and(ApiTemplate::batches) {
            return Err(InputError::value(
                "--batch-size and --batch-sizes need --api template with a body that sends the batch \
                 ({{batch}} or {{prompts}})",
            ));
        }
        if self.load.batch_sizes.contains(&0) || self.load.batch == Some(0) {
            return Err(InputError::value("batch sizes must be at least 1"));
        }
        if !self.load.batch_sizes.is_empty() && self.single_concurrency().is_none() {
            return Err(InputError::value(
                "--batch-sizes sweeps at one concurrency: give exactly one --concurrency N",
            ));
        }
        if self.layout.instances_per_card > 1 && self.layout.tp != 1 {
            return Err(InputError::value(format!(
                "--instances-per-card {} shares one card between instances: give --tp 1, not {}",
                self.layout.instances_per_card, self.layout.tp
            )));
        }
        if self.load.requests_per_user.is_some() && self.load.stability.is_some() {
            return Err(InputError::value(
                "--stability measures until three windows agree, --requests-per-user stops after a \
                 fixed budget: give one of them",
            ));
        }
        if self.load.requests_per_user == Some(0) {
            return Err(InputError::value("--requests-per-user must be at least 1"));
        }
        if let Some(soak) = &self.load.soak {
            if self.single_concurrency().is_none() {
                return Err(InputError::value(
                    "--duration holds one level: give exactly one --concurrency N",
                ));
            }
            let others = [
                (self.load.requests_per_user.is_some(), "--requests-per-user"),
                (self.load.stability.is_some(), "--stability"),
                (!self.load.batch_sizes.is_empty(), "--batch-sizes"),
            ];
            if let Some((_, flag)) = others.iter().find(|(given, _)| *given) {
                return Err(InputError::value(format!(
                    "--duration holds one level for a time; {flag} shapes a search's levels: give one of them"
                )));
            }
            if soak.interval_s > soak.duration_s {
                return Err(InputError::value(format!(
                    "--interval {} is longer than --duration {}: give an interval within the soak",
                    format_seconds(soak.interval_s),
                    format_seconds(soak.duration_s)
                )));
            }
        }
        Ok(())
    }

    /// The one concurrency a batch sweep or a soak runs at (`--concurrency N` alone).
    fn single_concurrency(&self) -> Option<u32> {
        match &self.ramp {
            Ramp::Fixed(levels) if levels.len() == 1 => Some(levels[0]),
            _ => None,
        }
    }

    fn step_spec(&self, step: u32, concurrency: u32) -> StepSpec {
        let c = concurrency as usize;
        // Enough for a finite confidence interval of the percentile asked (half again, so the
        // first judgement is usually decisive), and two requests per user. One per user halves
        // the cost of the top levels but widens the intervals: a level just under C* is then
        // more often still unsure after its extra batches and counted as a fail, and C* came
        // out up to 10 % low against the simulator's truth (tests/probe_sim.rs).
        let needed = min_samples(self.slo.percentile) * 3 / 2;
        let batch = self
            .window
            .unwrap_or((2 * c).clamp(50, 500).max(needed))
            .max(1);
        StepSpec {
            step,
            concurrency,
            // Two requests per user: all users start at once, and the burst's queue outlasts the
            // first wave. Measured on the simulator (llama-3.1-8b, L4, 198 users, TTFT p90 ≤ 1 s):
            // with one request per user the counted window still held the burst and the level
            // failed early in 3 of 3 runs (p90 1.70–1.81 s); with two it passed in 3 of 3
            // (0.65–0.73 s), as the steady state the predictor models does.
            warmup: self.warmup.unwrap_or((2 * c).max(5)),
            batch,
            // A window given smaller than the percentile needs still reaches a verdict: its
            // extra batches go on until the interval can close.
            max_counted: (4 * batch).max(min_samples(self.slo.percentile).div_ceil(batch) * batch),
            requests_per_user: self.load.requests_per_user,
            spawn_rate: self.load.spawn_rate,
            stability: self.load.stability,
            items: self.load.batch.unwrap_or(1),
        }
    }
}

/// What a probe found, for people and programs.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeReport {
    pub run_dir: PathBuf,
    pub status: String,
    pub config: ProbeConfig,
    pub steps: Vec<StepSummary>,
    pub result: Bracket,
    /// Why the first failing level failed.
    pub limit: String,
    /// Wall seconds the server was under load, and requests sent, over the whole run.
    pub server_seconds: f64,
    pub requests_sent: usize,
    /// Steps whose client was possibly the bottleneck.
    pub client_flagged_steps: Vec<u32>,
    /// False when the server refused `stream_options` and token counts came from chunks.
    pub usage_from_server: bool,
    /// A batch sweep's levels (items per request, mean latency) and its knee.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub batch_sweep: Vec<BatchPoint>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub knee: Option<BatchKnee>,
    /// A soak's intervals and totals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soak: Option<SoakReport>,
    pub notes: Vec<String>,
}

/// New run folder under `out`, or continue the run in `resume`.
pub enum RunFolder {
    New { out: PathBuf },
    Resume { dir: PathBuf },
}

/// Reads a run's configuration back (for `--resume`).
pub fn load_config(dir: &Path) -> Result<ProbeConfig, InputError> {
    let path = dir.join(run_dir::RUN_FILE);
    let location = path.display().to_string();
    let text = std::fs::read_to_string(&path).map_err(|err| {
        InputError::file(
            &location,
            format!("cannot read ({err}); --resume takes a run folder"),
        )
    })?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|err| InputError::file(&location, err.to_string()))?;
    serde_json::from_value(value["config"].clone())
        .map_err(|err| InputError::file(&location, format!("config: {err}")))
}

fn run_json(config: &ProbeConfig, status: &str, report: Option<&ProbeReport>) -> serde_json::Value {
    let mut value = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "kind": "probe",
        "status": status,
        "config": config,
        "time_scale": config.target.time_scale(),
        "durations": "seconds of the server's time (an in-process simulator's engine time)",
    });
    if let Some(report) = report {
        value["result"] = serde_json::json!({
            "c_star": report.result.c_star,
            "last_pass": report.result.last_pass,
            "first_fail": report.result.first_fail,
            "limit": report.limit,
            "server_seconds": report.server_seconds,
            "requests_sent": report.requests_sent,
            "usage_from_server": report.usage_from_server,
        });
        if let Some(soak) = &report.soak {
            let mut summary = serde_json::to_value(soak).unwrap_or_default();
            if let Some(object) = summary.as_object_mut() {
                // The intervals are in soak.csv.
                object.remove("intervals");
            }
            value["soak"] = summary;
        }
        if !report.batch_sweep.is_empty() {
            value["batch_sweep"] = serde_json::json!({
                "concurrency": config.single_concurrency(),
                "levels": report.batch_sweep.iter().map(|p| serde_json::json!({
                    "batch": p.batch,
                    "latency_mean_s": p.latency_s,
                    "per_item_s": p.per_item_s(),
                })).collect::<Vec<_>>(),
                "knee": report.knee,
            });
        }
        value["client_self_check"] = serde_json::json!({
            "flagged_steps": report.client_flagged_steps,
            "steps": report.steps.iter().map(|s| serde_json::json!({
                "step": s.step, "concurrency": s.concurrency, "check": s.client
            })).collect::<Vec<_>>(),
        });
        // The server's own account per level, where it gave one (headers, llama.cpp timings).
        let server: Vec<serde_json::Value> = report
            .steps
            .iter()
            .filter(|s| {
                s.server_queue.is_some() || s.server_compute.is_some() || s.server_metrics.is_some()
            })
            .map(|s| {
                serde_json::json!({
                    "step": s.step, "concurrency": s.concurrency,
                    "queue": s.server_queue, "compute": s.server_compute,
                    "metrics": s.server_metrics,
                    "client_e2e": s.e2e,
                })
            })
            .collect();
        if !server.is_empty() {
            value["server_timings"] = serde_json::Value::Array(server);
        }
    }
    value
}

/// The status of a run stopped because the machine could not keep a time-scaled server on
/// schedule (see [`StepSummary::fail_within_delivery_delay`]).
pub const TOO_BUSY: &str = "machine-too-busy";

/// Why a run stopped at `step`'s level: what the client saw beside what the server sent.
fn too_busy_message(step: &StepSummary, time_scale: f64) -> String {
    let delay = step.delivery_delay_s.unwrap_or(0.0);
    format!(
        "machine too busy: at {} users the simulated server sent first tokens {} late on \
         average ({:.1} ms of wall time at {time_scale}× speed) and the level failed by no more \
         than that, twice: close other work or rerun with a lower --time-scale; the levels \
         measured so far are kept",
        step.concurrency,
        format_seconds(delay),
        delay / time_scale * 1000.0
    )
}

/// Runs (or resumes) a probe against `base_url`. `progress` draws a bar on a terminal.
pub async fn run_probe(
    mut config: ProbeConfig,
    base_url: &str,
    folder: RunFolder,
    progress: bool,
) -> anyhow::Result<ProbeReport> {
    config.check_load()?;
    let api = config.api()?;
    // E2E and token counts only: the API cannot stream (KServe v2 infer, DJL's JSON).
    config.stream &= api.streams();
    let api_key = match &config.api_key_env {
        Some(var) => Some(std::env::var(var).map_err(|_| {
            InputError::value(format!("--api-key-env names {var}, which is not set"))
        })?),
        None => None,
    };
    let prompts = match &config.input {
        Input::Synthetic {
            tokens,
            prefix_share,
        } => PromptSource::Synthetic {
            input: tokens.clone(),
            prefix_share: *prefix_share,
        },
        Input::Dataset { path } => PromptSource::Dataset {
            entries: read_dataset(path)?,
        },
    };
    let max_concurrency = match &config.ramp {
        Ramp::Auto { max, .. } => *max,
        Ramp::Fixed(levels) => levels.iter().copied().max().unwrap_or(1),
    };
    let tokenizer = match &config.tokenizer {
        Some(path) => Some(Arc::new(LocalTokenizer::load(path)?)),
        None => None,
    };
    let time_scale = config.target.time_scale();
    let endpoint_with = |api: Arc<dyn Api>| -> anyhow::Result<Endpoint> {
        Ok(Endpoint::new(
            base_url,
            api,
            &config.served_model,
            api_key.clone(),
            config.stream,
            Duration::from_secs_f64(config.timeout_s / time_scale),
            Duration::from_secs_f64(config.idle_timeout_s / time_scale),
            max_concurrency as usize,
        )?
        .with_metrics_url(config.metrics_url.clone())
        .with_tokenizer(tokenizer.clone()))
    };
    let endpoint = endpoint_with(api)?;

    let dir = match folder {
        RunFolder::New { out } => run_dir::create(
            &out,
            &config.layout.model,
            &config.layout.card,
            config.layout.tp,
        )
        .map_err(|err| {
            anyhow::anyhow!("cannot create a run folder under {}: {err}", out.display())
        })?,
        RunFolder::Resume { dir } => dir,
    };
    run_dir::write_run_json(&dir, &run_json(&config, "running", None))?;
    let (sink, writer) = run_dir::spawn_request_log(&dir)?;

    // Steps already recorded (resume) are replayed, not measured again.
    let mut verdicts: BTreeMap<u32, Verdict> = BTreeMap::new();
    // How close each level measured in this session came to its limits (guides bisection).
    let mut loads: BTreeMap<u32, f64> = BTreeMap::new();
    let mut server_seconds = 0.0;
    let mut requests_sent = 0usize;
    let mut step_number = 0u32;
    // A batch sweep's levels, replayed and measured: batch → mean E2E.
    let mut sweep: BTreeMap<u32, Option<f64>> = BTreeMap::new();
    for recorded in run_dir::read_recorded_steps(&dir)? {
        let verdict = match recorded.verdict.as_str() {
            "pass" => Some(Verdict::Pass),
            "fail" => Some(Verdict::Fail),
            // Failed by its delivery delay alone: no verdict on the engine; run it again.
            "late" => None,
            _ => Some(Verdict::Inconclusive),
        };
        if config.load.batch_sizes.is_empty() {
            if let Some(verdict) = verdict {
                verdicts.insert(recorded.concurrency, verdict);
            }
        } else {
            sweep.insert(recorded.batch, recorded.e2e_mean_s);
        }
        server_seconds += recorded.server_s;
        requests_sent += recorded.sent;
        step_number += 1;
    }
    let replayed = step_number;

    let bar = progress.then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    });
    let ctx = Arc::new(ProbeContext {
        endpoint: Arc::new(endpoint),
        prompts: Arc::new(prompts),
        output_tokens: config.output_tokens.clone(),
        think_time: config.think_time,
        slo: config.slo,
        e2e_limit: config.e2e_limit_s,
        max_error_rate: config.max_error_rate,
        run_tag: format!("r{}", run_dir::utc_stamp(std::time::SystemTime::now())),
        seed: config.seed.wrapping_add(u64::from(replayed)),
        run_start: Instant::now(),
        time_scale,
        sink,
        progress: bar.clone(),
    });
    let mut steps: Vec<StepSummary> = Vec::new();
    // Levels run again because they failed by their delivery delay alone (see `late`).
    let mut late_levels: BTreeMap<u32, u32> = BTreeMap::new();
    let mut too_busy: Option<String> = None;
    let time_scaled = time_scale != 1.0 || matches!(config.target, Target::Sim { .. });
    let mut soaked: Option<SoakReport> = None;
    let search = async {
        // A soak: the one level, held for its duration.
        if let (Some(soak), Some(concurrency)) = (config.load.soak, config.single_concurrency()) {
            if let Some(bar) = &bar {
                bar.set_message(format!(
                    "soak: {concurrency} users for {}",
                    format_seconds(soak.duration_s)
                ));
            }
            let warmup = config.step_spec(step_number, concurrency).warmup;
            let report = run_soak(&ctx, concurrency, warmup, soak, &dir.join(SOAK_FILE)).await?;
            verdicts.insert(
                concurrency,
                if report.pass {
                    Verdict::Pass
                } else {
                    Verdict::Fail
                },
            );
            server_seconds += report.intervals.last().map_or(0.0, |i| i.end_s) / time_scale;
            requests_sent += report.sent as usize;
            soaked = Some(report);
            return Ok::<_, anyhow::Error>(());
        }
        // A batch sweep: one level per batch size at its one concurrency, each with an API
        // sending that many items.
        if let Some(concurrency) = config
            .single_concurrency()
            .filter(|_| !config.load.batch_sizes.is_empty())
        {
            for &batch in &config.load.batch_sizes {
                if sweep.contains_key(&batch) {
                    continue;
                }
                if let Some(bar) = &bar {
                    bar.set_message(format!(
                        "step {step_number}: batch {batch} at {concurrency} users"
                    ));
                }
                let step_ctx = Arc::new(ProbeContext {
                    endpoint: Arc::new(endpoint_with(config.api_with_batch(batch)?)?),
                    ..(*ctx).clone()
                });
                let mut spec = config.step_spec(step_number, concurrency);
                spec.items = batch;
                // A sweep level measures latency per item, not a verdict: one window each.
                spec.max_counted = spec.batch;
                let summary = run_step(&step_ctx, spec).await;
                run_dir::append_step(&dir, &summary)?;
                sweep.insert(batch, summary.e2e.as_ref().map(|e| e.mean));
                server_seconds += summary.server_seconds;
                requests_sent += summary.sent;
                step_number += 1;
                steps.push(summary);
            }
            return Ok::<_, anyhow::Error>(());
        }
        while let Some(concurrency) = next_level_guided(&config.ramp, &verdicts, &loads) {
            if let Some(bar) = &bar {
                bar.set_message(format!(
                    "step {step_number}: {concurrency} users (C* so far ≥ {})",
                    bracket(&verdicts).last_pass
                ));
            }
            let mut summary = run_step(&ctx, config.step_spec(step_number, concurrency)).await;
            // A time-scaled server multiplies every late wall millisecond by its scale: a step
            // that failed only by its delivery delay while the server or the client ran late
            // measured the machine. It is written down as `late` and run again; twice late,
            // the machine is too busy for this scale.
            summary.late = time_scaled
                && summary.machine_was_late()
                && summary.fail_within_delivery_delay(time_scale);
            run_dir::append_step(&dir, &summary)?;
            server_seconds += summary.server_seconds;
            requests_sent += summary.sent;
            step_number += 1;
            if summary.late {
                let times = late_levels.entry(concurrency).or_insert(0);
                *times += 1;
                if *times >= 2 {
                    too_busy = Some(too_busy_message(&summary, time_scale));
                    steps.push(summary);
                    break;
                }
                steps.push(summary);
                continue;
            }
            let verdict = match summary.verdict.verdict {
                Verdict::Pass => Verdict::Pass,
                // Still unsure after the largest sample: never claim the capacity.
                _ => Verdict::Fail,
            };
            verdicts.insert(concurrency, verdict);
            if let Some(load) = summary.verdict.load() {
                loads.insert(concurrency, load);
            }
            steps.push(summary);
        }
        Ok::<_, anyhow::Error>(())
    };
    let interrupted = tokio::select! {
        result = search => { result?; false }
        _ = tokio::signal::ctrl_c() => true,
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }

    let batch_sweep: Vec<BatchPoint> = sweep
        .iter()
        .filter_map(|(&batch, mean)| mean.map(|latency_s| BatchPoint { batch, latency_s }))
        .collect();
    let knee = find_knee(
        &batch_sweep,
        config.load.knee_jump.unwrap_or(DEFAULT_KNEE_JUMP),
    );
    let found = bracket(&verdicts);
    let limit = steps
        .iter()
        .find(|s| Some(s.concurrency) == found.first_fail)
        .map(|s| s.verdict.explain())
        .or_else(|| {
            soaked
                .as_ref()
                .filter(|s| !s.pass)
                .map(|s| s.verdict.clone())
        })
        .unwrap_or_else(|| match found.first_fail {
            Some(_) => "recorded in an earlier session of this run".to_string(),
            None => format!("no level up to {max_concurrency} failed"),
        });
    let mut notes = Vec::new();
    if replayed > 0 {
        notes.push(format!(
            "resumed: {replayed} step(s) replayed from steps.csv"
        ));
    }
    if !config.stream && config.slo.ttft_s.is_finite() {
        notes
            .push("non-streaming: TTFT is not observable; the TTFT limit was judged on E2E".into());
    } else if !config.stream {
        notes.push("non-streaming: E2E and token counts only".into());
    }
    if time_scale != 1.0 {
        notes.push(format!(
            "server at {time_scale}× speed: durations, think times and timeouts are the server's seconds; the server time above is wall-clock ({:.0} s at the server's own speed)",
            server_seconds * time_scale
        ));
    }
    if let Some(message) = &too_busy {
        notes.push(message.clone());
    }
    let status = if interrupted {
        "interrupted"
    } else if too_busy.is_some() {
        TOO_BUSY
    } else {
        "finished"
    };
    let report = ProbeReport {
        run_dir: dir.clone(),
        status: status.into(),
        config: config.clone(),
        client_flagged_steps: steps
            .iter()
            .filter(|s| s.client.bottleneck)
            .map(|s| s.step)
            .collect(),
        usage_from_server: ctx.endpoint.usage_requested(),
        batch_sweep,
        knee,
        soak: soaked,
        steps,
        result: found,
        limit,
        server_seconds,
        requests_sent,
        notes,
    };
    drop(ctx);
    // Every request that finished is on disk before the run says so.
    writer
        .await
        .map_err(|err| anyhow::anyhow!("request log: {err}"))??;
    // A soak's requests stay on disk only: reading them back for Parquet would hold them
    // all in memory at once.
    if report.soak.is_none() {
        super::parquet::write_parquet(&dir)?;
    }
    run_dir::write_run_json(&dir, &run_json(&config, status, Some(&report)))?;
    Ok(report)
}
