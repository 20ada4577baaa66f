//! One runner per command that is more than a call into the library: arguments already
//! parsed and checked by `cli`, results handed back to `main` to print.

pub mod completions;
pub mod operators;
pub mod predict;
pub mod serve;
pub mod validate;
