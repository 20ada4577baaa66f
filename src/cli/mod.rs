//! Command-line arguments, and turning them into the library's requests.
//!
//! This file holds what clap parses; `options` turns it into the library's validated
//! options (requests, layouts, probe configurations), one `impl` per argument group.

mod options;

pub use options::{compare_options, folder_or_default, runs_folder, ResolvedSolve};

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use capplan::catalog::{Dtype, PdSplit};
use capplan::report::Format;
use capplan::sim::engine::Admission;
use capplan::sim::predict::RateSearch;
use capplan::sim::serve::fault::FaultRule;
use capplan::slo::{parse_positive_seconds, Percentile};
use capplan::store::import::ImportFormat;
use capplan::workload::{PrefixShare, Speculation, ThinkTime, TokenLengths};

#[derive(Debug, Parser)]
#[command(
    name = "capplan",
    version,
    about = "Plan LLM-serving fleets: measure, fit, predict and solve for nodes, splits and cost",
    long_about = None
)]
pub struct Cli {
    /// Catalog folder (cards.toml, nodes.toml, models.toml) that overrides and extends the
    /// built-in catalog [default: ./hardware when present]
    #[arg(long, global = true, value_name = "DIR")]
    pub hardware: Option<PathBuf>,

    /// Folder of measurements and capacity tables [default: ./measurements when present]
    #[arg(long, global = true, value_name = "DIR")]
    pub measurements: Option<PathBuf>,

