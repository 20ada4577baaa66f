//! The hardware catalog (cards, node shapes, models) and what fits in a card's memory.

pub mod band;
pub mod card;
pub mod decode_kernels;
pub mod dtype;
pub mod engine;
pub mod load;
pub mod memory;
pub mod model;
pub mod names;
pub mod node;
pub mod operators;
pub mod parallelism;

pub use card::{Card, EfficiencyOverrides};
pub use decode_kernels::{BlockStream, GroupedDecodeKernels};
pub use dtype::Dtype;
pub use engine::{
    ActivationScales, Admission, EngineProfile, KvReservation, LargeCardDefaults, StepMix,
    DEFAULT_ENGINE,
};
pub use memory::{memory_fit, memory_fit_layout, MemoryFit, MemoryOptions};
pub use model::Model;
pub use node::Node;
pub use parallelism::{Parallelism, PdSplit};

use crate::error::InputError;

/// Bytes in a GiB.
pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Cards, node shapes and models, built in and overridden from a `hardware/` folder.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub cards: Vec<Card>,
    pub nodes: Vec<Node>,
    pub models: Vec<Model>,
    /// Serving engines' scheduler defaults and overheads (`hardware/engines.toml`).
    pub engines: Vec<EngineProfile>,
    /// How wrong predictions were on held-out public measurements (`hardware/bands.toml`).
    pub bands: Vec<band::ErrorBand>,
    /// Measured operator timings per card system and engine (`hardware/operators/`).
    pub operators: std::sync::Arc<operators::OperatorLibrary>,
    /// Where entries came from beyond the built-in copy.
    pub origin: Vec<String>,
}

impl Catalog {
    pub fn card(&self, name: &str) -> Result<&Card, InputError> {
        names::lookup(&self.cards, name, "card")
    }

    pub fn node(&self, name: &str) -> Result<&Node, InputError> {
        names::lookup(&self.nodes, name, "node")
    }

    pub fn model(&self, name: &str) -> Result<&Model, InputError> {
        names::lookup(&self.models, name, "model")
    }

    /// An engine profile by name or alias (`vllm`, `sglang`, `trtllm`, `tgi`).
    pub fn engine(&self, name: &str) -> Result<&EngineProfile, InputError> {
        names::lookup(&self.engines, name, "engine")
    }

    /// The node shapes built from `card`.
    pub fn nodes_of<'a>(&'a self, card: &'a Card) -> impl Iterator<Item = &'a Node> + 'a {
        self.nodes.iter().filter(move |node| node.card == card.name)
    }

    /// The node shape an instance of `card` is timed on when none is named: the card's
    /// largest on its own link. `predict`, the validated deployments and the static batches
    /// all use it, so what `validate` scores is the layout `predict` and `solve` time (its
    /// scale-up domain, its network and whether its cards are all peers, `Node::switched`).
    pub fn largest_node_of<'a>(&'a self, card: &'a Card) -> Option<&'a Node> {
        self.nodes_of(card)
            .filter(|node| node.interconnect == card.interconnect)
            .max_by_key(|node| node.cards_per_node)
    }
}
