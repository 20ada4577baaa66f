//! `capplan probe`: measure a server (or the embedded simulator) level by level until C* is
//! bracketed, every finished request kept on disk.

use std::process::ExitCode;

use anyhow::Context;
use capplan::catalog::{Catalog, MemoryOptions, DEFAULT_ENGINE};
use capplan::probe::redact::was_redacted;
use capplan::probe::run::{load_config, run_probe, ProbeConfig, RunFolder, Target};
use capplan::sim::engine::EngineOptions;
use capplan::sim::predict::{Calibration, Layout};
use capplan::sim::serve::fault::FaultPlan;
use capplan::sim::serve::{start, RunningServer, ServeConfig};

use super::print;
use crate::cli::{self, Cli, ProbeArgs};

/// Exit 0 when the probe finished (3 when its C* is below `--require-users`), 130 when it was
/// interrupted, 1 when the machine was too busy to measure.
pub fn run(catalog: &Catalog, cli: &Cli, args: &ProbeArgs) -> anyhow::Result<ExitCode> {
    let (config, folder) = match &args.resume {
        Some(dir) => (load_config(dir)?, RunFolder::Resume { dir: dir.clone() }),
        None => (
            args.config(catalog)?,
            RunFolder::New {
                out: cli::runs_folder(&args.out, &cli.measurements),
            },
        ),
    };
    let runtime =
        capplan::probe::run::runtime_for(&config).context("starting the async runtime")?;
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let report = runtime.block_on(async {
        let (url, _server) = match (&config.target, &args.url) {
            // The URL as typed (run.json keeps it without credentials).
            (Target::Url { .. }, Some(typed)) => (typed.clone(), None),
            (Target::Url { url, .. }, None) if was_redacted(url) => {
                return Err(capplan::InputError::value(format!(
                    "this run's URL ({url}) carried credentials, which are not stored: \
                     give it again with --url"
                ))
                .into())
            }
            (Target::Url { url, .. }, None) => (url.clone(), None),
            (Target::Sim { time_scale, faults }, _) => {
                let server = start_simulator(catalog, &config, *time_scale, faults).await?;
                (server.url.clone(), Some(server))
            }
        };
        run_probe(config, &url, folder, progress).await
    })?;
    print(&report, cli)?;
    if report.status == capplan::probe::run::TOO_BUSY {
        if let Some(note) = report
            .notes
            .iter()
            .find(|n| n.starts_with("machine too busy"))
        {
            eprintln!("{note}");
        }
        return Ok(ExitCode::FAILURE);
    }
    if report.status != "finished" {
        return Ok(ExitCode::from(130));
    }
    Ok(match args.require_users {
        Some(needed) if report.result.c_star < needed => {
            eprintln!(
                "C* = {} is below the required {needed} users",
                report.result.c_star
            );
            ExitCode::from(3)
        }
        _ => ExitCode::SUCCESS,
    })
}

/// The simulated deployment of a probe's layout (its workers and speculative decoding, as
/// the probe records them), serving in the background.
async fn start_simulator(
    catalog: &Catalog,
    config: &ProbeConfig,
    time_scale: f64,
    faults: &[String],
) -> anyhow::Result<RunningServer> {
    let model = catalog.model(&config.layout.model)?;
    let card = catalog.card(&config.layout.card)?;
    // The simulator runs what `predict` predicts by default: the vLLM profile.
    let profile = catalog.engine(DEFAULT_ENGINE)?;
    let parallel = capplan::catalog::Parallelism {
        tp: config.layout.tp,
        pp: config.layout.pp,
        dp: config.layout.attention_dp,
        ep: config.layout.ep,
    };
    let layout = Layout {
        interconnect: config.layout.interconnect.clone(),
        memory: MemoryOptions {
            memory_utilization: profile.memory_utilization,
            ..MemoryOptions::default()
        },
        ..Layout::on_card(model, card, config.layout.tp)
    }
    .with_parallel(parallel, None);
    let calibration = Calibration::for_engine(
        card,
        &config.layout.interconnect,
        profile,
        &catalog.operators,
    );
    let options = EngineOptions::for_card(profile, card);
    // The deployment the probe says it measures: its workers and its speculative decoding.
    let engines = super::serve::engines_for(
        &layout,
        &calibration,
        &options,
        config.layout.pd,
        config.layout.speculation.as_ref(),
    )?;
    let rules = faults
        .iter()
        .map(|f| f.parse())
        .collect::<Result<Vec<_>, _>>()?;
    let server = start(
        engines,
        ServeConfig {
            host: "127.0.0.1".into(),
            port: 0,
            time_scale,
            seed: config.seed,
            model_name: config.served_model.clone(),
            output_tokens: config.output_tokens.clone(),
            faults: FaultPlan::new(rules, config.seed)?,
            stall_for: std::time::Duration::from_secs_f64(config.idle_timeout_s + 1.0),
            log: None,
        },
    )
    .await?;
    Ok(server)
}
