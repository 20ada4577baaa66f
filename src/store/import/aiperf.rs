//! NVIDIA AIPerf (`aiperf profile`): `profile_export_aiperf.json`, one level a file (a sweep puts
//! each in `concurrency_<C>/` or `request_rate_<R>/`), or the sweep's
//! `sweep_aggregate/profile_export_aiperf_sweep.json` (every level in `per_combination_metrics`).
//!
//! Each metric is an object `{unit, avg, p1 … p99, min, max, std, count, sum}` and says its own
//! unit. The level is in `input_config.phases[kind = profiling]` (0.10 and later) or in
//! `input_config.loadgen` (older). `request_count` counts successful requests only;
//! `completed_request_count` is successes + errors.

use std::path::{Path, PathBuf};

use super::{
    expand, file_name, has_extension, load_json, number, number_after, other_tool_hint,
    parent_name, per_second, unit_object_stats, Builder, ImportFormat, Imported, Input, Node,
};
use crate::error::InputError;
use crate::store::steps::{Level, Metric};

const PER_LEVEL: &str = "profile_export_aiperf.json";
const SWEEP: &str = "profile_export_aiperf_sweep.json";

/// AIPerf metric → capplan metric.
const LATENCIES: [(&str, Metric); 4] = [
    ("time_to_first_token", Metric::Ttft),
    // (request_latency − ttft)/(osl − 1) per request.
    ("inter_token_latency", Metric::Tpot),
    ("inter_chunk_latency", Metric::Itl),
    ("request_latency", Metric::E2e),
];

/// Metrics read into counts, throughput and token means (not latencies).
const USED: [&str; 9] = [
    "request_count",
    "completed_request_count",
    "error_request_count",
    "request_error_rate",
    "benchmark_duration",
    "request_throughput",
    "output_token_throughput",
    "input_sequence_length",
    "output_sequence_length",
];

fn wanted(path: &Path) -> bool {
    let name = file_name(path);
    name == PER_LEVEL || name == SWEEP
}

pub(super) fn read(paths: &[PathBuf]) -> Result<Imported, InputError> {
    let mut builder = Builder::new(ImportFormat::Aiperf);
    let mut inputs = expand(
        paths,
        wanted,
        "AIPerf results (profile_export_aiperf.json, or sweep_aggregate/profile_export_aiperf_sweep.json)",
    )?;
    // Found in folders: the per-level files have percentiles of each level; a sweep file of the
    // same run repeats them.
    let found_per_level = inputs
        .iter()
        .any(|i| !i.named && file_name(&i.path) == PER_LEVEL);
    if found_per_level {
        inputs.retain(|input| {
            let skip = !input.named && file_name(&input.path) == SWEEP;
            if skip {
                builder.note(format!(
                    "{}: skipped, the per-level profile_export_aiperf.json files of the same \
                     sweep were read",
                    input.path.display()
                ));
            }
            !skip
        });
    }
    for input in &inputs {
        read_file(input, &mut builder)?;
    }
    builder.finish()
}

