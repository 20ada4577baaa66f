//! dstack's DeepSeek-R1 benchmark (repository `dstackai/benchmarks`, March 2025): SGLang,
//! vLLM and TensorRT-LLM serving DeepSeek-R1 in its own FP8 on one node of eight H200s and one
//! of eight MI300Xs, measured by SGLang's `bench_serving` at closed-loop concurrencies 4–128.
//! Nothing is fitted on it: every row is held out.
//!
//! Each row is simulated as its server ran, read off the serve command the source gives: the
//! layout (SGLang's `--enable-dp-attention`: eight attention replicas sharing experts split
//! eight ways; TensorRT-LLM's `--ep_size 4`: experts over four ranks, each split two ways),
//! the scheduler limits the command sets, and the engine generation (vLLM 0.7 is the V0
//! engine). The MI300X has no measured operator tables, so its rows are timed by the roofline
//! and say so. The engines are a year older than the operator tables, whose kernels are newer
//! and faster: what this source scores is how far a plan made today sits from a deployment of
//! early 2025.

use serde::Deserialize;

use super::deployment::Deployment;
use super::silicon::{catalog_model_name, subset, MOE_CLASS};
use super::{read_table, Comparison, RowOutcome, SkipReasons, TableSource};
use crate::catalog::{Catalog, Parallelism};
use crate::error::InputError;
use crate::sim::measuring_client::LevelSample;
use crate::sim::measuring_client::CLIENT_JITTER_S;
use crate::sim::virtual_run::Arrivals;
use crate::workload::{PrefixShare, TokenLengths};

pub const NAME: &str = "dstack DeepSeek-R1 sweeps, 8 × H200 and 8 × MI300X (early 2025)";
pub const FIXTURE_NAME: &str = "tests/fixtures/validation/dstack-deepseek-r1.csv";
const FIXTURE: &str = include_str!("../../tests/fixtures/validation/dstack-deepseek-r1.csv");

const SPLIT: &str = "none fitted: every row held out (SGLang 0.4.2–0.4.3, vLLM 0.7 on its V0 \
                     engine as profile vllm-v0, TensorRT-LLM 0.17's PyTorch backend as profile \
                     trtllm; each layout and limit as its serve command set it)";

/// The shared-prefix dataset's groups: `generated-shared-prefix` with 10 groups of 50
/// prompts, each group one system prompt (the source's README). The first prompt of a group
/// finds nothing cached.
const SHARED_PREFIX_GROUPS: usize = 10;

/// SGLang before 0.4.4 halved its prefill chunk (8 192 tokens) with DP attention, each
/// replica taking 4 096 (`server_args.py`: "The chunked prefill size is adjusted to …").
const SGLANG_DP_ATTENTION_CHUNK: u64 = 4096;

/// vLLM V0 without chunked prefill takes up to `max(max_model_len, 2048)` tokens in one
/// iteration.
const VLLM_V0_MIN_BUDGET: u64 = 2048;

#[derive(Debug, Clone, Deserialize)]
struct DstackRow {
    engine: String,
    engine_version: String,
    model: String,
    gpu: String,
    tp: u32,
    dataset: String,
    input_tokens: u32,
    output_tokens: u32,
    shared_prefix_tokens: u32,
    concurrency: u32,
    num_prompts: usize,
    ttft_mean_ms: f64,
    tpot_mean_ms: f64,
    e2e_mean_ms: f64,
    output_tok_per_s: f64,
    server_flags: String,
}

impl DstackRow {
    /// The value after `--name` in the serve command.
    fn flag(&self, name: &str) -> Option<u64> {
        let mut words = self.server_flags.split_whitespace();
        words.find(|w| *w == name)?;
        words.next()?.trim_end_matches(';').parse().ok()
    }

    fn has_flag(&self, name: &str) -> bool {
        self.server_flags.split_whitespace().any(|w| w == name)
    }

