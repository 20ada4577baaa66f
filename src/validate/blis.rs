//! BLIS's published vLLM measurements (repository `inference-sim/training`): four models on
//! H100 SXM, four workloads of shared-prefix chat, constant-rate arrivals in one or two
//! ten-minute stages, inference-perf as the client. Per stage the table holds mean TTFT and
//! end-to-end latency (and token counts, throughput).
//!
//! BLIS fits its latency model on 70 % of the requests of every experiment and reports errors
//! on a 15 % test split drawn by request-ID hash; its per-request traces are not published, so
//! capplan splits by model instead: vLLM's overhead constants are fitted on the Llama-2 stages,
//! and the Mixtral and CodeLlama stages are held out — models the fit never saw, a stricter
//! hold-out than BLIS's own. The three experiments BLIS excludes as overloaded are left out
//! the same way. Scored: mean TTFT, mean E2E, and TPOT as (E2E − TTFT) / (output − 1)
//! at the output length requested with `ignore_eos` (the table's own TPOT and ITL count
//! re-tokenised text and stream events, not generated tokens).
//!
//! inference-perf's shared-prefix generator makes num_groups × prompts-per-group prompts (100
//! here) and sends request i the prompt i mod 100, so from the second round on vLLM's prefix
//! cache holds all of every prompt: the stages are simulated with the whole prompt cached.
//! Without that the 20 req/s stages saturate in the simulation while the server held them
//! with a TTFT of 50–120 ms.

use serde::Deserialize;

use super::deployment::Deployment;
use super::silicon::subset;
use super::{read_table, Comparison, RowOutcome, SkipReasons, TableSource};
use crate::catalog::Catalog;
use crate::error::InputError;
use crate::sim::measuring_client::LevelSample;
use crate::sim::predict::ClosedStart;
use crate::sim::virtual_run::Arrivals;
use crate::workload::{PrefixShare, TokenLengths};

/// The models whose stages vLLM's overheads are fitted on; the others are held out (and so is
/// every vLLM row of the silicon sample).
pub const FIT_MODELS: [&str; 2] = ["llama-2-7b", "llama-2-70b"];

pub const FIXTURE: &str = include_str!("../../tests/fixtures/validation/blis-vllm-h100.csv");
pub const FIXTURE_NAME: &str = "tests/fixtures/validation/blis-vllm-h100.csv";

/// BLIS's published held-out errors (median |error| on its test split, from its post "how BLIS
/// learns latency"), for the report.
pub const BLIS_PUBLISHED: &str = "BLIS's own held-out medians: E2E 6.7 %, TTFT 17.6 %, ITL 7.1 %";

#[derive(Debug, Clone, Deserialize)]
struct StageRow {
    experiment: String,
    model_short: String,
    tp: u32,
    split_status: String,
    stage: u32,
    requested_rate_rps: f64,
    stage_duration_s: f64,
    load_type: String,
    max_num_seqs: Option<usize>,
    max_num_batched_tokens: Option<u64>,
    output_len: u32,
    num_groups: u32,
    num_prompts_per_group: u32,
    requests_sent: Option<f64>,
    prompt_len_mean: f64,
    ttft_mean_s: Option<f64>,
    e2e_mean_s: Option<f64>,
}

/// The stages as comparisons.
pub fn source(catalog: &Catalog) -> Result<TableSource, InputError> {
    let rows: Vec<StageRow> = read_table(FIXTURE, FIXTURE_NAME)?;
    let mut skipped = SkipReasons::default();
    let mut comparisons = Vec::new();
    for row in &rows {
        if row.split_status != "active" {
            skipped.add("excluded by BLIS as overloaded (over 10 % of requests failed)");
            continue;
        }
        let Ok(model) = catalog.model(&row.model_short) else {
            skipped.add(format!("model {} not in the catalog", row.model_short));
            continue;
        };
        let arrivals = match row.load_type.as_str() {
            "constant" => Arrivals::Paced {
                rate: row.requested_rate_rps,
            },
            _ => Arrivals::Open {
                rate: row.requested_rate_rps,
            },
        };
        let output = row.output_len.max(2);
        // inference-perf's shared-prefix data cycles through num_groups × prompts-per-group
        // prompts (request i sends prompt i mod their number), so once each has been sent
        // vLLM's prefix cache (on by default in V1) holds all of it; the first sends — at
        // most 100 of a stage's 2 400 or more, half of them in the warm-up — miss.
        let distinct = f64::from(row.num_groups * row.num_prompts_per_group);
        let prefix_share = match row.requests_sent {
            Some(sent) if sent > 10.0 * distinct => PrefixShare::new(1.0).unwrap_or_default(),
            _ => PrefixShare::NONE,
        };
        let tpot = match (row.ttft_mean_s, row.e2e_mean_s) {
            (Some(ttft), Some(e2e)) => Some((e2e - ttft) / f64::from(output - 1)),
            _ => None,
        };
        // The stage's requests, capped to keep the table to seconds; the first ten seconds'
        // worth warm the engine up (a second stage follows a first on a warm server).
        let requests = (row.requested_rate_rps * row.stage_duration_s).round() as usize;
        let warmup = (row.requested_rate_rps * 10.0).round() as usize;
        comparisons.push(Comparison {
            id: format!("{} stage {}", row.experiment, row.stage),
            group: "vllm".into(),
            subset: subset(FIT_MODELS.contains(&row.model_short.as_str())),
            deployment: Deployment {
                model: model.name.clone(),
                card: "H100-SXM".into(),
                parallel: crate::catalog::Parallelism::tensor(row.tp),
                dtype: None,
                kv_dtype: None,
                engine: "vllm".into(),
                max_running: row.max_num_seqs,
                token_budget: row.max_num_batched_tokens,
                input_tokens: TokenLengths::Fixed {
                    tokens: row.prompt_len_mean.round() as u32,
                },
                output_tokens: TokenLengths::Fixed { tokens: output },
                prefix_share,
                roofline: false,
                pools: None,
                speculation: None,
                prompt_budget: None,
                step_mix: None,
                cuda_graph_sizes: None,
            },
            arrivals,
            sample: LevelSample {
                warmup,
                measured: requests.clamp(100, 4000),
                start: ClosedStart::Staggered,
            },
            concurrency: row.requested_rate_rps,
            measured: RowOutcome {
                ttft_s: row.ttft_mean_s,
                tpot_s: tpot,
                e2e_s: row.e2e_mean_s,
                // Counted from re-tokenised text: below the tokens generated. Not scored.
                output_tokens_per_s: None,
            },
            sweep: String::new(),
            note: format!("{} req/s, constant arrivals", row.requested_rate_rps),
        });
    }
    Ok(TableSource {
        name: "BLIS vLLM measurements on H100 SXM (inference-sim/training)".into(),
        file: FIXTURE_NAME.into(),
        split: format!(
            "by model: vLLM's overheads fitted on the Llama-2-7B and -70B stages; Mixtral-8x7B \
             and CodeLlama-34B held out (BLIS splits requests 70/15/15 by ID hash instead; its \
             traces are not published). {BLIS_PUBLISHED}"
        ),
        comparisons,
        skipped,
        total_rows: rows.len(),
        model_class: "dense",
    })
}