fn read_file(input: &Input, builder: &mut Builder) -> Result<(), InputError> {
    if has_extension(&input.path, "csv") {
        return Err(InputError::file(
            input.path.display().to_string(),
            "AIPerf's CSV export is rounded to 2 decimals and does not record the load level; \
             import profile_export_aiperf.json from the same folder",
        ));
    }
    let loaded = load_json(&input.path, "an AIPerf profile_export_aiperf.json")?;
    let root = loaded.root();
    if root.has("per_combination_metrics") {
        loaded.note_non_finite(builder);
        return read_sweep(&root, &input.path, builder);
    }
    if let Some(kind) = root.get("aggregation_type").and_then(|n| n.str()) {
        return Err(root.error(format!(
            "an AIPerf \"{kind}\" aggregate is not imported; give the per-level \
             profile_export_aiperf.json files (or the sweep_aggregate file)"
        )));
    }
    let config = root.get("input_config");
    let is_aiperf = root.has("aiperf_version")
        || config
            .as_ref()
            .is_some_and(|c| c.has("phases") || c.has("loadgen"));
    if !is_aiperf || !root.has("request_throughput") {
        let message = format!(
            "not an AIPerf profile_export_aiperf.json: expected metric objects such as \
             `request_throughput` and `input_config.phases` (or `input_config.loadgen`){}",
            other_tool_hint(root.value, ImportFormat::Aiperf)
        );
        return Err(root.error(message));
    }
    loaded.note_non_finite(builder);
    builder.file(&input.path);
    let version = match root
        .get("aiperf_version")
        .and_then(|n| n.str().map(str::to_string))
    {
        Some(version) => version,
        None => "<0.10 (input_config.loadgen)".to_string(),
    };
    builder.version(version);
    if let Some(streaming) = root
        .at(&["input_config", "endpoint", "streaming"])
        .and_then(|n| n.bool())
    {
        builder.streaming(streaming);
    }
    let mut level = per_level_load(&root, &input.path, builder)?;
    metrics(&root, &mut level, builder)?;
    if root.get("was_cancelled").and_then(|n| n.bool()) == Some(true)
        || root.get("is_complete").and_then(|n| n.bool()) == Some(false)
    {
        builder.note(format!(
            "{}: AIPerf marks this run cancelled or incomplete",
            input.path.display()
        ));
    }
    if let Some(errors) = root.get("error_summary") {
        let mut kinds = Vec::new();
        for entry in errors.items("a list of {error_details, count}")? {
            let count = entry.opt_count("count")?.unwrap_or(0);
            let details = entry.get("error_details");
            let code = details
                .as_ref()
                .and_then(|d| d.get("code"))
                .map(|c| c.value.to_string())
                .unwrap_or_default();
            let kind = details
                .as_ref()
                .and_then(|d| d.get("type"))
                .and_then(|t| t.str())
                .unwrap_or("error");
            kinds.push(format!("{count} × {code} {kind}").replace("  ", " "));
        }
        if !kinds.is_empty() {
            builder.note(format!(
                "{} ({}): errors {}",
                input.path.display(),
                super::load_label(&level),
                kinds.join(", ")
            ));
        }
    }
    general_notes(builder);
    builder.level(level, input.path.display().to_string());
    Ok(())
}

fn general_notes(builder: &mut Builder) {
    builder.note("AIPerf statistics converted to seconds by each metric's own unit");
    builder.note(
        "AIPerf inter_token_latency ((latency − TTFT)/(output tokens − 1) per request) imported as \
         tpot; inter_chunk_latency (gaps between chunks) as itl",
    );
    builder.note(
        "AIPerf request_count counts successful requests only: requests = \
         completed_request_count (successes + errors), failures = error_request_count",
    );
    builder.note(
        "AIPerf request_throughput is successes ÷ the measurement window, which is a little \
         longer than benchmark_duration (first request to last response)",
    );
    builder.note(
        "AIPerf token means are counted with the client's tokenizer (input/output_sequence_length), \
         not the server's usage",
    );
}