    /// Output format
    #[arg(long, global = true, default_value = "table", value_parser = parse_input::<Format>)]
    pub format: Format,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Nodes, cards and the best instance split per candidate for a user population
    Solve(SolveArgs),
    /// The hardware catalog: cards, node shapes and models
    #[command(subcommand)]
    Hardware(HardwareCommand),
    /// Whether a model fits on TP cards, and how much KV cache is left
    Memory(MemoryArgs),
    /// Predict C* and the latency curve of a layout with the simulated engine (virtual time)
    Predict(PredictArgs),
    /// Serve the simulated engine over an OpenAI-compatible HTTP API (scaled real time)
    Serve(ServeArgs),
    /// Measure C* of a real endpoint (or the simulated engine with --sim)
    Probe(Box<ProbeArgs>),
    /// Fit throughput and latency curves to measured levels; C* at any SLO the data covers
    Fit(FitArgs),
    /// Fit the performance model's efficiency factors per card to measured runs
    Calibrate(CalibrateArgs),
    /// Cost every candidate over the period, rank by total cost, find the cheapest mix
    Compare(Box<CompareArgs>),
    /// Bring other tools' results in as a run folder under measurements/
    Import(ImportArgs),
    /// Score the performance model against the public measurements shipped as fixtures
    Validate(ValidateArgs),
    /// Print the completion script for a shell (bash, zsh, fish, elvish, powershell)
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Sources to score (comma-separated): silicon, silicon-moe, silicon-disagg, nim, dstack, blis, static-batch [default: all]
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    pub source: Vec<String>,
    /// Only rows served by these engines (comma-separated): vllm, sglang, trtllm, tgi
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    pub engine: Vec<String>,
    /// Print every row's measured and predicted figures
    #[arg(long)]
    pub details: bool,
    /// Fit engine constants on each source's fit subset, print them, and score with them
    /// (paste them into hardware/engines.toml): `overheads` (per step, per sequence, per
    /// request; the dense, NIM and BLIS fit rows), `moe` (per expert layer; the
    /// mixture-of-experts fit rows), `request` (time from a request's arrival to the engine;
    /// the mixture-of-experts fit rows), `out-of-step` (how far a benchmark's users fall out
    /// of step after its first wave; every aggregated source's fit rows), `handoff` (between
    /// disaggregated pools; the disaggregated fit rows), comma-separated; alone, all five in
    /// that order, each on the one before
    #[arg(long, value_name = "WHAT", num_args = 0..=1, default_missing_value = "all", value_delimiter = ',')]
    pub fit: Option<Vec<String>>,
    /// Time kernels with the roofline everywhere, setting the measured operator tables aside
    /// (the roofline's own error)
    #[arg(long)]
    pub roofline: bool,
    /// How benchmarks' closed-loop users start when their rows are simulated: `together`
    /// (all at once, each next request after a few ms of client jitter, as AIPerf's
    /// concurrency mode runs; a source measured on time windows keeps them) or `staggered`
    /// (spread over one request cycle: steady state)
    #[arg(long, default_value = "together", value_name = "MODE")]
    pub benchmark_start: String,
    /// With `--benchmark-start together`: the most a simulated client waits before each next
    /// request (uniform); how far users fall out of step after the first wave is the engine
    /// profile's `out_of_step` [default: 5ms]
    #[arg(long, value_parser = parse_limit, value_name = "DUR")]
    pub client_jitter: Option<f64>,
    /// Write the C* error bands (per engine and step-time basis, from the held-out sweeps,
    /// with and without operator tables) to FILE, e.g. hardware/bands.toml
    #[arg(long, value_name = "FILE")]
    pub write_bands: Option<PathBuf>,
    /// What if: simulate every row whose model can run it with this speculative decoding
    /// (e.g. mtp, mtp:3@0.8,0.6,0.4). The tables do not record it, so the default scores
    /// without; the sources scored this way say so
    #[arg(long, value_parser = parse_input::<Speculation>, value_name = "METHOD[:K][@A]")]
    pub speculative: Option<Speculation>,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The tool that wrote the files: steps-csv, evalscope, vllm-bench, guidellm, aiperf,
    /// genai-perf (`--format` is every command's output format)
    #[arg(long = "from", value_parser = parse_input::<ImportFormat>, value_name = "TOOL")]
    pub from: ImportFormat,
    /// Result files, or folders holding them
    #[arg(required = true, value_name = "FILE")]
    pub paths: Vec<PathBuf>,
    /// Catalog model the results were measured on
    #[arg(long)]
    pub model: String,
    /// Catalog card the results were measured on
    #[arg(long)]
    pub card: String,
    #[arg(long, default_value_t = 1)]
    pub tp: u32,
    /// Node shape the instance ran on (its link) [default: the card's own link]
    #[arg(long)]
    pub node: Option<String>,
    #[arg(long, default_value_t = 1)]
    pub instances_per_node: u32,
    #[arg(long)]
    pub cards_per_node: Option<u32>,
    /// Prompt tokens of the workload [default: the files' mean]
    #[arg(long, value_parser = parse_input::<TokenLengths>, value_name = "D")]
    pub input_tokens: Option<TokenLengths>,
    /// Output tokens of the workload [default: the files' mean]
    #[arg(long, value_parser = parse_input::<TokenLengths>, value_name = "D")]
    pub output_tokens: Option<TokenLengths>,
    /// Think time of the measured users
    #[arg(long, default_value = "0s", value_parser = parse_input::<ThinkTime>, value_name = "DUR")]
    pub think_time: ThinkTime,
    #[command(flatten)]
    pub parallel: ParallelFlags,
    #[command(flatten)]
    pub deployment: DeploymentFlags,
    /// Where run folders go [default: the --measurements folder, else ./measurements]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// Run folders or folders of them (probe runs, imports)
    #[arg(required = true, value_name = "RUN")]
    pub paths: Vec<PathBuf>,
    /// Most Nelder–Mead iterations per card
    #[arg(long, default_value_t = 120)]
    pub iterations: u64,
    /// Report only; write no calibration
    #[arg(long)]
    pub dry_run: bool,
    /// Engine that served the runs (its scheduler and overheads are the starting point):
    /// vllm, sglang, trtllm, tgi [default: vllm]
    #[arg(long, value_name = "NAME")]
    pub engine: Option<String>,
}

