//! GuideLLM (`guidellm benchmark run` / `guidellm run`): `benchmarks.json` (every level in
//! `benchmarks[]`) or `benchmarks.csv` (one row a level under three header rows).
//!
//! JSON layouts:
//! - 0.3.x: `{benchmarks}`; the level in `benchmarks[i].args.strategy`, counts in
//!   `benchmarks[i].request_totals`; `time_per_output_token_ms` = (last − first token)/out.
//! - 0.4 and later (`{args, benchmarks}`, then `{metadata, args|config, benchmarks}`): the level
//!   in `benchmarks[i].config.strategy`, counts in `metrics.request_totals`;
//!   `time_per_output_token_ms` = (last token − request start)/out, TTFT included.
//!
//! Statistics are `metrics.<name>.successful.{mean, median, min, max, percentiles.p001 … p999}`;
//! `*_ms` in ms, `request_latency` in s.

use std::path::{Path, PathBuf};

use super::{
    file_name, has_extension, load_json, other_tool_hint, set_stat, walk, Builder, ImportFormat,
    Imported, Input, Node,
};
use crate::error::InputError;
use crate::slo::Percentile;
use crate::store::steps::{Level, Metric};

/// GuideLLM's percentile keys: `p001` is 0.1 %, `p999` 99.9 %.
const PERCENTILES: [(&str, f64); 11] = [
    ("p001", 0.1),
    ("p01", 1.0),
    ("p05", 5.0),
    ("p10", 10.0),
    ("p25", 25.0),
    ("p50", 50.0),
    ("p75", 75.0),
    ("p90", 90.0),
    ("p95", 95.0),
    ("p99", 99.0),
    ("p999", 99.9),
];

/// The CSV's `Percentiles` cell: `[min, p001, p01, p05, p10, p25, p75, p90, p95, p99, max]`.
const CSV_PERCENTILES: [f64; 11] = [
    0.0, 0.1, 1.0, 5.0, 10.0, 25.0, 75.0, 90.0, 95.0, 99.0, 100.0,
];

/// Which GuideLLM layout a file has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// 0.3.x: `args.strategy`, TPOT = (last − first token)/out.
    V03,
    /// 0.4+: `config.strategy`, TPOT = (last token − start)/out.
    V04,
}

fn candidate(path: &Path) -> bool {
    has_extension(path, "json") || has_extension(path, "csv")
}

pub(super) fn read(paths: &[PathBuf]) -> Result<Imported, InputError> {
    let mut builder = Builder::new(ImportFormat::Guidellm);
    let mut inputs: Vec<Input> = Vec::new();
    for path in paths {
        if !path.is_dir() {
            inputs.push(Input {
                path: path.clone(),
                named: true,
            });
            continue;
        }
        let found: Vec<PathBuf> = walk(path)?.into_iter().filter(|p| candidate(p)).collect();
        if found.is_empty() {
            return Err(InputError::file(
                path.display().to_string(),
                "no GuideLLM results (benchmarks.json or benchmarks.csv) in this folder or below it",
            ));
        }
        for file in found {
            // The CSV written beside a JSON of the same run holds the same levels.
            if has_extension(&file, "csv") && file.with_extension("json").is_file() {
                builder.note(format!(
                    "{}: skipped, {} holds the same run",
                    file.display(),
                    file_name(&file.with_extension("json"))
                ));
                continue;
            }
            inputs.push(Input {
                path: file,
                named: false,
            });
        }
    }
    for input in &inputs {
        if has_extension(&input.path, "csv") {
            read_csv(input, &mut builder)?;
        } else {
            read_json(input, &mut builder)?;
        }
    }
    builder.finish()
}

