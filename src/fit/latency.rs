//! Latency against load: a monotone "hinge", L(N) = a + b·N + c·max(0, N − k), with b, c ≥ 0.
//!
//! Why this shape: below saturation a continuous-batching server adds a little to every
//! request's latency for each user more (a decode step reads the KV cache of one more
//! sequence: slope b). Past saturation — KV memory or the running cap full — new requests
//! queue, and in a closed loop Little's law makes the wait grow linearly in the users:
//! R = N/X_max − Z (slope b + c after the knee k). Both pieces are linear, the knee is where the
//! data says, and neither slope may be negative, so the fit is monotone by construction and
//! extrapolates the way queueing does rather than the way a polynomial would.
//!
//! Fitted by least squares on relative errors (a 10 % miss at 0.1 s counts as much as at 10 s)
//! for every knee on a grid over the measured range, keeping the best; with fewer than four
//! points the knee is left out (a straight line).

use serde::Serialize;

use crate::slo::Percentile;
use crate::store::steps::Metric;

/// A fitted latency curve of one metric and statistic.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencyFit {
    pub metric: Metric,
    pub statistic: Percentile,
    pub a: f64,
    pub b: f64,
    pub c: f64,
    pub knee: f64,
    /// Root mean square of the relative residuals.
    pub rms_relative_error: f64,
    pub max_relative_error: f64,
    pub points: usize,
    /// The measured load range it was fitted on.
    pub low: f64,
    pub high: f64,
}

impl LatencyFit {
    pub fn at(&self, n: f64) -> f64 {
        self.a + self.b * n + self.c * (n - self.knee).max(0.0)
    }

    /// The largest load in `[from, to]` whose latency, scaled by `factor`, is within `limit`;
    /// `None` when even `from` is over. Exact: the curve is piecewise linear and nondecreasing.
    pub fn largest_within(&self, limit: f64, factor: f64, from: f64, to: f64) -> Option<f64> {
        let ok = |n: f64| self.at(n) * factor <= limit;
        if !ok(from) {
            return None;
        }
        if ok(to) {
            return Some(to);
        }
        // Solve on the piece where the crossing is.
        let target = limit / factor;
        let before = self.a + self.b * self.knee;
        let n = if self.knee > from && self.knee < to && before >= target {
            (target - self.a) / self.b.max(1e-300)
        } else if self.knee > from && self.knee < to {
            self.knee + (target - before) / (self.b + self.c).max(1e-300)
        } else if self.knee <= from {
            // Past the knee on the whole range.
            (target - self.a + self.c * self.knee) / (self.b + self.c).max(1e-300)
        } else {
            (target - self.a) / self.b.max(1e-300)
        };
        Some(n.clamp(from, to))
    }
}

/// Weighted least squares with columns `cols` of the design rows; `None` if singular.
fn solve(rows: &[[f64; 3]], y: &[f64], w: &[f64], cols: &[usize]) -> Option<[f64; 3]> {
    let k = cols.len();
    let mut m = [[0.0_f64; 4]; 3];
    for ((row, &yi), &wi) in rows.iter().zip(y).zip(w) {
        for (i, &ci) in cols.iter().enumerate() {
            for (j, &cj) in cols.iter().enumerate() {
                m[i][j] += wi * row[ci] * row[cj];
            }
            m[i][k] += wi * row[ci] * yi;
        }
    }
    // Gaussian elimination with partial pivoting on the k × (k + 1) system.
    for col in 0..k {
        let pivot = (col..k).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[pivot][col].abs() < 1e-12 {
            return None;
        }
        m.swap(col, pivot);
        let pivot_row = m[col];
        for (row, values) in m.iter_mut().enumerate().take(k) {
            if row != col {
                let factor = values[col] / pivot_row[col];
                for (value, pivot_value) in values
                    .iter_mut()
                    .zip(pivot_row.iter())
                    .skip(col)
                    .take(k + 1 - col)
                {
                    *value -= factor * pivot_value;
                }
            }
        }
    }
    let mut out = [0.0; 3];
    for (i, &ci) in cols.iter().enumerate() {
        out[ci] = m[i][k] / m[i][i];
    }
    Some(out)
}

