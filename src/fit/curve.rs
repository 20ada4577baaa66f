//! Fitting a measured curve: throughput with the USL, every latency statistic with the hinge,
//! and the levels that must not be used as they are, flagged with the reason.

use serde::Serialize;

use super::latency::{fit_latency, LatencyFit};
use super::usl::{fit_usl, UslFit};
use crate::slo::Percentile;
use crate::store::steps::{Level, Metric};

/// What the fit may assume.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FitOptions {
    /// Levels with more failures than this are left out of latency fits.
    pub max_error_rate: f64,
    /// Mean think time of the measured users, seconds (Little's law check).
    pub think_time_s: f64,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            max_error_rate: 0.01,
            think_time_s: 0.0,
        }
    }
}

/// A throughput quantity and its USL fit.
#[derive(Debug, Clone, Serialize)]
pub struct ThroughputFit {
    /// `requests_per_s` or `output_tokens_per_s`.
    pub quantity: &'static str,
    pub usl: UslFit,
}

/// A level the fit did not take as it is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Flag {
    pub load: f64,
    pub reason: String,
    /// `latency`, `throughput`, or nothing (a warning only).
    pub excluded_from: Vec<&'static str>,
}

/// Everything fitted on one curve.
#[derive(Debug, Clone, Serialize)]
pub struct CurveFit {
    /// `concurrency` (closed loop) or `rate` (open loop).
    pub load: &'static str,
    pub options: FitOptions,
    pub throughput: Vec<ThroughputFit>,
    pub latency: Vec<LatencyFit>,
    pub flags: Vec<Flag>,
}

impl CurveFit {
    pub fn latency_fit(&self, metric: Metric, statistic: Percentile) -> Option<&LatencyFit> {
        self.latency
            .iter()
            .find(|f| f.metric == metric && f.statistic == statistic)
    }

    pub fn throughput_fit(&self, quantity: &str) -> Option<&UslFit> {
        self.throughput
            .iter()
            .find(|t| t.quantity == quantity)
            .map(|t| &t.usl)
    }

    /// Whether `load` was left out of `what` (`latency` or `throughput`).
    pub fn excluded(&self, load: f64, what: &str) -> bool {
        self.flags
            .iter()
            .any(|f| f.load == load && f.excluded_from.contains(&what))
    }
}

/// The load of a level on the curve's axis.
pub fn load_of(level: &Level, closed: bool) -> Option<f64> {
    if closed {
        level.concurrency
    } else {
        level.rate
    }
}

/// Relative residual beyond which a throughput point is an outlier: four times the fit's
/// typical error, and at least 15 % (measurement noise of a short level).
fn outlier(residual: f64, rms: f64) -> bool {
    residual.abs() > (4.0 * rms).max(0.15)
}

/// Fits `levels` (one curve: all closed loop or all open loop).
pub fn fit_curve(levels: &[Level], options: FitOptions) -> CurveFit {
    let closed = levels.iter().any(|l| l.concurrency.is_some());
    let mut flags: Vec<Flag> = Vec::new();
    let mut flag = |load: f64, reason: String, excluded_from: Vec<&'static str>| {
        if let Some(existing) = flags.iter_mut().find(|f| f.load == load) {
            existing.reason = format!("{}; {reason}", existing.reason);
            for what in excluded_from {
                if !existing.excluded_from.contains(&what) {
                    existing.excluded_from.push(what);
                }
            }
        } else {
            flags.push(Flag {
                load,
                reason,
                excluded_from,
            });
        }
    };

    for level in levels {
        let Some(load) = load_of(level, closed) else {
            continue;
        };
        let errors = level.error_rate();
        if errors > options.max_error_rate {
            flag(
                load,
                format!(
                    "{:.1} % of requests failed (more than {:.1} %): the survivors' latencies understate the server's",
                    errors * 100.0,
                    options.max_error_rate * 100.0
                ),
                vec!["latency"],
            );
        }
        // Little's law: a closed loop of N users keeps X·(R + Z) = N in flight or thinking.
        if closed {
            if let (Some(x), Some(r)) = (
                level.requests_per_s,
                level.value(Metric::E2e, Percentile::Mean),
            ) {
                let held = x * (r + options.think_time_s);
                if (held / load - 1.0).abs() > 0.25 {
                    flag(
                        load,
                        format!(
                            "Little's law: throughput × (E2E + think time) = {held:.0} users, not {load:.0} — the level did not hold its concurrency (a fixed request count drained at the end, or the client was the limit)"
                        ),
                        Vec::new(),
                    );
                }
            }
        }
    }

    let mut throughput = Vec::new();
    if closed {
        for (quantity, value) in [
            (
                "requests_per_s",
                (|l: &Level| l.requests_per_s) as fn(&Level) -> Option<f64>,
            ),
            ("output_tokens_per_s", |l: &Level| l.output_tokens_per_s),
        ] {
            let points: Vec<(f64, f64)> = levels
                .iter()
                .filter_map(|l| Some((l.concurrency?, value(l)?)))
                .collect();
            let Some(first) = fit_usl(&points) else {
                continue;
            };
            // One round of outlier removal: a point far off a good fit is flagged, not used.
            let outliers: Vec<(f64, f64)> = points
                .iter()
                .copied()
                .filter(|&(n, x)| outlier((first.at(n) - x) / x, first.rms_relative_error))
                .collect();
            let usl = if outliers.is_empty() || points.len() - outliers.len() < 3 {
                first
            } else {
                let kept: Vec<(f64, f64)> = points
                    .iter()
                    .copied()
                    .filter(|p| !outliers.contains(p))
                    .collect();
                let refit = fit_usl(&kept).unwrap_or(first);
                for &(n, x) in &outliers {
                    flag(
                        n,
                        format!(
                            "{quantity} {x:.3} is {:+.0} % off the fitted curve ({:.3})",
                            (x / refit.at(n) - 1.0) * 100.0,
                            refit.at(n)
                        ),
                        vec!["throughput"],
                    );
                }
                refit
            };
            throughput.push(ThroughputFit { quantity, usl });
        }
    }

    let mut latency = Vec::new();
    for metric in Metric::ALL {
        let mut statistics: Vec<Percentile> = Vec::new();
        for level in levels {
            for statistic in level
                .stats(metric)
                .map(|s| s.statistics())
                .unwrap_or_default()
            {
                if !statistics.contains(&statistic) {
                    statistics.push(statistic);
                }
            }
        }
        for statistic in statistics {
            let points: Vec<(f64, f64)> = levels
                .iter()
                .filter(|l| {
                    load_of(l, closed).is_some_and(|n| {
                        !flags
                            .iter()
                            .any(|f| f.load == n && f.excluded_from.contains(&"latency"))
                    })
                })
                .filter_map(|l| Some((load_of(l, closed)?, l.value(metric, statistic)?)))
                .collect();
            if let Some(fit) = fit_latency(metric, statistic, &points) {
                latency.push(fit);
            }
        }
    }
    flags.sort_by(|a, b| a.load.total_cmp(&b.load));
    CurveFit {
        load: if closed { "concurrency" } else { "rate" },
        options,
        throughput,
        latency,
        flags,
    }
}