    /// The engine profile of the row's engine release.
    fn profile(&self) -> Option<&'static str> {
        match self.engine.as_str() {
            "sglang" => Some("sglang"),
            "trtllm" => Some("trtllm"),
            "vllm" if self.engine_version.starts_with("0.7") => Some("vllm-v0"),
            _ => None,
        }
    }

    /// The layout the serve command asked for.
    fn parallel(&self) -> Parallelism {
        if self.has_flag("--enable-dp-attention") {
            // Before 0.4.4 DP attention took dp = tp: one replica per card, the experts split
            // over all of them.
            Parallelism {
                tp: 1,
                pp: 1,
                dp: self.tp,
                ep: 1,
            }
        } else {
            Parallelism {
                ep: self.flag("--ep_size").map_or(1, |ep| ep as u32),
                ..Parallelism::tensor(self.tp)
            }
        }
    }

    /// The per-iteration token budget the server ran with, where it is not the profile's.
    fn token_budget(&self, max_context: u32) -> Option<u64> {
        match self.engine.as_str() {
            "trtllm" => self.flag("--max_num_tokens"),
            "sglang" if self.has_flag("--enable-dp-attention") => Some(SGLANG_DP_ATTENTION_CHUNK),
            "vllm" => Some(
                self.flag("--max-model-len")
                    .unwrap_or(u64::from(max_context))
                    .max(VLLM_V0_MIN_BUDGET),
            ),
            _ => None,
        }
    }

    /// Share of each prompt the prefix cache holds, over the run's prompts.
    fn prefix_share(&self) -> PrefixShare {
        if self.shared_prefix_tokens == 0 || self.input_tokens == 0 {
            return PrefixShare::NONE;
        }
        let prompts = self.num_prompts.max(SHARED_PREFIX_GROUPS) as f64;
        let hits = (prompts - SHARED_PREFIX_GROUPS as f64) / prompts;
        let share = f64::from(self.shared_prefix_tokens) / f64::from(self.input_tokens) * hits;
        PrefixShare::new(share).unwrap_or(PrefixShare::NONE)
    }
}

/// The catalog card a row's GPU names.
fn card_name(gpu: &str) -> Option<&'static str> {
    let gpu = gpu.to_ascii_uppercase();
    if gpu.starts_with("H200") {
        Some("H200")
    } else if gpu.starts_with("MI300X") {
        Some("MI300X")
    } else {
        None
    }
}

