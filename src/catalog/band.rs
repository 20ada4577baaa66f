//! How wrong a predicted C* may be: error bands measured by `capplan validate` on public
//! measurements the model was not fitted on, per engine profile and step-time basis.
//!
//! A band is the split-conformal 80 % interval of (predicted − measured) / measured C* over
//! held-out sweeps (`validate::bands`): a new deployment's error falls between `low` and `high`
//! with 80 % odds if it errs like those sweeps, and `capplan validate` checks as much by leaving
//! one deployment out at a time. A prediction of C* = P therefore puts the measured C* between
//! P / (1 + high) and P / (1 + low) with the same odds. `hardware/bands.toml` is
//! written by `capplan validate --write-bands` and can be edited or overridden like the rest
//! of the catalog.

use serde::{Deserialize, Serialize};

/// The measured error of one engine profile's predictions on one basis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorBand {
    /// The models its sweeps measured: `dense` or `mixture of experts` (their step times rest
    /// on different tables and their errors differ; see [`model_class`]).
    #[serde(default = "dense")]
    pub models: String,
    /// Engine profile name.
    pub engine: String,
    /// `measured operators` or `roofline`.
    pub basis: String,
    /// Sweeps × SLOs the errors come from.
    pub n: usize,
    /// The ends of the signed C* errors' split-conformal 80 % interval (of n sorted errors the
    /// ⌊0.1 (n + 1)⌋-th and the ⌈0.9 (n + 1)⌉-th).
    pub low: f64,
    pub high: f64,
    pub median_abs: f64,
    /// What the errors were measured on.
    pub source: String,
}

/// The range the measured C* of a prediction is expected in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CStarRange {
    pub low: f64,
    pub high: f64,
    /// Which band, and how it was chosen when none matched exactly.
    pub basis: String,
}

fn dense() -> String {
    DENSE.into()
}

/// The fewest held-out C* errors a band at 80 % is read from (a split-conformal interval of
/// fewer would have no upper end; see `validate::bands`): a group with fewer has no band of its
/// own, and its predictions take a related one.
pub const MIN_BAND_SWEEPS: usize = 9;

/// The model classes bands are kept per.
pub const DENSE: &str = "dense";
pub const MIXTURE: &str = "mixture of experts";

/// The band class of `model`.
pub fn model_class(model: &crate::catalog::Model) -> &'static str {
    if model.experts.is_some_and(|e| e > 1) {
        MIXTURE
    } else {
        DENSE
    }
}

/// The class of a prediction's step-time basis that bands are kept per: `measured operators`
/// or `roofline`.
pub fn basis_class(basis: &str) -> &'static str {
    if basis.starts_with("measured operator") {
        "measured operators"
    } else {
        "roofline"
    }
}

/// The range of a prediction of `c_star` users of a `models`-class model by `engine` on
/// `basis`, if any band applies: the class's own bands first, else the other class's (said).
pub fn c_star_range(
    bands: &[ErrorBand],
    models: &str,
    engine: &str,
    basis: &str,
    c_star: f64,
) -> Option<CStarRange> {
    let own: Vec<ErrorBand> = bands
        .iter()
        .filter(|b| b.models == models)
        .cloned()
        .collect();
    if let Some((band, why)) = band_for(&own, engine, basis_class(basis)) {
        return Some(band.range(c_star, why.as_deref()));
    }
    band_for(bands, engine, basis_class(basis)).map(|(band, why)| {
        let why = format!(
            "no {models} band (fewer than {MIN_BAND_SWEEPS} held-out sweeps): the {} models' band{}",
            band.models,
            why.map(|w| format!(" ({w})")).unwrap_or_default()
        );
        band.range(c_star, Some(&why))
    })
}

