//! vLLM's serving benchmark: `vllm bench serve --save-result` (one JSON object a level),
//! `--append-result` (one object a line), `vllm bench sweep serve` (`summary.csv` with one row a
//! level and run, `BENCH--…/summary.json` lists and `run=<k>.json`), and the legacy
//! `benchmarks/benchmark_serving.py` (about v0.5–0.8: no `failed`, `"request_goodput:"`).
//!
//! Keys: `max_concurrency` (null = unlimited), `request_rate` (a number or the string "inf"),
//! `completed`/`failed`, `duration` (s), `request_throughput`, `output_throughput`,
//! `{mean,median,std,p<P>}_{ttft,tpot,itl,e2el}_ms` (ms), raw `latencies` (s).

use std::path::{Path, PathBuf};

use serde_json::{Map, Number, Value};

use super::{
    file_name, has_extension, kind, load_json_stream, number, other_tool_hint, set_stat, walk,
    Builder, ImportFormat, Imported, Input, Node,
};
use crate::error::InputError;
use crate::slo::Percentile;
use crate::stats::quantile_sorted;
use crate::store::steps::{Level, Metric};

const EXPECTED: &str = "a vLLM bench result (a JSON object per level with `completed`, \
                        `duration` and `request_throughput`, or JSON Lines of them)";

/// Result keys that are not imported, with why.
const NOT_IMPORTED: &[(&str, &str)] = &[
    ("request_goodput", "request_goodput"),
    ("request_goodput:", "request_goodput"),
    ("total_token_throughput", "total_token_throughput"),
    (
        "max_output_tokens_per_s",
        "max_output_tokens_per_s (a peak estimate)",
    ),
    (
        "max_concurrent_requests",
        "max_concurrent_requests (a peak estimate, not the level)",
    ),
    ("queue_times", "queue_times (client-side wait for a slot)"),
    ("rtfx", "rtfx"),
];

fn metric(name: &str) -> Option<Metric> {
    Some(match name {
        "ttft" => Metric::Ttft,
        "tpot" => Metric::Tpot,
        "itl" => Metric::Itl,
        "e2el" => Metric::E2e,
        _ => return None,
    })
}

fn candidate(path: &Path) -> bool {
    has_extension(path, "json") || has_extension(path, "jsonl") || has_extension(path, "csv")
}

