//! Probe runs and imported results as capacity points at the SLO a plan asks for.
//!
//! A run measured a curve, not one number: its fit gives C* at any limits inside the measured
//! range (`fit`), with the E2E latency there, which is what converts users at another think
//! time or a request rate. Where the fit cannot answer (the run lacks the statistic asked),
//! a probe's own C* at its own SLO still stands, and `solve` checks it proves the SLO asked.

use std::path::Path;

use crate::catalog::names::find;
use crate::catalog::Catalog;
use crate::error::InputError;
use crate::fit::{fit_measured, FitSettings};
use crate::slo::Slo;
use crate::store::curve::{read_runs_under, MeasuredCurve};
use crate::store::import::ImportFormat;
use crate::store::load_capacity_dir;
use crate::store::{CapacityPoint, PointSource};

/// Capacity points from runs, and what became of the runs that gave none.
#[derive(Debug, Default)]
pub struct RunEvidence {
    pub points: Vec<CapacityPoint>,
    pub notes: Vec<String>,
}

fn source_of(curve: &MeasuredCurve) -> PointSource {
    if curve.kind == "import" {
        PointSource::Imported
    } else {
        PointSource::Measured
    }
}

/// Points from `curves` at `slo` (levels over `max_error_rate` failures do not count).
pub fn points_from_runs(
    curves: Vec<MeasuredCurve>,
    catalog: &Catalog,
    slo: &Slo,
    max_error_rate: f64,
) -> RunEvidence {
    let mut evidence = RunEvidence::default();
    for curve in curves {
        let origin = curve.origin.display().to_string();
        if curve.status.as_deref().is_some_and(|s| s != "finished") {
            evidence.notes.push(format!(
                "run {origin} is {}: finish it with `capplan probe --resume {origin}`",
                curve.status.as_deref().unwrap_or_default()
            ));
            continue;
        }
        let Some(layout) = curve.layout.clone() else {
            evidence.notes.push(format!(
                "run {origin} does not say which model and card it measured"
            ));
            continue;
        };
        let (Some(model), Some(card)) = (
            find(&catalog.models, &layout.model),
            find(&catalog.cards, &layout.card),
        ) else {
            evidence.notes.push(format!(
                "run {origin} measured {} on {}, which the catalog does not know",
                layout.model, layout.card
            ));
            continue;
        };
        if curve.batch_sweep {
            evidence.notes.push(format!(
                "run {origin} is a batch-size sweep at one concurrency (its knee is in run.json); \
                 probe C* at the knee with --batch-size to plan from it"
            ));
            continue;
        }
        if curve.levels.iter().all(|l| l.concurrency.is_none()) {
            evidence.notes.push(format!(
                "run {origin} is open-loop (request rates): its capacity is a rate, which plans in users cannot use"
            ));
            continue;
        }
        let settings = FitSettings {
            ttft_s: Some(slo.ttft_s).filter(|t| t.is_finite()),
            tpot_s: slo.tpot_s,
            e2e_s: slo.e2e_s,
            percentile: Some(slo.percentile),
            max_error_rate: Some(max_error_rate),
            think_time: None,
        };
        // A benchmark's levels are set beside predictions measured its way (see
        // `CapacityPoint::measured_by`); a probe's are the steady state predictions assume.
        let measured_by = curve.tool.clone().filter(|tool| {
            curve.kind == "import"
                && tool
                    .parse::<ImportFormat>()
                    .is_ok_and(ImportFormat::is_benchmark)
        });
        let requests_per_user = |users: f64| {
            curve
                .levels
                .iter()
                .filter_map(|l| Some((l.concurrency?, l.requests? as f64)))
                .filter(|(n, requests)| *n >= 1.0 && *requests > 0.0)
                .min_by(|a, b| (a.0 - users).abs().total_cmp(&(b.0 - users).abs()))
                .map(|(n, requests)| requests / n)
        };
        let point = |users: f64, point_slo: Slo, note: String, e2e: Option<f64>| CapacityPoint {
            model: model.name.clone(),
            card: card.name.clone(),
            interconnect: layout
                .interconnect
                .clone()
                .unwrap_or_else(|| card.interconnect.clone()),
            cards_per_node: layout.cards_per_node,
            instances_per_node: layout.instances_per_node,
            instances_per_card: layout.instances_per_card,
            tp: layout.tp,
            parallel: layout.parallel,
            // A run behind which K instances share one card measured all K at once; a
            // disaggregated deployment's users are kept per worker.
            users_per_instance: users
                / f64::from(layout.instances_per_card.max(1))
                / f64::from(layout.pd.map_or(1, |pd| pd.prefill + pd.decode)),
            pd: layout.pd,
            speculation: layout.speculation.clone(),
            slo: point_slo,
            think_time: curve.think_time,
            source: source_of(&curve),
            note: if curve.batch > 1 {
                format!("{note}; {} items per request", curve.batch)
            } else {
                note
            },
            origin: origin.clone(),
            e2e_mean_s: e2e,
            output_tokens: curve.workload().map(|w| w.output_tokens.mean()),
            engine: None,
            band: None,
            measured_by: measured_by.clone(),
            requests_per_user: measured_by.as_ref().and_then(|_| requests_per_user(users)),
        };
        let fitted = fit_measured(curve.clone(), &settings);
        match (&fitted.capacity, curve.result_c_star) {
            (Some(capacity), probed) => {
                let mut users = capacity.c_star;
                // At the very SLO the probe searched, its own verdicts (with confidence
                // intervals) outrank point estimates.
                if let (Some(probed), Some(run_slo)) = (probed, curve.slo) {
                    if run_slo == *slo {
                        users = users.min(probed);
                    }
                }
                if users < 1.0 {
                    evidence.notes.push(format!(
                        "run {origin}: no level meets the SLO asked ({})",
                        capacity.limited_by
                    ));
                    continue;
                }
                let note = format!(
                    "fitted: C* {}{} [{}, {}], {}",
                    if capacity.at_least { "≥ " } else { "" },
                    users,
                    capacity.low,
                    capacity.high,
                    capacity.limited_by
                );
                evidence
                    .points
                    .push(point(users, *slo, note, capacity.e2e_mean_s));
            }
            (None, Some(probed)) if probed >= 1.0 && curve.slo.is_some() => {
                let note = format!(
                    "the probe's C* at its own SLO (no fit at the SLO asked: {})",
                    fitted.capacity_gap.unwrap_or_default()
                );
                let run_slo = curve.slo.unwrap_or(*slo);
                evidence.points.push(point(probed, run_slo, note, None));
            }
            (None, _) => evidence.notes.push(format!(
                "run {origin}: no C* at the SLO asked: {}",
                fitted.capacity_gap.unwrap_or_default()
            )),
        }
    }
    evidence
}

/// Everything under a measurements folder that can stand behind a plan at `slo`: capacity
/// tables (CSV files at its top) and run folders below it, fitted at `slo`.
pub fn load_evidence(dir: &Path, catalog: &Catalog, slo: &Slo) -> Result<RunEvidence, InputError> {
    let mut points = load_capacity_dir(dir, catalog)?;
    let runs = points_from_runs(read_runs_under(dir)?, catalog, slo, DEFAULT_MAX_ERROR_RATE);
    points.extend(runs.points);
    Ok(RunEvidence {
        points,
        notes: runs.notes,
    })
}

/// The failures a level may have and still count, when planning: 1 %.
pub const DEFAULT_MAX_ERROR_RATE: f64 = 0.01;
