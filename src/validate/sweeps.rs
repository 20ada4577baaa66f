//! Published end-to-end concurrency sweeps of a serving engine: mean TTFT, inter-token
//! latency and throughput of one deployment at closed-loop concurrencies (GenAI-Perf style),
//! on named GPUs. A sweep file names the card whose rows its engine profile's overheads may be
//! fitted on (`validate --fit`); every other row is held out.
//!
//! Shipped: NVIDIA NIM (TensorRT-LLM backend) sweeps of Llama-3 8B and 70B on DGX A100 and DGX
//! H100 at TP 1–8 in fp16, bf16 and fp8 (`nim-dli-genaiperf.csv`), and NIM 1.8.0's published
//! Llama-3.3-70B sweep on two H100s (`nim-docs-llama-3.3-70b.csv`).

use serde::Deserialize;

use super::deployment::Deployment;
use super::silicon::{subset, BENCHMARK_ROUNDS};
use super::{read_table, Comparison, RowOutcome, SkipReasons, TableSource};
use crate::catalog::{Catalog, Dtype};
use crate::error::InputError;
use crate::sim::measuring_client::LevelSample;
use crate::sim::measuring_client::{CLIENT_JITTER_S, GENAI_PERF_WINDOW_MS, PERF_ANALYZER_WINDOWS};
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
    /// The card whose rows the engine profile's overheads are fitted on (`validate --fit`);
    /// the other cards' rows are the held-out score. `None`: every row held out.
    pub fit_card: Option<&'static str>,
    /// How the rows are split, said in the report.
    pub split: &'static str,
    /// How the client measured each level.
    pub client: SweepClient,
}

/// How a sweep's client measured a level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SweepClient {
    /// A count of requests after a drained warm-up (AIPerf; GenAI-Perf with
    /// `--warmup-request-count`): [`LevelSample::benchmark`].
    Counted,
    /// GenAI-Perf on Perf Analyzer's time windows, no warm-up: [`LevelSample::time_windows`].
    TimeWindows { window_ms: u32, windows: u32 },
}

pub const FILES: [SweepFile; 2] = [
    SweepFile {
        name: "NIM (TensorRT-LLM) GenAI-Perf sweeps, Llama-3 8B/70B on DGX A100/H100",
        file: "tests/fixtures/validation/nim-dli-genaiperf.csv",
        text: include_str!("../../tests/fixtures/validation/nim-dli-genaiperf.csv"),
        engine: "trtllm-0.x",
        assumptions: "TensorRT-LLM 0.x profile defaults (the NIM's engine settings are not \
                      stated; its containers of 2024 ran TensorRT-LLM 0.10-0.12); the second \
                      run at concurrency 5 left out",
        fit_card: Some("H100-SXM"),
        split: "by GPU: the trtllm-0.x profile's token budget and overheads are fitted on \
                the DGX H100 rows (`validate --fit`), the DGX A100 rows held out",
        // GenAI-Perf of 2024, stability percentage 999 (its default) in every row: time
        // windows from a cold start, the interval not stated (its default taken).
        client: SweepClient::TimeWindows {
            window_ms: GENAI_PERF_WINDOW_MS,
            windows: PERF_ANALYZER_WINDOWS,
        },
    },
    SweepFile {
        name: "NIM 1.8.0 published sweep, Llama-3.3-70B fp8 on 2 × H100",
        file: "tests/fixtures/validation/nim-docs-llama-3.3-70b.csv",
        text: include_str!("../../tests/fixtures/validation/nim-docs-llama-3.3-70b.csv"),
        engine: "trtllm",
        assumptions: "H100 taken as SXM (the page does not say); TensorRT-LLM profile defaults",
        fit_card: None,
        split: "none fitted: every row held out",
        client: SweepClient::Counted,
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
    let rows: Vec<SweepRow> = read_table(file.text, file.file)?;
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
            subset: subset(file.fit_card == Some(card)),
            deployment: Deployment {
                model: model.name.clone(),
                card: card.to_string(),
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
                pools: None,
                speculation: None,
                prompt_budget: None,
                step_mix: None,
                cuda_graph_sizes: None,
            },
            arrivals: Arrivals::Closed {
                users: row.concurrency,
            },
            sample: match file.client {
                SweepClient::Counted => {
                    LevelSample::benchmark(row.concurrency, BENCHMARK_ROUNDS, CLIENT_JITTER_S)
                }
                SweepClient::TimeWindows { window_ms, windows } => {
                    LevelSample::time_windows(window_ms, windows, CLIENT_JITTER_S)
                }
            },
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
        split: file.split.into(),
        comparisons,
        skipped,
        total_rows: rows.len(),
        model_class: "dense",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::silicon::{FIT_SUBSET, HELD_OUT};

    /// The 2024 NIM sweeps are split by GPU (the H100 rows fit `trtllm-0.x`'s overheads, the
    /// A100 rows are held out); NIM 1.8's sweep is held out whole, under the current profile.
    #[test]
    fn the_nim_sweeps_are_split_by_gpu() {
        let catalog = Catalog::shipped().unwrap();
        let old = source(&catalog, &FILES[0]).unwrap();
        assert!(old.comparisons.iter().all(|c| c.group == "trtllm-0.x"));
        for comparison in &old.comparisons {
            let fit = comparison.subset == FIT_SUBSET;
            assert_eq!(
                fit,
                comparison.deployment.card == "H100-SXM",
                "{}",
                comparison.id
            );
        }
        let held = |s: &TableSource| {
            s.comparisons
                .iter()
                .filter(|c| c.subset == HELD_OUT)
                .count()
        };
        assert!(held(&old) > 200 && held(&old) < old.comparisons.len());
        let recent = source(&catalog, &FILES[1]).unwrap();
        assert_eq!(held(&recent), recent.comparisons.len());
        assert!(catalog
            .engine("trtllm-0.x")
            .unwrap()
            .cuda_graph_sizes
            .is_empty());
    }
}
