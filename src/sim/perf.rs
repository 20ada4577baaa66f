//! How long one engine iteration takes on a layout: the performance model.
//!
//! An iteration (step) processes some tokens for some sequences: one token for each decoding
//! sequence and a chunk of prompt for each prefilling one. Its time is
//!
//! ```text
//! step = max(compute, memory) + all-reduce + overhead
//! compute    = (2 × active params × tokens + 4 × layers × heads × head dim × attention pairs)
//!              / (tp × peak FLOP/s × compute efficiency)
//! memory     = (weight bytes read / tp + KV bytes read per card) / (HBM bandwidth × memory efficiency)
//! all-reduce = 2 per layer when tp > 1, each 2·log2(tp) hop latencies
//!              + 2(tp − 1)/tp × tokens × hidden × 2 bytes / (link bandwidth per direction × link efficiency)
//! overhead   = per-step overhead + per-sequence overhead × sequences
//! ```
//!
//! Decoding is memory-bound (every step reads all weights once, whatever the batch), prefill is
//! compute-bound; the max() is where a batch crosses from one to the other. The link term is why
//! TP over PCIe loses to TP over NVLink. Mixture-of-experts models read only the experts the
//! step's tokens route to: 1 − (1 − k/E)^tokens of them in expectation.

use std::cell::RefCell;

use serde::Serialize;

use super::fabric::Fabric;
use super::operator_step::OperatorStep;
use super::step_parts::{Roofline, StepParts};
use crate::catalog::{BlockStream, Card, Dtype, Model, Node, Parallelism};

/// The share of peak HBM bandwidth the engines' fused mixture-of-experts kernels reach while
/// streaming expert weights in decode steps: the median over every measured fused-MoE timing
/// the catalog ships (NVIDIA AIConfigurator's collection: 8 GPU systems × 3 engines × the
/// catalog's model shapes × expert layouts × 1–256 tokens, about 77 000 cells; per system
/// 0.23–0.39 on A100 to B300, 0.69 on L40S). The roofline reads routed experts at this share,
/// so a card without measured tables is not credited with a bandwidth no measured MoE kernel
/// reaches (test `the_expert_streaming_share_is_what_the_tables_measure`).
pub const EXPERT_STREAM_SHARE: f64 = 0.28;

/// Fractions of peak a real engine reaches, and fixed costs. Defaults are typical of a
/// well-tuned continuous-batching engine (vLLM / SGLang class) and are meant to be calibrated
/// from measurements (`capplan calibrate`); every prediction says which values it used.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Efficiency {
    /// Share of peak dense FLOP/s the matmuls reach. Default 0.5.
    pub compute: f64,
    /// Share of HBM bandwidth the weight and KV reads reach. Default 0.75.
    pub memory: f64,
    /// Share of link bandwidth an all-reduce reaches. Default 0.7.
    pub link: f64,
    /// Latency of one hop of an all-reduce, µs. Default by link: NVLink 3, Infinity Fabric 4,
    /// HCCS 5, PCIe 10.
    pub link_latency_us: f64,
    /// Fixed cost of one iteration (scheduling, sampling launch, Python), ms. Default 2.
    pub step_overhead_ms: f64,
    /// Cost per sequence in an iteration (sampling, detokenizing, bookkeeping), ms.
    /// Default 0.01.
    pub seq_overhead_ms: f64,
    /// Multiplier on kernel times taken from measured operator tables (1 = as measured);
    /// `capplan calibrate` fits it where a card's own runs say its kernels run slower or
    /// faster than the tables. Unused by the roofline.
    pub operator_scale: f64,
    /// Extra time per transformer layer of an iteration that does not run as a captured CUDA
    /// graph (any step with prompt work, or a decode batch past the largest graph), µs: the
    /// host launching each layer's kernels one by one. Default 0.
    pub eager_layer_overhead_us: f64,
    /// Time from a request's arrival to the engine's queue (HTTP front, tokenisation), ms:
    /// in its TTFT, not in any step. Default 0.
    pub request_overhead_ms: f64,
    /// Extra time per mixture-of-experts layer of every iteration, µs (the engine profile's
    /// `moe_layer_overhead_us`). Default 0.
    pub moe_layer_overhead_us: f64,
    /// A disaggregated request's time between its prefill and its decode worker beyond the
    /// KV bytes, ms (the engine profile's `handoff_ms`): in its TTFT. Default 0.
    pub handoff_ms: f64,
}

impl Efficiency {
    /// The defaults for a link kind, overridden by what the card's catalog entry sets.
    pub fn for_card(card: &Card, interconnect: &str) -> Efficiency {
        let mut eff = Efficiency {
            compute: 0.5,
            memory: 0.75,
            link: 0.7,
            link_latency_us: default_hop_latency_us(interconnect),
            step_overhead_ms: 2.0,
            seq_overhead_ms: 0.01,
            operator_scale: 1.0,
            eager_layer_overhead_us: 0.0,
            request_overhead_ms: 0.0,
            moe_layer_overhead_us: 0.0,
            handoff_ms: 0.0,
        };
        if let Some(over) = &card.efficiency {
            eff.compute = over.compute.unwrap_or(eff.compute);
            eff.memory = over.memory.unwrap_or(eff.memory);
            eff.link = over.link.unwrap_or(eff.link);
            eff.link_latency_us = over.link_latency_us.unwrap_or(eff.link_latency_us);
            eff.step_overhead_ms = over.step_overhead_ms.unwrap_or(eff.step_overhead_ms);
            eff.seq_overhead_ms = over.seq_overhead_ms.unwrap_or(eff.seq_overhead_ms);
        }
        eff
    }
}