#[derive(Debug, Args)]
pub struct FitArgs {
    /// Run folders, folders of run folders (e.g. measurements/), or steps tables (CSV)
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// TTFT limit for C* [default: the run's own SLO]
    #[arg(long, value_parser = parse_limit, value_name = "DUR")]
    pub ttft: Option<f64>,
    /// TPOT limit for C*
    #[arg(long, value_parser = parse_limit, value_name = "DUR")]
    pub tpot: Option<f64>,
    /// End-to-end latency limit for C*
    #[arg(long, value_parser = parse_limit, value_name = "DUR")]
    pub e2e: Option<f64>,
    /// Statistic the limits apply to: mean, p50, p90, p95, p99 [default: the run's, else p90]
    #[arg(long, value_parser = parse_input::<Percentile>)]
    pub percentile: Option<Percentile>,
    /// Levels with more failures than this are left out of latency fits and cap C*
    /// [default: the run's, else 0.01]
    #[arg(long, value_parser = parse_fraction)]
    pub max_error_rate: Option<f64>,
    /// Think time of the measured users [default: the run's, else 0s]
    #[arg(long, value_parser = parse_input::<ThinkTime>, value_name = "DUR")]
    pub think_time: Option<ThinkTime>,
    /// Write fit.json and charts here instead of beside the data
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("target").args(["url", "sim", "resume"]).required(true).multiple(true))]
pub struct ProbeArgs {
    /// Base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000 (with --resume: the
    /// URL again, when the run's stored one had its credentials removed)
    #[arg(long, conflicts_with = "sim")]
    pub url: Option<String>,
    /// Probe capplan's simulated engine of --model/--card/--tp, started in-process
    #[arg(long)]
    pub sim: bool,
    /// Continue an interrupted run from what its folder recorded (other flags are ignored)
    #[arg(long, value_name = "RUN_DIR")]
    pub resume: Option<PathBuf>,
    /// API kind: chat, completions (OpenAI-compatible), tgi (/generate_stream), triton
    /// (generate extension), kserve (v2 infer, no streaming), djl (SageMaker/DJL JSON, no
    /// streaming), template (--api-template)
    #[arg(long, default_value = "chat", value_parser = capplan::probe::api::ApiKind::NAMES)]
    pub api: String,
    /// The request and response of `--api template`: a TOML file (path, body with {{prompt}},
    /// {{max_tokens}}, {{model}}, {{batch}}; JSON Pointers output, output_tokens, …)
    #[arg(long, value_name = "FILE.toml")]
    pub api_template: Option<PathBuf>,
    /// The server's Prometheus counters, scraped around each level [default: <url>/metrics;
    /// Triton serves them on another port, e.g. http://host:8002/metrics]
    #[arg(long, value_name = "URL")]
    pub metrics_url: Option<String>,
    /// Model name to send in requests [default: --model]
    #[arg(long)]
    pub served_model: Option<String>,
    /// Catalog model behind the endpoint
    #[arg(long, required_unless_present = "resume")]
    pub model: Option<String>,
    /// Catalog card behind the endpoint
    #[arg(long, required_unless_present = "resume")]
    pub card: Option<String>,
    #[arg(long, default_value_t = 1)]
    pub tp: u32,
    /// Node shape the instance runs on (its link; with --sim, the simulated link)
    #[arg(long)]
    pub node: Option<String>,
    #[arg(long)]
    pub cards_per_node: Option<u32>,
    #[arg(long, default_value_t = 1)]
    pub instances_per_node: u32,
    /// Instances sharing one card behind --url (e.g. two server processes on one GPU, load
    /// balanced); needs --tp 1. C* is then divided among them for capacity points
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub instances_per_card: u32,
    #[command(flatten)]
    pub parallel: ParallelFlags,
    #[command(flatten)]
    pub deployment: DeploymentFlags,
    /// Time-to-first-token limit, e.g. 3s, 800ms (may be left out when --e2e is the limit:
    /// a latency-only SLO, e.g. --e2e 50ms --percentile p99 for an image service)
    #[arg(long, value_parser = parse_limit, value_name = "DUR", required_unless_present_any = ["resume", "e2e"])]
    pub ttft: Option<f64>,
    /// Time-per-output-token limit, e.g. 100ms
    #[arg(long, value_parser = parse_limit, value_name = "DUR")]
    pub tpot: Option<f64>,
    /// Statistic the limits apply to: mean, p50, p90, p95, p99
    #[arg(long, default_value = "p90", value_parser = parse_input::<Percentile>)]
    pub percentile: Percentile,
    /// End-to-end latency limit, e.g. 30s
    #[arg(long, value_parser = parse_limit, value_name = "DUR")]
    pub e2e: Option<f64>,
    /// Largest share of failed requests a passing step may have
    #[arg(long, default_value_t = 0.01, value_parser = parse_fraction)]
    pub max_error_rate: f64,
    /// Prompts from a JSONL file ({"question"}, {"prompt"} or ShareGPT conversations)
    #[arg(long, value_name = "FILE.jsonl", conflicts_with = "input_tokens")]
    pub dataset: Option<PathBuf>,
    /// Synthetic prompt tokens: 512, 100..1000, normal:512,128
    #[arg(long, value_parser = parse_input::<TokenLengths>, value_name = "D")]
    pub input_tokens: Option<TokenLengths>,
    /// Open every synthetic prompt of a level with this share of words common to all its
    /// requests (a system prompt the server's prefix cache can reuse): 0.4 or 40% [default:
    /// 0, every prompt unique from its first word]
    #[arg(long, value_parser = parse_input::<PrefixShare>, value_name = "SHARE", allow_hyphen_values = true, conflicts_with = "dataset")]
    pub prefix_share: Option<PrefixShare>,
    /// Output tokens asked for (max_tokens with ignore_eos)
    #[arg(long, default_value = "256", value_parser = parse_input::<TokenLengths>, value_name = "D")]
    pub output_tokens: TokenLengths,
    /// Think time between a response and the same user's next request
    #[arg(long, default_value = "0s", value_parser = parse_input::<ThinkTime>, value_name = "DUR")]
    pub think_time: ThinkTime,
    /// Fixed levels instead of the automatic search, e.g. 1,2,4,8
    #[arg(long, value_delimiter = ',', value_name = "C,...")]
    pub concurrency: Vec<u32>,
    /// First level of the automatic search
    #[arg(long, default_value_t = 1)]
    pub start: u32,
    /// Highest level the search tries
    #[arg(long, default_value_t = 1024)]
    pub max_concurrency: u32,
    /// Bisect until the bracket is this narrow: 5% or 0.05
    #[arg(long, default_value = "5%", value_parser = parse_share)]
    pub resolution: f64,
    /// Requests discarded at the start of each step [default: 2 × concurrency, at least 5]
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Requests counted per judgement [default: 2 × concurrency, 50..500]; an inconclusive step
    /// gets up to three more windows
    #[arg(long)]
    pub window: Option<usize>,
    /// Per-request deadline
    #[arg(long, default_value = "300s", value_parser = parse_limit, value_name = "DUR")]
    pub timeout: f64,
    /// Longest silence within a stream before it counts as failed
    #[arg(long, default_value = "60s", value_parser = parse_limit, value_name = "DUR")]
    pub idle_timeout: f64,
    /// Environment variable holding the API key (sent as a bearer token, never stored)
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// Count tokens with this tokenizer.json when the server reports no usage [default: count
    /// chunks and mark the figure as estimated]
    #[arg(long, value_name = "FILE")]
    pub tokenizer: Option<PathBuf>,
    /// Non-streaming requests (E2E only)
    #[arg(long)]
    pub no_stream: bool,
    /// Where run folders go [default: the --measurements folder, else ./measurements]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// With --sim: run the engine F times faster than real time
    #[arg(long, default_value_t = 10.0, value_parser = parse_scale)]
    pub sim_time_scale: f64,
    /// With --sim: inject faults, KIND:FRACTION (see `capplan serve --help`)
    #[arg(long, value_parser = parse_input::<FaultRule>, value_name = "KIND:FRACTION")]
    pub sim_fault: Vec<FaultRule>,
    /// Exit with code 3 when C* is below N (a CI gate)
    #[arg(long, value_name = "N")]
    pub require_users: Option<u32>,
    /// With --url: the server runs F times faster than real time (`capplan serve
    /// --time-scale F`, a scaled stub); think times and timeouts are divided by F, measured
    /// times multiplied, so the run reads in the server's seconds
    #[arg(long, default_value_t = 1.0, value_parser = parse_scale, conflicts_with = "sim", value_name = "F")]
    pub time_scale: f64,
    /// Each user sends N requests per level, then stops (Locust's per-user budget); prompts
    /// come from one shared queue. The level counts every request after the warm-up
    #[arg(long, value_name = "N")]
    pub requests_per_user: Option<usize>,
    /// Start R users per second (Locust's spawn rate) [default: all at once]; requests before
    /// the last user started are warm-up
    #[arg(long, value_name = "R", value_parser = parse_spawn_rate)]
    pub spawn_rate: Option<f64>,
    /// perf_analyzer's stability rule: measure windows of --window requests until the last
    /// three agree within this share on throughput and on the percentile's latency, e.g. 10%
    #[arg(long, value_parser = parse_share, value_name = "SHARE")]
    pub stability: Option<f64>,
    /// Items per request at every level (`{{batch}}`/`{{prompts}}` of --api template)
    #[arg(long, value_name = "N", conflicts_with = "batch_sizes")]
    pub batch_size: Option<u32>,
    /// Sweep batch sizes at one --concurrency and report the knee (the batch after which
    /// latency per item jumps), e.g. 1,2,4,8,16,32
    #[arg(long, value_delimiter = ',', value_name = "B,...")]
    pub batch_sizes: Vec<u32>,
    /// A knee is a rise in latency per item of at least this share over the cheapest batch
    /// so far
    #[arg(long, default_value = "5%", value_parser = parse_share, value_name = "SHARE")]
    pub knee_jump: f64,
    /// Threads the client reads streams on: one is the cheapest per request and keeps up with
    /// about a thousand streams; raise it when the self-check flags the client
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256), value_name = "N")]
    pub client_threads: u16,
    /// Soak: hold the one --concurrency level this long (e.g. 8h), with statistics per
    /// --interval in soak.csv and memory that stays flat however long it runs
    #[arg(long, value_parser = parse_limit, value_name = "DUR")]
    pub duration: Option<f64>,
    /// With --duration: close an interval of statistics this often
    #[arg(long, default_value = "1m", value_parser = parse_limit, value_name = "DUR", requires = "duration")]
    pub interval: f64,
}

