//! NVIDIA AIConfigurator's measured deployments (`silicon_sample.csv`): mean TTFT and TPOT of
//! vLLM, SGLang and TensorRT-LLM serving a fixed input/output length at a fixed per-instance
//! concurrency, on H100 to GB300. This module reads the aggregated (not disaggregated) rows as
//! two sources: dense models, and mixtures of experts with their expert-parallel and
//! attention-data-parallel layouts; disaggregated rows are listed as skipped with their count.

use std::collections::HashMap;

use serde::Deserialize;

use super::deployment::{Deployment, Pools};
use super::{Comparison, RowOutcome, SkipReasons, TableSource};
use crate::catalog::{Catalog, Dtype, Model, Parallelism, StepMix};
use crate::error::InputError;
use crate::sim::measuring_client::LevelSample;
use crate::sim::measuring_client::CLIENT_JITTER_S;
use crate::sim::virtual_run::Arrivals;
use crate::workload::{PrefixShare, TokenLengths};

use super::run_width::{self, RecordedRow, RunWidth};

/// The fixture, compiled in: `tests/fixtures/validation/aiconfigurator-silicon.csv`.
pub const FIXTURE: &str =
    include_str!("../../tests/fixtures/validation/aiconfigurator-silicon.csv");
pub const FIXTURE_NAME: &str = "tests/fixtures/validation/aiconfigurator-silicon.csv";

/// One measured deployment, the columns this reader uses.
#[derive(Debug, Clone, Deserialize)]
pub struct SiliconRow {
    pub id: String,
    pub backend: String,
    #[serde(default)]
    pub backend_version: String,
    pub model_path: String,
    pub system: String,
    pub mode: String,
    pub isl: u32,
    pub osl: u32,
    #[serde(default)]
    pub gemm_quant_mode: String,
    pub batch_size: Option<u32>,
    pub tp_size: Option<u32>,
    pub pp_size: Option<u32>,
    pub attention_dp_size: Option<u32>,
    #[serde(default)]
    pub moe_quant_mode: String,
    pub moe_tp_size: Option<u32>,
    pub moe_ep_size: Option<u32>,
    /// Disaggregated rows: each pool's per-worker batch, worker count and layout.
    pub prefill_batch_size: Option<u32>,
    pub prefill_num_workers: Option<u32>,
    pub prefill_tp_size: Option<u32>,
    pub prefill_pp_size: Option<u32>,
    pub prefill_attention_dp_size: Option<u32>,
    pub prefill_moe_tp_size: Option<u32>,
    pub prefill_moe_ep_size: Option<u32>,
    pub decode_batch_size: Option<u32>,
    pub decode_num_workers: Option<u32>,
    pub decode_tp_size: Option<u32>,
    pub decode_pp_size: Option<u32>,
    pub decode_attention_dp_size: Option<u32>,
    pub decode_moe_tp_size: Option<u32>,
    pub decode_moe_ep_size: Option<u32>,
    /// The client's concurrency over the whole deployment.
    pub silicon_concurrency: Option<u32>,
    pub silicon_ttft_ms: f64,
    pub silicon_tpot_ms: f64,
    /// When the collection was made (`YYYY-MM-DD`), where recorded.
    #[serde(default)]
    pub measured: String,
    /// The id of an earlier row holding the same measurement, when this row repeats one.
    #[serde(default)]
    pub same_measurement_as: String,
}

impl SiliconRow {
    /// Whether the row was collected on or after `day` (`YYYY-MM-DD`, which compares as
    /// text); `None` when the row records no date.
    fn collected_since(&self, day: &str) -> Option<bool> {
        (!self.measured.is_empty()).then(|| self.measured.as_str() >= day)
    }
}

/// Reads the rows of `text` (the fixture's format); errors name `origin:line`.
pub fn read_rows(text: &str, origin: &str) -> Result<Vec<SiliconRow>, InputError> {
    super::read_table(text, origin)
}

/// The catalog model a Hugging Face id names: its last path part, without the quantised
/// checkpoint's suffix (`nvidia/Llama-3.1-8B-Instruct-FP8` → `Llama-3.1-8B-Instruct`).
pub fn catalog_model_name(model_path: &str) -> String {
    let last = model_path.rsplit('/').next().unwrap_or(model_path);
    let mut name = last.to_string();
    for suffix in ["-NVFP4", "-FP8", "-FP4", "-fp8", "-nvfp4"] {
        if let Some(stripped) = name.strip_suffix(suffix) {
            name = stripped.to_string();
        }
    }
    name
}

/// The weight format a row's `gemm_quant_mode` states (`None`: the checkpoint's own).
fn dtype_of(mode: &str) -> Result<Option<Dtype>, String> {
    match mode {
        "" | "bfloat16" | "float16" => Ok(None),
        "fp8" | "fp8_block" => Ok(Some(Dtype::Fp8)),
        "nvfp4" => Ok(Some(Dtype::Fp4)),
        "int4_wo" => Ok(Some(Dtype::Int4)),
        other => Err(format!("GEMM quantisation {other}")),
    }
}

/// Which rows a source scores: aggregated deployments of dense models or of mixtures of
/// experts, or disaggregated deployments of either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelClass {
    Dense,
    Mixture,
    Disaggregated,
}

/// One worker's layout as a row records it: the attention's tp, pp and dp, the experts' tp
/// and ep (the aggregated columns, or a disaggregated pool's).
struct LayoutColumns {
    tp: Option<u32>,
    pp: Option<u32>,
    dp: Option<u32>,
    moe_tp: Option<u32>,
    ep: Option<u32>,
}

impl LayoutColumns {
    fn aggregated(row: &SiliconRow) -> LayoutColumns {
        LayoutColumns {
            tp: row.tp_size,
            pp: row.pp_size,
            dp: row.attention_dp_size,
            moe_tp: row.moe_tp_size,
            ep: row.moe_ep_size,
        }
    }