/// One hop of an all-reduce over this kind of link, µs.
pub fn default_hop_latency_us(interconnect: &str) -> f64 {
    match interconnect {
        "nvlink" => 3.0,
        "infinity-fabric" => 4.0,
        "hccs" => 5.0,
        _ => 10.0,
    }
}

/// The work of one iteration, summed over its sequences.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepWork {
    /// Tokens processed (decode tokens + prompt-chunk tokens).
    pub tokens: f64,
    /// Sequences in the batch.
    pub sequences: f64,
    /// Query–key pairs attended over, summed over tokens (a decode token at context c attends
    /// c + 1 positions; a prompt chunk of n tokens after o cached ones, n·o + n(n+1)/2).
    pub attention_pairs: f64,
    /// KV-cache positions read, summed over sequences.
    pub kv_positions_read: f64,
    /// Decoding sequences (one token each) and the KV positions they attend over.
    pub decode_sequences: f64,
    pub decode_positions: f64,
    /// Draft tokens verified beside the decoding sequences' own (speculative decoding):
    /// through every weight and sampled like them.
    pub verify_tokens: f64,
    /// Prompt chunks, their tokens, the positions cached before them, and the query–key
    /// pairs they attend over.
    pub prefill_chunks: f64,
    pub prefill_tokens: f64,
    pub prefill_cached: f64,
    pub prefill_pairs: f64,
}

impl StepWork {
    pub fn add_decode(&mut self, sequences: f64, context_sum: f64) {
        self.tokens += sequences;
        self.sequences += sequences;
        self.attention_pairs += context_sum + sequences;
        self.kv_positions_read += context_sum + sequences;
        self.decode_sequences += sequences;
        self.decode_positions += context_sum + sequences;
    }

    /// Decoding sequences that each verify `tokens` positions in one pass (their own token and
    /// `tokens − 1` drafted ones, speculating): every position goes through the weights and is
    /// sampled; the attention still reads each sequence's KV once.
    pub fn add_verify(&mut self, sequences: f64, context_sum: f64, tokens: f64) {
        self.add_decode(sequences, context_sum);
        let extra = sequences * (tokens - 1.0).max(0.0);
        if extra > 0.0 {
            self.tokens += extra;
            self.verify_tokens += extra;
            self.attention_pairs += extra * (context_sum / sequences.max(1.0) + 1.0);
            self.kv_positions_read += extra;
        }
    }

    /// `count` prompt chunks of `chunk` tokens after `cached` ones each (what calling
    /// [`StepWork::add_prefill_chunk`] `count` times adds).
    pub fn add_prefill_chunks(&mut self, count: f64, cached: f64, chunk: f64) {
        let pairs = chunk * cached + chunk * (chunk + 1.0) / 2.0;
        self.tokens += count * chunk;
        self.sequences += count;
        self.attention_pairs += count * pairs;
        self.kv_positions_read += count * (cached + chunk);
        self.prefill_chunks += count;
        self.prefill_tokens += count * chunk;
        self.prefill_cached += count * cached;
        self.prefill_pairs += count * pairs;
    }

    pub fn add_prefill_chunk(&mut self, cached: f64, chunk: f64) {
        let pairs = chunk * cached + chunk * (chunk + 1.0) / 2.0;
        self.tokens += chunk;
        self.sequences += 1.0;
        self.attention_pairs += pairs;
        self.kv_positions_read += cached + chunk;
        self.prefill_chunks += 1.0;
        self.prefill_tokens += chunk;
        self.prefill_cached += cached;
        self.prefill_pairs += pairs;
    }
}

/// Where one iteration's time goes, seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct StepTime {
    pub compute: f64,
    pub memory: f64,
    pub communication: f64,
    pub overhead: f64,
    pub total: f64,
}

