//! From capacity per instance to nodes per candidate: the planner's core.
//!
//! For each model and node shape, every split of the node that fits in memory is tried with the
//! best capacity point that proves the SLO asked for (measured ≻ imported ≻ predicted, then the
//! highest C*). users per node = instances × C*; nodes = ⌈users × (1 + headroom) / users per
//! node⌉ + spares. A point measured on one node shape serves every node shape of the same card
//! whose cards are linked the same way, because C* is a property of the instance, not the node.

use serde::Serialize;

use super::ahead::{predict_ahead, Ranking};
use super::correction::PredictionCorrections;
use super::demand::{nodes_needed, Demand};
use super::evidence::{
    in_demand_units, why_not_same_decoding, why_not_usable, DemandCapacity, SkippedPoint,
};
use super::predicted::{CapacityPredictor, NoPrediction, PredictionAssumptions};
use super::split::NodeSplit;
use crate::catalog::memory::memory_fit_layout;
use crate::catalog::names::{find, suggestion};
use crate::catalog::{Card, Catalog, MemoryOptions, Model, Node};
use crate::error::InputError;
use crate::slo::Slo;
use crate::store::{CapacityPoint, PointSource};
use crate::workload::{Speculation, ThinkTime};

/// Node shapes of each model tried as disaggregated deployments: the leading ones of the
/// aggregated ranking (each costs two more predictions; one far down the ranking would need
/// to more than halve its nodes to matter).
const DISAGGREGATED_PER_MODEL: usize = 4;

/// What to plan for.
#[derive(Debug, Clone, Serialize)]
pub struct SolveRequest {
    pub demand: Demand,
    pub slo: Slo,
    /// `None`: users are counted as each capacity point counted them.
    pub think_time: Option<ThinkTime>,
    /// Model names; empty means every model that has capacity points.
    pub models: Vec<String>,
    /// Card or node names; empty means every node shape in the catalog.
    pub cards: Vec<String>,
    pub headroom: f64,
    pub spares: u32,
    pub memory: MemoryOptions,
    /// Speculative decoding the plan asks for (`None`: none): measured or imported points run
    /// otherwise are not evidence for it.
    pub speculation: Option<Speculation>,
}

/// The plan for one model on one node shape, with the split that needs the fewest nodes.
#[derive(Debug, Clone, Serialize)]
pub struct NodePlan {
    pub model: String,
    pub card: String,
    pub node: String,
    pub interconnect: String,
    pub cards_per_node: u32,
    pub split: NodeSplit,
    /// Capacity per instance in the demand's units: users as asked, or requests/s.
    pub users_per_instance: f64,
    pub users_per_node: f64,
    /// How the evidence's C* was converted into the demand's units, if it was.
    pub conversion: Option<String>,
    /// C* of the evidence, users as it counted them.
    pub evidence_c_star: f64,
    /// Mean E2E latency at C* and output tokens per request of the evidence, when known.
    pub evidence_e2e_mean_s: Option<f64>,
    pub evidence_output_tokens: Option<f64>,
    pub nodes: u64,
    pub cards: u64,
    pub source: PointSource,
    /// `file:line` of the capacity point used.
    pub evidence: String,
    pub evidence_slo: Slo,
    pub evidence_think_time: ThinkTime,
    /// The capacity point's note (for predictions: what limited C*).
    pub evidence_note: String,
    /// For a prediction: where the measured C* is expected (80 %), from the model's error on
    /// held-out public measurements of this engine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence_band: Option<crate::catalog::band::CStarRange>,
    /// For a prediction with a band: the nodes needed were the measured C* at the low end of
    /// the band (what a buyer holding to the 80 % range would have to plan for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes_at_band_low: Option<u64>,
    /// For a prediction ranked above its model's first measured or imported plan: that plan's
    /// rank, when this one would cost more than it at the low end of its band (the ranking
    /// cannot tell the two apart).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub may_not_beat_rank: Option<usize>,
    /// Node price × nodes, from the catalog's editable estimates.
    pub capex_usd: Option<f64>,
    /// 1 = best for this model.
    pub rank: usize,
    /// The best-ranked node shape of this card for this model.
    pub best_for_card: bool,
    /// Every split of this node that was considered.
    pub splits: Vec<SplitOutcome>,
}

