//! One step of a probe: C closed-loop users against the endpoint until the step is judged.
//!
//! The first requests warm up (written, not counted). Then a window of requests is counted; the
//! load is held while the last counted request finishes (later requests are written as `tail`),
//! so neither the start nor the end of the window runs at lower concurrency. The step is judged
//! on its counted requests: an inconclusive verdict asks for another batch of requests (up to a
//! cap); a clear failure — the SLO confidently broken — ends the step early.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;
use tokio::sync::mpsc;

use super::client::Endpoint;
use super::metrics::{self, MetricsSplit};
use super::prompts::PromptSource;
use super::record::{FailureKind, Phase, RequestRecord};
use super::selfcheck::{ClientCheck, Watch};
use super::user::{record_cut_off, send_request, InFlightSlot, Users};
use super::verdict::{judge, Samples, StepVerdict, Verdict};
use crate::slo::Slo;
use crate::stats::Summary;
use crate::workload::{ThinkTime, TokenLengths};

/// What a probe keeps constant across steps (a batch sweep swaps the endpoint per step).
#[derive(Clone)]
pub struct ProbeContext {
    pub endpoint: Arc<Endpoint>,
    pub prompts: Arc<PromptSource>,
    pub output_tokens: TokenLengths,
    pub think_time: ThinkTime,
    pub slo: Slo,
    pub e2e_limit: Option<f64>,
    pub max_error_rate: f64,
    pub run_tag: String,
    pub seed: u64,
    pub run_start: Instant,
    /// Durations are multiplied by this (an in-process simulator running F× fast reports in
    /// engine seconds); 1 for a real endpoint.
    pub time_scale: f64,
    /// Every finished request goes here at once (the run's append-only log).
    pub sink: mpsc::UnboundedSender<RequestRecord>,
    /// A progress line on a terminal: step, requests, live pX against the SLO.
    pub progress: Option<indicatif::ProgressBar>,
}

/// How one step runs.
#[derive(Debug, Clone, Copy)]
pub struct StepSpec {
    pub step: u32,
    pub concurrency: u32,
    pub warmup: usize,
    /// Requests counted before the first judgement; an inconclusive step adds this many again.
    pub batch: usize,
    pub max_counted: usize,
    /// Each user sends this many requests and stops; the step counts all after the warm-up.
    pub requests_per_user: Option<usize>,
    /// Users started per second (server seconds); `None`: all at once.
    pub spawn_rate: Option<f64>,
    /// perf_analyzer's rule: windows of `batch` requests until the last three agree within
    /// this share on throughput and latency (see [`super::run::LoadShape`]).
    pub stability: Option<f64>,
    /// Items per request (1 unless the API sends a batch).
    pub items: u32,
}

/// Share of late engine iterations above which a time-scaled server was not on schedule: a
/// quiet machine wakes its timer within 2 ms nearly every time (the threshold the server
/// counts against), so one step in a hundred late already means other work held the cores.
pub const LATE_STEP_SHARE: f64 = 0.01;

/// perf_analyzer gives up after ten windows (its `--max-trials`).
const MAX_WINDOWS: usize = 10;