    fn prefill(row: &SiliconRow) -> LayoutColumns {
        LayoutColumns {
            tp: row.prefill_tp_size,
            pp: row.prefill_pp_size,
            dp: row.prefill_attention_dp_size,
            moe_tp: row.prefill_moe_tp_size,
            ep: row.prefill_moe_ep_size,
        }
    }

    fn decode(row: &SiliconRow) -> LayoutColumns {
        LayoutColumns {
            tp: row.decode_tp_size,
            pp: row.decode_pp_size,
            dp: row.decode_attention_dp_size,
            moe_tp: row.decode_moe_tp_size,
            ep: row.decode_moe_ep_size,
        }
    }

    /// The cards the attention is recorded on, `tp × dp`.
    fn attention_cards(&self) -> u32 {
        self.tp.unwrap_or(1).max(1) * self.dp.unwrap_or(1).max(1)
    }

    /// The layout its run used when the columns hold the square of `width` (see
    /// [`run_width`](super::run_width)): the attention over `width.cards` cards, data
    /// parallel where the columns had no attention tp (TensorRT-LLM's attention DP), else
    /// tensor parallel; the experts split `width.ep` ways, tensor parallel within.
    fn at_run_width(self, width: RunWidth) -> LayoutColumns {
        let cards = width.cards.max(1);
        let dp = if self.tp.unwrap_or(1) <= 1 { cards } else { 1 };
        let ep = width.ep.clamp(1, cards);
        LayoutColumns {
            tp: Some(cards / dp),
            pp: self.pp,
            dp: Some(dp),
            moe_tp: Some(cards / ep),
            ep: Some(ep),
        }
    }

    /// The layout, or why it cannot be read. For a mixture of experts AIConfigurator records
    /// the attention's tp and dp and the experts' tp and ep, whose products must agree (both
    /// are the stage's cards); a dense model runs tensor parallel only.
    fn parallelism(&self, model: &Model) -> Result<Parallelism, String> {
        let one = |v: Option<u32>| v.unwrap_or(1).max(1);
        let (tp, dp) = (one(self.tp), one(self.dp));
        let mixture = model.experts.is_some_and(|e| e > 1);
        if !mixture {
            if one(self.pp) > 1 || dp > 1 {
                return Err("pipeline or attention-data parallelism".into());
            }
            return Ok(Parallelism::tensor(tp));
        }
        if tp * dp != one(self.moe_tp) * one(self.ep) {
            return Err("attention tp × dp differs from experts' tp × ep".into());
        }
        let parallel = Parallelism {
            tp,
            pp: one(self.pp),
            dp,
            ep: one(self.ep),
        };
        match parallel.problem(model) {
            Some(problem) => Err(format!("layout not modelled: {problem}")),
            None => Ok(parallel),
        }
    }
}

/// A disaggregated row's decode layout and pools (`None` for an aggregated row), or why it
/// cannot be read: most disaggregated rows record each pool's layout but not how many
/// workers of each ran, and without the counts the load per worker is unknown.
fn disaggregated_layout(
    row: &SiliconRow,
    model: &Model,
) -> Result<Option<(Parallelism, Pools)>, String> {
    if row.mode == "agg" {
        return Ok(None);
    }
    let (Some(prefill_workers), Some(decode_workers)) =
        (row.prefill_num_workers, row.decode_num_workers)
    else {
        return Err("disaggregated row without its worker counts".into());
    };
    if prefill_workers == 0 || decode_workers == 0 {
        return Err("disaggregated row with no workers of one kind".into());
    }
    let prefill = LayoutColumns::prefill(row).parallelism(model)?;
    let decode = LayoutColumns::decode(row).parallelism(model)?;
    Ok(Some((
        decode,
        Pools {
            prefill,
            prefill_workers,
            prefill_batch: row.prefill_batch_size.filter(|&batch| batch > 0),
            decode_workers,
        },
    )))
}

