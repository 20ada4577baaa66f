//! Measured curves on disk: a run folder (`run.json` + `steps.csv`, from `probe` or `import`),
//! a steps table (a CSV file), or a folder holding run folders. Each becomes a
//! [`MeasuredCurve`]: its levels, and what is known of how they were measured.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::steps::{read_steps_csv, Level};
use crate::catalog::{Parallelism, PdSplit};
use crate::error::InputError;
use crate::slo::Slo;
use crate::workload::{PrefixShare, Speculation, ThinkTime, TokenLengths, Workload};

pub const STEPS_FILE: &str = "steps.csv";
pub const RUN_FILE: &str = "run.json";

/// The layout a curve was measured on, as its run recorded it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CurveLayout {
    pub model: String,
    pub card: String,
    pub tp: u32,
    pub interconnect: Option<String>,
    pub instances_per_node: Option<u32>,
    pub cards_per_node: Option<u32>,
    /// Instances sharing one card behind the run's URL (1 normally).
    pub instances_per_card: u32,
    /// Each instance's (each worker's) layout; `tp` is its width. (`tp` above stays beside it:
    /// fit reports have always carried it there.)
    pub parallel: Parallelism,
    /// A disaggregated deployment behind the URL: P prefill and D decode workers.
    pub pd: Option<PdSplit>,
    /// Speculative decoding the server ran, as the user said.
    pub speculation: Option<Speculation>,
}

/// One measured curve and its context.
#[derive(Debug, Clone, Serialize)]
pub struct MeasuredCurve {
    /// The run folder or CSV file.
    pub origin: PathBuf,
    /// `probe`, `import` or `table`.
    pub kind: String,
    /// The tool that measured it, for imports.
    pub tool: Option<String>,
    pub layout: Option<CurveLayout>,
    /// The SLO a probe searched at.
    pub slo: Option<Slo>,
    pub e2e_limit_s: Option<f64>,
    pub max_error_rate: Option<f64>,
    pub think_time: ThinkTime,
    /// `finished`, `interrupted`, … for runs.
    pub status: Option<String>,
    /// The C* a probe found at its own SLO (judged with confidence intervals).
    pub result_c_star: Option<f64>,
    /// Prompt and output lengths as the run recorded them (a probe's synthetic lengths, an
    /// import's stated ones); `None` when only the levels' measured means are known.
    pub lengths: Option<(TokenLengths, TokenLengths)>,
    /// Share of each prompt common to a level's requests (a probe's `--prefix-share`).
    pub prefix_share: PrefixShare,
    pub levels: Vec<Level>,
    pub unused_columns: Vec<String>,
    /// Items per request (a batch API's `--batch-size`); 1 otherwise.
    pub batch: u32,
    /// A batch-size sweep at one concurrency: its knee is in `run.json`; it is no curve of
    /// load.
    pub batch_sweep: bool,
}

impl MeasuredCurve {
    /// The workload the curve was measured with: the recorded lengths, else the levels' mean
    /// token counts (as fixed lengths); `None` when neither is known.
    pub fn workload(&self) -> Option<Workload> {
        let mean = |pick: fn(&Level) -> Option<f64>| {
            let values: Vec<f64> = self.levels.iter().filter_map(pick).collect();
            (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
        };
        let fixed = |v: f64| TokenLengths::Fixed {
            tokens: v.round().max(1.0) as u32,
        };
        // A fixed length asked for is replaced by the level's measured mean where there is one:
        // a chat template and the probe's tag add tokens the engine processed (SmolLM2's
        // template turns 64 asked prompt tokens into ~115), and a model stopping early gives
        // fewer output tokens. Distributions are kept as asked.
        let measured = |asked: &TokenLengths, pick: fn(&Level) -> Option<f64>| match asked {
            TokenLengths::Fixed { .. } => mean(pick).map(fixed).unwrap_or_else(|| asked.clone()),
            other => other.clone(),
        };
        let (input_tokens, output_tokens) = match &self.lengths {
            Some((input, output)) => (
                measured(input, |l| l.input_tokens_mean),
                measured(output, |l| l.output_tokens_mean),
            ),
            None => (
                fixed(mean(|l| l.input_tokens_mean)?),
                fixed(mean(|l| l.output_tokens_mean)?),
            ),
        };
        Some(Workload {
            input_tokens,
            output_tokens,
            think_time: self.think_time,
            prefix_share: self.prefix_share,
            speculation: self.layout.as_ref().and_then(|l| l.speculation.clone()),
        })
    }

    /// Where derived files (fit.json, charts) go by default: inside a run folder, beside a CSV
    /// file (named after it).
    pub fn output_stem(&self, name: &str) -> PathBuf {
        if self.origin.is_dir() {
            self.origin.join(name)
        } else {
            let stem = self
                .origin
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "steps".into());
            self.origin.with_file_name(format!("{stem}.{name}"))
        }
    }
}

