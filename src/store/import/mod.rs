//! Importers: the result files of other benchmark tools (EvalScope, vLLM bench, GuideLLM,
//! AIPerf, GenAI-Perf) and steps tables, turned into one measured curve of [`Level`]s.
//!
//! Every reader maps the tool's names onto capplan's metric definitions (all in seconds):
//! `ttft` = first generated chunk − send; `tpot` = (e2e − ttft)/(out − 1) per request (the
//! "ITL" of GuideLLM, AIPerf and GenAI-Perf); `itl` = the gap between chunks (vLLM's and
//! EvalScope's "ITL", AIPerf's `inter_chunk_latency`); `e2e` = request latency;
//! `e2e_per_token` = e2e/out (GuideLLM ≥ 0.4 "TPOT", EvalScope 0.x "time per output token").
//! A quantity without a capplan equivalent is dropped, and every conversion, assumption and
//! dropped quantity is listed in [`Imported::notes`]. The key paths and units of each format
//! are documented in `tests/fixtures/import/FORMATS.md`.
//!
//! Several files (or several levels of one file) make one curve: levels with the same load are
//! merged (see [`Imported::notes`] for how), and the levels come out sorted by concurrency, then
//! rate.

mod aiperf;
mod evalscope;
mod genai_perf;
mod guidellm;
pub mod run;
mod vllm_bench;

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Serialize;
use serde_json::Value;

use crate::error::InputError;
use crate::slo::Percentile;
use crate::store::steps::{read_steps_csv, Level, Metric, Stats};

/// A result format `capplan import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportFormat {
    StepsCsv,
    Evalscope,
    VllmBench,
    Guidellm,
    Aiperf,
    GenaiPerf,
}

impl ImportFormat {
    pub const ALL: [ImportFormat; 6] = [
        ImportFormat::StepsCsv,
        ImportFormat::Evalscope,
        ImportFormat::VllmBench,
        ImportFormat::Guidellm,
        ImportFormat::Aiperf,
        ImportFormat::GenaiPerf,
    ];

    /// The name on the command line (`--format`), also [`Imported::tool`].
    pub fn name(self) -> &'static str {
        match self {
            ImportFormat::StepsCsv => "steps-csv",
            ImportFormat::Evalscope => "evalscope",
            ImportFormat::VllmBench => "vllm-bench",
            ImportFormat::Guidellm => "guidellm",
            ImportFormat::Aiperf => "aiperf",
            ImportFormat::GenaiPerf => "genai-perf",
        }
    }

    /// Whether results in this format are a benchmark's own, measured its way (every user
    /// started together: see `sim::measuring_client`), rather than a table of levels that
    /// says nothing of how they were measured (`steps-csv`).
    pub fn is_benchmark(self) -> bool {
        self != ImportFormat::StepsCsv
    }
}

impl fmt::Display for ImportFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ImportFormat {
    type Err = InputError;

    /// The names of [`ImportFormat::name`], case-insensitive, `_` for `-` allowed.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let wanted = text.trim().to_ascii_lowercase().replace('_', "-");
        ImportFormat::ALL
            .into_iter()
            .find(|format| format.name() == wanted)
            .ok_or_else(|| InputError::UnknownName {
                kind: "import format",
                name: text.to_string(),
                hint: format!(
                    " (valid: {})",
                    ImportFormat::ALL.map(ImportFormat::name).join(", ")
                ),
            })
    }
}

/// One measured curve read from another tool's result files.
#[derive(Debug, Clone, Serialize)]
pub struct Imported {
    /// [`ImportFormat::name`] of the format read, e.g. "evalscope".
    pub tool: String,
    /// The tool's version when the files say so, or the version range their key set pins
    /// (e.g. "1.7-1.9"); several, comma-separated, when the files differ.
    pub tool_version: Option<String>,
    /// One per load level, sorted by concurrency, then rate.
    pub levels: Vec<Level>,
    /// Whether the requests were streamed, when the files say so (and agree).
    pub streaming: Option<bool>,
    /// Every conversion and assumption a user should know about.
    pub notes: Vec<String>,
    /// The result files actually read.
    pub files: Vec<PathBuf>,
}

/// Reads `paths` (files, or folders searched recursively for the format's result files) as
/// `format` and merges them into one curve.
pub fn read(format: ImportFormat, paths: &[PathBuf]) -> Result<Imported, InputError> {
    if paths.is_empty() {
        return Err(InputError::value(format!(
            "no result files given to import as {format}"
        )));
    }
    for path in paths {
        if !path.exists() {
            return Err(InputError::file(
                path.display().to_string(),
                "no such file or folder",
            ));
        }
    }
    match format {
        ImportFormat::StepsCsv => steps_csv(paths),
        ImportFormat::Evalscope => evalscope::read(paths),
        ImportFormat::VllmBench => vllm_bench::read(paths),
        ImportFormat::Guidellm => guidellm::read(paths),
        ImportFormat::Aiperf => aiperf::read(paths),
        ImportFormat::GenaiPerf => genai_perf::read(paths),
    }
}