/// A step's statistics and verdict (one row of `steps.csv`).
#[derive(Debug, Clone, Serialize)]
pub struct StepSummary {
    pub step: u32,
    pub concurrency: u32,
    pub requests: usize,
    pub failures: usize,
    pub failures_by_kind: Vec<(FailureKind, usize)>,
    pub ttft: Option<Summary>,
    pub tpot: Option<Summary>,
    pub itl: Option<Summary>,
    pub e2e: Option<Summary>,
    /// E2E ÷ output tokens (what GuideLLM calls TPOT).
    pub e2e_per_token: Option<Summary>,
    /// The server's own account, where it gave one (timing headers, llama.cpp's `timings`):
    /// time queued, and time computing (prefill + decode, or its inference time). Set beside
    /// the client's E2E they split it as perf_analyzer does: client-side and network time is
    /// what neither covers.
    pub server_queue: Option<Summary>,
    pub server_compute: Option<Summary>,
    /// What the server's `/metrics` counters say about the step, where it exports known ones.
    pub server_metrics: Option<MetricsSplit>,
    /// Mean prompt and output tokens of the level's successful requests, as counted (the
    /// server's count where it reported one: chat templates and tags included, which is what
    /// the engine processed and what calibration must use).
    pub input_tokens_mean: Option<f64>,
    pub output_tokens_mean: Option<f64>,
    pub output_tokens_per_s: f64,
    pub requests_per_s: f64,
    pub verdict: StepVerdict,
    pub stopped_early: bool,
    /// Items per request (a batch API); 1 otherwise.
    pub batch: u32,
    /// Under the stability rule: whether the last three windows agreed (`None`: not asked).
    pub stable: Option<bool>,
    /// Requests sent in the step, all phases.
    pub sent: usize,
    /// Wall seconds of load on the server.
    pub server_seconds: f64,
    pub client: ClientCheck,
    /// How late, on average, the server sent first tokens against its engine's schedule
    /// (capplan serve's `/metrics`, engine seconds): what a busy machine added to every TTFT
    /// of a time-scaled simulator.
    pub delivery_delay_s: Option<f64>,
    /// Failed by its delivery delay alone on a time-scaled server (see
    /// [`StepSummary::fail_within_delivery_delay`]): written as verdict `late`, run again.
    pub late: bool,
}

impl StepSummary {
    /// The verdict as written in `steps.csv` and the table: `pass`, `fail`, `inconclusive`,
    /// or `late` for a level run again because the machine ran late.
    pub fn verdict_label(&self) -> String {
        if self.late {
            return "late".to_string();
        }
        serde_json::to_value(self.verdict.verdict)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default()
    }

    /// Whether the step failed only by what its delivery delay could explain: every limit it
    /// broke is on TTFT or E2E (both carry the delay), and each would not be confidently broken
    /// with the delay taken off. A time-scaled simulator on a busy machine fails steps this way;
    /// such a failure measures the machine, not the engine.
    /// The delay counted is the server's first-token lateness plus the client's own event-loop
    /// lag (its 99th percentile, in engine seconds at `time_scale`).
    pub fn fail_within_delivery_delay(&self, time_scale: f64) -> bool {
        let client = self.client.loop_lag_p99_ms / 1000.0 * time_scale;
        self.delivery_delay_s
            .is_some_and(|delay| self.verdict.fails_within(delay + client))
    }

    /// Whether the machine, not the engine, shaped this step: the server says more than
    /// [`LATE_STEP_SHARE`] of its iterations ended late, or the client's own loop lagged.
    pub fn machine_was_late(&self) -> bool {
        self.client.bottleneck
            || self
                .server_metrics
                .as_ref()
                .and_then(|m| m.late_step_share)
                .is_some_and(|share| share > LATE_STEP_SHARE)
    }
}