fn read_json(input: &Input, builder: &mut Builder) -> Result<(), InputError> {
    let loaded = load_json(&input.path, "a GuideLLM benchmarks.json")?;
    let root = loaded.root();
    let Some(benchmarks) = root.get("benchmarks").filter(|b| b.value.is_array()) else {
        let message = format!(
            "not a GuideLLM benchmarks.json: expected an object with a `benchmarks` list{}",
            other_tool_hint(root.value, ImportFormat::Guidellm)
        );
        if input.named {
            return Err(root.error(message));
        }
        builder.note(format!("{}: skipped, {message}", loaded.location));
        return Ok(());
    };
    loaded.note_non_finite(builder);
    builder.file(&input.path);
    let benchmarks = benchmarks.items("a list of benchmarks")?;
    if benchmarks.is_empty() {
        return Err(root.error("`benchmarks` is empty: the run measured no level"));
    }
    let layout = if benchmarks[0].at(&["config", "strategy"]).is_some() {
        Layout::V04
    } else if benchmarks[0].at(&["args", "strategy"]).is_some() {
        Layout::V03
    } else {
        return Err(benchmarks[0].missing(
            "config",
            "`config.strategy` (GuideLLM 0.4+) or `args.strategy` (0.3) with the level",
        ));
    };
    let version = root
        .at(&["metadata", "guidellm_version"])
        .and_then(|n| n.str().map(str::to_string))
        .unwrap_or_else(|| match layout {
            Layout::V03 => "0.3.x".into(),
            Layout::V04 => "0.4+".into(),
        });
    builder.version(version);
    layout_notes(layout, builder);
    if let Some(stream) = root
        .at(&["config", "spec", "backend", "stream"])
        .and_then(|n| n.bool())
    {
        builder.streaming(stream);
    }
    for (index, benchmark) in benchmarks.iter().enumerate() {
        let origin = format!("{} benchmarks[{index}]", loaded.location);
        if let Some(level) = json_level(benchmark, layout, &origin, builder)? {
            builder.level(level, origin);
        }
    }
    Ok(())
}

fn layout_notes(layout: Layout, builder: &mut Builder) {
    builder.note(
        "GuideLLM *_ms statistics converted from ms to s (request_latency is already in s); \
         the statistics are those of the successful requests",
    );
    builder.note(
        "GuideLLM ITL ((last − first token)/(output tokens − 1) per request) imported as tpot; \
         GuideLLM weights its distribution by output tokens − 1, so the mean and percentiles \
         lean towards long requests",
    );
    match layout {
        Layout::V04 => builder.note(
            "GuideLLM ≥0.4 TPOT ((last token − request start)/output tokens, TTFT included) \
             imported as e2e_per_token",
        ),
        Layout::V03 => {
            builder.note(
                "GuideLLM 0.3 TPOT ((last − first token)/output tokens) is neither capplan's tpot \
                 nor e2e_per_token: not imported",
            );
            builder.drop_quantity("GuideLLM 0.3 time_per_output_token_ms");
        }
    }
    builder.drop_quantity("GuideLLM request_concurrency (measured, not the level)");
}

/// The level of a strategy `{type_, streams | rate}`; `None` for `throughput` (everything at
/// once, no level).
fn strategy_level(
    strategy: &Node,
    origin: &str,
    builder: &mut Builder,
) -> Result<Option<Level>, InputError> {
    let kind = strategy
        .field(
            "type_",
            "the strategy type (synchronous, concurrent, constant, poisson, …)",
        )?
        .str()
        .unwrap_or_default()
        .to_string();
    let mut level = Level::default();
    match kind.as_str() {
        "synchronous" => level.concurrency = Some(1.0),
        "concurrent" => {
            level.concurrency = Some(strategy.req_number("streams", "the number of streams")?)
        }
        "throughput" => {
            builder.note(format!(
                "{origin}: skipped, the throughput strategy sends all requests at once and has \
                 no load level"
            ));
            return Ok(None);
        }
        _ => match strategy.opt_number("rate")? {
            Some(rate) if rate > 0.0 => {
                level.rate = Some(rate);
                if strategy.has("max_concurrency") {
                    builder.note(
                        "GuideLLM max_concurrency of a rate strategy is a cap (10240 by \
                         default), not the level: ignored",
                    );
                }
            }
            _ => {
                return Err(strategy.error(format!(
                    "strategy \"{kind}\" has no `rate`; expected synchronous, concurrent with \
                     `streams`, or a rate strategy (constant, poisson, async) with `rate`"
                )))
            }
        },
    }
    Ok(Some(level))
}

