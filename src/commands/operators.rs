//! `capplan hardware import-operators`: rebuilds `hardware/operators/` from an NVIDIA
//! AIConfigurator checkout.

use std::path::Path;

use anyhow::Context;

/// Converts the checkout at `from` into reduced tables under `out`, MoE layers for the shapes
/// of `catalog`'s mixture-of-experts models and linear-attention kernels for its hybrid
/// models' heads per card; prints what it wrote.
pub fn run(from: &Path, out: &Path, catalog: &capplan::catalog::Catalog) -> anyhow::Result<()> {
    if !from.is_dir() {
        return Err(capplan::InputError::value(format!(
            "{} is not a folder: give the AIConfigurator repository (or its \
             aic-core/src/aiconfigurator_core/systems/data folder)",
            from.display()
        ))
        .into());
    }
    let mut shapes = capplan::catalog::operators::ModelShapes {
        moe: catalog
            .models
            .iter()
            .filter_map(|m| m.moe_shape())
            .collect(),
        linear_attention: catalog
            .models
            .iter()
            .flat_map(|m| m.linear_attention_variants())
            .collect(),
        sparse_attention: Vec::new(),
        latent_attention: Vec::new(),
    };
    use capplan::catalog::operators::attention_module::{shape_of, SPARSE};
    for (family, shape) in catalog.models.iter().filter_map(shape_of) {
        if family == SPARSE {
            shapes.sparse_attention.push(shape);
        } else {
            shapes.latent_attention.push(shape);
        }
    }
    for list in [
        &mut shapes.moe,
        &mut shapes.linear_attention,
        &mut shapes.sparse_attention,
        &mut shapes.latent_attention,
    ] {
        list.sort();
        list.dedup();
    }
    let summary = capplan::catalog::operators::convert_aiconfigurator(from, out, &shapes)
        .with_context(|| format!("converting {} into {}", from.display(), out.display()))?;
    println!("{summary}");
    Ok(())
}
