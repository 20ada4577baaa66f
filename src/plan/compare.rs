//! Procurement: every candidate's plan with what it costs over the period, ranked by total
//! cost; what is already owned; and the cheapest mix of node types when asked.

use serde::Serialize;

use super::cost::{CostAssumptions, NodeCost, PlanCost};
use super::demand::Demand;
use super::mix::{cheapest_mix, MixItem};
use super::solve::{NodePlan, SolveReport};
use crate::catalog::names::find;
use crate::catalog::Catalog;
use crate::error::InputError;

/// Nodes already owned: a node shape and how many.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Owned {
    pub node: String,
    pub nodes: u64,
}

/// `NODE:COUNT` or `CARD:COUNT` (a card with one node shape), checked against the catalog.
pub fn parse_inventory(text: &str, catalog: &Catalog) -> Result<Owned, InputError> {
    let (name, count) = text.rsplit_once(':').ok_or_else(|| {
        InputError::value(format!(
            "inventory '{text}': use NODE:COUNT, e.g. 8xA100-80G-SXM:40"
        ))
    })?;
    let nodes: u64 = count.trim().parse().map_err(|_| {
        InputError::value(format!(
            "inventory '{text}': '{count}' is not a whole number of nodes"
        ))
    })?;
    if let Some(node) = find(&catalog.nodes, name.trim()) {
        return Ok(Owned {
            node: node.name.clone(),
            nodes,
        });
    }
    if let Some(card) = find(&catalog.cards, name.trim()) {
        let shapes: Vec<&str> = catalog.nodes_of(card).map(|n| n.name.as_str()).collect();
        return match shapes.as_slice() {
            [one] => Ok(Owned {
                node: one.to_string(),
                nodes,
            }),
            _ => Err(InputError::value(format!(
                "inventory '{text}': {} comes in several node shapes ({}); name one",
                card.name,
                shapes.join(", ")
            ))),
        };
    }
    Err(InputError::UnknownName {
        kind: "node",
        name: name.to_string(),
        hint: crate::catalog::names::suggestion(&catalog.nodes, name, "node"),
    })
}

/// What to compare beyond the plan itself.
#[derive(Debug, Clone, Serialize)]
pub struct CompareOptions {
    pub costs: CostAssumptions,
    pub inventory: Vec<Owned>,
    /// Look for the cheapest mix of node types.
    pub mix: bool,
}

/// One candidate's plan with its costs.
#[derive(Debug, Clone, Serialize)]
pub struct CostedPlan {
    #[serde(flatten)]
    pub plan: NodePlan,
    /// Owned nodes the plan uses (their purchase is not counted again).
    pub owned_nodes_used: u64,
    pub cost: PlanCost,
    /// Output tokens per second the demand generates, where the evidence says enough.
    pub tokens_per_s: Option<f64>,
    /// 1 = cheapest over the period for this model.
    pub cost_rank: usize,
    /// For a predicted C*: nodes and total cost if the measured C* lands at either end of
    /// its error band (more nodes at the low end).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub band: Option<CostBand>,
}

/// Nodes and total cost across a prediction's error band.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CostBand {
    pub nodes_low: u64,
    pub nodes_high: u64,
    pub total_usd_low: Option<f64>,
    pub total_usd_high: Option<f64>,
}

/// The nodes `plan` needs if each instance held `per_instance` (in the demand's units).
fn nodes_at(plan: &NodePlan, request: &super::SolveRequest, per_instance: f64) -> u64 {
    let demand = match request.demand {
        Demand::Users(users) => users as f64,
        Demand::Rps(rps) => rps,
    };
    let per_group = f64::from(plan.split.instances) * per_instance;
    if per_group <= 0.0 {
        return u64::MAX;
    }
    (demand * (1.0 + request.headroom) / per_group - 1e-9)
        .ceil()
        .max(1.0) as u64
        * u64::from(plan.split.nodes)
        + u64::from(request.spares)
}

/// `plan`'s nodes and cost over its prediction's error band, if it has one.
fn cost_band(plan: &NodePlan, request: &super::SolveRequest, cost: &PlanCost) -> Option<CostBand> {
    let band = plan.evidence_band.as_ref()?;
    // The band is on C* as the evidence counted users; the plan may have converted it.
    let factor = plan.users_per_instance / plan.evidence_c_star.max(1e-12);
    let nodes_low = nodes_at(plan, request, band.high * factor);
    let nodes_high = nodes_at(plan, request, band.low * factor);
    let per_node = cost.total_usd.map(|t| t / plan.nodes.max(1) as f64);
    Some(CostBand {
        nodes_low,
        nodes_high,
        total_usd_low: per_node.map(|c| c * nodes_low as f64),
        total_usd_high: per_node.map(|c| c * nodes_high as f64),
    })
}