fn json_level(
    benchmark: &Node,
    layout: Layout,
    origin: &str,
    builder: &mut Builder,
) -> Result<Option<Level>, InputError> {
    let (strategy, totals) = match layout {
        Layout::V04 => (
            benchmark.at(&["config", "strategy"]),
            benchmark.at(&["metrics", "request_totals"]),
        ),
        Layout::V03 => (
            benchmark.at(&["args", "strategy"]),
            benchmark.get("request_totals"),
        ),
    };
    let strategy = strategy.ok_or_else(|| {
        benchmark.missing(
            match layout {
                Layout::V04 => "config.strategy",
                Layout::V03 => "args.strategy",
            },
            "the strategy with the level",
        )
    })?;
    let Some(mut level) = strategy_level(&strategy, origin, builder)? else {
        return Ok(None);
    };
    let totals = totals.ok_or_else(|| {
        benchmark.missing(
            match layout {
                Layout::V04 => "metrics.request_totals",
                Layout::V03 => "request_totals",
            },
            "{successful, errored, incomplete, total}",
        )
    })?;
    let successful = totals.req_count("successful", "a request count")?;
    let errored = totals.opt_count("errored")?.unwrap_or(0);
    let incomplete = totals.opt_count("incomplete")?.unwrap_or(0);
    let total = totals
        .opt_count("total")?
        .unwrap_or(successful + errored + incomplete);
    level.requests = Some(total);
    level.failures = Some(total.saturating_sub(successful));
    if incomplete > 0 {
        builder.note(format!(
            "{origin}: {incomplete} incomplete requests (cancelled at the end) counted as failures"
        ));
    }
    level.duration_s = benchmark.opt_number("duration")?;
    let metrics = benchmark.field("metrics", "GuideLLM's metrics")?;
    let successful_mean = |name: &str| -> Result<Option<f64>, InputError> {
        match metrics.at(&[name, "successful"]) {
            Some(node) => node.opt_number("mean"),
            None => Ok(None),
        }
    };
    level.requests_per_s = successful_mean("requests_per_second")?;
    level.output_tokens_per_s = successful_mean("output_tokens_per_second")?;
    level.input_tokens_mean = successful_mean("prompt_token_count")?;
    level.output_tokens_mean = successful_mean("output_token_count")?;
    let mut latencies = vec![
        ("time_to_first_token_ms", Metric::Ttft, 1e3),
        ("inter_token_latency_ms", Metric::Tpot, 1e3),
        ("request_latency", Metric::E2e, 1.0),
    ];
    if layout == Layout::V04 {
        latencies.push(("time_per_output_token_ms", Metric::E2ePerToken, 1e3));
    }
    for (name, metric, scale) in latencies {
        if let Some(distribution) = metrics.at(&[name, "successful"]) {
            distribution_stats(&distribution, &mut level, metric, scale)?;
        }
    }
    Ok(Some(level))
}

/// `{mean, median, min, max, count, percentiles: {p001 … p999}}` of the successful requests.
fn distribution_stats(
    node: &Node,
    level: &mut Level,
    metric: Metric,
    scale: f64,
) -> Result<(), InputError> {
    if node.opt_count("count")? == Some(0) {
        return Ok(());
    }
    let mut set = |statistic, value: Option<f64>| {
        if let Some(value) = value {
            set_stat(level, metric, statistic, value, scale);
        }
    };
    set(Percentile::Mean, node.opt_number("mean")?);
    set(Percentile::P(0.0), node.opt_number("min")?);
    set(Percentile::P(100.0), node.opt_number("max")?);
    set(Percentile::P(50.0), node.opt_number("median")?);
    if let Some(percentiles) = node.get("percentiles") {
        for (key, p) in PERCENTILES {
            set(Percentile::P(p), percentiles.opt_number(key)?);
        }
    }
    Ok(())
}

// ----- CSV -----------------------------------------------------------------------------------

/// The three header rows, joined: `Time to First Token / Successful ms / Mean`.
struct CsvColumns {
    headers: Vec<(String, String, String)>,
}

impl CsvColumns {
    fn find(&self, group: &str, name: &str, stat: &str) -> Option<usize> {
        self.headers
            .iter()
            .position(|(g, n, s)| g == group && n == name && s == stat)
    }