/// The rows of this source as deployments to predict, with the measured figures.
pub fn comparisons(
    catalog: &Catalog,
    rows: &[SiliconRow],
    skipped: &mut SkipReasons,
    class: ModelClass,
) -> Vec<Comparison> {
    let mut out = Vec::new();
    let squared = squared_layouts(rows);
    for row in rows {
        if !row.same_measurement_as.is_empty() {
            skipped.add("repeats an earlier row's measurement");
            continue;
        }
        let disaggregated = row.mode != "agg";
        match (class, disaggregated) {
            (ModelClass::Disaggregated, false) => {
                skipped.add("aggregated deployment (the dense and MoE sources score it)");
                continue;
            }
            (ModelClass::Dense | ModelClass::Mixture, true) => {
                skipped.add("disaggregated deployment (the disaggregated source scores it)");
                continue;
            }
            _ => {}
        }
        let Ok(model) = catalog.model(&catalog_model_name(&row.model_path)) else {
            skipped.add(format!("model {} not in the catalog", row.model_path));
            continue;
        };
        let mixture = model.experts.is_some_and(|e| e > 1);
        match (class, mixture) {
            (ModelClass::Dense, true) => {
                skipped.add("mixture-of-experts model (the MoE source scores it)");
                continue;
            }
            (ModelClass::Mixture, false) => {
                skipped.add("dense model (the dense source scores it)");
                continue;
            }
            _ => {}
        }
        let layout = match disaggregated_layout(row, model) {
            Ok(Some((decode, pools))) => Ok((decode, Some(pools))),
            Ok(None) => aggregated_columns(row, &squared)
                .parallelism(model)
                .map(|parallel| (parallel, None)),
            Err(why) => Err(why),
        };
        let (parallel, pools) = match layout {
            Ok(layout) => layout,
            Err(why) => {
                skipped.add(why);
                continue;
            }
        };
        let Some(card) = catalog
            .cards
            .iter()
            .find(|c| c.operators.as_deref() == Some(row.system.as_str()))
        else {
            skipped.add(format!("system {} has no card in the catalog", row.system));
            continue;
        };
        // A checkpoint that quantises only its experts runs as shipped when the row names
        // the experts' own format: gpt-oss's MXFP4 experts beside BF16 attention, which the
        // collection labels `nvfp4` on every card (Hopper included, which has no FP4), and
        // Kimi-K2.5's INT4 experts (`int4_wo`). Kimi's `nvfp4` rows are NVIDIA's NVFP4
        // re-quantisation: every weight in FP4.
        let own = model.expert_dtype.as_deref().map(str::to_ascii_lowercase);
        let dtype = match dtype_of(&row.gemm_quant_mode) {
            Ok(asked) if runs_as_shipped(own.as_deref(), asked) => None,
            Ok(dtype) => dtype,
            Err(what) => {
                skipped.add(format!("{what} not modelled"));
                continue;
            }
        };
        // AIConfigurator infers an FP8 KV cache for FP8- and FP4-quantised checkpoints.
        let kv_dtype = dtype
            .filter(|d| matches!(d, Dtype::Fp8 | Dtype::Fp4))
            .map(|_| Dtype::Fp8);
        // An aggregated row's batch is one attention replica's: the instance holds that many
        // users in each of its `dp` replicas (the collection's concurrency is batch × dp in
        // all but one of the rows with attention data parallelism). A disaggregated row's
        // load is the client's concurrency over the whole deployment.
        // A row read at its run's width has its batch recorded per replica of the squared
        // layout; the client's concurrency holds.
        let read_at_width = squared.contains_key(&row.id);
        let load = if pools.is_some() || read_at_width {
            row.silicon_concurrency
        } else {
            row.batch_size
                .filter(|_| row.tp_size.is_some())
                .map(|batch| batch * parallel.dp.max(1))
        };
        let Some(concurrency) = load else {
            skipped.add("no concurrency or TP size");
            continue;
        };
        let batch = if pools.is_some() {
            row.decode_batch_size
        } else if read_at_width {
            Some(concurrency.div_ceil(parallel.dp.max(1)))
        } else {
            row.batch_size
        };
        let engine = engine_profile_name(row);
        out.push(Comparison {
            id: row.id.clone(),
            group: engine.clone(),
            subset: String::new(),
            deployment: Deployment {
                model: model.name.clone(),
                card: card.name.clone(),
                parallel,
                dtype,
                kv_dtype,
                engine,
                max_running: None,
                token_budget: deployed_budget(row, batch.unwrap_or(1)),
                prompt_budget: deployed_prompt_budget(row),
                step_mix: deployed_step_mix(row),
                cuda_graph_sizes: deployed_graph_sizes(row, batch.unwrap_or(1)),
                input_tokens: TokenLengths::Fixed { tokens: row.isl },
                output_tokens: TokenLengths::Fixed { tokens: row.osl },
                prefix_share: PrefixShare::NONE,
                roofline: false,
                pools,
                speculation: None,
            },
            arrivals: Arrivals::Closed { users: concurrency },
            // AIConfigurator's benchmark recipe (`bench_run.sh`): AIPerf at this concurrency,
            // two rounds of warm-up drained, then 20 rounds of every user started together,
            // each request counted; streaming, fixed lengths with ignore_eos.
            sample: LevelSample::benchmark(concurrency, BENCHMARK_ROUNDS, CLIENT_JITTER_S),
            concurrency: f64::from(concurrency),
            measured: RowOutcome {
                ttft_s: Some(row.silicon_ttft_ms / 1e3),
                tpot_s: Some(row.silicon_tpot_ms / 1e3),
                ..RowOutcome::default()
            },
            sweep: sweep_key(row),
            note: format!(
                "{} {} {}{}",
                row.backend,
                row.backend_version,
                if row.gemm_quant_mode.is_empty() {
                    "bf16"
                } else {
                    &row.gemm_quant_mode
                },
                if read_at_width {
                    format!(", on {} cards as its run is named", parallel.stage_cards())
                } else {
                    String::new()
                }
            ),
        });
    }
    out
}

/// The run width of each aggregated row whose layout columns hold its square
/// ([`run_width`]).
fn squared_layouts(rows: &[SiliconRow]) -> HashMap<String, RunWidth> {
    let recorded: Vec<RecordedRow> = rows
        .iter()
        .filter(|row| row.mode == "agg")
        .map(|row| RecordedRow {
            id: &row.id,
            same_measurement_as: &row.same_measurement_as,
            sweep: sweep_key(row),
            attention_cards: LayoutColumns::aggregated(row).attention_cards(),
        })
        .collect();
    run_width::squared_rows(&recorded)
}

/// An aggregated row's layout columns, read at its run's width where they hold its square.
fn aggregated_columns(row: &SiliconRow, squared: &HashMap<String, RunWidth>) -> LayoutColumns {
    let columns = LayoutColumns::aggregated(row);
    match squared.get(&row.id) {
        Some(&width) => columns.at_run_width(width),
        None => columns,
    }
}

/// The engine profile of a row's engine release: vLLM before 0.14 scheduled synchronously
/// (`vllm-0.13`); from 0.14.0 it schedules the next iteration while the current one runs.
/// A row without a version is placed by its collection date against 0.14.0's release
/// (2026-01-20); a row with neither is taken as the current release.
fn engine_profile_name(row: &SiliconRow) -> String {
    if row.backend != "vllm" {
        return row.backend.clone();
    }
    let before_async = match release_of(&row.backend_version) {
        Some(version) => version < (0, 14, 0, 0),
        None => row.collected_since("2026-01-20") == Some(false),
    };
    if before_async {
        "vllm-0.13".into()
    } else {
        row.backend.clone()
    }
}

