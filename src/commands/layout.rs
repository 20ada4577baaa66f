//! The instance `predict` and `serve` are asked about: the flags' model, card and layout,
//! linked as the named node shape (or the card's own link), with the efficiency factors and
//! operator tables it will be simulated with.

use capplan::catalog::{Catalog, EngineProfile};
use capplan::sim::calibration_file::Calibrations;
use capplan::sim::predict::{Calibration, Layout};

use crate::cli::{folder_or_default, Cli, LayoutArgs, MemoryFlags};

/// The calibrations stored under the measurements folder (none without one).
pub fn calibrations(cli: &Cli) -> anyhow::Result<Calibrations> {
    Ok(match folder_or_default(&cli.measurements, "measurements") {
        Some(dir) => Calibrations::load(&dir)?,
        None => Calibrations::default(),
    })
}

pub fn resolve_layout<'a>(
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
    // Without a named node shape, the card's largest on its own link: an instance wider
    // than one node needs its domain and network, and its topology says which measured
    // all-reduce the cards run.
    let node = node.or_else(|| catalog.largest_node_of(card));
    let calibration = calibrations.for_engine(card, &interconnect, engine, &catalog.operators);
    let layout = Layout {
        interconnect,
        memory: memory.options_for(engine),
        ..Layout::on_card(model, card, args.tp)
    }
    .with_parallel(parallel, node);
    Ok((layout, calibration))
}