/// Fits (load, latency) points; `None` with fewer than two usable points.
pub fn fit_latency(
    metric: Metric,
    statistic: Percentile,
    points: &[(f64, f64)],
) -> Option<LatencyFit> {
    let points: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|&(n, l)| n > 0.0 && l > 0.0 && n.is_finite() && l.is_finite())
        .collect();
    if points.len() < 2 {
        return None;
    }
    let low = points.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let high = points.iter().map(|p| p.0).fold(0.0, f64::max);
    let y: Vec<f64> = points.iter().map(|p| p.1).collect();
    // Relative errors: weight 1/L².
    let w: Vec<f64> = y.iter().map(|l| 1.0 / (l * l)).collect();
    let mut knees: Vec<f64> = points.iter().map(|p| p.0).collect();
    if points.len() >= 4 {
        let steps = 200;
        let (l0, l1) = (low.ln(), high.ln());
        knees.extend((0..=steps).map(|i| (l0 + (l1 - l0) * f64::from(i) / f64::from(steps)).exp()));
    } else {
        knees = vec![high];
    }
    let mut best: Option<(f64, [f64; 3], f64)> = None;
    for &knee in &knees {
        let rows: Vec<[f64; 3]> = points
            .iter()
            .map(|&(n, _)| [1.0, n, (n - knee).max(0.0)])
            .collect();
        let subsets: &[&[usize]] = if points.len() >= 4 {
            &[&[0, 1, 2], &[0, 1], &[0, 2], &[0]]
        } else {
            &[&[0, 1], &[0]]
        };
        for cols in subsets {
            let Some(coef) = solve(&rows, &y, &w, cols) else {
                continue;
            };
            if coef[1] < 0.0 || coef[2] < 0.0 {
                continue;
            }
            let error: f64 = rows
                .iter()
                .zip(&y)
                .map(|(r, yi)| ((coef[0] + coef[1] * r[1] + coef[2] * r[2] - yi) / yi).powi(2))
                .sum();
            if best.as_ref().is_none_or(|b| error < b.2 - 1e-15) {
                best = Some((knee, coef, error));
            }
        }
    }
    let (knee, coef, error) = best?;
    let mut fit = LatencyFit {
        metric,
        statistic,
        a: coef[0],
        b: coef[1],
        c: coef[2],
        knee,
        rms_relative_error: (error / points.len() as f64).sqrt(),
        max_relative_error: 0.0,
        points: points.len(),
        low,
        high,
    };
    fit.max_relative_error = points
        .iter()
        .map(|&(n, l)| ((fit.at(n) - l) / l).abs())
        .fold(0.0, f64::max);
    Some(fit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_knee_of_a_queue() {
        // Flat-ish until 100 users, then Little's law: +0.04 s per user.
        let points: Vec<(f64, f64)> = [8.0, 16.0, 32.0, 64.0, 100.0, 150.0, 200.0, 300.0]
            .iter()
            .map(|&n| (n, 1.0 + 0.002 * n + 0.04 * (n - 100.0f64).max(0.0)))
            .collect();
        let fit = fit_latency(Metric::E2e, Percentile::P(90.0), &points).unwrap();
        assert!((fit.knee - 100.0).abs() < 5.0, "{fit:?}");
        assert!((fit.c - 0.04).abs() < 1e-3, "{fit:?}");
        assert!(fit.max_relative_error < 0.01, "{fit:?}");
        // Monotone, and inverted exactly.
        let n = fit.largest_within(5.0, 1.0, 8.0, 300.0).unwrap();
        assert!((fit.at(n) - 5.0).abs() < 1e-9, "{n}");
        assert_eq!(fit.largest_within(0.5, 1.0, 8.0, 300.0), None);
        assert_eq!(fit.largest_within(100.0, 1.0, 8.0, 300.0), Some(300.0));
    }

    #[test]
    fn never_slopes_down() {
        // Noisy, falling data still gives a nondecreasing curve.
        let points = [(1.0, 2.0), (2.0, 1.8), (4.0, 1.9), (8.0, 1.7), (16.0, 1.75)];
        let fit = fit_latency(Metric::Ttft, Percentile::Mean, &points).unwrap();
        assert!(fit.b >= 0.0 && fit.c >= 0.0, "{fit:?}");
        assert!(fit.at(16.0) >= fit.at(1.0));
        assert!(fit_latency(Metric::Ttft, Percentile::Mean, &[(1.0, 1.0)]).is_none());
    }
}