fn steps_csv(paths: &[PathBuf]) -> Result<Imported, InputError> {
    let inputs = expand(
        paths,
        |path| has_extension(path, "csv"),
        "steps tables (*.csv)",
    )?;
    let mut builder = Builder::new(ImportFormat::StepsCsv);
    for input in inputs {
        let table = read_steps_csv(&input.path)?;
        let location = input.path.display().to_string();
        if !table.unused_columns.is_empty() {
            builder.note(format!(
                "{location}: columns not used: {}",
                table.unused_columns.join(", ")
            ));
        }
        for (row, level) in table.levels.into_iter().enumerate() {
            builder.level(level, format!("{location}:{}", row + 2));
        }
        builder.file(&input.path);
    }
    builder.finish()
}

// ---------------------------------------------------------------------------------------------
// Shared by the readers: finding files, reading JSON with key paths in errors, building levels.

/// A result file to read, and whether the user named it (rather than it being found in a
/// folder): a named file of the wrong kind is an error, a found one is skipped with a note.
#[derive(Debug, Clone)]
pub(super) struct Input {
    pub path: PathBuf,
    pub named: bool,
}

/// `paths` with every folder replaced by the files under it (recursively, sorted) that `wanted`
/// accepts. A folder without any is an error that says what was looked for (`what`).
pub(super) fn expand(
    paths: &[PathBuf],
    wanted: impl Fn(&Path) -> bool,
    what: &str,
) -> Result<Vec<Input>, InputError> {
    let mut inputs: Vec<Input> = Vec::new();
    for path in paths {
        if path.is_dir() {
            let found: Vec<PathBuf> = walk(path)?.into_iter().filter(|p| wanted(p)).collect();
            if found.is_empty() {
                return Err(InputError::file(
                    path.display().to_string(),
                    format!("no {what} in this folder or below it"),
                ));
            }
            inputs.extend(found.into_iter().map(|path| Input { path, named: false }));
        } else {
            inputs.push(Input {
                path: path.clone(),
                named: true,
            });
        }
    }
    let mut seen = BTreeSet::new();
    inputs.retain(|input| seen.insert(input.path.clone()));
    Ok(inputs)
}

/// Every file under `dir`, recursively, sorted by path. Symbolic links to folders are not
/// followed.
pub(super) fn walk(dir: &Path) -> Result<Vec<PathBuf>, InputError> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|err| {
            InputError::file(dir.display().to_string(), format!("cannot list: {err}"))
        })?;
        for entry in entries {
            let entry = entry.map_err(|err| {
                InputError::file(dir.display().to_string(), format!("cannot list: {err}"))
            })?;
            let kind = entry.file_type().map_err(|err| {
                InputError::file(entry.path().display().to_string(), err.to_string())
            })?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else {
                files.push(entry.path());
            }
        }
    }
    files.sort();
    Ok(files)
}

pub(super) fn file_name(path: &Path) -> &str {
    path.file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
}

pub(super) fn has_extension(path: &Path, extension: &str) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case(extension))
}

/// The name of the folder holding `path`.
pub(super) fn parent_name(path: &Path) -> &str {
    path.parent().map(file_name).unwrap_or_default()
}

fn read_text(path: &Path) -> Result<String, InputError> {
    let bytes = std::fs::read(path).map_err(|err| {
        InputError::file(path.display().to_string(), format!("cannot read: {err}"))
    })?;
    String::from_utf8(bytes).map_err(|err| {
        InputError::file(
            path.display().to_string(),
            format!(
                "not text (invalid UTF-8 at byte {})",
                err.utf8_error().valid_up_to()
            ),
        )
    })
}

