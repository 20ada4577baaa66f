//! C* read off a measured sweep and off the predicted one at the same loads, at two SLOs.
//!
//! A sweep is one deployment measured at several concurrencies. At an SLO (limits on mean
//! TTFT and mean TPOT) C* lies between the last level that meets it and the first that does
//! not; it is placed by interpolating the binding ratio (the larger of TTFT/limit and
//! TPOT/limit) linearly between the two. A sweep that never meets the SLO, or always does,
//! says nothing about C* and is counted apart.
//!
//! Each sweep's C* is also kept with what decided it ([`SweepCStar`]): which limit the
//! measured sweep crosses, how steeply its binding statistic rises there, and how far the
//! prediction was from the limit at the measured C*. A C* error is a latency error divided by
//! that slope — where the binding statistic is nearly flat in the load (TPOT of a large model
//! on many cards, slope 0.05), a 5 % latency error moves C* by 100 %, and the summary's
//! median slope says how much of a source's C* error is that amplification.

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
    /// The median over the sweeps of [`SweepCStar::slope`]: below about 0.3 the binding
    /// statistic is flat enough near C* to multiply a latency error several times over.
    pub median_slope: Option<f64>,
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

/// Where a predicted C* lies against the sweep's loads (see [`Bracketed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bracket {
    Inside,
    /// Every level passed: C* is at least the highest load.
    Above,
    /// The lowest level failed: C* extrapolated below it.
    Below,
}

/// Which of an SLO's two limits a level is closer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Limit {
    #[serde(rename = "TTFT")]
    Ttft,
    #[serde(rename = "TPOT")]
    Tpot,
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Limit::Ttft => "TTFT",
            Limit::Tpot => "TPOT",
        })
    }
}

