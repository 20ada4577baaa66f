//! How an instance's cards exchange data, and what the exchanges of a parallel layout cost:
//! all-reduces beyond one scale-up domain, the experts' all-to-all, and the activations a
//! pipeline stage hands to the next.
//!
//! A scale-up domain is the set of cards one NVLink switch (or Infinity Fabric, or PCIe
//! complex) joins: the eight cards of an HGX node, the 72 of an NVL72 rack. Past it, traffic
//! crosses the scale-out network (InfiniBand or RoCE, one NIC per card), an order of magnitude
//! slower — which is why wide-EP deployments keep the all-to-all inside the domain when they
//! can, and why a tensor-parallel group never spans nodes in practice.
//!
//! The costs are bandwidth terms (bytes over the slowest link a message crosses, at the link
//! efficiency) plus a per-message latency. They are not measured here: AIConfigurator's
//! collection has no all-to-all or cross-node timings for the cards capplan ships, so every
//! prediction of a layout that uses them rests on these formulas (and says so in its basis).

use serde::Serialize;

use crate::catalog::Parallelism;

/// One message's fixed cost across the scale-out network (NIC, switch hops, RDMA setup), s.
const SCALE_OUT_LATENCY_S: f64 = 10e-6;

/// The links of one instance.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fabric {
    /// Cards joined by the scale-up link.
    pub domain_cards: u32,
    /// Scale-up bandwidth per card, one direction, bytes/s.
    pub scale_up_bytes_per_s: f64,
    /// Scale-out bandwidth per card, one direction, bytes/s (`None`: the node shape does not
    /// say, and no instance may span nodes).
    pub scale_out_bytes_per_s: Option<f64>,
    /// One hop's latency on the scale-up link, s.
    pub hop_latency_s: f64,
    /// Share of the link bandwidth a collective reaches.
    pub efficiency: f64,
    /// Whether every card of the domain reaches every other at the link's rate (the node
    /// shape's topology; `None` without a node shape): measured collectives whose larger
    /// groups crossed a slower path than this are set aside for it.
    pub switched: Option<bool>,
}

impl Fabric {
    /// A fabric of one domain as large as `cards`, `link_gbs` bidirectional per card (the
    /// catalog's convention), with no scale-out.
    pub fn single_domain(cards: u32, link_gbs: f64, hop_latency_us: f64) -> Fabric {
        Fabric {
            domain_cards: cards.max(1),
            scale_up_bytes_per_s: link_gbs * 1e9 / 2.0,
            scale_out_bytes_per_s: None,
            hop_latency_s: hop_latency_us * 1e-6,
            efficiency: 0.7,
            switched: None,
        }
    }

    /// Why `parallel` cannot run on this fabric, if it cannot: it spans domains and the
    /// network between them is unknown.
    pub fn problem(&self, parallel: &Parallelism) -> Option<String> {
        (parallel.cards() > self.domain_cards && self.scale_out_bytes_per_s.is_none()).then(|| {
            format!(
                "{parallel} needs {} cards, more than the {} one scale-up link joins, and the node \
                 shape gives no scale-out bandwidth (scale_out_gbs_per_card)",
                parallel.cards(),
                self.domain_cards
            )
        })
    }

    /// The slowest per-card bandwidth a collective over `ranks` cards crosses, bytes/s.
    fn bandwidth(&self, ranks: u32) -> f64 {
        let up = self.scale_up_bytes_per_s * self.efficiency;
        if ranks <= self.domain_cards {
            return up;
        }
        self.scale_out_bytes_per_s
            .map_or(up, |out| (out * self.efficiency).min(up))
    }

    /// The part of an all-reduce over `ranks` cards that crosses domains, s (0 inside one):
    /// the reduce-scatter inside each domain leaves every card `1/domain` of the message,
    /// which is all-reduced across the `ranks/domain` domains over the network as a ring.
    pub fn cross_domain_all_reduce_s(&self, ranks: u32, bytes: f64) -> f64 {
        if ranks <= self.domain_cards {
            return 0.0;
        }
        let domains = f64::from(ranks.div_ceil(self.domain_cards));
        let share = bytes / f64::from(self.domain_cards.min(ranks));
        2.0 * (domains - 1.0) / domains * share / self.bandwidth(ranks)
            + 2.0 * domains.log2().max(1.0) * SCALE_OUT_LATENCY_S
    }

    /// One all-to-all among `ranks` cards in which every card sends `bytes` spread evenly
    /// over all of them (its own share stays), s.
    pub fn all_to_all_s(&self, ranks: u32, bytes: f64) -> f64 {
        if ranks <= 1 {
            return 0.0;
        }
        let r = f64::from(ranks);
        let latency = if ranks <= self.domain_cards {
            self.hop_latency_s
        } else {
            SCALE_OUT_LATENCY_S
        };
        bytes * (r - 1.0) / r / self.bandwidth(ranks) + latency
    }

    /// Handing `bytes` of activations from one pipeline stage to the next, s: over the
    /// network when a stage fills its domain, else over the scale-up link.
    pub fn stage_send_s(&self, stage_cards: u32, bytes: f64) -> f64 {
        let (bandwidth, latency) = if stage_cards >= self.domain_cards {
            (self.bandwidth(self.domain_cards + 1), SCALE_OUT_LATENCY_S)
        } else {
            (self.bandwidth(1), self.hop_latency_s)
        };
        bytes / bandwidth + latency
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hgx() -> Fabric {
        Fabric {
            scale_out_bytes_per_s: Some(50e9),
            ..Fabric::single_domain(8, 900.0, 3.0)
        }
    }

    #[test]
    fn crossing_the_network_costs_what_its_bandwidth_says() {
        let fabric = hgx();
        // 8 MB all-to-all inside the node: 7/8 of it at 0.7 × 450 GB/s.
        let inside = fabric.all_to_all_s(8, 8e6);
        assert!((inside - (7e6 / 315e9 + 3e-6)).abs() < 1e-9, "{inside}");
        // Over 16 cards the network (0.7 × 50 GB/s) is the bottleneck: ~9× slower.
        let across = fabric.all_to_all_s(16, 8e6);
        assert!(across / inside > 8.0, "{across} vs {inside}");
        assert_eq!(fabric.cross_domain_all_reduce_s(8, 1e6), 0.0);
        assert!(fabric.cross_domain_all_reduce_s(16, 1e6) > 0.0);
    }

    #[test]
    fn spanning_domains_needs_a_network() {
        let lone = Fabric::single_domain(8, 900.0, 3.0);
        let wide = Parallelism {
            pp: 2,
            ..Parallelism::tensor(8)
        };
        assert!(lone.problem(&wide).unwrap().contains("scale-out"));
        assert!(hgx().problem(&wide).is_none());
        assert!(lone.problem(&Parallelism::tensor(8)).is_none());
    }
}
