//! `capplan calibrate`: per-card efficiency factors fitted to finished runs, stored under the
//! measurements folder for `predict` and `solve` to use (unless `--dry-run`).

use std::path::PathBuf;

use anyhow::Context;
use capplan::catalog::{Catalog, DEFAULT_ENGINE};
use capplan::report;

use super::print;
use crate::cli::{CalibrateArgs, Cli};

pub fn run(catalog: &Catalog, cli: &Cli, args: &CalibrateArgs) -> anyhow::Result<()> {
    let curves = capplan::store::curve::load_curves(&args.paths)?;
    let engine = catalog.engine(args.engine.as_deref().unwrap_or(DEFAULT_ENGINE))?;
    let outcome =
        capplan::sim::calibrate_runs::calibrate_runs(&curves, catalog, engine, args.iterations)?;
    let mut written = Vec::new();
    if !args.dry_run {
        let measurements = cli
            .measurements
            .clone()
            .unwrap_or_else(|| PathBuf::from("measurements"));
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
    )
}