    /// The column of a statistic whose unit sits in the name (`Successful ms`).
    fn find_unit(&self, group: &str, stat: &str) -> Option<(usize, f64)> {
        self.headers
            .iter()
            .enumerate()
            .find_map(|(index, (g, n, s))| {
                if g != group || s != stat {
                    return None;
                }
                let scale = match n.as_str() {
                    "Successful ms" => 1e3,
                    "Successful Sec" => 1.0,
                    _ => return None,
                };
                Some((index, scale))
            })
    }
}

fn read_csv(input: &Input, builder: &mut Builder) -> Result<(), InputError> {
    let location = input.path.display().to_string();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_path(&input.path)
        .map_err(|err| InputError::file(&location, format!("cannot read: {err}")))?;
    let mut rows: Vec<csv::StringRecord> = Vec::new();
    for (index, record) in reader.records().enumerate() {
        rows.push(record.map_err(|err| {
            InputError::file(format!("{location}:{}", index + 1), err.to_string())
        })?);
    }
    let is_guidellm = rows.len() >= 3
        && rows[0].iter().any(|c| c == "Benchmark")
        && rows[1].iter().any(|c| c == "Strategy");
    if !is_guidellm {
        let message = "not a GuideLLM benchmarks.csv: expected three header rows (group, name, \
                       statistic) with the column Benchmark / Strategy";
        if input.named {
            return Err(InputError::file(&location, message));
        }
        builder.note(format!("{location}: skipped, {message}"));
        return Ok(());
    }
    let width = rows[0].len();
    let columns = CsvColumns {
        headers: (0..width)
            .map(|i| {
                let cell = |row: usize| rows[row].get(i).unwrap_or_default().trim().to_string();
                (cell(0), cell(1), cell(2))
            })
            .collect(),
    };
    let strategy = columns
        .find("Benchmark", "Strategy", "")
        .ok_or_else(|| InputError::file(&location, "no column Benchmark / Strategy"))?;
    builder.file(&input.path);
    let mut layout = Layout::V04;
    let metadata_column = columns.find("Runtime Info", "Metadata", "");
    for (index, row) in rows.iter().enumerate().skip(3) {
        let line = index + 1;
        let cell_location = format!("{location}:{line}");
        let cell = |column: usize| row.get(column).unwrap_or_default().trim();
        if row.iter().all(|c| c.trim().is_empty()) {
            continue;
        }
        if let Some(column) = metadata_column {
            if let Ok(metadata) = serde_json::from_str::<serde_json::Value>(cell(column)) {
                if let Some(version) = metadata.get("guidellm_version").and_then(|v| v.as_str()) {
                    builder.version(version);
                    if version.starts_with("0.3.") {
                        layout = Layout::V03;
                    }
                }
            }
        }
        let number_at = |column: usize, header: &str| -> Result<Option<f64>, InputError> {
            let text = cell(column);
            if text.is_empty() {
                return Ok(None);
            }
            text.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .map(Some)
                .ok_or_else(|| {
                    InputError::file(
                        &cell_location,
                        format!("column {header}: '{text}' is not a number"),
                    )
                })
        };
        let label = cell(strategy);
        let (kind, amount) = label.split_once('@').unwrap_or((label, ""));
        let mut level = Level::default();
        let amount_number = || {
            amount
                .parse::<f64>()
                .ok()
                .filter(|v| *v > 0.0)
                .ok_or_else(|| {
                    InputError::file(
                        &cell_location,
                        format!(
                            "column Benchmark / Strategy: '{label}' has no level; expected e.g. \
                         concurrent@4, constant@8.00 or synchronous"
                        ),
                    )
                })
        };
        match kind {
            "synchronous" => level.concurrency = Some(1.0),
            "concurrent" => level.concurrency = Some(amount_number()?),
            "throughput" => {
                builder.note(format!(
                    "{cell_location}: skipped, the throughput strategy sends all requests at \
                     once and has no load level"
                ));
                continue;
            }
            _ => level.rate = Some(amount_number()?),
        }
        let count = |name: &str| -> Result<Option<u64>, InputError> {
            match columns.find("Request Counts", name, "") {
                Some(column) => Ok(number_at(column, &format!("Request Counts / {name}"))?
                    .map(|v| v.round() as u64)),
                None => Ok(None),
            }
        };
        let successful = count("Successful")?;
        let incomplete = count("Incomplete")?.unwrap_or(0);
        let errored = count("Errored")?.unwrap_or(0);
        let total = count("Total")?.or(successful.map(|s| s + errored + incomplete));
        level.requests = total;
        level.failures = match (total, successful) {
            (Some(t), Some(s)) => Some(t.saturating_sub(s)),
            _ => None,
        };
        if incomplete > 0 {
            builder.note(format!(
                "{cell_location}: {incomplete} incomplete requests (cancelled at the end) \
                 counted as failures"
            ));
        }
        let scalar = |group: &str, name: &str, stat: &str| -> Result<Option<f64>, InputError> {
            match columns.find(group, name, stat) {
                Some(column) => number_at(column, &format!("{group} / {name} / {stat}")),
                None => Ok(None),
            }
        };
        level.duration_s = scalar("Timings", "Duration", "Sec")?;
        level.requests_per_s = scalar("Server Throughput", "Successful Requests/Sec", "Mean")?;
        level.output_tokens_per_s =
            scalar("Token Throughput", "Successful Output Tokens/Sec", "Mean")?;
        level.input_tokens_mean = scalar("Token Metrics", "Successful Input Tokens", "Mean")?;
        level.output_tokens_mean = scalar("Token Metrics", "Successful Output Tokens", "Mean")?;
        let mut latencies = vec![
            ("Time to First Token", Metric::Ttft),
            ("Inter Token Latency", Metric::Tpot),
            ("Request Latency", Metric::E2e),
        ];
        if layout == Layout::V04 {
            latencies.push(("Time per Output Token", Metric::E2ePerToken));
        }
        for (group, metric) in latencies {
            if let Some((column, scale)) = columns.find_unit(group, "Mean") {
                if let Some(mean) = number_at(column, &format!("{group} / Mean"))? {
                    set_stat(&mut level, metric, Percentile::Mean, mean, scale);
                }
            }
            if let Some((column, scale)) = columns.find_unit(group, "Median") {
                if let Some(median) = number_at(column, &format!("{group} / Median"))? {
                    set_stat(&mut level, metric, Percentile::P(50.0), median, scale);
                }
            }
            if let Some((column, scale)) = columns.find_unit(group, "Percentiles") {
                let text = cell(column);
                if text.is_empty() {
                    continue;
                }
                let values: Vec<f64> = serde_json::from_str(text).map_err(|_| {
                    InputError::file(
                        &cell_location,
                        format!(
                            "column {group} / Percentiles: expected a list of 11 numbers [min, \
                             p0.1, p1, p5, p10, p25, p75, p90, p95, p99, max]"
                        ),
                    )
                })?;
                if values.len() != CSV_PERCENTILES.len() {
                    return Err(InputError::file(
                        &cell_location,
                        format!(
                            "column {group} / Percentiles: {} numbers; expected 11 [min, p0.1, \
                             p1, p5, p10, p25, p75, p90, p95, p99, max]",
                            values.len()
                        ),
                    ));
                }
                for (p, value) in CSV_PERCENTILES.iter().zip(values) {
                    set_stat(&mut level, metric, Percentile::P(*p), value, scale);
                }
            }
        }
        builder.level(level, format!("{cell_location} ({label})"));
    }
    layout_notes(layout, builder);
    builder.note(
        "GuideLLM CSV: the percentile lists have no p50 (the Median column is used) and no p99.9",
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{read as import, ImportFormat};
    use crate::slo::Percentile;
    use crate::store::steps::Metric;

    fn read(relative: &str) -> super::Imported {
        import(ImportFormat::Guidellm, &[fixture(relative)]).unwrap()
    }

    #[test]
    fn v0_8_json_concurrent_levels() {
        let imported = read("guidellm/v0.8.1/benchmarks-concurrent-1-4-8.json");
        assert_eq!(imported.tool_version.as_deref(), Some("0.8.1"));
        assert_eq!(imported.streaming, Some(true));
        let loads: Vec<_> = imported.levels.iter().map(|l| l.concurrency).collect();
        assert_eq!(loads, [Some(1.0), Some(4.0), Some(8.0)]);
        let four = &imported.levels[1];
        assert_eq!(four.requests, Some(16));
        assert_eq!(four.failures, Some(0));
        close(four.duration_s.unwrap(), 1.1773722171783447);
        close(four.requests_per_s.unwrap(), 13.589585151198087);
        close(four.output_tokens_per_s.unwrap(), 434.86672483833877);
        close(four.input_tokens_mean.unwrap(), 52.75);
        close(
            value(four, Metric::Ttft, Percentile::Mean),
            0.01834075152873993,
        );
        close(
            value(four, Metric::Ttft, Percentile::P(50.0)),
            0.01708698272705078,
        );
        close(
            value(four, Metric::Ttft, Percentile::P(10.0)),
            0.012542963027954102,
        );
        close(
            value(four, Metric::Ttft, Percentile::P(99.0)),
            0.03076457977294922,
        );
        close(
            value(four, Metric::Ttft, Percentile::P(0.0)),
            0.011224746704101562,
        );
        close(
            value(four, Metric::E2e, Percentile::Mean),
            0.28135575354099274,
        );
        close(
            value(four, Metric::E2e, Percentile::P(95.0)),
            0.2892916202545166,
        );
        // GuideLLM ITL is capplan's TPOT; GuideLLM TPOT is e2e per token.
        close(
            value(four, Metric::Tpot, Percentile::Mean),
            0.008453798390203906,
        );
        close(
            value(four, Metric::E2ePerToken, Percentile::Mean),
            0.008762765675783157,
        );
        assert!(four.stats(Metric::Itl).is_none());
        let ps: Vec<f64> = four
            .stats(Metric::Ttft)
            .unwrap()
            .percentiles
            .iter()
            .map(|p| p.0)
            .collect();
        assert_eq!(
            ps,
            [0.0, 0.1, 1.0, 5.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 100.0]
        );
    }

    #[test]
    fn v0_8_json_rates_with_errors() {
        let imported = read("guidellm/v0.8.1/benchmarks-constant-4-8-with-errors.json");
        let loads: Vec<_> = imported
            .levels
            .iter()
            .map(|l| (l.concurrency, l.rate))
            .collect();
        // max_concurrency 10240 of the rate strategy is not the level.
        assert_eq!(loads, [(None, Some(4.0)), (None, Some(8.0))]);
        let four = &imported.levels[0];
        assert_eq!(four.requests, Some(20));
        assert_eq!(four.failures, Some(3));
        assert_eq!(imported.levels[1].failures, Some(1));
        close(four.requests_per_s.unwrap(), 3.3827485874093997);
        close(
            value(four, Metric::Ttft, Percentile::Mean),
            0.013659000396728516,
        );
        close(
            value(four, Metric::Ttft, Percentile::P(90.0)),
            0.016474008560180664,
        );
        assert!(
            imported.notes.iter().any(|n| n.contains("10240")),
            "{:?}",
            imported.notes
        );
    }

    #[test]
    fn v0_3_json_drops_its_tpot() {
        let imported = read("guidellm/v0.3.1/benchmarks-concurrent-1-4-8.json");
        assert_eq!(imported.tool_version.as_deref(), Some("0.3.x"));
        assert_eq!(imported.streaming, None);
        let loads: Vec<_> = imported.levels.iter().map(|l| l.concurrency).collect();
        assert_eq!(loads, [Some(1.0), Some(4.0), Some(8.0)]);
        let four = &imported.levels[1];
        assert_eq!(four.requests, Some(16));
        assert_eq!(four.failures, Some(0));
        close(four.duration_s.unwrap(), 1.214416265487671);
        close(four.requests_per_s.unwrap(), 13.175054101877423);
        close(
            value(four, Metric::Ttft, Percentile::Mean),
            0.03424280881881714,
        );
        close(
            value(four, Metric::Ttft, Percentile::P(99.0)),
            0.09943127632141113,
        );
        close(
            value(four, Metric::E2e, Percentile::Mean),
            0.2963813245296478,
        );
        close(
            value(four, Metric::Tpot, Percentile::Mean),
            0.008448883410423033,
        );
        // 0.3's TPOT ((last − first)/out, 8.18 ms) has no capplan equivalent.
        assert!(four.stats(Metric::E2ePerToken).is_none());
        let notes = imported.notes.join("\n");
        assert!(
            notes.contains("GuideLLM 0.3 time_per_output_token_ms"),
            "{notes}"
        );
        // Same magnitude as 0.8.1 for the comparable run.
        let new = read("guidellm/v0.8.1/benchmarks-concurrent-1-4-8.json");
        for (a, b) in imported.levels.iter().zip(&new.levels) {
            let (x, y) = (
                value(a, Metric::Tpot, Percentile::Mean),
                value(b, Metric::Tpot, Percentile::Mean),
            );
            assert!((x / y - 1.0).abs() < 0.05, "{x} vs {y}");
        }
    }

    #[test]
    fn v0_8_csv_matches_the_json() {
        let csv = read("guidellm/v0.8.1/benchmarks-concurrent-1-4-8.csv");
        let json = read("guidellm/v0.8.1/benchmarks-concurrent-1-4-8.json");
        assert_eq!(csv.tool_version.as_deref(), Some("0.8.1"));
        assert_eq!(csv.levels.len(), 3);
        for (c, j) in csv.levels.iter().zip(&json.levels) {
            assert_eq!(c.concurrency, j.concurrency);
            assert_eq!(c.requests, j.requests);
            assert_eq!(c.failures, j.failures);
            close(c.duration_s.unwrap(), j.duration_s.unwrap());
            close(c.requests_per_s.unwrap(), j.requests_per_s.unwrap());
            close(
                c.output_tokens_per_s.unwrap(),
                j.output_tokens_per_s.unwrap(),
            );
            for metric in [Metric::Ttft, Metric::Tpot, Metric::E2e, Metric::E2ePerToken] {
                for p in [
                    Percentile::Mean,
                    Percentile::P(0.0),
                    Percentile::P(50.0),
                    Percentile::P(90.0),
                    Percentile::P(99.0),
                    Percentile::P(100.0),
                ] {
                    close(value(c, metric, p), value(j, metric, p));
                }
            }
            // The CSV has no p99.9.
            assert!(c.value(Metric::Ttft, Percentile::P(99.9)).is_none());
        }
        close(
            value(&csv.levels[1], Metric::Ttft, Percentile::P(10.0)),
            0.012542963027954102,
        );
    }

    #[test]
    fn a_folder_prefers_the_json_over_its_csv() {
        let imported = read("guidellm/v0.8.1");
        // concurrent JSON + constant JSON; the concurrent CSV is the same run.
        assert_eq!(imported.files.len(), 2);
        assert_eq!(imported.levels.len(), 5);
        assert!(
            imported
                .notes
                .iter()
                .any(|n| n.contains("holds the same run")),
            "{:?}",
            imported.notes
        );
    }

    #[test]
    fn other_tools_and_broken_files_are_named() {
        let vllm = fixture("vllm-bench-serve/v0.33.0-save-detailed/openai-chat-8.0qps-llama-3.1-8b-20261123-112220.json");
        let err = import(ImportFormat::Guidellm, &[vllm])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("openai-chat-8.0qps")
                && err.contains("`benchmarks`")
                && err.contains("vllm-bench"),
            "{err}"
        );

        let dir = scratch("guidellm-broken");
        let text = std::fs::read_to_string(fixture(
            "guidellm/v0.8.1/benchmarks-constant-4-8-with-errors.json",
        ))
        .unwrap();
        let cut = dir.join("cut.json");
        std::fs::write(&cut, &text[..5000]).unwrap();
        let err = import(ImportFormat::Guidellm, &[cut])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cut.json:") && err.contains("truncated"),
            "{err}"
        );

        let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
        value["benchmarks"][1]["metrics"]
            .as_object_mut()
            .unwrap()
            .remove("request_totals");
        let missing = dir.join("missing.json");
        std::fs::write(&missing, value.to_string()).unwrap();
        let err = import(ImportFormat::Guidellm, &[missing])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("missing.json") && err.contains("`benchmarks[1].metrics.request_totals`"),
            "{err}"
        );

        let csv = dir.join("steps.csv");
        std::fs::write(&csv, "concurrency,qps\n1,2\n").unwrap();
        let err = import(ImportFormat::Guidellm, &[csv])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("steps.csv") && err.contains("Benchmark / Strategy"),
            "{err}"
        );
    }
}