/// What became of one split of a node.
#[derive(Debug, Clone, Serialize)]
pub struct SplitOutcome {
    pub split: NodeSplit,
    /// `planned`, `no capacity point`, `does not fit`, `not disaggregated`, or `cannot win`:
    /// predicted only until its C* proved too low to need fewer nodes than the split chosen
    /// (the reason says below how many users per instance).
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub users_per_instance: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<PointSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A model × node shape without a plan, and what would give it one.
#[derive(Debug, Clone, Serialize)]
pub struct MissingCapacity {
    pub model: String,
    pub node: String,
    pub card: String,
    /// Splits that fit in memory but have no capacity point.
    pub fitting_splits: Vec<NodeSplit>,
    pub reason: String,
    pub hint: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct SolveReport {
    pub request: SolveRequest,
    /// How users are counted in this plan.
    pub users_meaning: String,
    /// What predicted rows assume, when predictions were allowed.
    pub predictions: Option<PredictionAssumptions>,
    pub plans: Vec<NodePlan>,
    pub skipped: Vec<SkippedPoint>,
    pub missing: Vec<MissingCapacity>,
    /// Measured or imported points set beside a prediction of the same layout: what
    /// corrected the predictions of their cards.
    pub measured_vs_predicted: Vec<super::correction::MeasuredCheck>,
    /// Anything else the reader must know (e.g. no capacity points at all).
    pub notes: Vec<String>,
}

impl SolveReport {
    pub fn has_plans(&self) -> bool {
        !self.plans.is_empty()
    }
}

/// Plans the fleet for `request` from `points`.
pub fn solve(
    catalog: &Catalog,
    points: &[CapacityPoint],
    request: &SolveRequest,
    mut predictor: Option<&mut dyn CapacityPredictor>,
) -> Result<SolveReport, InputError> {
    check_request(request)?;
    let models = chosen_models(catalog, points, request, predictor.is_some())?;
    let nodes = chosen_nodes(catalog, request)?;
    let demand_units = match request.demand {
        Demand::Users(users) => users as f64,
        Demand::Rps(rps) => rps,
    };

    let mut candidates: Vec<&CapacityPoint> = Vec::new();
    let mut skipped = Vec::new();
    for point in points {
        let relevant = models.iter().any(|m| m.name == point.model)
            && nodes.iter().any(|n| n.card == point.card);
        if !relevant {
            continue;
        }
        let why_not = why_not_usable(point, &request.slo)
            .or_else(|| why_not_same_decoding(point, request.speculation.as_ref()));
        match why_not {
            Some(reason) => skipped.push(SkippedPoint::new(point, reason)),
            None => candidates.push(point),
        }
    }
    // One meaning of "user" per model's ranking: without --think-time, users are counted as
    // the model's measured and imported points counted them, and its predictions assume the
    // same pause.
    let counted = match (&request.demand, &request.think_time) {
        (Demand::Users(_), None) => think_times_counted(&models, &candidates),
        _ => Vec::new(),
    };
    let think_for = |model: &str| -> Option<ThinkTime> {
        request.think_time.or_else(|| {
            counted
                .iter()
                .find(|c| c.model == model)
                .map(|c| c.think_time)
        })
    };
    let mut usable: Vec<&CapacityPoint> = Vec::new();
    for point in candidates {
        let think = think_for(&point.model);
        match in_demand_units(point, &request.demand, think.as_ref()) {
            Ok(_) => usable.push(point),
            Err(reason) => skipped.push(SkippedPoint::new(point, reason)),
        }
    }
    if let Some(predictor) = predictor.as_mut() {
        for model in &models {
            if let Some(found) = counted.iter().find(|c| c.model == model.name) {
                predictor.assume_think_time(model, found.think_time);
            }
        }
    }

    // Every layout that may win its node shape, predicted ahead on all cores, each no further
    // than it can matter (see `ahead`); measured points correct the predictions for their
    // cards (see `correction`).
    let corrections = match predictor.as_mut() {
        Some(predictor) => {
            let ranking = Ranking {
                request,
                demand_units,
                usable: &usable,
            };
            predict_ahead(catalog, &models, &nodes, &ranking, points, &mut **predictor)
        }
        None => PredictionCorrections::default(),
    };

    let planner = NodePlanner {
        catalog,
        usable: &usable,
        demand_units,
        corrections: &corrections,
    };
    // The predicted winners' instances as disaggregated deployments, all at once: a first
    // pass ranks each model's node shapes; on the leading ones the split chosen and the best
    // of the other kind are tried disaggregated (two more predictions each), and the second
    // pass plans with them.
    let mut disaggregate: Vec<(String, String)> = Vec::new();
    if let Some(predictor) = predictor.as_mut() {
        let mut winners = Vec::new();
        for model in &models {
            let model_request = SolveRequest {
                think_time: think_for(&model.name),
                ..request.clone()
            };
            let mut ranked = Vec::new();
            for node in &nodes {
                let mut predictor: Option<&mut dyn CapacityPredictor> = Some(&mut **predictor);
                if let Ok(plan) = plan_node(
                    &planner,
                    model,
                    node,
                    &model_request,
                    &mut Vec::new(),
                    &mut predictor,
                    false,
                ) {
                    ranked.push(plan);
                }
            }
            rank(&mut ranked);
            for plan in ranked.iter().take(DISAGGREGATED_PER_MODEL) {
                let node = nodes.iter().find(|n| n.name == plan.node);
                let card = catalog.cards.iter().find(|c| c.name == plan.card);
                if let (Some(node), Some(card)) = (node, card) {
                    let chosen = (plan.source == PointSource::Predicted).then_some(&plan.split);
                    let tried = disaggregation_candidates(chosen, &plan.splits);
                    for split in &tried {
                        winners.push((*model, card, *node, split.parallel));
                    }
                    if !tried.is_empty() {
                        disaggregate.push((model.name.clone(), node.name.clone()));
                    }
                }
            }
        }
        predictor.prepare_disaggregated(&winners);
    }

    let mut plans = Vec::new();
    let mut missing = Vec::new();
    for model in &models {
        let model_request = SolveRequest {
            think_time: think_for(&model.name),
            ..request.clone()
        };
        let mut model_plans = Vec::new();
        for node in &nodes {
            match plan_node(
                &planner,
                model,
                node,
                &model_request,
                &mut skipped,
                &mut predictor,
                disaggregate.contains(&(model.name.clone(), node.name.clone())),
            ) {
                Ok(plan) => model_plans.push(plan),
                Err(gap) => missing.push(*gap),
            }
        }
        rank(&mut model_plans);
        plans.extend(model_plans);
    }

    let mut notes = corrections.notes();
    notes.extend(super::unproven_lead::flag(&mut plans));
    let predictions = predictor.as_ref().map(|p| p.assumptions());
    if points.is_empty() && predictions.is_none() {
        notes.push(
            "no capacity points were found: put capacity tables (CSV) in measurements/ or pass \
             --measurements DIR"
                .to_string(),
        );
    }
    for found in &counted {
        if let Some(note) = found.mixed_note() {
            notes.push(note);
        }
    }
    let users_meaning = match (&request.demand, &request.think_time) {
        (Demand::Users(_), None) => users_counted_meaning(&models, &counted),
        (Demand::Users(_), Some(think)) => format!(
            "users are concurrent sessions pausing {think} between a response and their next request"
        ),
        (Demand::Rps(_), _) => "a request rate is carried at C* / (R + Z) requests/s per \
             instance: C* users at their think time Z with E2E latency R at C* (Little's law); \
             fitted runs and predictions carry R, capacity tables only with an e2e_mean_s column"
            .to_string(),
    };
    Ok(SolveReport {
        request: request.clone(),
        users_meaning,
        predictions,
        plans,
        skipped,
        missing,
        measured_vs_predicted: corrections.checks.clone(),
        notes,
    })
}

/// The think time a model's plan counts users with, when the request names none: the one its
/// usable measured and imported points were counted with (the most common, when they differ).
#[derive(Debug, Clone)]
struct CountedThinkTime {
    model: String,
    think_time: ThinkTime,
    points: usize,
    /// Think times other points of the model were counted with, and how many.
    others: Vec<(ThinkTime, usize)>,
}

impl CountedThinkTime {
    /// A note when the model's points disagree: the others are converted (Little's law) where
    /// they carry their E2E latency, or skipped.
    fn mixed_note(&self) -> Option<String> {
        if self.others.is_empty() {
            return None;
        }
        let others: Vec<String> = self
            .others
            .iter()
            .map(|(think, n)| format!("{think} ({n})"))
            .collect();
        Some(format!(
            "{}: its points counted users pausing {} ({} point(s)) and {}; the plan counts users \
             as the most common ({}), converting the others through their E2E latency where \
             they carry it — pass --think-time to choose",
            self.model,
            self.think_time,
            self.points,
            others.join(", "),
            self.think_time
        ))
    }
}

fn think_times_counted(models: &[&Model], points: &[&CapacityPoint]) -> Vec<CountedThinkTime> {
    let mut counted = Vec::new();
    for model in models {
        let mut groups: Vec<(ThinkTime, usize)> = Vec::new();
        for point in points.iter().filter(|p| p.model == model.name) {
            match groups
                .iter_mut()
                .find(|(think, _)| think.same_mean(&point.think_time))
            {
                Some((_, n)) => *n += 1,
                None => groups.push((point.think_time, 1)),
            }
        }
        // The most common; among equals, the first seen.
        let Some(best) = (0..groups.len())
            .max_by(|&a, &b| groups[a].1.cmp(&groups[b].1).then_with(|| b.cmp(&a)))
        else {
            continue;
        };
        let (think_time, n) = groups.remove(best);
        counted.push(CountedThinkTime {
            model: model.name.clone(),
            think_time,
            points: n,
            others: groups,
        });
    }
    counted
}

/// How users are counted in a plan that asked for no think time.
fn users_counted_meaning(models: &[&Model], counted: &[CountedThinkTime]) -> String {
    if counted.is_empty() {
        return "users are concurrent sessions sending back to back (no think time), as \
                predicted; --think-time asks for another"
            .to_string();
    }
    let each: Vec<String> = counted
        .iter()
        .map(|c| format!("{} pausing {}", c.model, c.think_time))
        .collect();
    let without: Vec<&str> = models
        .iter()
        .filter(|m| !counted.iter().any(|c| c.model == m.name))
        .map(|m| m.name.as_str())
        .collect();
    let mut text = format!(
        "users are counted one way per model, as its measured and imported points counted them, \
         and its predictions assume the same: {}",
        each.join("; ")
    );
    if !without.is_empty() {
        text.push_str(&format!(
            "; {} (nothing measured): back to back",
            without.join(", ")
        ));
    }
    text.push_str(" (--think-time asks for one think time for every model)");
    text
}

fn check_request(request: &SolveRequest) -> Result<(), InputError> {
    match request.demand {
        Demand::Users(0) => return Err(InputError::value("--users must be above 0")),
        Demand::Rps(rps) if !(rps.is_finite() && rps > 0.0) => {
            return Err(InputError::value(format!(
                "--rps must be above 0, got {rps}"
            )))
        }
        _ => {}
    }
    if !(request.headroom.is_finite() && request.headroom >= 0.0) {
        return Err(InputError::value(format!(
            "--headroom must be 0 or more (0.2 = 20 % extra), got {}",
            request.headroom
        )));
    }
    let util = request.memory.memory_utilization;
    if !(util > 0.0 && util <= 1.0) {
        return Err(InputError::value(format!(
            "memory utilisation must be above 0 and at most 1, got {util}"
        )));
    }
    Ok(())
}

/// The model planned when nothing names one and nothing has been measured.
pub const DEFAULT_MODEL: &str = "llama-3.1-8b";

fn chosen_models<'a>(
    catalog: &'a Catalog,
    points: &[CapacityPoint],
    request: &SolveRequest,
    predicting: bool,
) -> Result<Vec<&'a Model>, InputError> {
    if request.models.is_empty() {
        let measured: Vec<&Model> = catalog
            .models
            .iter()
            .filter(|model| points.iter().any(|p| p.model == model.name))
            .collect();
        if measured.is_empty() && predicting {
            return Ok(vec![catalog.model(DEFAULT_MODEL)?]);
        }
        return Ok(measured);
    }
    let mut models: Vec<&Model> = Vec::new();
    for name in &request.models {
        let model = catalog.model(name)?;
        if !models.iter().any(|m| m.name == model.name) {
            models.push(model);
        }
    }
    Ok(models)
}

