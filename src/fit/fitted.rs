//! A measured curve with its fit and the capacity it gives: what `capplan fit` reports and
//! writes to `fit.json`.

use serde::Serialize;

use super::capacity::{capacity_at, CapacityEstimate, Limits};
use super::curve::{fit_curve, CurveFit, FitOptions};
use crate::slo::Percentile;
use crate::store::curve::MeasuredCurve;
use crate::workload::ThinkTime;

/// What the user asked `fit` for; anything `None` comes from the run itself.
#[derive(Debug, Clone, Default)]
pub struct FitSettings {
    pub ttft_s: Option<f64>,
    pub tpot_s: Option<f64>,
    pub e2e_s: Option<f64>,
    pub percentile: Option<Percentile>,
    pub max_error_rate: Option<f64>,
    pub think_time: Option<ThinkTime>,
}

/// One curve, fitted.
#[derive(Debug, Clone, Serialize)]
pub struct FittedCurve {
    pub curve: MeasuredCurve,
    pub fit: CurveFit,
    /// C* at the limits asked (or the run's own SLO).
    pub capacity: Option<CapacityEstimate>,
    /// Why there is no capacity, when there is none.
    pub capacity_gap: Option<String>,
}

/// The limits: the flags where given, else the SLO the run was probed at.
fn limits(curve: &MeasuredCurve, settings: &FitSettings, max_error_rate: f64) -> Option<Limits> {
    let slo = curve.slo;
    let limits = Limits {
        ttft_s: settings
            .ttft_s
            .or(slo.map(|s| s.ttft_s).filter(|t| t.is_finite())),
        tpot_s: settings.tpot_s.or(slo.and_then(|s| s.tpot_s)),
        e2e_s: settings.e2e_s.or(curve.e2e_limit_s),
        statistic: settings
            .percentile
            .or(slo.map(|s| s.percentile))
            .unwrap_or(Percentile::P(90.0)),
        max_error_rate,
    };
    (limits.ttft_s.is_some() || limits.tpot_s.is_some() || limits.e2e_s.is_some()).then_some(limits)
}

pub fn fit_measured(curve: MeasuredCurve, settings: &FitSettings) -> FittedCurve {
    let max_error_rate = settings
        .max_error_rate
        .or(curve.max_error_rate)
        .unwrap_or(0.01);
    let think_time = settings.think_time.unwrap_or(curve.think_time);
    let options = FitOptions {
        max_error_rate,
        think_time_s: think_time.mean_s(),
    };
    let fit = fit_curve(&curve.levels, options);
    let (capacity, capacity_gap) = match limits(&curve, settings, max_error_rate) {
        Some(limits) => match capacity_at(&curve.levels, &fit, &limits) {
            Ok(estimate) => (Some(estimate), None),
            Err(gap) => (None, Some(gap.to_string())),
        },
        None => (
            None,
            Some("no SLO: give --ttft, --tpot or --e2e for a C*".into()),
        ),
    };
    FittedCurve {
        curve,
        fit,
        capacity,
        capacity_gap,
    }
}
