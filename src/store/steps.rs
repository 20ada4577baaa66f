//! A measured curve: one [`Level`] per load level (a concurrency or a request rate), with the
//! request counts, latency statistics and throughput measured there. Probe runs, imported
//! results of other tools and published tables all become this, and `fit` reads nothing else.
//!
//! On disk it is a steps CSV. The reader takes capplan's own `steps.csv` and the column set of
//! the published seed tables alike, by column name: `concurrency` (or `users`, `parallel`),
//! `rate`, `requests`, `failures` (or `fails`), `duration_s`, `qps`/`rps`/`requests_per_s`,
//! `output_tok_per_s`, `input_tokens_mean`, `output_tokens_mean`, and latency statistics named
//! `<metric>_<stat>_<unit>`: metric `ttft`, `tpot`, `itl`, `e2e` (or `latency`, or none at all:
//! plain `p90_ms` is end-to-end latency), `e2e_per_token`; stat `mean`/`avg`, `p50`, `p99.9` or
//! `p999`, `min`, `max`; unit `s` or `ms`. Missing columns are allowed; unknown ones are listed.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::InputError;
use crate::slo::Percentile;

/// A latency metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Ttft,
    Tpot,
    Itl,
    E2e,
    E2ePerToken,
}

impl Metric {
    pub const ALL: [Metric; 5] = [
        Metric::Ttft,
        Metric::Tpot,
        Metric::Itl,
        Metric::E2e,
        Metric::E2ePerToken,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::Tpot => "tpot",
            Metric::Itl => "itl",
            Metric::E2e => "e2e",
            Metric::E2ePerToken => "e2e_per_token",
        }
    }

    fn parse(name: &str) -> Option<Metric> {
        Some(match name {
            "ttft" => Metric::Ttft,
            "tpot" => Metric::Tpot,
            "itl" => Metric::Itl,
            "e2e" | "latency" | "" => Metric::E2e,
            "e2e_per_token" => Metric::E2ePerToken,
            _ => return None,
        })
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Metric::Ttft => "TTFT",
            Metric::Tpot => "TPOT",
            Metric::Itl => "ITL",
            Metric::E2e => "E2E",
            Metric::E2ePerToken => "E2E per token",
        })
    }
}

/// The statistics of one metric at one level, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    /// (percentile in 0..=100, value), sorted by percentile; 0 is the minimum, 100 the maximum.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub percentiles: Vec<(f64, f64)>,
}

impl Stats {
    pub fn is_empty(&self) -> bool {
        self.mean.is_none() && self.percentiles.is_empty()
    }

    /// The statistic, if it was measured (percentiles match to 0.01).
    pub fn get(&self, statistic: Percentile) -> Option<f64> {
        match statistic {
            Percentile::Mean => self.mean,
            Percentile::P(q) => self
                .percentiles
                .iter()
                .find(|(p, _)| (p - q).abs() < 0.01)
                .map(|&(_, v)| v),
        }
    }

    pub fn set(&mut self, statistic: Percentile, value: f64) {
        match statistic {
            Percentile::Mean => self.mean = Some(value),
            Percentile::P(q) => {
                self.percentiles.retain(|(p, _)| (p - q).abs() >= 0.01);
                self.percentiles.push((q, value));
                self.percentiles.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
        }
    }

    /// Every statistic present: the mean first, then the percentiles in order.
    pub fn statistics(&self) -> Vec<Percentile> {
        self.mean
            .map(|_| Percentile::Mean)
            .into_iter()
            .chain(
                self.percentiles
                    .iter()
                    .filter(|(p, _)| *p > 0.0 && *p < 100.0)
                    .map(|&(p, _)| Percentile::P(p)),
            )
            .collect()
    }
}

/// One load level of a measured curve.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// Closed-loop users held in flight (or concurrent users with think time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<f64>,
    /// Open-loop offered rate, requests per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Requests counted (successes and failures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failures: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Successful requests per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens_mean: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_mean: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency: Vec<(Metric, Stats)>,
}

impl Level {
    pub fn stats(&self, metric: Metric) -> Option<&Stats> {
        self.latency
            .iter()
            .find(|(m, _)| *m == metric)
            .map(|(_, s)| s)
    }

    pub fn stats_mut(&mut self, metric: Metric) -> &mut Stats {
        let index = match self.latency.iter().position(|(m, _)| *m == metric) {
            Some(index) => index,
            None => {
                self.latency.push((metric, Stats::default()));
                self.latency.sort_by_key(|(m, _)| *m);
                self.latency
                    .iter()
                    .position(|(m, _)| *m == metric)
                    .unwrap_or_default()
            }
        };
        &mut self.latency[index].1
    }