/// A layout reduced to the numbers the step-time formula needs.
#[derive(Debug, Clone, Serialize)]
pub struct PerfModel {
    pub tp: u32,
    /// The layout beyond `tp`: attention replicas, expert ranks, pipeline stages.
    pub parallel: Parallelism,
    /// The links between the cards, past one all-reduce group.
    pub fabric: Fabric,
    pub layers: f64,
    /// Layers whose FFN is a mixture of experts (0 for a dense model).
    pub moe_layers: f64,
    /// Layers that attend over the KV cache (all but a hybrid model's linear-attention ones).
    pub attention_layers: f64,
    /// A hybrid model's recurrent state per sequence on one card, bytes: read and written
    /// once by each decode step (0 for a model that keeps only KV).
    pub state_bytes_per_sequence_per_card: f64,
    /// All-reduces a layer ends with when split over cards (`Model::all_reduces_per_layer`).
    pub all_reduces_per_layer: f64,
    /// Bytes per token of the all-reduce each attention layer's QK-norm adds when split over
    /// cards (`Model::qk_norm_all_reduce_bytes`).
    pub qk_norm_all_reduce_bytes: f64,
    pub hidden: f64,
    pub attention_width: f64,
    /// Vocabulary: the LM head is vocabulary × hidden.
    pub vocab: f64,
    /// Parameters every token uses (all of a dense model; attention and shared parts of MoE).
    pub shared_params: f64,
    /// Parameters in all experts together (0 for dense models).
    pub expert_params: f64,
    pub experts: f64,
    pub experts_per_token: f64,
    pub active_params: f64,
    pub weight_bytes_per_param: f64,
    pub kv_bytes_per_position_per_card: f64,
    /// Reads of each cached position per decode step (1 unless the engine lacks a grouped-query
    /// kernel for the layout: see `GroupedDecodeKernels`).
    pub decode_kv_reads: f64,
    /// Where the decode kernel runs one thread block per KV head per sequence, how one block
    /// streams a history (a floor under a decode step's attention); `None` where it splits
    /// histories.
    pub decode_block_stream: Option<BlockStream>,
    /// Per card, FLOP/s and bytes/s.
    pub peak_flops: f64,
    pub hbm_bytes_per_s: f64,
    /// Per card, one direction, bytes/s.
    pub link_bytes_per_s: f64,
    pub interconnect: String,
    pub efficiency: Efficiency,
    /// Kernel times from measured operator tables, when the card and engine have them;
    /// otherwise the roofline above.
    #[serde(skip)]
    pub operators: Option<OperatorStep>,
    /// Why the operator tables could not time this model, when they could not (the roofline
    /// is then in place): what the prediction's basis says.
    #[serde(skip)]
    pub operator_gap: Option<String>,
    /// Decode batch sizes the engine runs as CUDA graphs (a decode-only step is padded up to
    /// the next one); empty for none.
    pub graph_sizes: Vec<u32>,
    /// The share of routed experts a step's tokens touch, by token count (a whole number):
    /// a power per iteration was a sixteenth of a roofline mixture's prediction.
    #[serde(skip)]
    pub(crate) experts_touched: RefCell<Vec<Option<f64>>>,
}

impl PerfModel {
    /// The model of `model` on `tp` cards of `node`'s card, with weights in `dtype` and KV in
    /// `kv_dtype`, using `efficiency`.
    pub fn new(
        model: &Model,
        card: &Card,
        node_interconnect: &str,
        tp: u32,
        dtype: Dtype,
        kv_dtype: Dtype,
        efficiency: Efficiency,
    ) -> PerfModel {
        let total = model.params();
        let (shared, experts_total, experts, per_token) = match (
            model.experts,
            model.experts_per_token,
            model.active_params_b,
        ) {
            (Some(e), Some(k), Some(active_b)) if e > k && k > 0 => {
                let share = f64::from(k) / f64::from(e);
                let expert_total = (total - active_b * 1e9) / (1.0 - share);
                (
                    total - expert_total,
                    expert_total,
                    f64::from(e),
                    f64::from(k),
                )
            }
            _ => (total, 0.0, 1.0, 1.0),
        };
        let active = shared + experts_total * per_token / experts;
        let peak_tflops = match dtype {
            Dtype::Fp8 => card.fp8_tflops.unwrap_or(card.fp16_tflops),
            Dtype::Fp32 => card.fp16_tflops / 2.0,
            _ => card.fp16_tflops,
        };
        let link_gbs = if node_interconnect == card.interconnect || node_interconnect == "none" {
            card.link_bandwidth_gbs
        } else {
            pcie_bidirectional_gbs(card.pcie_gen)
        };
        let efficiency_link = efficiency.link;
        PerfModel {
            tp,
            parallel: Parallelism::tensor(tp),
            fabric: Fabric {
                efficiency: efficiency_link,
                ..Fabric::single_domain(tp, link_gbs, efficiency.link_latency_us)
            },
            layers: f64::from(model.layers),
            moe_layers: f64::from(model.moe_layers()),
            attention_layers: f64::from(model.full_attention_layers()),
            state_bytes_per_sequence_per_card: model
                .linear_attention
                .map_or(0.0, |linear| linear.state_bytes_per_sequence(tp).1),
            all_reduces_per_layer: model.all_reduces_per_layer(),
            qk_norm_all_reduce_bytes: model.qk_norm_all_reduce_bytes(),
            hidden: f64::from(model.hidden_size),
            vocab: f64::from(model.vocab_size),
            attention_width: f64::from(model.heads * model.head_dim),
            shared_params: shared,
            expert_params: experts_total,
            experts,
            experts_per_token: per_token,
            active_params: active,
            weight_bytes_per_param: dtype.bytes(),
            // Latent attention and sliding windows as the memory fit counts them, at the
            // context a chat deployment is configured for.
            kv_bytes_per_position_per_card: model
                .kv_bytes_per_token(kv_dtype.bytes(), tp, model.default_context())
                .1,
            decode_kv_reads: 1.0,
            decode_block_stream: None,
            peak_flops: peak_tflops * 1e12,
            hbm_bytes_per_s: card.hbm_bandwidth_gbs * 1e9,
            link_bytes_per_s: link_gbs * 1e9 / 2.0,
            interconnect: node_interconnect.to_string(),
            efficiency,
            operators: None,
            operator_gap: None,
            graph_sizes: Vec::new(),
            experts_touched: RefCell::default(),
        }
    }

