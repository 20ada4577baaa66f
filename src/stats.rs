//! Summaries of latency samples: mean and percentiles by linear interpolation on exact sorted
//! values (the method is stated next to every figure; no histogram bucketing error).

use serde::Serialize;

use crate::slo::Percentile;

/// Count, mean and the percentiles reports use, of one quantity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
}

impl Summary {
    /// `None` for no samples.
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        Summary::of_sorted(&sorted)
    }

    /// The same of values already sorted ascending; `None` for no samples.
    pub fn of_sorted(sorted: &[f64]) -> Option<Summary> {
        if sorted.is_empty() {
            return None;
        }
        Some(Summary {
            n: sorted.len(),
            mean: sorted.iter().sum::<f64>() / sorted.len() as f64,
            p50: quantile_sorted(sorted, 0.50),
            p90: quantile_sorted(sorted, 0.90),
            p95: quantile_sorted(sorted, 0.95),
            p99: quantile_sorted(sorted, 0.99),
        })
    }

    /// The statistic an SLO names.
    pub fn at(&self, percentile: Percentile, sorted: Option<&[f64]>) -> f64 {
        match percentile {
            Percentile::Mean => self.mean,
            Percentile::P(q) if (q - 50.0).abs() < 1e-9 => self.p50,
            Percentile::P(q) if (q - 90.0).abs() < 1e-9 => self.p90,
            Percentile::P(q) if (q - 95.0).abs() < 1e-9 => self.p95,
            Percentile::P(q) if (q - 99.0).abs() < 1e-9 => self.p99,
            Percentile::P(q) => sorted.map_or(self.p99, |s| quantile_sorted(s, q / 100.0)),
        }
    }
}

/// The `q` quantile (0..=1) of sorted values, interpolating linearly between neighbours
/// (the "type 7" definition used by NumPy and most spreadsheets).
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        1 => sorted[0],
        n => {
            let position = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let low = position.floor() as usize;
            let high = (low + 1).min(n - 1);
            let weight = position - low as f64;
            sorted[low] * (1.0 - weight) + sorted[high] * weight
        }
    }
}

/// A sample sorted once for every figure asked of it — the statistic an SLO names and the
/// summary a report prints — where sorting for each cost a judged load level a few per cent.
#[derive(Debug, Clone)]
pub struct SortedSample {
    sorted: Vec<f64>,
    /// The mean summed in the values' own order, as [`statistic`] sums it.
    mean: f64,
}

impl SortedSample {
    pub fn new(mut values: Vec<f64>) -> SortedSample {
        let mean = values.iter().sum::<f64>() / values.len().max(1) as f64;
        values.sort_by(f64::total_cmp);
        SortedSample {
            sorted: values,
            mean,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// Exactly what [`statistic`] gives for the values in their own order.
    pub fn statistic(&self, percentile: Percentile) -> f64 {
        match percentile {
            Percentile::Mean => self.mean,
            Percentile::P(q) => quantile_sorted(&self.sorted, q / 100.0),
        }
    }

    pub fn summary(&self) -> Option<Summary> {
        Summary::of_sorted(&self.sorted)
    }
}

/// The statistic `percentile` of unsorted `values`.
pub fn statistic(values: &[f64], percentile: Percentile) -> f64 {
    match percentile {
        Percentile::Mean => values.iter().sum::<f64>() / values.len().max(1) as f64,
        Percentile::P(q) => {
            let mut sorted = values.to_vec();
            sorted.sort_by(f64::total_cmp);
            quantile_sorted(&sorted, q / 100.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates_like_numpy() {
        let values: Vec<f64> = (1..=10).map(f64::from).collect();
        // numpy.percentile(range(1, 11), 90) == 9.1
        assert!((quantile_sorted(&values, 0.9) - 9.1).abs() < 1e-12);
        let summary = Summary::of(&values).unwrap();
        assert_eq!(summary.mean, 5.5);
        assert!((summary.p50 - 5.5).abs() < 1e-12);
        assert!((statistic(&values, Percentile::P(99.0)) - 9.91).abs() < 1e-12);
        assert!(Summary::of(&[]).is_none());
    }
}