/// Node shapes in scope: all, or those of the cards (or nodes) named.
fn chosen_nodes<'a>(
    catalog: &'a Catalog,
    request: &SolveRequest,
) -> Result<Vec<&'a Node>, InputError> {
    if request.cards.is_empty() {
        return Ok(catalog.nodes.iter().collect());
    }
    let mut nodes: Vec<&Node> = Vec::new();
    for name in &request.cards {
        let matched: Vec<&Node> = if let Some(card) = find(&catalog.cards, name) {
            catalog.nodes_of(card).collect()
        } else if let Some(node) = find(&catalog.nodes, name) {
            vec![node]
        } else {
            let near_card = suggestion(&catalog.cards, name, "card");
            let hint = if near_card.contains("nearest") {
                near_card
            } else {
                suggestion(&catalog.nodes, name, "node")
            };
            return Err(InputError::UnknownName {
                kind: "card or node",
                name: name.clone(),
                hint,
            });
        };
        if matched.is_empty() {
            return Err(InputError::value(format!(
                "card '{name}' has no node shape in the catalog; add one to hardware/nodes.toml"
            )));
        }
        for node in matched {
            if !nodes.iter().any(|n| n.name == node.name) {
                nodes.push(node);
            }
        }
    }
    Ok(nodes)
}

