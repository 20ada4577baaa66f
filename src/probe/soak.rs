//! A soak: one level held for a long time (`--duration 8h`), with statistics per interval.
//!
//! Memory stays flat however long it runs: every request goes to the run's log on disk as it
//! finishes (as in a search), and the statistics are HDR histograms — a fixed set of counters
//! per latency, whatever the number of requests — one set per interval, merged into the
//! run's totals when the interval closes (losslessly: merged histograms count exactly what
//! their parts counted). Each interval is appended to `soak.csv` when it closes, with the
//! process's resident memory and open file descriptors beside it, so a soak shows its own
//! footprint.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::record::{FailureKind, Phase, RequestRecord};
use super::step::ProbeContext;
use super::user::{record_cut_off, send_request, InFlightSlot, Users};
use crate::slo::Percentile;

/// How long to hold the level, and how often to report, in the server's seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Soak {
    pub duration_s: f64,
    pub interval_s: f64,
}

/// The file a soak's intervals go to, in the run folder.
pub const SOAK_FILE: &str = "soak.csv";

/// Latencies are counted in microseconds, from 1 µs to an hour, to three significant digits.
const HIGHEST_US: u64 = 3_600_000_000;

/// One latency's histogram.
#[derive(Debug, Clone)]
struct Latency(Histogram<u32>);

impl Latency {
    fn new() -> Latency {
        // Bounds and precision are constants that hdrhistogram accepts.
        Latency(Histogram::new_with_bounds(1, HIGHEST_US, 3).expect("valid histogram bounds"))
    }

    fn record(&mut self, seconds: f64) {
        let us = (seconds * 1e6).round().clamp(1.0, HIGHEST_US as f64) as u64;
        self.0.saturating_record(us);
    }

    fn stats(&self) -> Option<LatencyStats> {
        let h = &self.0;
        (!h.is_empty()).then(|| LatencyStats {
            n: h.len(),
            mean_s: h.mean() / 1e6,
            p50_s: h.value_at_quantile(0.50) as f64 / 1e6,
            p90_s: h.value_at_quantile(0.90) as f64 / 1e6,
            p99_s: h.value_at_quantile(0.99) as f64 / 1e6,
            max_s: h.max() as f64 / 1e6,
        })
    }

    /// The statistic a limit is judged on: the mean or a percentile.
    fn at(&self, percentile: Percentile) -> Option<f64> {
        let h = &self.0;
        if h.is_empty() {
            return None;
        }
        Some(match percentile {
            Percentile::Mean => h.mean() / 1e6,
            Percentile::P(p) => h.value_at_quantile(p / 100.0) as f64 / 1e6,
        })
    }

    fn merge(&mut self, other: &Latency) {
        // Same bounds on both sides, so adding cannot fail; a failure would only drop counts.
        let _ = self.0.add(&other.0);
    }
}

/// A latency summarised from its histogram (seconds; three significant digits).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencyStats {
    pub n: u64,
    pub mean_s: f64,
    pub p50_s: f64,
    pub p90_s: f64,
    pub p99_s: f64,
    pub max_s: f64,
}

/// Counts and histograms of a stretch of the soak.
#[derive(Debug, Clone)]
struct Tally {
    requests: u64,
    ok: u64,
    failed: [u64; FailureKind::ALL.len()],
    output_tokens: u64,
    ttft: Latency,
    tpot: Latency,
    e2e: Latency,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            requests: 0,
            ok: 0,
            failed: [0; FailureKind::ALL.len()],
            output_tokens: 0,
            ttft: Latency::new(),
            tpot: Latency::new(),
            e2e: Latency::new(),
        }
    }

    fn add(&mut self, record: &RequestRecord) {
        self.requests += 1;
        if !record.ok {
            if let Some(kind) = record.error_kind {
                if let Some(i) = FailureKind::ALL.iter().position(|k| *k == kind) {
                    self.failed[i] += 1;
                }
            }
            return;
        }
        self.ok += 1;
        self.output_tokens += u64::from(record.output_tokens);
        if let Some(ttft) = record.ttft_s {
            self.ttft.record(ttft);
        }
        if let Some(tpot) = record.tpot_s {
            self.tpot.record(tpot);
        }
        self.e2e.record(record.e2e_s);
    }

    fn merge(&mut self, other: &Tally) {
        self.requests += other.requests;
        self.ok += other.ok;
        for (mine, theirs) in self.failed.iter_mut().zip(other.failed) {
            *mine += theirs;
        }
        self.output_tokens += other.output_tokens;
        self.ttft.merge(&other.ttft);
        self.tpot.merge(&other.tpot);
        self.e2e.merge(&other.e2e);
    }

    /// Empties the tally, keeping its histograms' counters allocated.
    fn clear(&mut self) {
        self.requests = 0;
        self.ok = 0;
        self.failed = [0; FailureKind::ALL.len()];
        self.output_tokens = 0;
        self.ttft.0.reset();
        self.tpot.0.reset();
        self.e2e.0.reset();
    }

    fn failed(&self) -> u64 {
        self.failed.iter().sum()
    }

    fn failures(&self) -> Vec<(String, u64)> {
        FailureKind::ALL
            .iter()
            .zip(self.failed)
            .filter(|(_, n)| *n > 0)
            .map(|(kind, n)| (kind.name().to_string(), n))
            .collect()
    }
}

