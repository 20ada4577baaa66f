//! `capplan validate`: which public tables to score, with the catalog's engine profiles or
//! with overheads fitted here on each source's fit subset.

use capplan::catalog::{Catalog, EngineProfile};
use capplan::validate::fit::fit_overheads;
use capplan::validate::fit_constant::{fit_constant, FittedKind};
use capplan::validate::{
    blis, dstack, score_source, silicon, static_batch, sweeps, TableSource, ValidationReport,
};

use crate::cli::ValidateArgs;

/// The sources `validate` knows, in the order it prints them.
pub const SOURCES: [&str; 7] = [
    "silicon",
    "silicon-moe",
    "silicon-disagg",
    "nim",
    "dstack",
    "blis",
    "static-batch",
];

/// What one stage of `--fit` fits, and on which sources' fit rows.
#[derive(Debug, Clone, Copy, PartialEq)]
enum FitStage {
    /// The per-step, per-sequence and per-request overheads: every source's fit rows but the
    /// mixture-of-experts and disaggregated ones.
    Overheads,
    /// One constant on its own sources' fit rows: the per-expert-layer cost and the
    /// per-request time before the engine on the mixture-of-experts ones, how far benchmark
    /// users fall out of step on every aggregated source's, the hand-off on the
    /// disaggregated ones.
    Constant(FittedKind),
}

impl FitStage {
    fn fits_on(self, source: &TableSource) -> bool {
        let moe = source.model_class == silicon::MOE_CLASS;
        let disaggregated = source.model_class == silicon::DISAGGREGATED_CLASS;
        match self {
            FitStage::Overheads => !moe && !disaggregated,
            FitStage::Constant(FittedKind::MoeLayer | FittedKind::Request) => moe,
            FitStage::Constant(FittedKind::OutOfStep) => !disaggregated,
            FitStage::Constant(FittedKind::Handoff) => disaggregated,
        }
    }

    /// Whether the stage's constant can move `comparison` at all: how far a benchmark's users
    /// fall out of step only matters to users a benchmark started together (not to open-loop
    /// stages or time-windowed sweeps), so only such rows are simulated for it.
    fn moves(self, comparison: &capplan::validate::Comparison) -> bool {
        match self {
            FitStage::Constant(FittedKind::OutOfStep) => {
                matches!(
                    comparison.arrivals,
                    capplan::sim::virtual_run::Arrivals::Closed { .. }
                ) && matches!(
                    comparison.sample.start,
                    capplan::sim::predict::ClosedStart::Together { .. }
                )
            }
            FitStage::Overheads | FitStage::Constant(_) => true,
        }
    }
}

/// The stages `--fit` names, in the order they run (each on the one before); none without it.
fn fit_stages(names: Option<&[String]>) -> Result<Vec<FitStage>, capplan::InputError> {
    let all = [
        FitStage::Overheads,
        FitStage::Constant(FittedKind::MoeLayer),
        FitStage::Constant(FittedKind::Request),
        FitStage::Constant(FittedKind::OutOfStep),
        FitStage::Constant(FittedKind::Handoff),
    ];
    let Some(names) = names else {
        return Ok(Vec::new());
    };
    let mut wanted = Vec::new();
    for name in names {
        let stage = match name.as_str() {
            "all" => {
                wanted.extend(all);
                continue;
            }
            "overheads" => FitStage::Overheads,
            "moe" => FitStage::Constant(FittedKind::MoeLayer),
            "request" => FitStage::Constant(FittedKind::Request),
            "handoff" => FitStage::Constant(FittedKind::Handoff),
            "out-of-step" => FitStage::Constant(FittedKind::OutOfStep),
            other => {
                return Err(capplan::InputError::value(format!(
                "--fit {other}: use overheads, moe, request, out-of-step, handoff or all (comma-separated)"
            )))
            }
        };
        wanted.push(stage);
    }
    Ok(all.into_iter().filter(|s| wanted.contains(s)).collect())
}

