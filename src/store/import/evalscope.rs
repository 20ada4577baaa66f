//! EvalScope perf (`evalscope perf`): one level per `benchmark_summary.json`, with
//! `benchmark_percentile.json` (percentile rows) and `benchmark_args.json` (the arguments) in the
//! same folder: `<outputs>/<timestamp>/<model>/parallel_<C>_number_<N>/` or `rate_<R>_number_<N>/`
//! (0.x: no level folder, the files sit in `<timestamp>/<model>/`).
//!
//! The summary's key set tells the version (the file has no version field):
//! - `Test Duration (s)` + `Avg TTFT (ms)`: 1.10 and later; TTFT/TPOT/ITL in ms, latency in s.
//! - `Test Duration (s)` + `TTFT (ms)`: 1.7–1.9; the same units.
//! - `Time taken for tests (s)` + `Request throughput (req/s)`: 0.17–1.6; everything in seconds.
//! - `Time taken for tests (s)` or `(senconds)` + `Average QPS`: 0.x (< 0.17); everything in
//!   seconds, "time per output token" = latency/out (e2e per token), and the percentile column
//!   `TPOT (s)` holds inter-chunk gaps (ITL).

use std::path::{Path, PathBuf};

use super::{
    expand, file_name, load_json, number, number_after, other_tool_hint, parent_name, per_second,
    set_stat, Builder, ImportFormat, Imported, Node,
};
use crate::error::InputError;
use crate::slo::Percentile;
use crate::store::steps::{Level, Metric};

/// The key sets EvalScope's summary has had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keys {
    /// 0.7 – 0.16: `Time taken for tests`, `Average QPS`, latency/out per token.
    V0,
    /// 0.17 – 1.6: `Time taken for tests (s)`, `Request throughput (req/s)`, seconds.
    V017,
    /// 1.7 – 1.9: `Test Duration (s)`, `TTFT (ms)`.
    V17,
    /// 1.10 and later: `Test Duration (s)`, `Avg TTFT (ms)`.
    V110,
}

impl Keys {
    fn detect(summary: &Node) -> Option<Keys> {
        if summary.has("Test Duration (s)") {
            Some(if summary.has("Avg TTFT (ms)") {
                Keys::V110
            } else {
                Keys::V17
            })
        } else if summary.has("Time taken for tests (s)")
            || summary.has("Time taken for tests (senconds)")
        {
            Some(if summary.has("Request throughput (req/s)") {
                Keys::V017
            } else {
                Keys::V0
            })
        } else {
            None
        }
    }

    fn version(self) -> &'static str {
        match self {
            Keys::V0 => "<0.17",
            Keys::V017 => "0.17-1.6",
            Keys::V17 => "1.7-1.9",
            Keys::V110 => "1.10+",
        }
    }
}

/// Summary key names of one key set.
struct SummaryKeys {
    duration: &'static [&'static str],
    concurrency: &'static str,
    rate: Option<&'static str>,
    total: &'static str,
    succeeded: &'static str,
    failed: &'static str,
    requests_per_s: &'static str,
    output_tokens_per_s: &'static str,
    input_tokens: &'static str,
    output_tokens: &'static str,
    /// (key, metric, per second)
    latency: &'static [(&'static str, Metric, f64)],
}

const NEW_KEYS: SummaryKeys = SummaryKeys {
    duration: &["Test Duration (s)"],
    concurrency: "Concurrency",
    rate: Some("Request Rate (req/s)"),
    total: "Total Requests",
    succeeded: "Success Requests",
    failed: "Failed Requests",
    requests_per_s: "Req Throughput (req/s)",
    output_tokens_per_s: "Output Throughput (tok/s)",
    input_tokens: "Avg Input Tokens",
    output_tokens: "Avg Output Tokens",
    latency: &[
        ("Avg Latency (s)", Metric::E2e, 1.0),
        ("Avg TTFT (ms)", Metric::Ttft, 1e3),
        ("Avg TPOT (ms)", Metric::Tpot, 1e3),
        ("Avg ITL (ms)", Metric::Itl, 1e3),
        // 1.7 – 1.9 spell the means without "Avg ".
        ("TTFT (ms)", Metric::Ttft, 1e3),
        ("TPOT (ms)", Metric::Tpot, 1e3),
        ("ITL (ms)", Metric::Itl, 1e3),
    ],
};

