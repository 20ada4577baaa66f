//! Does a step meet the SLO? Pass, fail, or not sure yet.
//!
//! A percentile is judged with a distribution-free 95 % confidence interval from order
//! statistics: with n samples the q-quantile lies, with 95 % confidence, between the sorted
//! values at ranks n·q ∓ 1.96·√(n·q·(1−q)). The step passes a limit when the interval's upper
//! end is within it, fails when the lower end is beyond it, and is inconclusive otherwise — then
//! it gets more samples rather than a coin flip. The mean uses mean ± 1.96·s/√n. The error rate
//! fails when the Wilson interval's lower end exceeds the allowed rate.

use serde::Serialize;

use crate::slo::{format_seconds, Percentile, Slo};
use crate::stats::quantile_sorted;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    Inconclusive,
}

impl Verdict {
    fn and(self, other: Verdict) -> Verdict {
        match (self, other) {
            (Verdict::Fail, _) | (_, Verdict::Fail) => Verdict::Fail,
            (Verdict::Inconclusive, _) | (_, Verdict::Inconclusive) => Verdict::Inconclusive,
            _ => Verdict::Pass,
        }
    }
}

/// The judgement of one limit.
#[derive(Debug, Clone, Serialize)]
pub struct LimitCheck {
    pub metric: String,
    pub limit: f64,
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    pub samples: usize,
    pub verdict: Verdict,
}

/// The judgement of a step.
#[derive(Debug, Clone, Serialize)]
pub struct StepVerdict {
    pub verdict: Verdict,
    pub checks: Vec<LimitCheck>,
}

impl StepVerdict {
    /// How close the step came to its limits: the largest estimate over its limit among the
    /// latency checks (above 1 breaks the SLO); `None` without a latency check.
    pub fn load(&self) -> Option<f64> {
        self.checks
            .iter()
            .filter(|c| c.metric != "errors" && c.limit > 0.0 && c.estimate.is_finite())
            .map(|c| c.estimate / c.limit)
            .reduce(f64::max)
    }

    /// Whether the step failed only by `delay` seconds added to every TTFT and E2E: each broken
    /// limit is on one of those and would not be confidently broken with the delay taken off.
    /// A broken TPOT or error-rate limit is never explained this way.
    pub fn fails_within(&self, delay: f64) -> bool {
        let broken: Vec<&LimitCheck> = self
            .checks
            .iter()
            .filter(|c| c.verdict == Verdict::Fail)
            .collect();
        delay > 0.0
            && self.verdict == Verdict::Fail
            && !broken.is_empty()
            && broken.iter().all(|c| {
                (c.metric.starts_with("TTFT") || c.metric.starts_with("E2E"))
                    && c.low - delay <= c.limit
            })
    }

