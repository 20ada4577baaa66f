//! `capplan memory`: how one layout of a model fills a card — weights, KV cache, activations —
//! or why it does not fit (exit 2, naming what overflows).

use capplan::catalog::{memory_fit_layout, Catalog};
use capplan::report::memory::MemoryReport;

use super::print;
use crate::cli::{Cli, MemoryArgs};

pub fn run(catalog: &Catalog, cli: &Cli, args: &MemoryArgs) -> anyhow::Result<()> {
    let model = catalog.model(&args.model)?;
    let card = catalog.card(&args.card)?;
    let options = args.memory.options();
    let parallel = args.parallel.with_tp(args.tp);
    match memory_fit_layout(model, card, &parallel, &options) {
        Ok(fit) => print(&MemoryReport { fits: true, fit }, cli),
        Err(rejected) => {
            Err(capplan::InputError::value(format!("layout does not fit: {rejected}")).into())
        }
    }
}
