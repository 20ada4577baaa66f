//! Predicting ahead of planning: the layouts each node shape may be planned with, simulated
//! on every core before the plan is made — each no further than it can matter.
//!
//! A plan keeps one split per model and node shape, so most predicted layouts only have to be
//! shown to lose. The layouts of each node shape are predicted in rounds, the most promising
//! first (by the predictor's estimate of users per node): the first round predicts one
//! layout of every node shape in full; each later one is asked whether it reaches the users
//! per instance it would need to beat the best split found so far, and its search stops at
//! the first level no higher that fails. The plan is the one predicting everything in full
//! gives — the winner is always predicted in full, and a layout stopped short provably needs
//! more nodes (latency grows with load, as the search for C* itself assumes) — but a loser's
//! C* is then only known to be below what it needed.
//!
//! Where a measured or imported point decides a node shape, its other layouts are still
//! predicted in full: the plan sets them beside the measurement.

use std::collections::VecDeque;

use super::correction::PredictionCorrections;
use super::demand::Demand;
use super::evidence::in_demand_units;
use super::predicted::{CapacityPredictor, Wanted};
use super::solve::{measured_point, node_splits, split_nodes, SolveRequest};
use super::split::NodeSplit;
use crate::catalog::memory::memory_fit_layout;
use crate::catalog::{Card, Catalog, Model, Node};
use crate::store::{CapacityPoint, PointSource};

/// Users per instance no search reaches (it stops at its highest concurrency, far below):
/// what a layout "needs" when no C* would let it win.
const NEVER: u32 = 1 << 24;

/// Where a split stands in its node shape's ranking, as the planner ranks splits: better
/// evidence, then fewer nodes, then fewer instances, then the earlier split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Standing {
    source: PointSource,
    nodes: u64,
    instances: u32,
    position: usize,
}

/// One model on one node shape: its splits still to predict and the best one found.
struct Contest<'a> {
    model: &'a Model,
    card: &'a Card,
    node: &'a Node,
    /// Splits to predict, most promising first, with their place in the node's list.
    pending: VecDeque<(usize, NodeSplit)>,
    best: Option<Standing>,
    /// The best split's prediction as the predictor gave it (uncorrected), when predicted.
    best_point: Option<CapacityPoint>,
    /// A measured or imported point decides this node shape: predict every split in full.
    measured: bool,
}

/// What the rounds need to rank a split the way the planner will.
pub(super) struct Ranking<'a> {
    pub request: &'a SolveRequest,
    pub demand_units: f64,
    pub usable: &'a [&'a CapacityPoint],
}

/// Predicts every layout of `models` on `nodes` that a plan may use (see the module doc),
/// correcting by measured points as [`PredictionCorrections::from_points`] does; returns the
/// corrections, computed once the first round has run (predictions of the measured layouts
/// run beside it).
pub(super) fn predict_ahead(
    catalog: &Catalog,
    models: &[&Model],
    nodes: &[&Node],
    ranking: &Ranking,
    points: &[CapacityPoint],
    predictor: &mut dyn CapacityPredictor,
) -> PredictionCorrections {
    let mut contests = contests(catalog, models, nodes, ranking, predictor);
    // The first round: one split of every node shape in full (every split where a
    // measurement decides), in the order of the node shapes.
    let first: Vec<Wanted> = contests
        .iter_mut()
        .flat_map(|contest| {
            let take = if contest.measured {
                contest.pending.len()
            } else {
                1
            };
            let (model, card, node) = (contest.model, contest.card, contest.node);
            let asked: Vec<(usize, NodeSplit)> = contest.pending.drain(..take).collect();
            asked
                .into_iter()
                .map(move |(_, split)| wanted(model, card, node, &split, None))
        })
        .collect();
    let first = with_estimates(first, predictor);
    predictor.prepare(&first);
    let cards: Vec<String> = nodes.iter().map(|n| n.card.clone()).collect();
    let corrections = PredictionCorrections::from_points(catalog, points, &cards, predictor);
    for contest in &mut contests {
        contest.rank_all(ranking, &corrections, predictor);
    }
    // Later rounds: the next split of every node shape, asked only for what it needs.
    loop {
        let mut round: Vec<(usize, usize, NodeSplit)> = Vec::new();
        for (index, contest) in contests.iter_mut().enumerate() {
            if let Some((position, split)) = contest.pending.pop_front() {
                round.push((index, position, split));
            }
        }
        if round.is_empty() {
            break;
        }
        let asked: Vec<Wanted> = round
            .iter()
            .map(|&(index, position, split)| {
                let contest = &contests[index];
                let needed = contest.needed(&split, position, ranking, &corrections);
                wanted(contest.model, contest.card, contest.node, &split, needed)
            })
            .collect();
        let asked = with_estimates(asked, predictor);
        predictor.prepare(&asked);
        for (index, position, split) in round {
            contests[index].rank(position, &split, ranking, &corrections, predictor);
        }
    }
    corrections
}