/// One closed interval, as `soak.csv` has it.
#[derive(Debug, Clone, Serialize)]
pub struct SoakInterval {
    pub index: u32,
    /// Server seconds since the soak started.
    pub start_s: f64,
    pub end_s: f64,
    /// Requests that finished in the interval (after the warm-up), and how many succeeded.
    pub requests: u64,
    pub ok: u64,
    pub failed: u64,
    pub ttft: Option<LatencyStats>,
    pub tpot: Option<LatencyStats>,
    pub e2e: Option<LatencyStats>,
    pub output_tokens_per_s: f64,
    pub requests_per_s: f64,
    /// The probe's own resident memory and open file descriptors when the interval closed
    /// (Linux; `None` elsewhere).
    pub rss_mib: Option<f64>,
    pub open_fds: Option<u64>,
}

/// The whole soak.
#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    pub concurrency: u32,
    pub duration_s: f64,
    pub interval_s: f64,
    pub intervals: Vec<SoakInterval>,
    pub requests: u64,
    pub ok: u64,
    /// Failures by kind over the whole soak.
    pub failures: Vec<(String, u64)>,
    /// Requests in flight when the soak ended (cut off and recorded as `cancelled`).
    pub cut_off: u64,
    /// Every request sent, warm-up and cut-off ones included.
    pub sent: u64,
    pub ttft: Option<LatencyStats>,
    pub tpot: Option<LatencyStats>,
    pub e2e: Option<LatencyStats>,
    pub output_tokens_per_s: f64,
    /// The SLO over the whole soak (HDR point estimates; a soak's samples are many).
    pub pass: bool,
    pub verdict: String,
    /// Largest resident memory and open-descriptor count seen at an interval's close, and at
    /// the first, to read the footprint's drift.
    pub rss_mib_first: Option<f64>,
    pub rss_mib_max: Option<f64>,
    pub open_fds_first: Option<u64>,
    pub open_fds_max: Option<u64>,
}

/// Holds `concurrency` users against the endpoint for `soak.duration_s` server seconds after
/// `warmup` requests, closing an interval every `soak.interval_s`; appends each to `csv`.
pub async fn run_soak(
    ctx: &Arc<ProbeContext>,
    concurrency: u32,
    warmup: usize,
    soak: Soak,
    csv: &Path,
) -> anyhow::Result<SoakReport> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(csv)
        .map_err(|err| anyhow::anyhow!("cannot write {}: {err}", csv.display()))?;
    if file.metadata().map(|m| m.len() == 0).unwrap_or(true) {
        writeln!(file, "{}", CSV_HEADER)?;
    }
    let scale = ctx.time_scale;
    let wall = |server_s: f64| Duration::from_secs_f64(server_s / scale);
    let next = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<RequestRecord>();
    let slots: Vec<InFlightSlot> = (0..concurrency).map(|_| InFlightSlot::default()).collect();
    // Aborted on any exit (a Ctrl-C drops this future): nothing keeps sending.
    let mut workers = Users::default();
    for (user, slot) in (0..concurrency).zip(slots.iter().cloned()) {
        let (ctx, next, stop, done_tx) = (ctx.clone(), next.clone(), stop.clone(), done_tx.clone());
        workers.spawn(async move {
            let mut rng = StdRng::seed_from_u64(ctx.seed ^ u64::from(user));
            while !stop.load(Ordering::Relaxed) {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let phase = if (n as usize) < warmup {
                    Phase::Warmup
                } else {
                    Phase::Measured
                };
                let record = send_request(&ctx, &slot, &mut rng, (0, concurrency), n, phase).await;
                if done_tx.send(record).is_err() {
                    break;
                }
                let think = ctx.think_time.sample(&mut rng) / scale;
                if think > 0.0 {
                    tokio::time::sleep(Duration::from_secs_f64(think)).await;
                }
            }
        });
    }
    drop(done_tx);

    let started = tokio::time::Instant::now();
    let end = started + wall(soak.duration_s);
    let mut ticks =
        tokio::time::interval_at(started + wall(soak.interval_s), wall(soak.interval_s));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut interval = Tally::new();
    let mut total = Tally::new();
    let mut intervals: Vec<SoakInterval> = Vec::new();
    let mut opened = 0.0_f64;
    let mut sent = 0u64;
    loop {
        tokio::select! {
            record = done_rx.recv() => {
                let Some(record) = record else { break };
                sent += 1;
                if record.phase == Phase::Measured {
                    interval.add(&record);
                }
            }
            _ = ticks.tick() => {
                let now = started.elapsed().as_secs_f64() * scale;
                let row = close(&mut interval, &mut total, intervals.len() as u32, opened, now);
                append(&mut file, &row)?;
                intervals.push(row);
                opened = now;
            }
            _ = tokio::time::sleep_until(end) => break,
        }
    }
    stop.store(true, Ordering::Relaxed);
    workers.stop().await;
    // Records that finished while stopping are on disk already; cut-off ones are written now.
    while let Ok(record) = done_rx.try_recv() {
        sent += 1;
        if record.phase == Phase::Measured {
            interval.add(&record);
        }
    }
    let cut_off = record_cut_off(ctx, &slots, 0, concurrency) as u64;
    sent += cut_off;
    let now = started.elapsed().as_secs_f64() * scale;
    if interval.requests > 0 || intervals.is_empty() {
        let row = close(
            &mut interval,
            &mut total,
            intervals.len() as u32,
            opened,
            now,
        );
        append(&mut file, &row)?;
        intervals.push(row);
    }
    file.flush()?;
    Ok(report(
        ctx,
        concurrency,
        soak,
        intervals,
        &total,
        sent,
        cut_off,
        now,
    ))
}

