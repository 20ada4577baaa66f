//! Serving engines as the performance model sees them: scheduler defaults, how prefill and
//! decode share an iteration, CUDA-graph batch sizes, per-step overhead, and whose operator
//! timings describe their kernels.
//!
//! Why profiles: the same card runs a model at different speeds under vLLM, SGLang,
//! TensorRT-LLM and TGI — not because the matmuls differ much, but because the schedulers
//! differ (SGLang pauses decoding for a prefill batch, vLLM mixes prefill chunks into decode
//! steps, TGI makes new requests wait for a batch to gather) and the fixed cost of an
//! iteration does. A prediction names the profile it used, and a capacity point stores it.

use serde::{Deserialize, Serialize};

/// How the prompt work of newly admitted requests shares an iteration with decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepMix {
    /// Every iteration decodes one token for each running sequence and fills the rest of the
    /// token budget with prompt chunks (vLLM V1, TensorRT-LLM in-flight batching).
    Mixed,
    /// An iteration either prefills (admitted prompts, decoding paused) or decodes; prefill
    /// goes first whenever a waiting request can be admitted (SGLang's default scheduler, TGI).
    PrefillFirst,
}

impl std::fmt::Display for StepMix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StepMix::Mixed => "mixed",
            StepMix::PrefillFirst => "prefill-first",
        })
    }
}

/// What KV-cache space a request must find free before it is admitted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KvReservation {
    /// Room for its prompt; decoding grows into what is free and preempts the youngest
    /// sequence when that runs out (vLLM, SGLang, TGI).
    #[default]
    Prompt,
    /// Room for its prompt and every token it may generate, reserved up front: nothing is
    /// ever preempted, and a request waits while the running ones' reservations fill the
    /// cache (TensorRT-LLM's default `GUARANTEED_NO_EVICT` capacity scheduler).
    WholeRequest,
}

impl std::fmt::Display for KvReservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KvReservation::Prompt => "prompt",
            KvReservation::WholeRequest => "whole-request",
        })
    }
}

/// How an FP8 GEMM's input activations get their scale.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ActivationScales {
    /// Computed per batch before each GEMM: a reduction over the activation, one more kernel
    /// per GEMM (what the collected FP8 GEMM timings include).
    #[default]
    Dynamic,
    /// Calibrated into the checkpoint (NVIDIA ModelOpt FP8): the input is quantised with a
    /// stored scale, and the reduction is skipped.
    Static,
}

/// When waiting requests may join a running batch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Admission {
    /// At every iteration (vLLM, SGLang).
    Continuous,
    /// As Hugging Face TGI's router: while a batch runs, new requests join only once
    /// `max_waiting_steps` decode steps have passed since the last admission, or when at least
    /// `waiting_served_ratio` × running requests are waiting (TGI defaults: 20 and 1.2). Their
    /// TTFT then includes up to that many steps of waiting.
    Delayed {
        max_waiting_steps: u64,
        waiting_served_ratio: f64,
    },
}

impl std::str::FromStr for Admission {
    type Err = crate::error::InputError;

    /// `continuous`, `delayed` (TGI defaults) or `delayed:STEPS,RATIO`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || {
            crate::error::InputError::value(format!(
                "admission '{text}': use continuous, delayed, or delayed:STEPS,RATIO (e.g. delayed:20,1.2)"
            ))
        };
        match text.trim() {
            "continuous" => Ok(Admission::Continuous),
            "delayed" | "tgi" => Ok(Admission::Delayed {
                max_waiting_steps: 20,
                waiting_served_ratio: 1.2,
            }),
            other => {
                let spec = other.strip_prefix("delayed:").ok_or_else(invalid)?;
                let (steps, ratio) = spec.split_once(',').ok_or_else(invalid)?;
                let max_waiting_steps = steps.trim().parse().map_err(|_| invalid())?;
                let waiting_served_ratio: f64 = ratio.trim().parse().map_err(|_| invalid())?;
                if !(waiting_served_ratio.is_finite() && waiting_served_ratio >= 0.0) {
                    return Err(invalid());
                }
                Ok(Admission::Delayed {
                    max_waiting_steps,
                    waiting_served_ratio,
                })
            }
        }
    }
}

impl std::fmt::Display for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Admission::Continuous => f.write_str("continuous"),
            Admission::Delayed {
                max_waiting_steps,
                waiting_served_ratio,
            } => write!(f, "delayed:{max_waiting_steps},{waiting_served_ratio}"),
        }
    }
}