/// The layout of `split` of `node` as the predictor is asked for it.
fn wanted<'a>(
    model: &'a Model,
    card: &'a Card,
    node: &'a Node,
    split: &NodeSplit,
    needed: Option<u32>,
) -> Wanted<'a> {
    Wanted {
        model,
        card,
        node,
        parallel: split.parallel,
        needed,
        estimate: None,
    }
}

/// The same layouts with the predictor's estimates, where the search may start.
fn with_estimates<'a>(
    mut wanted: Vec<Wanted<'a>>,
    predictor: &mut dyn CapacityPredictor,
) -> Vec<Wanted<'a>> {
    for want in &mut wanted {
        want.estimate = predictor.estimate(want.model, want.card, want.node, want.parallel);
    }
    wanted
}

/// Every model × node shape with splits to predict — those that fit in memory, one instance
/// per card, with no measured or imported point of their own — in the planner's order, each
/// node's splits ordered by estimated users per node.
fn contests<'a>(
    catalog: &'a Catalog,
    models: &[&'a Model],
    nodes: &[&'a Node],
    ranking: &Ranking,
    predictor: &mut dyn CapacityPredictor,
) -> Vec<Contest<'a>> {
    let memory = &ranking.request.memory;
    // Every node shape's splits to predict, then their estimates all at once.
    let mut found: Vec<(Contest, Vec<(usize, NodeSplit)>)> = Vec::new();
    for &model in models {
        for &node in nodes {
            let Some(card) = catalog.cards.iter().find(|c| c.name == node.card) else {
                continue;
            };
            let mut measured = false;
            let mut pending: Vec<(usize, NodeSplit)> = Vec::new();
            for (position, split) in node_splits(model, card, node, ranking.usable, memory)
                .into_iter()
                .enumerate()
            {
                let share = card.shared_by(split.per_card);
                if memory_fit_layout(model, &share, &split.parallel, memory).is_err() {
                    continue;
                }
                if measured_point(ranking.usable, model, card, node, &split).is_some() {
                    measured = true;
                } else if split.per_card == 1 {
                    pending.push((position, split));
                }
            }
            if !pending.is_empty() {
                let contest = Contest {
                    model,
                    card,
                    node,
                    pending: VecDeque::new(),
                    best: None,
                    best_point: None,
                    measured,
                };
                found.push((contest, pending));
            }
        }
    }
    let wanted: Vec<Wanted> = found
        .iter()
        .flat_map(|(c, pending)| {
            pending
                .iter()
                .map(|(_, split)| wanted(c.model, c.card, c.node, split, None))
        })
        .collect();
    let mut estimates = predictor.estimate_all(&wanted).into_iter();
    let mut contests = Vec::new();
    for (mut contest, pending) in found {
        let mut ordered: Vec<(usize, NodeSplit, f64)> = pending
            .into_iter()
            .map(|(position, split)| {
                let users = estimates.next().flatten();
                let per_node = users.map_or(0.0, |u| u * split.instances_per_node());
                (position, split, per_node)
            })
            .collect();
        if !contest.measured {
            // Most users per node first; the node's own order among equals.
            ordered.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
        }
        contest.pending = ordered.into_iter().map(|(p, s, _)| (p, s)).collect();
        contests.push(contest);
    }
    contests
}