/// Closes the interval `[from, to)`: its row, its counts merged into `total`, then reset.
fn close(interval: &mut Tally, total: &mut Tally, index: u32, from: f64, to: f64) -> SoakInterval {
    let span = (to - from).max(1e-9);
    let (rss_mib, open_fds) = footprint();
    let row = SoakInterval {
        index,
        start_s: from,
        end_s: to,
        requests: interval.requests,
        ok: interval.ok,
        failed: interval.failed(),
        ttft: interval.ttft.stats(),
        tpot: interval.tpot.stats(),
        e2e: interval.e2e.stats(),
        output_tokens_per_s: interval.output_tokens as f64 / span,
        requests_per_s: interval.requests as f64 / span,
        rss_mib,
        open_fds,
    };
    total.merge(interval);
    interval.clear();
    row
}

#[allow(clippy::too_many_arguments)]
fn report(
    ctx: &ProbeContext,
    concurrency: u32,
    soak: Soak,
    intervals: Vec<SoakInterval>,
    total: &Tally,
    sent: u64,
    cut_off: u64,
    elapsed_s: f64,
) -> SoakReport {
    let slo = ctx.slo;
    let mut broken = Vec::new();
    if let Some(v) = total.ttft.at(slo.percentile).filter(|v| *v > slo.ttft_s) {
        broken.push(format!(
            "TTFT {} {:.3} s > {:.3} s",
            slo.percentile, v, slo.ttft_s
        ));
    }
    if let (Some(limit), Some(v)) = (slo.tpot_s, total.tpot.at(slo.percentile)) {
        if v > limit {
            broken.push(format!(
                "TPOT {} {:.1} ms > {:.1} ms",
                slo.percentile,
                v * 1e3,
                limit * 1e3
            ));
        }
    }
    if let (Some(limit), Some(v)) = (ctx.e2e_limit, total.e2e.at(slo.percentile)) {
        if v > limit {
            broken.push(format!(
                "E2E {} {:.3} s > {:.3} s",
                slo.percentile, v, limit
            ));
        }
    }
    let error_rate = total.failed() as f64 / (total.requests.max(1) as f64);
    if error_rate > ctx.max_error_rate {
        broken.push(format!(
            "error rate {:.2} % > {:.2} %",
            error_rate * 100.0,
            ctx.max_error_rate * 100.0
        ));
    }
    let pass = broken.is_empty() && total.ok > 0;
    let first = intervals.first();
    SoakReport {
        concurrency,
        duration_s: soak.duration_s,
        interval_s: soak.interval_s,
        requests: total.requests,
        ok: total.ok,
        failures: total.failures(),
        cut_off,
        sent,
        ttft: total.ttft.stats(),
        tpot: total.tpot.stats(),
        e2e: total.e2e.stats(),
        output_tokens_per_s: total.output_tokens as f64 / elapsed_s.max(1e-9),
        pass,
        verdict: if pass {
            format!("pass: the SLO held over {:.0} s", elapsed_s)
        } else if total.ok == 0 {
            "fail: no request succeeded".to_string()
        } else {
            format!("fail: {}", broken.join("; "))
        },
        rss_mib_first: first.and_then(|i| i.rss_mib),
        rss_mib_max: intervals.iter().filter_map(|i| i.rss_mib).reduce(f64::max),
        open_fds_first: first.and_then(|i| i.open_fds),
        open_fds_max: intervals.iter().filter_map(|i| i.open_fds).max(),
        intervals,
    }
}