const V017_KEYS: SummaryKeys = SummaryKeys {
    duration: &["Time taken for tests (s)"],
    concurrency: "Number of concurrency",
    rate: Some("Request rate (req/s)"),
    total: "Total requests",
    succeeded: "Succeed requests",
    failed: "Failed requests",
    requests_per_s: "Request throughput (req/s)",
    output_tokens_per_s: "Output token throughput (tok/s)",
    input_tokens: "Average input tokens per request",
    output_tokens: "Average output tokens per request",
    latency: &[
        ("Average latency (s)", Metric::E2e, 1.0),
        ("Average time to first token (s)", Metric::Ttft, 1.0),
        // (latency − ttft)/(out − 1) from 0.17 on.
        ("Average time per output token (s)", Metric::Tpot, 1.0),
        ("Average inter-token latency (s)", Metric::Itl, 1.0),
    ],
};

const V0_KEYS: SummaryKeys = SummaryKeys {
    duration: &[
        "Time taken for tests (s)",
        "Time taken for tests (senconds)",
    ],
    concurrency: "Number of concurrency",
    rate: None,
    total: "Total requests",
    succeeded: "Succeed requests",
    failed: "Failed requests",
    requests_per_s: "Average QPS",
    output_tokens_per_s: "Throughput(average tokens/s)",
    input_tokens: "Average input tokens per request",
    output_tokens: "Average output tokens per request",
    latency: &[
        ("Average latency (s)", Metric::E2e, 1.0),
        ("Average time to first token (s)", Metric::Ttft, 1.0),
        // 0.x: latency / completion tokens, TTFT included.
        (
            "Average time per output token (s)",
            Metric::E2ePerToken,
            1.0,
        ),
        // Total decode time over all chunk gaps: the mean inter-chunk gap.
        ("Average package latency (s)", Metric::Itl, 1.0),
    ],
};

/// The summary keys read as something else than a latency, and those knowingly not imported.
const NOT_IMPORTED: &[&str] = &[
    "Total Throughput (tok/s)",
    "Total token throughput (tok/s)",
    "Input Throughput (tok/s)",
    "Input token throughput (tok/s)",
    "Average package per request",
    "Avg Steady ITL (ms)",
    "Avg Decoded Tok/Iter",
    "Spec. Accept Rate",
    "KV Cache Hit Rate (%)",
    "Avg Turns/Request",
];

const WHAT: &str = "EvalScope result files (benchmark_summary.json)";

fn is_summary(path: &Path) -> bool {
    let name = file_name(path);
    name.starts_with("benchmark_summary") && name.ends_with(".json")
}

/// The file `stem` (`benchmark_percentile`, `benchmark_args`) that belongs with `summary`:
/// same folder, same suffix (`benchmark_summary-x.json` → `benchmark_percentile-x.json`).
fn sibling(summary: &Path, stem: &str) -> PathBuf {
    let name = file_name(summary).replacen("benchmark_summary", stem, 1);
    summary.with_file_name(name)
}

pub(super) fn read(paths: &[PathBuf]) -> Result<Imported, InputError> {
    let inputs = expand(paths, is_summary, WHAT)?;
    let mut builder = Builder::new(ImportFormat::Evalscope);
    let mut summaries: Vec<PathBuf> = Vec::new();
    for input in inputs {
        // A percentile or args file named on its own stands for its summary.
        let name = file_name(&input.path).to_string();
        let summary = ["benchmark_percentile", "benchmark_args"]
            .into_iter()
            .find(|stem| name.starts_with(stem))
            .map(|stem| {
                let summary_name = name.replacen(stem, "benchmark_summary", 1);
                input.path.with_file_name(summary_name)
            })
            .unwrap_or(input.path);
        if !summaries.contains(&summary) {
            summaries.push(summary);
        }
    }
    for summary in summaries {
        read_level(&summary, &mut builder)?;
    }
    builder.finish()
}

