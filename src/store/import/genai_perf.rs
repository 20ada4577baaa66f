//! GenAI-Perf (`genai-perf profile`): `profile_export_genai_perf.json`, one level a file, in
//! `<artifacts>/<model>-<service>-<endpoint>-concurrency<C>/` (or `-request_rate<R>`).
//!
//! Each metric is `{unit, avg, p1 … p99, min, max, std}` (legacy: `p25 … p99`). The level is in
//! `input_config.perf_analyzer.stimulus.{concurrency | request_rate}` (0.0.16 layout) or
//! `input_config.{concurrency, request_rate}` (legacy flat argparse dump, about 0.0.8–0.0.12).
//! There is no failure count: only the requests perf_analyzer recorded are counted.

use std::path::{Path, PathBuf};

use super::{
    expand, file_name, has_extension, load_json, number_after, other_tool_hint, parent_name,
    unit_object_stats, Builder, ImportFormat, Imported, Input, Node,
};
use crate::error::InputError;
use crate::store::steps::{Level, Metric};

const LATENCIES: [(&str, Metric); 3] = [
    ("time_to_first_token", Metric::Ttft),
    // (request_latency − ttft)/(osl − 1) per request.
    ("inter_token_latency", Metric::Tpot),
    ("request_latency", Metric::E2e),
];

const USED: [&str; 5] = [
    "request_throughput",
    "request_count",
    "output_token_throughput",
    "input_sequence_length",
    "output_sequence_length",
];

/// The key layouts of GenAI-Perf's export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// `input_config.perf_analyzer.stimulus` (0.0.16).
    Current,
    /// Flat `input_config` (about 0.0.8 – 0.0.12).
    Legacy,
}

fn wanted(path: &Path) -> bool {
    let name = file_name(path);
    name.starts_with("profile_export_genai_perf") && has_extension(path, "json")
}

pub(super) fn read(paths: &[PathBuf]) -> Result<Imported, InputError> {
    let inputs = expand(
        paths,
        wanted,
        "GenAI-Perf results (profile_export_genai_perf.json)",
    )?;
    let mut builder = Builder::new(ImportFormat::GenaiPerf);
    for input in &inputs {
        read_file(input, &mut builder)?;
    }
    builder.finish()
}

fn read_file(input: &Input, builder: &mut Builder) -> Result<(), InputError> {
    if has_extension(&input.path, "csv") {
        return Err(InputError::file(
            input.path.display().to_string(),
            "GenAI-Perf's CSV export is rounded to 2 decimals and does not record the load \
             level; import profile_export_genai_perf.json from the same folder",
        ));
    }
    let loaded = load_json(&input.path, "a GenAI-Perf profile_export_genai_perf.json")?;
    let root = loaded.root();
    let config = root.get("input_config");
    let aiperf = root.has("aiperf_version")
        || root.has("schema_version")
        || config
            .as_ref()
            .is_some_and(|c| c.has("phases") || c.has("loadgen"));
    let (Some(config), false, true) = (config, aiperf, root.has("request_throughput")) else {
        return Err(root.error(format!(
            "not a GenAI-Perf profile_export_genai_perf.json: expected metric objects such as \
             `request_throughput` and `input_config` with `perf_analyzer.stimulus` or \
             `concurrency`/`request_rate`{}",
            other_tool_hint(root.value, ImportFormat::GenaiPerf)
        )));
    };
    loaded.note_non_finite(builder);
    builder.file(&input.path);
    let layout = if config.has("perf_analyzer") {
        Layout::Current
    } else {
        Layout::Legacy
    };
    builder.version(match layout {
        Layout::Current => "0.0.16 layout (perf_analyzer.stimulus)",
        Layout::Legacy => "legacy (flat input_config, about 0.0.8-0.0.12)",
    });
    let streaming = match layout {
        Layout::Current => config.at(&["endpoint", "streaming"]),
        Layout::Legacy => config.get("streaming"),
    }
    .and_then(|n| n.bool());
    if let Some(streaming) = streaming {
        builder.streaming(streaming);
    }

    let mut level = load(&config, layout, &input.path)?;
    let scalar = |name: &str| -> Result<Option<f64>, InputError> {
        match root.get(name) {
            Some(metric) => metric.opt_number("avg"),
            None => Ok(None),
        }
    };
    let count = scalar("request_count")?;
    level.requests = count.map(|c| c.max(0.0).round() as u64);
    level.requests_per_s = scalar("request_throughput")?;
    level.output_tokens_per_s = scalar("output_token_throughput")?;
    level.input_tokens_mean = scalar("input_sequence_length")?;
    level.output_tokens_mean = scalar("output_sequence_length")?;
    if let (Some(count), Some(rps)) = (count, level.requests_per_s) {
        if rps > 0.0 {
            // request_throughput = request_count ÷ (last response − first request).
            level.duration_s = Some(count / rps);
            builder.note(
                "GenAI-Perf writes no duration: duration = request_count ÷ request_throughput \
                 (first request to last response)",
            );
        }
    }
    if count.is_none() {
        builder.note(format!(
            "{}: no request_count (legacy GenAI-Perf): request count and duration unknown",
            input.path.display()
        ));
    }
    for (name, metric) in LATENCIES {
        if let Some(node) = root.get(name) {
            unit_object_stats(&node, &mut level, metric)?;
        }
    }
    if streaming == Some(false) {
        level.latency.retain(|(m, _)| *m == Metric::E2e);
        builder.note(
            "non-streaming GenAI-Perf run: its TTFT equals the request latency and there is no \
             ITL, so only E2E latency was imported",
        );
    }
    for (key, node) in root.entries() {
        let is_metric = node.is_object() && node.has("unit");
        if is_metric && !USED.contains(&key) && !LATENCIES.iter().any(|(n, _)| *n == key) {
            builder.drop_quantity(format!("GenAI-Perf {key}"));
        }
    }
    builder.note(
        "GenAI-Perf reports no failures: requests counts only the successful requests \
         perf_analyzer recorded, and failures are unknown",
    );
    builder.note("GenAI-Perf statistics converted to seconds by each metric's own unit (ms)");
    builder.note(
        "GenAI-Perf inter_token_latency ((latency − TTFT)/(output tokens − 1) per request) \
         imported as tpot",
    );
    builder.note(
        "GenAI-Perf token means are counted with the client's tokenizer (output re-tokenized from \
         the text)",
    );
    builder.level(level, input.path.display().to_string());
    Ok(())
}

