//! Calibrating the performance model's efficiency factors from measured capacity.
//!
//! Each observation is a layout that was measured to hold `concurrency` users within an SLO:
//! simulated at that concurrency, its limiting metric (the larger of TTFT / limit and
//! TPOT / limit) should sit at 1. The factors are fitted in log space with Nelder–Mead
//! (argmin) to make that true for all observations at once, with a weak pull towards the
//! defaults so that factors the data cannot see stay where they were. The objective is
//! continuous in the factors, unlike C* itself (an integer found by a search), which would
//! leave a simplex method on flat ground.

use std::collections::BTreeMap;

use argmin::core::{CostFunction, Error as ArgminError};
use serde::Serialize;

use crate::fit::simplex::minimise;

use super::engine::EngineOptions;
use super::perf::{default_hop_latency_us, Efficiency};
use super::predict::{evaluate_level, Calibration, Layout, PredictRequest};
use crate::slo::Slo;
use crate::workload::Workload;

/// A measured capacity: `layout` held `concurrency` users of `workload` within `slo`.
#[derive(Debug, Clone)]
pub struct Observation<'a> {
    pub layout: Layout<'a>,
    pub workload: Workload,
    pub slo: Slo,
    /// The engine's scheduler settings when it was measured.
    pub engine: EngineOptions,
    /// The card's step model the factors apply to (engine profile, operator tables).
    pub step: Calibration,
    pub concurrency: u32,
    pub label: String,
}

/// Efficiency factors shared by all cards, with one all-reduce hop latency per kind of link.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct CalibratedFactors {
    pub compute: f64,
    pub memory: f64,
    pub link: f64,
    pub step_overhead_ms: f64,
    pub seq_overhead_ms: f64,
    pub hop_latency_us: BTreeMap<String, f64>,
    /// Multiplier on measured operator timings (cards with operator tables); 1 in
    /// calibrations written before it existed.
    #[serde(default = "unit")]
    pub operator_scale: f64,
    /// The engine profile's eager-step and per-request overheads, carried through (not fitted).
    #[serde(default)]
    pub eager_layer_overhead_us: f64,
    #[serde(default)]
    pub request_overhead_ms: f64,
    #[serde(default)]
    pub moe_layer_overhead_us: f64,
    #[serde(default)]
    pub handoff_ms: f64,
}

fn unit() -> f64 {
    1.0
}

impl CalibratedFactors {
    /// The factors of `efficiency`, with its hop latency for every link kind in `links`.
    pub fn from_defaults(efficiency: &Efficiency, links: &[String]) -> CalibratedFactors {
        CalibratedFactors {
            compute: efficiency.compute,
            memory: efficiency.memory,
            link: efficiency.link,
            step_overhead_ms: efficiency.step_overhead_ms,
            seq_overhead_ms: efficiency.seq_overhead_ms,
            operator_scale: efficiency.operator_scale,
            eager_layer_overhead_us: efficiency.eager_layer_overhead_us,
            request_overhead_ms: efficiency.request_overhead_ms,
            moe_layer_overhead_us: efficiency.moe_layer_overhead_us,
            handoff_ms: efficiency.handoff_ms,
            hop_latency_us: links
                .iter()
                .map(|link| (link.clone(), default_hop_latency_us(link)))
                .collect(),
        }
    }

    pub fn efficiency_for(&self, interconnect: &str) -> Efficiency {
        Efficiency {
            compute: self.compute,
            memory: self.memory,
            link: self.link,
            link_latency_us: self
                .hop_latency_us
                .get(interconnect)
                .copied()
                .unwrap_or_else(|| default_hop_latency_us(interconnect)),
            step_overhead_ms: self.step_overhead_ms,
            seq_overhead_ms: self.seq_overhead_ms,
            operator_scale: self.operator_scale,
            eager_layer_overhead_us: self.eager_layer_overhead_us,
            request_overhead_ms: self.request_overhead_ms,
            moe_layer_overhead_us: self.moe_layer_overhead_us,
            handoff_ms: self.handoff_ms,
        }
    }

    /// `base` (the card's step model: engine profile, operator tables) with these factors.
    pub fn calibration(&self, name: &str, interconnect: &str, base: &Calibration) -> Calibration {
        Calibration {
            name: name.to_string(),
            efficiency: self.efficiency_for(interconnect),
            ..base.clone()
        }
    }