/// Runs one step and judges it.
pub async fn run_step(ctx: &Arc<ProbeContext>, spec: StepSpec) -> StepSummary {
    // The server's counters before the load starts and after it ends (see `metrics`).
    let scraped = ctx.endpoint.scrape().await.map(|s| (s, Instant::now()));
    let watch = Watch::start();
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let target = Arc::new(AtomicUsize::new(spec.batch));
    // Counted slots handed out so far: a worker claims one against the current target, so a
    // target raised later (an inconclusive step) is filled exactly, whatever the timing.
    let claimed = Arc::new(AtomicUsize::new(0));
    // Set when the step has what it needs; workers then stop at their next request and are
    // aborted where they wait (a request in flight, a think time), so nothing waits on a stop
    // signal while reading: a select on one would be polled again for every chunk received.
    let stop = Arc::new(AtomicBool::new(false));
    // Users started so far (all at once unless a spawn rate staggers them).
    let spawned = Arc::new(AtomicUsize::new(0));
    // Under a per-user budget every request after the warm-up counts, without a target.
    let budget = spec.requests_per_user;
    if budget.is_some() {
        target.store(usize::MAX, Ordering::SeqCst);
    }
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<RequestRecord>();

    let mut workers = Users::default();
    let slots: Vec<InFlightSlot> = (0..spec.concurrency)
        .map(|_| InFlightSlot::default())
        .collect();
    for (worker, slot) in (0..spec.concurrency).zip(slots.iter().cloned()) {
        let ctx = ctx.clone();
        let (next, target, claimed, stop, done_tx, spawned) = (
            next.clone(),
            target.clone(),
            claimed.clone(),
            stop.clone(),
            done_tx.clone(),
            spawned.clone(),
        );
        workers.spawn(async move {
            let mut rng =
                StdRng::seed_from_u64(ctx.seed ^ (u64::from(spec.step) << 32) ^ u64::from(worker));
            if let Some(rate) = spec.spawn_rate.filter(|r| *r > 0.0) {
                let delay = f64::from(worker) / rate / ctx.time_scale;
                tokio::time::sleep(Duration::from_secs_f64(delay)).await;
            }
            spawned.fetch_add(1, Ordering::SeqCst);
            let mut sent_by_me = 0usize;
            while !stop.load(Ordering::Relaxed) {
                if budget.is_some_and(|b| sent_by_me >= b) {
                    break;
                }
                sent_by_me += 1;
                let n = next.fetch_add(1, Ordering::Relaxed);
                let all_started = spawned.load(Ordering::SeqCst) >= spec.concurrency as usize;
                let phase = if (n as usize) < spec.warmup || !all_started {
                    Phase::Warmup
                } else if claim(&claimed, &target) {
                    Phase::Measured
                } else {
                    Phase::Tail
                };
                let record = send_request(
                    &ctx,
                    &slot,
                    &mut rng,
                    (spec.step, spec.concurrency),
                    n,
                    phase,
                )
                .await;
                if done_tx.send(record).is_err() {
                    break;
                }
                let think = ctx.think_time.sample(&mut rng) / ctx.time_scale;
                if think > 0.0 {
                    tokio::time::sleep(Duration::from_secs_f64(think)).await;
                }
            }
        });
    }
    drop(done_tx);

    let mut counted: Vec<RequestRecord> = Vec::new();
    let mut sent = 0usize;
    let mut stopped_early = false;
    let check_every = (spec.batch / 4).max(10);
    let mut verdict = None;
    let mut stable = None;
    if spec.stability.is_some() && budget.is_none() {
        target.store(spec.batch * MAX_WINDOWS, Ordering::SeqCst);
    }
    while let Some(record) = done_rx.recv().await {
        sent += 1;
        if record.phase != Phase::Measured {
            continue;
        }
        counted.push(record);
        let wanted = target.load(Ordering::Relaxed);
        if let Some(bar) = &ctx.progress {
            if counted.len() % 10 == 1 {
                show_progress(bar, ctx, spec, &counted, wanted);
            }
        }
        if let (Some(share), None) = (spec.stability, budget) {
            if counted.len().is_multiple_of(spec.batch) {
                if let Some(from) = stable_windows(&counted, spec.batch, share, ctx) {
                    stable = Some(true);
                    counted.drain(..from);
                    verdict = Some(judge_records(&counted, ctx));
                    break;
                }
                if counted.len() >= spec.batch * MAX_WINDOWS {
                    stable = Some(false);
                    verdict = Some(judge_records(&counted, ctx));
                    break;
                }
                continue;
            }
        } else if counted.len() >= wanted {
            let current = judge_records(&counted, ctx);
            if current.verdict == Verdict::Inconclusive && wanted + spec.batch <= spec.max_counted {
                target.store(wanted + spec.batch, Ordering::SeqCst);
                continue;
            }
            verdict = Some(current);
            break;
        }
        // A budget is spent whole (the shape of a Locust run): no early stop.
        if budget.is_none() && counted.len().is_multiple_of(check_every) && counted.len() >= 20 {
            let current = judge_records(&counted, ctx);
            if current.verdict == Verdict::Fail {
                stopped_early = true;
                verdict = Some(current);
                break;
            }
        }
    }
    if spec.stability.is_some() && verdict.is_none() {
        // The budget or the stream of requests ran out before the rule could be applied.
        stable = Some(false);
    }
    stop.store(true, Ordering::Relaxed);
    workers.stop().await;
    // Requests that finished while stopping are on disk already; count them as sent.
    while done_rx.try_recv().is_ok() {
        sent += 1;
    }
    // Requests still in flight were cut off: on record too, with what they had received.
    sent += record_cut_off(ctx, &slots, spec.step, spec.concurrency);
    let verdict = verdict.unwrap_or_else(|| judge_records(&counted, ctx));
    let client = watch.finish();
    let mut summary = summarize(
        spec,
        counted,
        verdict,
        stopped_early,
        sent,
        started.elapsed().as_secs_f64(),
        client,
        ctx,
    );
    summary.stable = stable;
    if let Some((before, at)) = scraped {
        if let Some(after) = ctx.endpoint.scrape().await {
            let wall = at.elapsed().as_secs_f64() * ctx.time_scale;
            summary.server_metrics = metrics::split(&before, &after, wall, sent);
        }
    }
    summary.delivery_delay_s = summary
        .server_metrics
        .as_ref()
        .and_then(|m| m.first_token_lateness_s);
    summary
}

