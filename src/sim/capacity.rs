//! The simulated engine as the planner's predictor of capacity.

use std::collections::HashMap;
use std::sync::Arc;

use super::engine::EngineOptions;
use crate::catalog::band::{c_star_range, ErrorBand};
use crate::catalog::operators::OperatorLibrary;
use crate::catalog::{Card, EngineProfile, MemoryOptions, Model, Node};
use crate::plan::predicted::CapacityPredictor;
use crate::slo::Slo;
use crate::store::{CapacityPoint, PointSource};
use crate::workload::Workload;

use super::calibration_file::Calibrations;
use super::predict::{predict, predict_rate, Layout, PredictRequest, RateSearch};

/// Predicts C* with [`predict`] and remembers each layout's answer (node shapes of one card
/// and link share instance layouts).
pub struct SimPredictor {
    request: PredictRequest,
    memory: MemoryOptions,
    cache: HashMap<(String, String, String, u32), Result<CapacityPoint, String>>,
    calibrations: Vec<String>,
    /// What each card's step times rested on (card, basis), in the order first used.
    bases: Vec<(String, String)>,
    /// Calibrations from measurements/calibrations, by card.
    stored: Calibrations,
    /// Requests arrive as a Poisson process (a demand in requests/s), not from closed-loop
    /// users: predict the highest rate, R*.
    open_loop: bool,
    /// The engine profile modelled and the operator timings available (none: the generic
    /// scheduler on the roofline).
    engine: Option<(EngineProfile, Arc<OperatorLibrary>)>,
    /// Error bands measured by `capplan validate`, for each prediction's range.
    bands: Vec<ErrorBand>,
}

impl SimPredictor {
    pub fn new(
        workload: Workload,
        slo: Slo,
        memory: MemoryOptions,
        calibrations: Calibrations,
    ) -> SimPredictor {
        let mut request = PredictRequest::new(workload, slo);
        // A planning sweep predicts hundreds of layouts: 5 % is finer than the model's error.
        request.resolution = 0.05;
        SimPredictor {
            request,
            memory,
            cache: HashMap::new(),
            calibrations: Vec::new(),
            bases: Vec::new(),
            stored: calibrations,
            open_loop: false,
            engine: None,
            bands: Vec::new(),
        }
    }

    /// Models `engine`'s scheduler and overheads, timing kernels from `operators` where the
    /// card has them.
    pub fn with_engine(
        mut self,
        engine: EngineProfile,
        operators: Arc<OperatorLibrary>,
    ) -> SimPredictor {
        self.request.engine = EngineOptions::from_profile(&engine);
        self.engine = Some((engine, operators));
        self
    }

    /// Gives every predicted C* the range `bands` put the measured one in.
    pub fn with_bands(mut self, bands: Vec<ErrorBand>) -> SimPredictor {
        self.bands = bands;
        self
    }

    /// For a demand in requests per second: each instance's capacity is the highest Poisson
    /// arrival rate it holds within the SLO (bursts make that lower than closed-loop users at
    /// C* would send). The point carries the requests in flight and the E2E latency at R*, so
    /// Little's law gives R* back exactly.
    pub fn open_loop(mut self) -> SimPredictor {
        self.open_loop = true;
        self
    }
}