    /// The same model laid out as `parallel` over `fabric` (its `tp` must be this model's).
    pub fn with_layout(mut self, parallel: Parallelism, fabric: Fabric) -> PerfModel {
        self.parallel = parallel;
        self.fabric = fabric;
        self
    }

    /// The same model decoding with a kernel that reads each cached position `reads` times,
    /// on the roofline and in its operator step alike (whichever is set first).
    pub fn with_decode_kv_reads(mut self, reads: f64) -> PerfModel {
        self.decode_kv_reads = reads.max(1.0);
        self.operators = self
            .operators
            .take()
            .map(|step| step.with_decode_kv_reads(self.decode_kv_reads));
        self
    }

    /// The same model decoding with a kernel whose blocks each stream one KV head of one
    /// sequence (`None`: a kernel that splits histories).
    pub fn with_decode_block_stream(mut self, stream: Option<BlockStream>) -> PerfModel {
        self.decode_block_stream = stream;
        self
    }

    /// What a step's decode attention waits beyond reading its KV at the card's memory
    /// bandwidth, where each block streams one KV head of one sequence alone: one block's
    /// stream of a history (the decoding sequences' mean: the simulation keeps their sum, not
    /// their longest) less the bandwidth-bound read of them all. A handful of sequences at a
    /// long history pay it in full; a batch large enough to occupy the GPU pays none.
    fn decode_block_wait_s(&self, work: &StepWork) -> f64 {
        let Some(stream) = self.decode_block_stream else {
            return 0.0;
        };
        if work.decode_sequences <= 0.0 || stream.bytes_per_s <= 0.0 {
            return 0.0;
        }
        let history = work.decode_positions / work.decode_sequences;
        let one_block = history * self.kv_bytes_per_position_per_card
            / stream.kv_heads_per_card.max(1.0)
            / stream.bytes_per_s;
        let dp = f64::from(self.parallel.dp.max(1));
        let all =
            self.kv_bytes_per_position_per_card * work.decode_positions * self.decode_kv_reads
                / dp
                / (self.hbm_bytes_per_s * self.efficiency.memory);
        (one_block - all).max(0.0)
    }

    /// Times kernels from `operators` instead of the roofline; decode-only steps run as CUDA
    /// graphs of `graph_sizes`. The step decodes with this model's KV reads.
    pub fn with_operators(mut self, operators: OperatorStep, graph_sizes: Vec<u32>) -> PerfModel {
        self.operators = Some(operators.with_decode_kv_reads(self.decode_kv_reads));
        self.graph_sizes = graph_sizes;
        self
    }

    /// The size a decode-only step of `batch` sequences runs at, if it runs as a CUDA graph.
    fn graph_batch(&self, batch: f64) -> Option<f64> {
        self.graph_sizes
            .iter()
            .find(|&&size| f64::from(size) >= batch)
            .map(|&size| f64::from(size))
    }

    /// The model for a node shape: its link decides the all-reduce.
    pub fn for_node(
        model: &Model,
        card: &Card,
        node: &Node,
        tp: u32,
        dtype: Dtype,
        kv_dtype: Dtype,
        efficiency: Efficiency,
    ) -> PerfModel {
        PerfModel::new(
            model,
            card,
            &node.interconnect,
            tp,
            dtype,
            kv_dtype,
            efficiency,
        )
    }

    /// Weight bytes one iteration reads on each card.
    #[cfg(test)]
    fn weight_bytes_per_card(&self, tokens: f64) -> f64 {
        let (shared, experts) = self.weight_bytes_split(tokens);
        shared + experts
    }

    /// Weight bytes one iteration reads on each card: the parts every token uses, and the
    /// routed experts its tokens touch.
    fn weight_bytes_split(&self, tokens: f64) -> (f64, f64) {
        let experts_read = if self.expert_params > 0.0 {
            self.expert_params * self.experts_touched(tokens.max(1.0))
        } else {
            0.0
        };
        (
            self.shared_params / f64::from(self.tp) * self.weight_bytes_per_param,
            experts_read / f64::from(self.parallel.stage_cards()) * self.weight_bytes_per_param,
        )
    }

    /// The share of routed experts `tokens` touch, each choosing `experts_per_token` at
    /// random: 1 − (1 − k/E)^tokens (remembered by the token count, a whole number).
    fn experts_touched(&self, tokens: f64) -> f64 {
        let touched = || 1.0 - (1.0 - self.experts_per_token / self.experts).powf(tokens);
        if tokens.fract() != 0.0 || tokens > 1e6 {
            return touched();
        }
        let key = tokens as usize;
        if let Some(Some(known)) = self.experts_touched.borrow().get(key) {
            return *known;
        }
        let value = touched();
        let mut memo = self.experts_touched.borrow_mut();
        if memo.len() <= key {
            memo.resize(key + 1, None);
        }
        memo[key] = Some(value);
        value
    }

    /// Seconds the LM head takes over `sequences` sampled tokens on each card (16-bit,
    /// split over the TP group; from the measured GEMMs where the instance has them).
    pub fn lm_head_s(&self, sequences: f64) -> f64 {
        if let Some(operators) = &self.operators {
            return operators.lm_head_us(sequences) * 1e-6 * self.efficiency.operator_scale;
        }
        let tp = f64::from(self.tp);
        let bytes = self.vocab * self.hidden * 2.0 / tp;
        let flops = 2.0 * self.vocab * self.hidden * sequences / tp;
        (bytes / (self.hbm_bytes_per_s * self.efficiency.memory))
            .max(flops / (self.peak_flops * self.efficiency.compute))
    }