/// Whether a row asking for `asked` runs a checkpoint whose experts ship in `own`.
fn runs_as_shipped(own: Option<&str>, asked: Option<Dtype>) -> bool {
    match (own, asked) {
        (Some("mxfp4"), _) => true,
        (Some(own), Some(asked)) => own.parse::<Dtype>().is_ok_and(|own| own == asked),
        _ => false,
    }
}

/// The per-iteration token budget the collection's deployments ran with, which the sample
/// does not record.
///
/// TensorRT-LLM: AIConfigurator's deployment generator writes `max_num_tokens` = the batch
/// size + the input length + 1500 from its first TensorRT-LLM templates
/// (`cli/backends/trtllm.py`, 2025-08-11) on, and its rule for benchmark deployments
/// (`generator/rule_plugin/benchmark/trtllm.rule`, rounded up to whole KV blocks of 32) still
/// does; with chunked prefill off — room for one long prompt per iteration beside the
/// decodes, so a wave of prompts arriving together is prefilled one by one. (Its rule for
/// other deployments took the margin to 500 on 2026-04-01; no scored row changes between the
/// two.) The batch size is taken as the row's per-worker batch. (Against the engine's default
/// of 8192, held-out median |TTFT error| 56 % → 34 % with the benchmark's drained phases; the
/// +1500 margin in place of +500 took dense / MoE / disaggregated TensorRT-LLM TTFT
/// 36.5 / 39.4 / 56.0 % → 35.5 / 33.3 / 53.5 %.)
///
/// vLLM: from the generator's first vLLM rule (`generator/rule_plugin/vllm.rule`,
/// 2025-12-04) `max_num_batched_tokens` = the batch size + the input length + 1500, for the
/// rows collected from then on (or, undated, on a release from 0.14, which came out later).
/// Rows before it were not generated deployments; for them one prompt's worth of tokens, what
/// AIConfigurator's own estimator assumes, chosen before this split on the Llama-3.1-8B rows by
/// median |TTFT error|: one prompt 14.5 %, the OpenAI server's default 34.6 %, 2048 44.5 %.
/// (The generator's budget for the later rows, in place of one prompt, took the MoE vLLM TTFT
/// 44.4 % → 41.5 %.) SGLang: its default (one prompt gave 189 % against 174 %).
fn deployed_budget(row: &SiliconRow, batch: u32) -> Option<u64> {
    let (isl, batch) = (u64::from(row.isl), u64::from(batch));
    match row.backend.as_str() {
        "vllm" if vllm_generated(row) => Some(batch + isl + GENERATOR_BUDGET_MARGIN),
        "vllm" => Some(isl),
        "trtllm" => Some(batch + isl + GENERATOR_BUDGET_MARGIN),
        _ => None,
    }
}

/// SGLang's `max_prefill_tokens` where the generator set it: the input length + 1500 from
/// its first SGLang rule (`generator/rule_plugin/sglang.rule`, 2025-12-04), for aggregated
/// and prefill workers alike. SGLang admits prompts while an iteration's prompt tokens are
/// below it (the chunk size, the profile's budget, still caps the iteration).
fn deployed_prompt_budget(row: &SiliconRow) -> Option<u64> {
    (row.backend == "sglang" && sglang_generated(row))
        .then(|| u64::from(row.isl) + GENERATOR_BUDGET_MARGIN)
}

/// Whether an SGLang row ran a deployment AIConfigurator's generator wrote: collected on or
/// after [`GENERATOR_RULES_SINCE`], or undated on a release from 0.5.6.post1 (published
/// 2025-12-08, later still).
fn sglang_generated(row: &SiliconRow) -> bool {
    row.collected_since(GENERATOR_RULES_SINCE)
        .unwrap_or_else(|| release_of(&row.backend_version).is_some_and(|v| v >= (0, 5, 6, 1)))
}

/// The decode batch sizes the collection's deployments captured as CUDA graphs, where the
/// generator set them: every size up to the worker's batch (`cuda_graph_batch_sizes =
/// range(1, max_batch_size + 1)`), so no decode step is padded. TensorRT-LLM's rule has it
/// from 2025-12-04 (`generator/rule_plugin/trtllm.rule`; its rule for benchmark deployments
/// keeps it to this day), the benchmark rules of vLLM and SGLang from 2026-01-30
/// (`rule_plugin/benchmark/`). Other rows keep the engine profile's sizes. (Disaggregated
/// TensorRT-LLM TPOT 27.0 → 23.1 %, MoE vLLM TTFT 41.5 → 41.1 %; nothing else moves.)
fn deployed_graph_sizes(row: &SiliconRow, batch: u32) -> Option<Vec<u32>> {
    let since = |day: &str| row.collected_since(day) == Some(true);
    let every_size = || (1..=batch.max(1)).collect();
    match row.backend.as_str() {
        "trtllm" if since(GENERATOR_RULES_SINCE) => Some(every_size()),
        "vllm" | "sglang" if since(BENCHMARK_RULES_SINCE) => Some(every_size()),
        _ => None,
    }
}

/// How prompts and decodes shared an iteration where the generator set it: its SGLang rule
/// turns on `--enable-mixed-chunk` for aggregated workers from 2026-01-19
/// (`generator/rule_plugin/sglang.rule`, "fix: add sglang enable-mix-chunk for generator"),
/// so a prompt's chunks run beside the decodes instead of pausing them. Rows collected from
/// then on, or undated on a release from 0.5.8 (published 2026-01-23, later still), ran so;
/// the others with SGLang's default, prefill first.
fn deployed_step_mix(row: &SiliconRow) -> Option<StepMix> {
    let mixed = row.mode == "agg"
        && row.backend == "sglang"
        && row
            .collected_since(SGLANG_MIXED_CHUNK_SINCE)
            .unwrap_or_else(|| {
                release_of(&row.backend_version).is_some_and(|version| version >= (0, 5, 8, 0))
            });
    mixed.then_some(StepMix::Mixed)
}

