//! Predictions corrected by what was measured on the same card.
//!
//! A card that has measured or imported capacity tells the planner how far its predictions are
//! off *there*: each such point is predicted again at its own SLO, think time and output length,
//! and measured ÷ predicted is the card's correction. The geometric mean over the points of the
//! same model on the card corrects that model's other splits; over all the card's points, the
//! card's other models. A single engine, scheduler setting or driver that the model does not
//! capture moves every split of a card alike, which is why one factor per card carries over;
//! what does not carry over (another split's all-reduce, another model's shapes) is why the
//! band stays. A point whose measured C* lies outside its prediction's band is called out: the
//! model is wrong there by more than its validation said.

use serde::Serialize;

use super::predicted::CapacityPredictor;
use crate::catalog::band::CStarRange;
use crate::catalog::Catalog;
use crate::store::{CapacityPoint, PointSource};

/// One measured point beside its prediction.
#[derive(Debug, Clone, Serialize)]
pub struct MeasuredCheck {
    pub model: String,
    pub card: String,
    pub tp: u32,
    /// `file:line` of the measured point.
    pub origin: String,
    pub measured: f64,
    pub predicted: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub band: Option<CStarRange>,
    /// The measured C* lies outside the prediction's band.
    pub outside_band: bool,
    /// The benchmark that measured it, whose way the prediction beside it was measured
    /// (`CapacityPoint::measured_by`); `None`: the steady state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_by: Option<String>,
}

impl MeasuredCheck {
    fn ratio(&self) -> f64 {
        self.measured / self.predicted
    }
}

/// The factor a prediction was scaled by, and what it rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Correction {
    pub factor: f64,
    /// Measured points behind it.
    pub points: usize,
    /// `same model` or `other models on this card`.
    pub scope: &'static str,
}

impl Correction {
    /// `users` predicted, corrected: whole users, at least one.
    pub fn of(&self, users: f64) -> f64 {
        (users * self.factor).floor().max(1.0)
    }
}

/// Every correction the measured points of a plan give.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PredictionCorrections {
    pub checks: Vec<MeasuredCheck>,
    /// Points that could not be predicted again, and why.
    pub unchecked: Vec<(String, String)>,
}

impl PredictionCorrections {
    /// Predicts every measured or imported point of `points` (one instance per card) on the
    /// cards in `cards` again at its own conditions.
    pub fn from_points(
        catalog: &Catalog,
        points: &[CapacityPoint],
        cards: &[String],
        predictor: &mut dyn CapacityPredictor,
    ) -> PredictionCorrections {
        let mut out = PredictionCorrections::default();
        let mut asked = Vec::new();
        for point in points {
            let relevant = point.source != PointSource::Predicted
                && point.instances_per_card == 1
                && point.users_per_instance > 0.0
                && cards.contains(&point.card);
            if !relevant {
                continue;
            }
            if let (Ok(model), Ok(card)) = (catalog.model(&point.model), catalog.card(&point.card))
            {
                asked.push((model, card, point));
            }
        }
        let answers = predictor.predict_like_all(&asked);
        for ((_, _, point), answer) in asked.iter().zip(answers) {
            match answer {
                Ok(predicted) if predicted.users_per_instance > 0.0 => {
                    let outside_band = predicted.band.as_ref().is_some_and(|band| {
                        point.users_per_instance < band.low || point.users_per_instance > band.high
                    });
                    out.checks.push(MeasuredCheck {
                        model: point.model.clone(),
                        card: point.card.clone(),
                        tp: point.tp,
                        origin: point.origin.clone(),
                        measured: point.users_per_instance,
                        predicted: predicted.users_per_instance,
                        band: predicted.band,
                        outside_band,
                        measured_by: point.measured_by.clone(),
                    });
                }
                Ok(_) => out
                    .unchecked
                    .push((point.origin.clone(), "predicted C* is 0".into())),
                Err(reason) => out.unchecked.push((point.origin.clone(), reason)),
            }
        }
        out
    }

    /// The factor for predictions of `model` on `card`: from that model's points on the card,
    /// else from the card's points of other models; `None` without any.
    pub fn for_prediction(&self, model: &str, card: &str) -> Option<Correction> {
        let same: Vec<f64> = self
            .checks
            .iter()
            .filter(|c| c.card == card && c.model == model)
            .map(MeasuredCheck::ratio)
            .collect();
        if !same.is_empty() {
            return Some(Correction {
                factor: geometric_mean(&same),
                points: same.len(),
                scope: "same model",
            });
        }
        let card_wide: Vec<f64> = self
            .checks
            .iter()
            .filter(|c| c.card == card)
            .map(MeasuredCheck::ratio)
            .collect();
        (!card_wide.is_empty()).then(|| Correction {
            factor: geometric_mean(&card_wide),
            points: card_wide.len(),
            scope: "other models on this card",
        })
    }

