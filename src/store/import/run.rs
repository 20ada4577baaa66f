//! An import on disk: a run folder like a probe's (`run.json` marked `import`, with the tool,
//! its version, the files read and every note; `steps.csv` of the levels), so `fit`,
//! `calibrate` and `solve` read imported and probed runs the same way.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::Imported;
use crate::store::run_folder::{create, write_run_json};
use crate::store::steps::write_steps_csv;
use crate::workload::{ThinkTime, TokenLengths};

/// What the imported files do not say and the user does: the layout and the workload.
#[derive(Debug, Clone, Serialize)]
pub struct ImportContext {
    pub model: String,
    pub card: String,
    /// The layout: tensor-parallel width, pipeline stages, expert ranks, attention replicas.
    pub parallel: crate::catalog::Parallelism,
    /// A disaggregated deployment: P prefill and D decode workers of that layout.
    pub pd: Option<crate::catalog::PdSplit>,
    /// Speculative decoding the server ran.
    pub speculation: Option<crate::workload::Speculation>,
    pub interconnect: String,
    pub instances_per_node: u32,
    pub cards_per_node: Option<u32>,
    /// Prompt and output lengths, when given (else the levels' measured means stand in).
    pub input_tokens: Option<TokenLengths>,
    pub output_tokens: Option<TokenLengths>,
    pub think_time: ThinkTime,
    /// The command line, secrets removed.
    pub command: Vec<String>,
}

/// Writes `imported` as a new run folder under `out`; returns it.
pub fn write_import(
    out: &Path,
    imported: &Imported,
    context: &ImportContext,
) -> std::io::Result<PathBuf> {
    let dir = create(out, &context.model, &context.card, context.parallel.tp)?;
    write_steps_csv(&dir.join(crate::store::curve::STEPS_FILE), &imported.levels)?;
    let mut config = serde_json::json!({
        "layout": {
            "model": context.model,
            "card": context.card,
            "tp": context.parallel.tp,
            "interconnect": context.interconnect,
            "instances_per_node": context.instances_per_node,
            "cards_per_node": context.cards_per_node,
            "pp": context.parallel.pp,
            "ep": context.parallel.ep,
            "attention_dp": context.parallel.dp,
        },
        "think_time": context.think_time,
        "stream": imported.streaming,
    });
    if let Some(pd) = &context.pd {
        config["layout"]["pd"] = serde_json::json!(pd);
    }
    if let Some(speculation) = &context.speculation {
        config["layout"]["speculation"] = serde_json::json!(speculation);
    }
    if let Some(input) = &context.input_tokens {
        config["input"] = serde_json::json!({"kind": "synthetic", "tokens": input});
    }
    if let Some(output) = &context.output_tokens {
        config["output_tokens"] = serde_json::json!(output);
    }
    let run = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "kind": "import",
        "status": "finished",
        "command": context.command,
        "source": {
            "tool": imported.tool,
            "tool_version": imported.tool_version,
            "files": imported.files,
            "notes": imported.notes,
        },
        "config": config,
        "levels": imported.levels.len(),
    });
    write_run_json(&dir, &run)?;
    Ok(dir)
}
