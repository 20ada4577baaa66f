//! C* for any SLO the data can speak to: the fitted latency curves inverted at the limits,
//! with an interval from the fits' residuals, held inside what the levels themselves showed.

use serde::Serialize;

use super::curve::{load_of, CurveFit};
use crate::slo::{format_seconds, Percentile};
use crate::store::steps::{Level, Metric};

/// The limits a capacity is asked at.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Limits {
    pub ttft_s: Option<f64>,
    pub tpot_s: Option<f64>,
    pub e2e_s: Option<f64>,
    pub statistic: Percentile,
    pub max_error_rate: f64,
}

impl Limits {
    fn each(&self) -> Vec<(Metric, f64)> {
        [
            (Metric::Ttft, self.ttft_s),
            (Metric::Tpot, self.tpot_s),
            (Metric::E2e, self.e2e_s),
        ]
        .into_iter()
        .filter_map(|(m, l)| Some((m, l?)))
        .filter(|(_, l)| l.is_finite())
        .collect()
    }

    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .each()
            .iter()
            .map(|(m, l)| format!("{m} ≤ {}", format_seconds(*l)))
            .collect();
        format!("{} ({})", parts.join(", "), self.statistic)
    }
}

/// The capacity a fitted curve gives at some limits.
#[derive(Debug, Clone, Serialize)]
pub struct CapacityEstimate {
    pub limits: Limits,
    /// The load (users, or requests/s for an open-loop curve) at which the fitted curves meet
    /// the first limit; for users, round down.
    pub c_star: f64,
    /// The interval: the fits' relative residuals (±2 RMS) around the curves, inside the
    /// measured bracket.
    pub low: f64,
    pub high: f64,
    /// Which limit (or the error rate) binds.
    pub limited_by: String,
    /// Highest measured level that met every limit with every lower level, and the first that
    /// did not (from the levels' own figures).
    pub measured_pass: Option<f64>,
    pub measured_fail: Option<f64>,
    /// No measured level failed: C* is at least the highest measured load.
    pub at_least: bool,
    /// Fitted mean E2E latency at C* (for converting users with think time, or a rate).
    pub e2e_mean_s: Option<f64>,
}

/// Why a capacity cannot be read from a curve.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CapacityGap {
    #[error("no {metric} {statistic} was measured (the data has: {present})")]
    Missing {
        metric: Metric,
        statistic: Percentile,
        present: String,
    },
    #[error("no limit was asked")]
    NoLimit,
}

fn present(fit: &CurveFit) -> String {
    let mut names: Vec<String> = fit
        .latency
        .iter()
        .map(|f| format!("{} {}", f.metric, f.statistic))
        .collect();
    if names.is_empty() {
        names.push("no latency".into());
    }
    names.join(", ")
}

/// Whether a level met `limits` by its own figures; `None` when it lacks one of them.
fn level_passes(level: &Level, limits: &Limits) -> Option<bool> {
    let mut pass = level.error_rate() <= limits.max_error_rate;
    for (metric, limit) in limits.each() {
        pass &= level.value(metric, limits.statistic)? <= limit;
    }
    Some(pass)
}

/// C* of `levels` (fitted as `fit`) at `limits`.
pub fn capacity_at(
    levels: &[Level],
    fit: &CurveFit,
    limits: &Limits,
) -> Result<CapacityEstimate, CapacityGap> {
    let closed = fit.load == "concurrency";
    let asked = limits.each();
    if asked.is_empty() {
        return Err(CapacityGap::NoLimit);
    }
    let mut sorted: Vec<&Level> = levels
        .iter()
        .filter(|l| load_of(l, closed).is_some())
        .collect();
    sorted.sort_by(|a, b| {
        load_of(a, closed)
            .unwrap_or(0.0)
            .total_cmp(&load_of(b, closed).unwrap_or(0.0))
    });
    let lowest = sorted
        .first()
        .and_then(|l| load_of(l, closed))
        .unwrap_or(1.0);
    let highest = sorted
        .last()
        .and_then(|l| load_of(l, closed))
        .unwrap_or(1.0);

    // The measured bracket, from the levels' own figures.
    let (mut measured_pass, mut measured_fail) = (None, None);
    for level in &sorted {
        let load = load_of(level, closed).unwrap_or(0.0);
        match level_passes(level, limits) {
            Some(true) => measured_pass = Some(load),
            Some(false) => {
                measured_fail = Some(load);
                break;
            }
            None => {}
        }
    }

    let (mut c_star, mut low, mut high) = (highest, highest, highest);
    let mut limited_by = String::from("no limit reached in the measured range");
    for (metric, limit) in &asked {
        let curve =
            fit.latency_fit(*metric, limits.statistic)
                .ok_or_else(|| CapacityGap::Missing {
                    metric: *metric,
                    statistic: limits.statistic,
                    present: present(fit),
                })?;
        let spread = 2.0 * curve.rms_relative_error;
        let at = |factor: f64| {
            curve
                .largest_within(*limit, factor, lowest, highest)
                .unwrap_or(0.0)
        };
        let (estimate, pessimistic, optimistic) =
            (at(1.0), at(1.0 + spread), at((1.0 - spread).max(0.05)));
        if estimate < c_star {
            c_star = estimate;
            limited_by = if estimate > 0.0 {
                format!(
                    "{metric} {} reaches {} at {estimate:.1}",
                    limits.statistic,
                    format_seconds(*limit)
                )
            } else {
                format!(
                    "{metric} {} is over {} already at the lowest level measured ({lowest})",
                    limits.statistic,
                    format_seconds(*limit)
                )
            };
        }
        low = low.min(pessimistic);
        high = high.min(optimistic);
    }
    // Errors are measured, not fitted: the first level over the error budget caps C*.
    if let Some(level) = sorted
        .iter()
        .find(|l| l.error_rate() > limits.max_error_rate)
    {
        let load = load_of(level, closed).unwrap_or(0.0);
        if load <= c_star {
            let below = sorted
                .iter()
                .filter_map(|l| load_of(l, closed))
                .filter(|&n| n < load)
                .fold(0.0, f64::max);
            c_star = below;
            limited_by = format!(
                "{:.1} % errors at {load} (limit {:.1} %)",
                level.error_rate() * 100.0,
                limits.max_error_rate * 100.0
            );
        }
        high = high.min(load);
        low = low.min(c_star);
    }
    // What was measured outranks the fit.
    if let Some(pass) = measured_pass {
        c_star = c_star.max(pass);
        low = low.max(pass);
    }
    if let Some(fail) = measured_fail {
        c_star = c_star.min(fail);
        high = high.min(fail);
    }
    low = low.min(c_star);
    high = high.max(c_star);
    if closed {
        c_star = c_star.floor();
        low = low.floor();
    }
    let e2e_mean_s = fit
        .latency_fit(Metric::E2e, Percentile::Mean)
        .map(|f| f.at(c_star.max(lowest)))
        .or_else(|| {
            // Little's law on the fitted throughput: R = N/X − Z.
            let usl = fit.throughput_fit("requests_per_s")?;
            closed.then(|| c_star / usl.at(c_star) - fit.options.think_time_s)
        });
    Ok(CapacityEstimate {
        limits: *limits,
        c_star,
        low,
        high,
        limited_by,
        measured_pass,
        measured_fail,
        at_least: measured_fail.is_none() && c_star >= highest,
        e2e_mean_s,
    })
}
