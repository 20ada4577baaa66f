//! `capplan validate`: the performance model's predictions against every public table the
//! project ships as a fixture, scored only on rows nothing was fitted on.
//!
//! Each source turns its rows into [`Comparison`]s — a deployment, the load it was measured
//! under, and what was measured. They are simulated exactly as `predict` would, and the
//! errors are summarised per source, engine and subset (rows the model was fitted on are
//! reported apart from the held-out ones, never mixed). Where a source measured one deployment
//! at several loads, C* is read off both the measured and the predicted curve at two SLOs.

pub mod bands;
pub mod blis;
pub mod cstar;
pub mod deployment;
pub mod dstack;
pub mod fit;
pub mod fit_constant;
pub mod queueing;
pub mod run_width;
pub mod score;
pub mod silicon;
pub mod static_batch;
pub mod sweeps;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use crate::catalog::{Catalog, EngineProfile};
use crate::error::InputError;
use crate::sim::measuring_client::LevelSample;
use crate::sim::virtual_run::Arrivals;
use deployment::Deployment;
use score::{relative_error, ErrorStats};

/// The rows of a shipped CSV table; a row that does not parse is one error naming
/// `origin` and its line.
pub fn read_table<T: serde::de::DeserializeOwned>(
    text: &str,
    origin: &str,
) -> Result<Vec<T>, InputError> {
    let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    reader
        .deserialize::<T>()
        .map(|record| {
            record.map_err(|err| {
                let line = err.position().map_or(0, |p| p.line());
                InputError::file(format!("{origin}:{line}"), err.to_string())
            })
        })
        .collect()
}

/// What was measured (or predicted) at one load: means, seconds and per second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RowOutcome {
    pub ttft_s: Option<f64>,
    /// TPOT, or the source's inter-token latency where that is what it reports (per token).
    pub tpot_s: Option<f64>,
    pub e2e_s: Option<f64>,
    pub output_tokens_per_s: Option<f64>,
}

/// One measured row and how to predict it.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub id: String,
    /// The engine (scores are kept per engine).
    pub group: String,
    /// `fit on` or `held out` (or a source's own name for its split).
    pub subset: String,
    pub deployment: Deployment,
    pub arrivals: Arrivals,
    pub sample: LevelSample,
    /// Concurrency or rate of the row, for sweeps.
    pub concurrency: f64,
    pub measured: RowOutcome,
    /// Rows with the same key are one deployment at several loads.
    pub sweep: String,
    pub note: String,
}

/// Rows a source could not compare, counted by reason.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SkipReasons {
    pub reasons: BTreeMap<String, usize>,
}

impl SkipReasons {
    pub fn add(&mut self, reason: impl Into<String>) {
        *self.reasons.entry(reason.into()).or_default() += 1;
    }

    pub fn total(&self) -> usize {
        self.reasons.values().sum()
    }
}

/// One public table as comparisons.
#[derive(Debug, Clone)]
pub struct TableSource {
    pub name: String,
    pub file: String,
    /// How the rows are split from what was fitted.
    pub split: String,
    pub comparisons: Vec<Comparison>,
    pub skipped: SkipReasons,
    pub total_rows: usize,
    /// The models its C* sweeps measure, as error bands are kept apart: `dense` or
    /// `mixture of experts`.
    pub model_class: &'static str,
}

/// One row, predicted.
#[derive(Debug, Clone, Serialize)]
pub struct ComparedRow {
    pub id: String,
    pub engine: String,
    pub subset: String,
    pub model: String,
    pub card: String,
    pub tp: u32,
    pub load: f64,
    /// Closed-loop users of the row (none where requests arrived at a rate).
    pub users: Option<u32>,
    pub measured: RowOutcome,
    pub predicted: RowOutcome,
    /// The predicted TTFT of the row's prompt alone on an idle deployment (one user), where
    /// it was asked for: what the queue adds shows against it (see [`queueing`]).
    pub predicted_alone_ttft_s: Option<f64>,
    /// What the prediction's step times rested on.
    pub basis: String,
    pub note: String,
    /// The deployment measured at several loads this row is one level of (empty for a row of
    /// its own): what `c_star_sweeps` names.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub sweep: String,
}

