//! What a fleet costs over a period: buying and powering nodes, or renting them.
//!
//! Prices are user inputs: the catalog's are editable sample estimates, and every figure here
//! names the assumptions it was computed with. Power is the cards' board power (TDP, times the
//! share of it they draw under load) plus the rest of the node, times the data centre's PUE.

use serde::Serialize;

use crate::catalog::{Card, Node};
use crate::error::InputError;

/// The money side of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CostAssumptions {
    /// Amortisation period, years.
    pub years: f64,
    /// Electricity, US$ per kWh.
    pub power_price_usd_per_kwh: f64,
    /// Power usage effectiveness of the data centre (cooling and distribution on top of IT).
    pub pue: f64,
    /// Share of their TDP the cards draw at the planned load (1 = budget the full TDP).
    pub card_power_fraction: f64,
    /// Rent the nodes (the catalog's cloud $/h) instead of buying them.
    pub cloud: bool,
}

impl Default for CostAssumptions {
    fn default() -> Self {
        CostAssumptions {
            years: 3.0,
            power_price_usd_per_kwh: 0.12,
            pue: 1.3,
            card_power_fraction: 1.0,
            cloud: false,
        }
    }
}

impl CostAssumptions {
    pub fn check(&self) -> Result<(), InputError> {
        let positive = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(InputError::value(format!(
                    "{name} must be above 0, got {v}"
                )))
            }
        };
        positive("--years", self.years)?;
        positive("--pue", self.pue)?;
        if !(self.power_price_usd_per_kwh.is_finite() && self.power_price_usd_per_kwh >= 0.0) {
            return Err(InputError::value(format!(
                "--power-price must be 0 or more US$ per kWh, got {}",
                self.power_price_usd_per_kwh
            )));
        }
        if !(self.card_power_fraction > 0.0 && self.card_power_fraction <= 1.0) {
            return Err(InputError::value(format!(
                "--card-power must be above 0 and at most 1 (share of TDP), got {}",
                self.card_power_fraction
            )));
        }
        if self.pue < 1.0 {
            return Err(InputError::value(format!(
                "--pue is at least 1 (1.0 = no overhead), got {}",
                self.pue
            )));
        }
        Ok(())
    }

    pub fn hours(&self) -> f64 {
        self.years * 365.25 * 24.0
    }

    pub fn describe(&self) -> String {
        if self.cloud {
            format!(
                "rented at the catalog's cloud $/h for {} years",
                crate::report::count(self.years)
            )
        } else {
            format!(
                "bought at the catalog's node price, powered for {} years at ${}/kWh, PUE {}, cards at {} % of TDP",
                crate::report::count(self.years),
                crate::report::count(self.power_price_usd_per_kwh),
                crate::report::count(self.pue),
                crate::report::count(self.card_power_fraction * 100.0)
            )
        }
    }
}

/// One node's costs under the assumptions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NodeCost {
    pub price_usd: Option<f64>,
    /// Draw at the wall, kW (cards and host, before PUE).
    pub power_kw: f64,
    /// Energy over the period, PUE included, US$.
    pub energy_usd: f64,
    /// Rent over the period, US$, where the catalog has a cloud price.
    pub cloud_usd: Option<f64>,
    pub rack_units: u32,
}

impl NodeCost {
    pub fn of(node: &Node, card: &Card, assumptions: &CostAssumptions) -> NodeCost {
        let power_kw =
            (f64::from(node.cards_per_node) * card.tdp_w * assumptions.card_power_fraction
                + node.host_power_w)
                / 1000.0;
        NodeCost {
            price_usd: node.price_usd,
            power_kw,
            energy_usd: power_kw
                * assumptions.pue
                * assumptions.hours()
                * assumptions.power_price_usd_per_kwh,
            cloud_usd: node.cloud_usd_per_hour.map(|h| h * assumptions.hours()),
            rack_units: node.rack_units,
        }
    }

    /// Total for one node over the period: rent, or price plus energy; `None` without the price
    /// it needs.
    pub fn total(&self, assumptions: &CostAssumptions) -> Option<f64> {
        if assumptions.cloud {
            self.cloud_usd
        } else {
            self.price_usd.map(|p| p + self.energy_usd)
        }
    }