/// The files to read: named files as given; in folders, every JSON/JSONL/CSV file, except the
/// per-run files a sweep also summarises (`summary.csv` covers everything below its folder, a
/// `summary.json` list covers the `run=<k>.json` beside it).
fn inputs(paths: &[PathBuf], builder: &mut Builder) -> Result<Vec<Input>, InputError> {
    let mut inputs = Vec::new();
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
                "no vLLM bench results (*.json, *.jsonl or a sweep's summary.csv) in this folder \
                 or below it",
            ));
        }
        let sweep_dirs: Vec<PathBuf> = found
            .iter()
            .filter(|p| file_name(p) == "summary.csv")
            .filter_map(|p| p.parent().map(Path::to_path_buf))
            .collect();
        let mut skipped = Vec::new();
        for file in found {
            let covered_by_csv =
                !has_extension(&file, "csv") && sweep_dirs.iter().any(|dir| file.starts_with(dir));
            let covered_by_list = file_name(&file) != "summary.json"
                && has_extension(&file, "json")
                && file.with_file_name("summary.json").is_file();
            if covered_by_csv || covered_by_list {
                skipped.push(file);
            } else {
                inputs.push(Input {
                    path: file,
                    named: false,
                });
            }
        }
        if !skipped.is_empty() {
            builder.note(format!(
                "{} per-run files skipped because a sweep summary (summary.csv or summary.json) \
                 beside or above them holds the same runs: {}",
                skipped.len(),
                skipped
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    Ok(inputs)
}

pub(super) fn read(paths: &[PathBuf]) -> Result<Imported, InputError> {
    let mut builder = Builder::new(ImportFormat::VllmBench);
    for input in inputs(paths, &mut builder)? {
        if has_extension(&input.path, "csv") {
            read_sweep_csv(&input, &mut builder)?;
        } else {
            read_json(&input, &mut builder)?;
        }
    }
    builder.finish()
}

fn is_result(node: &Node) -> bool {
    node.is_object() && node.has("completed") && node.has("duration")
}

fn read_json(input: &Input, builder: &mut Builder) -> Result<(), InputError> {
    let loaded = load_json_stream(&input.path, EXPECTED)?;
    let location = loaded.location.clone();
    // One object, several (JSON Lines), or a list of them (a sweep's summary.json).
    let mut results: Vec<Node> = Vec::new();
    for value in &loaded.values {
        let node = Node::root(&location, value);
        if value.is_array() {
            results.extend(node.items("a list of vLLM results")?);
        } else {
            results.push(node);
        }
    }
    if let Some(other) = results.iter().find(|node| !is_result(node)) {
        let message = format!(
            "not a vLLM bench result: expected {EXPECTED}, found {} without them{}",
            kind(other.value),
            other_tool_hint(other.value, ImportFormat::VllmBench)
        );
        if input.named {
            return Err(other.error(message));
        }
        builder.note(format!("{location}: skipped, {message}"));
        return Ok(());
    }
    loaded.note_non_finite(builder);
    builder.file(&input.path);
    let several = results.len() > 1;
    for (index, result) in results.iter().enumerate() {
        let origin = if several {
            format!("{location} #{}", index + 1)
        } else {
            location.clone()
        };
        if let Some(level) = level_from(result, &origin, builder)? {
            builder.level(level, origin);
        }
    }
    Ok(())
}

/// A CSV cell as the JSON value the result held: numbers, `inf` as the string vLLM writes,
/// stringified Python lists parsed back when they are plain numbers.
fn cell_value(cell: &str) -> Value {
    let cell = cell.trim();
    if cell.is_empty() {
        return Value::Null;
    }
    if let Ok(integer) = cell.parse::<u64>() {
        return Value::Number(integer.into());
    }
    if let Ok(float) = cell.parse::<f64>() {
        if let Some(number) = Number::from_f64(float) {
            return Value::Number(number);
        }
    }
    if cell.starts_with('[') {
        if let Ok(list) = serde_json::from_str::<Value>(cell) {
            return list;
        }
    }
    match cell {
        "True" => Value::Bool(true),
        "False" => Value::Bool(false),
        _ => Value::String(cell.to_string()),
    }
}

fn read_sweep_csv(input: &Input, builder: &mut Builder) -> Result<(), InputError> {
    let location = input.path.display().to_string();
    let mut reader = csv::ReaderBuilder::new()
        .from_path(&input.path)
        .map_err(|err| InputError::file(&location, format!("cannot read: {err}")))?;
    let headers = reader
        .headers()
        .map_err(|err| InputError::file(&location, format!("no header row: {err}")))?
        .clone();
    let has = |name: &str| headers.iter().any(|h| h == name);
    if !(has("completed") && has("duration")) {
        let message = "not a vLLM bench sweep summary.csv: expected columns `completed`, \
                       `duration`, `request_throughput` and the swept parameter";
        if input.named {
            return Err(InputError::file(&location, message));
        }
        builder.note(format!("{location}: skipped, {message}"));
        return Ok(());
    }
    builder.file(&input.path);
    let mut rows = Vec::new();
    for (index, record) in reader.records().enumerate() {
        let line = index + 2;
        let record = record
            .map_err(|err| InputError::file(format!("{location}:{line}"), err.to_string()))?;
        let mut object = Map::new();
        for (header, cell) in headers.iter().zip(record.iter()) {
            // The first, unnamed column is the pandas index.
            if !header.is_empty() {
                object.insert(header.to_string(), cell_value(cell));
            }
        }
        rows.push((line, Value::Object(object)));
    }
    if rows.is_empty() {
        return Err(InputError::file(&location, "no rows"));
    }
    if has("run_number") {
        builder.note(format!(
            "{location}: a `vllm bench sweep` summary, one row per level and run"
        ));
    }
    for (line, row) in &rows {
        let origin = format!("{location}:{line}");
        let node = Node::root(&origin, row);
        if let Some(level) = level_from(&node, &origin, builder)? {
            builder.level(level, origin.clone());
        }
    }
    Ok(())
}

/// The level of one result object; `None` (with a note) when it has no steady load.
fn level_from(
    result: &Node,
    origin: &str,
    builder: &mut Builder,
) -> Result<Option<Level>, InputError> {
    let legacy = !result.has("failed");
    if !legacy {
        builder.version("vllm bench serve");
    } else {
        builder.version("legacy benchmark_serving.py (about 0.5-0.8)");
        builder.note(
            "legacy vLLM benchmark_serving.py: older clients start TTFT at the first SSE chunk \
             even when it carries only the role, so TTFT may read low",
        );
    }
    let mut level = Level::default();

    // The load.
    let max_concurrency = result.opt_number("max_concurrency")?.filter(|c| *c > 0.0);
    let rate = match result.get("request_rate") {
        None => None,
        Some(node) => match node.value {
            Value::String(s) if s.eq_ignore_ascii_case("inf") => None,
            Value::Number(_) => Some(node.number()?).filter(|r| *r > 0.0),
            other => {
                return Err(node.error(format!(
                    "expected a rate in requests/s or \"inf\", found {}",
                    kind(other)
                )))
            }
        },
    };
    match (max_concurrency, rate) {
        (Some(c), None) => level.concurrency = Some(c),
        (c, Some(r)) => {
            level.rate = Some(r);
            if let Some(c) = c {
                builder.note(format!(
                    "{origin}: request rate {} req/s with --max-concurrency {}: imported as the \
                     rate (the concurrency is only a cap)",
                    number(r),
                    number(c)
                ));
            }
        }
        (None, None) => {
            builder.note(format!(
                "{origin}: skipped, request_rate \"inf\" without max_concurrency sends every \
                 request at once, which is no steady load level (rerun with --max-concurrency or \
                 --request-rate)"
            ));
            return Ok(None);
        }
    }

    // Counts.
    let completed = result.req_count("completed", "the number of successful requests")?;
    let (requests, failures) = if legacy {
        legacy_counts(result, completed, origin, builder)?
    } else {
        let failed = result.req_count("failed", "the number of failed requests")?;
        (Some(completed + failed), Some(failed))
    };
    level.requests = requests;
    level.failures = failures;
    level.duration_s = result.opt_number("duration")?;
    level.requests_per_s = result.opt_number("request_throughput")?;
    level.output_tokens_per_s = result.opt_number("output_throughput")?;
    if completed > 0 {
        let per_request = |key: &str| -> Result<Option<f64>, InputError> {
            Ok(result
                .opt_number(key)?
                .map(|total| total / completed as f64))
        };
        level.input_tokens_mean = per_request("total_input_tokens")?;
        level.output_tokens_mean = per_request("total_output_tokens")?;
    }

    // Latency statistics: `<stat>_<metric>_ms`.
    let mut dropped_std = false;
    for (key, node) in result.entries() {
        let Some(rest) = key.strip_suffix("_ms") else {
            continue;
        };
        let Some((stat, name)) = rest.split_once('_') else {
            continue;
        };
        let statistic = match stat {
            "mean" => Percentile::Mean,
            "median" => Percentile::P(50.0),
            "std" => {
                dropped_std = true;
                continue;
            }
            p => match p.strip_prefix('p').and_then(|d| d.parse::<f64>().ok()) {
                Some(p) if p > 0.0 && p < 100.0 => Percentile::P(p),
                _ => continue,
            },
        };
        let Some(metric) = metric(name) else {
            builder.drop_quantity(format!("vLLM `{key}`"));
            continue;
        };
        if node.value.is_null() {
            continue;
        }
        set_stat(&mut level, metric, statistic, node.number()?, 1e3);
    }
    if dropped_std {
        builder.drop_quantity("vLLM standard deviations (std_*_ms)");
    }
    if level.stats(Metric::E2e).is_none() {
        e2e_from_latencies(result, completed, &mut level, origin, builder)?;
    }
    for (key, label) in NOT_IMPORTED {
        if result.has(key) {
            builder.drop_quantity(format!("vLLM {label}"));
        }
    }
    if let Some(backend) = result.get("backend").and_then(|n| n.str()) {
        // Every OpenAI-compatible request function of vLLM's benchmark streams.
        if backend.starts_with("openai") || backend == "vllm" {
            builder.streaming(true);
        }
    }
    builder.note("vLLM *_ms statistics converted from ms to s; median_* imported as p50");
    builder.note(
        "vLLM TPOT ((e2e − TTFT)/(output tokens − 1) per request) imported as tpot; vLLM ITL \
         (every gap between chunks, pooled over requests) as itl",
    );
    Ok(Some(level))
}

/// Requests and failures of the legacy script, which has no `failed`: from the `errors` list
/// (always written by it), else `num_prompts` − `completed`.
fn legacy_counts(
    result: &Node,
    completed: u64,
    origin: &str,
    builder: &mut Builder,
) -> Result<(Option<u64>, Option<u64>), InputError> {
    if let Some(errors) = result.get("errors") {
        let errors = errors.items("a list of error strings (\"\" for success)")?;
        let failed = errors
            .iter()
            .filter(|e| e.str().is_some_and(|s| !s.is_empty()))
            .count() as u64;
        builder.note(format!(
            "{origin}: no `failed` key (legacy script): failures counted from the `errors` list"
        ));
        return Ok((Some(errors.len() as u64), Some(failed)));
    }
    if let Some(asked) = result.opt_count("num_prompts")? {
        builder.note(format!(
            "{origin}: no `failed` key (legacy script): failures taken as num_prompts − completed"
        ));
        return Ok((
            Some(asked.max(completed)),
            Some(asked.saturating_sub(completed)),
        ));
    }
    builder.note(format!(
        "{origin}: no `failed` key and no `errors` list: failures unknown"
    ));
    Ok((Some(completed), None))
}

/// E2E statistics from the raw `latencies` (s) when `e2el` was not in `--percentile-metrics`:
/// the mean, min, max and p50 plus the percentiles the file has for the other metrics, of the
/// successful requests (by `errors` when present, else the non-zero latencies).
fn e2e_from_latencies(
    result: &Node,
    completed: u64,
    level: &mut Level,
    origin: &str,
    builder: &mut Builder,
) -> Result<(), InputError> {
    let Some(node) = result.get("latencies") else {
        builder.note(format!(
            "{origin}: no E2E statistics (e2el was not in --percentile-metrics and there is no \
             `latencies` list)"
        ));
        return Ok(());
    };
    let latencies: Vec<f64> = node
        .items("a list of request latencies in seconds")?
        .iter()
        .map(|n| n.number())
        .collect::<Result<_, _>>()?;
    let errors: Option<Vec<bool>> = result.get("errors").and_then(|e| {
        e.value.as_array().map(|list| {
            list.iter()
                .map(|v| v.as_str().is_some_and(|s| !s.is_empty()))
                .collect()
        })
    });
    let mut ok: Vec<f64> = match errors {
        Some(errors) if errors.len() == latencies.len() => latencies
            .iter()
            .zip(errors)
            .filter(|(_, failed)| !failed)
            .map(|(l, _)| *l)
            .collect(),
        _ => latencies.iter().copied().filter(|l| *l > 0.0).collect(),
    };
    if ok.len() as u64 != completed || ok.is_empty() {
        builder.note(format!(
            "{origin}: no E2E statistics (e2el was not in --percentile-metrics, and the \
             `latencies` list has {} successful entries for {completed} completed requests)",
            ok.len()
        ));
        return Ok(());
    }
    ok.sort_by(f64::total_cmp);
    let mut percentiles: Vec<f64> = level
        .latency
        .iter()
        .flat_map(|(_, s)| s.percentiles.iter().map(|(p, _)| *p))
        .chain([0.0, 50.0, 100.0])
        .collect();
    percentiles.sort_by(f64::total_cmp);
    percentiles.dedup();
    let mean = ok.iter().sum::<f64>() / ok.len() as f64;
    set_stat(level, Metric::E2e, Percentile::Mean, mean, 1.0);
    for p in percentiles {
        set_stat(
            level,
            Metric::E2e,
            Percentile::P(p),
            quantile_sorted(&ok, p / 100.0),
            1.0,
        );
    }
    builder.note(
        "vLLM E2E statistics computed from the per-request `latencies` list (s) of the successful \
         requests (e2el was not in --percentile-metrics); percentiles interpolate linearly like \
         vLLM's own",
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
        import(ImportFormat::VllmBench, &[fixture(relative)]).unwrap()
    }

    #[test]
    fn save_result_files_one_level_each() {
        let imported = read("vllm-bench-serve/v0.33.0");
        assert_eq!(imported.tool, "vllm-bench");
        assert_eq!(imported.tool_version.as_deref(), Some("vllm bench serve"));
        assert_eq!(imported.streaming, Some(true));
        assert_eq!(imported.files.len(), 3);
        let loads: Vec<_> = imported
            .levels
            .iter()
            .map(|l| (l.concurrency, l.rate))
            .collect();
        assert_eq!(
            loads,
            [(Some(1.0), None), (Some(4.0), None), (Some(8.0), None)]
        );
        let four = &imported.levels[1];
        assert_eq!(four.requests, Some(16));
        assert_eq!(four.failures, Some(0));
        close(four.duration_s.unwrap(), 1.1180149909996544);
        close(four.requests_per_s.unwrap(), 14.311078231333793);
        close(four.output_tokens_per_s.unwrap(), 457.9545034026814);
        close(four.input_tokens_mean.unwrap(), 26.0);
        close(four.output_tokens_mean.unwrap(), 32.0);
        close(
            value(four, Metric::Ttft, Percentile::Mean),
            0.01612749600008101,
        );
        close(
            value(four, Metric::Ttft, Percentile::P(50.0)),
            0.015649635000045237,
        );
        close(
            value(four, Metric::Ttft, Percentile::P(99.0)),
            0.01987192125002366,
        );
        close(
            value(four, Metric::Tpot, Percentile::P(90.0)),
            0.008478059225786462,
        );
        close(
            value(four, Metric::Itl, Percentile::P(95.0)),
            0.009468559999504578,
        );
        close(
            value(four, Metric::E2e, Percentile::Mean),
            0.27857045406250336,
        );
        close(
            value(four, Metric::E2e, Percentile::P(99.0)),
            0.2826482796499931,
        );
        let notes = imported.notes.join("\n");
        assert!(
            notes.contains("standard deviations") && notes.contains("max_concurrent_requests"),
            "{notes}"
        );
    }

    #[test]
    fn save_detailed_rate_run_with_failures_computes_e2e_from_latencies() {
        let imported = read("vllm-bench-serve/v0.33.0-save-detailed");
        assert_eq!(imported.levels.len(), 1);
        let level = &imported.levels[0];
        assert_eq!((level.concurrency, level.rate), (None, Some(8.0)));
        assert_eq!(level.requests, Some(20));
        assert_eq!(level.failures, Some(2));
        close(
            value(level, Metric::Ttft, Percentile::Mean),
            0.01491876649990647,
        );
        close(
            value(level, Metric::Ttft, Percentile::P(99.0)),
            0.02205267356918739,
        );
        // Only p99 was asked for: no p90.
        assert!(level.value(Metric::Ttft, Percentile::P(90.0)).is_none());
        // The 18 successful latencies (the two failures are 0.0 in the list).
        let e2e = level.stats(Metric::E2e).unwrap();
        let ps: Vec<f64> = e2e.percentiles.iter().map(|p| p.0).collect();
        assert_eq!(ps, [0.0, 50.0, 99.0, 100.0]);
        assert!(value(level, Metric::E2e, Percentile::P(0.0)) > 0.25);
        let mean = value(level, Metric::E2e, Percentile::Mean);
        assert!(mean > 0.27 && mean < 0.29, "{mean}");
        assert!(
            imported
                .notes
                .iter()
                .any(|n| n.contains("`latencies` list")),
            "{:?}",
            imported.notes
        );
    }

    #[test]
    fn legacy_script_counts_failures_from_errors() {
        let imported = read("vllm-bench-serve/legacy-benchmark_serving-v0.8");
        assert_eq!(
            imported.tool_version.as_deref(),
            Some("legacy benchmark_serving.py (about 0.5-0.8)")
        );
        let level = &imported.levels[0];
        assert_eq!(level.rate, Some(8.0));
        assert_eq!(level.requests, Some(20));
        assert_eq!(level.failures, Some(2));
        close(
            value(level, Metric::Tpot, Percentile::Mean),
            0.008429085586019637,
        );
        // No latencies list in the legacy file: no E2E.
        assert!(level.stats(Metric::E2e).is_none());
        let notes = imported.notes.join("\n");
        assert!(
            notes.contains("`errors` list") && notes.contains("request_goodput"),
            "{notes}"
        );
        assert!(notes.contains("TTFT may read low"), "{notes}");
    }

    #[test]
    fn append_result_lines_are_three_levels() {
        let imported = read("vllm-bench-serve/v0.33.0-append-result/sweep-append.jsonl");
        let loads: Vec<_> = imported.levels.iter().map(|l| l.concurrency).collect();
        assert_eq!(loads, [Some(1.0), Some(4.0), Some(8.0)]);
        let one = &imported.levels[0];
        assert_eq!(one.requests, Some(16));
        close(one.duration_s.unwrap(), 4.364054321999902);
        // Default percentiles: p99 only, E2E from the latencies list.
        assert!(one.value(Metric::Ttft, Percentile::P(99.0)).is_some());
        assert!(one.value(Metric::E2e, Percentile::P(99.0)).is_some());
    }

    #[test]
    fn sweep_folder_reads_summary_csv_and_merges_runs() {
        let imported = read("vllm-bench-serve/v0.33.0-sweep-serve");
        // Only summary.csv is read: the BENCH--… JSON files hold the same runs.
        assert_eq!(imported.files.len(), 1);
        assert!(imported.files[0].ends_with("summary.csv"));
        let loads: Vec<_> = imported.levels.iter().map(|l| l.concurrency).collect();
        assert_eq!(loads, [Some(1.0), Some(4.0), Some(8.0)]);
        let one = &imported.levels[0];
        assert_eq!(one.requests, Some(32));
        assert_eq!(one.failures, Some(0));
        close(
            one.duration_s.unwrap(),
            4.363463381000656 + 4.367034610000701,
        );
        // Two runs of 16 successes: the mean E2E is the average of the runs' means.
        close(
            value(one, Metric::E2e, Percentile::Mean),
            (0.27237782768764873 + 0.2725431977500534) / 2.0,
        );
        close(
            value(one, Metric::Ttft, Percentile::P(99.0)),
            (0.01315654279987939 + 0.015141507499902218) / 2.0,
        );
        let notes = imported.notes.join("\n");
        assert!(notes.contains("concurrency 1: 2 results merged"), "{notes}");
        assert!(notes.contains("per-run files skipped"), "{notes}");
    }

    #[test]
    fn sweep_run_folder_reads_the_summary_list_only() {
        let imported =
            read("vllm-bench-serve/v0.33.0-sweep-serve/concurrency-sweep/BENCH--max_concurrency=1");
        assert_eq!(imported.files.len(), 1);
        assert!(imported.files[0].ends_with("summary.json"));
        assert_eq!(imported.levels.len(), 1);
        assert_eq!(imported.levels[0].requests, Some(32));
    }

    #[test]
    fn other_tools_and_broken_files_are_named() {
        let aiperf =
            fixture("aiperf/v0.13.0-request-rate-with-errors/artifacts/profile_export_aiperf.json");
        let err = import(ImportFormat::VllmBench, &[aiperf])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("profile_export_aiperf.json") && err.contains("aiperf"),
            "{err}"
        );
        assert!(err.contains("`completed`"), "{err}");

        let dir = scratch("vllm-broken");
        let source = fixture("vllm-bench-serve/v0.33.0/openai-chat-infqps-concurrency4-llama-3.1-8b-20261123-112043.json");
        let text = std::fs::read_to_string(source).unwrap();
        let truncated = dir.join("cut.json");
        std::fs::write(&truncated, &text[..text.len() - 40]).unwrap();
        let err = import(ImportFormat::VllmBench, &[truncated])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cut.json:1") && err.contains("truncated"),
            "{err}"
        );

        let mut result: serde_json::Value = serde_json::from_str(&text).unwrap();
        result["request_rate"] = serde_json::json!("fast");
        let bad = dir.join("bad-rate.json");
        std::fs::write(&bad, result.to_string()).unwrap();
        let err = import(ImportFormat::VllmBench, &[bad])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("bad-rate.json")
                && err.contains("`request_rate`")
                && err.contains("\"inf\""),
            "{err}"
        );

        result["request_rate"] = serde_json::json!("inf");
        result["max_concurrency"] = serde_json::Value::Null;
        let burst = dir.join("burst.json");
        std::fs::write(&burst, result.to_string()).unwrap();
        let err = import(ImportFormat::VllmBench, &[burst])
            .unwrap_err()
            .to_string();
        assert!(err.contains("no load level"), "{err}");
    }
}
