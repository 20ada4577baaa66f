//! A probe run on disk: `measurements/<model>/<card>-tp<T>/<UTC timestamp>/` with `run.json`,
//! `steps.csv` (a row per finished step) and `requests.ndjson` (a line per finished request,
//! written and flushed the moment it finishes, so a crash or Ctrl-C loses nothing that
//! finished), and `requests.parquet` made from it at the end.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use tokio::sync::mpsc;

use super::record::{FailureKind, RequestRecord};
use super::step::StepSummary;
use crate::stats::Summary;

pub const RUN_FILE: &str = "run.json";
pub const STEPS_FILE: &str = "steps.csv";
pub const REQUESTS_FILE: &str = "requests.ndjson";
pub const PARQUET_FILE: &str = "requests.parquet";

pub use crate::store::run_folder::{create, utc_stamp, write_run_json};

/// Appends every record it receives to `requests.ndjson`, one flushed line each. Returns when
/// the senders are gone.
pub fn spawn_request_log(
    dir: &Path,
) -> std::io::Result<(
    mpsc::UnboundedSender<RequestRecord>,
    tokio::task::JoinHandle<std::io::Result<u64>>,
)> {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(REQUESTS_FILE))?;
    let (tx, mut rx) = mpsc::unbounded_channel::<RequestRecord>();
    let handle = tokio::task::spawn_blocking(move || {
        let mut written = 0;
        let mut lines = Vec::new();
        while let Some(record) = rx.blocking_recv() {
            // Whatever else finished meanwhile goes in the same write: under load that is one
            // system call for many records, and a record is never held back waiting for more.
            let mut next = Some(record);
            while let Some(record) = next {
                serde_json::to_writer(&mut lines, &record).map_err(std::io::Error::other)?;
                lines.push(b'\n');
                written += 1;
                next = rx.try_recv().ok();
            }
            // Whole lines per write: a reader never sees half a record from a live run, and a
            // killed process leaves every line it finished.
            file.write_all(&lines)?;
            file.flush()?;
            lines.clear();
        }
        Ok(written)
    });
    Ok((tx, handle))
}

/// Reads back `requests.ndjson`, skipping a torn last line (a crash mid-write).
pub fn read_requests(dir: &Path) -> std::io::Result<Vec<RequestRecord>> {
    let file = File::open(dir.join(REQUESTS_FILE))?;
    let mut records = Vec::new();
    for line in BufReader::new(file).lines() {
        let line = line?;
        if let Ok(record) = serde_json::from_str(&line) {
            records.push(record);
        }
    }
    Ok(records)
}

const STAT_COLUMNS: [&str; 5] = ["mean", "p50", "p90", "p95", "p99"];