/// One serving instance: a model on TP cards, linked as in a node shape.
#[derive(Debug, Args)]
pub struct LayoutArgs {
    #[arg(long)]
    pub model: String,
    #[arg(long)]
    pub card: String,
    #[arg(long, default_value_t = 1)]
    pub tp: u32,
    #[command(flatten)]
    pub parallel: ParallelFlags,
    /// Node shape the instance runs on: its link, its network and whether its cards are all
    /// peers [default: the catalog's largest node of the card on the card's own link]
    #[arg(long)]
    pub node: Option<String>,
}

/// What a measured deployment ran beside its layout, recorded with its capacity points.
#[derive(Debug, Args)]
pub struct DeploymentFlags {
    /// The server is a disaggregated deployment of P prefill and D decode workers, each of
    /// the layout given (e.g. 1:3); its C* is divided among the workers
    #[arg(long, value_parser = parse_input::<PdSplit>, value_name = "P:D")]
    pub pd: Option<PdSplit>,
    #[command(flatten)]
    pub speculative: SpeculativeArgs,
}

/// The layout beyond tensor parallelism (mixture-of-experts models and multi-node instances).
#[derive(Debug, Args, Clone, Copy)]
pub struct ParallelFlags {
    /// Pipeline stages (the layers cut into PP groups of --tp × --attention-dp cards each)
    #[arg(long, default_value_t = 1, value_name = "PP")]
    pub pp: u32,
    /// Expert-parallel ranks: the routed experts spread whole over EP of a stage's cards
    #[arg(long, default_value_t = 1, value_name = "EP")]
    pub ep: u32,
    /// Attention data-parallel replicas, each --tp cards wide with its own batch and KV cache,
    /// sharing the experts
    #[arg(long, default_value_t = 1, value_name = "DP")]
    pub attention_dp: u32,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub layout: LayoutArgs,
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// 0 picks a free port; the first line printed is the URL
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Run the engine F times faster than real time
    #[arg(long, default_value_t = 1.0, value_parser = parse_scale)]
    pub time_scale: f64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output length when a request sets no max_tokens (where the model would stop)
    #[arg(long, default_value = "256", value_parser = parse_input::<TokenLengths>, value_name = "D")]
    pub output_tokens: TokenLengths,
    /// Inject a fault into a share of requests: reset, http500, http429, stall, malformed,
    /// error-in-stream or no-done, as KIND:FRACTION (repeatable)
    #[arg(long, value_parser = parse_input::<FaultRule>, value_name = "KIND:FRACTION")]
    pub fault: Vec<FaultRule>,
    /// How long a stalled stream stays silent before the server closes it
    #[arg(long, default_value = "600s", value_parser = parse_limit, value_name = "DUR")]
    pub stall_for: f64,
    /// Write the server's record of every request (JSON lines) to FILE
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Model name clients must send [default: the catalog name]
    #[arg(long)]
    pub served_model_name: Option<String>,
    /// Serve a disaggregated deployment: this many prefill and decode workers of the layout
    /// (e.g. 1:3), prompts' KV moved between them over the node shape's network
    #[arg(long, value_parser = parse_input::<PdSplit>, value_name = "P:D")]
    pub pd: Option<PdSplit>,
    #[command(flatten)]
    pub speculative: SpeculativeArgs,
    #[command(flatten)]
    pub engine: EngineFlags,
    #[command(flatten)]
    pub memory: MemoryFlags,
}