/// The day AIConfigurator's generator turned on SGLang's mixed chunks.
const SGLANG_MIXED_CHUNK_SINCE: &str = "2026-01-19";

/// The tokens AIConfigurator's generator adds to an aggregated worker's budget beyond the
/// batch and the input length.
const GENERATOR_BUDGET_MARGIN: u64 = 1500;

/// The day AIConfigurator's generator took its rules (`generator/rule_plugin/`): its first
/// vLLM deployments, and TensorRT-LLM's rule capturing every decode batch size.
const GENERATOR_RULES_SINCE: &str = "2025-12-04";

/// The day the generator gained its benchmark rules ("generator add benchmark mode by
/// setting rule plugins").
const BENCHMARK_RULES_SINCE: &str = "2026-01-30";

/// Whether a vLLM row ran a deployment AIConfigurator's generator wrote: collected on or
/// after [`GENERATOR_RULES_SINCE`], or undated on a release from 0.14 (2026-01-20, later
/// still).
fn vllm_generated(row: &SiliconRow) -> bool {
    row.collected_since(GENERATOR_RULES_SINCE)
        .unwrap_or_else(|| {
            release_of(&row.backend_version).is_some_and(|version| version >= (0, 14, 0, 0))
        })
}

/// A release's major, minor, patch and post-release numbers ("0.5.8.post1" → (0, 5, 8, 1),
/// "0.12.0" → (0, 12, 0, 0)); `None` for a nightly or a blank. A missing patch or post number
/// is 0, and a pre-release counts by the number it starts with ("1.0.0rc3" → patch 0).
fn release_of(version: &str) -> Option<(u32, u32, u32, u32)> {
    let leading = |part: &str| {
        let digits = part
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(part.len());
        part[..digits].parse().unwrap_or(0)
    };
    let mut parts = version.split('.');
    let (major, minor) = (parts.next()?.parse().ok()?, parts.next()?.parse().ok()?);
    let patch = parts.next().map_or(0, leading);
    let post = version.split(".post").nth(1).map_or(0, leading);
    Some((major, minor, patch, post))
}

/// Rows of one sweep: the same deployment at several concurrencies.
fn sweep_key(row: &SiliconRow) -> String {
    let columns = |c: LayoutColumns| {
        format!(
            "tp{}dp{}ep{}",
            c.tp.unwrap_or(1),
            c.dp.unwrap_or(1),
            c.ep.unwrap_or(1)
        )
    };
    // A disaggregated deployment is its two pools: their layouts and worker counts.
    let layout = if row.mode == "agg" {
        columns(LayoutColumns::aggregated(row))
    } else {
        format!(
            "{}P{}:{}D{}",
            row.prefill_num_workers.unwrap_or(0),
            columns(LayoutColumns::prefill(row)),
            row.decode_num_workers.unwrap_or(0),
            columns(LayoutColumns::decode(row)),
        )
    };
    format!(
        "{}|{}|{}|{}|{}|{}|{}x{}|{}",
        row.backend,
        row.backend_version,
        row.model_path,
        row.system,
        row.gemm_quant_mode,
        layout,
        row.isl,
        row.osl,
        row.mode
    )
}

/// This source: every dense aggregated row, split by model — the Llama-3.1-8B rows are where
/// `capplan validate --fit` fits SGLang's and TensorRT-LLM's overhead constants, and the other
/// models' rows are the held-out score. The shipped profiles keep provisional constants: on
/// those rows the fit leaves TensorRT-LLM's within its own wander (refitting from its result
/// moves it again, with no gain in the loss) and asks SGLang for 8.6 ms a step, which puts its
/// held-out TPOT at 34 % (4 % with the provisional 1 ms).
pub fn source(catalog: &Catalog) -> Result<TableSource, InputError> {
    let rows = read_rows(FIXTURE, FIXTURE_NAME)?;
    let mut skipped = SkipReasons::default();
    let mut comparisons = comparisons(catalog, &rows, &mut skipped, ModelClass::Dense);
    for comparison in &mut comparisons {
        comparison.subset = subset(is_fit_row(&comparison.group, &comparison.deployment.model));
    }
    Ok(TableSource {
        name: "AIConfigurator silicon sample, dense aggregated".into(),
        file: FIXTURE_NAME.into(),
        split: "by model: SGLang's and TensorRT-LLM's Llama-3.1-8B rows are the fit subset of \
                `--fit` (their profiles keep provisional overheads: the fit there leaves \
                TensorRT-LLM's within its noise and asks SGLang for 8.6 ms a step, which takes \
                its held-out TPOT to 34 %), the other models held out; every vLLM row held out \
                (vLLM's overheads come from BLIS's Llama-2 stages; vLLM before 0.14 is profile \
                vllm-0.13)"
            .into(),
        comparisons,
        skipped,
        total_rows: rows.len(),
        model_class: "dense",
    })
}

/// The mixture-of-experts aggregated rows (DeepSeek-R1/V3, Qwen3-235B, gpt-oss-120b, …),
/// split by architecture: the rows of DeepSeek-V3's (DeepSeek-V3, R1, V3.1, Kimi-K2.5) are
/// where `validate --fit` fits each engine's cost per expert layer
/// ([`EngineProfile::moe_layer_overhead_us`](crate::catalog::EngineProfile)), every other
/// model's rows are the held-out score. The engines' other constants come from the dense
/// sources.
pub fn moe_source(catalog: &Catalog) -> Result<TableSource, InputError> {
    let rows = read_rows(FIXTURE, FIXTURE_NAME)?;
    let mut skipped = SkipReasons::default();
    let mut comparisons = comparisons(catalog, &rows, &mut skipped, ModelClass::Mixture);
    for comparison in &mut comparisons {
        comparison.subset = subset(is_moe_fit_model(catalog, &comparison.deployment.model));
    }
    Ok(TableSource {
        name: "AIConfigurator silicon sample, mixture of experts aggregated".into(),
        file: FIXTURE_NAME.into(),
        split: "by architecture: the rows of DeepSeek-V3's (DeepSeek-V3, R1, V3.1, Kimi-K2.5) \
                are the fit subset of each engine's cost per expert layer (`--fit`), every \
                other model held out (the engines' other constants come from the dense \
                sources); rows whose layout columns hold the square of the cards their run \
                is named by (`tp2_ep2` recorded as tp 2 × dp 2, ep 4) are read at the named \
                width, with the rows repeating their measurement and the rest of their sweeps"
            .into(),
        comparisons,
        skipped,
        total_rows: rows.len(),
        model_class: MOE_CLASS,
    })
}

