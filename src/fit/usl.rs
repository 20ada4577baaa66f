//! Throughput against concurrency: the Universal Scalability Law,
//! X(N) = λN / (1 + σ(N − 1) + κN(N − 1)).
//!
//! λ is the throughput of one user, σ the share of work that serialises (contention) and κ the
//! cost of keeping users coherent with each other (crosstalk), which makes throughput fall past
//! the peak N* = √((1 − σ)/κ). An LLM server fits it well: batching makes the first users
//! nearly free (σ small), memory and scheduling make the last ones expensive (κ > 0), and an
//! overloaded server that starts to fail requests delivers less (the retrograde part).
//!
//! Fitted by Nelder–Mead (argmin) on relative squared errors — every level counts alike,
//! whatever its throughput — with the parameters in log space, so they stay positive and of
//! similar scale (λ ~ 10–1000, σ ~ 1e-2, κ ~ 1e-6 would otherwise differ by 9 orders), from
//! several starting points, keeping the best.

use argmin::core::{CostFunction, Error as ArgminError};
use serde::Serialize;

/// A fitted USL curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct UslFit {
    pub lambda: f64,
    pub sigma: f64,
    pub kappa: f64,
    /// 1 − SS_res/SS_tot on the fitted points.
    pub r2: f64,
    /// Root mean square of the relative residuals.
    pub rms_relative_error: f64,
    /// Concurrency of the highest throughput, when κ > 0 and σ < 1.
    pub peak_concurrency: Option<f64>,
    pub peak_throughput: Option<f64>,
    pub points: usize,
}

impl UslFit {
    pub fn at(&self, n: f64) -> f64 {
        usl(n, self.lambda, self.sigma, self.kappa)
    }
}

fn usl(n: f64, lambda: f64, sigma: f64, kappa: f64) -> f64 {
    lambda * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
}

struct Problem<'a> {
    points: &'a [(f64, f64)],
}

impl CostFunction for Problem<'_> {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, p: &Self::Param) -> Result<Self::Output, ArgminError> {
        let (lambda, sigma, kappa) = (p[0].exp(), p[1].exp(), p[2].exp());
        Ok(self
            .points
            .iter()
            .map(|&(n, x)| ((usl(n, lambda, sigma, kappa) - x) / x).powi(2))
            .sum())
    }
}

fn minimise(points: &[(f64, f64)], start: [f64; 3]) -> Option<(Vec<f64>, f64)> {
    let minimum = super::simplex::minimise(Problem { points }, &start, 0.5, 1e-12, 3000).ok()?;
    Some((minimum.best?, minimum.cost))
}

/// Fits (concurrency, throughput) points; `None` with fewer than 3 usable points.
pub fn fit_usl(points: &[(f64, f64)]) -> Option<UslFit> {
    let points: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|&(n, x)| n > 0.0 && x > 0.0 && n.is_finite() && x.is_finite())
        .collect();
    if points.len() < 3 {
        return None;
    }
    let (n0, x0) = points.iter().copied().min_by(|a, b| a.0.total_cmp(&b.0))?;
    let lambda0 = (x0 / n0).ln();
    let mut best: Option<(Vec<f64>, f64)> = None;
    for sigma0 in [1e-3_f64, 1e-2, 1e-1] {
        for kappa0 in [1e-7_f64, 1e-5, 1e-3] {
            if let Some((p, cost)) = minimise(&points, [lambda0, sigma0.ln(), kappa0.ln()]) {
                if best.as_ref().is_none_or(|(_, c)| cost < *c) {
                    best = Some((p, cost));
                }
            }
        }
    }
    let (p, cost) = best?;
    let (lambda, sigma, kappa) = (p[0].exp(), p[1].exp(), p[2].exp());
    let mean = points.iter().map(|p| p.1).sum::<f64>() / points.len() as f64;
    let ss_tot: f64 = points.iter().map(|p| (p.1 - mean).powi(2)).sum();
    let ss_res: f64 = points
        .iter()
        .map(|&(n, x)| (usl(n, lambda, sigma, kappa) - x).powi(2))
        .sum();
    let peak_concurrency = (kappa > 1e-15 && sigma < 1.0).then(|| ((1.0 - sigma) / kappa).sqrt());
    Some(UslFit {
        lambda,
        sigma,
        kappa,
        r2: if ss_tot > 0.0 {
            1.0 - ss_res / ss_tot
        } else {
            1.0
        },
        rms_relative_error: (cost / points.len() as f64).sqrt(),
        peak_concurrency,
        peak_throughput: peak_concurrency.map(|n| usl(n, lambda, sigma, kappa)),
        points: points.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_the_parameters_of_an_exact_curve() {
        let (lambda, sigma, kappa) = (80.0, 0.01, 4e-6);
        let points: Vec<(f64, f64)> = [1.0, 8.0, 16.0, 64.0, 128.0, 256.0, 512.0, 720.0]
            .iter()
            .map(|&n| (n, usl(n, lambda, sigma, kappa)))
            .collect();
        let fit = fit_usl(&points).unwrap();
        assert!((fit.lambda - lambda).abs() / lambda < 1e-3, "{fit:?}");
        assert!((fit.sigma - sigma).abs() / sigma < 1e-2, "{fit:?}");
        assert!((fit.kappa - kappa).abs() / kappa < 1e-2, "{fit:?}");
        assert!(fit.r2 > 0.9999);
        let peak = fit.peak_concurrency.unwrap();
        assert!(
            (peak - ((1.0 - sigma) / kappa).sqrt()).abs() < 5.0,
            "{peak}"
        );
    }

    #[test]
    fn too_few_points_give_no_fit() {
        assert!(fit_usl(&[(1.0, 10.0), (2.0, 19.0)]).is_none());
        assert!(fit_usl(&[(1.0, 10.0), (2.0, 0.0), (4.0, -1.0)]).is_none());
    }
}