/// A part of a mixed fleet.
#[derive(Debug, Clone, Serialize)]
pub struct MixPart {
    pub node: String,
    pub split: String,
    pub nodes: u64,
    pub owned: bool,
    pub capacity: f64,
    pub cost_usd: f64,
}

/// The cheapest mix for one model, against the cheapest single type.
#[derive(Debug, Clone, Serialize)]
pub struct FleetMix {
    pub model: String,
    pub parts: Vec<MixPart>,
    pub capacity: f64,
    pub total_usd: f64,
    pub best_single_node: Option<String>,
    pub best_single_usd: Option<f64>,
    /// The mix costs less than every single node type.
    pub beats_every_single_type: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct CompareReport {
    /// The scenario file's name and description, when the question came from one.
    pub scenario: Option<ScenarioName>,
    pub options: CompareOptions,
    pub plan: SolveReport,
    pub costed: Vec<CostedPlan>,
    pub mixes: Vec<FleetMix>,
    /// Nodes and cost when the demand or the SLO move (filled in by the caller, who can solve
    /// again).
    pub sensitivity: Option<super::sensitivity::Sensitivity>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScenarioName {
    pub name: String,
    pub description: Option<String>,
}

/// Requests per second and output tokens per second the demand generates on `plan`'s evidence:
/// a user sends one request every E2E + think time (E2E at C*, the planned load).
fn demand_rates(plan: &NodePlan, request: &super::SolveRequest) -> (Option<f64>, Option<f64>) {
    let rps = match request.demand {
        Demand::Rps(rps) => Some(rps),
        Demand::Users(users) => {
            let think = request
                .think_time
                .unwrap_or(plan.evidence_think_time)
                .mean_s();
            plan.evidence_e2e_mean_s.map(|r| users as f64 / (r + think))
        }
    };
    let tokens = match (rps, plan.evidence_output_tokens) {
        (Some(rps), Some(tokens)) => Some(rps * tokens),
        _ => None,
    };
    (rps, tokens)
}

fn owned_of(options: &CompareOptions, node: &str) -> u64 {
    options
        .inventory
        .iter()
        .filter(|o| o.node == node)
        .map(|o| o.nodes)
        .sum()
}

/// Costs every plan in `report`, ranks them, and finds the cheapest mixes when asked.
pub fn compare(catalog: &Catalog, report: SolveReport, options: &CompareOptions) -> CompareReport {
    let assumptions = &options.costs;
    let demand = match report.request.demand {
        Demand::Users(users) => users as f64,
        Demand::Rps(rps) => rps,
    };
    let mut costed: Vec<CostedPlan> = Vec::new();
    let mut notes = Vec::new();
    for plan in &report.plans {
        let (Some(node), Some(card)) = (
            find(&catalog.nodes, &plan.node),
            find(&catalog.cards, &plan.card),
        ) else {
            continue;
        };
        let node_cost = NodeCost::of(node, card, assumptions);
        let owned_nodes_used = owned_of(options, &plan.node).min(plan.nodes);
        let (_, tokens_per_s) = demand_rates(plan, &report.request);
        let mut cost = PlanCost::of(&node_cost, plan.nodes, demand, tokens_per_s, assumptions);
        if owned_nodes_used > 0 && !assumptions.cloud {
            // Owned nodes are paid for: only their energy counts.
            let saved = node_cost.price_usd.unwrap_or(0.0) * owned_nodes_used as f64;
            cost.capex_usd = cost.capex_usd.map(|c| c - saved);
            cost.total_usd = cost.total_usd.map(|t| t - saved);
            cost.usd_per_demand_unit = cost.total_usd.map(|t| t / demand.max(1e-12));
            cost.usd_per_million_tokens = match (cost.total_usd, tokens_per_s) {
                (Some(t), Some(rate)) if rate > 0.0 => {
                    Some(t / (rate * assumptions.hours() * 3600.0 / 1e6))
                }
                _ => None,
            };
        }
        let band = cost_band(plan, &report.request, &cost);
        costed.push(CostedPlan {
            plan: plan.clone(),
            owned_nodes_used,
            cost,
            tokens_per_s,
            cost_rank: 0,
            band,
        });
    }
    // Cheapest first per model; options without a price last.
    costed.sort_by(|a, b| {
        a.plan
            .model
            .cmp(&b.plan.model)
            .then(match (a.cost.total_usd, b.cost.total_usd) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => a.plan.nodes.cmp(&b.plan.nodes),
            })
    });
    let mut rank = 0;
    let mut model = String::new();
    for option in &mut costed {
        if option.plan.model != model {
            model = option.plan.model.clone();
            rank = 0;
        }
        rank += 1;
        option.cost_rank = rank;
    }
    // Adjacent ranks whose cost ranges overlap within the predictions' error bands are not
    // told apart by the model: say so.
    for pair in costed.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.plan.model != b.plan.model || (a.band.is_none() && b.band.is_none()) {
            continue;
        }
        let range = |c: &CostedPlan| match (c.band, c.cost.total_usd) {
            (Some(band), _) => band.total_usd_low.zip(band.total_usd_high),
            (None, Some(total)) => Some((total, total)),
            (None, None) => None,
        };
        if let (Some((_, a_high)), Some((b_low, _))) = (range(a), range(b)) {
            if b_low <= a_high {
                notes.push(format!(
                    "{}: ranks {} ({}) and {} ({}) overlap within the predictions' error bands \
                     (up to US$ {:.2} M against from US$ {:.2} M): the model cannot tell them \
                     apart — measure one of each before buying",
                    a.plan.model,
                    a.cost_rank,
                    a.plan.node,
                    b.cost_rank,
                    b.plan.node,
                    a_high / 1e6,
                    b_low / 1e6
                ));
            }
        }
    }
    if costed.iter().any(|c| c.cost.total_usd.is_none()) {
        notes.push(if assumptions.cloud {
            "options without a cloud price in the catalog are listed last, unranked".into()
        } else {
            "options without a node price in the catalog are listed last, unranked".into()
        });
    }