fn read_level(path: &Path, builder: &mut Builder) -> Result<(), InputError> {
    if !path.is_file() {
        return Err(InputError::file(
            path.display().to_string(),
            "no such file; an EvalScope level folder holds benchmark_summary.json next to \
             benchmark_percentile.json",
        ));
    }
    let expected = "an EvalScope benchmark_summary.json (one object)";
    let loaded = load_json(path, expected)?;
    loaded.note_non_finite(builder);
    let summary = loaded.root();
    let keys = match Keys::detect(&summary) {
        Some(keys) if summary.is_object() => keys,
        _ => {
            return Err(summary.error(format!(
                "not an EvalScope benchmark_summary.json: expected an object with `Test Duration \
                 (s)` (EvalScope 1.7+) or `Time taken for tests (s)` (up to 1.6){}",
                other_tool_hint(summary.value, ImportFormat::Evalscope)
            )))
        }
    };
    builder.version(keys.version());
    builder.file(path);
    let names = match keys {
        Keys::V110 | Keys::V17 => &NEW_KEYS,
        Keys::V017 => &V017_KEYS,
        Keys::V0 => &V0_KEYS,
    };
    notes_for(keys, builder);

    let mut level = Level::default();
    let count = |key: &str| summary.req_count(key, "a request count");
    let succeeded = count(names.succeeded)?;
    let failed = count(names.failed)?;
    let total = summary
        .opt_count(names.total)?
        .unwrap_or(succeeded + failed);
    level.requests = Some(total);
    level.failures = Some(failed);
    level.duration_s = names
        .duration
        .iter()
        .find_map(|key| summary.get(key))
        .map(|node| node.number())
        .transpose()?;
    level.requests_per_s = summary.opt_number(names.requests_per_s)?;
    level.output_tokens_per_s = summary.opt_number(names.output_tokens_per_s)?;
    level.input_tokens_mean = summary.opt_number(names.input_tokens)?;
    level.output_tokens_mean = summary.opt_number(names.output_tokens)?;
    for &(key, metric, scale) in names.latency {
        if let Some(value) = summary.opt_number(key)? {
            set_stat(&mut level, metric, Percentile::Mean, value, scale);
        }
    }
    for key in NOT_IMPORTED {
        if summary.has(key) {
            builder.drop_quantity(format!("EvalScope `{key}`"));
        }
    }

    // The arguments of the level: streaming, and the level when the summary lacks it.
    let args_path = sibling(path, "benchmark_args");
    let args_loaded = if args_path.is_file() {
        let loaded = load_json(&args_path, "EvalScope's benchmark_args.json (one object)")?;
        builder.file(&args_path);
        Some(loaded)
    } else {
        None
    };
    let args = args_loaded.as_ref().map(|loaded| loaded.root());
    set_load(&mut level, &summary, names, args.as_ref(), path, builder)?;

    let streaming = streaming(&summary, args.as_ref())?;
    if let Some(streaming) = streaming {
        builder.streaming(streaming);
    }

    let percentile_path = sibling(path, "benchmark_percentile");
    if percentile_path.is_file() {
        read_percentiles(&percentile_path, keys, &mut level, builder)?;
    } else {
        builder.note(format!(
            "{}: no {} beside it, so only means were imported",
            path.display(),
            file_name(&percentile_path)
        ));
    }

    if streaming == Some(false) {
        for metric in [Metric::Ttft, Metric::Tpot, Metric::Itl] {
            level.latency.retain(|(m, _)| *m != metric);
        }
        builder.note(
            "non-streaming EvalScope run: its TTFT equals the whole latency and TPOT/ITL are not \
             measured, so only E2E latency, counts and throughput were imported",
        );
    }
    builder.level(level, path.display().to_string());
    Ok(())
}

fn notes_for(keys: Keys, builder: &mut Builder) {
    match keys {
        Keys::V110 | Keys::V17 => builder.note(
            "EvalScope 1.7+: TTFT, TPOT and ITL converted from ms to s (latency is already in s)",
        ),
        Keys::V017 | Keys::V0 => builder.note(format!(
            "EvalScope {}: every time is in seconds in the files (no conversion)",
            keys.version()
        )),
    }
    match keys {
        Keys::V0 => {
            builder.note(
                "EvalScope <0.17 `Average time per output token (s)` is latency ÷ output tokens \
                 (TTFT included): imported as e2e_per_token, not tpot",
            );
            builder.note(
                "EvalScope <0.17 percentile column `TPOT (s)` holds inter-chunk gaps: imported as \
                 itl; `Average package latency (s)` (decode time ÷ chunk gaps) is the itl mean; \
                 there is no tpot",
            );
        }
        _ => builder.note(
            "EvalScope TPOT ((latency − TTFT)/(output tokens − 1) per request) imported as tpot; \
             EvalScope ITL (gaps between chunks) as itl",
        ),
    }
    if keys != Keys::V110 {
        builder.note(format!(
            "EvalScope {} (≤1.9) starts TTFT at the first SSE event with a `choices` entry, \
             including the role-only chunk without content: TTFT reads too low (and TPOT a little \
             high); EvalScope 1.10+ times the first chunk with content",
            keys.version()
        ));
    }
    builder.note("EvalScope token counts are the server's `usage` figures");
}