    pub fn value(&self, metric: Metric, statistic: Percentile) -> Option<f64> {
        self.stats(metric)?.get(statistic)
    }

    /// Share of counted requests that failed (0 when unknown).
    pub fn error_rate(&self) -> f64 {
        match (self.requests, self.failures) {
            (Some(n), Some(f)) if n > 0 => f as f64 / n as f64,
            _ => 0.0,
        }
    }

    /// The load: concurrency for closed loop, else the rate.
    pub fn load(&self) -> Option<f64> {
        self.concurrency.or(self.rate)
    }
}

/// What a steps CSV held.
#[derive(Debug, Clone, Default)]
pub struct StepsFile {
    pub levels: Vec<Level>,
    /// Columns the reader did not use.
    pub unused_columns: Vec<String>,
}

/// What a column of a steps CSV means.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Column {
    Concurrency,
    Rate,
    Requests,
    Failures,
    Duration,
    RequestsPerS,
    OutputTokensPerS,
    InputTokensMean,
    OutputTokensMean,
    Latency(Metric, Percentile, f64),
    /// Known, and not a figure of the level.
    Known,
    Unused,
}

/// `p50` → 50, `p99.9` and `p999` → 99.9, `p9999` → 99.99; `min` → 0, `max` → 100.
fn statistic(text: &str) -> Option<Percentile> {
    match text {
        "mean" | "avg" | "average" => return Some(Percentile::Mean),
        "min" => return Some(Percentile::P(0.0)),
        "max" => return Some(Percentile::P(100.0)),
        _ => {}
    }
    let digits = text.strip_prefix('p')?;
    if digits.contains('.') {
        return digits.parse().ok().map(Percentile::P);
    }
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // More than two digits: a decimal point after the second (p999 = 99.9).
    let value = if digits.len() > 2 {
        format!("{}.{}", &digits[..2], &digits[2..])
    } else {
        digits.to_string()
    };
    value.parse().ok().map(Percentile::P)
}

fn column(name: &str) -> Column {
    let name = name.trim().to_ascii_lowercase();
    match name.as_str() {
        "concurrency" | "users" | "parallel" => return Column::Concurrency,
        "rate" | "request_rate" => return Column::Rate,
        "requests" | "total_requests" => return Column::Requests,
        "failures" | "fails" | "failed" => return Column::Failures,
        "duration_s" => return Column::Duration,
        "qps" | "rps" | "requests_per_s" | "req_per_s" => return Column::RequestsPerS,
        "output_tok_per_s" | "output_tokens_per_s" => return Column::OutputTokensPerS,
        "input_tokens_mean" => return Column::InputTokensMean,
        "output_tokens_mean" => return Column::OutputTokensMean,
        // capplan's own steps.csv: bookkeeping that is not a measurement of the level.
        "step" | "verdict" | "stopped_early" | "sent" | "server_s" | "why" | "batch"
        | "items_per_s" | "stable" => return Column::Known,
        _ if name.starts_with("failures_")
            || name.starts_with("client_")
            || name.starts_with("server_")
            || name.starts_with("metrics_") =>
        {
            return Column::Known
        }
        _ => {}
    }
    // Units per second: dividing (not multiplying by 1e-3) keeps 7100 ms exactly 7.1 s.
    let (rest, per_second) = if let Some(rest) = name.strip_suffix("_ms") {
        (rest, 1e3)
    } else if let Some(rest) = name.strip_suffix("_s") {
        (rest, 1.0)
    } else {
        return Column::Unused;
    };
    let (metric, stat) = match rest.rsplit_once('_') {
        Some((metric, stat)) => (metric, stat),
        None => ("", rest),
    };
    match (Metric::parse(metric), statistic(stat)) {
        (Some(metric), Some(stat)) => Column::Latency(metric, stat, per_second),
        _ => Column::Unused,
    }
}

