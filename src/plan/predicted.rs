//! Capacity nobody measured: the planner asks a predictor (the simulated engine) for C* where
//! no measured or imported point applies. The trait keeps planning independent of how the
//! prediction is made.

use crate::catalog::{Card, Model, Node};
use crate::store::CapacityPoint;

pub trait CapacityPredictor {
    /// A predicted capacity point for one instance of `model` on `tp` cards of `node`, at the
    /// SLO and workload the predictor was set up with; `Err` says why there is none.
    fn predict(
        &mut self,
        model: &Model,
        card: &Card,
        node: &Node,
        tp: u32,
    ) -> Result<CapacityPoint, String>;

    /// The assumptions behind every prediction (workload, SLO, calibration), for the report.
    fn assumptions(&self) -> String;
}