/// The level: `Concurrency` (−1 in open loop) and `Request Rate (req/s)` (−1 in closed loop) of
/// the summary, else `parallel`/`rate` of benchmark_args.json, else the folder name.
fn set_load(
    level: &mut Level,
    summary: &Node,
    names: &SummaryKeys,
    args: Option<&Node>,
    path: &Path,
    builder: &mut Builder,
) -> Result<(), InputError> {
    let positive = |value: Option<f64>| value.filter(|v| *v > 0.0);
    let mut concurrency = positive(summary.opt_number(names.concurrency)?);
    let mut rate = match names.rate {
        Some(key) => positive(summary.opt_number(key)?),
        None => None,
    };
    let mut open_loop = None;
    if let Some(args) = args {
        open_loop = args.get("open_loop").and_then(|n| n.bool());
        if concurrency.is_none() && rate.is_none() {
            concurrency = positive(args.opt_number("parallel").unwrap_or(None));
            rate = positive(args.opt_number("rate").unwrap_or(None));
        }
    }
    if concurrency.is_none() && rate.is_none() {
        let folder = parent_name(path);
        concurrency = number_after(folder, "parallel_");
        rate = number_after(folder, "rate_");
    }
    match (concurrency, rate) {
        (None, None) => {
            return Err(summary.error(format!(
                "no load level: `{}` and the request rate are missing or −1, and neither \
                 benchmark_args.json nor a folder name like parallel_<C>_number_<N> or \
                 rate_<R>_number_<N> gives one",
                names.concurrency
            )))
        }
        (Some(c), Some(r)) if open_loop != Some(false) => {
            // Requests arrive at the rate; `parallel` only caps the requests in flight.
            builder.note(format!(
                "{}: rate {} req/s with at most {} in flight: imported as the rate (the \
                 concurrency is only a cap)",
                path.display(),
                number(r),
                number(c)
            ));
            level.rate = Some(r);
        }
        (Some(c), _) => level.concurrency = Some(c),
        (None, Some(r)) => level.rate = Some(r),
    }
    Ok(())
}

/// Streaming from `Stream Requests`/`Non-Stream Requests` (1.14) or `stream` of the arguments.
fn streaming(summary: &Node, args: Option<&Node>) -> Result<Option<bool>, InputError> {
    let streamed = summary.opt_count("Stream Requests")?;
    let not_streamed = summary.opt_count("Non-Stream Requests")?;
    match (streamed, not_streamed) {
        (Some(s), Some(n)) if s > 0 && n == 0 => return Ok(Some(true)),
        (Some(s), Some(n)) if s == 0 && n > 0 => return Ok(Some(false)),
        _ => {}
    }
    Ok(args
        .and_then(|args| args.get("stream"))
        .and_then(|n| n.bool()))
}

/// `TTFT (ms)` → (TTFT, ms) and so on; `None` for columns that are not latencies.
fn percentile_column(key: &str, keys: Keys) -> Option<(Metric, f64)> {
    let (name, unit) = key.strip_suffix(')')?.rsplit_once(" (")?;
    let scale = per_second(unit)?;
    let metric = match name {
        "TTFT" | "First Chunk Latency" => Metric::Ttft,
        "ITL" => Metric::Itl,
        // 0.x labels the inter-chunk gaps `TPOT (s)`.
        "TPOT" if keys == Keys::V0 => Metric::Itl,
        "TPOT" => Metric::Tpot,
        "Latency" => Metric::E2e,
        _ => return None,
    };
    Some((metric, scale))
}

