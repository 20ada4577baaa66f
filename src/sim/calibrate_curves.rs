//! Calibrating the performance model on measured curves (probe runs, imports).
//!
//! A curve says more than a capacity point: at each measured concurrency the mean TTFT, TPOT
//! (or E2E, without streaming) and output throughput. The engine is simulated at the same
//! concurrencies and workload, and the efficiency factors are moved (Nelder–Mead, in log space,
//! weakly pulled to where they started) until ln(simulated / measured) is as small as it gets
//! over every level and metric. Means, not percentiles: they are what the model's step times
//! drive directly, and they are the least noisy figure a level has. Each level is simulated
//! as its client ran it ([`MeasuringClient`]): a benchmark that started every user together is
//! simulated that way, or its waves of prompts would be read as a slow card.

use argmin::core::{CostFunction, Error as ArgminError};
use serde::Serialize;

use crate::fit::simplex::minimise;

use super::calibrate::CalibratedFactors;
use super::engine::EngineOptions;
use super::measuring_client::MeasuringClient;
use super::predict::{evaluate_arrivals, evaluate_level, Calibration, Layout, PredictRequest};
use super::virtual_run::Arrivals;
use crate::slo::{Percentile, Slo};
use crate::store::steps::{Level, Metric};
use crate::workload::Workload;

/// One measured curve of one layout.
#[derive(Debug, Clone)]
pub struct CurveObservation<'a> {
    pub layout: Layout<'a>,
    pub workload: Workload,
    pub engine: EngineOptions,
    /// The card's step model the factors apply to (engine profile, operator tables).
    pub step: Calibration,
    pub levels: Vec<Level>,
    pub label: String,
    /// How the levels were measured.
    pub client: MeasuringClient,
    /// How far the engine's benchmark users fall out of step after the first wave (the
    /// profile's `out_of_step`), for a client that started them together.
    pub out_of_step: f64,
}

/// Simulated against measured at one level.
#[derive(Debug, Clone, Serialize)]
pub struct LevelComparison {
    pub run: String,
    pub concurrency: f64,
    /// (quantity, measured, simulated): `ttft`, `tpot`, `e2e` in seconds (means),
    /// `output_tokens_per_s`.
    pub figures: Vec<(String, f64, f64)>,
}

/// The figures compared at a level: mean TTFT and TPOT when streamed (else mean E2E), and
/// output throughput.
fn measured_figures(level: &Level) -> Vec<(&'static str, f64)> {
    let mut figures = Vec::new();
    let mean = |m: Metric| level.value(m, Percentile::Mean).filter(|v| *v > 0.0);
    match (mean(Metric::Ttft), mean(Metric::Tpot)) {
        (Some(ttft), Some(tpot)) => {
            figures.push(("ttft", ttft));
            figures.push(("tpot", tpot));
        }
        _ => {
            if let Some(e2e) = mean(Metric::E2e) {
                figures.push(("e2e", e2e));
            }
        }
    }
    if let Some(x) = level.output_tokens_per_s.filter(|x| *x > 0.0) {
        figures.push(("output_tokens_per_s", x));
    }
    figures
}

