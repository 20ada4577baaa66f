//! How much an answer moves when the question does: nodes and cost of every candidate at
//! 20 % fewer and more users (or requests/s) and at the next stricter and looser SLO (limits
//! × 0.8 and × 1.25). A plan that doubles its nodes at a slightly stricter SLO is one to
//! measure again before buying.

use serde::Serialize;

use super::compare::CompareReport;
use super::demand::Demand;
use super::solve::SolveRequest;

/// One variation of the question.
#[derive(Debug, Clone, Serialize)]
pub struct Variant {
    pub label: String,
    pub request: SolveRequest,
}

/// A candidate's nodes and total cost under each variant (`None`: no plan there).
#[derive(Debug, Clone, Serialize)]
pub struct SensitivityRow {
    pub model: String,
    pub node: String,
    pub cells: Vec<Option<(u64, Option<f64>)>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Sensitivity {
    /// The labels, in column order; the base case is the middle one.
    pub variants: Vec<String>,
    pub rows: Vec<SensitivityRow>,
}

/// The four variations of `base`, plus `base` itself in the middle.
pub fn variants(base: &SolveRequest) -> Vec<Variant> {
    let scaled_demand = |factor: f64| match base.demand {
        Demand::Users(users) => Demand::Users(((users as f64) * factor).round().max(1.0) as u64),
        Demand::Rps(rps) => Demand::Rps(rps * factor),
    };
    let scaled_slo = |factor: f64| {
        let mut request = base.clone();
        request.slo.ttft_s *= factor;
        request.slo.tpot_s = request.slo.tpot_s.map(|t| t * factor);
        request
    };
    let with_demand = |factor: f64| SolveRequest {
        demand: scaled_demand(factor),
        ..base.clone()
    };
    vec![
        Variant {
            label: "demand −20 %".into(),
            request: with_demand(0.8),
        },
        Variant {
            label: "stricter SLO (× 0.8)".into(),
            request: scaled_slo(0.8),
        },
        Variant {
            label: "as asked".into(),
            request: base.clone(),
        },
        Variant {
            label: "looser SLO (× 1.25)".into(),
            request: scaled_slo(1.25),
        },
        Variant {
            label: "demand +20 %".into(),
            request: with_demand(1.2),
        },
    ]
}

/// Runs `answer` for every variant of `base` and tabulates the candidates of `base`'s answer.
pub fn sensitivity(
    base: &CompareReport,
    mut answer: impl FnMut(&SolveRequest) -> anyhow::Result<CompareReport>,
) -> anyhow::Result<Sensitivity> {
    let variants = variants(&base.plan.request);
    let mut answers = Vec::new();
    for variant in &variants {
        answers.push(if variant.label == "as asked" {
            None
        } else {
            Some(answer(&variant.request)?)
        });
    }
    let rows = base
        .costed
        .iter()
        .map(|option| SensitivityRow {
            model: option.plan.model.clone(),
            node: option.plan.node.clone(),
            cells: answers
                .iter()
                .map(|report| {
                    let report = report.as_ref().unwrap_or(base);
                    report
                        .costed
                        .iter()
                        .find(|c| {
                            c.plan.model == option.plan.model && c.plan.node == option.plan.node
                        })
                        .map(|c| (c.plan.nodes, c.cost.total_usd))
                })
                .collect(),
        })
        .collect();
    Ok(Sensitivity {
        variants: variants.into_iter().map(|v| v.label).collect(),
        rows,
    })
}