    /// Seconds the drafter takes in a decode step of `sequences` sequences holding
    /// `context_sum` positions: `draft_tokens` passes one after another, each through
    /// `draft_layers` layers' worth of the model's decode work and the LM head to sample its
    /// draft. An MTP module or an EAGLE head is one such layer (an EAGLE head beside a mixture
    /// is dense and cheaper than a routed layer: counted as one, an upper bound); a draft model
    /// is its weights' share of a layer's, the decode work being mostly weight reads.
    pub fn draft_time(
        &self,
        sequences: f64,
        context_sum: f64,
        draft_tokens: u32,
        draft_layers: f64,
    ) -> f64 {
        let mut work = StepWork::default();
        work.add_decode(sequences, context_sum);
        let step = self.step_time(&work);
        let head = self.lm_head_s(sequences);
        let per_layer = (step.total - step.overhead - head).max(0.0) / self.layers.max(1.0);
        f64::from(draft_tokens) * (draft_layers * per_layer + head)
    }

    /// The sequences one attention replica's scheduler handles in a step. Each replica runs
    /// its own scheduler and sampler over its own requests, side by side with the others, so
    /// the host's per-sequence work grows with one replica's share, not the instance's
    /// (charged on the whole instance, 2 048 sequences over 32 replicas cost 20 ms a step).
    fn replica_sequences(&self, work: &StepWork) -> f64 {
        let dp = f64::from(self.parallel.dp.max(1));
        if dp <= 1.0 {
            return work.sequences;
        }
        (work.sequences / dp).ceil()
    }

    /// An iteration's time beyond its kernels, seconds: the fixed and per-sequence costs,
    /// the host's launches layer by layer where it runs without a CUDA graph (`eager`), and
    /// each expert layer's cost beyond its measured kernel.
    fn overhead_s(&self, work: &StepWork, eager: bool) -> f64 {
        let eff = &self.efficiency;
        let eager_ms = if eager {
            eff.eager_layer_overhead_us * 1e-3 * self.layers
        } else {
            0.0
        };
        (eff.step_overhead_ms
            + eff.seq_overhead_ms * self.replica_sequences(work)
            + eager_ms
            + eff.moe_layer_overhead_us * 1e-3 * self.moe_layers)
            * 1e-3
    }

    pub fn step_time(&self, work: &StepWork) -> StepTime {
        self.step_parts(work).time()
    }

    /// [`PerfModel::step_time`] by kind of work: what `predict --breakdown` prints.
    pub fn step_parts(&self, work: &StepWork) -> StepParts {
        let eff = &self.efficiency;
        if let Some(operators) = &self.operators {
            let graph = if work.prefill_tokens == 0.0 {
                self.graph_batch(work.decode_sequences)
            } else {
                None
            };
            let kernels = operators.time(work, graph);
            let scale = eff.operator_scale;
            let overhead = self.overhead_s(work, graph.is_none());
            return StepParts {
                weights: kernels.gemm * scale,
                attention: kernels.attention * scale + self.decode_block_wait_s(work),
                elementwise: kernels.other * scale,
                roofline: None,
                communication: kernels.communication * scale,
                overhead,
                graph_batch: graph,
            };
        }
        let tp = f64::from(self.tp);
        // Attention replicas split the tokens; each replica's cards read its share of the KV.
        let dp = f64::from(self.parallel.dp.max(1));
        let local = work.tokens / dp;
        let flops = 2.0 * self.active_params * work.tokens
            + 4.0 * self.attention_layers * self.attention_width * work.attention_pairs;
        let compute = flops / (tp * dp * self.peak_flops * eff.compute);
        let (shared, experts) = self.weight_bytes_split(work.tokens);
        let kv_positions =
            work.kv_positions_read + (self.decode_kv_reads - 1.0) * work.decode_positions;
        // A hybrid model's decoding sequences also read and write their recurrent states (the
        // linear layers' prompt work, a few FLOPs per token and state entry, is left out).
        let bytes = shared
            + self.kv_bytes_per_position_per_card * kv_positions / dp
            + 2.0 * self.state_bytes_per_sequence_per_card * work.decode_sequences / dp;
        // Routed experts stream at the share of bandwidth measured fused-MoE kernels reach,
        // never above the card's own memory efficiency.
        let memory = bytes / (self.hbm_bytes_per_s * eff.memory)
            + experts / (self.hbm_bytes_per_s * eff.memory.min(EXPERT_STREAM_SHARE))
            + self.decode_block_wait_s(work);
        let mut communication = if self.tp > 1 {
            let all_reduce = |message: f64| {
                2.0 * tp.log2() * eff.link_latency_us * 1e-6
                    + 2.0 * (tp - 1.0) / tp * message / (self.link_bytes_per_s * eff.link)
                    + self.fabric.cross_domain_all_reduce_s(self.tp, message)
            };
            let qk_norm = if self.qk_norm_all_reduce_bytes > 0.0 {
                self.attention_layers * all_reduce(local * self.qk_norm_all_reduce_bytes)
            } else {
                0.0
            };
            self.all_reduces_per_layer * self.layers * all_reduce(local * self.hidden * 2.0)
                + qk_norm
        } else {
            0.0
        };
        if self.parallel.dp > 1 && self.experts > 1.0 {
            // Tokens to their experts' cards and back, 16-bit, every layer.
            let ranks = self.parallel.stage_cards();
            let per_rank = work.tokens / f64::from(ranks) * self.experts_per_token * self.hidden;
            communication += 2.0 * self.layers * self.fabric.all_to_all_s(ranks, per_rank * 2.0);
        }
        if self.parallel.pp > 1 {
            communication += f64::from(self.parallel.pp - 1)
                * self
                    .fabric
                    .stage_send_s(self.parallel.stage_cards(), local * self.hidden * 2.0);
        }
        let graph = if work.prefill_tokens == 0.0 {
            self.graph_batch(work.decode_sequences)
        } else {
            None
        };
        let overhead = self.overhead_s(work, graph.is_none());
        StepParts {
            weights: 0.0,
            attention: 0.0,
            elementwise: 0.0,
            roofline: Some(Roofline { compute, memory }),
            communication,
            overhead,
            graph_batch: graph,
        }
    }
}

