//! Probe runs as capacity points: a finished run folder (`run.json` with a result) proves its
//! C* for its layout at the SLO and think time it was probed with.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::capacity::{CapacityPoint, PointSource};
use crate::catalog::names::find;
use crate::catalog::Catalog;
use crate::error::InputError;
use crate::slo::Slo;
use crate::workload::ThinkTime;

/// `run.json` files under `dir`, at most `depth` folders down.
fn run_files(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() && depth > 0 {
            run_files(&path, depth - 1, found);
        } else if path.file_name().is_some_and(|n| n == "run.json") {
            found.push(path);
        }
    }
}

/// Capacity points from the finished runs under `dir` (model/card-tpT/timestamp/run.json).
/// Runs still running or interrupted are not evidence and are left out; a run whose C* is 0
/// proves nothing about capacity and is left out too.
pub fn load_runs(dir: &Path, catalog: &Catalog) -> Result<Vec<CapacityPoint>, InputError> {
    let mut files = Vec::new();
    run_files(dir, 4, &mut files);
    let mut points = Vec::new();
    for file in files {
        let location = file.display().to_string();
        let text = std::fs::read_to_string(&file)
            .map_err(|err| InputError::file(&location, format!("cannot read: {err}")))?;
        let run: Value = serde_json::from_str(&text)
            .map_err(|err| InputError::file(&location, format!("not JSON: {err}")))?;
        if run["status"] != "finished" {
            continue;
        }
        let bad = |what: &str| InputError::file(&location, format!("run.json lacks {what}"));
        let config = &run["config"];
        let layout = &config["layout"];
        let text_of = |v: &Value, what: &str| v.as_str().map(String::from).ok_or_else(|| bad(what));
        let model_name = text_of(&layout["model"], "config.layout.model")?;
        let card_name = text_of(&layout["card"], "config.layout.card")?;
        let (Some(model), Some(card)) = (
            find(&catalog.models, &model_name),
            find(&catalog.cards, &card_name),
        ) else {
            // A run of hardware this catalog does not know cannot be planned with.
            continue;
        };
        let c_star = run["result"]["c_star"]
            .as_f64()
            .ok_or_else(|| bad("result.c_star"))?;
        if c_star < 1.0 {
            continue;
        }
        let slo: Slo =
            serde_json::from_value(config["slo"].clone()).map_err(|_| bad("config.slo"))?;
        if !slo.ttft_s.is_finite() {
            continue;
        }
        let think_time: ThinkTime =
            serde_json::from_value(config["think_time"].clone()).unwrap_or(ThinkTime::NONE);
        let source = match run["kind"].as_str() {
            Some("import") => PointSource::Imported,
            _ => PointSource::Measured,
        };
        points.push(CapacityPoint {
            model: model.name.clone(),
            card: card.name.clone(),
            interconnect: text_of(&layout["interconnect"], "config.layout.interconnect")?,
            cards_per_node: layout["cards_per_node"].as_u64().map(|v| v as u32),
            instances_per_node: layout["instances_per_node"].as_u64().map(|v| v as u32),
            tp: layout["tp"]
                .as_u64()
                .ok_or_else(|| bad("config.layout.tp"))? as u32,
            users_per_instance: c_star,
            slo,
            think_time,
            source,
            note: format!(
                "probe run, bracket [{}, {}]",
                run["result"]["last_pass"], run["result"]["first_fail"]
            ),
            origin: location,
        });
    }
    Ok(points)
}
