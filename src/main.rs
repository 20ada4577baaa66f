//! The `capplan` binary: parses arguments and hands them to the library.

mod cli;
mod commands;

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use capplan::catalog::{memory_fit_layout, Catalog, EngineProfile, MemoryOptions, DEFAULT_ENGINE};
use capplan::plan::compare::{CompareOptions, CompareReport, ScenarioName};
use capplan::probe::redact::was_redacted;
use capplan::probe::run::{load_config, run_probe, ProbeConfig, RunFolder, Target};
use capplan::report::hardware::{CatalogEntry, CatalogListing};
use capplan::report::memory::MemoryReport;
use capplan::report::{render, Report};
use capplan::sim::calibration_file::Calibrations;
use capplan::sim::engine::EngineOptions;
use capplan::sim::predict::{Calibration, Layout};
use capplan::sim::serve::fault::FaultPlan;
use capplan::sim::serve::{start, RunningServer, ServeConfig};
use capplan::{plan, report};
use cli::{
    folder_or_default, Cli, Command, HardwareCommand, LayoutArgs, MemoryFlags, ResolvedSolve,
};

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

fn print<R: Report>(report: &R, cli: &Cli) -> anyhow::Result<()> {
    print!("{}", render(report, cli.format)?);
    Ok(())
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
    match &cli.command {
        Command::Solve(args) => {
            let resolved = args.resolve(&catalog)?;
            let report = solve_for(&catalog, cli, &resolved, &resolved.request)?;
            print(&report, cli)?;
            if let Some(scenario) = &resolved.scenario {
                // A scenario file asks for the whole answer: costs, sensitivity, report files.
                let options = cli::compare_options(None, Some(scenario), &catalog)?;
                let comparison = compare_for(&catalog, cli, &resolved, &options, report.clone())?;
                save_comparison(&comparison, args.out.as_deref(), &scenario.name)?;
            }
            // No plan is not a crash, but a script must not mistake it for an answer.
            Ok(if report.has_plans() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Compare(args) => {
            let resolved = args.solve.resolve(&catalog)?;
            let options = args.options(resolved.scenario.as_ref(), &catalog)?;
            let report = solve_for(&catalog, cli, &resolved, &resolved.request)?;
            let has_plans = report.has_plans();
            let comparison = compare_for(&catalog, cli, &resolved, &options, report)?;
            print(&comparison, cli)?;
            let name = resolved
                .scenario
                .as_ref()
                .map_or_else(|| "compare".to_string(), |s| s.name.clone());
            save_comparison(&comparison, args.solve.out.as_deref(), &name)?;
            Ok(if has_plans {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Hardware(HardwareCommand::ImportOperators { .. })
        | Command::Completions { .. } => {
            unreachable!("handled before the catalog is read")
        }
        Command::Validate(args) => {
            let report = commands::validate::run(&catalog, args)?;
            print(&report, cli)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Hardware(HardwareCommand::List { what }) => {
            print(&CatalogListing::new(&catalog, what.section()), cli)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Hardware(HardwareCommand::Show { name }) => {
            let entry = if let Ok(card) = catalog.card(name) {
                CatalogEntry::Card(card.clone())
            } else if let Ok(node) = catalog.node(name) {
                CatalogEntry::Node(node.clone())
            } else if let Ok(engine) = catalog.engine(name) {
                CatalogEntry::Engine(engine.clone())
            } else {
                CatalogEntry::Model(
                    catalog
                        .model(name)
                        .map_err(|_| capplan::InputError::UnknownName {
                            kind: "card, node, model or engine",
                            name: name.clone(),
                            hint: nearest_any(&catalog, name),
                        })?
                        .clone(),
                )
            };
            print(&entry, cli)?;
            Ok(ExitCode::SUCCESS)
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
            print(&prediction, cli)?;
            Ok(ExitCode::SUCCESS)
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
        Command::Probe(args) => {
            let (config, folder) = match &args.resume {
                Some(dir) => (load_config(dir)?, RunFolder::Resume { dir: dir.clone() }),
                None => (
                    args.config(&catalog)?,
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
                        let server =
                            start_simulator(&catalog, &config, *time_scale, faults).await?;
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
        Command::Fit(args) => {
            let curves = capplan::store::curve::load_curves(&args.paths)?;
            if let Some(out) = &args.out {
                std::fs::create_dir_all(out)
                    .with_context(|| format!("creating {}", out.display()))?;
            }
            let settings = args.settings();
            let mut entries = Vec::new();
            for curve in curves {
                let fitted = capplan::fit::fit_measured(curve, &settings);
                let written =
                    report::fit::save(&fitted, report::fit::stem_in(&fitted, args.out.as_deref()))?;
                entries.push(report::fit::FittedEntry { fitted, written });
            }
            print(&report::fit::FitReport { curves: entries }, cli)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Calibrate(args) => {
            let curves = capplan::store::curve::load_curves(&args.paths)?;
            let engine = catalog.engine(args.engine.as_deref().unwrap_or(DEFAULT_ENGINE))?;
            let outcome = capplan::sim::calibrate_runs::calibrate_runs(
                &curves,
                &catalog,
                engine,
                args.iterations,
            )?;
            let mut written = Vec::new();
            if !args.dry_run {
                let measurements = cli
                    .measurements
                    .clone()
                    .unwrap_or_else(|| std::path::PathBuf::from("measurements"));
                let created = capplan::probe::run_dir::utc_stamp(std::time::SystemTime::now());
                for card in &outcome.cards {
                    let path = capplan::sim::calibration_file::write_calibration(
                        &measurements,
                        &card.stored(created.clone()),
                    )
                    .with_context(|| format!("writing under {}", measurements.display()))?;
                    written.push(path.display().to_string());
                }
            }
            print(
                &report::calibrate::CalibrateReport { outcome, written },
                cli,
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Import(args) => {
            let context = args.context(&catalog)?;
            let imported = capplan::store::import::read(args.from, &args.paths)?;
            let out = cli::runs_folder(&args.out, &cli.measurements);
            let run_dir = capplan::store::import::run::write_import(&out, &imported, &context)
                .with_context(|| format!("writing a run folder under {}", out.display()))?;
            print(&report::import::ImportReport { run_dir, imported }, cli)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Memory(args) => {
            let model = catalog.model(&args.model)?;
            let card = catalog.card(&args.card)?;
            let options = args.memory.options();
            let parallel = args.parallel.with_tp(args.tp);
            match memory_fit_layout(model, card, &parallel, &options) {
                Ok(fit) => {
                    print(&MemoryReport { fits: true, fit }, cli)?;
                    Ok(ExitCode::SUCCESS)
                }
                Err(rejected) => Err(capplan::InputError::value(format!(
                    "layout does not fit: {rejected}"
                ))
                .into()),
            }
        }
    }
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
    let engines = commands::serve::engines_for(
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

/// The instance the flags name, linked as the named node shape (or the card's own link), with
/// the efficiency factors it will be simulated with.
/// Solves `request` on the measurements and predictions `resolved` allows.
fn solve_for(
    catalog: &Catalog,
    cli: &Cli,
    resolved: &ResolvedSolve,
    request: &capplan::plan::SolveRequest,
) -> anyhow::Result<plan::SolveReport> {
    let dir = folder_or_default(&cli.measurements, "measurements");
    let evidence = match &dir {
        Some(dir) => plan::measured::load_evidence(dir, catalog, &request.slo)
            .with_context(|| format!("reading measurements in {}", dir.display()))?,
        None => Default::default(),
    };
    let variant = ResolvedSolve {
        request: request.clone(),
        ..resolved.clone()
    };
    let mut predictor = variant.predictor(calibrations(cli)?, catalog);
    let mut report = plan::solve(
        catalog,
        &evidence.points,
        request,
        predictor
            .as_mut()
            .map(|p| p as &mut dyn capplan::plan::predicted::CapacityPredictor),
    )?;
    report.notes.extend(evidence.notes);
    Ok(report)
}

/// Costs `report`, and how nodes and cost move with the demand and the SLO.
fn compare_for(
    catalog: &Catalog,
    cli: &Cli,
    resolved: &ResolvedSolve,
    options: &CompareOptions,
    report: plan::SolveReport,
) -> anyhow::Result<CompareReport> {
    let mut comparison = plan::compare::compare(catalog, report, options);
    comparison.scenario = resolved.scenario.as_ref().map(|s| ScenarioName {
        name: s.name.clone(),
        description: s.description.clone(),
    });
    comparison.sensitivity = Some(plan::sensitivity::sensitivity(&comparison, |request| {
        let report = solve_for(catalog, cli, resolved, request)?;
        Ok(plan::compare::compare(catalog, report, options))
    })?);
    Ok(comparison)
}

/// Writes a comparison's report files to `out` (default `plans/out`), and says where on stderr
/// (stdout may be JSON).
fn save_comparison(
    comparison: &CompareReport,
    out: Option<&std::path::Path>,
    name: &str,
) -> anyhow::Result<()> {
    let dir = out.map_or_else(
        || std::path::PathBuf::from("plans/out"),
        |d| d.to_path_buf(),
    );
    let written = report::compare::save(comparison, &dir, name)?;
    eprintln!(
        "wrote {}",
        written
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// The calibrations stored under the measurements folder (none without one).
fn calibrations(cli: &Cli) -> anyhow::Result<Calibrations> {
    Ok(match folder_or_default(&cli.measurements, "measurements") {
        Some(dir) => Calibrations::load(&dir)?,
        None => Calibrations::default(),
    })
}

fn resolve_layout<'a>(
    catalog: &'a Catalog,
    args: &LayoutArgs,
    memory: &MemoryFlags,
    engine: &EngineProfile,
    calibrations: &Calibrations,
) -> anyhow::Result<(Layout<'a>, Calibration)> {
    let model = catalog.model(&args.model)?;
    let card = catalog.card(&args.card)?;
    let parallel = args.parallel.with_tp(args.tp);
    let node = match args.node.as_deref() {
        None => None,
        Some(name) => {
            let node = catalog.node(name)?;
            if node.card != card.name {
                return Err(capplan::InputError::value(format!(
                    "node '{}' holds {} cards, not {}",
                    node.name, node.card, card.name
                ))
                .into());
            }
            Some(node)
        }
    };
    let interconnect = node.map_or_else(|| card.interconnect.clone(), |n| n.interconnect.clone());
    // An instance wider than one node needs a node shape's domain and network: the largest
    // node of the card on its own link.
    let node = node.or_else(|| {
        catalog
            .nodes
            .iter()
            .filter(|n| n.card == card.name && n.interconnect == card.interconnect)
            .max_by_key(|n| n.cards_per_node)
    });
    let calibration = calibrations.for_engine(card, &interconnect, engine, &catalog.operators);
    let layout = Layout {
        interconnect,
        memory: memory.options_for(engine),
        ..Layout::on_card(model, card, args.tp)
    }
    .with_parallel(parallel, node);
    Ok((layout, calibration))
}

fn nearest_any(catalog: &Catalog, name: &str) -> String {
    use capplan::catalog::names::suggestion;
    let all: Vec<String> = [
        suggestion(&catalog.cards, name, "card"),
        suggestion(&catalog.nodes, name, "node"),
        suggestion(&catalog.models, name, "model"),
    ]
    .into_iter()
    .filter(|hint| hint.contains("nearest"))
    .collect();
    if all.is_empty() {
        " (see `capplan hardware list`)".into()
    } else {
        all.join("")
    }
}
