//! The cheapest mix of node types that carries the demand: an integer program, solved exactly.
//!
//! Choose whole nodes x_i of each type (capacity c_i, cost p_i; nodes already owned are their own
//! items, cost = energy only, at most as many as owned) so that Σ c_i·x_i ≥ demand at the least
//! Σ p_i·x_i. There are few variables (the node shapes with a plan, and the owned ones), so a
//! depth-first branch and bound is exact and fast: items in order of cost per unit of capacity,
//! each subtree cut off when its cost so far plus the linear-programming bound for the rest (the
//! remaining demand bought fractionally at the best ratios still available) cannot beat the
//! best mix found. No solver crate is needed for a problem this size, and this one is exact
//! where a general MILP library would add a large dependency for the same answer.

use serde::Serialize;

/// A kind of node that can be part of the mix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MixItem {
    pub name: String,
    /// Demand units one node carries (users or requests/s), > 0.
    pub capacity: f64,
    /// Cost of one node over the period, ≥ 0.
    pub cost: f64,
    /// At most this many (nodes already owned); `None`: as many as needed.
    pub max_count: Option<u64>,
}

/// How many of each item, what it costs and carries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MixSolution {
    pub counts: Vec<u64>,
    pub cost: f64,
    pub capacity: f64,
}

const EPS: f64 = 1e-9;

struct Search<'a> {
    items: &'a [MixItem],
    order: Vec<usize>,
    counts: Vec<u64>,
    best: Option<MixSolution>,
    nodes_visited: u64,
}

impl Search<'_> {
    /// Cheapest fractional cover of `remaining` with the items from `depth` on (∞ if they
    /// cannot cover it): a lower bound on any whole-node completion.
    fn bound(&self, depth: usize, remaining: f64) -> f64 {
        let mut left = remaining;
        let mut cost = 0.0;
        for &i in &self.order[depth..] {
            if left <= EPS {
                break;
            }
            let item = &self.items[i];
            let available = item
                .max_count
                .map_or(f64::INFINITY, |m| m as f64 * item.capacity);
            let take = left.min(available);
            cost += take / item.capacity * item.cost;
            left -= take;
        }
        if left > EPS {
            f64::INFINITY
        } else {
            cost
        }
    }

    fn dfs(&mut self, depth: usize, remaining: f64, cost: f64) {
        self.nodes_visited += 1;
        if remaining <= EPS {
            let better = self.best.as_ref().is_none_or(|b| cost < b.cost - EPS);
            if better {
                let capacity = self
                    .counts
                    .iter()
                    .zip(self.items)
                    .map(|(&n, item)| n as f64 * item.capacity)
                    .sum();
                self.best = Some(MixSolution {
                    counts: self.counts.clone(),
                    cost,
                    capacity,
                });
            }
            return;
        }
        if depth == self.order.len() {
            return;
        }
        let bound = cost + self.bound(depth, remaining);
        if self.best.as_ref().is_some_and(|b| bound >= b.cost - EPS) {
            return;
        }
        let i = self.order[depth];
        let item = &self.items[i];
        let enough = (remaining / item.capacity - EPS).ceil().max(0.0) as u64;
        let most = item.max_count.map_or(enough, |m| m.min(enough));
        // Most of the best-ratio item first: finds a good mix early, so the bound cuts hard.
        for count in (0..=most).rev() {
            self.counts[i] = count;
            self.dfs(
                depth + 1,
                remaining - count as f64 * item.capacity,
                cost + count as f64 * item.cost,
            );
        }
        self.counts[i] = 0;
    }
}