/// Reads a steps CSV (capplan's `steps.csv` or a published table). Errors name the file, line
/// and column.
pub fn read_steps_csv(path: &Path) -> Result<StepsFile, InputError> {
    let location = path.display().to_string();
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_path(path)
        .map_err(|err| InputError::file(&location, format!("cannot read: {err}")))?;
    let headers = reader
        .headers()
        .map_err(|err| InputError::file(&location, format!("no header row: {err}")))?
        .clone();
    let columns: Vec<Column> = headers.iter().map(column).collect();
    if !columns
        .iter()
        .any(|c| matches!(c, Column::Concurrency | Column::Rate))
    {
        return Err(InputError::file(
            &location,
            "no load column: a steps table needs `concurrency` (or `users`) or `rate`",
        ));
    }
    let unused_columns = headers
        .iter()
        .zip(&columns)
        .filter(|(_, c)| **c == Column::Unused)
        .map(|(h, _)| h.to_string())
        .collect();
    let mut levels = Vec::new();
    for (index, row) in reader.records().enumerate() {
        let line = index + 2;
        let row =
            row.map_err(|err| InputError::file(format!("{location}:{line}"), err.to_string()))?;
        // A level capplan ran again because it failed by its delivery delay alone measured the
        // machine, not the server (see `probe::step::StepSummary::late`).
        let late = headers
            .iter()
            .zip(row.iter())
            .any(|(h, cell)| h.trim().eq_ignore_ascii_case("verdict") && cell == "late");
        if late {
            continue;
        }
        let mut level = Level::default();
        for ((cell, column), header) in row.iter().zip(&columns).zip(headers.iter()) {
            if cell.is_empty() || matches!(column, Column::Unused | Column::Known) {
                continue;
            }
            let number: f64 = cell.parse().map_err(|_| {
                InputError::file(
                    format!("{location}:{line}"),
                    format!("column {header}: '{cell}' is not a number"),
                )
            })?;
            if !number.is_finite() || number < 0.0 {
                return Err(InputError::file(
                    format!("{location}:{line}"),
                    format!("column {header}: {cell} must be a finite number ≥ 0"),
                ));
            }
            let count = || number.round() as u64;
            match *column {
                Column::Concurrency => level.concurrency = Some(number),
                Column::Rate => level.rate = Some(number),
                Column::Requests => level.requests = Some(count()),
                Column::Failures => level.failures = Some(count()),
                Column::Duration => level.duration_s = Some(number),
                Column::RequestsPerS => level.requests_per_s = Some(number),
                Column::OutputTokensPerS => level.output_tokens_per_s = Some(number),
                Column::InputTokensMean => level.input_tokens_mean = Some(number),
                Column::OutputTokensMean => level.output_tokens_mean = Some(number),
                Column::Latency(metric, stat, per_second) => {
                    level.stats_mut(metric).set(stat, number / per_second)
                }
                Column::Unused | Column::Known => {}
            }
        }
        if level.load().is_none() {
            return Err(InputError::file(
                format!("{location}:{line}"),
                "no concurrency or rate on this row",
            ));
        }
        levels.push(level);
    }
    if levels.is_empty() {
        return Err(InputError::file(&location, "no rows"));
    }
    Ok(StepsFile {
        levels,
        unused_columns,
    })
}

fn stat_name(statistic: Percentile) -> String {
    match statistic {
        Percentile::Mean => "mean".into(),
        Percentile::P(p) if p <= 0.0 => "min".into(),
        Percentile::P(p) if p >= 100.0 => "max".into(),
        Percentile::P(p) => format!("p{}", crate::slo::duration::trim_number(p)),
    }
}