impl Contest<'_> {
    /// Ranks every split already known: the measured ones, and those predicted so far.
    fn rank_all(
        &mut self,
        ranking: &Ranking,
        corrections: &PredictionCorrections,
        predictor: &mut dyn CapacityPredictor,
    ) {
        let memory = &ranking.request.memory;
        let pending: Vec<usize> = self.pending.iter().map(|(p, _)| *p).collect();
        let splits = node_splits(self.model, self.card, self.node, ranking.usable, memory);
        for (position, split) in splits.iter().enumerate() {
            let share = self.card.shared_by(split.per_card);
            if pending.contains(&position)
                || memory_fit_layout(self.model, &share, &split.parallel, memory).is_err()
            {
                continue;
            }
            self.rank(position, split, ranking, corrections, predictor);
        }
    }

    /// Ranks `split` from its measured point or its prediction (if the predictor has one).
    fn rank(
        &mut self,
        position: usize,
        split: &NodeSplit,
        ranking: &Ranking,
        corrections: &PredictionCorrections,
        predictor: &mut dyn CapacityPredictor,
    ) {
        let (point, raw) =
            match measured_point(ranking.usable, self.model, self.card, self.node, split) {
                Some(point) => (point, None),
                None if split.per_card == 1 => {
                    match predictor.predict(self.model, self.card, self.node, split.parallel) {
                        Ok(raw) => (corrections.apply(raw.clone()), Some(raw)),
                        Err(_) => return,
                    }
                }
                None => return,
            };
        let request = ranking.request;
        let Ok(capacity) = in_demand_units(&point, &request.demand, request.think_time.as_ref())
        else {
            return;
        };
        let standing = Standing {
            source: point.source,
            nodes: split_nodes(split, capacity.per_instance, ranking.demand_units, request),
            instances: split.instances,
            position,
        };
        if self.best.is_none_or(|best| standing < best) {
            self.best = Some(standing);
            self.best_point = raw.filter(|_| capacity.conversion.is_none());
        }
    }

    /// The fewest users per instance (as predicted, before corrections) with which `split`
    /// would rank above the best split found; `None` when it must be predicted in full (a
    /// measurement decides this node, nothing is ranked yet, or the best's capacity was
    /// converted, which a bare number of users cannot be).
    fn needed(
        &self,
        split: &NodeSplit,
        position: usize,
        ranking: &Ranking,
        corrections: &PredictionCorrections,
    ) -> Option<u32> {
        if self.measured || !matches!(ranking.request.demand, Demand::Users(_)) {
            return None;
        }
        let best = self.best?;
        let template = self.best_point.as_ref()?;
        let request = ranking.request;
        // The users a prediction holds, as the planner counts them: corrected, never
        // converted (`best_point` is kept only when its capacity was not).
        let capacity = |users: u32| {
            let mut point = template.clone();
            point.users_per_instance = f64::from(users);
            let point = corrections.apply(point);
            in_demand_units(&point, &request.demand, request.think_time.as_ref())
                .ok()
                .filter(|capacity| capacity.conversion.is_none())
                .map(|capacity| capacity.per_instance)
        };
        capacity(1)?;
        let ranks_above = |users: u32| {
            capacity(users).is_some_and(|per_instance| {
                let standing = Standing {
                    source: PointSource::Predicted,
                    nodes: split_nodes(split, per_instance, ranking.demand_units, request),
                    instances: split.instances,
                    position,
                };
                standing < best
            })
        };
        if !ranks_above(NEVER) {
            return Some(NEVER);
        }
        // Nodes fall as users grow: the least users that rank above, by bisection.
        let (mut low, mut high) = (0, NEVER);
        while high - low > 1 {
            let mid = low + (high - low) / 2;
            if ranks_above(mid) {
                high = mid;
            } else {
                low = mid;
            }
        }
        Some(high)
    }
}
