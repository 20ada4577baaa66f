//! Capacity nobody measured: the planner asks a predictor (the simulated engine) for C* where
//! no measured or imported point applies. The trait keeps planning independent of how the
//! prediction is made.

use crate::catalog::{Card, Model, Node, Parallelism, PdSplit};
use crate::store::CapacityPoint;
use crate::workload::ThinkTime;

pub trait CapacityPredictor {
    /// A predicted capacity point for one instance of `model` laid out as `parallel` on cards
    /// of `node` (several nodes when it needs more cards than one has), at the
    /// SLO and workload the predictor was set up with; `Err` says why there is none.
    fn predict(
        &mut self,
        model: &Model,
        card: &Card,
        node: &Node,
        parallel: Parallelism,
    ) -> Result<CapacityPoint, String>;

    /// The same layout as workers of a disaggregated deployment: the users one worker
    /// holds (the deployment's over its workers) and the prefill:decode split chosen for the
    /// SLO; `Err` says why there is none. By default: none.
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

    /// Predicts the layouts in `wanted` ahead of [`CapacityPredictor::predict`] asking for them,
    /// so that they can run at once (a plan asks for hundreds). By default: nothing ahead.
    fn prepare(&mut self, wanted: &[(&Model, &Card, &Node, Parallelism)]) {
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

    /// The assumptions behind every prediction (workload, SLO, calibration), for the report.
    fn assumptions(&self) -> String;
}
