//! How fragile a predicted C* is: how steeply the binding latency rises with users around it.
//!
//! C* is where the binding statistic — the larger of TTFT ÷ its limit and TPOT ÷ its limit —
//! crosses 1. Where it grows as users^s, a latency error e everywhere on the curve moves the
//! crossing by a factor (1 + e)^(−1/s). A curve that rises in proportion to the load (s = 1)
//! turns a 5 % latency error into a 5 % C* error; the TPOT of a large model on many cards can
//! rise by only 5–7 % per doubling of users (s ≈ 0.08), and there the same 5 % error moves
//! C* by half. `capplan validate --details` shows this on public sweeps: held-out C* errors
//! follow the latency error divided by the measured slope (see `validate::cstar`), so the
//! slope is what tells a buyer how much a prediction's C* can be leaned on beyond its band,
//! which pools every slope of its engine.

use serde::Serialize;

use super::predict::LevelResult;

/// The latency error the sensitivity is stated for: about the median |TPOT error| of the
/// performance model on held-out public measurements (`capplan validate`).
pub const LATENCY_ERROR: f64 = 0.05;

/// Below this slope a C* sits on a flat stretch of its curve, where a latency error is
/// multiplied more than three times over in C*.
pub const FLAT_SLOPE: f64 = 0.3;

/// Where a curve crosses a ratio: interpolated between two levels, or only bracketed when the
/// level above stopped as soon as it was sure to fail (its ratio is then unknown).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Crossing {
    At(f64),
    Between(f64, f64),
}

impl Crossing {
    /// The users where it is interpolated; `None` when only bracketed.
    pub fn at(self) -> Option<f64> {
        match self {
            Crossing::At(users) => Some(users),
            Crossing::Between(..) => None,
        }
    }
}

/// Where C* would be were every level's latency off by [`LATENCY_ERROR`], read off the
/// predicted curve itself.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CStarSlope {
    /// C* were every level's latency [`LATENCY_ERROR`] above the prediction: where the
    /// binding ratio crosses 1 / (1 + e), interpolated in log-log between the levels around
    /// (in fractional users: the whole users that pass are its floor).
    pub c_star_if_slower: Crossing,
    /// The same [`LATENCY_ERROR`] below (the crossing of 1 / (1 − e)); `None` when no level
    /// tried reaches it.
    pub c_star_if_faster: Option<Crossing>,
    /// The effective d ln(binding ratio) / d ln(users) across those two crossings (from the
    /// slower one to the limit where no level reaches the faster): 1 where latency grows in
    /// proportion to the users, near 0 where it hardly moves; `None` where a crossing is
    /// only bracketed.
    pub slope: Option<f64>,
}

impl CStarSlope {
    /// Whether C* sits on a flat stretch ([`FLAT_SLOPE`]).
    pub fn is_flat(&self) -> bool {
        self.slope.is_some_and(|s| s < FLAT_SLOPE)
    }

    /// Where no level tried reaches the faster crossing: C* were every latency
    /// [`LATENCY_ERROR`] below, extrapolated from `c_star` at the slope read below it (in
    /// fractional users, like the crossings).
    pub fn faster_extrapolated(&self, c_star: u32) -> Option<f64> {
        match (self.c_star_if_faster, self.slope) {
            (None, Some(s)) => {
                Some(f64::from(c_star) * (1.0 / (1.0 - LATENCY_ERROR)).powf(1.0 / s))
            }
            _ => None,
        }
    }
}

/// The sensitivity of `c_star` on `curve` (levels sorted by users), or `None` when no level
/// tried below C* reaches the slower crossing's ratio (C* within a level or two of one user).
pub fn around(curve: &[LevelResult], c_star: u32) -> Option<CStarSlope> {
    if c_star == 0 {
        return None;
    }
    let levels: Vec<(f64, f64)> = curve
        .iter()
        .filter(|level| level.offered_rate.is_none() && level.concurrency > 0)
        .map(|level| (f64::from(level.concurrency), level.slo_ratio))
        .collect();
    let slower = crossing(&levels, 1.0 / (1.0 + LATENCY_ERROR))?;
    let faster = crossing(&levels, 1.0 / (1.0 - LATENCY_ERROR));
    // Two-sided where both crossings were reached; where no level tried reaches the faster
    // one (a flat curve whose first failing level barely fails), one-sided, from the slower
    // crossing up to where the curve crosses the limit itself.
    let slope = match (slower.at(), faster) {
        (Some(low), Some(Crossing::At(high))) => {
            log_slope(low, high, (1.0 + LATENCY_ERROR) / (1.0 - LATENCY_ERROR))
        }
        (Some(low), None) => crossing(&levels, 1.0)
            .and_then(Crossing::at)
            .and_then(|limit| log_slope(low, limit, 1.0 + LATENCY_ERROR)),
        _ => None,
    };
    Some(CStarSlope {
        c_star_if_slower: slower,
        c_star_if_faster: faster,
        slope,
    })
}

/// The log-log slope of a ratio rising by `factor` from `low` users to `high`.
fn log_slope(low: f64, high: f64, factor: f64) -> Option<f64> {
    let span = (high / low).ln();
    (span > 1e-9)
        .then(|| factor.ln() / span)
        .filter(|s| s.is_finite())
}