#[derive(Debug, Args)]
pub struct PredictArgs {
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Instances per node, to print users per node
    #[arg(long, default_value_t = 1)]
    pub instances_per_node: u32,
    /// The disaggregated deployment shown beside the prediction: this many prefill and
    /// decode workers (e.g. 1:3) [default: the split with the most users per card]
    #[arg(long, value_parser = parse_input::<PdSplit>, value_name = "P:D")]
    pub pd: Option<PdSplit>,
    /// Prefill workers' tensor-parallel width in the disaggregated deployment [default: the
    /// best of the layout's own and its halvings that hold the model]
    #[arg(long, value_name = "TP")]
    pub prefill_tp: Option<u32>,
    /// Prefill workers' expert-parallel ranks and attention data-parallel replicas (with
    /// --prefill-tp) [default: 1]
    #[arg(long, value_name = "EP", requires = "prefill_tp")]
    pub prefill_ep: Option<u32>,
    #[arg(long, value_name = "DP", requires = "prefill_tp")]
    pub prefill_attention_dp: Option<u32>,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Think time between a response and the user's next request: 0s, 2s, 1s..3s, exp:2s
    #[arg(long, default_value = "0s", value_parser = parse_input::<ThinkTime>, value_name = "DUR")]
    pub think_time: ThinkTime,
    #[command(flatten)]
    pub slo: SloArgs,
    /// Highest concurrency the search tries
    #[arg(long, default_value_t = 4096)]
    pub max_concurrency: u32,
    /// Open loop instead of closed-loop users: Poisson arrivals at these rates (requests/s,
    /// e.g. 2,4,8), or `auto` to find the highest rate that meets the SLO
    #[arg(long, value_parser = parse_input::<RateSearch>, value_name = "R,...|auto")]
    pub rate: Option<RateSearch>,
    /// Measure each level as this benchmark measures it, to set the prediction beside its
    /// results: aiperf, vllm-bench, guidellm, evalscope (every user started together, every
    /// request counted), genai-perf (Perf Analyzer's time windows) [default: the steady state
    /// of users spread over a request cycle, what plans assume]
    #[arg(long, value_parser = parse_input::<ImportFormat>, value_name = "TOOL", conflicts_with = "rate")]
    pub measured_as: Option<ImportFormat>,
    /// With --measured-as: requests the benchmark counts per user at a level [default: 10]
    #[arg(long, value_name = "N", requires = "measured_as")]
    pub requests_per_user: Option<f64>,
    /// Seed of the simulated request lengths and think times
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also show where the time of a few telling iterations goes (a prompt alone, one
    /// sequence decoding, the batch at C* decoding, a prompt joining it): weights, attention,
    /// communication and the engine's overhead
    #[arg(long)]
    pub breakdown: bool,
    #[command(flatten)]
    pub engine: EngineFlags,
    #[command(flatten)]
    pub memory: MemoryFlags,
}

#[derive(Debug, Args)]
pub struct WorkloadArgs {
    /// Prompt tokens: 512, 100..1000 (uniform), normal:512,128[,MIN..MAX] [default: 512]
    #[arg(long, value_parser = parse_input::<TokenLengths>, value_name = "D", conflicts_with = "dataset")]
    pub input_tokens: Option<TokenLengths>,
    /// Output tokens, same forms [default: the dataset's reply lengths when every entry has one,
    /// else 256]
    #[arg(long, value_parser = parse_input::<TokenLengths>, value_name = "D")]
    pub output_tokens: Option<TokenLengths>,
    /// Prompt (and reply) lengths from a JSONL dataset: {"question"}, {"prompt"}, ShareGPT
    /// conversations or OpenAI messages
    #[arg(long, value_name = "FILE.jsonl")]
    pub dataset: Option<PathBuf>,
    /// Count the dataset's tokens with this tokenizer.json [default: estimate, four ASCII
    /// characters or one other character per token]
    #[arg(long, value_name = "FILE", requires = "dataset")]
    pub tokenizer: Option<PathBuf>,
    /// Share of each prompt the engine's prefix cache already holds — a system prompt every
    /// request repeats, a conversation's earlier turns: 0.4 or 40% [default: 0]
    #[arg(long, value_parser = parse_input::<PrefixShare>, value_name = "SHARE", allow_hyphen_values = true)]
    pub prefix_share: Option<PrefixShare>,
    #[command(flatten)]
    pub speculative: SpeculativeArgs,
}

#[derive(Debug, Args)]
pub struct SpeculativeArgs {
    /// Speculative decoding and the workload's acceptance of its drafts: mtp (the model's MTP
    /// module, one token accepted at 0.85 as DeepSeek-V3's report gives), mtp:2@0.85,0.3,
    /// eagle:3@0.7 (a draft head), draft:MODEL:4@0.6 (a draft model of the catalog); @A is the
    /// chance a draft token is kept given the ones before it were [default: none]
    #[arg(long, value_parser = parse_input::<Speculation>, value_name = "METHOD[:K][@A]")]
    pub speculative: Option<Speculation>,
}

#[derive(Debug, Args)]
pub struct EngineFlags {
    /// Serving engine to model: vllm, sglang, trtllm or tgi (its scheduler defaults, per-step
    /// overhead and measured kernels; see `capplan hardware list engines`) [default: vllm]
    #[arg(long, value_name = "NAME")]
    pub engine: Option<String>,
    /// Most sequences one instance runs at once (vLLM max_num_seqs) [default: the engine's]
    #[arg(long)]
    pub max_running: Option<usize>,
    /// Most tokens one engine step processes (vLLM max_num_batched_tokens) [default: the
    /// engine's]
    #[arg(long)]
    pub token_budget: Option<u64>,
    /// Prompt tokens an engine step admits before it stops taking new prompts (SGLang
    /// max_prefill_tokens: the prompt that crosses it still runs, up to --token-budget)
    /// [default: none, only the token budget]
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(1..))]
    pub prompt_budget: Option<u64>,
    /// When waiting requests join a running batch: continuous (vLLM), delayed (TGI's defaults:
    /// after 20 steps or when 1.2 × running are waiting) or delayed:STEPS,RATIO [default: the
    /// engine's]
    #[arg(long, value_parser = parse_input::<Admission>)]
    pub admission: Option<Admission>,
}

