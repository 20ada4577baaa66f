//! `capplan calibrate`: measured curves grouped by card, each card's efficiency factors fitted
//! on all of its curves at once (one card, several models and layouts, constrain the factors
//! better than one curve can).

use serde::Serialize;

use super::calibrate::CalibratedFactors;
use super::calibrate_curves::{calibrate_curves, CurveCalibration, CurveObservation};
use super::calibration_file::StoredCalibration;
use super::engine::EngineOptions;
use super::measuring_client::MeasuringClient;
use super::predict::{Calibration, Layout};
use crate::catalog::memory::MemoryOptions;
use crate::catalog::names::find;
use crate::catalog::{Catalog, EngineProfile};
use crate::store::curve::MeasuredCurve;
use crate::workload::Speculation;

/// One card's calibration and what it was fitted on.
#[derive(Debug, Clone, Serialize)]
pub struct CardCalibration {
    pub card: String,
    pub start: CalibratedFactors,
    pub fit: CurveCalibration,
    pub runs: Vec<String>,
    /// How each run's levels were measured (as simulated), beside `runs`.
    pub measured_by: Vec<String>,
}

impl CardCalibration {
    pub fn stored(&self, created_utc: String) -> StoredCalibration {
        StoredCalibration {
            card: self.card.clone(),
            factors: self.fit.factors.clone(),
            fitted_on: self.runs.clone(),
            levels: self.fit.after.len(),
            median_error_before: self.fit.median_error_before,
            median_error_after: self.fit.median_error_after,
            created_utc,
        }
    }
}

/// What `calibrate` made of its input.
#[derive(Debug, Clone, Serialize)]
pub struct CalibrateOutcome {
    pub cards: Vec<CardCalibration>,
    /// Curves left out, and why.
    pub skipped: Vec<String>,
}

/// Calibrates every card that `curves` measured.
pub fn calibrate_runs(
    curves: &[MeasuredCurve],
    catalog: &Catalog,
    engine: &EngineProfile,
    max_iterations: u64,
) -> anyhow::Result<CalibrateOutcome> {
    let mut skipped = Vec::new();
    let mut by_card: Vec<(String, Vec<CurveObservation>)> = Vec::new();
    for curve in curves {
        let origin = curve.origin.display().to_string();
        let Some(layout) = &curve.layout else {
            skipped.push(format!("{origin}: no model and card recorded"));
            continue;
        };
        let (Some(model), Some(card)) = (
            find(&catalog.models, &layout.model),
            find(&catalog.cards, &layout.card),
        ) else {
            skipped.push(format!(
                "{origin}: {} on {} is not in the catalog",
                layout.model, layout.card
            ));
            continue;
        };
        if curve.levels.iter().all(|l| l.concurrency.is_none()) {
            skipped.push(format!(
                "{origin}: open-loop levels (rates) are not used yet"
            ));
            continue;
        }
        let Some(workload) = curve.workload() else {
            skipped.push(format!(
                "{origin}: neither its recorded lengths nor mean token counts are known"
            ));
            continue;
        };
        // A curve is compared with one simulated engine behind the URL; a deployment of
        // several workers, or several instances sharing a card, is not that engine.
        if let Some(split) = layout.pd {
            skipped.push(format!(
                "{origin}: a disaggregated deployment ({split}) is not used to calibrate yet \
                 (one aggregated instance per curve)"
            ));
            continue;
        }
        if layout.instances_per_card > 1 {
            skipped.push(format!(
                "{origin}: {} instances share each card; only one instance per card is used \
                 to calibrate",
                layout.instances_per_card
            ));
            continue;
        }
        let interconnect = layout
            .interconnect
            .clone()
            .unwrap_or_else(|| card.interconnect.clone());
        let step = Calibration::for_engine(card, &interconnect, engine, &catalog.operators);
        // The instance as it ran: its parallelism on the node shape it names (or the largest
        // of the card's), the drafter's weights beside the model's.
        let node = catalog
            .nodes_of(card)
            .filter(|n| {
                layout
                    .cards_per_node
                    .is_none_or(|cards| n.cards_per_node == cards)
            })
            .max_by_key(|n| n.cards_per_node);
        let observation = CurveObservation {
            layout: Layout {
                interconnect,
                memory: MemoryOptions {
                    memory_utilization: engine.memory_utilization,
                    drafter: Speculation::draft_weights_of(workload.speculation.as_ref()),
                    ..MemoryOptions::default()
                },
                ..Layout::on_card(model, card, layout.tp)
            }
            .with_parallel(layout.parallel, node),
            workload,
            engine: EngineOptions::for_card(engine, card),
            step,
            levels: curve.levels.clone(),
            label: origin,
            client: MeasuringClient::of_tool(curve.tool.as_deref()),
            out_of_step: engine.out_of_step,
        };
        match by_card.iter_mut().find(|(name, _)| *name == card.name) {
            Some((_, list)) => list.push(observation),
            None => by_card.push((card.name.clone(), vec![observation])),
        }
    }
    let mut cards = Vec::new();
    for (name, observations) in by_card {
        let Some(card) = find(&catalog.cards, &name) else {
            continue;
        };
        let mut links: Vec<String> = observations
            .iter()
            .map(|o| o.layout.interconnect.clone())
            .collect();
        links.sort();
        links.dedup();
        let base = Calibration::for_engine(card, &card.interconnect, engine, &catalog.operators);
        let start = CalibratedFactors::from_defaults(&base.efficiency, &links);
        let fit = calibrate_curves(&observations, &start, max_iterations)
            .map_err(|err| anyhow::anyhow!("calibrating {name}: {err}"))?;
        cards.push(CardCalibration {
            card: name,
            start,
            fit,
            runs: observations.iter().map(|o| o.label.clone()).collect(),
            measured_by: observations
                .iter()
                .map(|o| o.client.describe().to_string())
                .collect(),
        });
    }
    Ok(CalibrateOutcome { cards, skipped })
}
