//! The simulated engine as the planner's predictor of capacity.

use std::collections::HashMap;

use crate::catalog::{Card, MemoryOptions, Model, Node};
use crate::plan::predicted::CapacityPredictor;
use crate::slo::Slo;
use crate::store::{CapacityPoint, PointSource};
use crate::workload::Workload;

use super::predict::{predict, Calibration, Layout, PredictRequest};

/// Predicts C* with [`predict`] and remembers each layout's answer (node shapes of one card
/// and link share instance layouts).
pub struct SimPredictor {
    request: PredictRequest,
    memory: MemoryOptions,
    cache: HashMap<(String, String, String, u32), Result<CapacityPoint, String>>,
    calibrations: Vec<String>,
}

impl SimPredictor {
    pub fn new(workload: Workload, slo: Slo, memory: MemoryOptions) -> SimPredictor {
        let mut request = PredictRequest::new(workload, slo);
        // A planning sweep predicts hundreds of layouts: 5 % is finer than the model's error.
        request.resolution = 0.05;
        SimPredictor {
            request,
            memory,
            cache: HashMap::new(),
            calibrations: Vec::new(),
        }
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
        let calibration = Calibration::for_card(card, &node.interconnect);
        if !self.calibrations.contains(&calibration.name) {
            self.calibrations.push(calibration.name.clone());
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
                tp,
                users_per_instance: f64::from(prediction.c_star),
                slo: self.request.slo,
                think_time: self.request.workload.think_time,
                source: PointSource::Predicted,
                note: prediction.limit.clone(),
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
            "predicted rows: simulated continuous batching, workload {}, {}, efficiency {}",
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