#[derive(Debug, Args)]
pub struct SolveArgs {
    /// A scenario file (plans/*.toml) holding the whole question; flags given as well override
    /// what it says. Its reports go to plans/out/ (or --out)
    #[arg(value_name = "SCENARIO.toml")]
    pub scenario: Option<PathBuf>,

    /// Users to serve (counted as the capacity points count them; see --think-time)
    #[arg(long, value_parser = parse_users, allow_hyphen_values = true, conflicts_with = "rps")]
    pub users: Option<u64>,

    /// Requests per second to serve (converted through the E2E latency at C*)
    #[arg(long, value_parser = parse_rate, allow_hyphen_values = true)]
    pub rps: Option<f64>,

    /// Time-to-first-token limit, e.g. 3s, 3.15s, 800ms
    #[arg(long, value_parser = parse_limit, value_name = "DUR")]
    pub ttft: Option<f64>,

    /// Time-per-output-token limit, e.g. 100ms
    #[arg(long, value_parser = parse_limit, value_name = "DUR")]
    pub tpot: Option<f64>,

    /// End-to-end latency limit per request, e.g. 200ms; alone (without --ttft) for a service
    /// that is not a token stream, such as an image classifier
    #[arg(long, value_parser = parse_limit, value_name = "DUR")]
    pub e2e: Option<f64>,