/// Simulates every level of `observation` under `factors`.
pub fn compare(
    observation: &CurveObservation,
    factors: &CalibratedFactors,
    seed: u64,
) -> Vec<LevelComparison> {
    let calibration =
        factors.calibration("fit", &observation.layout.interconnect, &observation.step);
    let mut request = PredictRequest::new(
        observation.workload.clone(),
        Slo {
            ttft_s: f64::INFINITY,
            tpot_s: None,
            percentile: Percentile::Mean,
            e2e_s: None,
        },
    );
    request.seed = seed;
    request.engine = observation.engine;
    let mut out = Vec::new();
    for level in &observation.levels {
        let Some(n) = level.concurrency.filter(|n| *n >= 1.0) else {
            continue;
        };
        let figures = measured_figures(level);
        if figures.is_empty() {
            continue;
        }
        let users = n.round() as u32;
        let simulated =
            match observation
                .client
                .level(users, level.requests, observation.out_of_step)
            {
                None => evaluate_level(&observation.layout, &calibration, &request, users),
                Some(sample) => evaluate_arrivals(
                    &observation.layout,
                    &calibration,
                    &request,
                    Arrivals::Closed { users },
                    sample,
                ),
            };
        let Ok(simulated) = simulated else {
            continue;
        };
        let value = |name: &str| match name {
            "ttft" => simulated.ttft.mean,
            "tpot" => simulated.tpot.as_ref().map_or(f64::NAN, |t| t.mean),
            "e2e" => simulated.e2e.mean,
            _ => simulated.output_tokens_per_s,
        };
        out.push(LevelComparison {
            run: observation.label.clone(),
            concurrency: n,
            figures: figures
                .into_iter()
                .map(|(name, measured)| (name.to_string(), measured, value(name)))
                .collect(),
        });
    }
    out
}

/// Median |simulated / measured − 1| over every figure.
pub fn median_error(comparisons: &[LevelComparison]) -> f64 {
    let mut errors: Vec<f64> = comparisons
        .iter()
        .flat_map(|c| c.figures.iter())
        .filter(|(_, m, s)| m.is_finite() && s.is_finite() && *m > 0.0)
        .map(|(_, m, s)| (s / m - 1.0).abs())
        .collect();
    if errors.is_empty() {
        return f64::NAN;
    }
    errors.sort_by(f64::total_cmp);
    errors[errors.len() / 2]
}

struct Problem<'a> {
    observations: &'a [CurveObservation<'a>],
    start: CalibratedFactors,
    prior_weight: f64,
}

fn squared_log_error(comparisons: &[LevelComparison]) -> f64 {
    comparisons
        .iter()
        .flat_map(|c| c.figures.iter())
        .map(|(_, m, s)| {
            if s.is_finite() && *s > 0.0 {
                (s / m).ln().powi(2)
            } else {
                25.0
            }
        })
        .sum()
}

impl CostFunction for Problem<'_> {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, p: &Self::Param) -> Result<Self::Output, ArgminError> {
        let factors = self.start.with_log(p);
        let fit: f64 = self
            .observations
            .iter()
            .map(|o| squared_log_error(&compare(o, &factors, 1)))
            .sum();
        let start = self.start.to_log();
        let prior: f64 = p.iter().zip(&start).map(|(a, b)| (a - b).powi(2)).sum();
        Ok(fit + self.prior_weight * prior)
    }
}

/// The fitted factors, with every level compared before and after.
#[derive(Debug, Clone, Serialize)]
pub struct CurveCalibration {
    pub factors: CalibratedFactors,
    pub before: Vec<LevelComparison>,
    pub after: Vec<LevelComparison>,
    pub median_error_before: f64,
    pub median_error_after: f64,
    pub evaluations: u64,
}

/// Fits the factors to `observations`, from `start`.
pub fn calibrate_curves(
    observations: &[CurveObservation],
    start: &CalibratedFactors,
    max_iterations: u64,
) -> Result<CurveCalibration, ArgminError> {
    let problem = Problem {
        observations,
        start: start.clone(),
        prior_weight: 0.01,
    };
    let origin = start.to_log();
    let minimum = minimise(problem, &origin, 0.7, 1e-4, max_iterations)?;
    let best = minimum.best.unwrap_or(origin);
    let factors = start.with_log(&best);
    let all = |f: &CalibratedFactors| -> Vec<LevelComparison> {
        observations.iter().flat_map(|o| compare(o, f, 1)).collect()
    };
    let (before, after) = (all(start), all(&factors));
    Ok(CurveCalibration {
        median_error_before: median_error(&before),
        median_error_after: median_error(&after),
        factors,
        before,
        after,
        evaluations: minimum.iterations,
    })
}