    /// Scales a predicted point (C*, and its band) by its correction and says so in its note.
    pub fn apply(&self, mut point: CapacityPoint) -> CapacityPoint {
        if point.source != PointSource::Predicted {
            return point;
        }
        let Some(correction) = self.for_prediction(&point.model, &point.card) else {
            return point;
        };
        let uncorrected = point.users_per_instance;
        point.users_per_instance = correction.of(uncorrected);
        // Capacity scales; latency at C* is the SLO's to hold, so E2E stays as predicted.
        if let Some(band) = point.band.as_mut() {
            band.low *= correction.factor;
            band.high *= correction.factor;
        }
        point.note = format!(
            "{}; ×{:.2} from {} measured point(s) of {} ({uncorrected:.0} uncorrected)",
            point.note, correction.factor, correction.points, correction.scope
        );
        point.origin = format!("{} ×{:.2}", point.origin, correction.factor);
        point
    }

    /// What the report must say: each card's correction and each measured point outside its
    /// prediction's band.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        let mut cards: Vec<&str> = self.checks.iter().map(|c| c.card.as_str()).collect();
        cards.sort_unstable();
        cards.dedup();
        for card in cards {
            let checks: Vec<&MeasuredCheck> =
                self.checks.iter().filter(|c| c.card == card).collect();
            let ratios: Vec<f64> = checks.iter().map(|c| c.ratio()).collect();
            notes.push(format!(
                "predictions for {card} are corrected by what was measured there: measured ÷ \
                 predicted C* is {} over {} point(s) (×{:.2} for other models; the same model's \
                 own points where it has them)",
                ratios
                    .iter()
                    .map(|r| format!("{r:.2}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                ratios.len(),
                geometric_mean(&ratios)
            ));
        }
        let mut benchmarks: Vec<&str> = self
            .checks
            .iter()
            .filter_map(|c| c.measured_by.as_deref())
            .collect();
        benchmarks.sort_unstable();
        benchmarks.dedup();
        for tool in benchmarks {
            notes.push(format!(
                "points measured by {tool} are set beside predictions measured as {tool} measures \
                 a level (every user started together), not beside the steady state plans \
                 assume: a level's first tokens wait for the prompts sent with them"
            ));
        }
        for check in self.checks.iter().filter(|c| c.outside_band) {
            let band = check
                .band
                .as_ref()
                .map(|b| format!(" (band {:.0}–{:.0})", b.low, b.high))
                .unwrap_or_default();
            notes.push(format!(
                "{} TP{} on {}: measured C* {:.0} ({}) is outside the prediction {:.0}{band}: \
                 the model is off there by more than its validation measured",
                check.model, check.tp, check.card, check.measured, check.origin, check.predicted
            ));
        }
        for (origin, reason) in &self.unchecked {
            notes.push(format!(
                "measured point {origin} was not predicted again ({reason}): it corrects nothing"
            ));
        }
        notes
    }
}

fn geometric_mean(values: &[f64]) -> f64 {
    let logs: f64 = values.iter().map(|v| v.ln()).sum();
    (logs / values.len() as f64).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(model: &str, card: &str, measured: f64, predicted: f64) -> MeasuredCheck {
        MeasuredCheck {
            model: model.into(),
            card: card.into(),
            tp: 1,
            origin: "t.csv:2".into(),
            measured,
            predicted,
            band: None,
            outside_band: false,
            measured_by: None,
        }
    }

    #[test]
    fn the_same_models_points_come_before_the_cards() {
        let corrections = PredictionCorrections {
            checks: vec![
                check("a", "L4", 50.0, 100.0),
                check("b", "L4", 200.0, 100.0),
                check("b", "L4", 50.0, 100.0),
            ],
            unchecked: Vec::new(),
        };
        let a = corrections.for_prediction("a", "L4").unwrap();
        assert_eq!((a.factor, a.points, a.scope), (0.5, 1, "same model"));
        // 2 and 0.5: geometric mean 1.
        let b = corrections.for_prediction("b", "L4").unwrap();
        assert!((b.factor - 1.0).abs() < 1e-12);
        let c = corrections.for_prediction("c", "L4").unwrap();
        assert_eq!((c.points, c.scope), (3, "other models on this card"));
        assert!((c.factor - 0.5_f64.powf(1.0 / 3.0)).abs() < 1e-12);
        assert_eq!(corrections.for_prediction("a", "H100-SXM"), None);
    }
}