/// The splits of `node` to plan `model` on: every single-node layout
/// ([`NodeSplit::layouts_for`]); for a mixture of experts also one instance over two nodes
/// (wide expert parallelism can hold more users per card); and, for a model no single node
/// holds, instances over the fewest nodes (2, 4 or 8) that hold it.
pub(super) fn splits_for(
    model: &Model,
    card: &Card,
    node: &Node,
    memory: &MemoryOptions,
) -> Vec<NodeSplit> {
    let cards = node.cards_per_node;
    let mut splits = NodeSplit::layouts_for(model, cards);
    let fits = |split: &NodeSplit| memory_fit_layout(model, card, &split.parallel, memory).is_ok();
    // Only nodes built to join others (an HGX box, not a one-card cloud instance, nor a
    // 72-card rack whose domain is already the whole instance).
    if node.scale_out_gbs_per_card.is_none() || !(2..=16).contains(&cards) {
        return splits;
    }
    let single_fits = splits.iter().any(fits);
    let mixture = model.experts.is_some_and(|e| e > 1);
    for nodes in [2, 4, 8] {
        if single_fits && !(mixture && nodes == 2) {
            break;
        }
        let spanning = NodeSplit::spanning(model, cards, nodes);
        let found = spanning.iter().any(fits);
        splits.extend(spanning);
        if found && !single_fits {
            break;
        }
    }
    splits
}

