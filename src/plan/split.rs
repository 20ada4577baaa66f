//! How a node is divided into serving instances: 1×TP8, 2×TP4, 4×TP2, 8×TP1; for a mixture
//! of experts also with the experts spread whole over the cards (1×TP8 EP8, 1×DP8 EP8); and,
//! where a model needs more cards than a node has, one instance over several nodes (TP8 PP2
//! over 2 nodes, DP16 EP16 over 2 nodes). Where a measurement shows it, several instances
//! share one card (16×½ card: two server processes per GPU, as image services often run).

use std::fmt;

use serde::{Serialize, Serializer};

use crate::catalog::{Model, Parallelism, PdSplit};

/// `instances` serving instances of `parallel` each, on `nodes` nodes (1 but for an instance
/// that spans nodes); with `per_card` > 1 (and `tp` 1) that many instances share each card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeSplit {
    pub instances: u32,
    pub tp: u32,
    pub per_card: u32,
    pub parallel: Parallelism,
    /// Nodes the `instances` occupy together: a multi-node instance costs whole nodes.
    pub nodes: u32,
    /// Instances working as the prefill and decode workers of disaggregated deployments in
    /// this ratio (`None`: each instance serves whole requests).
    pub disaggregated: Option<PdSplit>,
}

impl NodeSplit {
    /// Every way to use all of a node's cards with equal tensor-parallel instances: one per
    /// divisor of the card count, largest instances first.
    pub fn all_for(cards_per_node: u32) -> Vec<NodeSplit> {
        (1..=cards_per_node)
            .rev()
            .filter(|tp| cards_per_node.is_multiple_of(*tp))
            .map(|tp| NodeSplit::of(cards_per_node / tp, Parallelism::tensor(tp), 1))
            .collect()
    }

    /// The splits worth planning for `model` on one node: tensor parallelism at every size,
    /// and for a mixture of experts the expert-parallel layouts of each size
    /// ([`Parallelism::candidates`]).
    pub fn layouts_for(model: &Model, cards_per_node: u32) -> Vec<NodeSplit> {
        (1..=cards_per_node)
            .rev()
            .filter(|cards| cards_per_node.is_multiple_of(*cards))
            .flat_map(|cards| {
                Parallelism::candidates(model, cards, cards_per_node)
                    .into_iter()
                    .map(move |parallel| NodeSplit::of(cards_per_node / cards, parallel, 1))
            })
            .collect()
    }

    /// One instance over `nodes` nodes: pipeline stages of a node each, or (a mixture of
    /// experts) the experts spread over every card with the attention replicated; never a
    /// tensor-parallel group wider than a node.
    pub fn spanning(model: &Model, cards_per_node: u32, nodes: u32) -> Vec<NodeSplit> {
        Parallelism::candidates(model, cards_per_node * nodes, cards_per_node)
            .into_iter()
            .filter(|parallel| parallel.tp <= cards_per_node)
            .map(|parallel| NodeSplit::of(1, parallel, nodes))
            .collect()
    }

    fn of(instances: u32, parallel: Parallelism, nodes: u32) -> NodeSplit {
        NodeSplit {
            instances,
            tp: parallel.tp,
            per_card: 1,
            parallel,
            nodes: nodes.max(1),
            disaggregated: None,
        }
    }

    /// The same instances as prefill and decode workers in the ratio `pd`.
    pub fn disaggregated(self, pd: PdSplit) -> NodeSplit {
        NodeSplit {
            disaggregated: Some(pd),
            ..self
        }
    }

    /// `per_card` instances on every one of the node's cards.
    pub fn shared_cards(cards_per_node: u32, per_card: u32) -> NodeSplit {
        NodeSplit {
            instances: cards_per_node * per_card,
            tp: 1,
            per_card: per_card.max(1),
            parallel: Parallelism::tensor(1),
            nodes: 1,
            disaggregated: None,
        }
    }

    /// Instances per node (a fraction for an instance spanning nodes).
    pub fn instances_per_node(&self) -> f64 {
        f64::from(self.instances) / f64::from(self.nodes.max(1))
    }
}

impl fmt::Display for NodeSplit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.per_card > 1 {
            write!(f, "{}×1/{} card", self.instances, self.per_card)?;
        } else if self.nodes > 1 {
            write!(f, "{} over {} nodes", self.parallel, self.nodes)?;
        } else {
            write!(f, "{}×{}", self.instances, self.parallel)?;
        }
        match self.disaggregated {
            Some(pd) => write!(f, " as {pd}"),
            None => Ok(()),
        }
    }
}

impl Serialize for NodeSplit {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut state = serializer.serialize_struct("NodeSplit", 9)?;
        state.serialize_field("label", &self.to_string())?;
        state.serialize_field("instances", &self.instances)?;
        state.serialize_field("tp", &self.tp)?;
        state.serialize_field("pp", &self.parallel.pp)?;
        state.serialize_field("attention_dp", &self.parallel.dp)?;
        state.serialize_field("ep", &self.parallel.ep)?;
        state.serialize_field("nodes_per_instance_group", &self.nodes)?;
        state.serialize_field("instances_per_card", &self.per_card)?;
        state.serialize_field(
            "disaggregated",
            &self.disaggregated.map(|pd| pd.to_string()),
        )?;
        state.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_of_an_eight_card_node() {
        let labels: Vec<String> = NodeSplit::all_for(8)
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(labels, ["1×TP8", "2×TP4", "4×TP2", "8×TP1"]);
        assert_eq!(NodeSplit::all_for(1).len(), 1);
        assert_eq!(NodeSplit::shared_cards(8, 2).to_string(), "16×1/2 card");
    }

    #[test]
    fn a_mixture_gets_expert_parallel_and_multi_node_layouts() {
        let catalog = crate::catalog::Catalog::shipped().unwrap();
        let r1 = catalog.model("deepseek-r1").unwrap();
        let labels: Vec<String> = NodeSplit::layouts_for(r1, 8)
            .iter()
            .take(3)
            .map(|s| s.to_string())
            .collect();
        assert_eq!(labels, ["1×TP8", "1×TP8 EP8", "1×DP8 EP8"]);
        let wide: Vec<String> = NodeSplit::spanning(r1, 8, 2)
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(wide, ["DP16 EP16 over 2 nodes", "TP8 PP2 over 2 nodes"]);
        let split = NodeSplit::spanning(r1, 8, 2)[0];
        assert_eq!(split.instances_per_node(), 0.5);
    }
}