/// The cheapest whole-node mix of `items` carrying at least `demand`; `None` when even all of
/// them cannot (every unbounded item with capacity can, so only bounded-only sets fail).
pub fn cheapest_mix(items: &[MixItem], demand: f64) -> Option<MixSolution> {
    let mut order: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].capacity > 0.0 && items[i].cost.is_finite() && items[i].cost >= 0.0)
        .collect();
    order.sort_by(|&a, &b| {
        (items[a].cost / items[a].capacity).total_cmp(&(items[b].cost / items[b].capacity))
    });
    let mut search = Search {
        items,
        order,
        counts: vec![0; items.len()],
        best: None,
        nodes_visited: 0,
    };
    search.dfs(0, demand, 0.0);
    search.best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(name: &str, capacity: f64, cost: f64, max_count: Option<u64>) -> MixItem {
        MixItem {
            name: name.into(),
            capacity,
            cost,
            max_count,
        }
    }

    /// Every combination up to what covers the demand alone: the answer by brute force.
    fn brute_force(items: &[MixItem], demand: f64) -> Option<f64> {
        let limits: Vec<u64> = items
            .iter()
            .map(|it| {
                let enough = (demand / it.capacity).ceil() as u64;
                it.max_count.map_or(enough, |m| m.min(enough))
            })
            .collect();
        let mut best: Option<f64> = None;
        let mut counts = vec![0u64; items.len()];
        loop {
            let capacity: f64 = counts
                .iter()
                .zip(items)
                .map(|(&n, it)| n as f64 * it.capacity)
                .sum();
            if capacity >= demand - EPS {
                let cost: f64 = counts
                    .iter()
                    .zip(items)
                    .map(|(&n, it)| n as f64 * it.cost)
                    .sum();
                best = Some(best.map_or(cost, |b: f64| b.min(cost)));
            }
            let mut k = 0;
            loop {
                if k == counts.len() {
                    return best;
                }
                if counts[k] < limits[k] {
                    counts[k] += 1;
                    break;
                }
                counts[k] = 0;
                k += 1;
            }
        }
    }

    #[test]
    fn a_mix_beats_every_single_type_and_matches_brute_force() {
        // A big efficient node and a small one: 1000 users need 2 big (cost 20) or 13 small
        // (cost 26); 1 big + 3 small (cost 16) is cheaper than either.
        let items = vec![
            item("big", 800.0, 10.0, None),
            item("small", 80.0, 2.0, None),
        ];
        let mix = cheapest_mix(&items, 1000.0).unwrap();
        assert_eq!(mix.counts, vec![1, 3]);
        assert!((mix.cost - 16.0).abs() < 1e-9);
        assert_eq!(brute_force(&items, 1000.0), Some(16.0));
    }

    #[test]
    fn owned_nodes_cost_only_their_energy_and_are_bounded() {
        let items = vec![
            item("A100 owned", 400.0, 1.0, Some(2)),
            item("A100 new", 400.0, 9.0, None),
            item("H100 new", 1000.0, 20.0, None),
        ];
        let mix = cheapest_mix(&items, 2500.0).unwrap();
        assert_eq!(Some(mix.cost), brute_force(&items, 2500.0));
        assert_eq!(mix.counts[0], 2, "every owned node is used first");
        assert!(mix.capacity >= 2500.0);
        // Only bounded items that cannot reach the demand: no mix.
        assert!(cheapest_mix(&[item("owned", 10.0, 1.0, Some(3))], 100.0).is_none());
    }

    #[test]
    fn random_instances_agree_with_brute_force() {
        use rand::rngs::StdRng;
        use rand::{RngExt, SeedableRng};
        let mut rng = StdRng::seed_from_u64(11);
        for _ in 0..300 {
            let n = rng.random_range(1..=4);
            let items: Vec<MixItem> = (0..n)
                .map(|k| {
                    item(
                        &format!("t{k}"),
                        f64::from(rng.random_range(5..=120)),
                        f64::from(rng.random_range(1..=50)),
                        if rng.random_bool(0.3) {
                            Some(rng.random_range(0..=4))
                        } else {
                            None
                        },
                    )
                })
                .collect();
            let demand = f64::from(rng.random_range(1..=400));
            let expected = brute_force(&items, demand);
            let got = cheapest_mix(&items, demand).map(|m| m.cost);
            match (expected, got) {
                (Some(e), Some(g)) => {
                    assert!((e - g).abs() < 1e-9, "{items:?} {demand}: {e} vs {g}")
                }
                (None, None) => {}
                other => panic!("{items:?} {demand}: {other:?}"),
            }
        }
    }
}