/// Whether `point` measured this split of `node`: same model, card, layout and cards shared,
/// on cards linked the same way (see the module doc).
fn serves(
    point: &CapacityPoint,
    model: &Model,
    card: &Card,
    node: &Node,
    split: &NodeSplit,
) -> bool {
    point.model == model.name
        && point.card == card.name
        && point.tp == split.tp
        && point.parallel == split.parallel
        && split.nodes == 1
        && point.instances_per_card == split.per_card
        && node.runs_like(&point.interconnect, point.tp)
}

/// Every split of `node` to plan `model` on: [`splits_for`]'s, then splits sharing cards
/// between instances where a point measured that sharing.
pub(super) fn node_splits(
    model: &Model,
    card: &Card,
    node: &Node,
    usable: &[&CapacityPoint],
    memory: &MemoryOptions,
) -> Vec<NodeSplit> {
    let mut splits = splits_for(model, card, node, memory);
    let mut shared: Vec<u32> = usable
        .iter()
        .filter(|p| p.model == model.name && p.card == card.name && p.instances_per_card > 1)
        .map(|p| p.instances_per_card)
        .collect();
    shared.sort_unstable();
    shared.dedup();
    splits.extend(
        shared
            .into_iter()
            .map(|k| NodeSplit::shared_cards(node.cards_per_node, k)),
    );
    splits
}

/// The measured or imported point that serves `split` of `node`, if any: the best evidence,
/// then the most users.
pub(super) fn measured_point(
    usable: &[&CapacityPoint],
    model: &Model,
    card: &Card,
    node: &Node,
    split: &NodeSplit,
) -> Option<CapacityPoint> {
    usable
        .iter()
        .copied()
        .filter(|p| serves(p, model, card, node, split))
        .min_by(|a, b| {
            a.source
                .cmp(&b.source)
                .then(b.users_per_instance.total_cmp(&a.users_per_instance))
        })
        .cloned()
}

/// Nodes `split` needs with `per_instance` capacity (demand units): instances spanning nodes
/// come in whole groups of `split.nodes` nodes; spares on top.
pub(super) fn split_nodes(
    split: &NodeSplit,
    per_instance: f64,
    demand_units: f64,
    request: &SolveRequest,
) -> u64 {
    let groups = nodes_needed(
        demand_units,
        request.headroom,
        f64::from(split.instances) * per_instance,
        0,
    );
    groups * u64::from(split.nodes) + u64::from(request.spares)
}

/// Why a split whose prediction stopped below the `needed` users (predicted, uncorrected)
/// is not planned: in the units of the planned rows, which are corrected.
fn cannot_win(
    needed: u32,
    why: &str,
    corrections: &PredictionCorrections,
    model: &Model,
    card: &Card,
) -> String {
    let users = match corrections.for_prediction(&model.name, &card.name) {
        Some(correction) => format!(
            "{needed} users per instance ({} after the ×{:.2} correction)",
            correction.of(f64::from(needed)),
            correction.factor
        ),
        None => format!("{needed} users per instance"),
    };
    format!(
        "predicted to hold fewer than {users} ({why}): too few to need fewer nodes than the \
         split chosen, so its search ended there"
    )
}