const CSV_HEADER: &str = "interval,start_s,end_s,requests,ok,failed,\
ttft_mean_s,ttft_p50_s,ttft_p90_s,ttft_p99_s,ttft_max_s,\
tpot_mean_s,tpot_p50_s,tpot_p90_s,tpot_p99_s,tpot_max_s,\
e2e_mean_s,e2e_p50_s,e2e_p90_s,e2e_p99_s,e2e_max_s,\
output_tokens_per_s,requests_per_s,rss_mib,open_fds";

/// Appends `row` to `soak.csv` and flushes it: a crash keeps every closed interval.
fn append(file: &mut std::fs::File, row: &SoakInterval) -> std::io::Result<()> {
    let stats = |s: &Option<LatencyStats>| match s {
        Some(s) => format!(
            "{:.6},{:.6},{:.6},{:.6},{:.6}",
            s.mean_s, s.p50_s, s.p90_s, s.p99_s, s.max_s
        ),
        None => ",,,,".to_string(),
    };
    let opt = |v: Option<String>| v.unwrap_or_default();
    writeln!(
        file,
        "{},{:.3},{:.3},{},{},{},{},{},{},{:.3},{:.4},{},{}",
        row.index,
        row.start_s,
        row.end_s,
        row.requests,
        row.ok,
        row.failed,
        stats(&row.ttft),
        stats(&row.tpot),
        stats(&row.e2e),
        row.output_tokens_per_s,
        row.requests_per_s,
        opt(row.rss_mib.map(|v| format!("{v:.1}"))),
        opt(row.open_fds.map(|v| v.to_string())),
    )?;
    file.flush()
}

/// The process's resident memory (MiB) and open file descriptors, where `/proc` tells.
fn footprint() -> (Option<f64>, Option<u64>) {
    let rss = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
                .map(|kib| kib / 1024.0)
        });
    let fds = std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|entries| entries.count() as u64);
    (rss, fds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(ttft: f64, tpot: f64) -> RequestRecord {
        RequestRecord {
            step: 0,
            index: 0,
            concurrency: 1,
            phase: Phase::Measured,
            start_s: 0.0,
            ok: true,
            error_kind: None,
            http_status: None,
            error: None,
            ttft_s: Some(ttft),
            ttft_visible_s: Some(ttft),
            tpot_s: Some(tpot),
            e2e_s: ttft + 99.0 * tpot,
            input_tokens: 100,
            input_tokens_from: super::super::record::CountSource::Usage,
            output_tokens: 100,
            output_tokens_from: super::super::record::CountSource::Usage,
            chunks: 100,
            itl_mean_s: None,
            itl_max_s: None,
            itl_s: Vec::new(),
            streamed: true,
            server: None,
        }
    }

    #[test]
    fn intervals_merge_into_exactly_what_one_histogram_would_count() {
        let mut one = Tally::new();
        let mut total = Tally::new();
        let mut interval = Tally::new();
        for i in 0..3000u32 {
            let record = ok(
                0.1 + f64::from(i % 97) * 0.01,
                0.02 + f64::from(i % 13) * 0.001,
            );
            one.add(&record);
            interval.add(&record);
            if i % 500 == 499 {
                close(&mut interval, &mut total, 0, 0.0, 1.0);
            }
        }
        let mut failed = ok(1.0, 0.1);
        failed.ok = false;
        failed.error_kind = Some(FailureKind::Reset);
        one.add(&failed);
        interval.add(&failed);
        close(&mut interval, &mut total, 0, 0.0, 1.0);
        assert_eq!(total.requests, one.requests);
        assert_eq!(total.failures(), vec![("reset".to_string(), 1)]);
        assert_eq!(total.ttft.stats(), one.ttft.stats());
        assert_eq!(total.tpot.stats(), one.tpot.stats());
        assert_eq!(interval.requests, 0, "a closed interval starts empty");
        // Three significant digits: the p90 is within 0.1 % of the exact one (the value at
        // rank ⌈0.9 n⌉ of the sorted TTFTs).
        let mut exact: Vec<f64> = (0..3000u32)
            .map(|i| 0.1 + f64::from(i % 97) * 0.01)
            .collect();
        exact.sort_by(f64::total_cmp);
        let want = exact[(0.9 * exact.len() as f64).ceil() as usize - 1];
        let p90 = one.ttft.stats().unwrap().p90_s;
        assert!((p90 - want).abs() / want < 1e-3, "{p90} vs {want}");
    }
}