fn header() -> Vec<String> {
    let mut columns: Vec<String> = ["step", "concurrency", "requests", "failures"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for kind in FailureKind::ALL {
        columns.push(format!("failures_{}", kind.name()));
    }
    for metric in [
        "ttft",
        "tpot",
        "itl",
        "e2e",
        "e2e_per_token",
        "server_queue",
        "server_compute",
    ] {
        for stat in STAT_COLUMNS {
            columns.push(format!("{metric}_{stat}_s"));
        }
    }
    for tail in [
        "metrics_engine",
        "metrics_queue_mean_s",
        "metrics_prefill_mean_s",
        "metrics_decode_mean_s",
        "metrics_compute_mean_s",
        "metrics_busy_share",
        "input_tokens_mean",
        "output_tokens_mean",
        "output_tok_per_s",
        "requests_per_s",
        "batch",
        "items_per_s",
        "stable",
        "verdict",
        "stopped_early",
        "sent",
        "server_s",
        "client_lag_p99_ms",
        "client_cpu_cores",
        "client_bottleneck",
        "why",
    ] {
        columns.push(tail.to_string());
    }
    columns
}

fn stats(summary: &Option<Summary>) -> Vec<String> {
    match summary {
        Some(s) => [s.mean, s.p50, s.p90, s.p95, s.p99]
            .iter()
            .map(|v| format!("{v:.6}"))
            .collect(),
        None => vec![String::new(); 5],
    }
}

/// Appends one step to `steps.csv` (writing the header first if the file is new).
pub fn append_step(dir: &Path, step: &StepSummary) -> std::io::Result<()> {
    let path = dir.join(STEPS_FILE);
    let new = !path.exists();
    let file = OpenOptions::new().create(true).append(true).open(&path)?;
    let mut writer = csv::Writer::from_writer(file);
    if new {
        writer
            .write_record(header())
            .map_err(std::io::Error::other)?;
    }
    let mut row = vec![
        step.step.to_string(),
        step.concurrency.to_string(),
        step.requests.to_string(),
        step.failures.to_string(),
    ];
    for kind in FailureKind::ALL {
        let n = step
            .failures_by_kind
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, n)| *n);
        row.push(n.to_string());
    }
    for summary in [
        &step.ttft,
        &step.tpot,
        &step.itl,
        &step.e2e,
        &step.e2e_per_token,
        &step.server_queue,
        &step.server_compute,
    ] {
        row.extend(stats(summary));
    }
    let mean = |v: Option<f64>| v.map(|v| format!("{v:.2}")).unwrap_or_default();
    let scraped = step.server_metrics.clone().unwrap_or_default();
    let seconds = |v: Option<f64>| v.map(|v| format!("{v:.6}")).unwrap_or_default();
    row.extend([
        scraped.engine.clone(),
        seconds(scraped.queue_mean_s),
        seconds(scraped.prefill_mean_s),
        seconds(scraped.decode_mean_s),
        seconds(scraped.compute_mean_s),
        scraped
            .busy_share
            .map(|v| format!("{v:.4}"))
            .unwrap_or_default(),
        mean(step.input_tokens_mean),
        mean(step.output_tokens_mean),
        format!("{:.3}", step.output_tokens_per_s),
        format!("{:.4}", step.requests_per_s),
        step.batch.to_string(),
        format!("{:.4}", step.requests_per_s * f64::from(step.batch)),
        step.stable.map(|s| s.to_string()).unwrap_or_default(),
        step.verdict_label(),
        step.stopped_early.to_string(),
        step.sent.to_string(),
        format!("{:.3}", step.server_seconds),
        format!("{:.2}", step.client.loop_lag_p99_ms),
        format!("{:.3}", step.client.cpu_cores),
        step.client.bottleneck.to_string(),
        step.verdict.explain(),
    ]);
    writer.write_record(row).map_err(std::io::Error::other)?;
    writer.flush()
}

/// One step a run recorded, as `--resume` needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedStep {
    pub concurrency: u32,
    /// Items per request (1 in runs from before batch sweeps).
    pub batch: u32,
    pub verdict: String,
    pub server_s: f64,
    pub sent: usize,
    /// Mean E2E latency of the level's successful requests (a batch sweep's knee needs it).
    pub e2e_mean_s: Option<f64>,
}

/// The steps a run recorded, for `--resume`.
pub fn read_recorded_steps(dir: &Path) -> std::io::Result<Vec<RecordedStep>> {
    let path = dir.join(STEPS_FILE);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let mut reader = csv::Reader::from_path(&path).map_err(std::io::Error::other)?;
    let headers = reader.headers().map_err(std::io::Error::other)?.clone();
    let column = |name: &str| headers.iter().position(|h| h == name);
    let (Some(c), Some(v), Some(s), Some(n)) = (
        column("concurrency"),
        column("verdict"),
        column("server_s"),
        column("sent"),
    ) else {
        return Err(std::io::Error::other("steps.csv lacks its columns"));
    };
    let (batch, e2e) = (column("batch"), column("e2e_mean_s"));
    let mut steps = Vec::new();
    for row in reader.records() {
        let row = row.map_err(std::io::Error::other)?;
        let parse = |i: usize| row.get(i).unwrap_or("").to_string();
        steps.push(RecordedStep {
            concurrency: parse(c).parse().unwrap_or(0),
            batch: batch.and_then(|i| parse(i).parse().ok()).unwrap_or(1),
            verdict: parse(v),
            server_s: parse(s).parse().unwrap_or(0.0),
            sent: parse(n).parse().unwrap_or(0),
            e2e_mean_s: e2e.and_then(|i| parse(i).parse().ok()),
        });
    }
    Ok(steps)
}
