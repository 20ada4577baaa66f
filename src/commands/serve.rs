//! `capplan serve`: the simulated engine behind an OpenAI-compatible API — one engine, or with
//! `--pd P:D` a disaggregated deployment of prefill and decode workers of the same layout.

use std::process::ExitCode;

use anyhow::Context;
use capplan::catalog::Catalog;
use capplan::catalog::PdSplit;
use capplan::sim::disagg::KvHandover;
use capplan::sim::engine::{Engine, EngineOptions, SpeculativeStep};
use capplan::sim::predict::{engine_for, Calibration, Layout};
use capplan::sim::serve::backend::KvTransfer;
use capplan::sim::serve::fault::FaultPlan;
use capplan::sim::serve::{serve, Engines, ServeConfig};
use capplan::workload::Speculation;

use crate::cli::ServeArgs;

/// The engines that serve `layout`: one, or with `pd` its prefill and decode workers with the
/// KV transfer between them; each running `speculation` when given (its drafter's weights
/// taken from the KV cache). Refuses pipeline stages (one engine runs one batch at a time),
/// an empty pool and a layout that does not fit.
pub fn engines_for(
    layout: &Layout,
    calibration: &Calibration,
    options: &EngineOptions,
    pd: Option<PdSplit>,
    speculation: Option<&Speculation>,
) -> anyhow::Result<Engines> {
    if layout.parallel.pp > 1 {
        return Err(capplan::InputError::value(format!(
            "--pp {}: capplan serve runs each worker as one engine and does not simulate \
             pipeline stages' batches in flight yet; `capplan predict` models them",
            layout.parallel.pp
        ))
        .into());
    }
    let mut layout = layout.clone();
    if let Some(speculation) = speculation {
        layout.memory.drafter = speculation.draft_weights();
    }
    let layout = &layout;
    let engine = || -> anyhow::Result<Engine> {
        let (mut engine, _) = engine_for(layout, calibration, options, true)
            .map_err(|rejected| capplan::InputError::value(format!("cannot serve: {rejected}")))?;
        let speculative =
            speculation.map(|speculation| SpeculativeStep::new(speculation, engine.perf()));
        engine.set_speculation(speculative);
        Ok(engine)
    };
    Ok(match pd {
        None => Engines::Aggregated(Box::new(engine()?)),
        Some(split) => {
            if let Some(problem) = split.problem() {
                return Err(capplan::InputError::value(problem).into());
            }
            // Both kinds of worker run the layout asked for.
            let handoff_ms = calibration.efficiency.handoff_ms;
            let handover = KvHandover::between(layout, layout, handoff_ms).map_err(|rejected| {
                capplan::InputError::value(format!("cannot serve: {rejected}"))
            })?;
            let fixed_s = handover.seconds(0.0);
            Engines::Disaggregated {
                prefill: (0..split.prefill)
                    .map(|_| engine())
                    .collect::<Result<_, _>>()?,
                decode: (0..split.decode)
                    .map(|_| engine())
                    .collect::<Result<_, _>>()?,
                transfer: KvTransfer {
                    fixed_s,
                    per_token_s: handover.seconds(1.0) - fixed_s,
                },
            }
        }
    })
}

/// Serves `layout` until Ctrl-C, printing the URL first.
pub fn run(
    catalog: &Catalog,
    args: &ServeArgs,
    layout: &Layout,
    calibration: &Calibration,
) -> anyhow::Result<ExitCode> {
    let profile = args.engine.profile(catalog)?;
    let options = args.engine.options(profile, layout.card);
    let speculation = args.speculative.resolve(None, &[layout.model], catalog)?;
    let engines = engines_for(layout, calibration, &options, args.pd, speculation.as_ref())?;
    let config = ServeConfig {
        host: args.host.clone(),
        port: args.port,
        time_scale: args.time_scale,
        seed: args.seed,
        model_name: args
            .served_model_name
            .clone()
            .unwrap_or_else(|| layout.model.name.clone()),
        output_tokens: args.output_tokens.clone(),
        faults: FaultPlan::new(args.fault.clone(), args.seed)?,
        stall_for: std::time::Duration::from_secs_f64(args.stall_for),
        log: args.log.clone(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(
        engines,
        config,
        |url| {
            use std::io::Write;
            println!("{url}");
            let _ = std::io::stdout().flush();
        },
        async {
            let _ = tokio::signal::ctrl_c().await;
        },
    ))?;
    Ok(ExitCode::SUCCESS)
}