/// What planning every node shape of every model shares: the catalog, the points usable at
/// the SLO, the demand and the corrections of predictions.
struct NodePlanner<'a> {
    catalog: &'a Catalog,
    usable: &'a [&'a CapacityPoint],
    demand_units: f64,
    corrections: &'a PredictionCorrections,
}

/// The aggregated splits of a node worth trying as disaggregated deployments, when the
/// `chosen` one was predicted: it, and the best predicted split of the other kind among
/// `outcomes` — attention replicas over expert-parallel cards where the chosen split has
/// none, or the reverse. A split that loses aggregated can win disaggregated: DeepSeek-R1 on
/// eight H200s is planned at TP 8 (135 users a node) over DP 8 EP 8, yet DP 8 EP 8 as one
/// prefill and four decode workers held 155. Only whole-card instances are predicted.
fn disaggregation_candidates(
    chosen: Option<&NodeSplit>,
    outcomes: &[SplitOutcome],
) -> Vec<NodeSplit> {
    // A measured or imported plan is not overridden by a prediction (see `plan_node`).
    let Some(chosen) = chosen else {
        return Vec::new();
    };
    let replicated = |split: &NodeSplit| split.parallel.dp > 1;
    let whole = |split: &NodeSplit| split.per_card == 1 && split.disaggregated.is_none();
    let mut candidates: Vec<NodeSplit> = Some(*chosen).filter(whole).into_iter().collect();
    // Of the other kind: the planned split needing the fewest nodes, else — where the search
    // stopped each as soon as it could not beat the chosen one aggregated — the one of the
    // widest instances (the layout disaggregated deployments of these models run).
    let other = outcomes
        .iter()
        .filter(|o| {
            (o.status == "planned" || o.status == "cannot win")
                && o.source == Some(PointSource::Predicted)
                && whole(&o.split)
                && replicated(&o.split) != replicated(chosen)
        })
        .min_by_key(|o| {
            (
                o.status != "planned",
                o.nodes.unwrap_or(u64::MAX),
                o.split.instances,
            )
        });
    if let Some(outcome) = other {
        candidates.push(outcome.split);
    }
    candidates
}