/// `min` → 0, `max` → 100, `99%` → 99.
fn percentile_label(label: &str) -> Option<f64> {
    match label.trim() {
        "min" => Some(0.0),
        "max" => Some(100.0),
        other => other
            .strip_suffix('%')?
            .trim()
            .parse()
            .ok()
            .filter(|p: &f64| *p > 0.0 && *p < 100.0),
    }
}

fn read_percentiles(
    path: &Path,
    keys: Keys,
    level: &mut Level,
    builder: &mut Builder,
) -> Result<(), InputError> {
    let loaded = load_json(
        path,
        "EvalScope's benchmark_percentile.json (a list of rows)",
    )?;
    loaded.note_non_finite(builder);
    let root = loaded.root();
    let rows = root.items("a list of percentile rows (EvalScope's benchmark_percentile.json)")?;
    builder.file(path);
    for row in rows {
        let label_node = row
            .get("Percentiles")
            .or_else(|| row.get("Percentile"))
            .ok_or_else(|| {
                row.missing("Percentiles", "a label such as \"99%\", \"min\" or \"max\"")
            })?;
        let label = label_node.str().unwrap_or_default();
        let p = percentile_label(label).ok_or_else(|| {
            label_node.error(format!(
                "\"{label}\" is not a percentile label; expected \"min\", \"max\" or \"<N>%\""
            ))
        })?;
        for (key, value) in row.entries() {
            if key == "Percentiles" || key == "Percentile" {
                continue;
            }
            match percentile_column(key, keys) {
                Some((metric, scale)) => {
                    if !value.value.is_null() {
                        set_stat(level, metric, Percentile::P(p), value.number()?, scale);
                    }
                }
                None => builder.drop_quantity(format!("EvalScope percentiles of `{key}`")),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{read as import, ImportFormat};
    use crate::slo::Percentile;
    use crate::store::steps::Metric;

    const V114: &str = "evalscope/v1.14.1-closed-loop";
    const V114_OPEN: &str = "evalscope/v1.14.1-open-loop-with-errors";
    const V18: &str = "evalscope/v1.8.0-closed-loop";
    const V16: &str = "evalscope/v1.6.0-closed-loop-seconds";
    const V012: &str = "evalscope/v0.12.0-format-from-source";

    fn read(relative: &str) -> super::Imported {
        import(ImportFormat::Evalscope, &[fixture(relative)]).unwrap()
    }

    #[test]
    fn v1_14_closed_loop_in_ms_becomes_seconds() {
        let imported = read(V114);
        assert_eq!(imported.tool, "evalscope");
        assert_eq!(imported.tool_version.as_deref(), Some("1.10+"));
        assert_eq!(imported.streaming, Some(true));
        let loads: Vec<_> = imported.levels.iter().map(|l| l.concurrency).collect();
        assert_eq!(loads, [Some(1.0), Some(4.0), Some(8.0)]);
        assert!(imported.levels.iter().all(|l| l.rate.is_none()));
        // 3 levels × summary, percentile, args.
        assert_eq!(imported.files.len(), 9);
        let four = &imported.levels[1];
        assert_eq!(four.requests, Some(16));
        assert_eq!(four.failures, Some(0));
        close(four.duration_s.unwrap(), 1.1193);
        close(four.requests_per_s.unwrap(), 14.294);
        close(four.output_tokens_per_s.unwrap(), 457.4087);
        close(four.input_tokens_mean.unwrap(), 20.125);
        close(value(four, Metric::Ttft, Percentile::Mean), 0.01689);
        close(value(four, Metric::Tpot, Percentile::Mean), 0.00845);
        close(value(four, Metric::Itl, Percentile::Mean), 0.00845);
        close(value(four, Metric::E2e, Percentile::Mean), 0.2789);
        close(value(four, Metric::Ttft, Percentile::P(99.0)), 0.0215118);
        close(value(four, Metric::Ttft, Percentile::P(0.0)), 0.0115607);
        close(value(four, Metric::Itl, Percentile::P(100.0)), 0.0103259);
        close(value(four, Metric::E2e, Percentile::P(50.0)), 0.2783);
        let ps: Vec<f64> = four
            .stats(Metric::Ttft)
            .unwrap()
            .percentiles
            .iter()
            .map(|p| p.0)
            .collect();
        assert_eq!(
            ps,
            [0.0, 1.0, 5.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 100.0]
        );
        assert!(four.stats(Metric::E2ePerToken).is_none());
        let notes = imported.notes.join("\n");
        assert!(notes.contains("from ms to s"), "{notes}");
        assert!(notes.contains("Decode (tok/s)"), "{notes}");
        assert!(!notes.contains("role-only"), "{notes}");
    }

    #[test]
    fn v1_14_open_loop_reads_rates_and_failures() {
        let imported = read(V114_OPEN);
        let rates: Vec<_> = imported
            .levels
            .iter()
            .map(|l| (l.concurrency, l.rate))
            .collect();
        assert_eq!(rates, [(None, Some(4.0)), (None, Some(8.0))]);
        let four = &imported.levels[0];
        assert_eq!(four.requests, Some(20));
        assert_eq!(four.failures, Some(3));
        close(four.requests_per_s.unwrap(), 3.5009);
        close(value(four, Metric::Ttft, Percentile::Mean), 0.01388);
        close(value(four, Metric::Ttft, Percentile::P(90.0)), 0.0182125);
    }

    #[test]
    fn v1_8_keys_without_avg_prefix_and_role_chunk_bias_noted() {
        let imported = read(V18);
        assert_eq!(imported.tool_version.as_deref(), Some("1.7-1.9"));
        // No benchmark_args.json in this sample: streaming unknown.
        assert_eq!(imported.streaming, None);
        let four = &imported.levels[1];
        assert_eq!(four.concurrency, Some(4.0));
        close(value(four, Metric::Ttft, Percentile::Mean), 0.00344);
        close(value(four, Metric::Tpot, Percentile::Mean), 0.00889);
        close(value(four, Metric::Itl, Percentile::Mean), 0.00857);
        close(value(four, Metric::Itl, Percentile::P(99.0)), 0.01471);
        // 1.8 has max but no min.
        assert!(four.value(Metric::Ttft, Percentile::P(0.0)).is_none());
        close(value(four, Metric::Ttft, Percentile::P(100.0)), 0.00572);
        assert!(
            imported.notes.iter().any(|n| n.contains("role-only")),
            "{:?}",
            imported.notes
        );
    }

    #[test]
    fn v1_6_seconds_match_v1_14_milliseconds_in_magnitude() {
        let old = read(V16);
        let new = read(V114);
        assert_eq!(old.tool_version.as_deref(), Some("0.17-1.6"));
        assert_eq!(old.streaming, Some(true));
        let four = &old.levels[1];
        assert_eq!(four.concurrency, Some(4.0));
        assert_eq!(four.requests, Some(16));
        close(four.duration_s.unwrap(), 1.2221);
        close(four.requests_per_s.unwrap(), 13.0922);
        close(value(four, Metric::Ttft, Percentile::Mean), 0.0215);
        close(value(four, Metric::Tpot, Percentile::Mean), 0.0089);
        close(value(four, Metric::Itl, Percentile::Mean), 0.0086);
        close(value(four, Metric::Ttft, Percentile::P(90.0)), 0.0951);
        close(value(four, Metric::Itl, Percentile::P(98.0)), 0.0134);
        close(value(four, Metric::Tpot, Percentile::P(66.0)), 0.0089);
        // No min or max rows before 1.7.
        assert!(four.value(Metric::E2e, Percentile::P(100.0)).is_none());
        for (a, b) in old.levels.iter().zip(&new.levels) {
            assert_eq!(a.concurrency, b.concurrency);
            for metric in [Metric::Tpot, Metric::E2e] {
                let (x, y) = (
                    value(a, metric, Percentile::Mean),
                    value(b, metric, Percentile::Mean),
                );
                assert!((x / y - 1.0).abs() < 0.1, "{metric}: {x} vs {y}");
            }
            // TTFT: both between 1 ms and 100 ms (the role chunk makes 1.6 lower, not 1000×).
            let ttft = value(a, Metric::Ttft, Percentile::Mean);
            assert!(ttft > 0.001 && ttft < 0.1, "{ttft}");
        }
        assert!(
            old.notes.iter().any(|n| n.contains("in seconds")),
            "{:?}",
            old.notes
        );
    }

    #[test]
    fn v0_12_maps_time_per_token_to_e2e_per_token_and_tpot_column_to_itl() {
        let imported = read(V012);
        assert_eq!(imported.tool_version.as_deref(), Some("<0.17"));
        let loads: Vec<_> = imported.levels.iter().map(|l| l.concurrency).collect();
        assert_eq!(loads, [Some(1.0), Some(4.0), Some(8.0)]);
        let four = &imported.levels[1];
        assert_eq!(four.requests, Some(16));
        close(four.requests_per_s.unwrap(), 13.092);
        close(four.output_tokens_per_s.unwrap(), 418.951);
        close(value(four, Metric::E2ePerToken, Percentile::Mean), 0.009);
        close(value(four, Metric::Itl, Percentile::Mean), 0.009);
        close(value(four, Metric::Ttft, Percentile::Mean), 0.021);
        close(value(four, Metric::Itl, Percentile::P(99.0)), 0.0146);
        close(value(four, Metric::E2e, Percentile::P(50.0)), 0.2787);
        assert!(four.stats(Metric::Tpot).is_none());
        assert_eq!(imported.files.len(), 6);
    }

    #[test]
    fn a_named_percentile_file_reads_its_level() {
        let dir = fixture(V114).join("outputs/20261123_111640/llama-3.1-8b/parallel_8_number_16");
        let imported = import(
            ImportFormat::Evalscope,
            &[dir.join("benchmark_percentile.json")],
        )
        .unwrap();
        assert_eq!(imported.levels.len(), 1);
        assert_eq!(imported.levels[0].concurrency, Some(8.0));
        close(
            value(&imported.levels[0], Metric::Ttft, Percentile::Mean),
            0.01911,
        );
    }

    #[test]
    fn another_tools_file_and_truncated_json_are_named() {
        let guidellm = fixture("guidellm/v0.8.1/benchmarks-concurrent-1-4-8.json");
        let err = import(ImportFormat::Evalscope, &[guidellm])
            .unwrap_err()
            .to_string();
        assert!(err.contains("benchmarks-concurrent-1-4-8.json"), "{err}");
        assert!(
            err.contains("Test Duration (s)") && err.contains("guidellm"),
            "{err}"
        );

        let dir = scratch("evalscope-truncated/parallel_2_number_4");
        let source = fixture(V114).join(
            "outputs/20261123_111640/llama-3.1-8b/parallel_4_number_16/benchmark_summary.json",
        );
        let text = std::fs::read_to_string(source).unwrap();
        std::fs::write(dir.join("benchmark_summary.json"), &text[..text.len() / 2]).unwrap();
        let err = import(ImportFormat::Evalscope, &[dir.to_path_buf()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("benchmark_summary.json:") && err.contains("truncated"),
            "{err}"
        );

        let mut summary: serde_json::Value = serde_json::from_str(&text).unwrap();
        summary.as_object_mut().unwrap().remove("Failed Requests");
        std::fs::write(dir.join("benchmark_summary.json"), summary.to_string()).unwrap();
        let err = import(ImportFormat::Evalscope, &[dir.to_path_buf()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("`Failed Requests` is missing"), "{err}");

        summary["Failed Requests"] = serde_json::json!("none");
        std::fs::write(dir.join("benchmark_summary.json"), summary.to_string()).unwrap();
        let err = import(ImportFormat::Evalscope, &[dir.to_path_buf()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`Failed Requests`") && err.contains("expected a number"),
            "{err}"
        );
    }

    #[test]
    fn the_level_falls_back_to_the_folder_name() {
        let dir = scratch("evalscope-folder/parallel_2_number_4");
        let source = fixture(V114).join(
            "outputs/20261123_111640/llama-3.1-8b/parallel_4_number_16/benchmark_summary.json",
        );
        let mut summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(source).unwrap()).unwrap();
        summary["Concurrency"] = serde_json::json!(-1);
        std::fs::write(dir.join("benchmark_summary.json"), summary.to_string()).unwrap();
        let imported = import(ImportFormat::Evalscope, &[dir.to_path_buf()]).unwrap();
        assert_eq!(imported.levels[0].concurrency, Some(2.0));
        assert!(
            imported.notes.iter().any(|n| n.contains("only means")),
            "{:?}",
            imported.notes
        );
    }
}