/// C* of `curve` at `slo`.
pub fn c_star(curve: &[(f64, f64, f64)], slo: &MeanSlo) -> Option<Bracketed> {
    let ratio = |level: &(f64, f64, f64)| binding(level, slo).0;
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

/// One sweep's C* at one SLO, measured and predicted, with what decided it.
#[derive(Debug, Clone, Serialize)]
pub struct SweepCStar {
    pub slo: String,
    pub engine: String,
    pub subset: String,
    /// `measured operators` or `roofline`.
    pub basis_class: String,
    /// The deployment the sweep measured (model, card, layout, lengths).
    pub sweep: String,
    pub levels: usize,
    pub lowest_load: f64,
    pub highest_load: f64,
    /// Interpolated between the last measured level that met the SLO and the first that did not.
    pub measured: f64,
    /// The limit the measured sweep crosses.
    pub binds: Limit,
    /// d ln(binding ratio) / d ln(load) between the two measured levels around C*: 1 where the
    /// binding statistic grows in proportion to the load, near 0 where it hardly moves.
    pub slope: Option<f64>,
    /// The prediction's C*, read off the predicted curve at the same loads.
    pub predicted: f64,
    /// Inside the loads, above them (every predicted level passed: C* at least the highest
    /// load) or below (the lowest failed: extrapolated).
    pub predicted_bracket: Bracket,
    /// (predicted − measured) / measured C*.
    pub error: f64,
    /// The predicted binding ratio (the larger of TTFT/limit and TPOT/limit) at the measured
    /// C*, less 1: the latency error that moved C*. Negative — the prediction still had room
    /// where the measurement reached the limit — goes with a C* predicted too high.
    pub predicted_ratio_at_c_star: Option<f64>,
    /// Which of the prediction's limits is closer there.
    pub predicted_binds: Option<Limit>,
    /// The same slope read off the predicted curve around the predicted C* (inside the loads
    /// only): what `capplan predict` reports as its C*'s fragility, known before any
    /// measurement.
    pub predicted_slope: Option<f64>,
}

/// Held-out C* errors of one source's sweeps whose predicted slope lies in one range: whether
/// the slope a prediction reports sorts its C* errors.
#[derive(Debug, Clone, Serialize)]
pub struct SlopeClassScore {
    /// `under 0.3`, `0.3 to 1` or `1 and over` (the bounds of [`SLOPE_CLASSES`]).
    pub predicted_slope: String,
    pub sweeps: usize,
    pub median_abs_error: f64,
}

/// The predicted-slope ranges [`by_predicted_slope`] sorts sweeps into: flat (where `predict`
/// says so, [`crate::sim::c_star_slope::FLAT_SLOPE`]), rising, and rising faster than the
/// load.
const SLOPE_CLASSES: [(f64, f64); 3] = [
    (0.0, crate::sim::c_star_slope::FLAT_SLOPE),
    (crate::sim::c_star_slope::FLAT_SLOPE, 1.0),
    (1.0, f64::INFINITY),
];

/// A slope range's name, from its bounds.
fn slope_class_name(low: f64, high: f64) -> String {
    match (low > 0.0, high.is_finite()) {
        (false, _) => format!("under {high}"),
        (true, true) => format!("{low} to {high}"),
        (true, false) => format!("{low} and over"),
    }
}

/// Median |C* error| of the held-out sweeps predicted inside their loads, by the slope of
/// the predicted curve there, both SLOs pooled.
pub fn by_predicted_slope(sweeps: &[SweepCStar]) -> Vec<SlopeClassScore> {
    SLOPE_CLASSES
        .iter()
        .filter_map(|&(low, high)| {
            let mut errors: Vec<f64> = sweeps
                .iter()
                .filter(|s| s.subset == super::silicon::HELD_OUT)
                .filter(|s| s.predicted_slope.is_some_and(|p| low <= p && p < high))
                .map(|s| s.error.abs())
                .collect();
            errors.sort_by(f64::total_cmp);
            (!errors.is_empty()).then(|| SlopeClassScore {
                predicted_slope: slope_class_name(low, high),
                sweeps: errors.len(),
                median_abs_error: crate::stats::quantile_sorted(&errors, 0.5),
            })
        })
        .collect()
}

/// The binding ratio of one level at `slo`, and which limit it is.
fn binding(&(_, ttft, tpot): &(f64, f64, f64), slo: &MeanSlo) -> (f64, Limit) {
    let (t, p) = (ttft / slo.ttft_s, tpot / slo.tpot_s);
    (t.max(p), if p > t { Limit::Tpot } else { Limit::Ttft })
}

/// The binding ratio of `curve` at `load`, each statistic interpolated linearly in the load
/// between the two levels around it; `None` outside the curve.
fn binding_at(curve: &[(f64, f64, f64)], load: f64, slo: &MeanSlo) -> Option<(f64, Limit)> {
    curve.windows(2).find_map(|pair| {
        let (low, high) = (pair[0], pair[1]);
        if !(low.0 <= load && load <= high.0) || high.0 <= low.0 {
            return None;
        }
        let share = (load - low.0) / (high.0 - low.0);
        let mix = |a: f64, b: f64| a + share * (b - a);
        Some(binding(
            &(load, mix(low.1, high.1), mix(low.2, high.2)),
            slo,
        ))
    })
}

/// The slope of the binding ratio in log-log between the measured levels around C*.
fn slope_around(curve: &[(f64, f64, f64)], c_star: f64, slo: &MeanSlo) -> Option<f64> {
    let pair = curve
        .windows(2)
        .find(|pair| pair[0].0 <= c_star && c_star <= pair[1].0)?;
    let (r_low, _) = binding(&pair[0], slo);
    let (r_high, _) = binding(&pair[1], slo);
    let slope = (r_high / r_low).ln() / (pair[1].0 / pair[0].0).ln();
    slope.is_finite().then_some(slope)
}

/// Every sweep of `rows` with at least three loads whose measured C* lies inside its loads,
/// at each SLO.
pub fn sweeps(rows: &[ComparedRow]) -> Vec<SweepCStar> {
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
    // Each sweep's measured and predicted curve, sorted by load, read once for both SLOs.
    let curves: Vec<_> = sweeps
        .iter()
        .filter(|(_, levels)| levels.len() >= 3)
        .filter_map(|(key, levels)| {
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
            let measured = curve(|r| (r.measured.ttft_s, r.measured.tpot_s))?;
            let predicted = curve(|r| (r.predicted.ttft_s, r.predicted.tpot_s))?;
            Some((key, measured, predicted))
        })
        .collect();
    let mut out = Vec::new();
    for slo in &SLOS {
        for ((engine, subset, class, sweep), measured, predicted) in &curves {
            let Some(Bracketed::Inside(truth)) = c_star(measured, slo) else {
                continue;
            };
            let (guess, bracket) = match c_star(predicted, slo) {
                Some(Bracketed::Inside(guess)) => (guess, Bracket::Inside),
                Some(Bracketed::Above(top)) => (top, Bracket::Above),
                Some(Bracketed::Below(guess)) => (guess, Bracket::Below),
                None => continue,
            };
            let Some(error) = relative_error(guess, truth) else {
                continue;
            };
            let binds = binding_at(measured, truth, slo).map_or(Limit::Ttft, |(_, which)| which);
            let at_truth = binding_at(predicted, truth, slo);
            out.push(SweepCStar {
                slo: slo.name.to_string(),
                engine: engine.to_string(),
                subset: subset.to_string(),
                basis_class: class.to_string(),
                sweep: sweep.to_string(),
                levels: measured.len(),
                lowest_load: measured[0].0,
                highest_load: measured[measured.len() - 1].0,
                measured: truth,
                binds,
                slope: slope_around(measured, truth, slo),
                predicted: guess,
                predicted_bracket: bracket,
                error,
                predicted_ratio_at_c_star: at_truth.map(|(ratio, _)| ratio - 1.0),
                predicted_binds: at_truth.map(|(_, which)| which),
                predicted_slope: (bracket == Bracket::Inside)
                    .then(|| slope_around(predicted, guess, slo))
                    .flatten(),
            });
        }
    }
    out
}

/// C* errors per SLO, engine and subset over `sweeps` (see [`sweeps`]).
pub fn score(sweeps: &[SweepCStar]) -> Vec<CStarScore> {
    let mut by_group: BTreeMap<(&str, &str, &str, &str), Vec<&SweepCStar>> = BTreeMap::new();
    for sweep in sweeps {
        by_group
            .entry((
                sweep.slo.as_str(),
                sweep.engine.as_str(),
                sweep.subset.as_str(),
                sweep.basis_class.as_str(),
            ))
            .or_default()
            .push(sweep);
    }
    // In the order of SLOS, then engine, subset and basis.
    let mut out = Vec::new();
    for slo in &SLOS {
        for ((name, engine, subset, class), group) in &by_group {
            if *name != slo.name {
                continue;
            }
            let errors: Vec<f64> = group.iter().map(|s| s.error).collect();
            let mut slopes: Vec<f64> = group.iter().filter_map(|s| s.slope).collect();
            slopes.sort_by(f64::total_cmp);
            out.push(CStarScore {
                slo: slo.name.to_string(),
                engine: engine.to_string(),
                subset: subset.to_string(),
                basis_class: class.to_string(),
                sweeps: group.len(),
                stats: ErrorStats::of(&errors),
                predicted_above_range: group
                    .iter()
                    .filter(|s| s.predicted_bracket == Bracket::Above)
                    .count(),
                predicted_below_range: group
                    .iter()
                    .filter(|s| s.predicted_bracket == Bracket::Below)
                    .count(),
                median_slope: (!slopes.is_empty())
                    .then(|| crate::stats::quantile_sorted(&slopes, 0.5)),
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

    /// (TTFT, TPOT) of one level, in seconds.
    type Latency = (f64, f64);

    /// A sweep's levels: the load, then what was measured and what predicted there.
    fn sweep_rows(
        name: &str,
        levels: &[(f64, Latency, Latency)],
    ) -> Vec<crate::validate::ComparedRow> {
        use crate::validate::{ComparedRow, RowOutcome};
        let outcome = |(ttft, tpot): Latency| RowOutcome {
            ttft_s: Some(ttft),
            tpot_s: Some(tpot),
            ..RowOutcome::default()
        };
        levels
            .iter()
            .map(|&(load, measured, predicted)| ComparedRow {
                id: format!("{name}-{load}"),
                engine: "vllm".into(),
                subset: "held out".into(),
                model: "m".into(),
                card: "c".into(),
                tp: 8,
                load,
                users: Some(load as u32),
                measured: outcome(measured),
                predicted: outcome(predicted),
                predicted_alone_ttft_s: None,
                basis: String::new(),
                note: String::new(),
                sweep: name.into(),
            })
            .collect()
    }

    #[test]
    fn a_flat_binding_statistic_turns_a_small_latency_error_into_a_large_c_star_error() {
        // TPOT binds at the interactive SLO (25 ms) and barely rises with the load: 22.4 ms at
        // one user, 25.4 at 10. The prediction is 6 to 12 % short all along.
        let rows = sweep_rows(
            "flat",
            &[
                (1.0, (0.05, 0.0224), (0.047, 0.0212)),
                (5.0, (0.15, 0.0241), (0.132, 0.0218)),
                (10.0, (0.26, 0.0254), (0.228, 0.0224)),
                (25.0, (0.46, 0.0274), (0.52, 0.0250)),
                (50.0, (0.87, 0.0300), (1.01, 0.0321)),
            ],
        );
        let all = sweeps(&rows);
        let sweep = all
            .iter()
            .find(|s| s.slo.starts_with("interactive"))
            .expect("the measured sweep crosses the interactive SLO");
        assert_eq!(sweep.binds, Limit::Tpot);
        assert_eq!(sweep.predicted_bracket, Bracket::Inside);
        let slope = sweep.slope.expect("two levels around C*");
        // ln(25.4 / 24.1) / ln(10 / 5) = 0.076.
        assert!((slope - 0.076).abs() < 0.005, "{slope}");
        // At the measured C* (about 8.1 users) the prediction is 11 % under the limit…
        let room = sweep.predicted_ratio_at_c_star.expect("inside the loads");
        assert!((-0.13..-0.09).contains(&room), "{room}");
        assert_eq!(sweep.predicted_binds, Some(Limit::Tpot));
        // …and C* comes out at 25 users, three times the measured: the error the latency
        // error over the slope foretells in size (both far beyond the latency error).
        assert!(sweep.error > 1.0, "{sweep:?}");
        assert!(-room / slope > 1.0);
        // The summary keeps the sweep, its error and its slope.
        let scores = score(&all);
        let interactive = scores
            .iter()
            .find(|c| c.slo.starts_with("interactive"))
            .expect("scored");
        assert_eq!(interactive.sweeps, 1);
        let stats = interactive.stats.expect("one error");
        assert_eq!((stats.n, stats.median), (1, sweep.error));
        assert_eq!(interactive.median_slope, Some(slope));
        // The prediction's own curve is nearly as flat around its C*: from 10 to 25 users its
        // binding ratio goes from 0.896 (TPOT 22.4 ms) to 1.04 (TTFT 0.52 s), a slope of
        // ln(1.04 / 0.896) / ln(2.5) = 0.16. `predict` would have called this C* fragile, and
        // the sweep counts among the flat ones.
        let predicted_slope = sweep.predicted_slope.expect("predicted inside the loads");
        assert!((predicted_slope - 0.163).abs() < 0.002, "{predicted_slope}");
        let classes = by_predicted_slope(&all);
        let flat = classes
            .iter()
            .find(|c| c.predicted_slope == "under 0.3")
            .expect("a flat class");
        assert!(
            flat.sweeps >= 1 && flat.median_abs_error > 1.0,
            "{classes:?}"
        );
    }

    #[test]
    fn a_prediction_that_never_fails_is_counted_past_the_range() {
        // Measured: TTFT crosses 2 s between 16 and 32 users (a queue builds, slope > 1).
        let rows = sweep_rows(
            "cliff",
            &[
                (8.0, (0.4, 0.02), (0.3, 0.02)),
                (16.0, (1.0, 0.022), (0.4, 0.021)),
                (32.0, (6.5, 0.03), (0.6, 0.024)),
            ],
        );
        let all = sweeps(&rows);
        let chat = all
            .iter()
            .find(|s| s.slo.starts_with("chat"))
            .expect("crosses the chat SLO");
        assert_eq!(chat.binds, Limit::Ttft);
        assert!(chat.slope.is_some_and(|slope| slope > 2.0), "{chat:?}");
        assert_eq!(chat.predicted_bracket, Bracket::Above);
        assert_eq!(chat.predicted, 32.0);
        let scores = score(&all);
        let summary = scores
            .iter()
            .find(|c| c.slo.starts_with("chat"))
            .expect("scored");
        assert_eq!(summary.predicted_above_range, 1);
        assert_eq!(summary.predicted_below_range, 0);
        // A prediction past the range has no slope around its C* to sort by.
        assert_eq!(chat.predicted_slope, None);
        // Fewer than three loads say nothing about C*.
        assert!(sweeps(&rows[..2]).is_empty());
    }
}