/// The best split of `node` for `model`, or the capacity it is missing; points of no use go
/// to `skipped`, predictions come from `predictor`, and with `disaggregate` the split chosen
/// and the best of the other kind ([`disaggregation_candidates`]) are also tried as
/// disaggregated deployments.
fn plan_node(
    planner: &NodePlanner,
    model: &Model,
    node: &Node,
    request: &SolveRequest,
    skipped: &mut Vec<SkippedPoint>,
    predictor: &mut Option<&mut dyn CapacityPredictor>,
    disaggregate: bool,
) -> Result<NodePlan, Box<MissingCapacity>> {
    let NodePlanner {
        catalog,
        usable,
        demand_units,
        corrections,
    } = *planner;
    let card = catalog
        .cards
        .iter()
        .find(|card| card.name == node.card)
        .expect("the catalog loader checks that every node's card exists");
    let mut outcomes = Vec::new();
    let mut best: Option<(NodeSplit, CapacityPoint, u64, DemandCapacity)> = None;
    let mut fitting = Vec::new();
    let mut first_rejection = None;
    for split in node_splits(model, card, node, usable, &request.memory) {
        let candidates = usable
            .iter()
            .copied()
            .filter(|p| serves(p, model, card, node, &split));
        let share = card.shared_by(split.per_card);
        if let Err(rejected) = memory_fit_layout(model, &share, &split.parallel, &request.memory) {
            for point in candidates {
                let reason =
                    format!("the layout does not fit under the memory options asked: {rejected}");
                if !skipped.iter().any(|s| s.origin == point.origin) {
                    skipped.push(SkippedPoint::new(point, reason));
                }
            }
            first_rejection.get_or_insert_with(|| rejected.reason.clone());
            outcomes.push(SplitOutcome {
                split,
                status: "does not fit".into(),
                users_per_instance: None,
                nodes: None,
                source: None,
                reason: Some(rejected.reason),
            });
            continue;
        }
        fitting.push(split);
        // Predictions only where nothing measured or imported applies; they carry their E2E
        // latency, so they convert to a request rate too.
        let chosen = match (
            measured_point(usable, model, card, node, &split),
            predictor.as_mut(),
        ) {
            (Some(point), _) => Ok(point),
            (None, Some(predictor)) if split.per_card == 1 => predictor
                .predict(model, card, node, split.parallel)
                .map(|point| corrections.apply(point)),
            (None, _) => Err(NoPrediction::Failed(String::new())),
        };
        let chosen = chosen.and_then(|point| {
            let capacity = in_demand_units(&point, &request.demand, request.think_time.as_ref())
                .map_err(NoPrediction::Failed)?;
            Ok((point, capacity))
        });
        let (point, capacity) = match chosen {
            Ok(found) => found,
            Err(NoPrediction::Failed(reason)) => {
                outcomes.push(SplitOutcome {
                    split,
                    status: "no capacity point".into(),
                    users_per_instance: None,
                    nodes: None,
                    source: None,
                    reason: (!reason.is_empty()).then_some(reason),
                });
                continue;
            }
            Err(NoPrediction::Below { needed, why }) => {
                outcomes.push(SplitOutcome {
                    split,
                    status: "cannot win".into(),
                    users_per_instance: None,
                    nodes: None,
                    source: Some(PointSource::Predicted),
                    reason: Some(cannot_win(needed, &why, corrections, model, card)),
                });
                continue;
            }
        };
        let nodes = split_nodes(&split, capacity.per_instance, demand_units, request);
        outcomes.push(SplitOutcome {
            split,
            status: "planned".into(),
            users_per_instance: Some(capacity.per_instance),
            nodes: Some(nodes),
            source: Some(point.source),
            reason: None,
        });
        // Better evidence wins first (a prediction never overrides a measurement of the same
        // node shape), then fewer nodes, then fewer instances (simpler to run).
        let better = match &best {
            None => true,
            Some((best_split, best_point, best_nodes, _)) => {
                (point.source, nodes, split.instances)
                    < (best_point.source, *best_nodes, best_split.instances)
            }
        };
        if better {
            best = Some((split, point, nodes, capacity));
        }
    }

    // The predicted winner's instances as prefill and decode workers, and those of the best
    // split of the other kind (attention replicas or not): kept when that needs fewer nodes
    // (see `crate::sim::disagg`).
    if let (Some(predictor), true) = (predictor.as_mut(), disaggregate) {
        let chosen = best
            .as_ref()
            .filter(|(_, point, _, _)| point.source == PointSource::Predicted)
            .map(|(split, _, _, _)| split);
        for split in disaggregation_candidates(chosen, &outcomes) {
            let tried = predictor
                .predict_disaggregated(model, card, node, split.parallel)
                .map(|(point, pd)| (corrections.apply(point), pd))
                .and_then(|(point, pd)| {
                    let capacity =
                        in_demand_units(&point, &request.demand, request.think_time.as_ref())?;
                    Ok((point, pd, capacity))
                });
            match tried {
                Ok((pd_point, pd, capacity)) => {
                    let pd_nodes =
                        split_nodes(&split, capacity.per_instance, demand_units, request);
                    let pd_split = split.disaggregated(pd);
                    outcomes.push(SplitOutcome {
                        split: pd_split,
                        status: "planned".into(),
                        users_per_instance: Some(capacity.per_instance),
                        nodes: Some(pd_nodes),
                        source: Some(pd_point.source),
                        reason: None,
                    });
                    if best
                        .as_ref()
                        .is_none_or(|(_, _, nodes, _)| pd_nodes < *nodes)
                    {
                        best = Some((pd_split, pd_point, pd_nodes, capacity));
                    }
                }
                Err(reason) => outcomes.push(SplitOutcome {
                    split,
                    status: "not disaggregated".into(),
                    users_per_instance: None,
                    nodes: None,
                    source: None,
                    reason: Some(reason),
                }),
            }
        }
    }

    let Some((split, point, nodes, capacity)) = best else {
        let reason = if fitting.is_empty() {
            format!(
                "no split fits in memory ({})",
                first_rejection.unwrap_or_default()
            )
        } else {
            "no capacity point proves the SLO asked for any split that fits".to_string()
        };
        let hint = match fitting.first() {
            Some(split) => format!(
                "measure it with `capplan probe --model {} --card {} --tp {} --ttft … --tpot …`, \
                 or add a capacity point to a CSV table in measurements/",
                model.name, card.name, split.tp
            ),
            None => {
                "use a card with more memory, a smaller dtype (--dtype fp8), or another node shape"
                    .into()
            }
        };
        return Err(Box::new(MissingCapacity {
            model: model.name.clone(),
            node: node.name.clone(),
            card: card.name.clone(),
            fitting_splits: fitting,
            reason,
            hint,
        }));
    };
    let users_per_node = split.instances_per_node() * capacity.per_instance;
    Ok(NodePlan {
        model: model.name.clone(),
        card: card.name.clone(),
        node: node.name.clone(),
        interconnect: node.interconnect.clone(),
        cards_per_node: node.cards_per_node,
        split,
        users_per_instance: capacity.per_instance,
        users_per_node,
        conversion: capacity.conversion,
        evidence_c_star: point.users_per_instance,
        evidence_e2e_mean_s: point.e2e_mean_s,
        evidence_output_tokens: point.output_tokens,
        nodes,
        cards: nodes * u64::from(node.cards_per_node),
        source: point.source,
        evidence: point.origin.clone(),
        evidence_slo: point.slo,
        evidence_think_time: point.think_time,
        evidence_note: point.note.clone(),
        evidence_band: point.band.clone(),
        nodes_at_band_low: point
            .band
            .as_ref()
            .filter(|band| band.low > 0.0 && point.users_per_instance > 0.0)
            .map(|band| {
                let per_instance = capacity.per_instance * band.low / point.users_per_instance;
                split_nodes(&split, per_instance, demand_units, request)
            }),
        may_not_beat_rank: None,
        capex_usd: node.price_usd.map(|price| price * nodes as f64),
        rank: 0,
        best_for_card: false,
        splits: outcomes,
    })
}

