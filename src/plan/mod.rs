//! Planning: from capacity per instance to node counts, splits and (later) cost.

pub mod demand;
pub mod evidence;
pub mod measured;
pub mod predicted;
pub mod solve;
pub mod split;

pub use demand::{nodes_needed, Demand};
pub use solve::{solve, MissingCapacity, NodePlan, SolveReport, SolveRequest, SplitOutcome};
pub use split::NodeSplit;