impl CapacityPredictor for SimPredictor {
    fn predict(
        &mut self,
        model: &Model,
        card: &Card,
        node: &Node,
        tp: u32,
    ) -> Result<CapacityPoint, String> {
        let key = (
            model.name.clone(),
            card.name.clone(),
            node.interconnect.clone(),
            tp,
        );
        if let Some(known) = self.cache.get(&key) {
            return known.clone();
        }
        let layout = Layout {
            model,
            card,
            interconnect: node.interconnect.clone(),
            tp,
            memory: self.memory,
        };
        let mut request = self.request.clone();
        if let Some((engine, _)) = &self.engine {
            request.engine = EngineOptions::for_card(engine, card);
        }
        let calibration = match &self.engine {
            Some((engine, operators)) => {
                self.stored
                    .for_engine(card, &node.interconnect, engine, operators)
            }
            None => self.stored.for_card(card, &node.interconnect),
        };
        let engine_name = self.engine.as_ref().map(|(engine, _)| engine.name.clone());
        if !self.bases.iter().any(|(name, _)| *name == card.name) {
            if let Ok((engine, _)) =
                super::predict::engine_for(&layout, &calibration, &request.engine, false)
            {
                let basis = super::predict::step_basis(&engine, &calibration);
                self.bases.push((card.name.clone(), basis));
            }
        }
        if !self.calibrations.contains(&calibration.name) {
            self.calibrations.push(calibration.name.clone());
        }
        if self.open_loop {
            let answer = match predict_rate(&layout, &calibration, &request, &RateSearch::Auto) {
                Err(rejected) => Err(rejected.reason),
                Ok(prediction) => match prediction.rate_star {
                    Some(rate) if rate.rate > 0.0 => {
                        let e2e = prediction
                            .curve
                            .iter()
                            .find(|level| level.offered_rate == Some(rate.rate))
                            .map(|level| level.e2e.mean);
                        Ok(CapacityPoint {
                            model: model.name.clone(),
                            card: card.name.clone(),
                            interconnect: node.interconnect.clone(),
                            cards_per_node: None,
                            instances_per_node: None,
                            instances_per_card: 1,
                            tp,
                            users_per_instance: rate.mean_in_flight,
                            slo: self.request.slo,
                            think_time: crate::workload::ThinkTime::NONE,
                            source: PointSource::Predicted,
                            note: format!(
                                "Poisson arrivals: R* {:.3} requests/s; {}",
                                rate.rate, prediction.limit
                            ),
                            e2e_mean_s: e2e,
                            output_tokens: Some(self.request.workload.output_tokens.mean()),
                            engine: engine_name.clone(),
                            band: None,
                            origin: format!(
                                "predicted R* [{:.3}, {}], {}",
                                rate.last_pass,
                                rate.first_fail
                                    .map_or_else(|| "no fail".to_string(), |f| format!("{f:.3}")),
                                calibration.name
                            ),
                        })
                    }
                    _ => Err(format!("predicted R* is 0 ({})", prediction.limit)),
                },
            };
            self.cache.insert(key, answer.clone());
            return answer;
        }
        let answer = match predict(&layout, &calibration, &request) {
            Err(rejected) => Err(rejected.reason),
            Ok(prediction) if prediction.c_star == 0 => {
                Err(format!("predicted C* is 0 ({})", prediction.limit))
            }
            Ok(prediction) => Ok(CapacityPoint {
                band: c_star_range(
                    &self.bands,
                    engine_name.as_deref().unwrap_or("generic"),
                    &prediction.basis,
                    f64::from(prediction.c_star),
                ),
                model: model.name.clone(),
                card: card.name.clone(),
                interconnect: node.interconnect.clone(),
                cards_per_node: None,
                instances_per_node: None,
                instances_per_card: 1,
                tp,
                users_per_instance: f64::from(prediction.c_star),
                slo: self.request.slo,
                think_time: self.request.workload.think_time,
                source: PointSource::Predicted,
                note: prediction.limit.clone(),
                e2e_mean_s: prediction
                    .curve
                    .iter()
                    .find(|level| level.concurrency == prediction.c_star)
                    .map(|level| level.e2e.mean),
                output_tokens: Some(self.request.workload.output_tokens.mean()),
                engine: engine_name.clone(),

                origin: format!(
                    "predicted [{}, {}], {}",
                    prediction.last_pass,
                    prediction
                        .first_fail
                        .map_or_else(|| "no fail".to_string(), |f| f.to_string()),
                    calibration.name
                ),
            }),
        };
        self.cache.insert(key, answer.clone());
        answer
    }

    fn assumptions(&self) -> String {
        let engine = match &self.engine {
            Some((engine, _)) => format!("engine profile {}", engine.summary()),
            None => "a generic scheduler".to_string(),
        };
        let mut bases: Vec<String> = Vec::new();
        for (card, basis) in &self.bases {
            bases.push(format!("{card}: {basis}"));
        }
        format!(
            "predicted rows: simulated continuous batching, {engine}, {}, workload {}, {}, efficiency {}; step times — {}",
            if self.open_loop {
                "Poisson arrivals (R*)"
            } else {
                "closed-loop users (C*)"
            },
            self.request.workload,
            self.request.slo.describe(),
            if self.calibrations.is_empty() {
                "defaults (uncalibrated)".to_string()
            } else {
                self.calibrations.join(", ")
            },
            if bases.is_empty() {
                "none predicted".to_string()
            } else {
                bases.join("; ")
            }
        )
    }
}
