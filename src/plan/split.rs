//! How a node is divided into serving instances: 1×TP8, 2×TP4, 4×TP2, 8×TP1 — and, where a
//! measurement shows it, several instances on one card (16×½ card: two server processes per
//! GPU, as image services often run).

use std::fmt;

use serde::{Serialize, Serializer};

/// `instances` serving instances of `tp` cards each, on one node; with `per_card` > 1 (and
/// `tp` 1) that many instances share each card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeSplit {
    pub instances: u32,
    pub tp: u32,
    pub per_card: u32,
}

impl NodeSplit {
    /// Every way to use all of a node's cards with equal instances: one per divisor of the
    /// card count, largest instances first.
    pub fn all_for(cards_per_node: u32) -> Vec<NodeSplit> {
        (1..=cards_per_node)
            .rev()
            .filter(|tp| cards_per_node.is_multiple_of(*tp))
            .map(|tp| NodeSplit {
                instances: cards_per_node / tp,
                tp,
                per_card: 1,
            })
            .collect()
    }

    /// `per_card` instances on every one of the node's cards.
    pub fn shared_cards(cards_per_node: u32, per_card: u32) -> NodeSplit {
        NodeSplit {
            instances: cards_per_node * per_card,
            tp: 1,
            per_card: per_card.max(1),
        }
    }
}

impl fmt::Display for NodeSplit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.per_card > 1 {
            write!(f, "{}×1/{} card", self.instances, self.per_card)
        } else {
            write!(f, "{}×TP{}", self.instances, self.tp)
        }
    }
}

impl Serialize for NodeSplit {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut state = serializer.serialize_struct("NodeSplit", 4)?;
        state.serialize_field("label", &self.to_string())?;
        state.serialize_field("instances", &self.instances)?;
        state.serialize_field("tp", &self.tp)?;
        state.serialize_field("instances_per_card", &self.per_card)?;
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
}