fn run_folders(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    if dir.join(RUN_FILE).is_file() && dir.join(STEPS_FILE).is_file() {
        found.push(dir.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() && depth > 0 {
            run_folders(&path, depth - 1, found);
        }
    }
}

/// Reads one run folder.
pub fn read_run(dir: &Path) -> Result<MeasuredCurve, InputError> {
    let run_path = dir.join(RUN_FILE);
    let location = run_path.display().to_string();
    let text = std::fs::read_to_string(&run_path)
        .map_err(|err| InputError::file(&location, format!("cannot read: {err}")))?;
    let run: Value = serde_json::from_str(&text)
        .map_err(|err| InputError::file(&location, format!("not JSON: {err}")))?;
    let config = &run["config"];
    let layout = &config["layout"];
    let text_of = |v: &Value| v.as_str().map(String::from);
    let layout = match (text_of(&layout["model"]), text_of(&layout["card"])) {
        (Some(model), Some(card)) => Some(CurveLayout {
            model,
            card,
            tp: layout["tp"].as_u64().unwrap_or(1) as u32,
            interconnect: text_of(&layout["interconnect"]),
            instances_per_node: layout["instances_per_node"].as_u64().map(|v| v as u32),
            cards_per_node: layout["cards_per_node"].as_u64().map(|v| v as u32),
            instances_per_card: layout["instances_per_card"]
                .as_u64()
                .map_or(1, |v| v.max(1) as u32),
            parallel: {
                let axis = |name: &str| layout[name].as_u64().map_or(1, |v| v.max(1) as u32);
                Parallelism {
                    tp: layout["tp"].as_u64().unwrap_or(1) as u32,
                    pp: axis("pp"),
                    dp: axis("attention_dp"),
                    ep: axis("ep"),
                }
            },
            pd: serde_json::from_value(layout["pd"].clone()).ok(),
            speculation: serde_json::from_value(layout["speculation"].clone()).ok(),
        }),
        _ => None,
    };
    // A probe keeps its E2E limit beside the SLO (`e2e_limit_s`); the curve's SLO holds it.
    let slo: Option<Slo> = serde_json::from_value(config["slo"].clone())
        .ok()
        .map(|s: Slo| Slo {
            e2e_s: s.e2e_s.or(config["e2e_limit_s"].as_f64()),
            ..s
        })
        .filter(|s: &Slo| s.ttft_s.is_finite() || s.tpot_s.is_some() || s.e2e_s.is_some());
    let steps = read_steps_csv(&dir.join(STEPS_FILE))?;
    Ok(MeasuredCurve {
        origin: dir.to_path_buf(),
        kind: run["kind"].as_str().unwrap_or("probe").to_string(),
        tool: text_of(&run["source"]["tool"]),
        layout,
        slo,
        e2e_limit_s: config["e2e_limit_s"].as_f64(),
        max_error_rate: config["max_error_rate"].as_f64(),
        think_time: serde_json::from_value(config["think_time"].clone()).unwrap_or(ThinkTime::NONE),
        prefix_share: serde_json::from_value(config["input"]["prefix_share"].clone())
            .unwrap_or_default(),
        status: text_of(&run["status"]),
        result_c_star: run["result"]["c_star"].as_f64(),
        lengths: match (
            serde_json::from_value::<TokenLengths>(config["input"]["tokens"].clone()),
            serde_json::from_value::<TokenLengths>(config["output_tokens"].clone()),
        ) {
            (Ok(input), Ok(output)) => Some((input, output)),
            _ => None,
        },
        levels: steps.levels,
        unused_columns: steps.unused_columns,
        batch: config["load"]["batch"]
            .as_u64()
            .map_or(1, |b| b.max(1) as u32),
        batch_sweep: config["load"]["batch_sizes"]
            .as_array()
            .is_some_and(|sizes| !sizes.is_empty()),
    })
}

/// Every run folder under `dir` (none when it has none or does not exist).
pub fn read_runs_under(dir: &Path) -> Result<Vec<MeasuredCurve>, InputError> {
    let mut folders = Vec::new();
    run_folders(dir, 4, &mut folders);
    folders.iter().map(|folder| read_run(folder)).collect()
}

/// The curves at `paths`: run folders, steps tables (CSV), or folders of run folders.
pub fn load_curves(paths: &[PathBuf]) -> Result<Vec<MeasuredCurve>, InputError> {
    let mut curves = Vec::new();
    for path in paths {
        let location = path.display().to_string();
        if path.is_file() {
            let steps = read_steps_csv(path)?;
            curves.push(MeasuredCurve {
                origin: path.clone(),
                kind: "table".into(),
                tool: None,
                layout: None,
                slo: None,
                e2e_limit_s: None,
                max_error_rate: None,
                think_time: ThinkTime::NONE,
                status: None,
                result_c_star: None,
                lengths: None,
                prefix_share: PrefixShare::NONE,
                levels: steps.levels,
                unused_columns: steps.unused_columns,
                batch: 1,
                batch_sweep: false,
            });
        } else if path.is_dir() {
            let mut folders = Vec::new();
            run_folders(path, 4, &mut folders);
            if folders.is_empty() {
                return Err(InputError::file(
                    location,
                    "holds no run folder (run.json and steps.csv); give a run folder, a folder of them, or a steps CSV",
                ));
            }
            for folder in folders {
                curves.push(read_run(&folder)?);
            }
        } else {
            return Err(InputError::file(location, "no such file or folder"));
        }
    }
    Ok(curves)
}
