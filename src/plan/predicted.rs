//! Capacity nobody measured: the planner asks a predictor (the simulated engine) for C* where
//! no measured or imported point applies. The trait keeps planning independent of how the
//! prediction is made.

use crate::catalog::{Card, Model, Node, Parallelism, PdSplit};
use crate::store::CapacityPoint;
use crate::workload::ThinkTime;
use serde::Serialize;

/// A layout the planner may need: `model` laid out as `parallel` on cards of `node`, with
/// the fewest users per instance (before any correction) that would let it win its node
/// shape; `None` when it must be predicted whatever it holds.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    pub model: &'a Model,
    pub card: &'a Card,
    pub node: &'a Node,
    pub parallel: Parallelism,
    pub needed: Option<u32>,
    /// About how many users one instance holds, from [`CapacityPredictor::estimate`]: where
    /// the search may start.
    pub estimate: Option<f64>,
}

/// Why a layout has no predicted capacity point.
#[derive(Debug, Clone, PartialEq)]
pub enum NoPrediction {
    /// It has none: it cannot run the workload, holds no user within the SLO, …
    Failed(String),
    /// Its C* was proved below the `needed` users it had to reach to win a node shape, and
    /// the search stopped there; `why` is the level that failed.
    Below { needed: u32, why: String },
}

impl NoPrediction {
    /// Whether this answers a question asked with `needed` users (`None`: C* itself): a
    /// layout below some users is below any more, but says nothing about fewer.
    pub fn answers(&self, needed: Option<u32>) -> bool {
        match self {
            NoPrediction::Failed(_) => true,
            NoPrediction::Below { needed: below, .. } => needed.is_some_and(|n| n >= *below),
        }
    }
}

impl std::fmt::Display for NoPrediction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoPrediction::Failed(reason) => f.write_str(reason),
            NoPrediction::Below { needed, why } => {
                write!(
                    f,
                    "predicted to hold fewer than {needed} users per instance ({why})"
                )
            }
        }
    }
}

pub trait CapacityPredictor {
    /// A predicted capacity point for one instance of `model` laid out as `parallel` on cards
    /// of `node` (several nodes when it needs more cards than one has), at the
    /// SLO and workload the predictor was set up with; `Err` says why there is none (or that
    /// [`CapacityPredictor::prepare`] found it below the users it needed).
    fn predict(
        &mut self,
        model: &Model,
        card: &Card,
        node: &Node,
        parallel: Parallelism,
    ) -> Result<CapacityPoint, NoPrediction>;

    /// About how many users one instance of the layout holds, without simulating it (an
    /// estimate to order the layouts by and start their searches near); `None` when the
    /// predictor cannot tell.
    fn estimate(
        &mut self,
        model: &Model,
        card: &Card,
        node: &Node,
        parallel: Parallelism,
    ) -> Option<f64> {
        let _ = (model, card, node, parallel);
        None
    }

    /// [`CapacityPredictor::estimate`] of each layout in `wanted`, in order, at once (a plan
    /// orders hundreds by it). By default one after the other.
    fn estimate_all(&mut self, wanted: &[Wanted]) -> Vec<Option<f64>> {
        wanted
            .iter()
            .map(|w| self.estimate(w.model, w.card, w.node, w.parallel))
            .collect()
    }

    /// The same layout as the decode workers of a disaggregated deployment: the users a
    /// decode worker's worth of cards holds (the deployment's users per card, whatever its
    /// prefill workers' layout) and the prefill:decode split chosen for the SLO; `Err` says why
    /// there is none. By default: none.
    fn predict_disaggregated(
        &mut self,
        model: &Model,
        card: &Card,
        node: &Node,
        parallel: Parallelism,
    ) -> Result<(CapacityPoint, PdSplit), String> {
        let _ = (model, card, node, parallel);
        Err("this predictor does not model disaggregated serving".into())
    }

    /// Predicts the disaggregated deployments of the layouts in `wanted` ahead of
    /// [`CapacityPredictor::predict_disaggregated`] asking for them, at once. By default:
    /// nothing ahead.
    fn prepare_disaggregated(&mut self, wanted: &[(&Model, &Card, &Node, Parallelism)]) {
        let _ = wanted;
    }

    /// Predicts `model`'s layouts for users pausing `think` between requests instead of the
    /// think time the predictor was set up with, so that a plan counts users one way per
    /// model (the way its measured points counted them). Called before any prediction of
    /// `model`. By default: ignored.
    fn assume_think_time(&mut self, model: &Model, think: ThinkTime) {
        let _ = (model, think);
    }

    /// Predicts the layouts in `wanted` ahead of [`CapacityPredictor::predict`] asking for
    /// them, so that they can run at once (a plan asks for hundreds); a layout with users
    /// `needed` may stop as soon as its C* is proved lower. By default: nothing ahead.
    fn prepare(&mut self, wanted: &[Wanted]) {
        let _ = wanted;
    }

    /// The predicted C* of each layout a point in `measured` was measured on, at the point's
    /// own SLO, think time and output length (the prompt length is the predictor's), answers in
    /// order: what the planner sets beside each measurement to correct the predictions for that
    /// card. `Err` says why there is none.
    fn predict_like_all(
        &mut self,
        measured: &[(&Model, &Card, &CapacityPoint)],
    ) -> Vec<Result<CapacityPoint, String>>;

    /// The assumptions behind every prediction (workload, SLO, calibration) and what each
    /// card's step times rest on, for the report.
    fn assumptions(&self) -> PredictionAssumptions;
}

/// What predicted rows assume. The step-time bases are kept apart from the one-line summary
/// because a plan over the whole catalog predicts on some thirty cards: joined into the summary
/// they made a paragraph of several thousand characters nobody could scan for their card.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredictionAssumptions {
    /// Scheduler, workload, SLO and calibration every prediction shares.
    pub summary: String,
    /// What the step times rest on, each basis once with the cards that use it, in the order
    /// first used.
    pub step_times: Vec<StepTimeBasis>,
}

/// One step-time basis (measured operator tables of one system and engine, or the roofline)
/// and the cards whose predictions rest on it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepTimeBasis {
    pub basis: String,
    pub cards: Vec<String>,
}

impl PredictionAssumptions {
    /// Groups `(card, basis)` pairs by basis: the cards without tables share the roofline's.
    pub fn new(summary: String, bases: &[(String, String)]) -> PredictionAssumptions {
        let mut step_times: Vec<StepTimeBasis> = Vec::new();
        for (card, basis) in bases {
            match step_times.iter_mut().find(|b| &b.basis == basis) {
                Some(known) => known.cards.push(card.clone()),
                None => step_times.push(StepTimeBasis {
                    basis: basis.to_string(),
                    cards: vec![card.clone()],
                }),
            }
        }
        PredictionAssumptions {
            summary,
            step_times,
        }
    }
}