/// Reads, predicts and scores the sources `args` names.
pub fn run(catalog: &Catalog, args: &ValidateArgs) -> anyhow::Result<ValidationReport> {
    for name in &args.source {
        if !SOURCES.contains(&name.as_str()) {
            return Err(capplan::InputError::value(format!(
                "unknown validation source '{name}': use {}",
                SOURCES.join(", ")
            ))
            .into());
        }
    }
    for name in &args.engine {
        catalog.engine(name)?;
    }
    let wanted = |name: &str| args.source.is_empty() || args.source.iter().any(|s| s == name);
    let mut sources: Vec<TableSource> = Vec::new();
    if wanted("silicon") {
        sources.push(silicon::source(catalog)?);
    }
    if wanted("silicon-moe") {
        sources.push(silicon::moe_source(catalog)?);
    }
    if wanted("silicon-disagg") {
        sources.push(silicon::disaggregated_source(catalog)?);
    }
    if wanted("nim") {
        for file in &sweeps::FILES {
            sources.push(sweeps::source(catalog, file)?);
        }
    }
    if wanted("dstack") {
        sources.push(dstack::source(catalog)?);
    }
    if wanted("blis") {
        sources.push(blis::source(catalog)?);
    }
    if !args.engine.is_empty() {
        for source in &mut sources {
            source.comparisons.retain(|c| {
                args.engine
                    .iter()
                    .any(|e| catalog.engine(e).is_ok_and(|p| p.name == c.group))
            });
        }
    }
    let start = match args.benchmark_start.as_str() {
        "together" => {
            args.client_jitter
                .map(|jitter_s| capplan::sim::predict::ClosedStart::Together {
                    jitter_s,
                    // The profile's own: each deployment fills it in as it simulates.
                    out_of_step: 0.0,
                })
        }
        "staggered" => Some(capplan::sim::predict::ClosedStart::Staggered),
        other => {
            return Err(capplan::InputError::value(format!(
                "--benchmark-start {other}: use together or staggered"
            ))
            .into())
        }
    };
    if let Some(start) = start {
        for source in &mut sources {
            for comparison in &mut source.comparisons {
                if let capplan::sim::virtual_run::Arrivals::Closed { users } = comparison.arrivals {
                    comparison.sample = restarted(comparison.sample, start, users);
                }
            }
        }
    }
    if let Some(speculation) = &args.speculative {
        let mut applied = 0usize;
        for source in &mut sources {
            let mut here = 0usize;
            for comparison in &mut source.comparisons {
                let Ok(model) = catalog.model(&comparison.deployment.model) else {
                    continue;
                };
                if let Ok(resolved) = speculation.clone().resolve(model, catalog) {
                    comparison.deployment.speculation = Some(resolved);
                    here += 1;
                }
            }
            if here > 0 {
                source.name = format!(
                    "{} (what if: {here} rows with --speculative, {})",
                    source.name, speculation
                );
            }
            applied += here;
        }
        if applied == 0 {
            return Err(capplan::InputError::value(format!(
                "--speculative: no row of the sources chosen is of a model that can run {speculation}"
            ))
            .into());
        }
    }
    if args.roofline {
        for source in &mut sources {
            for comparison in &mut source.comparisons {
                comparison.deployment.roofline = true;
            }
        }
    }
    let stages = fit_stages(args.fit.as_deref())?;
    let mut overrides: Vec<EngineProfile> = Vec::new();
    let mut fitted = Vec::new();
    let mut fitted_constants = Vec::new();
    for stage in stages {
        for catalog_profile in &catalog.engines {
            // Each stage starts from the one before it, else from the catalog's profile.
            let base = overrides
                .iter()
                .find(|p| p.name == catalog_profile.name)
                .unwrap_or(catalog_profile)
                .clone();
            let rows: Vec<_> = sources
                .iter()
                .filter(|s| stage.fits_on(s))
                .flat_map(|s| s.comparisons.iter())
                .filter(|c| c.group == base.name && c.subset == silicon::FIT_SUBSET)
                .filter(|c| stage.moves(c))
                .cloned()
                .collect();
            if rows.is_empty() {
                continue;
            }
            let profile = match stage {
                FitStage::Overheads => {
                    let (profile, summary) = fit_overheads(catalog, &rows, &base, 80)
                        .map_err(|err| anyhow::anyhow!("fitting {}: {err}", base.name))?;
                    fitted.push(summary);
                    profile
                }
                FitStage::Constant(kind) => {
                    let (profile, summary) = fit_constant(catalog, &rows, &base, kind);
                    fitted_constants.push(summary);
                    profile
                }
            };
            overrides.retain(|p| p.name != profile.name);
            overrides.push(profile);
        }
    }
    let roofline_twins: Vec<TableSource> = match &args.write_bands {
        Some(_) if !args.roofline => sources
            .iter()
            .map(|source| {
                let mut twin = source.clone();
                twin.name = format!("{} (roofline)", source.name);
                for comparison in &mut twin.comparisons {
                    comparison.deployment.roofline = true;
                }
                twin
            })
            .collect(),
        _ => Vec::new(),
    };
    let sources: Vec<_> = sources
        .into_iter()
        .chain(roofline_twins)
        .map(|source| score_source(catalog, source, &overrides, args.details))
        .collect();
    let scored: Vec<&capplan::validate::SourceScore> = sources.iter().collect();
    if let Some(path) = &args.write_bands {
        let bands = capplan::validate::bands(
            &scored,
            "held-out sweeps of the public tables in tests/fixtures/validation, `capplan validate`",
        );
        std::fs::write(path, capplan::validate::bands_toml(&bands))
            .map_err(|err| anyhow::anyhow!("writing {}: {err}", path.display()))?;
        eprintln!("wrote {} bands to {}", bands.len(), path.display());
    }
    let static_batch = if wanted("static-batch") {
        Some(static_batch::score(
            catalog,
            catalog.engine("trtllm-0.x")?,
            args.details,
        )?)
    } else {
        None
    };
    let band_coverage = capplan::validate::bands::coverage(&scored);
    Ok(ValidationReport {
        fitted,
        fitted_constants,
        sources,
        static_batch,
        band_coverage,
        details: args.details,
    })
}

/// `sample` with its users started as `start` asks: a time-windowed sample keeps its windows
/// under a new jitter, and becomes a counted one (two warm-up rounds, 20 measured) under
/// another start; a counted sample keeps its counts.
fn restarted(
    sample: capplan::sim::measuring_client::LevelSample,
    start: capplan::sim::predict::ClosedStart,
    users: u32,
) -> capplan::sim::measuring_client::LevelSample {
    use capplan::sim::measuring_client::LevelSample;
    use capplan::sim::predict::ClosedStart;
    match (sample.start, start) {
        (
            ClosedStart::Windows {
                window_ms, windows, ..
            },
            ClosedStart::Together { jitter_s, .. },
        ) => LevelSample::time_windows(window_ms, windows, jitter_s),
        (ClosedStart::Windows { .. }, _) => LevelSample {
            start,
            ..LevelSample::benchmark(users, capplan::validate::silicon::BENCHMARK_ROUNDS, 0.0)
        },
        _ => LevelSample { start, ..sample },
    }
}