fn show_progress(
    bar: &indicatif::ProgressBar,
    ctx: &ProbeContext,
    spec: StepSpec,
    counted: &[RequestRecord],
    wanted: usize,
) {
    let ttfts: Vec<f64> = counted.iter().filter_map(|r| r.ttft_s).collect();
    let live = crate::stats::statistic(&ttfts, ctx.slo.percentile);
    let wanted = if wanted == usize::MAX {
        "budget".to_string()
    } else {
        wanted.to_string()
    };
    bar.set_message(format!(
        "step {}: {} users · {}/{wanted} counted · TTFT {} {} (limit {}) · {} failed",
        spec.step,
        spec.concurrency,
        counted.len(),
        ctx.slo.percentile,
        crate::slo::format_seconds(live),
        crate::slo::format_seconds(ctx.slo.ttft_s),
        counted.iter().filter(|r| !r.ok).count()
    ));
}

/// perf_analyzer's stability rule on the last three windows of `batch` requests: requests
/// per second and the SLO's percentile of E2E latency each within `share` (max ÷ min − 1).
/// Returns where the three windows start in `counted` when they agree.
fn stable_windows(
    counted: &[RequestRecord],
    batch: usize,
    share: f64,
    ctx: &ProbeContext,
) -> Option<usize> {
    let windows: Vec<&[RequestRecord]> = counted.chunks(batch).collect();
    if windows.len() < 3 || windows.iter().any(|w| w.len() < batch) {
        return None;
    }
    let first = windows.len() - 3;
    // A window's throughput: its requests over the time from the previous window's last
    // completion (or, for the very first window, its first start) to its own last completion.
    let end_of = |r: &RequestRecord| r.start_s + r.e2e_s / ctx.time_scale;
    let latest_end = |w: &[RequestRecord]| w.iter().map(end_of).fold(f64::NEG_INFINITY, f64::max);
    let mut throughputs = Vec::new();
    let mut latencies = Vec::new();
    for index in first..windows.len() {
        let window = windows[index];
        let from = match index {
            0 => window
                .iter()
                .map(|r| r.start_s)
                .fold(f64::INFINITY, f64::min),
            _ => latest_end(windows[index - 1]),
        };
        throughputs.push(window.len() as f64 / (latest_end(window) - from).max(1e-9));
        let e2es: Vec<f64> = window.iter().filter(|r| r.ok).map(|r| r.e2e_s).collect();
        latencies.push(crate::stats::statistic(&e2es, ctx.slo.percentile));
    }
    (agree_within(&throughputs, share) && agree_within(&latencies, share)).then_some(first * batch)
}

/// Whether the largest of `values` is within `share` of the smallest (all positive, finite).
fn agree_within(values: &[f64], share: f64) -> bool {
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    min > 0.0 && max.is_finite() && max / min - 1.0 <= share + 1e-12
}

/// Takes one counted slot if any is left under the target.
fn claim(claimed: &AtomicUsize, target: &AtomicUsize) -> bool {
    let mut current = claimed.load(Ordering::SeqCst);
    loop {
        if current >= target.load(Ordering::SeqCst) {
            return false;
        }
        match claimed.compare_exchange(current, current + 1, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return true,
            Err(actual) => current = actual,
        }
    }
}