/// The level from the input config, else from the folder name (`…-concurrency4`).
fn load(config: &Node, layout: Layout, path: &Path) -> Result<Level, InputError> {
    let source = match layout {
        Layout::Current => config.at(&["perf_analyzer", "stimulus"]),
        Layout::Legacy => Some(config.clone()),
    };
    let positive = |v: Option<f64>| v.filter(|v| *v > 0.0);
    let mut level = Level::default();
    if let Some(source) = source {
        level.rate = positive(source.opt_number("request_rate")?);
        if level.rate.is_none() {
            level.concurrency = positive(source.opt_number("concurrency")?);
        }
    }
    if level.load().is_none() {
        let folder = parent_name(path);
        level.rate = number_after(folder, "-request_rate");
        if level.rate.is_none() {
            level.concurrency = number_after(folder, "-concurrency");
        }
    }
    if level.load().is_none() {
        return Err(config.error(match layout {
            Layout::Current => {
                "no load level: expected `perf_analyzer.stimulus.concurrency` or \
                 `.request_rate`, or a folder named like <model>-openai-chat-concurrency<C>"
            }
            Layout::Legacy => {
                "no load level: expected `concurrency` or `request_rate`, or a folder named like \
                 <model>-openai-chat-concurrency<C>"
            }
        }));
    }
    Ok(level)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{read as import, ImportFormat};
    use crate::slo::Percentile;
    use crate::store::steps::Metric;

    const CURRENT: &str = "genai-perf/v0.0.16-pa-shim";
    const LEGACY: &str = "genai-perf/legacy-24.x-sdk";

    fn read(relative: &str) -> super::Imported {
        import(ImportFormat::GenaiPerf, &[fixture(relative)]).unwrap()
    }

    #[test]
    fn current_layout_levels_from_the_stimulus() {
        let imported = read(CURRENT);
        assert_eq!(imported.tool, "genai-perf");
        assert_eq!(
            imported.tool_version.as_deref(),
            Some("0.0.16 layout (perf_analyzer.stimulus)")
        );
        assert_eq!(imported.streaming, Some(true));
        // The shim script and the CSV files in the folder are not read.
        assert_eq!(imported.files.len(), 3);
        let loads: Vec<_> = imported.levels.iter().map(|l| l.concurrency).collect();
        assert_eq!(loads, [Some(1.0), Some(4.0), Some(8.0)]);
        let four = &imported.levels[1];
        assert_eq!(four.requests, Some(16));
        assert_eq!(four.failures, None);
        close(four.requests_per_s.unwrap(), 14.2017057816157);
        close(four.duration_s.unwrap(), 16.0 / 14.2017057816157);
        close(four.output_tokens_per_s.unwrap(), 470.4315040160201);
        close(four.input_tokens_mean.unwrap(), 64.0);
        close(value(four, Metric::Ttft, Percentile::Mean), 0.0194659543125);
        close(
            value(four, Metric::Ttft, Percentile::P(1.0)),
            0.014961863949999998,
        );
        close(
            value(four, Metric::Ttft, Percentile::P(99.0)),
            0.029218283999999997,
        );
        close(value(four, Metric::Tpot, Percentile::P(50.0)), 0.0081889355);
        close(value(four, Metric::E2e, Percentile::P(100.0)), 0.290_145_23);
        assert!(four.stats(Metric::Itl).is_none());
        let notes = imported.notes.join("\n");
        assert!(notes.contains("reports no failures"), "{notes}");
        assert!(notes.contains("GenAI-Perf time_to_second_token"), "{notes}");
    }

    #[test]
    fn legacy_layout_reads_the_flat_config() {
        let imported = read(LEGACY);
        assert_eq!(
            imported.tool_version.as_deref(),
            Some("legacy (flat input_config, about 0.0.8-0.0.12)")
        );
        assert_eq!(imported.streaming, Some(true));
        let level = &imported.levels[0];
        assert_eq!(level.concurrency, Some(4.0));
        assert_eq!(level.requests, None);
        assert_eq!(level.duration_s, None);
        close(
            value(level, Metric::Ttft, Percentile::Mean),
            0.0194659543125,
        );
        // Legacy percentiles start at p25.
        assert!(level.value(Metric::Ttft, Percentile::P(1.0)).is_none());
        close(
            value(level, Metric::Ttft, Percentile::P(25.0)),
            0.015906261749999999,
        );
        let notes = imported.notes.join("\n");
        assert!(
            notes.contains("output_token_throughput_per_request"),
            "{notes}"
        );
        assert!(notes.contains("no request_count"), "{notes}");
    }

    #[test]
    fn csv_other_tools_and_broken_files_are_named() {
        let csv = fixture(&format!("{CURRENT}/artifacts/c4/llama-3.1-8b-openai-chat-concurrency4/profile_export_genai_perf.csv"));
        let err = import(ImportFormat::GenaiPerf, &[csv])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("profile_export_genai_perf.csv")
                && err.contains("profile_export_genai_perf.json"),
            "{err}"
        );

        let aiperf =
            fixture("aiperf/v0.13.0-request-rate-with-errors/artifacts/profile_export_aiperf.json");
        let err = import(ImportFormat::GenaiPerf, &[aiperf])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("profile_export_aiperf.json") && err.contains("format aiperf"),
            "{err}"
        );

        let dir = scratch("genai-perf-broken/llama-openai-chat-concurrency2");
        let text = std::fs::read_to_string(fixture(&format!("{CURRENT}/artifacts/c4/llama-3.1-8b-openai-chat-concurrency4/profile_export_genai_perf.json"))).unwrap();
        let path = dir.join("profile_export_genai_perf.json");
        std::fs::write(&path, &text[..100]).unwrap();
        let err = import(ImportFormat::GenaiPerf, std::slice::from_ref(&path))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("profile_export_genai_perf.json:") && err.contains("truncated"),
            "{err}"
        );

        // Without a stimulus the folder name gives the level.
        let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
        value["input_config"]["perf_analyzer"]
            .as_object_mut()
            .unwrap()
            .remove("stimulus");
        std::fs::write(&path, value.to_string()).unwrap();
        let imported = import(ImportFormat::GenaiPerf, std::slice::from_ref(&path)).unwrap();
        assert_eq!(imported.levels[0].concurrency, Some(2.0));

        value["request_latency"]["p99"] = serde_json::json!("slow");
        std::fs::write(&path, value.to_string()).unwrap();
        let err = import(ImportFormat::GenaiPerf, &[path])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`request_latency.p99`") && err.contains("expected a number"),
            "{err}"
        );
    }
}
