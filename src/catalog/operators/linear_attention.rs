//! Linear attention: AIConfigurator's Gated DeltaNet kernel timings (`gdn_perf`), reduced to
//! the `gdn_context` and `gdn_generation` tables.
//!
//! A hybrid model's linear-attention layer (Qwen3.5, Qwen3-Next) runs its projections as
//! GEMMs, which the GEMM tables time, and between them two kernels of its own: a short causal
//! convolution and the gated delta rule over the recurrent state. A prompt runs the chunked
//! form (`causal_conv1d_fn` + `chunk_gated_delta_rule`), whose time grows with the prompt's
//! tokens; a decode step the recurrent form (`causal_conv1d_update` + the fused recurrent
//! update), which reads and writes every sequence's state once. Neither is near a roofline
//! (the chunked kernel runs at a few percent of the card's peak), so they are timed from what
//! was measured or not at all.
//!
//! Kept: the sum of the two kernels per phase, per heads one card holds (key heads, value
//! heads, head widths: the variant `k4.v16.dk128.dv128`), for the catalog's models at the
//! tensor-parallel widths they run; the prompt along its tokens (one sequence: the kernels
//! run over a step's prompt tokens as one varlen batch), the decode step along its sequences.
//! The model width AIConfigurator collected each variant at does not enter these kernels; the
//! fastest of its duplicates is kept.

use std::collections::BTreeMap;
use std::path::Path;

use super::convert::{axis_line, floats, join, never_slower_than_larger, newest, read, strings};

const FILE: &str = "gdn_perf.parquet";

/// What the reduction wrote for one system × engine.
#[derive(Debug, Default)]
pub(super) struct LinearAttentionTables {
    pub axes: String,
    pub data: String,
    /// Engine release the tables come from, when any.
    pub version: Option<String>,
}

/// The kernels each phase sums, by `kernel_source`.
const CONTEXT_KERNELS: [&str; 2] = ["causal_conv1d_fn", "chunk_gated_delta_rule"];
const GENERATION_KERNELS: [&str; 2] = [
    "causal_conv1d_update",
    "fused_recurrent_gated_delta_rule_packed_decode",
];

/// The variant name of `key_heads` and `value_heads` on one card, heads `key_dim` and
/// `value_dim` wide.
pub fn variant(key_heads: u32, value_heads: u32, key_dim: u32, value_dim: u32) -> String {
    format!("k{key_heads}.v{value_heads}.dk{key_dim}.dv{value_dim}")
}

/// Reduces `dir`'s (one system's data folder) Gated DeltaNet timings under `engine` for the
/// per-card head layouts `variants`, from release `preferred` when it collected them (the
/// GEMMs' release), else the newest that did.
pub(super) fn reduce(
    dir: &Path,
    engine: &str,
    preferred: &str,
    variants: &[String],
) -> anyhow::Result<LinearAttentionTables> {
    let base = dir.join("linear_attention").join(engine);
    let version = if base.join(preferred).join(FILE).is_file() {
        Some(preferred.to_string())
    } else {
        newest(&base, &[FILE])
    };
    let Some(version) = version.filter(|_| !variants.is_empty()) else {
        return Ok(LinearAttentionTables::default());
    };
    let df = read(&base.join(&version).join(FILE))?;
    let (kernel, phase) = (strings(&df, "kernel_source")?, strings(&df, "phase")?);
    let (batch, seq_len, latency) = (
        floats(&df, "batch_size")?,
        floats(&df, "seq_len")?,
        floats(&df, "latency")?,
    );
    let (kh, vh, kd, vd) = (
        floats(&df, "num_k_heads")?,
        floats(&df, "num_v_heads")?,
        floats(&df, "head_k_dim")?,
        floats(&df, "head_v_dim")?,
    );
    let model = strings(&df, "model_name")?;
    let mut out = LinearAttentionTables::default();
    for (table, wanted_phase, axis_name, kernels) in [
        ("gdn_context", "context", "tokens", CONTEXT_KERNELS),
        ("gdn_generation", "generation", "batch", GENERATION_KERNELS),
    ] {
        // (variant, model, position along the axis) → µs of each kernel.
        let mut cells: BTreeMap<(String, String, u64), [Option<f64>; 2]> = BTreeMap::new();
        for i in 0..latency.len() {
            let Some(slot) = kernels.iter().position(|k| *k == kernel[i]) else {
                continue;
            };
            if phase[i] != wanted_phase || latency[i] <= 0.0 {
                continue;
            }
            // A prompt: one sequence along its tokens; a decode step: one token a sequence.
            let position = match table {
                "gdn_context" if batch[i] == 1.0 => seq_len[i],
                "gdn_generation" if seq_len[i] == 1.0 => batch[i],
                _ => continue,
            };
            let name = variant(kh[i] as u32, vh[i] as u32, kd[i] as u32, vd[i] as u32);
            if !variants.contains(&name) {
                continue;
            }
            let cell = cells
                .entry((name, model[i].clone(), position as u64))
                .or_default();
            // Milliseconds in the collection, µs here.
            cell[slot] = Some(latency[i] * 1e3);
        }
        // Per variant and position: the fastest model's sum of both kernels.
        let mut curves: BTreeMap<String, BTreeMap<u64, f64>> = BTreeMap::new();
        for ((name, _, position), [a, b]) in cells {
            let (Some(a), Some(b)) = (a, b) else { continue };
            let best = curves
                .entry(name)
                .or_default()
                .entry(position)
                .or_insert(f64::MAX);
            *best = best.min(a + b);
        }
        // One axis for the table: the positions every kept variant measured.
        let mut axis: Option<Vec<u64>> = None;
        for curve in curves.values() {
            let here: Vec<u64> = curve.keys().copied().collect();
            axis = Some(match axis {
                None => here,
                Some(before) => before.into_iter().filter(|p| here.contains(p)).collect(),
            });
        }
        let Some(axis) = axis.filter(|a| !a.is_empty()) else {
            continue;
        };
        let axis_values: Vec<f64> = axis.iter().map(|&p| p as f64).collect();
        out.axes
            .push_str(&axis_line(table, axis_name, &axis_values));
        for (name, curve) in &curves {
            // A larger problem never measured faster (collection noise), as for the GEMMs.
            let mut values: Vec<f64> = axis.iter().map(|p| curve[p]).collect();
            never_slower_than_larger(&mut values);
            out.data
                .push_str(&format!("{table},{name},,,{}\n", join(&values)));
        }
    }
    if !out.data.is_empty() {
        out.version = Some(version);
    }
    Ok(out)
}
