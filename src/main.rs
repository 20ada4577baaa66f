//! The `capplan` binary: parses arguments and hands each command to its runner.

mod cli;
mod commands;

use std::process::ExitCode;

use clap::Parser;

use capplan::catalog::Catalog;
use cli::{folder_or_default, Cli, Command, HardwareCommand};
use commands::{calibrations, print, resolve_layout};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(code) => code,
        Err(err) => {
            let mut message = format!("error: {err}");
            for cause in err.chain().skip(1) {
                message.push_str(&format!(": {cause}"));
            }
            eprintln!("{message}");
            if capplan::is_input_error(&err) {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

fn run(cli: &Cli) -> anyhow::Result<ExitCode> {
    // Rebuilding the operator tables must not need the tables it rebuilds.
    if let Command::Hardware(HardwareCommand::ImportOperators { from, out }) = &cli.command {
        // The shapes of the built-in models (whatever a local catalog folder holds).
        let models = Catalog::shipped()?;
        commands::operators::run(from, out, &models)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Command::Completions { shell } = &cli.command {
        commands::completions::run(*shell, &mut std::io::stdout().lock())?;
        return Ok(ExitCode::SUCCESS);
    }
    let hardware = folder_or_default(&cli.hardware, "hardware");
    let catalog = Catalog::load(hardware.as_deref())?;
    let done = |result: anyhow::Result<()>| result.map(|()| ExitCode::SUCCESS);
    match &cli.command {
        Command::Solve(args) => commands::plan::solve(&catalog, cli, args),
        Command::Compare(args) => commands::plan::compare(&catalog, cli, args),
        Command::Hardware(HardwareCommand::ImportOperators { .. })
        | Command::Completions { .. } => {
            unreachable!("handled before the catalog is read")
        }
        Command::Validate(args) => {
            let report = commands::validate::run(&catalog, args)?;
            done(print(&report, cli))
        }
        Command::Hardware(HardwareCommand::List { what }) => {
            done(commands::hardware::list(&catalog, cli, *what))
        }
        Command::Hardware(HardwareCommand::Show { name }) => {
            done(commands::hardware::show(&catalog, cli, name))
        }
        Command::Predict(args) => {
            let engine = args.engine.profile(&catalog)?;
            let (layout, calibration) = resolve_layout(
                &catalog,
                &args.layout,
                &args.memory,
                engine,
                &calibrations(cli)?,
            )?;
            let prediction = commands::predict::run(&catalog, args, &layout, &calibration)?;
            done(print(&prediction, cli))
        }
        Command::Serve(args) => {
            let profile = args.engine.profile(&catalog)?;
            let (layout, calibration) = resolve_layout(
                &catalog,
                &args.layout,
                &args.memory,
                profile,
                &calibrations(cli)?,
            )?;
            commands::serve::run(&catalog, args, &layout, &calibration)
        }
        Command::Probe(args) => commands::probe::run(&catalog, cli, args),
        Command::Fit(args) => done(commands::fit::run(cli, args)),
        Command::Calibrate(args) => done(commands::calibrate::run(&catalog, cli, args)),
        Command::Import(args) => done(commands::import::run(&catalog, cli, args)),
        Command::Memory(args) => done(commands::memory::run(&catalog, cli, args)),
    }
}