/// Writes `levels` as a steps CSV that [`read_steps_csv`] reads back: every statistic any level
/// has gets a column, in seconds.
pub fn write_steps_csv(path: &Path, levels: &[Level]) -> std::io::Result<()> {
    let mut latency_columns: Vec<(Metric, Percentile)> = Vec::new();
    for metric in Metric::ALL {
        let mut seen: BTreeSet<(u8, String)> = BTreeSet::new();
        let mut stats: Vec<Percentile> = Vec::new();
        for level in levels {
            let Some(s) = level.stats(metric) else {
                continue;
            };
            let mut all = s.statistics();
            if s.get(Percentile::P(0.0)).is_some() {
                all.push(Percentile::P(0.0));
            }
            if s.get(Percentile::P(100.0)).is_some() {
                all.push(Percentile::P(100.0));
            }
            for statistic in all {
                if seen.insert((0, stat_name(statistic))) {
                    stats.push(statistic);
                }
            }
        }
        stats.sort_by(|a, b| match (a, b) {
            (Percentile::Mean, Percentile::Mean) => std::cmp::Ordering::Equal,
            (Percentile::Mean, _) => std::cmp::Ordering::Less,
            (_, Percentile::Mean) => std::cmp::Ordering::Greater,
            (Percentile::P(x), Percentile::P(y)) => x.total_cmp(y),
        });
        latency_columns.extend(stats.into_iter().map(|s| (metric, s)));
    }
    let mut writer = csv::Writer::from_path(path).map_err(std::io::Error::other)?;
    let mut header: Vec<String> = [
        "step",
        "concurrency",
        "rate",
        "requests",
        "failures",
        "duration_s",
        "requests_per_s",
        "output_tok_per_s",
        "input_tokens_mean",
        "output_tokens_mean",
    ]
    .map(String::from)
    .to_vec();
    header.extend(
        latency_columns
            .iter()
            .map(|(m, s)| format!("{}_{}_s", m.name(), stat_name(*s))),
    );
    writer
        .write_record(&header)
        .map_err(std::io::Error::other)?;
    let text = |v: Option<f64>| v.map(|v| format!("{v}")).unwrap_or_default();
    for (step, level) in levels.iter().enumerate() {
        let mut row = vec![
            step.to_string(),
            text(level.concurrency),
            text(level.rate),
            level.requests.map(|v| v.to_string()).unwrap_or_default(),
            level.failures.map(|v| v.to_string()).unwrap_or_default(),
            text(level.duration_s),
            text(level.requests_per_s),
            text(level.output_tokens_per_s),
            text(level.input_tokens_mean),
            text(level.output_tokens_mean),
        ];
        row.extend(
            latency_columns
                .iter()
                .map(|(m, s)| text(level.value(*m, *s))),
        );
        writer.write_record(&row).map_err(std::io::Error::other)?;
    }
    writer.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> crate::scratch::ScratchFile {
        crate::scratch::ScratchFile::new(name, text)
    }

    #[test]
    fn statistics_are_named_every_way_tables_name_them() {
        assert_eq!(statistic("p50"), Some(Percentile::P(50.0)));
        assert_eq!(statistic("p999"), Some(Percentile::P(99.9)));
        assert_eq!(statistic("p99.9"), Some(Percentile::P(99.9)));
        assert_eq!(statistic("avg"), Some(Percentile::Mean));
        assert_eq!(statistic("max"), Some(Percentile::P(100.0)));
        assert_eq!(statistic("px"), None);
        assert_eq!(
            column("latency_p90_ms"),
            Column::Latency(Metric::E2e, Percentile::P(90.0), 1e3)
        );
        assert_eq!(
            column("p50_ms"),
            Column::Latency(Metric::E2e, Percentile::P(50.0), 1e3)
        );
        assert_eq!(
            column("e2e_per_token_p99_s"),
            Column::Latency(Metric::E2ePerToken, Percentile::P(99.0), 1.0)
        );
        assert_eq!(column("batch_size"), Column::Unused);
    }

    #[test]
    fn reads_a_seed_table_and_writes_it_back() {
        let path = write(
            "seed.csv",
            "concurrency,requests,failures,duration_s,qps,latency_mean_s,latency_p90_s,latency_p999_ms,output_tok_per_s,batch_size\n\
             8,1000,0,404.284,2.474,3.213,4.9771,7100,594.929,10\n\
             16,1000,2,215.085,4.649,3.391,5.2905,,1119.102,10\n",
        );
        let read = read_steps_csv(&path).unwrap();
        assert_eq!(read.unused_columns, ["batch_size"]);
        let first = &read.levels[0];
        assert_eq!(first.concurrency, Some(8.0));
        assert_eq!(first.requests_per_s, Some(2.474));
        assert_eq!(first.value(Metric::E2e, Percentile::Mean), Some(3.213));
        assert_eq!(first.value(Metric::E2e, Percentile::P(99.9)), Some(7.1));
        assert_eq!(read.levels[1].value(Metric::E2e, Percentile::P(99.9)), None);
        assert!((read.levels[1].error_rate() - 0.002).abs() < 1e-12);

        let copy = path.with_file_name("copy.csv");
        write_steps_csv(&copy, &read.levels).unwrap();
        assert_eq!(read_steps_csv(&copy).unwrap().levels, read.levels);
    }

    #[test]
    fn bad_tables_name_file_line_and_column() {
        let path = write("bad.csv", "concurrency,qps\n8,2.5\n16,fast\n");
        let err = read_steps_csv(&path).unwrap_err().to_string();
        assert!(
            err.contains("bad.csv:3") && err.contains("qps") && err.contains("fast"),
            "{err}"
        );
        let path = write("noload.csv", "qps,latency_mean_s\n2.5,3\n");
        let err = read_steps_csv(&path).unwrap_err().to_string();
        assert!(err.contains("concurrency"), "{err}");
        let path = write("negative.csv", "concurrency,qps\n8,-1\n");
        assert!(read_steps_csv(&path).is_err());
    }
}
