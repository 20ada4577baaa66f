//! Which capacity points may stand behind a plan, and why the others may not.

use serde::Serialize;

use super::demand::Demand;
use crate::slo::Slo;
use crate::store::CapacityPoint;
use crate::workload::ThinkTime;

/// A capacity point that was relevant (same model, a candidate card) but could not be used.
#[derive(Debug, Clone, Serialize)]
pub struct SkippedPoint {
    pub origin: String,
    pub model: String,
    pub card: String,
    pub tp: u32,
    pub users_per_instance: f64,
    pub reason: String,
}

impl SkippedPoint {
    pub fn new(point: &CapacityPoint, reason: String) -> Self {
        SkippedPoint {
            origin: point.origin.clone(),
            model: point.model.clone(),
            card: point.card.clone(),
            tp: point.tp,
            users_per_instance: point.users_per_instance,
            reason,
        }
    }
}

/// Why `point` cannot prove capacity for this demand, SLO and think time, or `None` if it can.
pub fn why_not_usable(
    point: &CapacityPoint,
    demand: &Demand,
    slo: &Slo,
    think_time: Option<&ThinkTime>,
) -> Option<String> {
    if let Some(reason) = point.slo.why_not_proof_of(slo) {
        return Some(reason);
    }
    if let Demand::Rps(_) = demand {
        return Some(
            "a request rate turns into in-flight users through the E2E latency at C* \
             (in-flight = rate × R); a capacity table does not carry R — plan with --users, \
             or probe the layout so a fitted run provides it"
                .into(),
        );
    }
    if let Some(asked) = think_time {
        if !point.think_time.same_mean(asked) {
            return Some(format!(
                "counted users with think time {} (mean {:.2} s), not {} as asked; converting needs \
                 the E2E latency at C* (users × R / (R + Z)), which a capacity table does not carry",
                point.think_time,
                point.think_time.mean_s(),
                asked
            ));
        }
    }
    None
}