/// The band for `engine` predictions resting on `basis`: the exact one, else the engine's
/// other basis, else the widest band there is — saying which.
pub fn band_for<'a>(
    bands: &'a [ErrorBand],
    engine: &str,
    basis: &str,
) -> Option<(&'a ErrorBand, Option<String>)> {
    if let Some(band) = bands
        .iter()
        .find(|b| b.engine == engine && b.basis == basis)
    {
        return Some((band, None));
    }
    let widest = |candidates: Vec<&'a ErrorBand>| {
        candidates
            .into_iter()
            .max_by(|a, b| (a.high - a.low).total_cmp(&(b.high - b.low)))
    };
    // Another release's profile of the same engine (`vllm` and `vllm-0.13`).
    let family = |name: &str| name.split('-').next().unwrap_or(name).to_string();
    if let Some(band) = widest(
        bands
            .iter()
            .filter(|b| {
                b.basis == basis && b.engine != engine && family(&b.engine) == family(engine)
            })
            .collect(),
    ) {
        return Some((
            band,
            Some(format!(
                "no {engine} band on {basis} (fewer than {MIN_BAND_SWEEPS} held-out sweeps): the band of {} (another release of \
                 the same engine)",
                band.engine
            )),
        ));
    }
    if let Some(band) = widest(bands.iter().filter(|b| b.basis == basis).collect()) {
        return Some((
            band,
            Some(format!(
                "no {engine} band on {basis} (fewer than {MIN_BAND_SWEEPS} held-out sweeps): the widest {basis} band ({})",
                band.engine
            )),
        ));
    }
    widest(bands.iter().collect()).map(|band| {
        let why = format!(
            "no {basis} band (fewer than {MIN_BAND_SWEEPS} held-out sweeps): the widest band there is ({}, {})",
            band.engine, band.basis
        );
        (band, Some(why))
    })
}

impl ErrorBand {
    /// Where the measured C* of a prediction `c_star` lies with 80 % odds.
    pub fn range(&self, c_star: f64, why: Option<&str>) -> CStarRange {
        // An error of −100 % (predicted nothing) or below bounds nothing; cap at −90 %.
        let low = self.low.max(-0.9);
        let high = self.high.max(-0.9);
        CStarRange {
            low: c_star / (1.0 + high),
            high: c_star / (1.0 + low),
            basis: format!(
                "{} on {}: C* error within [{:+.0} %, {:+.0} %] with 80 % odds, from {} held-out \
                 sweeps ({}){}",
                self.engine,
                self.basis,
                self.low * 100.0,
                self.high * 100.0,
                self.n,
                self.source,
                why.map(|w| format!("; {w}")).unwrap_or_default()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn band(engine: &str, basis: &str, low: f64, high: f64) -> ErrorBand {
        ErrorBand {
            models: DENSE.into(),
            engine: engine.into(),
            basis: basis.into(),
            n: 10,
            low,
            high,
            median_abs: 0.1,
            source: "test".into(),
        }
    }

    #[test]
    fn an_optimistic_model_puts_the_truth_below_the_prediction() {
        // Predictions 10–30 % too high: a predicted 100 users are 77–91 in truth.
        let range = band("vllm", "roofline", 0.1, 0.3).range(100.0, None);
        assert!((range.low - 100.0 / 1.3).abs() < 1e-9);
        assert!((range.high - 100.0 / 1.1).abs() < 1e-9);
        // A band reaching −100 % does not divide by zero.
        let wide = band("x", "roofline", -1.0, 0.5).range(50.0, None);
        assert!(wide.high.is_finite() && wide.high > 50.0);
    }

    #[test]
    fn the_lookup_falls_back_to_the_widest_and_says_so() {
        let bands = vec![
            band("vllm", "measured operators", -0.1, 0.1),
            band("sglang", "measured operators", -0.3, 0.2),
            band("vllm", "roofline", -0.5, 0.4),
        ];
        let (exact, why) = band_for(&bands, "vllm", "roofline").unwrap();
        assert_eq!((exact.engine.as_str(), why), ("vllm", None));
        // A release without its own band takes its engine's other release's, saying so.
        let releases = [
            band("vllm-0.13", "roofline", -0.2, 0.2),
            band("tgi", "roofline", -0.9, 0.9),
        ];
        let (other, why) = band_for(&releases, "vllm", "roofline").unwrap();
        assert_eq!(other.engine, "vllm-0.13");
        assert!(why.unwrap().contains("another release"));
        let (fallback, why) = band_for(&bands, "tgi", "measured operators").unwrap();
        assert_eq!(fallback.engine, "sglang");
        assert!(why.unwrap().contains("no tgi band"));
        assert!(band_for(&[], "vllm", "roofline").is_none());
    }
}
