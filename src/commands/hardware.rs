//! `capplan hardware list` and `capplan hardware show`: the catalog as capplan reads it.

use capplan::catalog::names::suggestion;
use capplan::catalog::Catalog;
use capplan::report::hardware::{CatalogEntry, CatalogListing};

use super::print;
use crate::cli::{Cli, ListWhat};

pub fn list(catalog: &Catalog, cli: &Cli, what: ListWhat) -> anyhow::Result<()> {
    print(&CatalogListing::new(catalog, what.section()), cli)
}

/// One card, node shape, engine profile or model by name (tried in that order).
pub fn show(catalog: &Catalog, cli: &Cli, name: &str) -> anyhow::Result<()> {
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
                    name: name.to_string(),
                    hint: nearest_any(catalog, name),
                })?
                .clone(),
        )
    };
    print(&entry, cli)
}

/// The nearest card, node and model names to a mistyped one.
fn nearest_any(catalog: &Catalog, name: &str) -> String {
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