    /// Statistic the limits apply to: mean, p50, p90, p95, p99 [default: p90]
    #[arg(long, value_parser = parse_input::<Percentile>)]
    pub percentile: Option<Percentile>,

    /// Think time between a response and the user's next request: 0s, 2s, 1s..3s. Without it,
    /// users are counted as each capacity point counted them
    #[arg(long, value_parser = parse_input::<ThinkTime>, value_name = "DUR")]
    pub think_time: Option<ThinkTime>,

    /// Models to plan (comma-separated) [default: every model with capacity points]
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    pub model: Vec<String>,

    /// Candidate cards or node shapes (comma-separated) [default: every node shape]
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub cards: Vec<String>,

    /// Extra capacity on top of demand: 0.2 = 20 % [default: 0]
    #[arg(long, value_parser = parse_fraction, allow_hyphen_values = true)]
    pub headroom: Option<f64>,

    /// Spare nodes per candidate (N+k) [default: 0]
    #[arg(long)]
    pub spares: Option<u32>,

    /// Use only measured and imported capacity; never predict
    #[arg(long)]
    pub no_predict: bool,

    /// Where a scenario's reports go [default: plans/out]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Workload of predicted rows (measured rows keep the workload they were measured with)
    #[command(flatten)]
    pub workload: WorkloadArgs,

    /// Engine whose scheduler, overheads and measured kernels predicted rows model: vllm,
    /// sglang, trtllm, tgi [default: the scenario's, else vllm]
    #[arg(long, value_name = "NAME")]
    pub engine: Option<String>,

    #[command(flatten)]
    pub memory: MemoryFlags,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    #[command(flatten)]
    pub solve: SolveArgs,

    /// Amortisation period, years [default: 3]
    #[arg(long)]
    pub years: Option<f64>,

    /// Electricity price, US$ per kWh [default: 0.12]
    #[arg(long, value_name = "USD")]
    pub power_price: Option<f64>,

    /// Data-centre power usage effectiveness [default: 1.3]
    #[arg(long)]
    pub pue: Option<f64>,

    /// Share of their TDP the cards draw at the planned load [default: 1]
    #[arg(long, value_name = "FRACTION")]
    pub card_power: Option<f64>,

    /// Rent at the catalog's cloud $/h instead of buying
    #[arg(long)]
    pub cloud: bool,

    /// Nodes already owned, NODE:COUNT (repeatable): their purchase is not counted again
    #[arg(long, value_name = "NODE:COUNT")]
    pub inventory: Vec<String>,

    /// Find the cheapest mix of node types as well (exact integer program)
    #[arg(long)]
    pub mix: bool,
}