/// Reads the table into comparisons (every one held out).
pub fn source(catalog: &Catalog) -> Result<TableSource, InputError> {
    let rows: Vec<DstackRow> = read_table(FIXTURE, FIXTURE_NAME)?;
    let mut skipped = SkipReasons::default();
    let mut comparisons = Vec::new();
    for row in &rows {
        let Some(card) = card_name(&row.gpu) else {
            skipped.add(format!("GPU {} not in the catalog", row.gpu));
            continue;
        };
        let Some(engine) = row.profile() else {
            skipped.add(format!(
                "{} {} has no engine profile",
                row.engine, row.engine_version
            ));
            continue;
        };
        let name = catalog_model_name(&row.model);
        let Ok(model) = catalog.model(&name) else {
            skipped.add(format!("model {name} not in the catalog"));
            continue;
        };
        let parallel = row.parallel();
        comparisons.push(Comparison {
            id: format!(
                "{} {} {} {}x{} c{}",
                row.engine,
                parallel.on(card),
                row.dataset,
                row.input_tokens,
                row.output_tokens,
                row.concurrency
            ),
            group: engine.to_string(),
            subset: subset(false),
            deployment: Deployment {
                model: model.name.clone(),
                card: card.to_string(),
                parallel,
                // The released checkpoint's FP8 weights; the KV cache at the engines' default.
                dtype: None,
                kv_dtype: None,
                engine: engine.to_string(),
                max_running: row.flag("--max_batch_size").map(|b| b as usize),
                token_budget: row.token_budget(model.max_context),
                prompt_budget: None,
                step_mix: None,
                cuda_graph_sizes: None,
                input_tokens: TokenLengths::Fixed {
                    tokens: row.input_tokens,
                },
                output_tokens: TokenLengths::Fixed {
                    tokens: row.output_tokens,
                },
                prefix_share: row.prefix_share(),
                roofline: false,
                pools: None,
                speculation: None,
            },
            arrivals: Arrivals::Closed {
                users: row.concurrency,
            },
            sample: LevelSample::counted(row.concurrency, row.num_prompts, CLIENT_JITTER_S),
            concurrency: f64::from(row.concurrency),
            measured: RowOutcome {
                ttft_s: Some(row.ttft_mean_ms / 1e3),
                tpot_s: Some(row.tpot_mean_ms / 1e3),
                e2e_s: Some(row.e2e_mean_ms / 1e3),
                output_tokens_per_s: Some(row.output_tok_per_s),
            },
            sweep: format!(
                "{}|{card}|{}|{}x{}",
                row.engine, row.dataset, row.input_tokens, row.output_tokens
            ),
            note: format!("{} {}", row.engine, row.engine_version),
        });
    }
    Ok(TableSource {
        name: NAME.to_string(),
        file: FIXTURE_NAME.to_string(),
        split: SPLIT.into(),
        comparisons,
        skipped,
        total_rows: rows.len(),
        model_class: MOE_CLASS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comparison<'a>(source: &'a TableSource, id_part: &[&str]) -> &'a Comparison {
        source
            .comparisons
            .iter()
            .find(|c| id_part.iter().all(|p| c.id.contains(p)))
            .unwrap_or_else(|| panic!("no row with {id_part:?}"))
    }

    /// Every row is compared and held out, each as its serve command ran it: SGLang's DP
    /// attention on the H200s, TensorRT-LLM's four expert ranks and limits, vLLM 0.7 on the V0
    /// profile with a budget of one whole context, the shared-prefix prompts mostly cached.
    #[test]
    fn every_row_is_held_out_with_its_servers_layout() {
        let catalog = Catalog::shipped().unwrap();
        let source = source(&catalog).unwrap();
        assert_eq!(source.total_rows, 54);
        assert_eq!(source.comparisons.len(), 54, "{:?}", source.skipped);
        assert!(source.comparisons.iter().all(|c| c.subset == subset(false)));

        let sglang = comparison(&source, &["sglang 8 × H200", "random 3200x800 c4"]);
        assert_eq!(sglang.deployment.parallel.dp, 8);
        assert_eq!(sglang.deployment.parallel.moe_tp(), 8);
        assert_eq!(sglang.deployment.token_budget, Some(4096));
        let sglang_amd = comparison(&source, &["sglang 8 × MI300X", "random 3200x800 c4"]);
        assert!(sglang_amd.deployment.parallel.is_tensor_only());
        assert_eq!(sglang_amd.deployment.token_budget, None);

        let trtllm = comparison(&source, &["trtllm 8 × H200", "3200x800 c64"]);
        assert_eq!(trtllm.deployment.parallel.ep, 4);
        assert_eq!(trtllm.deployment.parallel.moe_tp(), 2);
        assert_eq!(trtllm.deployment.max_running, Some(512));
        assert_eq!(trtllm.deployment.token_budget, Some(16384));

        let vllm = comparison(&source, &["vllm 8 × H200", "random 3200x800 c8"]);
        assert_eq!(vllm.group, "vllm-v0");
        assert_eq!(vllm.deployment.token_budget, Some(163_840));
        let vllm_amd = comparison(&source, &["vllm 8 × MI300X", "random 3200x800 c8"]);
        assert_eq!(vllm_amd.deployment.token_budget, Some(32_768));
        assert!(vllm.deployment.prefix_share.is_none());

        // 2 000 of 3 200 tokens shared, the first prompt of each of 10 groups a miss.
        let shared = comparison(
            &source,
            &["sglang 8 × H200", "generated-shared-prefix", "c32"],
        );
        let share = shared.deployment.prefix_share.share();
        assert!((share - 0.625 * 490.0 / 500.0).abs() < 1e-9, "{share}");
        assert_eq!(shared.sample.measured, 500);
        assert_eq!(shared.sample.warmup, 0);
    }

    /// The sweeps over concurrency are one deployment each; the single long-output levels
    /// are sweeps of their own.
    #[test]
    fn sweeps_group_one_deployment_at_several_concurrencies() {
        let catalog = Catalog::shipped().unwrap();
        let source = source(&catalog).unwrap();
        let in_sweep = |key: &str| source.comparisons.iter().filter(|c| c.sweep == key).count();
        assert_eq!(in_sweep("vllm|H200|random|3200x800"), 6);
        assert_eq!(
            in_sweep("sglang|MI300X|generated-shared-prefix|3200x800"),
            3
        );
        assert_eq!(in_sweep("trtllm|H200|random|3200x6400"), 1);
    }
}