/// Errors of one metric over one group of rows.
#[derive(Debug, Clone, Serialize)]
pub struct MetricScore {
    pub metric: String,
    pub stats: ErrorStats,
}

/// The score of one engine's rows in one subset of one source.
#[derive(Debug, Clone, Serialize)]
pub struct GroupScore {
    pub engine: String,
    pub subset: String,
    /// `measured operators` or `roofline` (the card class of the band).
    pub basis_class: String,
    pub rows: usize,
    pub metrics: Vec<MetricScore>,
}

/// One source's result.
#[derive(Debug, Clone, Serialize)]
pub struct SourceScore {
    pub source: String,
    /// `dense` or `mixture of experts` (see [`TableSource::model_class`]).
    pub model_class: String,
    pub file: String,
    pub split: String,
    pub total_rows: usize,
    pub compared: usize,
    pub skipped: SkipReasons,
    /// Rows the model could not predict (a layout that does not fit …), by reason.
    pub failed: SkipReasons,
    pub groups: Vec<GroupScore>,
    pub c_star: Vec<cstar::CStarScore>,
    /// Every sweep's C* at each SLO, with the limit it crosses and how steeply.
    pub c_star_sweeps: Vec<cstar::SweepCStar>,
    /// Held-out C* errors by the slope of the predicted curve at the predicted C*.
    pub c_star_by_predicted_slope: Vec<cstar::SlopeClassScore>,
    /// TTFT at the rows' loads over the prompt alone, measured and predicted, per band of users.
    pub queueing: Vec<queueing::QueueingScore>,
    pub rows: Vec<ComparedRow>,
}

/// `capplan validate`'s result.
#[derive(Debug, Clone, Serialize)]
pub struct ValidationReport {
    /// With `--fit`: the overheads fitted per engine (the scores use them).
    pub fitted: Vec<fit::FittedOverheads>,
    /// With `--fit`: the constants fitted one by one (cost per expert layer, hand-off).
    pub fitted_constants: Vec<fit_constant::FittedConstant>,
    pub sources: Vec<SourceScore>,
    /// TensorRT-LLM 0.9's static batches: step times, leave-one-GPU-out and leave-one-model-out.
    pub static_batch: Option<static_batch::StaticBatchScore>,
    /// How often the C* bands held for deployments left out of them.
    pub band_coverage: Vec<bands::BandCoverage>,
    /// Whether per-row figures are printed.
    #[serde(skip)]
    pub details: bool,
}

pub use crate::catalog::band::basis_class;
pub use bands::{bands, bands_toml};

/// Predicts every comparison of `source` (on all cores), with `overrides` replacing a
/// catalog engine profile of the same name (to score candidate overheads while fitting).
pub fn predict_rows(
    catalog: &Catalog,
    comparisons: &[Comparison],
    overrides: &[EngineProfile],
) -> (Vec<ComparedRow>, SkipReasons) {
    predict_rows_with(catalog, comparisons, overrides, Alone::Skip)
}

/// Whether each row's prompt is also simulated alone (a fit scoring candidate constants has
/// no use for it, and it costs a run a row).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Alone {
    Simulate,
    Skip,
}

fn predict_rows_with(
    catalog: &Catalog,
    comparisons: &[Comparison],
    overrides: &[EngineProfile],
    alone: Alone,
) -> (Vec<ComparedRow>, SkipReasons) {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Result<ComparedRow, String>)>> = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(comparison) = comparisons.get(index) else {
                    break;
                };
                let result = predict_row(catalog, comparison, overrides, alone);
                if let Ok(mut results) = results.lock() {
                    results.push((index, result));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|(index, _)| *index);
    let mut rows = Vec::new();
    let mut failed = SkipReasons::default();
    for (_, result) in results {
        match result {
            Ok(row) => rows.push(row),
            Err(reason) => failed.add(reason),
        }
    }
    (rows, failed)
}

