//! The simulated engine as the planner's predictor of capacity.

use std::collections::HashMap;

use crate::catalog::{Card, MemoryOptions, Model, Node};
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
    /// Calibrations from measurements/calibrations, by card.
    stored: Calibrations,
    /// Requests arrive as a Poisson process (a demand in requests/s), not from closed-loop
    /// users: predict the highest rate, R*.
    open_loop: bool,
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
            stored: calibrations,
            open_loop: false,
        }
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
        let calibration = self.stored.for_card(card, &node.interconnect);
        if !self.calibrations.contains(&calibration.name) {
            self.calibrations.push(calibration.name.clone());
        }
        if self.open_loop {
            let answer = match predict_rate(&layout, &calibration, &self.request, &RateSearch::Auto)
            {
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
        let answer = match predict(&layout, &calibration, &self.request) {
            Err(rejected) => Err(rejected.reason),
            Ok(prediction) if prediction.c_star == 0 => {
                Err(format!("predicted C* is 0 ({})", prediction.limit))
            }
            Ok(prediction) => Ok(CapacityPoint {
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
        format!(
            "predicted rows: simulated continuous batching, {}, workload {}, {}, efficiency {}",
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
            }
        )
    }
}
