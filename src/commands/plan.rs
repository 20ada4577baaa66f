//! `capplan solve` and `capplan compare`: the plan from measured, imported and predicted
//! capacity and, for `compare` or a scenario file, its costs, sensitivity and report files.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use capplan::catalog::Catalog;
use capplan::plan::compare::{CompareOptions, CompareReport, ScenarioName};
use capplan::{plan, report};

use super::{calibrations, print};
use crate::cli::{self, folder_or_default, Cli, CompareArgs, ResolvedSolve, SolveArgs};

/// `capplan solve`; a scenario file also writes the comparison's report files.
pub fn solve(catalog: &Catalog, cli: &Cli, args: &SolveArgs) -> anyhow::Result<ExitCode> {
    let resolved = args.resolve(catalog)?;
    let report = solve_for(catalog, cli, &resolved, &resolved.request)?;
    print(&report, cli)?;
    if let Some(scenario) = &resolved.scenario {
        // A scenario file asks for the whole answer: costs, sensitivity, report files.
        let options = cli::compare_options(None, Some(scenario), catalog)?;
        let comparison = compare_for(catalog, cli, &resolved, &options, report.clone())?;
        save_comparison(&comparison, args.out.as_deref(), &scenario.name)?;
    }
    Ok(plans_found(report.has_plans()))
}

/// `capplan compare`.
pub fn compare(catalog: &Catalog, cli: &Cli, args: &CompareArgs) -> anyhow::Result<ExitCode> {
    let resolved = args.solve.resolve(catalog)?;
    let options = args.options(resolved.scenario.as_ref(), catalog)?;
    let report = solve_for(catalog, cli, &resolved, &resolved.request)?;
    let has_plans = report.has_plans();
    let comparison = compare_for(catalog, cli, &resolved, &options, report)?;
    print(&comparison, cli)?;
    let name = resolved
        .scenario
        .as_ref()
        .map_or_else(|| "compare".to_string(), |s| s.name.clone());
    save_comparison(&comparison, args.solve.out.as_deref(), &name)?;
    Ok(plans_found(has_plans))
}

/// No plan is not a crash, but a script must not mistake it for an answer.
fn plans_found(found: bool) -> ExitCode {
    if found {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

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
    out: Option<&Path>,
    name: &str,
) -> anyhow::Result<()> {
    let dir = out.map_or_else(|| PathBuf::from("plans/out"), Path::to_path_buf);
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
