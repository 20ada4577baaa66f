//! `capplan fit`: the latency curves and C* of finished runs, each written beside its run (or
//! under `--out`).

use anyhow::Context;
use capplan::report;

use super::print;
use crate::cli::{Cli, FitArgs};

pub fn run(cli: &Cli, args: &FitArgs) -> anyhow::Result<()> {
    let curves = capplan::store::curve::load_curves(&args.paths)?;
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    }
    let settings = args.settings();
    let mut entries = Vec::new();
    for curve in curves {
        let fitted = capplan::fit::fit_measured(curve, &settings);
        let written =
            report::fit::save(&fitted, report::fit::stem_in(&fitted, args.out.as_deref()))?;
        entries.push(report::fit::FittedEntry { fitted, written });
    }
    print(&report::fit::FitReport { curves: entries }, cli)
}