    /// `TTFT p90 1.2 s [1.1, 1.3] ≤ 3 s; …` for the failing or uncertain limits.
    pub fn explain(&self) -> String {
        self.checks
            .iter()
            .filter(|c| c.verdict != Verdict::Pass)
            .map(|c| {
                let show = |v: f64| {
                    if c.metric == "errors" {
                        format!("{:.1} %", v * 100.0)
                    } else {
                        format_seconds(v)
                    }
                };
                format!(
                    "{} {} [{}, {}] vs {} ({:?})",
                    c.metric,
                    show(c.estimate),
                    show(c.low),
                    show(c.high),
                    show(c.limit),
                    c.verdict
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

const Z: f64 = 1.96;

/// Estimate and 95 % interval of `statistic` over `values`.
pub fn interval(values: &[f64], statistic: Percentile) -> Option<(f64, f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as f64;
    match statistic {
        Percentile::Mean => {
            let mean = values.iter().sum::<f64>() / n;
            if values.len() < 2 {
                return Some((mean, f64::NEG_INFINITY, f64::INFINITY));
            }
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
            let half = Z * (var / n).sqrt();
            Some((mean, mean - half, mean + half))
        }
        Percentile::P(p) => {
            let q = p / 100.0;
            let mut sorted = values.to_vec();
            sorted.sort_by(f64::total_cmp);
            let estimate = quantile_sorted(&sorted, q);
            let centre = n * q;
            let spread = Z * (n * q * (1.0 - q)).sqrt();
            let rank = |r: f64| -> f64 {
                if r < 1.0 {
                    f64::NEG_INFINITY
                } else if r > n {
                    f64::INFINITY
                } else {
                    sorted[(r.ceil() as usize).clamp(1, sorted.len()) - 1]
                }
            };
            Some((estimate, rank(centre - spread), rank(centre + spread + 1.0)))
        }
    }
}

/// The fewest samples whose 95 % interval for `statistic` has a finite upper end (for a
/// percentile q: n(1 − q) ≥ 1.96·√(n·q(1 − q)) + 1): 53 for p90, 109 for p95, 562 for p99.
pub fn min_samples(statistic: Percentile) -> usize {
    match statistic {
        Percentile::Mean => 30,
        Percentile::P(p) => {
            let q = p / 100.0;
            let (a, b) = (1.0 - q, Z * (q * (1.0 - q)).sqrt());
            let root = (b + (b * b + 4.0 * a).sqrt()) / (2.0 * a);
            (root * root).ceil() as usize
        }
    }
}

fn check(metric: &str, values: &[f64], statistic: Percentile, limit: f64) -> LimitCheck {
    match interval(values, statistic) {
        None => LimitCheck {
            metric: format!("{metric} {statistic}"),
            limit,
            estimate: f64::NAN,
            low: f64::NAN,
            high: f64::NAN,
            samples: 0,
            verdict: Verdict::Inconclusive,
        },
        Some((estimate, low, high)) => LimitCheck {
            metric: format!("{metric} {statistic}"),
            limit,
            estimate,
            low,
            high,
            samples: values.len(),
            verdict: if high <= limit {
                Verdict::Pass
            } else if low > limit {
                Verdict::Fail
            } else {
                Verdict::Inconclusive
            },
        },
    }
}

/// Wilson score interval of a proportion.
fn wilson(failures: usize, n: usize) -> (f64, f64, f64) {
    if n == 0 {
        return (0.0, 0.0, 1.0);
    }
    let (k, n) = (failures as f64, n as f64);
    let p = k / n;
    let denominator = 1.0 + Z * Z / n;
    let centre = (p + Z * Z / (2.0 * n)) / denominator;
    let half = Z * (p * (1.0 - p) / n + Z * Z / (4.0 * n * n)).sqrt() / denominator;
    (p, (centre - half).max(0.0), (centre + half).min(1.0))
}

/// A step's counted requests: latencies of the successful ones, and how many failed.
pub struct Samples<'a> {
    pub ttfts: &'a [f64],
    pub tpots: &'a [f64],
    pub e2es: &'a [f64],
    pub failures: usize,
    pub total: usize,
}

/// Judges a step from its counted requests' latencies and failures.
pub fn judge(
    samples: &Samples,
    slo: &Slo,
    e2e_limit: Option<f64>,
    max_error_rate: f64,
) -> StepVerdict {
    // A latency-only SLO (an image service, a non-streaming API judged on E2E) has no TTFT
    // limit: no check, rather than one that can only be inconclusive on few samples.
    let mut checks = Vec::new();
    if slo.ttft_s.is_finite() {
        checks.push(check("TTFT", samples.ttfts, slo.percentile, slo.ttft_s));
    }
    if let Some(limit) = slo.tpot_s {
        checks.push(check("TPOT", samples.tpots, slo.percentile, limit));
    }
    if let Some(limit) = e2e_limit {
        checks.push(check("E2E", samples.e2es, slo.percentile, limit));
    }
    let (rate, low, high) = wilson(samples.failures, samples.total);
    checks.push(LimitCheck {
        metric: "errors".into(),
        limit: max_error_rate,
        estimate: rate,
        low,
        high,
        samples: samples.total,
        verdict: if rate <= max_error_rate {
            Verdict::Pass
        } else if low > max_error_rate {
            Verdict::Fail
        } else {
            Verdict::Inconclusive
        },
    });
    let verdict = checks.iter().fold(Verdict::Pass, |v, c| v.and(c.verdict));
    StepVerdict { verdict, checks }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::too_many_arguments)]
    fn judge(
        ttfts: &[f64],
        tpots: &[f64],
        e2es: &[f64],
        failures: usize,
        total: usize,
        slo: &Slo,
        e2e: Option<f64>,
        max_error_rate: f64,
    ) -> StepVerdict {
        let samples = Samples {
            ttfts,
            tpots,
            e2es,
            failures,
            total,
        };
        super::judge(&samples, slo, e2e, max_error_rate)
    }

    fn slo(ttft: f64) -> Slo {
        Slo {
            ttft_s: ttft,
            tpot_s: None,
            percentile: Percentile::P(90.0),
            e2e_s: None,
        }
    }

    #[test]
    fn clear_pass_clear_fail_and_a_straddle() {
        let values: Vec<f64> = (1..=500).map(|i| f64::from(i) / 500.0).collect(); // p90 ≈ 0.9
        let pass = judge(&values, &[], &values, 0, 500, &slo(1.0), None, 0.01);
        assert_eq!(pass.verdict, Verdict::Pass);
        let fail = judge(&values, &[], &values, 0, 500, &slo(0.8), None, 0.01);
        assert_eq!(fail.verdict, Verdict::Fail);
        let unsure = judge(&values, &[], &values, 0, 500, &slo(0.9), None, 0.01);
        assert_eq!(unsure.verdict, Verdict::Inconclusive);
        assert!(unsure.explain().contains("TTFT p90"));
    }

    #[test]
    fn the_interval_narrows_with_more_samples() {
        let few: Vec<f64> = (1..=50).map(|i| f64::from(i) / 50.0).collect();
        let many: Vec<f64> = (1..=5000).map(|i| f64::from(i) / 5000.0).collect();
        let (_, l1, h1) = interval(&few, Percentile::P(90.0)).unwrap();
        let (_, l2, h2) = interval(&many, Percentile::P(90.0)).unwrap();
        assert!(h2 - l2 < (h1 - l1) / 3.0);
        assert!(l2 < 0.9 && h2 > 0.9);
    }

    #[test]
    fn minimum_samples_bound_the_percentile() {
        for (p, n) in [(90.0, 53), (95.0, 109), (99.0, 562)] {
            let needed = min_samples(Percentile::P(p));
            assert!((needed as i64 - n).abs() <= 1, "p{p}: {needed}");
            let values: Vec<f64> = (1..=needed).map(|i| i as f64).collect();
            let (_, _, high) = interval(&values, Percentile::P(p)).unwrap();
            assert!(high.is_finite(), "p{p} with {needed} samples");
        }
    }

    #[test]
    fn errors_fail_a_step_only_when_clearly_too_many() {
        let ok: Vec<f64> = vec![0.1; 200];
        assert_eq!(
            judge(&ok, &[], &ok, 1, 200, &slo(1.0), None, 0.01).verdict,
            Verdict::Pass
        );
        assert_eq!(
            judge(&ok, &[], &ok, 20, 200, &slo(1.0), None, 0.01).verdict,
            Verdict::Fail
        );
        assert_eq!(
            judge(&ok, &[], &ok, 3, 200, &slo(1.0), None, 0.01).verdict,
            Verdict::Inconclusive
        );
    }

    #[test]
    fn a_fail_is_the_delivery_delays_only_when_taking_it_off_clears_every_broken_limit() {
        let slo = Slo {
            ttft_s: 1.0,
            tpot_s: Some(0.05),
            percentile: Percentile::P(90.0),
            e2e_s: None,
        };
        // 200 TTFTs from 1.1 to 1.3 s: confidently above 1 s.
        let ttfts: Vec<f64> = (0..200).map(|i| 1.1 + 0.001 * f64::from(i)).collect();
        let fast_tpots = vec![0.02; 200];
        let step = judge(&ttfts, &fast_tpots, &[], 0, 200, &slo, None, 0.01);
        assert_eq!(step.verdict, Verdict::Fail);
        // The lower end of the p90 interval is about 1.27 s: a 0.3 s delay explains it, 0.1 s not.
        assert!(step.fails_within(0.3));
        assert!(!step.fails_within(0.1));
        assert!(!step.fails_within(0.0));
        // A broken TPOT limit is the engine's whatever the delay.
        let slow_tpots = vec![0.08; 200];
        let both = judge(&ttfts, &slow_tpots, &[], 0, 200, &slo, None, 0.01);
        assert!(!both.fails_within(0.3));
    }
}
