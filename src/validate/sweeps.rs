//! Published end-to-end concurrency sweeps of a serving engine: mean TTFT, inter-token
//! latency and throughput of one deployment at closed-loop concurrencies (GenAI-Perf style),
//! on named GPUs. Nothing is fitted on them: every row is held out.
//!
//! Shipped: NVIDIA NIM (TensorRT-LLM backend) sweeps of Llama-3 8B and 70B on DGX A100 and DGX
//! H100 at TP 1–8 in fp16, bf16 and fp8 (`nim-dli-genaiperf.csv`), and NIM 1.8.0's published
//! Llama-3.3-70B sweep on two H100s (`nim-docs-llama-3.3-70b.csv`).

use serde::Deserialize;

use super::deployment::{Deployment, Sample};
use super::silicon::{BENCHMARK_ROUNDS, CLIENT_JITTER_S, HELD_OUT};
use super::{Comparison, RowOutcome, SkipReasons, TableSource};
use crate::catalog::{Catalog, Dtype};
use crate::error::InputError;
use crate::sim::virtual_run::Arrivals;
use crate::workload::{PrefixShare, TokenLengths};

/// One sweep table, compiled in.
pub struct SweepFile {
    pub name: &'static str,
    pub file: &'static str,
    pub text: &'static str,
    /// The engine profile that models the engine measured.
    pub engine: &'static str,
    /// What is assumed where the table is silent, said in the report.
    pub assumptions: &'static str,
}

pub const FILES: [SweepFile; 2] = [
    SweepFile {
        name: "NIM (TensorRT-LLM) GenAI-Perf sweeps, Llama-3 8B/70B on DGX A100/H100",
        file: "tests/fixtures/validation/nim-dli-genaiperf.csv",
        text: include_str!("../../tests/fixtures/validation/nim-dli-genaiperf.csv"),
        engine: "trtllm",
        assumptions: "TensorRT-LLM profile defaults (the NIM's engine settings are not stated); \
                      the second run at concurrency 5 left out",
    },
    SweepFile {
        name: "NIM 1.8.0 published sweep, Llama-3.3-70B fp8 on 2 × H100",
        file: "tests/fixtures/validation/nim-docs-llama-3.3-70b.csv",
        text: include_str!("../../tests/fixtures/validation/nim-docs-llama-3.3-70b.csv"),
        engine: "trtllm",
        assumptions: "H100 taken as SXM (the page does not say); TensorRT-LLM profile defaults",
    },
];

#[derive(Debug, Clone, Deserialize)]
struct SweepRow {
    model: String,
    #[serde(default)]
    model_id: String,
    gpu: String,
    tp: u32,
    dtype: String,
    input_tokens: u32,
    output_tokens: u32,
    concurrency: u32,
    #[serde(default)]
    repeat: Option<u32>,
    #[serde(alias = "ttft_ms")]
    ttft_mean_ms: Option<f64>,
    #[serde(alias = "itl_ms")]
    itl_mean_ms: Option<f64>,
    #[serde(default)]
    e2e_mean_ms: Option<f64>,
    output_tok_per_s: Option<f64>,
}

/// The catalog card a table's GPU name means.
fn card_name(gpu: &str) -> Option<&'static str> {
    let gpu = gpu.to_ascii_uppercase();
    if gpu.starts_with("A100") && gpu.contains("80") {
        Some("A100-80G-SXM")
    } else if gpu.starts_with("H100") {
        Some("H100-SXM")
    } else {
        None
    }
}

/// The catalog model a table's model name means.
fn model_name(row: &SweepRow) -> String {
    let id = if row.model_id.is_empty() {
        &row.model
    } else {
        &row.model_id
    };
    super::silicon::catalog_model_name(id)
}

/// Reads one sweep file into comparisons (all held out).
pub fn source(catalog: &Catalog, file: &SweepFile) -> Result<TableSource, InputError> {
    let mut reader = csv::ReaderBuilder::new().from_reader(file.text.as_bytes());
    let mut rows = Vec::new();
    for record in reader.deserialize::<SweepRow>() {
        rows.push(record.map_err(|err| {
            let line = err.position().map_or(0, |p| p.line());
            InputError::file(format!("{}:{line}", file.file), err.to_string())
        })?);
    }
    let mut skipped = SkipReasons::default();
    let mut comparisons = Vec::new();
    for row in &rows {
        if row.repeat.unwrap_or(1) > 1 {
            skipped.add("a second run of the same level");
            continue;
        }
        let Some(card) = card_name(&row.gpu) else {
            skipped.add(format!("GPU {} not in the catalog", row.gpu));
            continue;
        };
        let name = model_name(row);
        let Ok(model) = catalog.model(&name) else {
            skipped.add(format!("model {name} not in the catalog"));
            continue;
        };
        let dtype = match row.dtype.parse::<Dtype>() {
            Ok(dtype) => dtype,
            Err(_) => {
                skipped.add(format!("dtype {}", row.dtype));
                continue;
            }
        };
        let measured = RowOutcome {
            ttft_s: row.ttft_mean_ms.map(|v| v / 1e3),
            tpot_s: row.itl_mean_ms.map(|v| v / 1e3),
            e2e_s: row.e2e_mean_ms.map(|v| v / 1e3),
            output_tokens_per_s: row.output_tok_per_s,
        };
        let kv_dtype = (dtype == Dtype::Fp8).then_some(Dtype::Fp8);
        comparisons.push(Comparison {
            id: format!(
                "{} {} tp{} {} {}x{} c{}",
                model.name,
                card,
                row.tp,
                row.dtype,
                row.input_tokens,
                row.output_tokens,
                row.concurrency
            ),
            group: file.engine.to_string(),
            subset: HELD_OUT.into(),
            deployment: Deployment {
                model: model.name.clone(),
                card: card.to_string(),
                tp: row.tp,
                parallel: crate::catalog::Parallelism::tensor(row.tp),
                dtype: Some(dtype),
                kv_dtype,
                engine: file.engine.to_string(),
                max_running: None,
                token_budget: None,
                input_tokens: TokenLengths::Fixed {
                    tokens: row.input_tokens,
                },
                output_tokens: TokenLengths::Fixed {
                    tokens: row.output_tokens,
                },
                prefix_share: PrefixShare::NONE,
                roofline: false,
            },
            arrivals: Arrivals::Closed {
                users: row.concurrency,
            },
            sample: Sample::benchmark(row.concurrency, BENCHMARK_ROUNDS, CLIENT_JITTER_S),
            concurrency: f64::from(row.concurrency),
            measured,
            sweep: format!(
                "{}|{}|{}|{}|{}x{}",
                model.name, card, row.tp, row.dtype, row.input_tokens, row.output_tokens
            ),
            note: file.assumptions.to_string(),
        });
    }
    Ok(TableSource {
        name: file.name.to_string(),
        file: file.file.to_string(),
        split: "none fitted: every row held out".into(),
        comparisons,
        skipped,
        total_rows: rows.len(),
        model_class: "dense",
    })
}
