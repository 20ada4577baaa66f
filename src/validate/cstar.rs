//! C* read off a measured sweep and off the predicted one at the same loads, at two SLOs.
//!
//! A sweep is one deployment measured at several concurrencies. At an SLO (limits on mean
//! TTFT and mean TPOT) C* lies between the last level that meets it and the first that does
//! not; it is placed by interpolating the binding ratio (the larger of TTFT/limit and
//! TPOT/limit) linearly between the two. A sweep that never meets the SLO, or always does,
//! says nothing about C* and is counted apart.

use std::collections::BTreeMap;

use serde::Serialize;

use super::score::{relative_error, ErrorStats};
use super::ComparedRow;

/// An SLO on mean TTFT and mean TPOT.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct MeanSlo {
    pub name: &'static str,
    pub ttft_s: f64,
    pub tpot_s: f64,
}

/// The two SLOs C* is scored at: a chat service (first token within 2 s, 20 tokens/s per
/// user) and an interactive one (0.5 s, 40 tokens/s).
pub const SLOS: [MeanSlo; 2] = [
    MeanSlo {
        name: "chat: mean TTFT ≤ 2 s, TPOT ≤ 50 ms",
        ttft_s: 2.0,
        tpot_s: 0.05,
    },
    MeanSlo {
        name: "interactive: mean TTFT ≤ 0.5 s, TPOT ≤ 25 ms",
        ttft_s: 0.5,
        tpot_s: 0.025,
    },
];

/// How C* compares at one SLO over a source's sweeps, per engine.
#[derive(Debug, Clone, Serialize)]
pub struct CStarScore {
    pub slo: String,
    pub engine: String,
    pub subset: String,
    /// `measured operators` or `roofline`.
    pub basis_class: String,
    /// Sweeps whose measured C* lies inside the measured range.
    pub sweeps: usize,
    pub stats: Option<ErrorStats>,
    /// Sweeps whose prediction passed every level (C* error then only a lower bound).
    pub predicted_above_range: usize,
    /// Sweeps the prediction failed at the lowest level (its C* then extrapolated below it).
    pub predicted_below_range: usize,
    /// Every sweep's error (for error bands).
    #[serde(skip)]
    pub errors: Vec<f64>,
}

/// C* of a curve of (load, mean TTFT, mean TPOT) sorted by load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bracketed {
    /// Inside the range: interpolated between the last pass and the first fail.
    Inside(f64),
    /// Every level passed: C* is at least the highest load.
    Above(f64),
    /// The lowest level failed: C* is below it, at about `load / ratio` if the binding
    /// statistic grows in proportion to the load from there down.
    Below(f64),
}

/// C* of `curve` at `slo`.
pub fn c_star(curve: &[(f64, f64, f64)], slo: &MeanSlo) -> Option<Bracketed> {
    let ratio = |&(_, ttft, tpot): &(f64, f64, f64)| (ttft / slo.ttft_s).max(tpot / slo.tpot_s);
    let first = curve.first()?;
    if ratio(first) > 1.0 {
        return Some(Bracketed::Below(first.0 / ratio(first)));
    }
    for pair in curve.windows(2) {
        let (low, high) = (pair[0], pair[1]);
        let (r_low, r_high) = (ratio(&low), ratio(&high));
        if r_high > 1.0 {
            let share = if r_high > r_low {
                ((1.0 - r_low) / (r_high - r_low)).clamp(0.0, 1.0)
            } else {
                0.0
            };
            return Some(Bracketed::Inside(low.0 + share * (high.0 - low.0)));
        }
    }
    curve.last().map(|last| Bracketed::Above(last.0))
}

/// One group's C* errors and its counts of sweeps, predictions past the range and below it.
type Tally = (Vec<f64>, usize, usize, usize);

/// C* errors per SLO, engine and subset over the sweeps in `rows` with at least three loads.
pub fn score(rows: &[ComparedRow]) -> Vec<CStarScore> {
    let mut sweeps: BTreeMap<(&str, &str, &str, &str), Vec<&ComparedRow>> = BTreeMap::new();
    for row in rows {
        if row.sweep.is_empty() {
            continue;
        }
        sweeps
            .entry((
                row.engine.as_str(),
                row.subset.as_str(),
                super::basis_class(&row.basis),
                row.sweep.as_str(),
            ))
            .or_default()
            .push(row);
    }
    let mut out = Vec::new();
    for slo in &SLOS {
        let mut by_group: BTreeMap<(&str, &str, &str), Tally> = BTreeMap::new();
        for ((engine, subset, class, _), levels) in &sweeps {
            if levels.len() < 3 {
                continue;
            }
            let mut levels = levels.clone();
            levels.sort_by(|a, b| a.load.total_cmp(&b.load));
            let curve = |pick: fn(&ComparedRow) -> (Option<f64>, Option<f64>)| {
                levels
                    .iter()
                    .map(|row| {
                        let (ttft, tpot) = pick(row);
                        Some((row.load, ttft?, tpot?))
                    })
                    .collect::<Option<Vec<_>>>()
            };
            let (Some(measured), Some(predicted)) = (
                curve(|r| (r.measured.ttft_s, r.measured.tpot_s)),
                curve(|r| (r.predicted.ttft_s, r.predicted.tpot_s)),
            ) else {
                continue;
            };
            let Some(Bracketed::Inside(truth)) = c_star(&measured, slo) else {
                continue;
            };
            let entry = by_group.entry((engine, subset, class)).or_default();
            entry.1 += 1;
            match c_star(&predicted, slo) {
                Some(Bracketed::Inside(guess)) => {
                    entry.0.extend(relative_error(guess, truth));
                }
                Some(Bracketed::Above(top)) => {
                    entry.2 += 1;
                    entry.0.extend(relative_error(top, truth));
                }
                Some(Bracketed::Below(guess)) => {
                    entry.3 += 1;
                    entry.0.extend(relative_error(guess, truth));
                }
                None => {}
            }
        }
        for ((engine, subset, class), (errors, sweeps, above, below)) in by_group {
            out.push(CStarScore {
                slo: slo.name.to_string(),
                engine: engine.to_string(),
                subset: subset.to_string(),
                basis_class: class.to_string(),
                sweeps,
                stats: ErrorStats::of(&errors),
                predicted_above_range: above,
                predicted_below_range: below,
                errors,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLO: MeanSlo = MeanSlo {
        name: "t",
        ttft_s: 1.0,
        tpot_s: 0.1,
    };

    #[test]
    fn c_star_interpolates_the_binding_ratio() {
        // Ratios 0.5 at 8, 1.5 at 16 (TPOT binds): C* = 8 + 0.5 × 8 = 12.
        let curve = [(4.0, 0.1, 0.02), (8.0, 0.2, 0.05), (16.0, 0.3, 0.15)];
        assert_eq!(c_star(&curve, &SLO), Some(Bracketed::Inside(12.0)));
        assert_eq!(
            c_star(&[(4.0, 2.0, 0.01)], &SLO),
            Some(Bracketed::Below(2.0)),
            "first level fails at twice the limit: about half its load"
        );
        assert_eq!(
            c_star(&[(4.0, 0.1, 0.01), (8.0, 0.2, 0.02)], &SLO),
            Some(Bracketed::Above(8.0))
        );
        assert_eq!(c_star(&[], &SLO), None);
    }
}