    /// Total for a node already owned: only its energy (rented nodes are never owned).
    pub fn owned_total(&self, assumptions: &CostAssumptions) -> Option<f64> {
        if assumptions.cloud {
            self.cloud_usd
        } else {
            Some(self.energy_usd)
        }
    }
}

/// A plan's costs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PlanCost {
    pub capex_usd: Option<f64>,
    pub energy_usd: f64,
    pub cloud_usd: Option<f64>,
    /// Capex + energy, or rent: the ranking figure.
    pub total_usd: Option<f64>,
    /// Total ÷ planned users (or requests/s of the demand), over the period.
    pub usd_per_demand_unit: Option<f64>,
    /// Total ÷ million output tokens the demand generates over the period, where the tokens
    /// per second are known.
    pub usd_per_million_tokens: Option<f64>,
    pub power_kw: f64,
    pub rack_units: u64,
}

impl PlanCost {
    /// `nodes` nodes of `node_cost`, carrying `demand` (users or requests/s) that generates
    /// `tokens_per_s` output tokens per second.
    pub fn of(
        node_cost: &NodeCost,
        nodes: u64,
        demand: f64,
        tokens_per_s: Option<f64>,
        assumptions: &CostAssumptions,
    ) -> PlanCost {
        let n = nodes as f64;
        let total = node_cost.total(assumptions).map(|t| t * n);
        let seconds = assumptions.hours() * 3600.0;
        PlanCost {
            capex_usd: node_cost.price_usd.map(|p| p * n),
            energy_usd: node_cost.energy_usd * n,
            cloud_usd: node_cost.cloud_usd.map(|c| c * n),
            total_usd: total,
            usd_per_demand_unit: total.map(|t| t / demand.max(1e-12)),
            usd_per_million_tokens: match (total, tokens_per_s) {
                (Some(t), Some(rate)) if rate > 0.0 => Some(t / (rate * seconds / 1e6)),
                _ => None,
            },
            power_kw: node_cost.power_kw * n,
            rack_units: u64::from(node_cost.rack_units) * nodes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    #[test]
    fn power_energy_and_totals_by_hand() {
        let catalog = Catalog::shipped().unwrap();
        let node = catalog.node("8xA100-40G-SXM").unwrap();
        let card = catalog.card("A100-40G").unwrap();
        let assumptions = CostAssumptions::default();
        let cost = NodeCost::of(node, card, &assumptions);
        // 8 × 400 W + 3300 W host = 6.5 kW.
        assert!((cost.power_kw - (8.0 * card.tdp_w + node.host_power_w) / 1000.0).abs() < 1e-12);
        assert!((cost.power_kw - 6.5).abs() < 1e-9, "{}", cost.power_kw);
        // 6.5 kW × 1.3 × 26 298 h × $0.12 = $26 666.
        let hours = 3.0 * 365.25 * 24.0;
        assert!((cost.energy_usd - 6.5 * 1.3 * hours * 0.12).abs() < 1e-6);
        let plan = PlanCost::of(&cost, 12, 10_000.0, Some(1000.0), &assumptions);
        let total = 12.0 * (90_000.0 + cost.energy_usd);
        assert!((plan.total_usd.unwrap() - total).abs() < 1e-6);
        assert!((plan.usd_per_demand_unit.unwrap() - total / 10_000.0).abs() < 1e-9);
        let tokens = 1000.0 * hours * 3600.0;
        assert!((plan.usd_per_million_tokens.unwrap() - total / (tokens / 1e6)).abs() < 1e-9);
        assert_eq!(plan.rack_units, 72);
        // Renting: the catalog's hourly price over the same hours.
        let cloud = CostAssumptions {
            cloud: true,
            ..assumptions
        };
        let rented = PlanCost::of(
            &NodeCost::of(node, card, &cloud),
            12,
            10_000.0,
            None,
            &cloud,
        );
        assert!((rented.total_usd.unwrap() - 12.0 * 32.77 * hours).abs() < 1e-6);
    }

    #[test]
    fn bad_assumptions_are_refused() {
        for bad in [
            CostAssumptions {
                years: 0.0,
                ..Default::default()
            },
            CostAssumptions {
                pue: 0.9,
                ..Default::default()
            },
            CostAssumptions {
                power_price_usd_per_kwh: -1.0,
                ..Default::default()
            },
            CostAssumptions {
                card_power_fraction: 1.5,
                ..Default::default()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        assert!(CostAssumptions::default().check().is_ok());
    }
}
