//! Taking vLLM's module timings to the fused ops a serving engine runs.
//!
//! AIConfigurator's module collectors run vLLM's modelling code eagerly. Until its collector
//! fix of 2026-07-29 (ai-dynamo/aiconfigurator#1423, commit c56db49fe) that code dispatched
//! RMSNorm, rotary embedding and activations to their native decompositions — an eager
//! mean / pow / rsqrt / mul chain per norm — which a serving engine never runs (torch.compile
//! fuses them; eager regions use vLLM's CUDA kernels). The commit measures it at about 50–65 µs
//! per layer at any batch, and small and medium decode batches 25–35 % slow. Only B200's
//! vLLM 0.24.0 latent-attention tables were collected again with the fix (its
//! `collection_meta.yaml` says `norm_dispatch`); every other system's still carries the chain.
//!
//! B200's two collections — the one before the fix and the one after — time the same cells,
//! so their ratio, cell by cell on the reduced grid, is what the chain costs there. The
//! reduction scales the other systems' latent-attention module tables by it: the Blackwell
//! systems' tables before the fix match B200's before the fix to within a few per cent (73.4
//! against 72.7 µs a decode layer at 4 heads and one sequence on GB200), and Hopper's chain is
//! the same kernels. The factors are shipped in `hardware/operators/vllm-module-native-chain.csv`
//! (written by `tests/native-chain-factors.py`), so the reduction stays one command.
//! Sparse attention (`dsa_*`) is left as collected: its module is larger, so the latent
//! attention's ratio would overstate what the chain is of it.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, Context};

/// The file of factors, in the folder the reduction writes.
pub const FILE: &str = "vllm-module-native-chain.csv";

/// The factor of each reduced cell: (table, variant, heads, batch) → one factor per length.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NativeChainFactors {
    rows: BTreeMap<(String, String, u64, u64), Vec<f64>>,
}

impl NativeChainFactors {
    /// Reads the factors in `folder`; `None` when it holds none (the reduction then keeps the
    /// tables as collected, which is how the factors themselves are derived).
    pub fn read(folder: &Path) -> anyhow::Result<Option<NativeChainFactors>> {
        let path = folder.join(FILE);
        if !path.is_file() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text)
            .map(Some)
            .map_err(|err| anyhow!("{}: {err}", path.display()))
    }

    /// Lines `table,variant,heads,batch,f1 f2 …`; `#` lines are comments.
    pub fn parse(text: &str) -> Result<NativeChainFactors, String> {
        let mut rows = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split(',').collect();
            let bad = || format!("line {}: want table,variant,heads,batch,factors", n + 1);
            let [table, variant, heads, batch, factors] = fields[..] else {
                return Err(bad());
            };
            let number = |s: &str| s.parse::<u64>().map_err(|_| bad());
            let factors = factors
                .split_whitespace()
                .map(|f| f.parse::<f64>().ok().filter(|v| *v > 0.0 && v.is_finite()))
                .collect::<Option<Vec<f64>>>()
                .ok_or_else(|| format!("line {}: factors must be positive numbers", n + 1))?;
            rows.insert(
                (
                    table.to_string(),
                    variant.to_string(),
                    number(heads)?,
                    number(batch)?,
                ),
                factors,
            );
        }
        Ok(NativeChainFactors { rows })
    }

    /// The factors of one reduced row, one per length, when the file has that row. A 16-bit
    /// cache's row takes the FP8 cache's factors: B200's reduced tables keep only the FP8
    /// cache, and the chain (norms, rotary embedding) does not touch the cache.
    pub fn of(&self, table: &str, variant: &str, heads: u64, batch: u64) -> Option<&[f64]> {
        let row = |variant: &str| {
            self.rows
                .get(&(table.to_string(), variant.to_string(), heads, batch))
                .map(Vec::as_slice)
        };
        row(variant).or_else(|| row(&variant.replace(".kv_bf16.", ".kv_fp8.")))
    }
}

/// Whether the collection in `version_dir` ran vLLM's module with the engine's fused ops (its
/// `collection_meta.yaml` names the norm dispatch the fix pinned).
pub fn collected_fused(version_dir: &Path) -> bool {
    std::fs::read_to_string(version_dir.join("collection_meta.yaml"))
        .is_ok_and(|meta| meta.contains("norm_dispatch"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors_parse_per_row_and_refuse_what_is_not_a_factor() {
        let factors = NativeChainFactors::parse(
            "# B200 after / before\nmla_module_generation,bf16.kv_fp8.h7168,4,1,0.457 0.5\n",
        )
        .unwrap();
        assert_eq!(
            factors.of("mla_module_generation", "bf16.kv_fp8.h7168", 4, 1),
            Some(&[0.457, 0.5][..])
        );
        assert_eq!(
            factors.of("mla_module_generation", "bf16.kv_bf16.h7168", 4, 1),
            Some(&[0.457, 0.5][..])
        );
        assert_eq!(
            factors.of("mla_module_generation", "bf16.kv_fp8.h7168", 8, 1),
            None
        );
        let err = NativeChainFactors::parse("mla_module_context,x,4,1,0.5 -1\n").unwrap_err();
        assert!(err.contains("line 1"), "{err}");
        assert!(NativeChainFactors::parse("mla_module_context,x,4\n").is_err());
    }
}
