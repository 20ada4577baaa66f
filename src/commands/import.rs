//! `capplan import`: another benchmark's results (AIPerf, GenAI-Perf, vLLM's bench, GuideLLM,
//! EvalScope, a steps table) as a run folder `fit` and `solve` read like a probe's.

use anyhow::Context;
use capplan::catalog::Catalog;
use capplan::report;

use super::print;
use crate::cli::{self, Cli, ImportArgs};

pub fn run(catalog: &Catalog, cli: &Cli, args: &ImportArgs) -> anyhow::Result<()> {
    let context = args.context(catalog)?;
    let imported = capplan::store::import::read(args.from, &args.paths)?;
    let out = cli::runs_folder(&args.out, &cli.measurements);
    let run_dir = capplan::store::import::run::write_import(&out, &imported, &context)
        .with_context(|| format!("writing a run folder under {}", out.display()))?;
    print(&report::import::ImportReport { run_dir, imported }, cli)
}
