//! Fitting one constant of an engine profile beyond its overheads, on one source's fit subset,
//! the profile's other constants held as they are:
//!
//! - the cost of every iteration per expert layer beyond the isolated fused-MoE kernel the
//!   operator tables time ([`EngineProfile::moe_layer_overhead_us`]), to the mean TPOT of the
//!   mixture-of-experts rows of one architecture — TPOT because iteration times decide it
//!   directly, one architecture so that the others score it;
//! - the hand-off of a disaggregated request between its pools beyond the KV bytes
//!   ([`EngineProfile::handoff_ms`]), to the mean TTFT of one prompt length's disaggregated
//!   rows — the only figure it enters;
//! - the time from a request's arrival to the engine's queue
//!   ([`EngineProfile::request_overhead_ms`]: the deployment's front — HTTP server,
//!   tokenisation, routing), to the mean TTFT of the mixture-of-experts rows of one
//!   architecture, where a profile's `overheads` fit has no open-loop or one-user rows to
//!   read it from;
//! - how far a benchmark's users fall out of step after its first wave
//!   ([`EngineProfile::out_of_step`]), to the mean TTFT of the aggregated sources' fit rows:
//!   it moves when prompts wait behind each other, which only TTFT sees.
//!
//! One number each, so a bracketing search does: a grid over the constant's range, then a
//! golden-section search around the grid's best point, minimising the same robust (Cauchy)
//! loss of the log error that the overheads' fit minimises, so that a few rows the model gets
//! badly wrong for other reasons do not pull the constant for every other row.

use serde::Serialize;

use super::fit::{cauchy_loss, log_error};
use super::score::ErrorStats;
use super::{predict_rows, row_errors, Comparison};
use crate::catalog::{Catalog, EngineProfile};

/// A constant `validate --fit` can fit on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FittedKind {
    /// [`EngineProfile::moe_layer_overhead_us`], to mean TPOT.
    MoeLayer,
    /// [`EngineProfile::handoff_ms`], to mean TTFT.
    Handoff,
    /// [`EngineProfile::request_overhead_ms`], to mean TTFT.
    Request,
    /// [`EngineProfile::out_of_step`], to mean TTFT.
    OutOfStep,
}

impl FittedKind {
    /// The profile field's name in `hardware/engines.toml`.
    pub fn field(self) -> &'static str {
        match self {
            FittedKind::MoeLayer => "moe_layer_overhead_us",
            FittedKind::Handoff => "handoff_ms",
            FittedKind::OutOfStep => "out_of_step",
            FittedKind::Request => "request_overhead_ms",
        }
    }

    /// The measured figure it is fitted to.
    pub fn metric(self) -> &'static str {
        match self {
            FittedKind::MoeLayer => "TPOT",
            FittedKind::Handoff | FittedKind::OutOfStep | FittedKind::Request => "TTFT",
        }
    }

    /// The range searched: up to a fifth of a millisecond per expert layer (about a decode
    /// step's own length for DeepSeek-V3's 58 of them), up to a second of hand-off, from
    /// users kept in step to users spread over a whole cycle, up to half a second before a
    /// request reaches the engine.
    fn range(self) -> (f64, f64) {
        match self {
            FittedKind::MoeLayer => (0.0, 200.0),
            FittedKind::Handoff => (0.0, 1000.0),
            FittedKind::OutOfStep => (0.0, 1.0),
            FittedKind::Request => (0.0, 500.0),
        }
    }

    fn get(self, profile: &EngineProfile) -> f64 {
        match self {
            FittedKind::MoeLayer => profile.moe_layer_overhead_us,
            FittedKind::Handoff => profile.handoff_ms,
            FittedKind::OutOfStep => profile.out_of_step,
            FittedKind::Request => profile.request_overhead_ms,
        }
    }

    fn with(self, profile: &EngineProfile, value: f64) -> EngineProfile {
        let mut profile = profile.clone();
        match self {
            FittedKind::MoeLayer => profile.moe_layer_overhead_us = value,
            FittedKind::Handoff => profile.handoff_ms = value,
            FittedKind::OutOfStep => profile.out_of_step = value,
            FittedKind::Request => profile.request_overhead_ms = value,
        }
        profile
    }
}

/// One constant fitted for one engine, and what it did to the fit rows.
#[derive(Debug, Clone, Serialize)]
pub struct FittedConstant {
    pub engine: String,
    /// The profile field (`moe_layer_overhead_us`, `handoff_ms`).
    pub constant: &'static str,
    /// The figure fitted to (`TPOT`, `TTFT`).
    pub metric: &'static str,
    pub rows: usize,
    pub before: f64,
    pub value: f64,
    /// Median |error| of that figure over the fit rows with the profile's own value and with
    /// the fitted one.
    pub median_abs_error_before: f64,
    pub median_abs_error_after: f64,
    pub evaluations: usize,
}

/// Grid points over the range before the golden-section search.
const GRID_POINTS: usize = 9;

/// Golden-section steps after the grid: the bracket shrinks to 0.618^14 ≈ 0.1 % of the
/// grid's spacing.
const GOLDEN_STEPS: usize = 14;

