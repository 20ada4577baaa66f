//! Planning: from capacity per instance to node counts, splits and (later) cost.

mod ahead;
pub mod compare;
pub mod correction;
pub mod cost;
pub mod demand;
pub mod evidence;
pub mod measured;
pub mod mix;
pub mod predicted;
pub mod scenario;
pub mod sensitivity;
pub mod solve;
pub mod split;
mod unproven_lead;

pub use demand::{nodes_needed, Demand};
pub use solve::{solve, MissingCapacity, NodePlan, SolveReport, SolveRequest, SplitOutcome};
pub use split::NodeSplit;