#[derive(Debug, Args)]
pub struct SloArgs {
    /// Time-to-first-token limit, e.g. 3s, 3.15s, 800ms
    #[arg(long, value_parser = parse_limit, value_name = "DUR")]
    pub ttft: f64,

    /// Time-per-output-token limit, e.g. 100ms
    #[arg(long, value_parser = parse_limit, value_name = "DUR")]
    pub tpot: Option<f64>,

    /// Statistic the limits apply to: mean, p50, p90, p95, p99
    #[arg(long, default_value = "p90", value_parser = parse_input::<Percentile>)]
    pub percentile: Percentile,
}

#[derive(Debug, Args)]
pub struct MemoryFlags {
    /// Weight dtype [default: the model's]: fp32, fp16, bf16, fp8, int8, int4
    #[arg(long, value_parser = parse_input::<Dtype>)]
    pub dtype: Option<Dtype>,

    /// KV-cache dtype [default: fp16]
    #[arg(long, value_parser = parse_input::<Dtype>)]
    pub kv_dtype: Option<Dtype>,

    /// Share of card memory the engine may use [default: the engine's, 0.9 for vLLM]
    #[arg(long, value_parser = parse_fraction)]
    pub mem_util: Option<f64>,

    /// GiB per card reserved for activations and runtime buffers
    #[arg(long, default_value_t = 1.0, value_parser = parse_fraction)]
    pub reserve_gib: f64,

    /// Tokens one sequence must be able to hold [default: the model's context, at most 4096]
    #[arg(long, value_name = "TOKENS")]
    pub context: Option<u32>,
}

#[derive(Debug, Subcommand)]
pub enum HardwareCommand {
    /// List cards, node shapes, models and/or engine profiles
    List {
        #[arg(value_enum, default_value = "all")]
        what: ListWhat,
    },
    /// Show one card, node shape, model or engine profile with every field and its source
    Show { name: String },
    /// Rebuild hardware/operators/ from an NVIDIA AIConfigurator checkout's measured
    /// operator timings (Parquet)
    ImportOperators {
        /// The AIConfigurator repository (or its systems/data folder)
        #[arg(long, value_name = "DIR")]
        from: PathBuf,
        /// Where the reduced tables go
        #[arg(long, value_name = "DIR", default_value = "hardware/operators")]
        out: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ListWhat {
    Cards,
    Nodes,
    Models,
    Engines,
    All,
}

#[derive(Debug, Args)]
pub struct MemoryArgs {
    #[arg(long)]
    pub model: String,
    #[arg(long)]
    pub card: String,
    #[arg(long, default_value_t = 1)]
    pub tp: u32,
    #[command(flatten)]
    pub parallel: ParallelFlags,
    #[command(flatten)]
    pub memory: MemoryFlags,
}

/// Any value that reads itself from text with an [`capplan::InputError`], for clap.
fn parse_input<T>(text: &str) -> Result<T, String>
where
    T: std::str::FromStr<Err = capplan::InputError>,
{
    text.parse()
        .map_err(|err: capplan::InputError| err.to_string())
}

fn parse_limit(text: &str) -> Result<f64, String> {
    parse_positive_seconds(text).map_err(|err| err.to_string())
}

fn parse_share(text: &str) -> Result<f64, String> {
    match capplan::workload::prefix::read_share(text) {
        Some(v) if v > 0.0 && v < 1.0 => Ok(v),
        _ => Err(format!("expected a share such as 5% or 0.05, got '{text}'")),
    }
}

/// `text` as a finite number above 0, or `expected` with what was given.
fn positive_number(text: &str, expected: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(value) if value.is_finite() && value > 0.0 => Ok(value),
        _ => Err(format!("{expected}, got '{text}'")),
    }
}

fn parse_spawn_rate(text: &str) -> Result<f64, String> {
    positive_number(text, "expected users per second above 0 (e.g. 2 or 0.5)")
}

fn parse_scale(text: &str) -> Result<f64, String> {
    positive_number(text, "time scale must be a number above 0 (e.g. 10)")
}

fn parse_users(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(users) if users > 0 => Ok(users),
        _ => Err(format!(
            "users must be a whole number above 0 (e.g. 10000), got '{text}'"
        )),
    }
}

fn parse_rate(text: &str) -> Result<f64, String> {
    positive_number(
        text,
        "a rate must be a number of requests per second above 0 (e.g. 25)",
    )
}

fn parse_fraction(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(value) if value.is_finite() && value >= 0.0 => Ok(value),
        _ => Err(format!("expected a number of 0 or more, got '{text}'")),
    }
}