fn judge_records(records: &[RequestRecord], ctx: &ProbeContext) -> StepVerdict {
    let ok: Vec<&RequestRecord> = records.iter().filter(|r| r.ok).collect();
    let ttfts: Vec<f64> = ok
        .iter()
        .filter_map(|r| r.ttft_s.or(Some(r.e2e_s).filter(|_| !r.streamed)))
        .collect();
    let tpots: Vec<f64> = ok.iter().filter_map(|r| r.tpot_s).collect();
    let e2es: Vec<f64> = ok.iter().map(|r| r.e2e_s).collect();
    let samples = Samples {
        ttfts: &ttfts,
        tpots: &tpots,
        e2es: &e2es,
        failures: records.len() - ok.len(),
        total: records.len(),
    };
    judge(&samples, &ctx.slo, ctx.e2e_limit, ctx.max_error_rate)
}

#[allow(clippy::too_many_arguments)]
fn summarize(
    spec: StepSpec,
    counted: Vec<RequestRecord>,
    verdict: StepVerdict,
    stopped_early: bool,
    sent: usize,
    wall: f64,
    client: ClientCheck,
    ctx: &ProbeContext,
) -> StepSummary {
    let ok: Vec<&RequestRecord> = counted.iter().filter(|r| r.ok).collect();
    let ttfts: Vec<f64> = ok.iter().filter_map(|r| r.ttft_s).collect();
    let tpots: Vec<f64> = ok.iter().filter_map(|r| r.tpot_s).collect();
    let itls: Vec<f64> = ok.iter().flat_map(|r| r.itl_s.iter().copied()).collect();
    let e2es: Vec<f64> = ok.iter().map(|r| r.e2e_s).collect();
    let per_token: Vec<f64> = ok
        .iter()
        .filter(|r| r.output_tokens > 0)
        .map(|r| r.e2e_s / f64::from(r.output_tokens))
        .collect();
    let server_queue: Vec<f64> = ok
        .iter()
        .filter_map(|r| r.server.and_then(|t| t.queue_s))
        .collect();
    let server_compute: Vec<f64> = ok
        .iter()
        .filter_map(|r| r.server.and_then(|t| t.compute_s()))
        .collect();
    let mut by_kind: Vec<(FailureKind, usize)> = Vec::new();
    for kind in FailureKind::ALL {
        let n = counted
            .iter()
            .filter(|r| r.error_kind == Some(kind))
            .count();
        if n > 0 {
            by_kind.push((kind, n));
        }
    }
    // Throughput over the counted window: from the first counted start to the last end.
    let first = counted
        .iter()
        .map(|r| r.start_s)
        .fold(f64::INFINITY, f64::min);
    let last = counted
        .iter()
        .map(|r| r.start_s + r.e2e_s / ctx.time_scale)
        .fold(f64::NEG_INFINITY, f64::max);
    let window = ((last - first) * ctx.time_scale).max(1e-9);
    let tokens: u64 = ok.iter().map(|r| u64::from(r.output_tokens)).sum();
    StepSummary {
        step: spec.step,
        concurrency: spec.concurrency,
        requests: counted.len(),
        failures: counted.len() - ok.len(),
        failures_by_kind: by_kind,
        ttft: Summary::of(&ttfts),
        tpot: Summary::of(&tpots),
        itl: Summary::of(&itls),
        e2e: Summary::of(&e2es),
        e2e_per_token: Summary::of(&per_token),
        input_tokens_mean: mean_of(ok.iter().map(|r| f64::from(r.input_tokens))),
        output_tokens_mean: mean_of(ok.iter().map(|r| f64::from(r.output_tokens))),
        server_metrics: None,
        server_queue: Summary::of(&server_queue),
        server_compute: Summary::of(&server_compute),
        output_tokens_per_s: tokens as f64 / window,
        requests_per_s: ok.len() as f64 / window,
        batch: spec.items,
        stable: None,
        verdict,
        stopped_early,
        sent,
        server_seconds: wall,
        client,
        delivery_delay_s: None,
        late: false,
    }
}

fn mean_of(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}
