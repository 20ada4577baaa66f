//! `capplan hardware import-operators`: rebuilds `hardware/operators/` from an NVIDIA
//! AIConfigurator checkout.

use std::path::Path;

use anyhow::Context;

/// Converts the checkout at `from` into reduced tables under `out`; prints what it wrote.
pub fn run(from: &Path, out: &Path) -> anyhow::Result<()> {
    if !from.is_dir() {
        return Err(capplan::InputError::value(format!(
            "{} is not a folder: give the AIConfigurator repository (or its \
             aic-core/src/aiconfigurator_core/systems/data folder)",
            from.display()
        ))
        .into());
    }
    let summary = capplan::catalog::operators::convert_aiconfigurator(from, out)
        .with_context(|| format!("converting {} into {}", from.display(), out.display()))?;
    println!("{summary}");
    Ok(())
}