/// Admission written as its flag text in catalog files (`continuous`, `delayed:20,1.2`).
mod admission_text {
    use super::Admission;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Admission, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(value)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Admission, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// One engine's defaults, from `hardware/engines.toml` (every number with its source).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineProfile {
    /// `vllm`, `sglang`, `trtllm`, `tgi`.
    pub name: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    /// The engine and versions these defaults describe.
    pub describes: String,
    /// Whose measured operator timings time this engine's kernels
    /// (`hardware/operators/<system>/<operators>.csv`).
    pub operators: String,
    /// Most requests in flight at once (vLLM `max_num_seqs`, SGLang `max_running_requests`,
    /// TensorRT-LLM `max_batch_size`, TGI `max_batch_size`).
    pub max_running: usize,
    /// Most tokens one iteration processes (vLLM `max_num_batched_tokens`, SGLang
    /// `chunked_prefill_size`, TensorRT-LLM `max_num_tokens`, TGI `max_batch_prefill_tokens`).
    pub token_budget: u64,
    /// The budgets `validate --fit` tries where the deployments measured do not state theirs
    /// (an engine built by someone else with settings nobody published): the one whose fit
    /// rows' TTFT comes closest is kept, and the overheads are fitted at it. Empty: the
    /// budget is the engine's documented default and is not fitted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub token_budget_grid: Vec<u64>,
    /// Whether a prompt longer than the budget is split over iterations; without it a prompt is
    /// prefilled whole, in an iteration of its own size.
    pub chunked_prefill: bool,
    pub step_mix: StepMix,
    /// When waiting requests may join: `continuous`, or `delayed:STEPS,RATIO` (TGI).
    #[serde(with = "admission_text")]
    pub admission: Admission,
    /// KV space a request needs free to be admitted: `prompt` (default) or `whole-request`.
    #[serde(default)]
    pub kv_reservation: KvReservation,
    /// Tokens per KV-cache block (vLLM `block_size`, TensorRT-LLM `tokens_per_block`, SGLang
    /// `page_size`): a prefix-cache hit reuses whole blocks only. Default 16.
    #[serde(default = "default_kv_block_tokens")]
    pub kv_block_tokens: u64,
    /// Whether the engine keeps earlier prompts' KV blocks and reuses them (vLLM's automatic
    /// prefix caching, SGLang's radix cache, TensorRT-LLM's `enable_block_reuse`). Default on.
    #[serde(default = "default_true")]
    pub prefix_caching: bool,
    /// A hybrid model's recurrent states kept in a pool of their own, this many bytes of it
    /// for each byte of KV cache (SGLang's `mamba_full_memory_ratio`, 0.9): the cache is
    /// split so, and the pool's slots — one state each — cap the running requests. Without
    /// it (vLLM's hybrid allocator) states and KV share one pool, each sequence's state
    /// taking its room beside its tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_memory_ratio: Option<f64>,
    /// Whether the scheduler picks the next iteration's batch while the current one runs
    /// (vLLM async scheduling, SGLang and TensorRT-LLM overlap scheduling): the CPU's
    /// scheduling hides behind the GPU's work, and a request arriving mid-iteration joins
    /// the iteration after next.
    #[serde(default)]
    pub schedule_ahead: bool,
    /// How FP8 weights' input activations are scaled: `dynamic` (default) or `static`.
    #[serde(default)]
    pub fp8_activation_scales: ActivationScales,
    /// The shapes its grouped-query decode kernel was built for, where it lacks one for
    /// others (TensorRT-LLM before 1.0); without it every shape has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grouped_decode: Option<super::GroupedDecodeKernels>,
    /// Decode batches up to this size run as captured CUDA graphs, padded up to the next
    /// size in `cuda_graph_sizes`; larger ones run eagerly at their own size.
    pub cuda_graph_sizes: Vec<u32>,
    /// Share of each card's memory the engine takes (weights, activations, KV cache).
    pub memory_utilization: f64,
    /// Fixed time of one iteration beyond its kernels (scheduling, input preparation, sampling
    /// launch, detokenisation hand-off), ms.
    pub step_overhead_ms: f64,
    /// Time per sequence in an iteration beyond its kernels, µs.
    pub seq_overhead_us: f64,
    /// Extra time per transformer layer of an iteration that does not run as a CUDA graph
    /// (prompt work, or a decode batch past the largest graph), µs.
    #[serde(default)]
    pub eager_layer_overhead_us: f64,
    /// Time from a request's arrival to the engine's queue (HTTP front, tokenisation), ms.
    /// A disaggregated request passes it once, on its way to the prefill worker. Fitted with
    /// the overheads where a profile's fit rows have open-loop or one-user rows to read it
    /// from, else on its own (`request_overhead_source`).
    #[serde(default)]
    pub request_overhead_ms: f64,
    /// Extra time per mixture-of-experts layer of every iteration, µs: what a running
    /// engine's expert layer costs beyond the isolated fused-MoE kernel the operator tables
    /// time (routing and the gaps between the layer's kernels, not attributed further).
    /// Fitted on one architecture's rows and scored on the others (`moe_source`).
    #[serde(default)]
    pub moe_layer_overhead_us: f64,
    /// Time a disaggregated request spends between its prefill worker's last iteration and
    /// its decode worker's first token beyond moving the KV bytes, ms: the two schedulers'
    /// hand-shake, transfer polling and the router. Fitted on one prompt length's rows and
    /// scored on the others (`handoff_source`).
    #[serde(default)]
    pub handoff_ms: f64,
    /// How far a benchmark's users fall out of step behind this engine's server once the
    /// benchmark has started them all at once, as a share of one request cycle (0–1): after
    /// the first measured wave each user's next request leaves up to that share of a cycle
    /// later (uniformly). A deterministic simulation keeps users started together in step for
    /// good — they finish an iteration apart, so each round their prompts queue behind each
    /// other's — and some servers' users do stay so; others' spread out within a round or two,
    /// and their first tokens then rarely wait behind another prompt. Only benchmark rows
    /// simulated as their client ran them use it (`capplan validate`); predictions assume
    /// users already spread over a cycle. Fitted on one source's fit rows (`out_of_step_source`).
    #[serde(default)]
    pub out_of_step: f64,
    /// What `moe_layer_overhead_us`, `request_overhead_ms` (fitted on its own), `handoff_ms`
    /// and `out_of_step` were fitted on, where they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe_layer_source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_overhead_source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff_source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_of_step_source: Option<String>,
    /// Different scheduler defaults on large cards (vLLM raises its budget on cards of 70 GiB
    /// or more, A100s excepted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub large_cards: Option<LargeCardDefaults>,
    /// Where the two overhead constants come from (what they were fitted on).
    pub overhead_source: String,
    pub source: String,
}