/// Fits `kind` of `base` to `rows` (all of them served by that engine).
pub fn fit_constant(
    catalog: &Catalog,
    rows: &[Comparison],
    base: &EngineProfile,
    kind: FittedKind,
) -> (EngineProfile, FittedConstant) {
    // Every value scored, with its loss and median |error|: the fitted value's and (where
    // the search passed it) the profile's own are read back, not simulated again.
    let mut scored: Vec<(f64, (f64, f64))> = Vec::new();
    let mut loss = |value: f64| {
        let errors = errors_of(catalog, rows, &kind.with(base, value), kind);
        scored.push((value, errors));
        errors.0
    };
    let (low, high) = kind.range();
    let step = (high - low) / (GRID_POINTS - 1) as f64;
    let grid: Vec<(f64, f64)> = (0..GRID_POINTS)
        .map(|i| low + step * i as f64)
        .map(|value| (value, loss(value)))
        .collect();
    let best = grid
        .iter()
        .enumerate()
        .min_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
        .map_or(0, |(index, _)| index);
    let (mut a, mut b) = (
        grid[best.saturating_sub(1)].0,
        grid[(best + 1).min(GRID_POINTS - 1)].0,
    );
    let ratio = (5f64.sqrt() - 1.0) / 2.0;
    let mut c = b - ratio * (b - a);
    let mut d = a + ratio * (b - a);
    let (mut fc, mut fd) = (loss(c), loss(d));
    for _ in 0..GOLDEN_STEPS {
        if fc <= fd {
            b = d;
            d = c;
            fd = fc;
            c = b - ratio * (b - a);
            fc = loss(c);
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + ratio * (b - a);
            fd = loss(d);
        }
    }
    let searched = if fc <= fd { (c, fc) } else { (d, fd) };
    // The grid's own best point stands where the search found nothing lower (a flat loss,
    // or no row to score: then the range's low end).
    let value = if grid[best].1 <= searched.1 || !searched.1.is_finite() {
        grid[best].0
    } else {
        searched.0
    };
    let evaluations = scored.len();
    let median_at = |value: f64, profile: &EngineProfile| {
        scored
            .iter()
            .find(|(v, _)| *v == value)
            .map_or_else(|| errors_of(catalog, rows, profile, kind).1, |(_, e)| e.1)
    };
    let fitted = kind.with(base, value);
    let before = median_at(kind.get(base), base);
    let after = median_at(value, &fitted);
    (
        fitted,
        FittedConstant {
            engine: base.name.clone(),
            constant: kind.field(),
            metric: kind.metric(),
            rows: rows.len(),
            before: kind.get(base),
            value,
            median_abs_error_before: before,
            median_abs_error_after: after,
            evaluations,
        },
    )
}

/// The mean Cauchy loss of the log error of `kind`'s figure over `rows` under `profile`, and
/// its median |error|.
fn errors_of(
    catalog: &Catalog,
    rows: &[Comparison],
    profile: &EngineProfile,
    kind: FittedKind,
) -> (f64, f64) {
    let (predicted, _) = predict_rows(catalog, rows, std::slice::from_ref(profile));
    let errors: Vec<f64> = predicted
        .iter()
        .flat_map(row_errors)
        .filter(|(metric, _)| *metric == kind.metric())
        .map(|(_, error)| error)
        .collect();
    if errors.is_empty() {
        return (f64::INFINITY, f64::INFINITY);
    }
    let loss = errors
        .iter()
        .map(|error| cauchy_loss(log_error(*error)))
        .sum::<f64>()
        / errors.len() as f64;
    let median = ErrorStats::of(&errors).map_or(f64::INFINITY, |stats| stats.median_abs);
    (loss, median)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_sets_its_own_field_only() {
        let catalog = Catalog::shipped().unwrap();
        let base = catalog.engine("sglang").unwrap();
        let moe = FittedKind::MoeLayer.with(base, 12.5);
        assert_eq!(moe.moe_layer_overhead_us, 12.5);
        assert_eq!(moe.handoff_ms, base.handoff_ms);
        let handoff = FittedKind::Handoff.with(base, 80.0);
        assert_eq!(handoff.handoff_ms, 80.0);
        assert_eq!(handoff.moe_layer_overhead_us, base.moe_layer_overhead_us);
        assert_eq!(FittedKind::Handoff.get(&handoff), 80.0);
        let request = FittedKind::Request.with(base, 120.0);
        assert_eq!(request.request_overhead_ms, 120.0);
        assert_eq!(request.handoff_ms, base.handoff_ms);
        assert_eq!(FittedKind::Request.get(&request), 120.0);
        assert_eq!(FittedKind::Request.field(), "request_overhead_ms");
        assert_eq!(FittedKind::Request.metric(), "TTFT");
    }

    #[test]
    fn no_rows_fit_nothing_and_say_so() {
        let catalog = Catalog::shipped().unwrap();
        let base = catalog.engine("vllm").unwrap();
        let (profile, fitted) = fit_constant(&catalog, &[], base, FittedKind::Handoff);
        assert_eq!(fitted.rows, 0);
        assert!(fitted.median_abs_error_after.is_infinite());
        // With every loss infinite the grid's first point (no hand-off) is kept.
        assert_eq!(profile.handoff_ms, 0.0);
    }
}