/// JSON as Python writes it may hold the bare tokens `NaN`, `Infinity` and `-Infinity`; they
/// become `null` (a value that was not measured). True when any was replaced.
fn python_json(text: &str) -> (Cow<'_, str>, bool) {
    if !text.contains("NaN") && !text.contains("Infinity") {
        return (Cow::Borrowed(text), false);
    }
    let mut out = String::with_capacity(text.len());
    let mut replaced = false;
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
        } else {
            let token = ["-Infinity", "Infinity", "NaN"]
                .into_iter()
                .find(|token| rest.starts_with(token));
            if let Some(token) = token {
                out.push_str("null");
                rest = &rest[token.len()..];
                replaced = true;
                continue;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    (Cow::Owned(out), replaced)
}

fn json_error(path: &Path, err: &serde_json::Error, expected: &str) -> InputError {
    let location = format!("{}:{}", path.display(), err.line());
    if err.is_eof() {
        InputError::file(
            location,
            format!("the JSON ends early (a truncated file?): {err}; expected {expected}"),
        )
    } else {
        InputError::file(
            location,
            format!("not valid JSON: {err}; expected {expected}"),
        )
    }
}

/// One JSON document. `expected` says what the file should be, for the error message.
pub(super) fn load_json(path: &Path, expected: &str) -> Result<Loaded, InputError> {
    let text = read_text(path)?;
    let (text, replaced) = python_json(&text);
    let value = serde_json::from_str(&text).map_err(|err| json_error(path, &err, expected))?;
    Ok(Loaded {
        location: path.display().to_string(),
        values: vec![value],
        non_finite: replaced,
    })
}

/// One or more JSON documents one after the other (JSON Lines, or concatenated objects).
pub(super) fn load_json_stream(path: &Path, expected: &str) -> Result<Loaded, InputError> {
    let text = read_text(path)?;
    let (text, replaced) = python_json(&text);
    let mut values = Vec::new();
    for value in serde_json::Deserializer::from_str(&text).into_iter::<Value>() {
        values.push(value.map_err(|err| json_error(path, &err, expected))?);
    }
    if values.is_empty() {
        return Err(InputError::file(
            path.display().to_string(),
            format!("the file is empty; expected {expected}"),
        ));
    }
    Ok(Loaded {
        location: path.display().to_string(),
        values,
        non_finite: replaced,
    })
}

/// Parsed JSON documents of one file.
pub(super) struct Loaded {
    pub location: String,
    pub values: Vec<Value>,
    /// The file held `NaN` or `Infinity`, read as missing values.
    pub non_finite: bool,
}

impl Loaded {
    pub fn root(&self) -> Node<'_> {
        Node::root(&self.location, &self.values[0])
    }

    pub fn note_non_finite(&self, builder: &mut Builder) {
        if self.non_finite {
            builder.note(format!(
                "{}: NaN/Infinity values read as not measured",
                self.location
            ));
        }
    }
}

/// A value inside a JSON file, with its key path for error messages.
#[derive(Debug, Clone)]
pub(super) struct Node<'a> {
    pub file: &'a str,
    pub path: String,
    pub value: &'a Value,
}