/// The level of a per-level file: `input_config.phases[kind = profiling]`, else
/// `input_config.loadgen`, else `run_info.variation_values`, else the folder name.
fn per_level_load(root: &Node, path: &Path, builder: &mut Builder) -> Result<Level, InputError> {
    let mut level = Level::default();
    let positive = |v: Option<f64>| v.filter(|v| *v > 0.0);
    let mut concurrency = None;
    let mut rate = None;
    if let Some(phases) = root.at(&["input_config", "phases"]) {
        let phases = phases.items("a list of phases")?;
        let profiling: Vec<&Node> = phases
            .iter()
            .filter(|p| p.get("kind").and_then(|k| k.str()) == Some("profiling"))
            .collect();
        if profiling.len() > 1 {
            builder.note(format!(
                "{}: {} profiling phases; the level is that of the first",
                path.display(),
                profiling.len()
            ));
        }
        if let Some(phase) = profiling.first() {
            let kind = phase.get("type").and_then(|t| t.str()).unwrap_or_default();
            let c = positive(phase.opt_number("concurrency")?);
            let r = positive(phase.opt_number("rate")?);
            if kind == "concurrency" || r.is_none() {
                concurrency = c;
            } else {
                rate = r;
                if let Some(c) = c {
                    builder.note(format!(
                        "{}: request rate {} req/s with concurrency {}: imported as the rate \
                         (the concurrency is only a cap)",
                        path.display(),
                        number(r.unwrap_or_default()),
                        number(c)
                    ));
                }
            }
        }
    } else if let Some(loadgen) = root.at(&["input_config", "loadgen"]) {
        rate = positive(loadgen.opt_number("request_rate")?);
        if rate.is_none() {
            concurrency = positive(loadgen.opt_number("concurrency")?);
        }
    }
    if concurrency.is_none() && rate.is_none() {
        if let Some(values) = root.at(&["run_info", "variation_values"]) {
            for (key, value) in values.entries() {
                if key.ends_with("concurrency") {
                    concurrency = positive(Some(value.number()?));
                } else if key.ends_with("rate") {
                    rate = positive(Some(value.number()?));
                }
            }
        }
    }
    if concurrency.is_none() && rate.is_none() {
        let folder = parent_name(path);
        concurrency = number_after(folder, "concurrency_");
        rate = number_after(folder, "request_rate_");
    }
    match (concurrency, rate) {
        (_, Some(r)) => level.rate = Some(r),
        (Some(c), None) => level.concurrency = Some(c),
        (None, None) => {
            return Err(root.error(
                "no load level: expected `input_config.phases[]` with kind \"profiling\" and a \
                 `concurrency` or `rate` (or `input_config.loadgen.concurrency` / \
                 `.request_rate` in AIPerf before 0.10)",
            ))
        }
    }
    Ok(level)
}

/// The `avg` of a scalar metric object `{unit, avg}` (the sweep's also has `mean`).
fn avg(metrics: &Node, name: &str) -> Result<Option<(f64, String)>, InputError> {
    let Some(metric) = metrics.get(name) else {
        return Ok(None);
    };
    let value = match metric.get("avg").or_else(|| metric.get("mean")) {
        Some(node) => node.number()?,
        None => return Ok(None),
    };
    let unit = metric
        .get("unit")
        .and_then(|u| u.str())
        .unwrap_or_default()
        .to_string();
    Ok(Some((value, unit)))
}

/// Counts, throughput, token means and latencies from the metric objects of `metrics` (the root
/// of a per-level file, or `per_combination_metrics[i].metrics`).
fn metrics(metrics: &Node, level: &mut Level, builder: &mut Builder) -> Result<(), InputError> {
    let count = |name: &str| -> Result<Option<u64>, InputError> {
        Ok(avg(metrics, name)?.map(|(v, _)| v.max(0.0).round() as u64))
    };
    let successes = count("request_count")?.ok_or_else(|| {
        metrics.missing(
            "request_count",
            "`{unit, avg}` with the successful requests",
        )
    })?;
    let errors = count("error_request_count")?;
    let completed = count("completed_request_count")?;
    let requests = completed.unwrap_or(successes + errors.unwrap_or(0));
    level.requests = Some(requests.max(successes));
    level.failures = Some(errors.unwrap_or(requests.saturating_sub(successes)));
    if let Some((duration, unit)) = avg(metrics, "benchmark_duration")? {
        let scale = per_second(&unit).ok_or_else(|| {
            metrics.error(format!(
                "benchmark_duration has unit \"{unit}\"; expected a unit of time such as \"sec\""
            ))
        })?;
        level.duration_s = Some(duration / scale);
    }
    level.requests_per_s = avg(metrics, "request_throughput")?.map(|(v, _)| v);
    level.output_tokens_per_s = avg(metrics, "output_token_throughput")?.map(|(v, _)| v);
    level.input_tokens_mean = avg(metrics, "input_sequence_length")?.map(|(v, _)| v);
    level.output_tokens_mean = avg(metrics, "output_sequence_length")?.map(|(v, _)| v);
    for (name, metric) in LATENCIES {
        if let Some(node) = metrics.get(name) {
            unit_object_stats(&node, level, metric)?;
        }
    }
    for (key, node) in metrics.entries() {
        let is_metric = node.is_object() && node.has("unit");
        if is_metric && !USED.contains(&key) && !LATENCIES.iter().any(|(n, _)| *n == key) {
            builder.drop_quantity(format!("AIPerf {key}"));
        }
    }
    Ok(())
}