/// Where `levels` (users, binding ratio) first cross `target`, interpolated in log-log between
/// the last level at or below it and the next; only bracketed when the next stopped early (an
/// infinite ratio: it failed for certain, by how much unknown).
fn crossing(levels: &[(f64, f64)], target: f64) -> Option<Crossing> {
    let first = levels.first()?;
    if first.1 > target {
        return None;
    }
    levels.windows(2).find_map(|pair| {
        let ((u0, r0), (u1, r1)) = (pair[0], pair[1]);
        if r1 <= target {
            return None;
        }
        if !r1.is_finite() || r0 <= 0.0 {
            return Some(Crossing::Between(u0, u1));
        }
        let share = ((target / r0).ln() / (r1 / r0).ln()).clamp(0.0, 1.0);
        Some(Crossing::At((u0.ln() + share * (u1 / u0).ln()).exp()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Summary;

    fn level(users: u32, ratio: f64) -> LevelResult {
        let summary = Summary {
            n: 10,
            mean: ratio,
            p50: ratio,
            p90: ratio,
            p95: ratio,
            p99: ratio,
        };
        LevelResult {
            concurrency: users,
            offered_rate: None,
            mean_in_flight: f64::from(users),
            requests: 10,
            ttft: summary,
            tpot: Some(summary),
            e2e: summary,
            output_tokens_per_s: 1.0,
            requests_per_s: 1.0,
            mean_batch: f64::from(users),
            preemptions: 0,
            pass: ratio <= 1.0,
            failed: Vec::new(),
            slo_ratio: ratio,
        }
    }

    /// A curve rising as users^s, bisected between 16 and 32 like the search does.
    fn curve(s: f64, c_star: u32) -> Vec<LevelResult> {
        let ratio = |users: u32| (f64::from(users) / 24.0).powf(s);
        [1, 2, 4, 8, 16, c_star, c_star + 1, 32]
            .into_iter()
            .map(|users| level(users, ratio(users)))
            .collect()
    }

    #[test]
    fn a_latency_error_moves_c_star_by_its_power_of_the_slope() {
        let slope = around(&curve(0.5, 24), 24).unwrap();
        // A 5 % error at s = 0.5 moves C* by 1.05^2 ≈ 10 % (the curve is exactly a power law,
        // so log-log interpolation is exact).
        let slower = slope.c_star_if_slower.at().unwrap();
        assert!((slower - 24.0 / 1.05f64.powi(2)).abs() < 1e-6);
        let faster = slope.c_star_if_faster.and_then(Crossing::at).unwrap();
        assert!((faster - 24.0 / 0.95f64.powi(2)).abs() < 1e-6);
        assert!((slope.slope.unwrap() - 0.5).abs() < 1e-6);
        assert!(!slope.is_flat());
    }

    #[test]
    fn a_flat_curve_multiplies_a_small_latency_error() {
        // TPOT 6 % higher per doubling of users (s ≈ 0.084): a 5 % error moves C* by ~45 %.
        let slope = around(&curve(0.084, 24), 24).unwrap();
        assert!(
            slope.c_star_if_slower.at().unwrap() < 24.0 * 0.6,
            "{slope:?}"
        );
        // 24 × 1.0526^(1 / 0.084) ≈ 44 users: beyond the 32 the search tried, so that side
        // is unknown, and the slope is read on the side below C*.
        assert_eq!(slope.c_star_if_faster, None);
        assert!((slope.slope.unwrap() - 0.084).abs() < 1e-3, "{slope:?}");
        // Extrapolated at that slope, it lands where the power law puts it.
        let beyond = slope.faster_extrapolated(24).unwrap();
        assert!(
            (beyond - 24.0 / 0.95f64.powf(1.0 / 0.084)).abs() < 1.0,
            "{beyond}"
        );
        assert!(slope.is_flat());
        // With a level tried above the crossing, it is found, and both sides agree.
        let mut wider = curve(0.084, 24);
        wider.push(level(64, (64.0f64 / 24.0).powf(0.084)));
        let slope = around(&wider, 24).unwrap();
        let faster = slope.c_star_if_faster.and_then(Crossing::at).unwrap();
        assert!(faster > 24.0 * 1.7, "{slope:?}");
        assert!((slope.slope.unwrap() - 0.084).abs() < 1e-6, "{slope:?}");
    }

    #[test]
    fn a_level_that_stopped_early_only_brackets_its_crossing() {
        // The levels above C* stopped once sure to fail: how far past the limit they were is
        // unknown, so the faster C* is only known to lie below the first of them, and no
        // slope is claimed from it.
        let mut stopped = curve(0.5, 24);
        for level in stopped.iter_mut().filter(|l| l.concurrency > 24) {
            level.slo_ratio = f64::INFINITY;
        }
        let slope = around(&stopped, 24).unwrap();
        assert_eq!(slope.c_star_if_faster, Some(Crossing::Between(24.0, 25.0)));
        assert_eq!(slope.slope, None);
        assert!(slope.c_star_if_slower.at().unwrap() < 24.0);
        // Nothing tried reaches the faster crossing: it is unknown, not invented.
        let below_only: Vec<_> = curve(0.5, 24).into_iter().take(6).collect();
        assert_eq!(around(&below_only, 24).unwrap().c_star_if_faster, None);
        assert!(around(&curve(0.5, 24), 0).is_none());
    }
}