fn default_kv_block_tokens() -> u64 {
    16
}

fn default_true() -> bool {
    true
}

impl EngineProfile {
    /// The size a decode batch of `batch` sequences runs at: the next captured CUDA-graph
    /// size, or its own size past the largest.
    pub fn graph_batch(&self, batch: u32) -> u32 {
        match self.cuda_graph_sizes.iter().find(|&&size| size >= batch) {
            Some(&size) => size,
            None => batch,
        }
    }

    /// One line for reports: `vllm (vLLM V1 0.10–0.11 defaults; 1024 running, 8192 tokens
    /// per step, mixed prefill)`. The time a request spends before the engine is named where
    /// the profile has one: it adds to every first token.
    pub fn summary(&self) -> String {
        let front = if self.request_overhead_ms > 0.0 {
            format!(
                ", {:.1} ms a request before the engine",
                self.request_overhead_ms
            )
        } else {
            String::new()
        };
        format!(
            "{} ({}; {} running, {} tokens per step, {} prefill{}{}, {:.2} ms + {:.0} µs/sequence per step{front})",
            self.name,
            self.describes,
            self.max_running,
            self.token_budget,
            self.step_mix,
            if self.chunked_prefill { ", chunked" } else { ", whole prompts" },
            match self.kv_reservation {
                KvReservation::Prompt => "",
                KvReservation::WholeRequest => ", KV reserved for whole requests",
            },
            self.step_overhead_ms,
            self.seq_overhead_us,
        )
    }
}

/// Scheduler defaults an engine picks on large cards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LargeCardDefaults {
    /// Cards with at least this much memory…
    pub min_memory_gib: f64,
    /// …whose names contain none of these (case-insensitive)…
    #[serde(default)]
    pub except: Vec<String>,
    /// …run with these instead.
    pub max_running: usize,
    pub token_budget: u64,
}