    pub(crate) fn to_log(&self) -> Vec<f64> {
        let mut p = vec![
            self.compute.ln(),
            self.memory.ln(),
            self.step_overhead_ms.ln(),
            self.seq_overhead_ms.ln(),
            self.operator_scale.ln(),
        ];
        p.extend(self.hop_latency_us.values().map(|v| v.ln()));
        p
    }

    pub(crate) fn with_log(&self, p: &[f64]) -> CalibratedFactors {
        let clamp = |v: f64, low: f64, high: f64| v.exp().clamp(low, high);
        let mut hop_latency_us = BTreeMap::new();
        for (index, link) in self.hop_latency_us.keys().enumerate() {
            hop_latency_us.insert(link.clone(), clamp(p[5 + index], 0.1, 100_000.0));
        }
        CalibratedFactors {
            compute: clamp(p[0], 0.01, 1.0),
            memory: clamp(p[1], 0.01, 1.0),
            link: self.link,
            step_overhead_ms: clamp(p[2], 0.01, 2_000.0),
            seq_overhead_ms: clamp(p[3], 1e-4, 200.0),
            operator_scale: clamp(p[4], 0.05, 20.0),
            eager_layer_overhead_us: self.eager_layer_overhead_us,
            request_overhead_ms: self.request_overhead_ms,
            moe_layer_overhead_us: self.moe_layer_overhead_us,
            handoff_ms: self.handoff_ms,
            hop_latency_us,
        }
    }
}

/// The fit and how well it matches its observations.
#[derive(Debug, Clone, Serialize)]
pub struct CalibrationFit {
    pub factors: CalibratedFactors,
    /// Per observation: ln(limiting metric / limit) at the observed concurrency (0 = exact).
    pub residuals: Vec<(String, f64)>,
    pub evaluations: u64,
}

/// ln of the limiting metric over its limit, for one observation under `factors`.
fn residual(observation: &Observation, factors: &CalibratedFactors, seed: u64) -> f64 {
    let calibration =
        factors.calibration("fit", &observation.layout.interconnect, &observation.step);
    let mut request = PredictRequest::new(observation.workload.clone(), observation.slo);
    request.seed = seed;
    request.engine = observation.engine;
    match evaluate_level(
        &observation.layout,
        &calibration,
        &request,
        observation.concurrency,
    ) {
        Ok(level) => {
            let slo = &observation.slo;
            let ttft = level.ttft.at(slo.percentile, None) / slo.ttft_s;
            let tpot = match (slo.tpot_s, level.tpot) {
                (Some(limit), Some(tpot)) => tpot.at(slo.percentile, None) / limit,
                _ => 0.0,
            };
            ttft.max(tpot).max(1e-6).ln()
        }
        Err(_) => 10.0,
    }
}

struct Problem<'a> {
    observations: &'a [Observation<'a>],
    start: CalibratedFactors,
    prior_weight: f64,
    seed: u64,
}

impl CostFunction for Problem<'_> {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, p: &Self::Param) -> Result<Self::Output, ArgminError> {
        let factors = self.start.with_log(p);
        let fit: f64 = self
            .observations
            .iter()
            .map(|o| residual(o, &factors, self.seed).powi(2))
            .sum();
        let start = self.start.to_log();
        let prior: f64 = p.iter().zip(&start).map(|(a, b)| (a - b).powi(2)).sum();
        Ok(fit + self.prior_weight * prior)
    }
}

/// Fits the factors to `observations`, starting from (and weakly pulled towards) `start`.
pub fn calibrate(
    observations: &[Observation],
    start: &CalibratedFactors,
    max_iterations: u64,
) -> Result<CalibrationFit, ArgminError> {
    let problem = Problem {
        observations,
        start: start.clone(),
        prior_weight: 0.01,
        seed: 1,
    };
    let origin = start.to_log();
    // A simplex of the start and one step of ×e^1 along each factor.
    let minimum = minimise(problem, &origin, 1.0, 1e-5, max_iterations)?;
    let best = minimum.best.unwrap_or(origin);
    let factors = start.with_log(&best);
    let residuals = observations
        .iter()
        .map(|o| (o.label.clone(), residual(o, &factors, 1)))
        .collect();
    Ok(CalibrationFit {
        factors,
        residuals,
        evaluations: minimum.iterations,
    })
}
