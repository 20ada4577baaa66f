//! Relative errors of predictions against measurements, and their summaries.

use serde::Serialize;

/// (predicted − measured) / measured; `None` when either is missing or not positive.
pub fn relative_error(predicted: f64, measured: f64) -> Option<f64> {
    (predicted.is_finite() && measured.is_finite() && measured > 0.0 && predicted >= 0.0)
        .then(|| (predicted - measured) / measured)
}

/// How far off a set of predictions is: size, median and 90th-percentile |error|, the worst,
/// and the median signed error (optimistic predictions of latency are negative).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ErrorStats {
    pub n: usize,
    pub median_abs: f64,
    pub p90_abs: f64,
    pub worst_abs: f64,
    pub median: f64,
    /// The 10th and 90th percentiles of the signed error: 80 % of predictions fell between.
    pub p10: f64,
    pub p90: f64,
}

impl ErrorStats {
    /// `None` for no errors.
    pub fn of(errors: &[f64]) -> Option<ErrorStats> {
        if errors.is_empty() {
            return None;
        }
        let mut signed: Vec<f64> = errors.to_vec();
        signed.sort_by(f64::total_cmp);
        let mut abs: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
        abs.sort_by(f64::total_cmp);
        let q = crate::stats::quantile_sorted;
        Some(ErrorStats {
            n: errors.len(),
            median_abs: q(&abs, 0.5),
            p90_abs: q(&abs, 0.9),
            worst_abs: abs[abs.len() - 1],
            median: q(&signed, 0.5),
            p10: q(&signed, 0.1),
            p90: q(&signed, 0.9),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_relative_to_the_measurement() {
        assert_eq!(relative_error(110.0, 100.0), Some(0.1));
        assert_eq!(relative_error(50.0, 100.0), Some(-0.5));
        assert_eq!(relative_error(1.0, 0.0), None);
        assert_eq!(relative_error(f64::NAN, 1.0), None);
    }

    #[test]
    fn stats_by_hand() {
        let s = ErrorStats::of(&[-0.3, -0.1, 0.0, 0.2, 0.5]).unwrap();
        assert_eq!(s.n, 5);
        assert!((s.median_abs - 0.2).abs() < 1e-12);
        assert!((s.worst_abs - 0.5).abs() < 1e-12);
        assert!((s.median - 0.0).abs() < 1e-12);
        // p90 of |e| = {0, 0.1, 0.2, 0.3, 0.5}: position 3.6 → 0.3 + 0.6 × 0.2.
        assert!((s.p90_abs - 0.42).abs() < 1e-12);
        assert!(ErrorStats::of(&[]).is_none());
    }
}