impl EngineProfile {
    /// The running cap and token budget this engine picks on `card`.
    pub fn limits_on(&self, card: &super::Card) -> (usize, u64) {
        match &self.large_cards {
            Some(large)
                if card.memory_gib >= large.min_memory_gib
                    && !large.except.iter().any(|name| {
                        card.name
                            .to_ascii_lowercase()
                            .contains(&name.to_ascii_lowercase())
                    }) =>
            {
                (large.max_running, large.token_budget)
            }
            _ => (self.max_running, self.token_budget),
        }
    }
}

/// The profile used when none is named.
pub const DEFAULT_ENGINE: &str = "vllm";

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(sizes: Vec<u32>) -> EngineProfile {
        EngineProfile {
            name: "x".into(),
            aliases: vec![],
            describes: "test".into(),
            operators: "vllm".into(),
            max_running: 8,
            token_budget: 512,
            token_budget_grid: vec![],
            chunked_prefill: true,
            step_mix: StepMix::Mixed,
            admission: Admission::Continuous,
            kv_reservation: KvReservation::Prompt,
            kv_block_tokens: 16,
            prefix_caching: true,
            schedule_ahead: false,
            state_memory_ratio: None,
            fp8_activation_scales: ActivationScales::Dynamic,
            grouped_decode: None,
            cuda_graph_sizes: sizes,
            memory_utilization: 0.9,
            step_overhead_ms: 1.0,
            seq_overhead_us: 1.0,
            eager_layer_overhead_us: 0.0,
            request_overhead_ms: 0.0,
            moe_layer_overhead_us: 0.0,
            handoff_ms: 0.0,
            out_of_step: 0.0,
            moe_layer_source: None,
            request_overhead_source: None,
            handoff_source: None,
            out_of_step_source: None,
            large_cards: None,
            overhead_source: "test".into(),
            source: "test".into(),
        }
    }

    #[test]
    fn vllm_and_sglang_pick_larger_limits_on_large_cards() {
        let catalog = crate::catalog::Catalog::shipped().unwrap();
        let vllm = catalog.engine("vllm").unwrap();
        let limits = |card: &str| vllm.limits_on(catalog.card(card).unwrap());
        assert_eq!(limits("H100-SXM"), (1024, 8192));
        assert_eq!(limits("H200"), (1024, 8192));
        assert_eq!(limits("A100-80G-SXM"), (256, 2048));
        assert_eq!(limits("L4"), (256, 2048));
        // SGLang's chunk size steps up at 160 GiB of device memory (B200 and larger).
        let sglang = catalog.engine("sglang").unwrap();
        let chunk = |card: &str| sglang.limits_on(catalog.card(card).unwrap()).1;
        assert_eq!(chunk("H100-SXM"), 8192);
        assert_eq!(chunk("H200"), 8192);
        assert_eq!(chunk("B200"), 16384);
        assert_eq!(chunk("MI300X"), 16384);
        // Engines without a large-card rule use one set of limits everywhere.
        let trtllm = catalog.engine("trtllm").unwrap();
        assert_eq!(
            trtllm.limits_on(catalog.card("B200").unwrap()),
            (trtllm.max_running, trtllm.token_budget)
        );
    }

    #[test]
    fn decode_batches_pad_to_the_next_graph_size() {
        let p = profile(vec![1, 2, 4, 8, 16, 24, 32]);
        assert_eq!(p.graph_batch(1), 1);
        assert_eq!(p.graph_batch(3), 4);
        assert_eq!(p.graph_batch(17), 24);
        assert_eq!(p.graph_batch(32), 32);
        // Past the largest captured size the batch runs eagerly at its own size.
        assert_eq!(p.graph_batch(33), 33);
        assert_eq!(profile(vec![]).graph_batch(5), 5);
    }

    #[test]
    fn the_summary_names_a_front_only_where_there_is_one() {
        let none = profile(vec![1]);
        assert!(
            !none.summary().contains("before the engine"),
            "{}",
            none.summary()
        );
        let front = EngineProfile {
            request_overhead_ms: 98.9,
            ..profile(vec![1])
        };
        assert!(
            front
                .summary()
                .ends_with("µs/sequence per step, 98.9 ms a request before the engine)"),
            "{}",
            front.summary()
        );
    }
}
