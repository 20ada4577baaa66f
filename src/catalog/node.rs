//! Node shapes people buy or rent: how many cards of one kind, linked how.

use serde::{Deserialize, Serialize};

/// A server with `cards_per_node` cards of one kind. Prices are editable estimates.
///
/// Two networks: `interconnect` links the node's own cards (NVLink, Infinity Fabric, PCIe, …;
/// its bandwidth per card is the card's `link_bandwidth_gbs`), and the scale-out network
/// (`scale_out`, `scale_out_gbs_per_card`) links this node to other nodes — InfiniBand, RoCE
/// or Ethernet NICs, or ports built into the accelerator. A rack-scale node (GB200 NVL72) is
/// one NVLink domain of 72 cards and its scale-out network links racks.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub name: String,
    pub card: String,
    pub cards_per_node: u32,
    /// The link between this node's cards: nvlink, pcie, infinity-fabric, hccs, roce, none.
    pub interconnect: String,
    pub topology: String,
    /// Power beyond the cards (CPUs, memory, NICs, fans, switches), W.
    pub host_power_w: f64,
    pub rack_units: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_instance: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_usd_per_hour: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate_note: Option<String>,
    /// The node's network to other nodes, per card, ONE direction, GB/s (10^9 B/s): one
    /// 400 Gb/s NIC per GPU is 50, one 800 Gb/s NIC per GPU is 100; NICs shared by the cards
    /// count their share. Absent where unknown (the catalog says why beside the entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_out_gbs_per_card: Option<f64>,
    /// What that network is, e.g. "InfiniBand NDR 400G per GPU (ConnectX-7)".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_out: Option<String>,
    pub source: String,
}

impl Node {
    /// Whether every card reaches every other at the link's rate, as `topology` says: behind
    /// an NVLink or PCIe switch, in a full mesh, or alone (`Some(true)`); cards that are peers
    /// in pairs or in a partial mesh, the rest crossing the host (`pcie`, `nvlink-hybrid-cube`:
    /// `Some(false)`); a topology capplan does not know (`None`).
    pub fn switched(&self) -> Option<bool> {
        match self.topology.as_str() {
            "nvswitch"
            | "nvlink-switch-72"
            | "pcie-switch"
            | "infinity-fabric-mesh"
            | "hccs-mesh"
            | "roce-all-to-all"
            | "single" => Some(true),
            "pcie" | "nvlink-hybrid-cube" => Some(false),
            _ => None,
        }
    }

    /// Whether an instance measured over `interconnect` behaves the same on this node's cards.
    /// A single-card instance (tp 1) uses no link, so any node of the card will do.
    pub fn runs_like(&self, interconnect: &str, tp: u32) -> bool {
        tp == 1 || self.interconnect.eq_ignore_ascii_case(interconnect)
    }
}

#[cfg(test)]
mod tests {
    use crate::catalog::Catalog;

    /// Every shipped node shape names a topology whose links capplan knows, and the PCIe
    /// shapes split as their hardware does: cards behind a switch, or on the CPUs' ports.
    #[test]
    fn every_shipped_topology_says_whether_its_cards_are_all_peers() {
        let catalog = Catalog::shipped().unwrap();
        for node in &catalog.nodes {
            assert!(
                node.switched().is_some(),
                "{}: '{}'",
                node.name,
                node.topology
            );
        }
        let switched = |name: &str| catalog.node(name).ok().and_then(|n| n.switched());
        assert_eq!(switched("8xL40S-PCIe"), Some(true));
        assert_eq!(switched("4xL40S-PCIe"), Some(false));
        assert_eq!(switched("8xH100-SXM"), Some(true));
        assert_eq!(switched("8xV100-32G-SXM2"), Some(false));
    }
}