/// The disaggregated rows (prefill and decode on separate workers, each pool with its own
/// layout; DeepSeek-V3, Kimi-K2.5, Qwen3 under TensorRT-LLM, SGLang and vLLM), split by
/// prompt length: the rows of 1 024-token prompts are where `validate --fit` fits each
/// engine's hand-off between the pools
/// ([`EngineProfile::handoff_ms`](crate::catalog::EngineProfile)), the other lengths are the
/// held-out score. Only rows that record both pools' worker counts can be simulated.
pub fn disaggregated_source(catalog: &Catalog) -> Result<TableSource, InputError> {
    let rows = read_rows(FIXTURE, FIXTURE_NAME)?;
    let mut skipped = SkipReasons::default();
    let mut comparisons = comparisons(catalog, &rows, &mut skipped, ModelClass::Disaggregated);
    for comparison in &mut comparisons {
        comparison.subset = subset(comparison.deployment.input_tokens.mean() == HANDOFF_FIT_PROMPT);
    }
    Ok(TableSource {
        name: "AIConfigurator silicon sample, disaggregated".into(),
        file: FIXTURE_NAME.into(),
        split: "by prompt length: the rows of 1 024-token prompts are the fit subset of each \
                engine's hand-off between the pools (`--fit`), the other lengths (8 192, \
                15 000) held out; the two pools are \
                simulated against each other with the users the router gives them (decode: \
                prompts' KV in place, users away for their prefill side; prefill: one-token \
                requests, one iteration's batch as deployed, users away for their transfer \
                and decode)"
            .into(),
        comparisons,
        skipped,
        total_rows: rows.len(),
        model_class: DISAGGREGATED_CLASS,
    })
}

/// The model class of the mixture-of-experts source's sweeps.
pub const MOE_CLASS: &str = "mixture of experts";

/// The prompt length of the disaggregated rows the hand-off is fitted on.
const HANDOFF_FIT_PROMPT: f64 = 1024.0;

/// Whether `model` is of DeepSeek-V3's architecture (latent attention, 256–384 routed experts
/// and a shared one: DeepSeek-V3, R1, V3.1, V3.2, Kimi-K2, K2.5), whose mixture-of-experts
/// rows the cost per expert layer is fitted on.
pub fn is_moe_fit_model(catalog: &Catalog, model: &str) -> bool {
    catalog
        .model(model)
        .is_ok_and(|m| m.family == "deepseek" && m.experts.is_some())
}

/// The model class of the disaggregated source's sweeps: kept out of the C* bands, which
/// are for aggregated instances.
pub const DISAGGREGATED_CLASS: &str = "disaggregated";

/// Measured rounds per silicon row: AIConfigurator's benchmark sends `--num-requests` 20 ×
/// the concurrency (`BENCH_MULTI_ROUND`), the first round of which starts together.
pub const BENCHMARK_ROUNDS: usize = 20;

/// The subset names of a split.
pub const FIT_SUBSET: &str = "fit on";
pub const HELD_OUT: &str = "held out";

/// The subset a row of a split falls in: the fit subset or the held-out one.
pub fn subset(fit: bool) -> String {
    if fit { FIT_SUBSET } else { HELD_OUT }.into()
}

