//! How a memory fit reads.

use serde::Serialize;

use super::{Document, Report, Table};
use crate::catalog::MemoryFit;

/// The memory picture of one layout, for `capplan memory`.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryReport {
    pub fits: bool,
    #[serde(flatten)]
    pub fit: MemoryFit,
}

impl Report for MemoryReport {
    fn document(&self) -> Document {
        let fit = &self.fit;
        let row = |name: &str, value: String| vec![name.to_string(), value];
        let mut rows = vec![
            row(
                "weights",
                format!(
                    "{:.2} GB ({:.2} GiB) in {}",
                    fit.weights_gb, fit.weights_gib, fit.dtype
                ),
            ),
            row(
                "weights per card",
                format!("{:.2} GiB", fit.weights_gib_per_card),
            ),
            row(
                "usable per card",
                format!(
                    "{:.2} GiB ({} GiB × {:.2})",
                    fit.usable_gib_per_card, fit.card_memory_gib, fit.memory_utilization
                ),
            ),
            row("reserve per card", format!("{:.2} GiB", fit.reserve_gib)),
        ];
        if fit.kv_bytes_per_token == 0.0 {
            // Not a decoder (an image classifier): no KV cache; what is left is headroom.
            rows.push(row(
                "left after weights and reserve",
                format!("{:.2} GiB per card (no KV cache)", fit.kv_gib_per_card),
            ));
        } else {
            rows.extend([
                row(
                    "KV cache per card",
                    format!("{:.2} GiB", fit.kv_gib_per_card),
                ),
                row(
                    "KV per token",
                    format!(
                        "{:.0} bytes ({:.0} per card, {})",
                        fit.kv_bytes_per_token, fit.kv_bytes_per_token_per_card, fit.kv_dtype
                    ),
                ),
                row("KV tokens", fit.kv_tokens.to_string()),
            ]);
            if fit.state_tokens_per_sequence > 0 {
                rows.push(row(
                    "recurrent state per sequence",
                    format!(
                        "{:.1} MiB per card (linear-attention layers), as much as {} KV positions",
                        fit.state_bytes_per_sequence_per_card / (1024.0 * 1024.0),
                        fit.state_tokens_per_sequence
                    ),
                ));
            }
            rows.push(row(
                "sequences at full context",
                format!(
                    "{} × {} tokens",
                    fit.kv_tokens
                        / (u64::from(fit.context_tokens.max(1)) + fit.state_tokens_per_sequence),
                    fit.context_tokens
                ),
            ));
        }
        let table = Table {
            caption: None,
            headers: vec!["quantity".into(), "value".into()],
            rows,
        };
        Document {
            heading: vec![format!(
                "{} on {}: {}",
                fit.model,
                fit.parallel.on(&fit.card),
                if self.fits { "fits" } else { "does not fit" }
            )],
            tables: vec![table],
            notes: Vec::new(),
            ..Document::default()
        }
    }
}