fn predict_row(
    catalog: &Catalog,
    comparison: &Comparison,
    overrides: &[EngineProfile],
    alone: Alone,
) -> Result<ComparedRow, String> {
    let profile = overrides
        .iter()
        .find(|p| p.name == comparison.deployment.engine);
    let simulated =
        comparison
            .deployment
            .simulate(catalog, comparison.arrivals, comparison.sample, profile)?;
    let level = &simulated.level;
    let predicted = RowOutcome {
        ttft_s: Some(level.ttft.mean),
        tpot_s: level.tpot.map(|t| t.mean),
        e2e_s: Some(level.e2e.mean),
        output_tokens_per_s: Some(level.output_tokens_per_s),
    };
    let users = match comparison.arrivals {
        Arrivals::Closed { users } => Some(users),
        Arrivals::Open { .. } | Arrivals::Paced { .. } => None,
    };
    let predicted_alone_ttft_s = (alone == Alone::Simulate)
        .then(|| {
            comparison
                .deployment
                .simulate(
                    catalog,
                    Arrivals::Closed { users: 1 },
                    LevelSample::alone(),
                    profile,
                )
                .ok()
                .map(|alone| alone.level.ttft.mean)
        })
        .flatten();
    Ok(ComparedRow {
        id: comparison.id.clone(),
        engine: comparison.group.clone(),
        subset: comparison.subset.clone(),
        model: comparison.deployment.model.clone(),
        card: comparison.deployment.card.clone(),
        tp: comparison.deployment.parallel.tp,
        load: comparison.concurrency,
        users,
        measured: comparison.measured,
        predicted,
        predicted_alone_ttft_s,
        basis: simulated.basis,
        note: comparison.note.clone(),
        sweep: comparison.sweep.clone(),
    })
}

/// The metrics a row has both a measurement and a prediction of, as relative errors.
pub fn row_errors(row: &ComparedRow) -> Vec<(&'static str, f64)> {
    let pairs = [
        ("TTFT", row.predicted.ttft_s, row.measured.ttft_s),
        ("TPOT", row.predicted.tpot_s, row.measured.tpot_s),
        ("E2E", row.predicted.e2e_s, row.measured.e2e_s),
        (
            "output tok/s",
            row.predicted.output_tokens_per_s,
            row.measured.output_tokens_per_s,
        ),
    ];
    pairs
        .into_iter()
        .filter_map(|(name, p, m)| relative_error(p?, m?).map(|e| (name, e)))
        .collect()
}

/// Scores predicted rows per engine, subset and basis class.
pub fn score_groups(rows: &[ComparedRow]) -> Vec<GroupScore> {
    let mut groups: BTreeMap<(String, String, String), Vec<&ComparedRow>> = BTreeMap::new();
    for row in rows {
        groups
            .entry((
                row.engine.clone(),
                row.subset.clone(),
                basis_class(&row.basis).to_string(),
            ))
            .or_default()
            .push(row);
    }
    let mut out = Vec::new();
    for ((engine, subset, basis_class), rows) in groups {
        let mut by_metric: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
        for row in &rows {
            for (metric, error) in row_errors(row) {
                by_metric.entry(metric).or_default().push(error);
            }
        }
        let order = ["TTFT", "TPOT", "E2E", "output tok/s"];
        let metrics = order
            .iter()
            .filter_map(|metric| {
                let errors = by_metric.get(metric)?;
                Some(MetricScore {
                    metric: metric.to_string(),
                    stats: ErrorStats::of(errors)?,
                })
            })
            .collect();
        out.push(GroupScore {
            engine,
            subset,
            basis_class,
            rows: rows.len(),
            metrics,
        });
    }
    out
}

/// Predicts and scores one source, with `overrides` replacing catalog engine profiles.
pub fn score_source(
    catalog: &Catalog,
    source: TableSource,
    overrides: &[EngineProfile],
    keep_rows: bool,
) -> SourceScore {
    let (rows, failed) =
        predict_rows_with(catalog, &source.comparisons, overrides, Alone::Simulate);
    let groups = score_groups(&rows);
    let c_star_sweeps = cstar::sweeps(&rows);
    let c_star = cstar::score(&c_star_sweeps);
    let queueing = queueing::score(&rows);
    SourceScore {
        model_class: source.model_class.to_string(),
        source: source.name,
        file: source.file,
        split: source.split,
        total_rows: source.total_rows,
        compared: rows.len(),
        skipped: source.skipped,
        failed,
        groups,
        c_star,
        c_star_by_predicted_slope: cstar::by_predicted_slope(&c_star_sweeps),
        c_star_sweeps,
        queueing,
        rows: if keep_rows { rows } else { Vec::new() },
    }
}
