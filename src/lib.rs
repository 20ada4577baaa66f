//! capplan: how many nodes of which card, split into which serving instances, it takes for N
//! users to get their first token within X s and each next token within Y ms — and what each
//! option costs.
//!
//! Data flows one way: catalog and capacity points (`catalog`, `store`) → planning (`plan`) →
//! reports (`report`). The binary (`main.rs`, `cli.rs`) only parses arguments and wires these.

pub mod catalog;
pub mod error;
pub mod fit;
pub mod plan;
pub mod probe;
pub mod report;
pub mod sim;
pub mod slo;
pub mod stats;
pub mod store;
pub mod validate;
pub mod workload;

#[cfg(test)]
pub(crate) mod scratch;

pub use error::{is_input_error, InputError};