fn read_sweep(root: &Node, path: &Path, builder: &mut Builder) -> Result<(), InputError> {
    builder.file(path);
    let trials = root
        .at(&["metadata", "num_trials_per_value"])
        .map(|n| n.count())
        .transpose()?
        .unwrap_or(1);
    let combinations = root
        .field("per_combination_metrics", "a list of {parameters, metrics}")?
        .items("a list of {parameters, metrics}")?;
    for combination in combinations {
        let parameters = combination.field(
            "parameters",
            "the swept parameter, e.g. {\"concurrency\": 4}",
        )?;
        let mut level = Level::default();
        for (key, value) in parameters.entries() {
            if key.ends_with("concurrency") {
                level.concurrency = Some(value.number()?).filter(|v| *v > 0.0);
            } else if key.ends_with("rate") {
                level.rate = Some(value.number()?).filter(|v| *v > 0.0);
            }
        }
        if level.rate.is_some() {
            level.concurrency = None;
        }
        if level.load().is_none() {
            return Err(parameters.error(
                "no swept concurrency or request rate; expected e.g. {\"concurrency\": 4}",
            ));
        }
        let metrics_node = combination.field("metrics", "the level's metric objects")?;
        metrics(&metrics_node, &mut level, builder)?;
        if trials > 1 {
            for (_, stats) in &mut level.latency {
                stats.percentiles.clear();
            }
            builder.note(format!(
                "{}: {trials} trials per level: AIPerf's sweep gives means across trials, so only \
                 means were imported (import each trial's profile_export_aiperf.json for \
                 percentiles)",
                path.display()
            ));
        }
        builder.level(level, format!("{} {}", path.display(), combination.path));
    }
    builder.note(
        "AIPerf sweep aggregate: the request counts, throughput and durations of each level are \
         AIPerf's aggregates over its trials",
    );
    general_notes(builder);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{read as import, ImportFormat};
    use crate::slo::Percentile;
    use crate::store::steps::Metric;

    const SWEEP_DIR: &str = "aiperf/v0.13.0-concurrency-sweep";
    const RATE_DIR: &str = "aiperf/v0.13.0-request-rate-with-errors";

    fn read(relative: &str) -> super::Imported {
        import(ImportFormat::Aiperf, &[fixture(relative)]).unwrap()
    }

    #[test]
    fn concurrency_sweep_folder_reads_the_per_level_files() {
        let imported = read(SWEEP_DIR);
        assert_eq!(imported.tool_version.as_deref(), Some("0.13.0"));
        assert_eq!(imported.streaming, Some(true));
        assert_eq!(imported.files.len(), 3);
        let loads: Vec<_> = imported.levels.iter().map(|l| l.concurrency).collect();
        assert_eq!(loads, [Some(1.0), Some(4.0), Some(8.0)]);
        let four = &imported.levels[1];
        assert_eq!(four.requests, Some(16));
        assert_eq!(four.failures, Some(0));
        close(four.duration_s.unwrap(), 1.138874624);
        close(four.requests_per_s.unwrap(), 13.989182401316514);
        close(four.output_tokens_per_s.unwrap(), 463.3916670436095);
        close(four.output_tokens_mean.unwrap(), 33.125);
        close(value(four, Metric::Ttft, Percentile::Mean), 0.0168602324375);
        close(
            value(four, Metric::Ttft, Percentile::P(99.0)),
            0.029956150049999994,
        );
        close(value(four, Metric::Ttft, Percentile::P(0.0)), 0.008795288);
        close(value(four, Metric::E2e, Percentile::P(50.0)), 0.2772295295);
        close(
            value(four, Metric::Tpot, Percentile::Mean),
            0.008136804513790246,
        );
        assert!(four.stats(Metric::Itl).is_some());
        let notes = imported.notes.join("\n");
        assert!(
            notes.contains("skipped") && notes.contains("profile_export_aiperf_sweep.json"),
            "{notes}"
        );
        assert!(notes.contains("AIPerf time_to_second_token"), "{notes}");
    }

    #[test]
    fn the_sweep_file_alone_gives_the_same_levels() {
        let sweep = read(&format!(
            "{SWEEP_DIR}/artifacts/sweep_aggregate/profile_export_aiperf_sweep.json"
        ));
        let levels = read(SWEEP_DIR);
        assert_eq!(sweep.levels.len(), 3);
        for (s, l) in sweep.levels.iter().zip(&levels.levels) {
            assert_eq!(s.concurrency, l.concurrency);
            assert_eq!(s.requests, l.requests);
            assert_eq!(s.failures, l.failures);
            close(s.requests_per_s.unwrap(), l.requests_per_s.unwrap());
            for p in [
                Percentile::Mean,
                Percentile::P(50.0),
                Percentile::P(99.0),
                Percentile::P(100.0),
            ] {
                close(value(s, Metric::Ttft, p), value(l, Metric::Ttft, p));
                close(value(s, Metric::E2e, p), value(l, Metric::E2e, p));
            }
        }
    }

    #[test]
    fn request_rate_run_counts_failures_and_converts_units() {
        let imported = read(RATE_DIR);
        let level = &imported.levels[0];
        assert_eq!((level.concurrency, level.rate), (None, Some(4.0)));
        // request_count 15 successes, completed_request_count 20.
        assert_eq!(level.requests, Some(20));
        assert_eq!(level.failures, Some(5));
        close(level.duration_s.unwrap(), 4.518861824);
        close(level.requests_per_s.unwrap(), 2.9976973739198547);
        close(
            value(level, Metric::Ttft, Percentile::Mean),
            0.012890065866666667,
        );
        close(
            value(level, Metric::Ttft, Percentile::P(90.0)),
            0.0157611466,
        );
        close(
            value(level, Metric::E2e, Percentile::Mean),
            0.2736810873333333,
        );
        close(
            value(level, Metric::Itl, Percentile::Mean),
            0.008412613595698925,
        );
        close(
            value(level, Metric::Tpot, Percentile::P(99.0)),
            0.008179154565625,
        );
        let notes = imported.notes.join("\n");
        assert!(notes.contains("5 × 500 Internal Server Error"), "{notes}");
        assert!(notes.contains("successful requests only"), "{notes}");
        assert!(notes.contains("AIPerf adj_time_to_first_token"), "{notes}");
    }

    #[test]
    fn csv_other_tools_and_broken_files_are_named() {
        let csv = fixture(&format!("{RATE_DIR}/artifacts/profile_export_aiperf.csv"));
        let err = import(ImportFormat::Aiperf, &[csv])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("profile_export_aiperf.csv") && err.contains("profile_export_aiperf.json"),
            "{err}"
        );

        let genai = fixture("genai-perf/v0.0.16-pa-shim/artifacts/c1/llama-3.1-8b-openai-chat-concurrency1/profile_export_genai_perf.json");
        let err = import(ImportFormat::Aiperf, &[genai])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("profile_export_genai_perf.json") && err.contains("genai-perf"),
            "{err}"
        );

        let dir = scratch("aiperf-broken");
        let text = std::fs::read_to_string(fixture(&format!(
            "{RATE_DIR}/artifacts/profile_export_aiperf.json"
        )))
        .unwrap();
        let cut = dir.join("profile_export_aiperf.json");
        std::fs::write(&cut, &text[..text.len() / 3]).unwrap();
        let err = import(ImportFormat::Aiperf, &[dir.to_path_buf()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("profile_export_aiperf.json:") && err.contains("truncated"),
            "{err}"
        );

        let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
        value["time_to_first_token"]["unit"] = serde_json::json!("tokens");
        std::fs::write(&cut, value.to_string()).unwrap();
        let err = import(ImportFormat::Aiperf, &[dir.to_path_buf()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`time_to_first_token`") && err.contains("not a unit of time"),
            "{err}"
        );
    }
}
