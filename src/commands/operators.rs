//! `capplan hardware import-operators`: rebuilds `hardware/operators/` from an NVIDIA
//! AIConfigurator checkout.

use std::path::Path;

use anyhow::Context;

/// Converts the checkout at `from` into reduced tables under `out`, MoE layers for the shapes
/// of `catalog`'s mixture-of-experts models; prints what it wrote.
pub fn run(from: &Path, out: &Path, catalog: &capplan::catalog::Catalog) -> anyhow::Result<()> {
    if !from.is_dir() {
        return Err(capplan::InputError::value(format!(
            "{} is not a folder: give the AIConfigurator repository (or its \
             aic-core/src/aiconfigurator_core/systems/data folder)",
            from.display()
        ))
        .into());
    }
    let mut shapes: Vec<String> = catalog
        .models
        .iter()
        .filter_map(|m| m.moe_shape())
        .collect();
    shapes.sort();
    shapes.dedup();
    let summary = capplan::catalog::operators::convert_aiconfigurator(from, out, &shapes)
        .with_context(|| format!("converting {} into {}", from.display(), out.display()))?;
    println!("{summary}");
    Ok(())
}
