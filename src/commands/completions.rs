//! `capplan completions SHELL`: the shell's completion script for every command and flag,
//! generated from the same clap definitions that parse them (so it never drifts).

use std::io::Write;

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

/// Writes `shell`'s completion script to `out`.
pub fn run(shell: Shell, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut command = Cli::command();
    clap_complete::generate(shell, &mut command, "capplan", out);
    out.flush()?;
    Ok(())
}
