//! One runner per command: arguments already parsed and checked by `cli`, results printed in
//! the format asked; `main` only dispatches.

pub mod calibrate;
pub mod completions;
pub mod fit;
pub mod hardware;
pub mod import;
pub mod layout;
pub mod memory;
pub mod operators;
pub mod plan;
pub mod predict;
pub mod probe;
pub mod serve;
pub mod validate;

use capplan::report::{render, Report};

pub use layout::{calibrations, resolve_layout};

use crate::cli::Cli;

/// Prints `report` to stdout in the format the command line asked for.
pub fn print<R: Report>(report: &R, cli: &Cli) -> anyhow::Result<()> {
    print!("{}", render(report, cli.format)?);
    Ok(())
}