/// PCIe x16 bandwidth, both directions, GB/s.
pub fn pcie_bidirectional_gbs(generation: u32) -> f64 {
    match generation {
        0..=3 => 32.0,
        4 => 64.0,
        5 => 128.0,
        _ => 256.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    fn a100_13b(tp: u32, interconnect: &str) -> PerfModel {
        let catalog = Catalog::shipped().unwrap();
        let model = catalog.model("llama-13b").unwrap();
        let card = catalog.card("A100-80G-SXM").unwrap();
        let eff = Efficiency {
            compute: 0.5,
            memory: 0.8,
            link: 0.5,
            link_latency_us: 5.0,
            step_overhead_ms: 2.0,
            seq_overhead_ms: 0.01,
            operator_scale: 1.0,
            eager_layer_overhead_us: 0.0,
            request_overhead_ms: 0.0,
            moe_layer_overhead_us: 0.0,
            handoff_ms: 0.0,
        };
        PerfModel::new(model, card, interconnect, tp, Dtype::Fp16, Dtype::Fp16, eff)
    }

    /// The cost per expert layer is paid once per mixture-of-experts layer of every
    /// iteration, decode or prompt: DeepSeek-V3's 58 of 61 (its first three are dense), none
    /// of a dense model's.
    #[test]
    fn expert_layers_pay_their_own_overhead() {
        let catalog = Catalog::shipped().unwrap();
        let card = catalog.card("H200").unwrap();
        let overhead = |model: &str, us: f64, work: &StepWork| {
            let model = catalog.model(model).unwrap();
            let eff = Efficiency {
                moe_layer_overhead_us: us,
                ..Efficiency::for_card(card, "nvlink")
            };
            PerfModel::new(model, card, "nvlink", 8, Dtype::Fp8, Dtype::Fp8, eff)
                .step_parts(work)
                .overhead
        };
        let mut decode = StepWork::default();
        decode.add_decode(16.0, 16.0 * 2048.0);
        let mut prompt = StepWork::default();
        prompt.add_prefill_chunk(0.0, 2048.0);
        for work in [&decode, &prompt] {
            let added = overhead("deepseek-v3", 20.0, work) - overhead("deepseek-v3", 0.0, work);
            assert!((added - 58.0 * 20e-6).abs() < 1e-12, "{added}");
            let dense =
                overhead("llama-3.1-70b", 20.0, work) - overhead("llama-3.1-70b", 0.0, work);
            assert_eq!(dense, 0.0);
        }
    }

    /// Each attention replica's scheduler handles its own sequences side by side with the
    /// others: 1 024 sequences over 8 replicas cost the per-sequence overhead of 128.
    #[test]
    fn per_sequence_overhead_is_one_replicas() {
        let fabric = Fabric::single_domain(8, 600.0, 5.0);
        let one = a100_13b(1, "nvlink").with_layout(Parallelism::tensor(1), fabric);
        let replicas = a100_13b(1, "nvlink").with_layout(
            Parallelism {
                tp: 1,
                pp: 1,
                dp: 8,
                ep: 1,
            },
            fabric,
        );
        let decode = |sequences: f64| {
            let mut work = StepWork::default();
            work.add_decode(sequences, sequences * 500.0);
            work
        };
        // 2 ms per step and 0.01 ms per sequence.
        assert!((one.step_time(&decode(1024.0)).overhead - 12.24e-3).abs() < 1e-9);
        assert!((replicas.step_time(&decode(1024.0)).overhead - 3.28e-3).abs() < 1e-9);
    }

    #[test]
    fn decode_is_memory_bound_by_hand() {
        // llama-13b: 13.02e9 params. One decode step of 1 sequence at context 999 on one
        // A100-80G: weights 26.04e9 B + KV 1000 positions × 819_200 B = 26.8592e9 B;
        // at 2039e9 B/s × 0.8 → 16.4659 ms. Compute: 2 × 13.02e9 + 4 × 40 × 5120 × 1000
        // = 26.859e9 FLOP / (312e12 × 0.5) = 0.17217 ms. Overhead 2 + 0.01 ms.
        let perf = a100_13b(1, "nvlink");
        let mut work = StepWork::default();
        work.add_decode(1.0, 999.0);
        let t = perf.step_time(&work);
        assert!(
            (t.memory - 26.8592e9 / (2039e9 * 0.8)).abs() < 1e-9,
            "{t:?}"
        );
        assert!(
            (t.compute - 26.8592e9 / (312e12 * 0.5)).abs() < 1e-9,
            "{t:?}"
        );
        assert_eq!(t.communication, 0.0);
        assert!((t.overhead - 2.01e-3).abs() < 1e-12);
        assert!((t.total - (t.memory + 2.01e-3)).abs() < 1e-12);
    }

    /// A decode kernel whose blocks each stream one KV head of one sequence: llama-13b has
    /// 40 KV heads on one card, 819 200 B per position, so one block reads 20 480 B a
    /// position. At 1 % of 2039e9 B/s (20.39e9 B/s) a history of 4 000 positions takes
    /// 4000 × 20 480 / 20.39e9 = 4.0176 ms to stream, where the bandwidth-bound read of it
    /// all takes 4000 × 819 200 / (2039e9 × 0.8) = 2.0088 ms: the step waits the difference.
    /// Eight such sequences read 16.07 ms at the card's bandwidth, past one block's stream:
    /// no wait. Without the stream (a kernel that splits histories) there is none either.
    #[test]
    fn one_block_per_kv_head_floors_a_few_long_histories() {
        let plain = a100_13b(1, "nvlink");
        let blocks = a100_13b(1, "nvlink").with_decode_block_stream(Some(BlockStream {
            kv_heads_per_card: 40.0,
            bytes_per_s: 0.01 * 2039e9,
        }));
        let decode = |sequences: f64| {
            let mut work = StepWork::default();
            work.add_decode(sequences, sequences * 3999.0);
            work
        };
        let wait = 4000.0 * 20_480.0 / (0.01 * 2039e9) - 4000.0 * 819_200.0 / (2039e9 * 0.8);
        let one = decode(1.0);
        assert!((blocks.decode_block_wait_s(&one) - wait).abs() < 1e-9);
        assert!((blocks.step_time(&one).memory - plain.step_time(&one).memory - wait).abs() < 1e-9);
        assert_eq!(blocks.decode_block_wait_s(&decode(8.0)), 0.0);
        assert_eq!(plain.decode_block_wait_s(&one), 0.0);
        // A prompt-only step decodes nothing and waits for no block.
        let mut prompt = StepWork::default();
        prompt.add_prefill_chunk(0.0, 512.0);
        assert_eq!(blocks.decode_block_wait_s(&prompt), 0.0);
    }

    #[test]
    fn prefill_is_compute_bound_by_hand() {
        // A 2048-token prompt: 2 × 13.02e9 × 2048 = 5.332992e13 FLOP for the matmuls, plus
        // 4 × 40 × 5120 × (2048 × 2049 / 2) = 1.7190880e12 FLOP attention → 5.5048999e13
        // / 156e12 FLOP/s = 352.878 ms, well above the 16.9 ms of memory traffic.
        let perf = a100_13b(1, "nvlink");
        let mut work = StepWork::default();
        work.add_prefill_chunk(0.0, 2048.0);
        let t = perf.step_time(&work);
        let flops = 2.0 * 13.02e9 * 2048.0 + 4.0 * 40.0 * 5120.0 * (2048.0 * 2049.0 / 2.0);
        assert!((t.compute - flops / 156e12).abs() < 1e-9);
        assert!(t.compute > t.memory);
        assert!((t.total - (t.compute + 2.01e-3)).abs() < 1e-12);
    }

    #[test]
    fn all_reduce_by_hand_and_pcie_costs_more() {
        // TP4 over NVLink (600 GB/s both ways → 300e9 B/s per direction × 0.5 link efficiency):
        // 64 decode tokens, message 64 × 5120 × 2 = 655_360 B;
        // one all-reduce = 2·log2(4) × 5 µs + 2 × 3/4 × 655_360 / 150e9 = 20 µs + 6.5536 µs;
        // 2 per layer × 40 layers → 2.124288 ms.
        let nvlink = a100_13b(4, "nvlink");
        let mut work = StepWork::default();
        work.add_decode(64.0, 64.0 * 500.0);
        let t = nvlink.step_time(&work);
        assert!((t.communication - 80.0 * (20e-6 + 1.5 * 655_360.0 / 150e9)).abs() < 1e-12);
        // The same cards on PCIe Gen4 (64 GB/s both ways): the bandwidth term is 9.4× larger.
        let pcie = a100_13b(4, "pcie");
        assert!(pcie.step_time(&work).communication > t.communication);
        assert_eq!(pcie.link_bytes_per_s, 32e9);
    }

    /// The roofline counts one all-reduce a layer for a model whose attention and MLP run
    /// side by side: half the communication of the same shapes reduced after each.
    #[test]
    fn a_parallel_attention_model_all_reduces_once_a_layer() {
        let catalog = Catalog::shipped().unwrap();
        let card = catalog.card("A100-80G-SXM").unwrap();
        let falcon = catalog.model("falcon-180b").unwrap();
        let sequential = Model {
            parallel_attention: None,
            ..falcon.clone()
        };
        let eff = a100_13b(1, "nvlink").efficiency;
        let mut work = StepWork::default();
        work.add_decode(64.0, 64.0 * 500.0);
        let time = |model: &Model| {
            PerfModel::new(model, card, "nvlink", 8, Dtype::Fp16, Dtype::Fp16, eff)
                .step_time(&work)
                .communication
        };
        let (once, twice) = (time(falcon), time(&sequential));
        assert!(once > 0.0);
        assert!((twice / once - 2.0).abs() < 1e-9, "{once} vs {twice}");
    }

    /// The roofline gives a QK-norm over all heads one more all-reduce per attention layer
    /// when the heads are split, a latency-bound one (two FP32 values a token); none on one
    /// card.
    #[test]
    fn a_qk_norm_over_all_heads_adds_an_all_reduce_a_layer() {
        let catalog = Catalog::shipped().unwrap();
        let card = catalog.card("H100-SXM").unwrap();
        let minimax = catalog.model("minimax-m2.5").unwrap();
        let head_wise = Model {
            qk_norm_across_heads: None,
            ..minimax.clone()
        };
        let eff = a100_13b(1, "nvlink").efficiency;
        let mut work = StepWork::default();
        work.add_decode(8.0, 8.0 * 1000.0);
        let time = |model: &Model, tp: u32| {
            PerfModel::new(model, card, "nvlink", tp, Dtype::Fp8, Dtype::Fp8, eff)
                .step_time(&work)
                .communication
        };
        let extra = time(minimax, 4) - time(&head_wise, 4);
        let latency = 2.0 * 2.0 * eff.link_latency_us * 1e-6 * f64::from(minimax.layers);
        assert!(
            extra >= latency && extra < 1.01 * latency,
            "{extra} vs {latency}"
        );
        assert_eq!(time(minimax, 1), time(&head_wise, 1));
    }

    #[test]
    fn moe_reads_only_routed_experts() {
        let catalog = Catalog::shipped().unwrap();
        let model = catalog.model("mixtral-8x7b").unwrap();
        let card = catalog.card("H100-SXM").unwrap();
        let eff = Efficiency::for_card(card, "nvlink");
        let perf = PerfModel::new(model, card, "nvlink", 2, Dtype::Bf16, Dtype::Fp16, eff);
        // 46.7 B total, 12.9 B active with 2 of 8 experts: experts hold (46.7 − 12.9)/0.75
        // = 45.0667 B, shared 1.6333 B; active = 1.6333 + 45.0667/4 = 12.9 B.
        assert!((perf.active_params - 12.9e9).abs() < 1e3);
        // One token reads 2 of 8 experts' weights: shared + a quarter of the experts.
        let one = perf.weight_bytes_per_card(1.0);
        assert!((one - (1.6333333e9 + 45.0666667e9 * 0.25) * 2.0 / 2.0).abs() < 1e3);
        // A big batch touches all of them.
        let many = perf.weight_bytes_per_card(256.0);
        assert!((many - 46.7e9).abs() < 1e6);
    }

    /// EXPERT_STREAM_SHARE is what the shipped fused-MoE tables measure: bytes of the touched
    /// experts' weights on one card over the kernel's time, as a share of the card's peak
    /// bandwidth, median over every cell of 1 to 256 tokens.
    #[test]
    fn the_expert_streaming_share_is_what_the_tables_measure() {
        let catalog = crate::catalog::Catalog::shipped().unwrap();
        let mut shares = Vec::new();
        for (system, engine) in catalog.operators.systems() {
            let Some(card) = catalog
                .cards
                .iter()
                .find(|c| c.operators.as_deref() == Some(system))
            else {
                continue;
            };
            let tables = catalog.operators.get(system, engine).unwrap();
            for (variant, tp, ep) in tables.moe_layouts() {
                let fields: Vec<&str> = variant.split('.').collect();
                let number = |prefix: &str| -> f64 {
                    fields
                        .iter()
                        .find_map(|f| f.strip_prefix(prefix).and_then(|v| v.parse().ok()))
                        .unwrap()
                };
                let (hidden, width, k, experts) =
                    (number("h"), number("i"), number("k"), number("e"));
                let dtype = fields[0];
                let bytes_per_param = match dtype {
                    "bf16" => 2.0,
                    "fp8" | "fp8_block" => 1.0,
                    "nvfp4" => 4.5 / 8.0,
                    "int4_wo" => 0.5,
                    _ => 4.25 / 8.0,
                };
                let shape = variant.trim_start_matches(&format!("{dtype}."));
                for tokens in [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0] {
                    let us = tables.moe_us(dtype, shape, tp, ep, tokens).unwrap();
                    let touched = (experts * (1.0 - (1.0 - k / experts).powf(tokens))
                        / f64::from(ep))
                    .max(1.0);
                    let bytes = touched * 3.0 * hidden * width / f64::from(tp) * bytes_per_param;
                    shares.push(bytes / (us * 1e-6 * card.hbm_bandwidth_gbs * 1e9));
                }
            }
        }
        assert!(shares.len() > 10_000, "{}", shares.len());
        shares.sort_by(f64::total_cmp);
        let median = shares[shares.len() / 2];
        assert!(
            (median - EXPERT_STREAM_SHARE).abs() < 0.03,
            "median share {median:.3}"
        );
    }
}