/// Best first: by estimated purchase cost where the catalog has a price, then (without a
/// price) by cards; marks the best node shape of each card.
fn rank(plans: &mut [NodePlan]) {
    plans.sort_by(|a, b| match (a.capex_usd, b.capex_usd) {
        (Some(x), Some(y)) => x.total_cmp(&y).then(a.cards.cmp(&b.cards)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cards.cmp(&b.cards).then(a.nodes.cmp(&b.nodes)),
    });
    let mut seen_cards: Vec<String> = Vec::new();
    for (index, plan) in plans.iter_mut().enumerate() {
        plan.rank = index + 1;
        if !seen_cards.contains(&plan.card) {
            seen_cards.push(plan.card.clone());
            plan.best_for_card = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Parallelism;

    fn outcome(split: NodeSplit, status: &str, nodes: Option<u64>) -> SplitOutcome {
        SplitOutcome {
            split,
            status: status.into(),
            users_per_instance: None,
            nodes,
            source: Some(PointSource::Predicted),
            reason: None,
        }
    }

    fn replicas(dp: u32, instances: u32) -> NodeSplit {
        let parallel = Parallelism {
            dp,
            ep: dp,
            ..Parallelism::tensor(1)
        };
        NodeSplit {
            instances,
            tp: 1,
            per_card: 1,
            parallel,
            nodes: 1,
            disaggregated: None,
        }
    }

    fn tensor(tp: u32, instances: u32) -> NodeSplit {
        NodeSplit {
            instances,
            tp,
            per_card: 1,
            parallel: Parallelism::tensor(tp),
            nodes: 1,
            disaggregated: None,
        }
    }

    /// The chosen split and the best of the other kind are tried: a planned one by its nodes,
    /// else one the search stopped short, of the widest instances; nothing when the chosen
    /// split was measured, and never a split of the chosen one's kind.
    #[test]
    fn the_chosen_split_and_the_best_of_the_other_kind_are_disaggregated() {
        let tp8 = tensor(8, 1);
        let stopped = [
            outcome(tp8, "planned", Some(75)),
            outcome(tensor(4, 2), "planned", Some(70)),
            outcome(replicas(4, 2), "cannot win", None),
            outcome(replicas(8, 1), "cannot win", None),
        ];
        assert_eq!(
            disaggregation_candidates(Some(&tp8), &stopped),
            vec![tp8, replicas(8, 1)]
        );
        let planned = [
            outcome(replicas(8, 1), "planned", Some(90)),
            outcome(replicas(4, 2), "planned", Some(80)),
            outcome(tensor(2, 4), "does not fit", None),
        ];
        assert_eq!(
            disaggregation_candidates(Some(&tp8), &planned),
            vec![tp8, replicas(4, 2)]
        );
        assert_eq!(
            disaggregation_candidates(Some(&replicas(8, 1)), &stopped),
            vec![replicas(8, 1), tensor(4, 2)]
        );
        assert!(disaggregation_candidates(None, &stopped).is_empty());
        // A split shared by several instances a card is not predicted.
        let shared = NodeSplit {
            per_card: 2,
            ..tensor(1, 16)
        };
        assert_eq!(disaggregation_candidates(Some(&shared), &planned).len(), 1);
    }
}