/// Whether a silicon row of `model` under `engine` belongs to the rows the overheads are
/// fitted on: Llama-3.1-8B under SGLang and TensorRT-LLM. vLLM's are fitted on BLIS's vLLM
/// measurements instead, so every vLLM row here is held out: those of 0.14 and later score
/// the BLIS fit; those before (`vllm-0.13`) keep provisional constants, since their only
/// Llama-3.1-8B rows (21, FP8 on H200, 100–2 000 output tokens) are decided by how the
/// benchmark's users fall into step more than by the iteration's cost.
pub fn is_fit_row(engine: &str, model: &str) -> bool {
    !engine.starts_with("vllm") && model == "llama-3.1-8b"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantised_checkpoints_name_their_base_model() {
        assert_eq!(
            catalog_model_name("nvidia/Llama-3.1-8B-Instruct-FP8"),
            "Llama-3.1-8B-Instruct"
        );
        assert_eq!(catalog_model_name("nvidia/Qwen3-32B-NVFP4"), "Qwen3-32B");
        assert_eq!(catalog_model_name("Qwen/Qwen3-32B"), "Qwen3-32B");
        let catalog = Catalog::shipped().unwrap();
        for path in [
            "meta-llama/Llama-3.1-8B-Instruct",
            "meta-llama/Llama-3.1-70B",
            "Qwen/Qwen3-32B",
            "nvidia/Qwen3-32B-NVFP4",
            "MiniMaxAI/MiniMax-M2.5",
            "nvidia/MiniMax-M2.5-NVFP4",
            "moonshotai/Kimi-K2.5",
            "nvidia/Kimi-K2.5-NVFP4",
        ] {
            assert!(catalog.model(&catalog_model_name(path)).is_ok(), "{path}");
        }
    }

    /// The vLLM run of MiniMax-M2.5 named `tp2_ep2` (two cards) whose columns say tp 2, dp 2,
    /// ep 4 is simulated on two cards at the client's 256 users, like the row that holds its
    /// figures under the named layout; as are the row it repeats (`cfg690`) and that row's
    /// sweep-mate at 512 users. A row whose columns agree with its name is read as recorded.
    #[test]
    fn squared_layout_columns_are_read_at_the_width_the_run_is_named_by() {
        let catalog = Catalog::shipped().unwrap();
        let rows = read_rows(FIXTURE, FIXTURE_NAME).unwrap();
        let mut skipped = SkipReasons::default();
        let comparisons = comparisons(&catalog, &rows, &mut skipped, ModelClass::Mixture);
        let find = |id: &str| {
            comparisons
                .iter()
                .find(|c| c.id == id)
                .unwrap_or_else(|| panic!("{id} compared"))
        };
        for (id, users) in [
            ("minimaxm2_5_b200_vllm_fp8_agg_1024x1024_c256_cfg690", 256),
            ("minimaxm2_5_b200_vllm_fp8_agg_1024x1024_c512_cfg690", 512),
            (
                "2026_03_25_minimax_m2_5_b200_sxm_vllm_fp8_agg_1024x1024_c256_tp2_0_ep2_0_98",
                256,
            ),
        ] {
            let row = find(id);
            let parallel = row.deployment.parallel;
            assert_eq!(
                (
                    parallel.tp,
                    parallel.dp,
                    parallel.ep,
                    parallel.stage_cards()
                ),
                (2, 1, 2, 2),
                "{id}"
            );
            assert_eq!(row.arrivals, Arrivals::Closed { users }, "{id}");
        }
        assert!(find("minimaxm2_5_b200_vllm_fp8_agg_1024x1024_c256_cfg690")
            .note
            .contains("on 2 cards as its run is named"));
        // Named and consistent: TensorRT-LLM's attention data parallelism over four cards.
        let consistent =
            find("2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c256_tp4_0_ep4_0_990");
        let parallel = consistent.deployment.parallel;
        assert_eq!((parallel.tp, parallel.dp, parallel.ep), (1, 4, 4));
        assert!(!consistent.note.contains("as its run is named"));
    }

    #[test]
    fn the_fixture_parses_and_its_dense_rows_map_to_the_catalog() {
        let catalog = Catalog::shipped().unwrap();
        let rows = read_rows(FIXTURE, FIXTURE_NAME).unwrap();
        assert!(rows.len() > 5000, "{}", rows.len());
        let mut skipped = SkipReasons::default();
        let comparisons = comparisons(&catalog, &rows, &mut skipped, ModelClass::Dense);
        // Every engine has dense aggregated rows on a card the catalog knows (the dense vLLM
        // rows were all collected before 0.14).
        for engine in ["vllm-0.13", "sglang", "trtllm"] {
            assert!(
                comparisons.iter().any(|c| c.group == engine),
                "{engine}: {skipped:?}"
            );
        }
        assert_eq!(
            comparisons.len() + skipped.total(),
            rows.len(),
            "every row is compared or skipped with a reason"
        );
    }

    /// MiniMax-M2.5's and Kimi-K2.5's aggregated rows map to the catalog and are scored by the
    /// mixture-of-experts source: every one that is not a repeat, with its layout read.
    #[test]
    fn the_2026_mixtures_rows_are_scored() {
        let catalog = Catalog::shipped().unwrap();
        let rows = read_rows(FIXTURE, FIXTURE_NAME).unwrap();
        let mut skipped = SkipReasons::default();
        let comparisons = comparisons(&catalog, &rows, &mut skipped, ModelClass::Mixture);
        for (path, model) in [
            ("MiniMaxAI/MiniMax-M2.5", "minimax-m2.5"),
            ("moonshotai/Kimi-K2.5", "kimi-k2.5"),
        ] {
            let aggregated = rows
                .iter()
                .filter(|r| {
                    r.model_path == path && r.mode == "agg" && r.same_measurement_as.is_empty()
                })
                .count();
            let scored = comparisons
                .iter()
                .filter(|c| c.deployment.model == model)
                .count();
            assert!(aggregated > 100, "{path}: {aggregated}");
            assert_eq!(scored, aggregated, "{path}: {skipped:?}");
        }
    }

    /// Disaggregated rows that record their worker counts are read with both pools'
    /// layouts; the others are skipped with that reason.
    #[test]
    fn disaggregated_rows_carry_both_pools() {
        let catalog = Catalog::shipped().unwrap();
        let rows = read_rows(FIXTURE, FIXTURE_NAME).unwrap();
        let mut skipped = SkipReasons::default();
        let comparisons = comparisons(&catalog, &rows, &mut skipped, ModelClass::Disaggregated);
        assert!(comparisons.len() > 200, "{}", comparisons.len());
        assert!(skipped
            .reasons
            .contains_key("disaggregated row without its worker counts"));
        let kimi = comparisons
            .iter()
            .find(|c| c.id == "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c4_cfg759")
            .expect("the Kimi-K2.5 row");
        let pools = kimi.deployment.pools.expect("pools");
        assert_eq!((pools.prefill_workers, pools.decode_workers), (1, 4));
        assert_eq!(
            (pools.prefill.tp, pools.prefill.dp, pools.prefill.ep),
            (1, 4, 4)
        );
        let decode = kimi.deployment.parallel;
        assert_eq!((decode.tp, decode.dp, decode.ep), (8, 1, 8));
        assert_eq!(kimi.arrivals, Arrivals::Closed { users: 4 });
        assert!(comparisons.iter().all(|c| c.deployment.pools.is_some()));
    }

    #[test]
    fn vllm_rows_take_the_profile_of_their_release() {
        let row = |version: &str, measured: &str| SiliconRow {
            backend_version: version.into(),
            measured: measured.into(),
            ..read_rows(FIXTURE, FIXTURE_NAME).unwrap()[0].clone()
        };
        let vllm = |version: &str, measured: &str| SiliconRow {
            backend: "vllm".into(),
            ..row(version, measured)
        };
        assert_eq!(engine_profile_name(&vllm("0.12.0", "")), "vllm-0.13");
        assert_eq!(
            engine_profile_name(&vllm("0.11.2", "2026-03-01")),
            "vllm-0.13"
        );
        assert_eq!(engine_profile_name(&vllm("0.14.0", "")), "vllm");
        assert_eq!(engine_profile_name(&vllm("0.19.0", "2025-01-01")), "vllm");
        // Without a version, the collection date against 0.14.0's release.
        assert_eq!(engine_profile_name(&vllm("", "2025-10-02")), "vllm-0.13");
        assert_eq!(
            engine_profile_name(&vllm("nightly-5b8c30d", "2026-04-02")),
            "vllm"
        );
        assert_eq!(engine_profile_name(&vllm("", "")), "vllm");
        let sglang = SiliconRow {
            backend: "sglang".into(),
            ..row("0.4.6", "2025-01-01")
        };
        assert_eq!(engine_profile_name(&sglang), "sglang");
    }

    /// The generator's deployments: a budget of the batch + the prompt + 1500 tokens for
    /// TensorRT-LLM and for the vLLM rows it wrote (one prompt for older vLLM rows, SGLang's
    /// own default), and every decode batch size up to the worker's batch as a CUDA graph
    /// from the days its rules said so.
    #[test]
    fn generated_deployments_take_the_generators_budget_and_graphs() {
        let row = |backend: &str, version: &str, measured: &str| SiliconRow {
            backend: backend.into(),
            backend_version: version.into(),
            measured: measured.into(),
            isl: 4000,
            ..read_rows(FIXTURE, FIXTURE_NAME).unwrap()[0].clone()
        };
        let budget = |r: &SiliconRow| deployed_budget(r, 64);
        assert_eq!(budget(&row("trtllm", "1.0.0rc3", "")), Some(5564));
        assert_eq!(budget(&row("trtllm", "", "2026-04-20")), Some(5564));
        assert_eq!(budget(&row("vllm", "0.18.0", "2026-03-27")), Some(5564));
        assert_eq!(budget(&row("vllm", "0.15.1", "")), Some(5564));
        assert_eq!(budget(&row("vllm", "0.12.0", "")), Some(4000));
        assert_eq!(budget(&row("vllm", "", "2025-10-29")), Some(4000));
        assert_eq!(budget(&row("sglang", "0.5.9", "2026-03-01")), None);

        let graphs = |r: &SiliconRow| deployed_graph_sizes(r, 6);
        let every = Some(vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(
            graphs(&row("trtllm", "1.1.0rc2.post2", "2025-12-15")),
            every
        );
        assert_eq!(graphs(&row("trtllm", "", "2025-11-02")), None);
        assert_eq!(graphs(&row("trtllm", "1.0.0rc3", "")), None);
        assert_eq!(graphs(&row("vllm", "0.19.0", "2026-04-01")), every);
        assert_eq!(graphs(&row("sglang", "0.5.6", "2025-12-20")), None);
    }

    /// SGLang as the generator deployed it: `max_prefill_tokens` of the prompt + 1500 from
    /// its first rule (2025-12-04), mixed chunks in aggregated workers from 2026-01-19;
    /// undated rows by the release they ran (0.5.6.post1 and 0.5.8 came out after those days).
    #[test]
    fn generated_sglang_deployments_take_the_generators_prompt_budget_and_mixed_chunks() {
        let row = |mode: &str, version: &str, measured: &str| SiliconRow {
            backend: "sglang".into(),
            mode: mode.into(),
            backend_version: version.into(),
            measured: measured.into(),
            isl: 8192,
            ..read_rows(FIXTURE, FIXTURE_NAME).unwrap()[0].clone()
        };
        let prompts = |r: &SiliconRow| deployed_prompt_budget(r);
        assert_eq!(prompts(&row("agg", "0.5.9", "2026-03-25")), Some(9692));
        assert_eq!(
            prompts(&row("disagg", "0.5.5.post2", "2025-12-10")),
            Some(9692)
        );
        assert_eq!(prompts(&row("agg", "0.5.6.post2", "")), Some(9692));
        assert_eq!(prompts(&row("agg", "0.5.6", "")), None);
        assert_eq!(prompts(&row("agg", "", "2025-11-10")), None);
        assert_eq!(prompts(&row("agg", "nightly-dev", "")), None);

        let mix = |r: &SiliconRow| deployed_step_mix(r);
        assert_eq!(
            mix(&row("agg", "0.5.9", "2026-03-25")),
            Some(StepMix::Mixed)
        );
        assert_eq!(mix(&row("agg", "0.5.8.post1", "")), Some(StepMix::Mixed));
        assert_eq!(mix(&row("agg", "0.5.7", "")), None);
        assert_eq!(mix(&row("agg", "0.5.6.post2", "2026-01-10")), None);
        assert_eq!(mix(&row("disagg", "0.5.8.post1", "2026-02-10")), None);
        let vllm = SiliconRow {
            backend: "vllm".into(),
            ..row("agg", "0.19.0", "2026-04-01")
        };
        assert_eq!(mix(&vllm), None);
        assert_eq!(prompts(&vllm), None);

        assert_eq!(release_of("0.5.10.post1"), Some((0, 5, 10, 1)));
        assert_eq!(release_of("0.5.9"), Some((0, 5, 9, 0)));
        assert_eq!(release_of("0.12.0"), Some((0, 12, 0, 0)));
        assert_eq!(release_of("1.0.0rc3"), Some((1, 0, 0, 0)));
        assert_eq!(release_of("nightly-dev-20260216-d3bae71e"), None);
    }
}
