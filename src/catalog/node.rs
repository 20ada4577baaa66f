//! Node shapes people buy or rent: how many cards of one kind, linked how.

use serde::{Deserialize, Serialize};

/// A server with `cards_per_node` cards of one kind. Prices are editable estimates.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub name: String,
    pub card: String,
    pub cards_per_node: u32,
    /// The link between this node's cards: nvlink, pcie, infinity-fabric, hccs, none.
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
    pub source: String,
}

impl Node {
    /// Whether an instance measured over `interconnect` behaves the same on this node's cards.
    /// A single-card instance (tp 1) uses no link, so any node of the card will do.
    pub fn runs_like(&self, interconnect: &str, tp: u32) -> bool {
        tp == 1 || self.interconnect.eq_ignore_ascii_case(interconnect)
    }
}