    let mut mixes = Vec::new();
    if options.mix {
        let mut models: Vec<String> = costed.iter().map(|c| c.plan.model.clone()).collect();
        models.dedup();
        for model in models {
            let mut items = Vec::new();
            let mut sources: Vec<(&CostedPlan, bool)> = Vec::new();
            for option in costed.iter().filter(|c| c.plan.model == model) {
                let (Some(node), Some(card)) = (
                    find(&catalog.nodes, &option.plan.node),
                    find(&catalog.cards, &option.plan.card),
                ) else {
                    continue;
                };
                let node_cost = NodeCost::of(node, card, assumptions);
                let Some(full) = node_cost.total(assumptions) else {
                    continue;
                };
                items.push(MixItem {
                    name: option.plan.node.clone(),
                    capacity: option.plan.users_per_node,
                    cost: full,
                    max_count: None,
                });
                sources.push((option, false));
                let owned = owned_of(options, &option.plan.node);
                if owned > 0 && !assumptions.cloud {
                    items.push(MixItem {
                        name: format!("{} (owned)", option.plan.node),
                        capacity: option.plan.users_per_node,
                        cost: node_cost.owned_total(assumptions).unwrap_or(full),
                        max_count: Some(owned),
                    });
                    sources.push((option, true));
                }
            }
            let target = demand * (1.0 + report.request.headroom);
            let Some(solution) = cheapest_mix(&items, target) else {
                continue;
            };
            let parts: Vec<MixPart> = solution
                .counts
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(i, &n)| MixPart {
                    node: sources[i].0.plan.node.clone(),
                    split: sources[i].0.plan.split.to_string(),
                    nodes: n,
                    owned: sources[i].1,
                    capacity: n as f64 * items[i].capacity,
                    cost_usd: n as f64 * items[i].cost,
                })
                .collect();
            let best_single = costed
                .iter()
                .filter(|c| c.plan.model == model)
                .filter_map(|c| Some((c.plan.node.clone(), c.cost.total_usd?)))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            mixes.push(FleetMix {
                model,
                capacity: solution.capacity,
                total_usd: solution.cost,
                beats_every_single_type: best_single
                    .as_ref()
                    .is_some_and(|(_, cost)| solution.cost < cost - 1e-6),
                best_single_node: best_single.as_ref().map(|b| b.0.clone()),
                best_single_usd: best_single.map(|b| b.1),
                parts,
            });
        }
        if report.request.spares > 0 {
            notes.push("mixes carry the demand with headroom; spares are counted per single node type only".into());
        }
    }
    CompareReport {
        scenario: None,
        options: options.clone(),
        plan: report,
        costed,
        mixes,
        sensitivity: None,
        notes,
    }
}
