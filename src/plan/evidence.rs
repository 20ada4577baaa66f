//! Which capacity points may stand behind a plan, and why the others may not.

use serde::Serialize;

use super::demand::Demand;
use crate::slo::Slo;
use crate::store::CapacityPoint;
use crate::workload::{Speculation, ThinkTime};

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

/// Why `point` cannot prove capacity at this SLO, or `None` if it can.
pub fn why_not_usable(point: &CapacityPoint, slo: &Slo) -> Option<String> {
    point.slo.why_not_proof_of(slo)
}

/// Why `point` does not answer a plan that asks for `asked` speculative decoding (`None`:
/// none). A deployment with a drafter holds different users from one without (MTP on
/// DeepSeek-R1 nearly doubles a TPOT-bound C*), so a measured or imported point is evidence
/// only for the same drafter and draft length; the acceptance is the workload's and may differ.
pub fn why_not_same_decoding(point: &CapacityPoint, asked: Option<&Speculation>) -> Option<String> {
    match (&point.speculation, asked) {
        (None, None) => None,
        (Some(had), Some(asked))
            if had.drafter == asked.drafter && had.draft_tokens == asked.draft_tokens =>
        {
            None
        }
        (None, Some(asked)) => Some(format!(
            "run without speculative decoding; the plan asks for {asked}"
        )),
        (Some(had), None) => Some(format!(
            "run with speculative decoding ({had}); the plan asks for none (--speculative to \
             plan with it)"
        )),
        (Some(had), Some(asked)) => Some(format!("run with {had}; the plan asks for {asked}")),
    }
}

/// A point's capacity in the units of the demand, and the conversion made, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct DemandCapacity {
    /// Users (as the demand counts them) or requests per second, per instance.
    pub per_instance: f64,
    pub conversion: Option<String>,
}

/// `point`'s capacity in the demand's units.
///
/// A closed-loop user with think time Z keeps R/(R + Z) requests in flight on average (R the
/// mean E2E latency), and the instance holds C* users at the point's think time Zp — so it holds
/// in flight C*·R/(R + Zp) requests; as users with think time Z that is C*·(R + Z)/(R + Zp),
/// and as a request rate C*/(R + Zp) (Little's law: in flight = rate × R). Converting needs R at
/// C*, which fitted runs and predictions carry and plain capacity tables usually do not.
pub fn in_demand_units(
    point: &CapacityPoint,
    demand: &Demand,
    think_time: Option<&ThinkTime>,
) -> Result<DemandCapacity, String> {
    let c_star = point.users_per_instance;
    let point_z = point.think_time.mean_s();
    let unconverted = DemandCapacity {
        per_instance: c_star,
        conversion: None,
    };
    match (demand, think_time) {
        (Demand::Users(_), None) => Ok(unconverted),
        (Demand::Users(_), Some(asked)) if point.think_time.same_mean(asked) => Ok(unconverted),
        (Demand::Users(_), Some(asked)) => {
            let r = point.e2e_mean_s.ok_or_else(|| {
                format!(
                    "counted users with think time {} (mean {:.2} s), not {} as asked; converting \
                     needs the E2E latency at C* (users × R / (R + Z)), which this point does not \
                     carry — probe the layout (a fitted run carries it) or add e2e_mean_s to the table",
                    point.think_time,
                    point_z,
                    asked
                )
            })?;
            let z = asked.mean_s();
            let users = c_star * (r + z) / (r + point_z);
            Ok(DemandCapacity {
                per_instance: users,
                conversion: Some(format!(
                    "{} users at think time {:.2} s = {:.1} in flight (E2E {:.2} s) = {:.1} users at {:.2} s",
                    crate::report::count(c_star),
                    point_z,
                    c_star * r / (r + point_z),
                    r,
                    users,
                    z
                )),
            })
        }
        (Demand::Rps(_), _) => {
            let r = point.e2e_mean_s.ok_or_else(|| {
                "a request rate turns into in-flight users through the E2E latency at C* \
                 (in-flight = rate × R); this point does not carry R — probe the layout (a fitted \
                 run carries it) or add e2e_mean_s to the table"
                    .to_string()
            })?;
            let rate = c_star / (r + point_z);
            Ok(DemandCapacity {
                per_instance: rate,
                conversion: Some(format!(
                    "{} users at think time {:.2} s with E2E {:.2} s send {:.3} requests/s ({:.1} in flight)",
                    crate::report::count(c_star),
                    point_z,
                    r,
                    rate,
                    rate * r
                )),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slo::Percentile;

    fn point(think: f64, e2e: Option<f64>) -> CapacityPoint {
        CapacityPoint {
            pd: None,
            speculation: None,
            model: "m".into(),
            card: "c".into(),
            interconnect: "nvlink".into(),
            cards_per_node: None,
            instances_per_node: None,
            instances_per_card: 1,
            tp: 1,
            parallel: crate::catalog::Parallelism::tensor(1),
            users_per_instance: 100.0,
            slo: Slo {
                ttft_s: 1.0,
                tpot_s: None,
                percentile: Percentile::P(90.0),
                e2e_s: None,
            },
            think_time: ThinkTime::fixed(think),
            source: crate::store::PointSource::Measured,
            note: String::new(),
            origin: "t".into(),
            e2e_mean_s: e2e,
            output_tokens: None,
            engine: None,
            band: None,
            measured_by: None,
            requests_per_user: None,
        }
    }

    #[test]
    fn little_converts_think_time_and_rates() {
        // 100 back-to-back users, E2E 4 s: 100 in flight, 25 requests/s.
        let p = point(0.0, Some(4.0));
        let rate = in_demand_units(&p, &Demand::Rps(10.0), None).unwrap();
        assert!((rate.per_instance - 25.0).abs() < 1e-9);
        // Users pausing 4 s are in flight half the time: 200 of them fill the same instance.
        let users =
            in_demand_units(&p, &Demand::Users(1000), Some(&ThinkTime::fixed(4.0))).unwrap();
        assert!((users.per_instance - 200.0).abs() < 1e-9, "{users:?}");
        assert!(users.conversion.unwrap().contains("100.0 in flight"));
        // Measured with think time 2 s (E2E 2 s: 50 in flight) asked back to back: 50 users.
        let thinking = point(2.0, Some(2.0));
        let back_to_back =
            in_demand_units(&thinking, &Demand::Users(10), Some(&ThinkTime::NONE)).unwrap();
        assert!((back_to_back.per_instance - 50.0).abs() < 1e-9);
        // The same think time needs no latency; another one does.
        let bare = point(2.0, None);
        let same = in_demand_units(&bare, &Demand::Users(10), Some(&ThinkTime::fixed(2.0)));
        assert_eq!(same.unwrap().per_instance, 100.0);
        let err = in_demand_units(&bare, &Demand::Rps(1.0), None).unwrap_err();
        assert!(err.contains("E2E"), "{err}");
    }
}