impl<'a> Node<'a> {
    pub fn root(file: &'a str, value: &'a Value) -> Node<'a> {
        Node {
            file,
            path: String::new(),
            value,
        }
    }

    fn key_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// The error of this value: names the file and the key path.
    pub fn error(&self, message: impl fmt::Display) -> InputError {
        if self.path.is_empty() {
            InputError::file(self.file, message.to_string())
        } else {
            InputError::file(self.file, format!("key `{}`: {message}", self.path))
        }
    }

    /// The error of a missing `key`; `expected` says what it should hold.
    pub fn missing(&self, key: &str, expected: &str) -> InputError {
        InputError::file(
            self.file,
            format!(
                "key `{}` is missing; expected {expected}",
                self.key_path(key)
            ),
        )
    }

    pub fn has(&self, key: &str) -> bool {
        self.value.get(key).is_some()
    }

    /// `key` of this object, `None` when missing or `null`.
    pub fn get(&self, key: &str) -> Option<Node<'a>> {
        match self.value.get(key) {
            None | Some(Value::Null) => None,
            Some(value) => Some(Node {
                file: self.file,
                path: self.key_path(key),
                value,
            }),
        }
    }

    /// `key` of this object; missing or `null` is an error saying what was `expected`.
    pub fn field(&self, key: &str, expected: &str) -> Result<Node<'a>, InputError> {
        self.get(key).ok_or_else(|| self.missing(key, expected))
    }

    /// A path of keys (`a.b.c` given as `["a", "b", "c"]`), `None` when any is missing.
    pub fn at(&self, keys: &[&str]) -> Option<Node<'a>> {
        let mut node = self.clone();
        for key in keys {
            node = node.get(key)?;
        }
        Some(node)
    }

    /// The elements of this array.
    pub fn items(&self, expected: &str) -> Result<Vec<Node<'a>>, InputError> {
        let items = self.value.as_array().ok_or_else(|| {
            self.error(format!("expected {expected}, found {}", kind(self.value)))
        })?;
        Ok(items
            .iter()
            .enumerate()
            .map(|(index, value)| Node {
                file: self.file,
                path: format!("{}[{index}]", self.path),
                value,
            })
            .collect())
    }

    /// The (key, value) pairs of this object, in file order.
    pub fn entries(&self) -> Vec<(&'a str, Node<'a>)> {
        self.value
            .as_object()
            .map(|map| {
                map.iter()
                    .map(|(key, value)| {
                        (
                            key.as_str(),
                            Node {
                                file: self.file,
                                path: self.key_path(key),
                                value,
                            },
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn is_object(&self) -> bool {
        self.value.is_object()
    }

    pub fn str(&self) -> Option<&'a str> {
        self.value.as_str()
    }

    pub fn bool(&self) -> Option<bool> {
        self.value.as_bool()
    }

    /// A finite number.
    pub fn number(&self) -> Result<f64, InputError> {
        match self.value.as_f64() {
            Some(number) if number.is_finite() => Ok(number),
            _ => Err(self.error(format!("expected a number, found {}", kind(self.value)))),
        }
    }

    /// A count: a whole number ≥ 0 (written `16` or `16.0`).
    pub fn count(&self) -> Result<u64, InputError> {
        let number = self.number()?;
        if number < 0.0 || number.fract() != 0.0 || number > 1e15 {
            return Err(self.error(format!(
                "expected a count (a whole number ≥ 0), found {number}"
            )));
        }
        Ok(number as u64)
    }

    /// `key` as a number; missing or `null` is `None`, anything else but a number an error.
    pub fn opt_number(&self, key: &str) -> Result<Option<f64>, InputError> {
        self.get(key).map(|node| node.number()).transpose()
    }

    pub fn opt_count(&self, key: &str) -> Result<Option<u64>, InputError> {
        self.get(key).map(|node| node.count()).transpose()
    }

    pub fn req_number(&self, key: &str, expected: &str) -> Result<f64, InputError> {
        self.field(key, expected)?.number()
    }

    pub fn req_count(&self, key: &str, expected: &str) -> Result<u64, InputError> {
        self.field(key, expected)?.count()
    }
}

/// "an object", "a string \"inf\"", … for error messages.
pub(super) fn kind(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("{b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) if s.chars().count() <= 40 => format!("the string \"{s}\""),
        Value::String(_) => "a string".into(),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// Which tool most likely wrote this JSON document, for "use --format X instead" hints.
pub(super) fn sniff_json(value: &Value) -> Option<ImportFormat> {
    let has = |key: &str| value.get(key).is_some();
    let config = value.get("input_config");
    if has("aiperf_version")
        || has("per_combination_metrics")
        || config.is_some_and(|c| c.get("phases").is_some() || c.get("loadgen").is_some())
    {
        return Some(ImportFormat::Aiperf);
    }
    if config.is_some() && has("request_throughput") {
        return Some(ImportFormat::GenaiPerf);
    }
    if value.get("benchmarks").is_some_and(Value::is_array) {
        return Some(ImportFormat::Guidellm);
    }
    if has("completed") && has("duration") && (has("request_throughput") || has("num_prompts")) {
        return Some(ImportFormat::VllmBench);
    }
    let evalscope_keys = [
        "Test Duration (s)",
        "Time taken for tests (s)",
        "Time taken for tests (senconds)",
        "Number of concurrency",
    ];
    if evalscope_keys.iter().any(|key| has(key)) {
        return Some(ImportFormat::Evalscope);
    }
    if let Some(first) = value.as_array().and_then(|rows| rows.first()) {
        if first.get("Percentiles").is_some() || first.get("Percentile").is_some() {
            return Some(ImportFormat::Evalscope);
        }
        if first.get("completed").is_some() && first.get("duration").is_some() {
            return Some(ImportFormat::VllmBench);
        }
    }
    None
}

/// "; it looks like a GuideLLM file (import it with format guidellm)" when another tool wrote
/// `value`, else "".
pub(super) fn other_tool_hint(value: &Value, this: ImportFormat) -> String {
    match sniff_json(value) {
        Some(other) if other != this => {
            format!("; it looks like a {other} file (import it with format {other})")
        }
        _ => String::new(),
    }
}

/// Seconds per unit for `value / per_second`: `ms` → 1000. Dividing keeps 7100 ms exactly 7.1 s.
pub(super) fn per_second(unit: &str) -> Option<f64> {
    match unit.trim().to_ascii_lowercase().as_str() {
        "s" | "sec" | "secs" | "second" | "seconds" => Some(1.0),
        "ms" | "msec" | "millisecond" | "milliseconds" => Some(1e3),
        "us" | "µs" | "usec" | "microsecond" | "microseconds" => Some(1e6),
        "ns" | "nsec" | "nanosecond" | "nanoseconds" => Some(1e9),
        _ => None,
    }
}

/// Sets a latency statistic given in `per_second` units per second. Negative values are tools'
/// "not computed" markers (EvalScope's −1): not stored, and `false` is returned.
pub(super) fn set_stat(
    level: &mut Level,
    metric: Metric,
    statistic: Percentile,
    value: f64,
    per_second: f64,
) -> bool {
    if !value.is_finite() || value < 0.0 {
        return false;
    }
    level.stats_mut(metric).set(statistic, value / per_second);
    true
}

/// The percentile a key like `p99`, `p99.9`, `min` or `max` names (min = 0, max = 100).
pub(super) fn percentile_key(key: &str) -> Option<f64> {
    match key {
        "min" => return Some(0.0),
        "max" => return Some(100.0),
        _ => {}
    }
    let digits = key.strip_prefix('p')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let p: f64 = digits.parse().ok()?;
    (p > 0.0 && p < 100.0).then_some(p)
}

/// A metric object of AIPerf and GenAI-Perf, `{unit, avg, p1 … p99, min, max, std, …}`, as
/// statistics in seconds. The unit must be one of time.
pub(super) fn unit_object_stats(
    node: &Node,
    level: &mut Level,
    metric: Metric,
) -> Result<(), InputError> {
    let unit = node
        .field("unit", "the metric's unit, e.g. \"ms\"")?
        .str()
        .unwrap_or_default()
        .to_string();
    let scale = per_second(&unit).ok_or_else(|| {
        node.error(format!(
            "unit \"{unit}\" is not a unit of time; expected \"ms\", \"s\", \"us\" or \"ns\""
        ))
    })?;
    for (key, value) in node.entries() {
        let statistic = match key {
            "avg" => Percentile::Mean,
            "mean" if !node.has("avg") => Percentile::Mean,
            other => match percentile_key(other) {
                Some(p) => Percentile::P(p),
                None => continue,
            },
        };
        if value.value.is_null() {
            continue;
        }
        set_stat(level, metric, statistic, value.number()?, scale);
    }
    Ok(())
}

/// "concurrency 4" or "rate 8 req/s".
pub(super) fn load_label(level: &Level) -> String {
    match (level.concurrency, level.rate) {
        (Some(c), _) => format!("concurrency {}", number(c)),
        (None, Some(r)) => format!("rate {} req/s", number(r)),
        (None, None) => "no load".into(),
    }
}

/// A number without a trailing `.0` and without float noise.
pub(super) fn number(value: f64) -> String {
    crate::slo::duration::trim_number(value)
}

/// The number after `prefix` in a folder name like `parallel_4_number_16` (prefix
/// `parallel_`) or `llama-openai-chat-concurrency8` (prefix `-concurrency`).
pub(super) fn number_after(name: &str, prefix: &str) -> Option<f64> {
    let start = name.rfind(prefix)? + prefix.len();
    let digits: String = name[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    digits
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v > 0.0)
}

/// Collects what a reader found, then merges and sorts it into an [`Imported`].
pub(super) struct Builder {
    format: ImportFormat,
    versions: Vec<String>,
    levels: Vec<(Level, String)>,
    streaming: Vec<bool>,
    notes: Vec<String>,
    dropped: BTreeSet<String>,
    files: Vec<PathBuf>,
}

impl Builder {
    pub fn new(format: ImportFormat) -> Builder {
        Builder {
            format,
            versions: Vec::new(),
            levels: Vec::new(),
            streaming: Vec::new(),
            notes: Vec::new(),
            dropped: BTreeSet::new(),
            files: Vec::new(),
        }
    }

    pub fn version(&mut self, version: impl Into<String>) {
        let version = version.into();
        if !self.versions.contains(&version) {
            self.versions.push(version);
        }
    }

    /// A level; `origin` (file, or file and row) names it in merge notes.
    pub fn level(&mut self, level: Level, origin: impl Into<String>) {
        self.levels.push((level, origin.into()));
    }

    pub fn streaming(&mut self, streaming: bool) {
        self.streaming.push(streaming);
    }

    pub fn note(&mut self, note: impl Into<String>) {
        let note = note.into();
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }

    /// A quantity of the files that has no capplan equivalent.
    pub fn drop_quantity(&mut self, name: impl Into<String>) {
        self.dropped.insert(name.into());
    }

    pub fn file(&mut self, path: &Path) {
        if !self.files.iter().any(|f| f == path) {
            self.files.push(path.to_path_buf());
        }
    }

    pub fn finish(mut self) -> Result<Imported, InputError> {
        if self.levels.is_empty() {
            let files: Vec<String> = self.files.iter().map(|f| f.display().to_string()).collect();
            return Err(InputError::file(
                files.join(", "),
                format!(
                    "no load level found to import as {}{}",
                    self.format,
                    if self.notes.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", self.notes.join("; "))
                    }
                ),
            ));
        }
        let tool_version = match self.versions.len() {
            0 => None,
            1 => self.versions.pop(),
            _ => {
                let all = self.versions.join(", ");
                self.notes.push(format!(
                    "the files come from different versions ({all}); their levels are merged into one curve"
                ));
                Some(all)
            }
        };
        let streaming = if self.streaming.is_empty() {
            None
        } else if self.streaming.iter().all(|s| *s) {
            Some(true)
        } else if self.streaming.iter().all(|s| !*s) {
            Some(false)
        } else {
            self.notes.push(
                "some files were measured with streaming and some without; streaming is left \
                 unknown"
                    .into(),
            );
            None
        };
        if !self.dropped.is_empty() {
            let dropped: Vec<String> = std::mem::take(&mut self.dropped).into_iter().collect();
            self.notes.push(format!(
                "not imported (no capplan equivalent): {}",
                dropped.join(", ")
            ));
        }
        let levels = merge_levels(std::mem::take(&mut self.levels), &mut self.notes);
        let mut notes = Vec::new();
        for note in self.notes {
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
        Ok(Imported {
            tool: self.format.name().to_string(),
            tool_version,
            levels,
            streaming,
            notes,
            files: self.files,
        })
    }
}

fn load_key(level: &Level) -> (Option<u64>, Option<u64>) {
    (
        level.concurrency.map(f64::to_bits),
        level.rate.map(f64::to_bits),
    )
}

/// Merges levels of the same load (repeated runs, or the same level in several files) and
/// sorts by concurrency, then rate.
fn merge_levels(levels: Vec<(Level, String)>, notes: &mut Vec<String>) -> Vec<Level> {
    let mut groups: Vec<Vec<(Level, String)>> = Vec::new();
    for (level, origin) in levels {
        match groups
            .iter_mut()
            .find(|group| load_key(&group[0].0) == load_key(&level))
        {
            Some(group) => group.push((level, origin)),
            None => groups.push(vec![(level, origin)]),
        }
    }
    let mut merged_any = false;
    let mut out: Vec<Level> = groups
        .into_iter()
        .map(|group| {
            if group.len() == 1 {
                return group
                    .into_iter()
                    .map(|(level, _)| level)
                    .next()
                    .unwrap_or_default();
            }
            merged_any = true;
            let origins: Vec<&str> = group.iter().map(|(_, origin)| origin.as_str()).collect();
            notes.push(format!(
                "{}: {} results merged ({})",
                load_label(&group[0].0),
                group.len(),
                origins.join("; ")
            ));
            let label = load_label(&group[0].0);
            let levels: Vec<Level> = group.into_iter().map(|(level, _)| level).collect();
            let (merged, partial) = merge(&levels);
            if !partial.is_empty() {
                notes.push(format!(
                    "{label}: {} (the others did not measure it)",
                    partial.join(", ")
                ));
            }
            merged
        })
        .collect();
    if merged_any {
        notes.push(
            "merged levels: request counts and durations are added, throughput is the total over \
             the total duration, means are weighted by successful requests, and percentiles are \
             the weighted average of each result's percentile (min and max the extremes), not \
             percentiles of the pooled requests"
                .into(),
        );
    }
    let key = |level: &Level| {
        (
            level.concurrency.unwrap_or(f64::INFINITY),
            level.rate.unwrap_or(f64::INFINITY),
        )
    };
    out.sort_by(|a, b| {
        let (a, b) = (key(a), key(b));
        a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1))
    });
    out
}

/// `Σ wᵢ·vᵢ / Σ wᵢ` when every value is known.
fn weighted(values: impl Iterator<Item = Option<f64>>, weights: &[f64]) -> Option<f64> {
    let values: Option<Vec<f64>> = values.collect();
    let values = values?;
    let total: f64 = weights.iter().sum();
    if values.is_empty() || total <= 0.0 {
        return None;
    }
    Some(values.iter().zip(weights).map(|(v, w)| v * w).sum::<f64>() / total)
}

fn sum_counts(values: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    values.sum()
}

/// One merged level, and the latency metrics that only some of the results had (merged from
/// those).
fn merge(levels: &[Level]) -> (Level, Vec<String>) {
    // Successful requests weigh each result; equal weights unless every count is known.
    let successes: Option<Vec<f64>> = levels
        .iter()
        .map(|l| {
            l.requests
                .map(|n| n.saturating_sub(l.failures.unwrap_or(0)) as f64)
        })
        .collect();
    let weights = match successes {
        Some(w) if w.iter().sum::<f64>() > 0.0 => w,
        _ => vec![1.0; levels.len()],
    };
    let equal = vec![1.0; levels.len()];
    let durations: Option<Vec<f64>> = levels.iter().map(|l| l.duration_s).collect();
    // Rates: total over total duration (= duration-weighted mean) when durations are known.
    let rate = |get: fn(&Level) -> Option<f64>| match &durations {
        Some(d) => weighted(levels.iter().map(get), d),
        None => weighted(levels.iter().map(get), &equal),
    };
    let mut merged = Level {
        concurrency: levels[0].concurrency,
        rate: levels[0].rate,
        requests: sum_counts(levels.iter().map(|l| l.requests)),
        failures: sum_counts(levels.iter().map(|l| l.failures)),
        duration_s: durations.as_ref().map(|d| d.iter().sum()),
        requests_per_s: rate(|l| l.requests_per_s),
        output_tokens_per_s: rate(|l| l.output_tokens_per_s),
        input_tokens_mean: weighted(levels.iter().map(|l| l.input_tokens_mean), &weights),
        output_tokens_mean: weighted(levels.iter().map(|l| l.output_tokens_mean), &weights),
        latency: Vec::new(),
    };
    let mut partial = Vec::new();
    for metric in Metric::ALL {
        // The results that measured this metric at all.
        let present: Vec<(&Stats, f64)> = levels
            .iter()
            .zip(&weights)
            .filter_map(|(l, w)| l.stats(metric).map(|s| (s, *w)))
            .collect();
        if present.is_empty() {
            continue;
        }
        if present.len() < levels.len() {
            partial.push(format!(
                "{} from {} of {} results",
                metric.name(),
                present.len(),
                levels.len()
            ));
        }
        let combine = |statistic: Percentile| -> Option<f64> {
            let values: Vec<(f64, f64)> = present
                .iter()
                .filter_map(|(s, w)| s.get(statistic).map(|v| (v, *w)))
                .collect();
            // A statistic only some of them have would mix different request sets.
            if values.len() < present.len() {
                return None;
            }
            match statistic {
                Percentile::P(p) if p <= 0.0 => values.iter().map(|v| v.0).reduce(f64::min),
                Percentile::P(p) if p >= 100.0 => values.iter().map(|v| v.0).reduce(f64::max),
                _ => {
                    let weights: Vec<f64> = values.iter().map(|v| v.1).collect();
                    weighted(values.iter().map(|v| Some(v.0)), &weights)
                }
            }
        };
        let mut out = Stats {
            mean: combine(Percentile::Mean),
            percentiles: Vec::new(),
        };
        for &(p, _) in &present[0].0.percentiles {
            if let Some(value) = combine(Percentile::P(p)) {
                out.percentiles.push((p, value));
            }
        }
        if !out.is_empty() {
            merged.latency.push((metric, out));
        }
    }
    (merged, partial)
}

#[cfg(test)]
pub(super) mod test_support {
    use std::path::{Path, PathBuf};

    use crate::slo::Percentile;
    use crate::store::steps::{Level, Metric};

    /// A path under `tests/fixtures/import/`.
    pub fn fixture(relative: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/import")
            .join(relative)
    }

    /// A scratch folder for files the tests write.
    pub fn scratch(name: &str) -> crate::scratch::ScratchDir {
        crate::scratch::scratch_named(name)
    }

    pub fn value(level: &Level, metric: Metric, statistic: Percentile) -> f64 {
        level
            .value(metric, statistic)
            .unwrap_or_else(|| panic!("no {metric} {statistic:?} at {level:?}"))
    }

    /// `actual` equals `expected` to 1e-9 relative.
    #[track_caller]
    pub fn close(actual: f64, expected: f64) {
        assert!(
            (actual - expected).abs() <= 1e-9 * expected.abs().max(1e-12),
            "{actual} != {expected}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;

    #[test]
    fn format_names_round_trip_and_errors_list_the_valid_ones() {
        for format in ImportFormat::ALL {
            assert_eq!(format.name().parse::<ImportFormat>().unwrap(), format);
        }
        assert_eq!(
            "GENAI_PERF".parse::<ImportFormat>().unwrap(),
            ImportFormat::GenaiPerf
        );
        let err = "locust".parse::<ImportFormat>().unwrap_err().to_string();
        assert!(err.contains("locust"), "{err}");
        for format in ImportFormat::ALL {
            assert!(err.contains(format.name()), "{err}");
        }
    }

    #[test]
    fn python_nan_and_infinity_become_null_outside_strings() {
        let (text, replaced) =
            python_json(r#"{"a": NaN, "b": -Infinity, "c": "NaN \" Infinity", "d": [Infinity]}"#);
        assert!(replaced);
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["a"], Value::Null);
        assert_eq!(value["b"], Value::Null);
        assert_eq!(value["c"], "NaN \" Infinity");
        assert_eq!(value["d"][0], Value::Null);
        assert!(!python_json("{\"a\": 1}").1);
    }

    #[test]
    fn percentile_keys_and_folder_numbers() {
        assert_eq!(percentile_key("p99"), Some(99.0));
        assert_eq!(percentile_key("p99.9"), Some(99.9));
        assert_eq!(percentile_key("min"), Some(0.0));
        assert_eq!(percentile_key("max"), Some(100.0));
        assert_eq!(percentile_key("std"), None);
        assert_eq!(percentile_key("p"), None);
        assert_eq!(number_after("parallel_4_number_16", "parallel_"), Some(4.0));
        assert_eq!(number_after("rate_4.0_number_20", "rate_"), Some(4.0));
        assert_eq!(
            number_after("m-openai-chat-concurrency8", "-concurrency"),
            Some(8.0)
        );
        assert_eq!(number_after("parallel_x", "parallel_"), None);
    }

    fn level(concurrency: f64, requests: u64, failures: u64, duration: f64, ttft: f64) -> Level {
        let mut level = Level {
            concurrency: Some(concurrency),
            requests: Some(requests),
            failures: Some(failures),
            duration_s: Some(duration),
            requests_per_s: Some((requests - failures) as f64 / duration),
            ..Level::default()
        };
        level.stats_mut(Metric::Ttft).set(Percentile::Mean, ttft);
        level
            .stats_mut(Metric::Ttft)
            .set(Percentile::P(99.0), ttft * 2.0);
        level
            .stats_mut(Metric::Ttft)
            .set(Percentile::P(100.0), ttft * 3.0);
        level
    }

    #[test]
    fn levels_of_the_same_load_merge_and_sort() {
        let mut notes = Vec::new();
        let mut with_e2e = level(8.0, 30, 10, 4.0, 0.6);
        with_e2e.stats_mut(Metric::E2e).set(Percentile::Mean, 2.5);
        let levels = vec![
            (level(8.0, 10, 0, 2.0, 0.3), "a".to_string()),
            (level(1.0, 10, 0, 5.0, 0.1), "b".to_string()),
            (with_e2e, "c".to_string()),
        ];
        let merged = merge_levels(levels, &mut notes);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].concurrency, Some(1.0));
        let eight = &merged[1];
        assert_eq!(eight.requests, Some(40));
        assert_eq!(eight.failures, Some(10));
        assert_eq!(eight.duration_s, Some(6.0));
        // 10 + 20 successes over 6 s.
        close(eight.requests_per_s.unwrap(), 5.0);
        // Weighted by successes: (10·0.3 + 20·0.6)/30.
        close(value(eight, Metric::Ttft, Percentile::Mean), 0.5);
        close(value(eight, Metric::Ttft, Percentile::P(99.0)), 1.0);
        close(value(eight, Metric::Ttft, Percentile::P(100.0)), 1.8);
        // Only one result measured E2E: it alone gives the merged E2E.
        close(value(eight, Metric::E2e, Percentile::Mean), 2.5);
        assert!(notes
            .iter()
            .any(|n| n.contains("concurrency 8: 2 results merged (a; c)")));
        assert!(
            notes.iter().any(|n| n.contains("e2e from 1 of 2 results")),
            "{notes:?}"
        );

        // Unknown counts anywhere: equal weights.
        let mut unknown = level(2.0, 10, 0, 1.0, 0.2);
        unknown.requests = None;
        let merged = merge_levels(
            vec![
                (unknown, "x".into()),
                (level(2.0, 90, 0, 1.0, 0.4), "y".into()),
            ],
            &mut notes,
        );
        close(value(&merged[0], Metric::Ttft, Percentile::Mean), 0.3);
        assert_eq!(merged[0].requests, None);
    }

    #[test]
    fn missing_paths_and_empty_folders_are_named() {
        let missing = fixture("no-such-dir");
        let err = read(ImportFormat::Evalscope, &[missing])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no-such-dir") && err.contains("no such file"),
            "{err}"
        );
        let empty = scratch("empty-folder");
        let err = read(ImportFormat::Evalscope, &[empty.to_path_buf()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("empty-folder") && err.contains("benchmark_summary.json"),
            "{err}"
        );
        let err = read(ImportFormat::VllmBench, &[]).unwrap_err().to_string();
        assert!(err.contains("no result files"), "{err}");
    }

    #[test]
    fn steps_tables_are_wrapped() {
        let dir = scratch("steps");
        let path = dir.join("seed.csv");
        std::fs::write(
            &path,
            "concurrency,requests,qps,latency_p90_ms,batch_size\n8,100,2.5,4977.1,1\n16,100,4.6,5290.5,1\n",
        )
        .unwrap();
        let imported = read(ImportFormat::StepsCsv, &[dir.to_path_buf()]).unwrap();
        assert_eq!(imported.tool, "steps-csv");
        assert_eq!(imported.levels.len(), 2);
        close(
            value(&imported.levels[0], Metric::E2e, Percentile::P(90.0)),
            4.9771,
        );
        assert!(
            imported.notes.iter().any(|n| n.contains("batch_size")),
            "{:?}",
            imported.notes
        );
        assert_eq!(imported.files, vec![path]);
    }
}
