//! An engine iteration timed from measured operator timings rather than a roofline.
//!
//! The iteration is what the engine launches: per transformer layer, four weight GEMMs (QKV,
//! attention output, the gated MLP's up/gate and down projections) over every token in the
//! step, attention for the prompt chunks (context attention) and for the decoding sequences
//! (generation attention), two all-reduces when the layer is split over `tp` cards (one when
//! attention and MLP run side by side, as Falcon's do), and a
//! few memory-bound element-wise passes; then the LM head over the sequences that sample a
//! token. Each of those is looked up in tables measured on the real card under the real
//! engine (NVIDIA AIConfigurator's collected timings, reduced in `hardware/operators/`) and
//! interpolated between the measured shapes. What the kernels do not show — the engine's
//! scheduling, input preparation and sampling — is the profile's per-step and per-sequence
//! overhead, added by the caller.
//!
//! Why per operator: a roofline with one efficiency per card is right for neither a 1-token
//! decode GEMM (launch-bound, far below peak bandwidth) nor a 16k-token prefill (near peak
//! FLOP/s), and the error moves with batch size, TP and dtype — exactly the axes a capacity
//! plan varies.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use super::fabric::Fabric;
use super::perf::StepWork;
use crate::catalog::operators::grid::Grid;
use crate::catalog::operators::{MoePhase, OperatorTables};
use crate::catalog::{ActivationScales, Dtype, Model, Parallelism};

/// The GEMM timing a dtype maps to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum GemmSource {
    /// A measured table of this name (`bf16`, `fp8`, `fp8_block`, `nvfp4`, …).
    Table(String),
    /// Weight-only quantisation without a measured table: the bf16 table with the weight
    /// reads scaled by `weight_ratio` (see [`OperatorStep::derived_gemm_us`]).
    WeightOnly { weight_ratio: f64 },
}

/// A layout's operator shapes and the tables that time them.
#[derive(Debug, Clone)]
pub struct OperatorStep {
    tables: Arc<OperatorTables>,
    gemm: GemmSource,
    /// The routed and shared experts' GEMMs (gpt-oss: MXFP4 experts beside BF16 attention).
    expert_gemm: GemmSource,
    layers: f64,
    hidden: f64,
    /// The attention projections' GEMMs on one card (the full-attention layers' of a hybrid
    /// model).
    projections: Projections,
    /// Share of the layers that attend over the KV cache (1 but for a hybrid model).
    full_share: f64,
    /// A hybrid model's linear-attention layers.
    linear: Option<LinearStep>,
    /// Gated MLP on one card: up+gate output width, down input width (the dense layers').
    up_n: f64,
    down_k: f64,
    /// Mixture of experts: experts and experts per token (1 and 1 for a dense model), one
    /// expert's widths on one card, experts every token also runs, and the share of layers
    /// whose FFN is the experts.
    experts: f64,
    experts_per_token: f64,
    expert_up_n: f64,
    expert_down_k: f64,
    /// Experts each card of a stage holds (all of them without expert parallelism).
    experts_per_rank: f64,
    /// A shared expert's widths on one card (split over the attention's `tp`, not the
    /// experts' group).
    shared_up_n: f64,
    shared_down_k: f64,
    shared_experts: f64,
    moe_layer_share: f64,
    /// All-reduces a dense layer ends with when split over cards
    /// (`Model::all_reduces_per_layer`: one when attention and MLP run side by side).
    all_reduces_per_layer: f64,
    /// Bytes per token of the all-reduce a full-attention layer's QK-norm adds across the
    /// attention's cards (`Model::qk_norm_all_reduce_bytes`).
    qk_norm_all_reduce_bytes: f64,
    vocab_n: f64,
    heads_per_card: f64,
    kv_heads_per_card: f64,
    /// Bytes one token's keys and values take in one KV head of one layer, in the layout's
    /// KV format: the floor of a decode step's attention is reading them all once.
    kv_head_token_bytes: f64,
    /// The model's head size over the measured one it is timed at.
    head_scale: f64,
    /// The attention tables' KV variants (`kv_bf16`, `kv_fp8`) for prefill and decode.
    context_kv: &'static str,
    generation_kv: &'static str,
    /// The grouped-query attention tables' variant names (`hd128.kv_bf16`).
    context_variant: String,
    generation_variant: String,
    /// Latent attention timed from its own measured tables (`context_mla`,
    /// `generation_mla`) rather than the grouped-query ones at a scaled head size.
    latent_tables: bool,
    /// Latent or sparse attention timed whole — projections, indexer and attention — from
    /// module tables (`mla_module_*`, `dsa_*`) that hold the model's shape; its projections
    /// are then not timed apart.
    module: Option<AttentionModule>,
    /// Sliding-window attention (gpt-oss): the window in tokens and the share of layers
    /// that use it.
    sliding: Option<(f64, f64)>,
    /// The measured fused-MoE curve this layout's expert layers read, when the tables hold
    /// one: expert format, model shape (`fp8_block`, `h7168.i2048.k8.e256`) and the experts'
    /// (tp, ep) it was measured at.
    moe_table: Option<MoeCurve>,
    /// The measured curves of the same experts behind an all-to-all dispatch (a card
    /// computes only the tokens sent to its experts), when the layout dispatches that way —
    /// attention replicas over expert-parallel cards — and the tables hold them: by phase,
    /// as the engine runs a step with prompt tokens and a decode-only step through different
    /// dispatch modes.
    moe_a2a: Option<MoeCurve>,
    /// The model's shape as the all-to-all sees it (`h7168.k8.e256`), when the layout
    /// dispatches its tokens to their experts' cards and the tables measured that exchange
    /// (`expert_exchange_*`: DeepEP under SGLang), for both phases.
    exchange: Option<String>,
    tp: u32,
    /// The whole layout: attention replicas divide each step's tokens, expert ranks the
    /// experts, pipeline stages hand activations on.
    parallel: Parallelism,
    /// The links past the measured all-reduce: all-to-all, across nodes, between stages.
    fabric: Option<Fabric>,
    /// Measured all-reduce groups of this many cards and more are set aside: the fabric's
    /// cards all sit behind a switch, and the measured box's larger groups crossed a slower
    /// path than its pairs.
    all_reduce_set_aside_from: Option<u32>,
    /// Card memory bandwidth, bytes/s, for the element-wise passes the tables do not hold.
    hbm_bytes_per_s: f64,
    /// Static FP8 activation scales skip the scale kernel the FP8 GEMM timings include.
    fp8_activation_scales: ActivationScales,
    /// Reads of each cached KV position per decode step, in reads of every KV head once (more
    /// where the engine has no grouped-query kernel for the shape).
    decode_kv_reads: f64,
    /// Per-layer GEMM and all-reduce µs by token count (and graph or eager all-reduce), and
    /// LM-head µs by sampled sequences: a prediction runs the same few hundred token counts
    /// through hundreds of thousands of steps, and each lookup interpolates several grids.
    memo: RefCell<Memo>,
}

/// A hybrid model's linear-attention layers on one card: their projections are GEMMs, their
/// convolution and delta rule kernels of their own, timed from the `gdn_*` tables.
#[derive(Debug, Clone)]
struct LinearStep {
    /// Their share of the layers.
    share: f64,
    /// Projection widths on one card: into the layer (queries, keys, values, output gate and
    /// two per-head gates) and out of it.
    in_n: f64,
    out_k: f64,
    /// The kernels' table variant (heads per card).
    variant: String,
}

/// The GEMMs that make a layer's queries, keys and values and project its output, on one
/// card.
#[derive(Debug, Clone, Copy)]
enum Projections {
    /// Grouped-query attention: one fused QKV projection, one output projection.
    Grouped { qkv_n: f64, o_k: f64 },
    /// Multi-head latent attention: the query and KV down-projections (not split over the
    /// cards), the query up-projection of this card's heads from the query rank (or straight
    /// from the hidden state), the KV up-projection, the output projection.
    Latent {
        down_n: f64,
        q_up_n: f64,
        q_rank: f64,
        kv_up_n: f64,
        kv_rank: f64,
        o_k: f64,
    },
}

/// Indexed by token count, per [`LayerKind`]: the counts are small integers, and a lookup is
/// a step's most frequent operation.
#[derive(Debug, Clone, Default)]
struct Memo {
    layer: [Vec<Option<(f64, f64)>>; 3],
    /// Layers whose busiest attention replica holds more than an even share of the tokens
    /// (a prompt lives on one replica), by (kind, tokens, the busiest replica's tokens).
    uneven_layer: HashMap<(usize, usize, usize), (f64, f64)>,
    lm_head: Vec<Option<f64>>,
}

/// What a layer's timing depends on beyond its tokens: whether the step holds prompt tokens
/// and its experts are dispatched in a mode of their own for them, and whether its
/// all-reduce runs inside a CUDA graph.
#[derive(Debug, Clone, Copy, PartialEq)]
enum LayerKind {
    Prefill,
    DecodeEager,
    DecodeGraph,
}

impl LayerKind {
    fn of(prefill: bool, graph: bool) -> LayerKind {
        match (prefill, graph) {
            (true, _) => LayerKind::Prefill,
            (false, false) => LayerKind::DecodeEager,
            (false, true) => LayerKind::DecodeGraph,
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    fn graph(self) -> bool {
        self == LayerKind::DecodeGraph
    }

    fn phase(self) -> MoePhase {
        match self {
            LayerKind::Prefill => MoePhase::Prefill,
            _ => MoePhase::Decode,
        }
    }
}

fn remembered<T: Copy>(table: &[Option<T>], key: usize) -> Option<T> {
    table.get(key).copied().flatten()
}

fn remember<T: Copy>(table: &mut Vec<Option<T>>, key: usize, value: T) {
    if table.len() <= key {
        table.resize(key + 1, None);
    }
    table[key] = Some(value);
}

/// Where one iteration's kernel time goes, seconds (overhead excluded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct OperatorTime {
    pub gemm: f64,
    pub attention: f64,
    pub communication: f64,
    pub other: f64,
}

impl OperatorTime {
    pub fn total(&self) -> f64 {
        self.gemm + self.attention + self.communication + self.other
    }
}

/// Why a layout cannot be timed from the tables it was given.
#[derive(Debug, Clone, PartialEq)]
pub struct NoOperatorData(pub String);

impl OperatorStep {
    /// The operator model of `model` laid out as `parallel`, weights in `dtype`, KV cache in
    /// `kv_dtype`, or why these tables cannot time it (then the roofline is used).
    pub fn new(
        tables: Arc<OperatorTables>,
        model: &Model,
        parallel: &Parallelism,
        dtype: Dtype,
        expert_dtype: Dtype,
        kv_dtype: Dtype,
        hbm_bandwidth_gbs: f64,
    ) -> Result<OperatorStep, NoOperatorData> {
        let gemm = gemm_source(&tables, dtype)?;
        let wanted = match kv_dtype {
            Dtype::Fp8 | Dtype::Int8 | Dtype::Int4 | Dtype::Fp4 => "kv_fp8",
            _ => "kv_bf16",
        };
        // Attention was measured at head sizes 64 and 128; another size is timed at the
        // nearest and scaled by its width (FLOPs and KV bytes grow with it).
        let head_dim = if model.head_dim <= 96 { 64 } else { 128 };
        let head_scale = f64::from(model.head_dim) / f64::from(head_dim);
        let tp = parallel.tp.max(1);
        let tpf = f64::from(tp);
        let heads = f64::from(model.heads);
        let kv_heads = f64::from(model.kv_heads);
        let head = f64::from(model.head_dim);
        let kv_heads_per_card = (kv_heads / tpf).max(1.0);
        // An engine whose tables lack the FP8-KV variant of one kind of attention (SGLang
        // measured FP8 KV for decode only) is timed with its 16-bit variant there: prefill
        // attention is compute-bound, its KV format matters little.
        let pick = |has: &dyn Fn(&str) -> bool| -> Option<&'static str> {
            [wanted, "kv_bf16"].into_iter().find(|name| has(name))
        };
        let context_kv = pick(&|kv| {
            tables
                .context_attention_us(head_dim, kv, 1.0, 128.0)
                .is_some()
        });
        let generation_kv = pick(&|kv| {
            tables
                .generation_attention_us(head_dim, kv, 1.0, 128.0)
                .is_some()
        });
        // Latent attention has tables of its own in newer collections: used where both
        // phases are there.
        let latent_kv = model.latent().and_then(|_| {
            let context = pick(&|kv| tables.context_mla_us(kv, 16.0, 1.0, 128.0).is_some())?;
            let generation = pick(&|kv| tables.generation_mla_us(kv, 16.0, 1.0, 128.0).is_some())?;
            Some((context, generation))
        });
        let latent_tables = latent_kv.is_some();
        let module = attention_module(&tables, model, dtype);
        let (context_kv, generation_kv) = match latent_kv {
            Some((context, generation)) => (Some(context), Some(generation)),
            None => (context_kv, generation_kv),
        };
        let (Some(context_kv), Some(generation_kv)) = (context_kv, generation_kv) else {
            return Err(NoOperatorData(format!(
                "{} {} has no attention timings for head dim {head_dim}",
                tables.system, tables.engine
            )));
        };
        let (experts, experts_per_token) = match (model.experts, model.experts_per_token) {
            (Some(e), Some(k)) if e > 1 && k >= 1 => (f64::from(e), f64::from(k)),
            _ => (1.0, 1.0),
        };
        let gates = if model.gated_mlp() { 2.0 } else { 1.0 };
        // Without its own expert width, a mixture's `intermediate_size` is the expert's
        // (Mixtral); with one, `intermediate_size` is the dense layers'.
        let expert_width = f64::from(
            model
                .expert_intermediate_size
                .unwrap_or(model.intermediate_size),
        );
        let moe_tp = f64::from(parallel.moe_tp());
        let hidden = f64::from(model.hidden_size);
        // A gated output needs a second query-wide projection (the gate).
        let query_projections = if model.gated_attention_output() {
            2.0
        } else {
            1.0
        };
        let projections = match model.latent() {
            Some(latent) => Projections::Latent {
                down_n: latent.down_width(),
                q_up_n: heads / tpf * latent.query_head(),
                q_rank: latent.q_rank.unwrap_or(hidden),
                kv_up_n: heads / tpf * latent.kv_head(),
                kv_rank: latent.kv_rank,
                o_k: heads / tpf * latent.value,
            },
            None => Projections::Grouped {
                qkv_n: (query_projections * heads + 2.0 * kv_heads) * head / tpf,
                o_k: heads * head / tpf,
            },
        };
        let linear = match model.linear_attention {
            Some(shape) => {
                let (kh, vh) = shape.heads_per_card(tp);
                let variant = crate::catalog::operators::linear_attention::variant(
                    kh,
                    vh,
                    shape.key_head_dim,
                    shape.value_head_dim,
                );
                if tables.gdn_context_us(&variant, 1.0).is_none()
                    || tables.gdn_generation_us(&variant, 1.0).is_none()
                {
                    return Err(NoOperatorData(format!(
                        "{} {} has no linear-attention (Gated DeltaNet) timings for {variant}",
                        tables.system, tables.engine
                    )));
                }
                Some(LinearStep {
                    share: f64::from(shape.layers.min(model.layers))
                        / f64::from(model.layers.max(1)),
                    in_n: shape.in_width() / tpf,
                    out_k: shape.out_width() / tpf,
                    variant,
                })
            }
            None => None,
        };
        // Experts in a format of their own (the memory fit decides which): measured where
        // the card runs it natively, else as weight-only (Hopper reads MXFP4 experts and
        // multiplies in 16 bits).
        let expert_gemm = if expert_dtype == dtype {
            gemm.clone()
        } else {
            gemm_source(&tables, expert_dtype).unwrap_or(GemmSource::WeightOnly {
                weight_ratio: expert_dtype.bytes() / Dtype::Bf16.bytes(),
            })
        };
        let (moe_table, moe_a2a) = match model.moe_shape() {
            Some(shape) => (
                moe_variant(&tables, expert_dtype, model, parallel, &shape),
                moe_a2a_variant(&tables, expert_dtype, model, parallel, &shape),
            ),
            None => (None, None),
        };
        let exchange = model
            .moe_shape()
            .and_then(|shape| exchange_variant(&tables, parallel, expert_dtype, &shape));
        let sliding = match (model.sliding_window, model.sliding_layers) {
            (Some(window), Some(layers)) if window > 0 && layers > 0 => Some((
                f64::from(window),
                f64::from(layers.min(model.layers)) / f64::from(model.layers.max(1)),
            )),
            _ => None,
        };
        Ok(OperatorStep {
            gemm,
            expert_gemm,
            sliding,
            latent_tables,
            module,
            moe_table,
            moe_a2a,
            exchange,
            layers: f64::from(model.layers),
            hidden,
            projections,
            full_share: f64::from(model.full_attention_layers()) / f64::from(model.layers.max(1)),
            linear,
            up_n: gates * f64::from(model.intermediate_size) / tpf,
            down_k: f64::from(model.intermediate_size) / tpf,
            experts,
            experts_per_token,
            expert_up_n: gates * expert_width / moe_tp,
            expert_down_k: expert_width / moe_tp,
            experts_per_rank: experts / f64::from(parallel.ep.max(1)),
            shared_up_n: gates * expert_width / tpf,
            shared_down_k: expert_width / tpf,
            shared_experts: f64::from(model.shared_experts.unwrap_or(0)),
            moe_layer_share: if experts > 1.0 {
                f64::from(model.moe_layers()) / f64::from(model.layers.max(1))
            } else {
                0.0
            },
            all_reduces_per_layer: model.all_reduces_per_layer(),
            qk_norm_all_reduce_bytes: model.qk_norm_all_reduce_bytes(),
            vocab_n: f64::from(model.vocab_size) / tpf,
            heads_per_card: heads / tpf,
            kv_heads_per_card,
            kv_head_token_bytes: 2.0 * head * kv_dtype.bytes(),
            head_scale,
            context_kv,
            generation_kv,
            context_variant: format!("hd{head_dim}.{context_kv}"),
            generation_variant: format!("hd{head_dim}.{generation_kv}"),
            tp,
            parallel: *parallel,
            fabric: None,
            all_reduce_set_aside_from: None,
            hbm_bytes_per_s: hbm_bandwidth_gbs * 1e9,
            fp8_activation_scales: ActivationScales::Dynamic,
            decode_kv_reads: 1.0,
            tables,
            memo: RefCell::new(Memo::default()),
        })
    }

    /// The links the layout's all-to-all, cross-node and pipeline traffic crosses (without
    /// them: one domain holding every card, at the fallback all-reduce's link).
    pub fn with_fabric(mut self, fabric: Fabric) -> OperatorStep {
        self.all_reduce_set_aside_from = if fabric.switched == Some(true) {
            self.tables.all_reduce_slower_from()
        } else {
            None
        };
        self.fabric = Some(fabric);
        *self.memo.borrow_mut() = Memo::default();
        self
    }

    fn fabric(&self) -> Fabric {
        self.fabric.unwrap_or(Fabric::single_domain(
            self.parallel.cards(),
            FALLBACK_LINK_GBS,
            10.0,
        ))
    }

    /// The same layout served with `scales` for FP8 activations.
    pub fn with_fp8_activation_scales(mut self, scales: ActivationScales) -> OperatorStep {
        if scales != self.fp8_activation_scales {
            self.fp8_activation_scales = scales;
            *self.memo.borrow_mut() = Memo::default();
        }
        self
    }

    /// The same layout decoded by a kernel that reads each cached position `reads` times (in
    /// reads of every KV head once): the table is looked up at as many KV-head streams.
    pub fn with_decode_kv_reads(mut self, reads: f64) -> OperatorStep {
        let reads = reads.max(1.0);
        if reads != self.decode_kv_reads {
            self.decode_kv_reads = reads;
            *self.memo.borrow_mut() = Memo::default();
        }
        self
    }

    pub fn tables(&self) -> &OperatorTables {
        &self.tables
    }

    /// The expert-parallel width whose all-to-all curves time the experts, when they do.
    pub fn dispatched_experts(&self) -> Option<u32> {
        self.moe_a2a.as_ref().map(|curve| curve.ep)
    }

    pub fn gemm_source(&self) -> &GemmSource {
        &self.gemm
    }

    /// One GEMM of `m` tokens into an `n`-wide output from a `k`-wide input, µs.
    fn gemm_us(&self, m: f64, n: f64, k: f64) -> f64 {
        self.gemm_from(&self.gemm, m, n, k)
    }

    /// The same through the experts' weights (their own format where the checkpoint
    /// quantises only them).
    fn expert_gemm_us(&self, m: f64, n: f64, k: f64) -> f64 {
        self.gemm_from(&self.expert_gemm, m, n, k)
    }

    fn gemm_from(&self, source: &GemmSource, m: f64, n: f64, k: f64) -> f64 {
        match source {
            GemmSource::Table(name) => {
                let measured = self.tables.gemm_us(name, m, n, k).unwrap_or(0.0);
                match self.skipped_scale_us(name, m, k) {
                    // Never faster than reading its weights and activations once.
                    Some(skipped) => (measured - skipped).max(self.fp8_bytes_us(m, n, k)),
                    None => measured,
                }
            }
            GemmSource::WeightOnly { weight_ratio } => self.derived_gemm_us(*weight_ratio, m, n, k),
        }
    }

    /// The activation-scale kernel an FP8 GEMM of these tables includes and this engine
    /// skips (static scales), µs; `None` when nothing is skipped or the tables lack it.
    fn skipped_scale_us(&self, table: &str, m: f64, k: f64) -> Option<f64> {
        (table == "fp8" && self.fp8_activation_scales == ActivationScales::Static)
            .then(|| self.tables.quantize_us("fp8", "compute_scale", m, k))
            .flatten()
    }

    /// Reading an `n`×`k` FP8 weight (one byte per element) and the 16-bit activations
    /// once at the card's bandwidth, µs: the floor no FP8 GEMM beats.
    fn fp8_bytes_us(&self, m: f64, n: f64, k: f64) -> f64 {
        (n * k + 2.0 * m * (n + k)) / self.hbm_bytes_per_s * 1e6
    }

    /// A weight-only quantised GEMM (AWQ/GPTQ int4, int8) from the bf16 table: at one token a
    /// GEMM is a read of its weights, so the quantised one reads `ratio` of the bytes; as the
    /// tokens grow the matmul itself dominates, runs at bf16 speed after dequantisation, and
    /// the weight-read saving stays a fixed amount. Hence
    /// `max(t₁·r, t(m) − t₁·(1 − r))` with t₁ the bf16 time of one token: never faster than
    /// its own weight read, never slower than bf16.
    fn derived_gemm_us(&self, ratio: f64, m: f64, n: f64, k: f64) -> f64 {
        let bf16 = |m: f64| self.tables.gemm_us("bf16", m, n, k).unwrap_or(0.0);
        let one = bf16(1.0);
        (one * ratio).max(bf16(m) - one * (1.0 - ratio))
    }

    /// One layer's weight GEMMs and communication for `m` tokens of the whole instance, µs
    /// (remembered by `m`). Attention replicas share the tokens evenly; the experts see all
    /// of them.
    fn layer_us(&self, m: f64, local: f64, kind: LayerKind) -> (f64, f64) {
        let graph = kind.graph();
        let key = m.round().max(1.0) as usize;
        let even = local <= self.replica_tokens(m);
        let local = local.max(self.replica_tokens(m));
        let uneven_key = (kind.index(), key, local.round().max(1.0) as usize);
        if even {
            if let Some(known) = remembered(&self.memo.borrow().layer[kind.index()], key) {
                return known;
            }
        } else if let Some(&known) = self.memo.borrow().uneven_layer.get(&uneven_key) {
            return known;
        }
        // Timed inside the attention module where it is.
        let full = if self.module.is_some() {
            0.0
        } else {
            self.projections_us(local)
        };
        // An average layer's attention projections: a hybrid model's layers in their shares.
        let mut gemm = self.full_share * full
            + self.linear.as_ref().map_or(0.0, |linear| {
                linear.share
                    * (self.gemm_us(local, linear.in_n, self.hidden)
                        + self.gemm_us(local, self.hidden, linear.out_k))
            });
        // The FFN of an average layer: dense layers' and expert layers' in their shares.
        let dense = self.gemm_us(local, self.up_n, self.hidden)
            + self.gemm_us(local, self.hidden, self.down_k);
        let experts = self.experts > 1.0;
        gemm += if experts {
            (1.0 - self.moe_layer_share) * dense
                + self.moe_layer_share * self.experts_us(m, local, kind.phase())
        } else {
            dense
        };
        // After attention and after a dense FFN the replica's cards all-reduce; after the
        // experts too while the tokens are replicated over the stage (no attention replicas:
        // each card runs its experts on every token and the sums meet in the all-reduce),
        // else the tokens go to their experts' cards and back (all-to-all). A dense layer
        // whose attention and MLP run side by side reduces their sum once.
        let all_reduce = self.all_reduce_us(local * self.hidden * 2.0, graph);
        // A QK-norm over all heads together sums its squares across the cards first.
        let qk_norm = if self.qk_norm_all_reduce_bytes > 0.0 {
            self.full_share * self.all_reduce_us(local * self.qk_norm_all_reduce_bytes, graph)
        } else {
            0.0
        };
        let communication = qk_norm
            + if !experts {
                self.all_reduces_per_layer * all_reduce
            } else if self.parallel.dp > 1 {
                all_reduce
                    + (1.0 - self.moe_layer_share) * all_reduce
                    + self.moe_layer_share * self.expert_exchange_us(m, local, kind.phase())
            } else {
                2.0 * all_reduce
            };
        let mut memo = self.memo.borrow_mut();
        if even {
            remember(&mut memo.layer[kind.index()], key, (gemm, communication));
        } else {
            memo.uneven_layer.insert(uneven_key, (gemm, communication));
        }
        (gemm, communication)
    }

    /// One full-attention layer's projection GEMMs for `local` tokens on one card, µs.
    fn projections_us(&self, local: f64) -> f64 {
        match self.projections {
            Projections::Grouped { qkv_n, o_k } => {
                self.gemm_us(local, qkv_n, self.hidden) + self.gemm_us(local, self.hidden, o_k)
            }
            Projections::Latent {
                down_n,
                q_up_n,
                q_rank,
                kv_up_n,
                kv_rank,
                o_k,
            } => {
                self.gemm_us(local, down_n, self.hidden)
                    + self.gemm_us(local, q_up_n, q_rank)
                    + self.gemm_us(local, kv_up_n, kv_rank)
                    + self.gemm_us(local, self.hidden, o_k)
            }
        }
    }

    /// Tokens one attention replica processes out of the instance's `m`, shared evenly.
    fn replica_tokens(&self, m: f64) -> f64 {
        (m / f64::from(self.parallel.dp.max(1))).max(1.0)
    }

    /// Tokens of the step's busiest attention replica, `m` being the instance's. Each
    /// request lives on one replica, so a prompt chunk is not split over them: with fewer
    /// chunks than replicas, one replica runs a whole chunk through its attention
    /// projections and dense layers while others have only their decodes, and the step
    /// waits for it. (Shared evenly, one 8 192-token prompt on eight replicas came out as
    /// eight 1 024-token ones.) Decodes are taken as spread evenly.
    fn busiest_replica_tokens(&self, work: &StepWork, m: f64) -> f64 {
        let dp = f64::from(self.parallel.dp.max(1));
        let even = self.replica_tokens(m);
        if dp <= 1.0 || work.prefill_chunks <= 0.0 {
            return even;
        }
        let chunk = work.prefill_tokens / work.prefill_chunks;
        let busiest =
            (work.prefill_chunks / dp).ceil() * chunk + (m - work.prefill_tokens).max(0.0) / dp;
        busiest.max(even)
    }

    /// An all-reduce of `bytes` over the attention's `tp` cards, µs: measured inside one
    /// scale-up domain, the network's part added for a group that spans domains. On a node
    /// shape whose cards all sit behind a switch, measured groups that crossed a slower path
    /// than two cards do (`OperatorTables::all_reduce_slower_from`: AIConfigurator's L40S
    /// box) are set aside, and the group is scaled from the largest measured one that did not,
    /// as it is past the measured sizes.
    fn all_reduce_us(&self, bytes: f64, graph: bool) -> f64 {
        if self.tp <= 1 {
            return 0.0;
        }
        let fabric = self.fabric();
        let kept = |cards: u32| {
            self.all_reduce_set_aside_from
                .is_none_or(|from| cards < from)
        };
        let inside = self.tp.min(fabric.domain_cards.max(1));
        // The engine's own all-reduce as it runs in this step (vLLM and SGLang measured
        // theirs captured in a graph and eager apart; TensorRT-LLM's one `custom` kernel
        // serves both), else NCCL's.
        let variant = if graph { "graph" } else { "eager" };
        let variants = [variant, "custom", "graph", "eager", "nccl"];
        let at = |cards: u32, bytes: f64| {
            variants
                .iter()
                .find_map(|v| self.tables.all_reduce_us(v, cards, bytes))
        };
        let measured = if inside > 1 {
            at(inside, bytes)
                .filter(|_| kept(inside))
                .or_else(|| {
                    // Not measured at this many cards (or set aside): from the most cards
                    // measured below it.
                    (2..inside).rev().filter(|&c| kept(c)).find_map(|fewer| {
                        let small = at(fewer, 1.0)?;
                        let here = at(fewer, bytes)?;
                        Some(scaled_all_reduce_us(fewer, inside, small, here))
                    })
                })
                .unwrap_or_else(|| fallback_all_reduce_us(inside, bytes))
        } else {
            0.0
        };
        measured + fabric.cross_domain_all_reduce_s(self.tp, bytes) * 1e6
    }

    /// Sending each of the instance's `m` tokens to the cards of its experts and the results
    /// back (two all-to-alls over a stage's cards), µs. Where the tables measured the
    /// exchange (DeepEP's kernels, by the tokens a card sends), from them — scaled from the
    /// measured width to the layout's by what the link model says the two move; else from
    /// the link: FP8 activations out when the layout runs 8-bit or narrower (DeepEP and the
    /// engines' FP8 dispatch), 16-bit results back.
    fn expert_exchange_us(&self, m: f64, local: f64, phase: MoePhase) -> f64 {
        let ranks = self.parallel.stage_cards();
        // The busiest replica's cards send the most; the exchange waits for them.
        let tokens = (m / f64::from(ranks))
            .max(local * f64::from(self.parallel.dp.max(1)) / f64::from(ranks));
        if let Some(shape) = &self.exchange {
            if let Some((measured, us)) = self.tables.exchange_us(phase, shape, ranks, tokens) {
                let moved = |cards: u32| {
                    let bytes = tokens * self.ranks_reached(cards) * self.hidden * 1.5;
                    self.fabric().all_to_all_s(cards, bytes)
                };
                return if measured == ranks {
                    us
                } else {
                    us * moved(ranks) / moved(measured)
                };
            }
        }
        let per_rank = tokens * self.experts_per_token * self.hidden;
        let out = if matches!(self.gemm, GemmSource::Table(ref t) if t != "bf16") {
            1.0
        } else {
            2.0
        };
        let fabric = self.fabric();
        (fabric.all_to_all_s(ranks, per_rank * out) + fabric.all_to_all_s(ranks, per_rank * 2.0))
            * 1e6
    }

    /// Cards a token's experts sit on, expected, with the experts spread evenly over `cards`
    /// and each token choosing `experts_per_token` of them at random: an all-to-all sends a
    /// token once to each such card (DeepEP and the engines' dispatch group a token's experts
    /// by card), so the bytes grow with this, not with the experts chosen.
    fn ranks_reached(&self, cards: u32) -> f64 {
        let cards = f64::from(cards.max(1));
        let elsewhere = self.experts - self.experts / cards;
        let mut none_here = 1.0;
        let mut i = 0.0;
        while i < self.experts_per_token {
            none_here *= ((elsewhere - i) / (self.experts - i)).max(0.0);
            i += 1.0;
        }
        cards * (1.0 - none_here)
    }

    /// One expert layer's FFN for `m` tokens, µs. Engines run the routed experts as one
    /// fused kernel (vLLM's and SGLang's fused MoE, TensorRT-LLM's grouped GEMM), so the
    /// time is that of all routed tokens' FLOPs through one expert, or that of streaming the
    /// weights of every expert the tokens touch, whichever is longer. (Timing each touched
    /// expert as a GEMM of its own charged a launch per expert: 256-expert models came out
    /// several times slow.) With expert parallelism each card holds `E/ep` experts and gets
    /// `1/ep` of the routed tokens and of the touched experts (routing assumed balanced).
    /// Shared experts run for every token of the card's attention replica (`local`). Where
    /// the layout dispatches tokens by an all-to-all and the tables measured that path, its
    /// curve for the step's `phase` times the routed experts instead of the fused-MoE one.
    fn experts_us(&self, m: f64, local: f64, phase: MoePhase) -> f64 {
        let shared = self.expert_gemm_us(local, self.shared_up_n, self.hidden)
            + self.expert_gemm_us(local, self.hidden, self.shared_down_k);
        let dispatched = self
            .moe_a2a
            .as_ref()
            .and_then(|curve| self.tables.moe_a2a_at(phase, &curve.variant, curve.ep, m));
        let measured = dispatched.or_else(|| {
            self.moe_table
                .as_ref()
                .and_then(|curve| self.tables.moe_at(&curve.variant, curve.tp, curve.ep, m))
        });
        if let Some(measured) = measured {
            return measured + self.shared_experts * shared;
        }
        let ranks = self.experts / self.experts_per_rank.max(1.0);
        let routed = m * self.experts_per_token / ranks;
        // Expected experts touched by m tokens choosing k of E, this card's share.
        let touched =
            self.experts * (1.0 - (1.0 - self.experts_per_token / self.experts).powf(m)) / ranks;
        let through_one = |tokens: f64| {
            self.expert_gemm_us(tokens, self.expert_up_n, self.hidden)
                + self.expert_gemm_us(tokens, self.hidden, self.expert_down_k)
        };
        let compute = through_one(routed);
        // Few tokens: the kernel streams every touched expert's weights, as one GEMM as
        // wide as all of them does (timed from the same tables).
        let touched = touched.max(1.0);
        let reads = self.expert_gemm_us(1.0, self.expert_up_n * touched, self.hidden)
            + self.expert_gemm_us(1.0, self.hidden, self.expert_down_k * touched);
        compute.max(reads) + self.shared_experts * shared
    }

    /// The LM head over the sequences one attention replica samples, µs, remembered by the
    /// instance's `sequences` sampling (a whole number): keyed by the replica's share rounded,
    /// the first share met stood in for its neighbours, so a step's time depended on which
    /// steps came before it.
    pub(crate) fn lm_head_us(&self, sequences: f64) -> f64 {
        let key = sequences.round().max(0.0) as usize;
        if let Some(known) = remembered(&self.memo.borrow().lm_head, key) {
            return known;
        }
        let sampled = (sequences / f64::from(self.parallel.dp.max(1))).max(1.0);
        let value = self
            .tables
            .gemm_us("bf16", sampled, self.vocab_n, self.hidden)
            .unwrap_or(0.0);
        remember(&mut self.memo.borrow_mut().lm_head, key, value);
        value
    }

    /// Kernel time of one iteration on each card of the instance (they run in lockstep).
    pub fn time(&self, work: &StepWork, graph_batch: Option<f64>) -> OperatorTime {
        // A decode-only step that runs as a captured CUDA graph is padded to the graph's size.
        let m = match graph_batch {
            Some(padded) if work.prefill_tokens == 0.0 => padded.max(work.tokens),
            _ => work.tokens,
        };
        if m <= 0.0 {
            return OperatorTime::default();
        }
        let graph = graph_batch.is_some() && work.prefill_tokens == 0.0;
        let local = self.busiest_replica_tokens(work, m);
        // A prompt step times its layers apart only where its experts' dispatch mode differs
        // (all-to-all curves per phase); elsewhere it shares the decode steps' memo.
        let prefill =
            (self.moe_a2a.is_some() || self.exchange.is_some()) && work.prefill_tokens > 0.0;
        let kind = LayerKind::of(prefill, graph);
        let (gemm, communication) = self.layer_us(m, local, kind);
        // Attention replicas share the sequences; a prompt chunk runs on one of them, and the
        // step waits for the replica that has one.
        let dp = f64::from(self.parallel.dp.max(1));

        let mut attention = 0.0;
        if work.prefill_chunks > 0.0 {
            // The step's prompt chunks as a batch of equal chunks of their mean length. A chunk
            // of n tokens after o cached ones computes the last n rows of the attention of an
            // (o + n)-token prompt: its share of that prompt's query–key pairs, at that
            // prompt's kernel efficiency — and never less than n fresh tokens take.
            let chunks = (work.prefill_chunks / dp).max(1.0);
            let batch_heads = chunks * self.heads_per_card;
            let mean = work.prefill_tokens / work.prefill_chunks;
            let full = (work.prefill_tokens + work.prefill_cached) / work.prefill_chunks;
            let at = |isl: f64| {
                if let Some(module) = &self.module {
                    Some(module.us(0, self.heads_per_card, chunks, isl) / self.head_scale)
                } else if self.latent_tables {
                    self.tables
                        .context_mla_us(self.context_kv, self.heads_per_card, chunks, isl)
                        .map(|us| us / self.head_scale)
                } else {
                    self.tables
                        .context_attention_at(&self.context_variant, batch_heads, isl)
                }
                .unwrap_or(0.0)
            };
            let fresh = at(mean);
            let share = work.prefill_pairs / (work.prefill_chunks * full * (full + 1.0) / 2.0);
            let whole = if full > mean {
                fresh.max(at(full) * share)
            } else {
                fresh
            };
            // A sliding-window layer's chunk attends at most the window behind each token:
            // a chunk longer than the window costs that many windows' worth.
            attention += match self.sliding {
                Some((window, layers)) => {
                    let windowed = if mean > window {
                        at(window) * mean / window
                    } else {
                        at(mean.max(full.min(window))).min(whole).max(fresh)
                    };
                    (1.0 - layers) * whole + layers * windowed
                }
                None => whole,
            };
        }
        if work.decode_sequences > 0.0 {
            let mean_len = work.decode_positions / work.decode_sequences;
            let sequences = (work.decode_sequences / dp).max(1.0);
            // Latent attention over an FP8 KV cache is timed no slower than over the 16-bit
            // cache of the same shape. It reads half the bytes, and across the collection it
            // costs 0.55-0.8 of the 16-bit kernel in the median cell — except SGLang's on H100
            // and H200, measured at 4.4-5.0 times it: a fallback kernel the deployments do not
            // show (SGLang's DeepSeek-V3 on eight H200s at 32 users decodes at 23.3 ms a token
            // with 1 024-token outputs and 22.1 ms with 8 192, where the table's FP8 kernel
            // would add 15 ms a step at the longer context). Grouped-query tables keep their
            // FP8 timings: where those are slower it is a few cells, not a whole kernel.
            let latent = |kv: &str, mean_len: f64| {
                self.tables
                    .generation_mla_us(kv, self.heads_per_card, sequences, mean_len)
                    .map(|us| us / self.head_scale)
            };
            let decode = |mean_len: f64| {
                if let Some(module) = &self.module {
                    Some(module.us(1, self.heads_per_card, sequences, mean_len) / self.head_scale)
                } else if self.latent_tables {
                    let wanted = latent(self.generation_kv, mean_len);
                    let bf16 = (self.generation_kv != "kv_bf16")
                        .then(|| latent("kv_bf16", mean_len))
                        .flatten();
                    match (wanted, bf16) {
                        (Some(wanted), Some(bf16)) => Some(wanted.min(bf16)),
                        (wanted, bf16) => wanted.or(bf16),
                    }
                } else {
                    // Never faster than reading every cached key and value once at the card's
                    // bandwidth (in the measured head size the table is scaled from).
                    // AIConfigurator's A100 TensorRT-LLM table runs under that floor over a
                    // wide range (512 sequence-heads of 4 096 tokens: 341 µs, 3.1 TB/s from a
                    // 2.0 TB/s card; its vLLM and SGLang tables, 703 and 869 µs), so reading
                    // it as measured took long-context decode steps on A100 too short.
                    let batch_kv_heads = sequences * self.kv_heads_per_card * self.decode_kv_reads;
                    let floor = batch_kv_heads * mean_len * self.kv_head_token_bytes
                        / self.hbm_bytes_per_s
                        * 1e6
                        / self.head_scale;
                    self.tables
                        .generation_attention_at(&self.generation_variant, batch_kv_heads, mean_len)
                        .map(|us| us.max(floor))
                }
                .unwrap_or(0.0)
            };
            attention += match self.sliding {
                Some((window, layers)) => {
                    (1.0 - layers) * decode(mean_len) + layers * decode(mean_len.min(window))
                }
                None => decode(mean_len),
            };
        }

        // A hybrid model's linear-attention layers run their own kernels instead: over the
        // step's prompt tokens (on the busiest replica) and over its decoding sequences.
        let linear_kernels = self.linear.as_ref().map_or(0.0, |linear| {
            let mut us = 0.0;
            if work.prefill_tokens > 0.0 {
                let replicas = dp.min(work.prefill_chunks.max(1.0));
                let tokens = (work.prefill_tokens / replicas).max(1.0);
                us += self
                    .tables
                    .gdn_context_us(&linear.variant, tokens)
                    .unwrap_or(0.0);
            }
            if work.decode_sequences > 0.0 {
                let sequences = (work.decode_sequences / dp).max(1.0);
                us += self
                    .tables
                    .gdn_generation_us(&linear.variant, sequences)
                    .unwrap_or(0.0);
            }
            linear.share * us
        });

        // Norms, rotary embedding, activation and residual adds: a handful of passes over
        // the activations, memory-bound and mostly fused; about six hidden-wide and two
        // MLP-wide reads and writes of 2 bytes per token and layer.
        let elementwise_bytes = local * (6.0 * self.hidden + 2.0 * self.down_k) * 2.0 * 2.0;
        let other_per_layer = elementwise_bytes / (0.8 * self.hbm_bytes_per_s) * 1e6;

        // The LM head runs over the sequences that sample a token (lm_head stays bf16).
        let lm_head =
            self.lm_head_us(work.decode_sequences + work.verify_tokens + work.prefill_chunks);
        // Pipeline stages hand the step's activations on, one after the other.
        let stages = self.parallel.pp.max(1);
        let handoffs = if stages > 1 {
            f64::from(stages - 1)
                * self
                    .fabric()
                    .stage_send_s(self.parallel.stage_cards(), local * self.hidden * 2.0)
        } else {
            0.0
        };

        OperatorTime {
            gemm: (gemm * self.layers + lm_head) * 1e-6,
            attention: (attention * self.head_scale * self.full_share + linear_kernels)
                * self.layers
                * 1e-6,
            communication: communication * self.layers * 1e-6 + handoffs,
            other: other_per_layer * self.layers * 1e-6,
        }
    }
}

/// The scale-up link assumed when a step model was given no fabric, GB/s both directions.
const FALLBACK_LINK_GBS: f64 = 300.0;

/// An all-reduce over `cards` inside one switched scale-up domain, from one measured over
/// `fewer` cards of the same domain: `small_us` the measured time of the smallest message
/// (its latency) and `measured_us` that of this message. The latency grows with the steps
/// of the reduction (log₂ of the cards), the bytes each card moves with 2(n−1)/n of the
/// message at the same per-card link rate. AIConfigurator measured GB200's and GB300's
/// all-reduce at 2 and 4 GPUs only, while their NVLink domain holds 72; the generic fallback
/// below took a TP 8 decode step of DeepSeek-V3 on GB200 to 7 ms of all-reduce where the
/// same layout on B200, measured, takes 0.7 ms.
fn scaled_all_reduce_us(fewer: u32, cards: u32, small_us: f64, measured_us: f64) -> f64 {
    let (m, n) = (f64::from(fewer), f64::from(cards));
    let latency = small_us.min(measured_us);
    let moving = (measured_us - latency).max(0.0);
    latency * n.log2() / m.log2() + moving * ((n - 1.0) / n) / ((m - 1.0) / m)
}

/// An all-reduce the tables do not hold (a TP size they were not measured at): ring
/// all-reduce over NVLink-class links, 10 µs per hop plus 2(tp−1)/tp of the message at
/// 150 GB/s — only used when no table matches, and the prediction says so through its basis.
fn fallback_all_reduce_us(tp: u32, bytes: f64) -> f64 {
    let tp = f64::from(tp);
    2.0 * tp.log2() * 10.0 + 2.0 * (tp - 1.0) / tp * bytes / 150e9 * 1e6
}

/// A measured fused-MoE curve: expert format, model shape and the experts' layout.
#[derive(Debug, Clone, PartialEq)]
struct MoeCurve {
    dtype: String,
    shape: String,
    /// `<dtype>.<shape>`, the tables' name for the curve, named once.
    variant: String,
    tp: u32,
    ep: u32,
}

/// A family of module tables, the variant of it that times a model's attention, and its two
/// grids, held so that an iteration reads them without a lookup.
#[derive(Debug, Clone, PartialEq)]
struct AttentionModule {
    /// The prompt's and the decode step's tables (`dsa_context`, `dsa_generation`).
    tables: [&'static str; 2],
    variant: String,
    grids: [Grid; 2],
}

impl AttentionModule {
    /// One layer's attention block in `phase` (0: a prompt step, 1: a decode step), µs.
    fn us(&self, phase: usize, heads: f64, batch: f64, length: f64) -> f64 {
        self.grids[phase].at_monotone(&[heads, batch, length])
    }
}

/// The module tables that time `model`'s attention whole with weights in `dtype`, when the
/// tables hold its shape (`attention_module::shape_of`): FP8 projections for an FP8
/// deployment, 16-bit ones for a 16-bit or FP4 one (NVIDIA's NVFP4 checkpoints keep attention
/// in BF16), whichever was collected otherwise; an FP8 cache where collected, else the
/// 16-bit one (see `attention_module::KV_FORMATS`).
fn attention_module(
    tables: &OperatorTables,
    model: &Model,
    dtype: Dtype,
) -> Option<AttentionModule> {
    use crate::catalog::operators::attention_module::{shape_of, variant};
    let (family, shape) = shape_of(model)?;
    let formats: [&str; 2] = match dtype {
        Dtype::Fp8 | Dtype::Int8 => ["fp8_block", "bf16"],
        _ => ["bf16", "fp8_block"],
    };
    formats.into_iter().find_map(|gemm| {
        ["kv_fp8", "kv_bf16"].into_iter().find_map(|kv| {
            let variant = variant(gemm, kv, &shape);
            let [context, generation] = family.tables.map(|table| tables.module(table, &variant));
            Some(AttentionModule {
                tables: family.tables,
                grids: [context?.clone(), generation?.clone()],
                variant,
            })
        })
    })
}

/// The fused-MoE curve that times `parallel`'s expert layers in `expert_dtype`, if measured
/// (formats in [`expert_formats`]' order).
/// Experts split by tensor parallelism over t cards (each holds a 1/t slice of every expert)
/// are timed, where only expert parallelism over the same t cards was measured (each holds
/// 1/t of the experts whole), from that: each card holds and streams the same share of the
/// experts' weights and does the same share of their multiplies; the exchange that differs
/// (all-reduce against all-to-all) is timed apart. AIConfigurator measured gpt-oss-120b's
/// MXFP4 experts under TensorRT-LLM on B200 and H200 at EP 1–128 only, while its deployments
/// run them at TP 2–8 too.
fn moe_variant(
    tables: &OperatorTables,
    expert_dtype: Dtype,
    model: &Model,
    parallel: &Parallelism,
    shape: &str,
) -> Option<MoeCurve> {
    let measured = tables.moe_dtypes(shape);
    let wanted = expert_formats(expert_dtype, model);
    let (tp, ep) = (parallel.moe_tp(), parallel.ep.max(1));
    let mut layouts = vec![(tp, ep)];
    if tp > 1 {
        layouts.push((1, tp * ep));
    }
    layouts.into_iter().find_map(|(tp, ep)| {
        wanted
            .iter()
            .find(|name| {
                measured.iter().any(|m| m == *name)
                    && tables.moe_us(name, shape, tp, ep, 1.0).is_some()
            })
            .map(|name| MoeCurve {
                dtype: name.to_string(),
                shape: shape.to_string(),
                variant: format!("{name}.{shape}"),
                tp,
                ep,
            })
    })
}

/// The measured expert formats that time experts in `expert_dtype`, in order of preference:
/// block-scaled FP8 first (the published FP8 mixtures are), MXFP4 kernels first for a
/// checkpoint shipped in MXFP4 (gpt-oss), NVFP4 first otherwise.
fn expert_formats(expert_dtype: Dtype, model: &Model) -> Vec<&'static str> {
    let mxfp4 = model
        .expert_dtype
        .as_deref()
        .is_some_and(|d| d.eq_ignore_ascii_case("mxfp4"));
    match expert_dtype {
        Dtype::Fp16 | Dtype::Bf16 | Dtype::Fp32 => vec!["bf16"],
        // The FP8 checkpoints of the catalog's mixtures (DeepSeek-V3/R1, Qwen3-*-FP8, Kimi)
        // are block-scaled, whatever the dense GEMMs run as.
        Dtype::Fp8 => vec!["fp8_block", "fp8"],
        Dtype::Fp4 if mxfp4 => vec!["w4a8_mxfp4_mxfp8", "w4a16_mxfp4", "nvfp4"],
        Dtype::Fp4 => vec!["nvfp4", "w4a8_mxfp4_mxfp8", "w4a16_mxfp4"],
        Dtype::Int4 => vec!["int4_wo", "w4a16_mxfp4"],
        Dtype::Int8 => vec![],
    }
}

/// The measured curve of `parallel`'s experts behind an all-to-all dispatch, if the layout
/// dispatches that way and the tables hold one at its expert-parallel width: attention
/// replicas (data parallelism) send each token to the cards of its experts, spread by
/// expert parallelism alone. Large expert-parallel deployments run this way (SGLang's
/// DeepEP, TensorRT-LLM's wide-EP all-to-all), and a card computes only the tokens it
/// receives — where the fused-MoE curve at the same width runs every token of the group
/// through the card's experts: 1 650 µs against about 200 for 8 192 tokens of DeepSeek-V3
/// over 32 GB200s. Curves for both phases must be there; each step reads its own.
fn moe_a2a_variant(
    tables: &OperatorTables,
    expert_dtype: Dtype,
    model: &Model,
    parallel: &Parallelism,
    shape: &str,
) -> Option<MoeCurve> {
    let ep = parallel.ep.max(1);
    if !dispatches_to_experts(parallel) {
        return None;
    }
    expert_formats(expert_dtype, model)
        .into_iter()
        .find(|name| {
            [MoePhase::Decode, MoePhase::Prefill]
                .iter()
                .all(|&phase| tables.moe_a2a_us(phase, name, shape, ep, 1.0).is_some())
        })
        .map(|name| MoeCurve {
            dtype: name.to_string(),
            shape: shape.to_string(),
            variant: format!("{name}.{shape}"),
            tp: 1,
            ep,
        })
}

/// Whether `parallel` sends each token to its experts' cards by an all-to-all: attention
/// replicas over cards that spread the experts by expert parallelism alone.
fn dispatches_to_experts(parallel: &Parallelism) -> bool {
    parallel.dp > 1 && parallel.ep > 1 && parallel.moe_tp() == 1
}

/// The model's shape as the measured all-to-all sees it, if `parallel` sends tokens to their
/// experts' cards (attention replicas over cards that spread the experts by expert
/// parallelism alone, as `moe_a2a_variant` asks) and the tables measured that exchange for
/// both phases.
fn exchange_variant(
    tables: &OperatorTables,
    parallel: &Parallelism,
    expert_dtype: Dtype,
    moe_shape: &str,
) -> Option<String> {
    use crate::catalog::operators::expert_exchange::{exchange_shape, DEEPEP};
    let ep = parallel.ep.max(1);
    if !dispatches_to_experts(parallel) {
        return None;
    }
    let shape = exchange_shape(moe_shape)?;
    // The payload the engine sends: the experts' own format where it was measured (NVFP4
    // experts take NVFP4 tokens, FP8 ones FP8), DeepEP's rows, which record none, else.
    let payloads: &[&str] = match expert_dtype {
        Dtype::Fp4 => &["nvfp4", "fp8", DEEPEP],
        Dtype::Fp8 | Dtype::Int4 | Dtype::Int8 => &["fp8", DEEPEP],
        Dtype::Fp16 | Dtype::Bf16 | Dtype::Fp32 => &["bf16", DEEPEP],
    };
    payloads
        .iter()
        .map(|payload| format!("{payload}.{shape}"))
        .find(|variant| {
            [MoePhase::Decode, MoePhase::Prefill]
                .iter()
                .all(|&phase| tables.exchange_us(phase, variant, ep, 1.0).is_some())
        })
}

/// Which GEMM timing serves weights in `dtype` on these tables.
fn gemm_source(tables: &OperatorTables, dtype: Dtype) -> Result<GemmSource, NoOperatorData> {
    let has = |name: &str| tables.gemm_dtypes().contains(&name);
    let table = |names: &[&str]| {
        names
            .iter()
            .find(|n| has(n))
            .map(|n| GemmSource::Table(n.to_string()))
    };
    let missing = |what: &str| {
        NoOperatorData(format!(
            "{} {} has no {what} GEMM timings",
            tables.system, tables.engine
        ))
    };
    match dtype {
        Dtype::Fp16 | Dtype::Bf16 | Dtype::Fp32 => table(&["bf16"]).ok_or_else(|| missing("bf16")),
        Dtype::Fp8 => table(&["fp8", "fp8_block"]).ok_or_else(|| missing("fp8")),
        Dtype::Fp4 => table(&["nvfp4", "mxfp4"]).ok_or_else(|| missing("fp4")),
        Dtype::Int4 => {
            Ok(table(&["int4_wo", "w4a16"])
                .unwrap_or(GemmSource::WeightOnly { weight_ratio: 0.25 }))
        }
        Dtype::Int8 => Ok(
            table(&["int8_wo", "w8a16"]).unwrap_or(GemmSource::WeightOnly { weight_ratio: 0.5 })
        ),
    }
    .and_then(|source| {
        if matches!(source, GemmSource::WeightOnly { .. }) && !has("bf16") {
            Err(missing("bf16"))
        } else {
            Ok(source)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    fn h100_8b(dtype: Dtype) -> OperatorStep {
        let catalog = Catalog::shipped().unwrap();
        let tables = (**catalog.operators.get("h100_sxm", "vllm").unwrap()).clone();
        let model = catalog.model("llama-3.1-8b").unwrap();
        OperatorStep::new(
            Arc::new(tables),
            model,
            &Parallelism::tensor(1),
            dtype,
            dtype,
            Dtype::Bf16,
            3350.0,
        )
        .unwrap()
    }

    fn decode(batch: f64, context: f64) -> StepWork {
        let mut work = StepWork::default();
        work.add_decode(batch, batch * context);
        work
    }

    fn deepseek(system: &str, parallel: Parallelism) -> OperatorStep {
        let catalog = Catalog::shipped().unwrap();
        let tables = (**catalog.operators.get(system, "trtllm").unwrap()).clone();
        let model = catalog.model("deepseek-v3").unwrap();
        OperatorStep::new(
            Arc::new(tables),
            model,
            &parallel,
            Dtype::Fp4,
            Dtype::Fp4,
            Dtype::Fp8,
            8000.0,
        )
        .unwrap()
    }

    /// Falcon's attention and MLP run side by side and are reduced together: on eight H100s
    /// its prefill step all-reduces once a layer, half what the same shapes cost reduced
    /// after each, and its GEMMs are the same either way.
    #[test]
    fn a_parallel_attention_layer_all_reduces_once() {
        let catalog = Catalog::shipped().unwrap();
        let tables = Arc::new((**catalog.operators.get("h100_sxm", "trtllm").unwrap()).clone());
        let falcon = catalog.model("falcon-180b").unwrap();
        assert_eq!(falcon.all_reduces_per_layer(), 1.0);
        let sequential = crate::catalog::Model {
            parallel_attention: None,
            ..falcon.clone()
        };
        let step = |model: &crate::catalog::Model| {
            let mut work = StepWork::default();
            work.add_prefill_chunk(0.0, 2048.0);
            OperatorStep::new(
                tables.clone(),
                model,
                &Parallelism::tensor(8),
                Dtype::Fp8,
                Dtype::Fp8,
                Dtype::Fp8,
                3350.0,
            )
            .unwrap()
            .time(&work, None)
        };
        let (once, twice) = (step(falcon), step(&sequential));
        assert!(once.communication > 0.0);
        assert!(
            (twice.communication / once.communication - 2.0).abs() < 1e-9,
            "{once:?} vs {twice:?}"
        );
        assert_eq!(once.gemm, twice.gemm);
    }

    /// MiniMax-M2's QK-norm spans all heads: split over four B200s, each decode layer adds
    /// one all-reduce of the tokens' two FP32 variances (vLLM's table: captured in a CUDA
    /// graph when the step runs as one, eager when not), and nothing else moves; on one card
    /// there is nothing to reduce.
    #[test]
    fn a_qk_norm_over_all_heads_all_reduces_across_the_cards() {
        let catalog = Catalog::shipped().unwrap();
        let tables = Arc::new((**catalog.operators.get("b200_sxm", "vllm").unwrap()).clone());
        let minimax = catalog.model("minimax-m2.5").unwrap();
        assert_eq!(minimax.qk_norm_all_reduce_bytes(), 8.0);
        let head_wise = crate::catalog::Model {
            qk_norm_across_heads: None,
            ..minimax.clone()
        };
        let step = |model: &crate::catalog::Model, tp: u32, graph: Option<f64>| {
            OperatorStep::new(
                tables.clone(),
                model,
                &Parallelism::tensor(tp),
                Dtype::Fp8,
                Dtype::Fp8,
                Dtype::Bf16,
                8000.0,
            )
            .unwrap()
            .time(&decode(16.0, 2000.0), graph)
        };
        let layers = f64::from(minimax.layers);
        for (graph, variant) in [(Some(16.0), "graph"), (None, "eager")] {
            let (across, head) = (step(minimax, 4, graph), step(&head_wise, 4, graph));
            let one = tables.all_reduce_us(variant, 4, 16.0 * 8.0).unwrap();
            assert!(one > 0.0);
            assert!(
                ((across.communication - head.communication) * 1e6 - layers * one).abs() < 1e-3,
                "{variant}: {across:?} vs {head:?}: {layers} × {one} µs"
            );
            assert_eq!(across.gemm, head.gemm);
        }
        let (alone, alone_head) = (step(minimax, 1, None), step(&head_wise, 1, None));
        assert_eq!(alone.communication, alone_head.communication);
    }

    /// A request lives on one attention replica: one 8 192-token prompt on a layout of
    /// eight replicas runs its attention (projections included, in TensorRT-LLM's module) and
    /// dense layers over all its tokens on one of them, which costs several times what eight
    /// 1 024-token prompts, one per replica, do.
    #[test]
    fn a_lone_prompt_runs_on_one_attention_replica() {
        let step = deepseek(
            "b200_sxm",
            Parallelism {
                tp: 1,
                pp: 1,
                dp: 8,
                ep: 8,
            },
        );
        let mut lone = StepWork::default();
        lone.add_prefill_chunk(0.0, 8192.0);
        let mut spread = StepWork::default();
        for _ in 0..8 {
            spread.add_prefill_chunk(0.0, 1024.0);
        }
        let (lone, spread) = (step.time(&lone, None), step.time(&spread, None));
        let replica_bound = |t: &OperatorTime| t.gemm + t.attention;
        assert!(
            replica_bound(&lone) > 2.0 * replica_bound(&spread),
            "{lone:?} vs {spread:?}"
        );
    }

    /// GB200's all-reduce was measured at 2 and 4 GPUs only; at TP 8 inside its NVLink domain
    /// it is scaled from the 4-GPU curve, and lands near B200's measured TP 8 one (the
    /// generic fallback put it at ten times that).
    #[test]
    fn an_all_reduce_past_the_measured_sizes_is_scaled_from_the_largest() {
        let tp8 = Parallelism {
            tp: 8,
            pp: 1,
            dp: 1,
            ep: 8,
        };
        let (gb200, b200) = (deepseek("gb200", tp8), deepseek("b200_sxm", tp8));
        for bytes in [14_336.0, 14_336.0 * 1024.0] {
            let (scaled, measured) = (
                gb200.all_reduce_us(bytes, true),
                b200.all_reduce_us(bytes, true),
            );
            assert!(
                scaled > 0.5 * measured && scaled < 2.0 * measured,
                "{bytes} B: {scaled} µs against B200's {measured} µs"
            );
        }
        // Scaling to the measured size itself changes nothing.
        assert_eq!(scaled_all_reduce_us(4, 4, 8.0, 20.0), 20.0);
    }

    /// AIConfigurator's L40S box loses most of its all-reduce bus bandwidth past two GPUs
    /// (they are peers in pairs); no NVLink system's tables do.
    #[test]
    fn only_the_l40s_all_reduce_crosses_a_slower_path_past_a_pair() {
        let catalog = Catalog::shipped().unwrap();
        let mut seen = 0;
        // Every system the tables are rebuilt from. The RTX PRO 6000 server's PCIe switches
        // keep 0.63-0.79 of the pair's bus bandwidth at 4 and 8 GPUs: no slower path either.
        for system in crate::catalog::operators::convert::DEFAULT_SYSTEMS {
            for engine in ["vllm", "sglang", "trtllm"] {
                let Some(tables) = catalog.operators.get(system, engine) else {
                    continue;
                };
                seen += 1;
                let expected = (system == "l40s").then_some(4);
                assert_eq!(
                    tables.all_reduce_slower_from(),
                    expected,
                    "{system} {engine}"
                );
            }
        }
        assert_eq!(seen, 27, "every shipped system under every engine");
    }

    /// On a node shape with every card behind one switch, an L40S TP 8 all-reduce is scaled
    /// from the measured 2-GPU one (as a ring over the same links) instead of taken from the
    /// measured box's 8-GPU one, which crossed its host; a node whose cards pair off, or no
    /// node shape at all, keeps the measurement.
    #[test]
    fn a_switched_node_sets_aside_all_reduce_groups_measured_through_the_host() {
        let catalog = Catalog::shipped().unwrap();
        let tables = catalog.operators.get("l40s", "vllm").unwrap().clone();
        let model = catalog.model("llama-2-70b").unwrap();
        let card = catalog.card("L40S").unwrap();
        let step = |switched: Option<bool>| {
            OperatorStep::new(
                tables.clone(),
                model,
                &Parallelism::tensor(8),
                Dtype::Fp8,
                Dtype::Fp8,
                Dtype::Fp8,
                card.hbm_bandwidth_gbs,
            )
            .unwrap()
            .with_fabric(Fabric {
                switched,
                ..Fabric::single_domain(8, card.link_bandwidth_gbs, 5.0)
            })
        };
        let (switched, paired, unknown) = (step(Some(true)), step(Some(false)), step(None));
        for bytes in [16_384.0, 8192.0 * 16_384.0] {
            let measured = tables.all_reduce_us("graph", 8, bytes).unwrap();
            assert_eq!(paired.all_reduce_us(bytes, true), measured);
            assert_eq!(unknown.all_reduce_us(bytes, true), measured);
            let from_pair = scaled_all_reduce_us(
                2,
                8,
                tables.all_reduce_us("graph", 2, 1.0).unwrap(),
                tables.all_reduce_us("graph", 2, bytes).unwrap(),
            );
            assert_eq!(switched.all_reduce_us(bytes, true), from_pair);
        }
        // A prompt's all-reduce (128 MiB of activations) on the measured box is several times
        // the switched node's.
        let bytes = 8192.0 * 16_384.0;
        assert!(paired.all_reduce_us(bytes, true) > 3.0 * switched.all_reduce_us(bytes, true));
    }

    /// SGLang's H200 tables time latent-attention decode over an FP8 KV cache at about five
    /// times the 16-bit kernel (a fallback its deployments do not show): an FP8-KV step is
    /// timed no slower than the 16-bit one. TensorRT-LLM's FP8 kernel is faster than its
    /// 16-bit one; its steps time the whole module, collected over both caches and kept over
    /// the FP8 one.
    #[test]
    fn latent_attention_over_fp8_kv_is_never_timed_slower_than_over_16_bit() {
        let catalog = Catalog::shipped().unwrap();
        let model = catalog.model("deepseek-v3").unwrap();
        let attention = |engine: &str, kv: Dtype| {
            let tables = (**catalog.operators.get("h200_sxm", engine).unwrap()).clone();
            let step = OperatorStep::new(
                Arc::new(tables),
                model,
                &Parallelism::tensor(8),
                Dtype::Fp8,
                Dtype::Fp8,
                kv,
                4800.0,
            )
            .unwrap();
            step.time(&decode(32.0, 8192.0), None).attention
        };
        let tables = catalog.operators.get("h200_sxm", "sglang").unwrap();
        let fp8 = tables
            .generation_mla_us("kv_fp8", 16.0, 32.0, 8192.0)
            .unwrap();
        let bf16 = tables
            .generation_mla_us("kv_bf16", 16.0, 32.0, 8192.0)
            .unwrap();
        assert!(
            fp8 > 3.0 * bf16,
            "the table's FP8 kernel: {fp8} µs against {bf16}"
        );
        let (sglang_fp8, sglang_bf16) = (
            attention("sglang", Dtype::Fp8),
            attention("sglang", Dtype::Bf16),
        );
        assert!(
            sglang_fp8 <= sglang_bf16 * (1.0 + 1e-9),
            "{sglang_fp8} vs {sglang_bf16}"
        );
        // TensorRT-LLM's kernel reads its FP8 cache faster; its steps time the whole attention
        // module, kept over the FP8 cache only, whatever cache the layout asks for.
        let trt = catalog.operators.get("h200_sxm", "trtllm").unwrap();
        let kernel = |kv: &str| trt.generation_mla_us(kv, 16.0, 32.0, 8192.0).unwrap();
        assert!(
            kernel("kv_fp8") < 0.95 * kernel("kv_bf16"),
            "{} vs {}",
            kernel("kv_fp8"),
            kernel("kv_bf16")
        );
        let (trt_fp8, trt_bf16) = (
            attention("trtllm", Dtype::Fp8),
            attention("trtllm", Dtype::Bf16),
        );
        assert!(
            (trt_fp8 / trt_bf16 - 1.0).abs() < 1e-9,
            "{trt_fp8} vs {trt_bf16}"
        );
    }

    #[test]
    fn decode_grows_with_batch_and_context_but_far_below_linearly() {
        let step = h100_8b(Dtype::Bf16);
        let one = step.time(&decode(1.0, 1000.0), None).total();
        let many = step.time(&decode(64.0, 1000.0), None).total();
        let long = step.time(&decode(64.0, 8000.0), None).total();
        // One token reads all 16 GB of weights: at 3.35 TB/s that is 4.8 ms; measured kernels
        // reach most of that bandwidth.
        assert!((0.0045..0.009).contains(&one), "{one}");
        assert!(many > one && many < 3.0 * one, "{one} → {many}");
        assert!(long > many, "attention over a longer context costs more");
    }

    #[test]
    fn a_short_chunk_after_a_long_prompt_costs_its_share_not_a_multiple() {
        // A 16-token chunk after 8000 cached positions attends 16 × 8000 pairs: about 1/250
        // of the 8016-token prompt's attention — not 8000/8 times a fresh 16-token prompt.
        let step = h100_8b(Dtype::Bf16);
        let mut chunk = StepWork::default();
        chunk.add_prefill_chunk(8000.0, 16.0);
        let mut whole = StepWork::default();
        whole.add_prefill_chunk(0.0, 8016.0);
        let (a, b) = (step.time(&chunk, None), step.time(&whole, None));
        assert!(a.attention < b.attention / 20.0, "{a:?} vs {b:?}");
        assert!(a.total() < b.total() / 10.0);
    }

    #[test]
    fn quantised_weights_are_faster_where_weights_dominate() {
        let (bf16, fp8, int4) = (
            h100_8b(Dtype::Bf16),
            h100_8b(Dtype::Fp8),
            h100_8b(Dtype::Int4),
        );
        assert_eq!(
            int4.gemm_source(),
            &GemmSource::WeightOnly { weight_ratio: 0.25 }
        );
        let small = decode(1.0, 500.0);
        let t = |s: &OperatorStep| s.time(&small, None).gemm;
        assert!(
            t(&fp8) < t(&bf16) && t(&int4) < t(&fp8),
            "{} {} {}",
            t(&bf16),
            t(&fp8),
            t(&int4)
        );
        // A long prefill is compute-bound: int4 dequantises to bf16 and saves little.
        let mut prefill = StepWork::default();
        prefill.add_prefill_chunk(0.0, 8192.0);
        let g = |s: &OperatorStep| s.time(&prefill, None).gemm;
        assert!(g(&int4) > 0.8 * g(&bf16), "{} vs {}", g(&int4), g(&bf16));
    }

    #[test]
    fn static_fp8_scales_skip_the_scale_kernel_but_not_the_weight_read() {
        let catalog = Catalog::shipped().unwrap();
        let tables = (**catalog.operators.get("h200_sxm", "trtllm").unwrap()).clone();
        let model = catalog.model("llama-3.1-70b").unwrap();
        let step = |scales| {
            OperatorStep::new(
                Arc::new(tables.clone()),
                model,
                &Parallelism::tensor(8),
                Dtype::Fp8,
                Dtype::Fp8,
                Dtype::Fp8,
                4800.0,
            )
            .unwrap()
            .with_fp8_activation_scales(scales)
        };
        let (dynamic, fixed) = (
            step(ActivationScales::Dynamic),
            step(ActivationScales::Static),
        );
        let scale = tables
            .quantize_us("fp8", "compute_scale", 4.0, 8192.0)
            .unwrap();
        assert!((5.0..10.0).contains(&scale), "{scale}");
        // A decode GEMM of 4 tokens: the dynamic timing less the scale kernel.
        let (d, s) = (
            dynamic.gemm_us(4.0, 1280.0, 8192.0),
            fixed.gemm_us(4.0, 1280.0, 8192.0),
        );
        let expected = (d - scale).max(fixed.fp8_bytes_us(4.0, 1280.0, 8192.0));
        assert!((s - expected).abs() < 1e-9, "{s} vs {expected}");
        assert!(s < d);
        // Whatever is subtracted, a GEMM still reads its weights: the 70B model's widest
        // per-card projection is never timed below its bytes over the bandwidth.
        let floor = fixed.fp8_bytes_us(1.0, 7168.0, 8192.0);
        assert!(fixed.gemm_us(1.0, 7168.0, 8192.0) >= floor - 1e-9);
        // bf16 weights are untouched.
        let bf16 = |s: &OperatorStep| s.tables.gemm_us("bf16", 4.0, 1280.0, 8192.0);
        assert_eq!(bf16(&dynamic), bf16(&fixed));
    }

    #[test]
    fn a_graph_pads_decode_batches() {
        let step = h100_8b(Dtype::Bf16);
        let work = decode(17.0, 1000.0);
        let eager = step.time(&work, None).gemm;
        let padded = step.time(&work, Some(24.0)).gemm;
        assert!(padded >= eager);
    }

    /// `model` on `tp` H200s in the formats its memory fit settles on (`dtype` asked, or
    /// the checkpoint's own).
    fn on_h200(model: &str, tp: u32, dtype: Option<Dtype>) -> OperatorStep {
        let catalog = Catalog::shipped().unwrap();
        let tables = (**catalog.operators.get("h200_sxm", "vllm").unwrap()).clone();
        let model = catalog.model(model).unwrap();
        let options = crate::catalog::MemoryOptions {
            dtype,
            ..crate::catalog::MemoryOptions::default()
        };
        let fit =
            crate::catalog::memory_fit(model, catalog.card("H200").unwrap(), tp, &options).unwrap();
        OperatorStep::new(
            Arc::new(tables),
            model,
            &Parallelism::tensor(tp),
            fit.dtype,
            fit.expert_dtype,
            Dtype::Bf16,
            4800.0,
        )
        .unwrap()
    }

    #[test]
    fn decode_attention_is_never_timed_faster_than_reading_its_cache() {
        let catalog = Catalog::shipped().unwrap();
        let model = catalog.model("llama-3-8b").unwrap();
        let card = catalog.card("A100-80G-SXM").unwrap();
        let step = |system: &str, engine: &str| {
            let tables = catalog.operators.get(system, engine).unwrap().clone();
            OperatorStep::new(
                tables,
                model,
                &Parallelism::tensor(2),
                Dtype::Bf16,
                Dtype::Bf16,
                Dtype::Bf16,
                card.hbm_bandwidth_gbs,
            )
            .unwrap()
        };
        // 128 sequences of 4 096 cached tokens on each of two cards: 4 KV heads each, 128
        // wide, keys and values in 16 bits, 32 layers — 34 GB a card per step, 16.9 ms at
        // the A100's 2 039 GB/s.
        let work = decode(128.0, 4096.0);
        let bytes = 128.0 * 4096.0 * 4.0 * 128.0 * 2.0 * 2.0 * 32.0;
        let floor = bytes / (card.hbm_bandwidth_gbs * 1e9);
        let trtllm = step("a100_sxm", "trtllm").time(&work, None).attention;
        let vllm = step("a100_sxm", "vllm").time(&work, None).attention;
        // The TensorRT-LLM table alone would give less than the floor (341 µs a layer for
        // 512 sequence-heads of 4 096 tokens); vLLM's, measured above it, is kept.
        assert!(
            (trtllm / floor - 1.0).abs() < 0.02,
            "{trtllm} s vs {floor} s"
        );
        assert!(vllm > 1.2 * floor, "{vllm} s vs {floor} s");
    }

    #[test]
    fn fused_experts_cost_what_the_touched_experts_weigh() {
        let r1 = on_h200("deepseek-r1", 8, None);
        // One token touches 8 of 256 experts; 64 tokens nearly 228 of them: the expert
        // layer streams far more weight, but nowhere near 228 × one token's time.
        let (one, many) = (
            r1.experts_us(1.0, 1.0, MoePhase::Decode),
            r1.experts_us(64.0, 64.0, MoePhase::Decode),
        );
        assert!(many > 3.0 * one, "{one} µs vs {many} µs");
        assert!(many < 228.0 / 8.0 * one, "{one} µs vs {many} µs");
        // Per-expert launches (the old way) would charge each of the 8 touched experts a
        // whole small GEMM, shared expert aside.
        let launches = 8.0
            * (r1.gemm_us(1.0, r1.expert_up_n, r1.hidden)
                + r1.gemm_us(1.0, r1.hidden, r1.expert_down_k));
        assert!(
            one < launches,
            "{one} µs fused vs {launches} µs launched one by one"
        );
        // Three of DeepSeek's 61 layers are dense.
        assert!((r1.moe_layer_share - 58.0 / 61.0).abs() < 1e-9);
    }

    #[test]
    fn latent_attention_projects_through_its_ranks() {
        let r1 = on_h200("deepseek-r1", 8, None);
        let Projections::Latent {
            down_n,
            q_up_n,
            kv_up_n,
            o_k,
            ..
        } = r1.projections
        else {
            panic!("DeepSeek-R1 has latent attention");
        };
        // q_lora 1536 + kv_lora 512 + rope 64 on every card; 16 of 128 heads per card.
        assert_eq!(down_n, 1536.0 + 512.0 + 64.0);
        assert_eq!(q_up_n, 16.0 * 192.0);
        assert_eq!(kv_up_n, 16.0 * 256.0);
        assert_eq!(o_k, 16.0 * 128.0);
    }

    #[test]
    fn experts_kept_in_their_own_format_are_timed_in_it() {
        // gpt-oss keeps MXFP4 experts beside BF16 attention; Hopper has no FP4 GEMMs, so the
        // experts are timed as weight-only reads of 4.5-bit weights.
        let oss = on_h200("gpt-oss-120b", 1, None);
        assert!(matches!(oss.gemm, GemmSource::Table(ref t) if t == "bf16"));
        assert!(
            matches!(oss.expert_gemm, GemmSource::WeightOnly { .. }),
            "{:?}",
            oss.expert_gemm
        );
        let n = oss.expert_up_n * 16.0;
        assert!(oss.expert_gemm_us(1.0, n, oss.hidden) < 0.5 * oss.gemm_us(1.0, n, oss.hidden));
        // Asked for a format, everything is in it, as the memory fit counts it.
        let fp8 = on_h200("gpt-oss-120b", 1, Some(Dtype::Fp8));
        assert_eq!(fp8.expert_gemm, fp8.gemm);
        let bf16 = on_h200("gpt-oss-120b", 2, Some(Dtype::Bf16));
        assert_eq!(bf16.expert_gemm, bf16.gemm);
    }

    #[test]
    fn tensor_split_experts_are_timed_from_the_same_cards_expert_split() {
        // TensorRT-LLM's gpt-oss-120b experts on B200 were measured at EP 1–128 only. At
        // TP 4 each card holds a quarter of every expert: the same bytes and multiplies per
        // card as a quarter of the experts whole, so the EP 4 curve times it.
        let step = |parallel| {
            shipped_step(
                ("b200_sxm", "trtllm"),
                "gpt-oss-120b",
                parallel,
                [Dtype::Bf16, Dtype::Fp4, Dtype::Bf16],
            )
        };
        let tensor = step(Parallelism::tensor(4));
        let curve = tensor.moe_table.clone().expect("a measured curve");
        assert_eq!((curve.tp, curve.ep), (1, 4), "{curve:?}");
        assert_eq!(curve.dtype, "w4a8_mxfp4_mxfp8");
        let experts = step(Parallelism {
            ep: 4,
            ..Parallelism::tensor(4)
        });
        assert_eq!(experts.moe_table, tensor.moe_table);
        // A layout measured as it is keeps its own curve.
        assert_eq!(
            step(Parallelism::tensor(1)).moe_table.map(|c| (c.tp, c.ep)),
            Some((1, 1))
        );
    }

    /// A step of `model` on the shipped tables of (system, engine), weights, experts and KV
    /// in `dtypes`, on an 8 TB/s card.
    fn shipped_step(
        (system, engine): (&str, &str),
        model: &str,
        parallel: Parallelism,
        dtypes: [Dtype; 3],
    ) -> OperatorStep {
        let catalog = Catalog::shipped().unwrap();
        let tables = catalog.operators.get(system, engine).unwrap().clone();
        step_on(tables, catalog.model(model).unwrap(), parallel, dtypes).unwrap()
    }

    /// The same on `tables`, for a model of any shape; `Err` where the tables cannot time it.
    fn step_on(
        tables: Arc<OperatorTables>,
        model: &Model,
        parallel: Parallelism,
        [dtype, expert_dtype, kv_dtype]: [Dtype; 3],
    ) -> Result<OperatorStep, NoOperatorData> {
        OperatorStep::new(
            tables,
            model,
            &parallel,
            dtype,
            expert_dtype,
            kv_dtype,
            8000.0,
        )
    }

    /// Qwen3.5-397B-A17B over four B200s under SGLang: 15 of its 60 layers attend over the
    /// KV cache (queries, output gate, keys and values: (2 × 32 + 2 × 2) heads of 256 over 4
    /// cards), the other 45 run Gated DeltaNet — their projections as GEMMs, their convolution
    /// and delta rule from the `gdn_*` tables. Against the same shapes with every layer full
    /// attention, the hybrid's attention kernels are a quarter of the full ones plus 45 layers
    /// of the measured linear kernels, and its GEMMs differ by three quarters of the layers'
    /// projection difference.
    #[test]
    fn a_hybrid_layer_mixes_full_and_linear_attention_in_their_shares() {
        let catalog = Catalog::shipped().unwrap();
        let tables = catalog.operators.get("b200_sxm", "sglang").unwrap().clone();
        let qwen = catalog.model("qwen3.5-397b-a17b").unwrap();
        let all_full = Model {
            linear_attention: None,
            sparse_attention: None,
            ..qwen.clone()
        };
        let dtypes = [Dtype::Fp8, Dtype::Fp8, Dtype::Bf16];
        let step = |model: &Model| step_on(tables.clone(), model, Parallelism::tensor(4), dtypes);
        let (hybrid, full) = (step(qwen).unwrap(), step(&all_full).unwrap());
        let Projections::Grouped { qkv_n, o_k } = hybrid.projections else {
            panic!("grouped-query projections expected");
        };
        assert_eq!(qkv_n, (2.0 * 32.0 + 2.0 * 2.0) * 256.0 / 4.0);
        let linear = hybrid.linear.clone().unwrap();
        assert_eq!(linear.variant, "k4.v16.dk128.dv128");
        assert_eq!(linear.share, 0.75);
        let variant = linear.variant.as_str();
        let mut prompt = StepWork::default();
        prompt.add_prefill_chunk(0.0, 8192.0);
        let decode = decode(64.0, 1500.0);
        for (work, graph, kernels) in [
            (
                &prompt,
                None,
                tables.gdn_context_us(variant, 8192.0).unwrap(),
            ),
            (
                &decode,
                Some(64.0),
                tables.gdn_generation_us(variant, 64.0).unwrap(),
            ),
        ] {
            let (h, f) = (hybrid.time(work, graph), full.time(work, graph));
            let expected = f.attention / 4.0 + 45.0 * kernels * 1e-6;
            assert!(
                (h.attention / expected - 1.0).abs() < 1e-9,
                "{} vs {expected}",
                h.attention
            );
            let m = work.tokens;
            let linear_us = hybrid.gemm_us(m, linear.in_n, hybrid.hidden)
                + hybrid.gemm_us(m, hybrid.hidden, linear.out_k);
            let full_us =
                hybrid.gemm_us(m, qkv_n, hybrid.hidden) + hybrid.gemm_us(m, hybrid.hidden, o_k);
            let expected = 45.0 * (linear_us - full_us) * 1e-6;
            assert!(
                ((h.gemm - f.gemm) - expected).abs() < 1e-9,
                "{} vs {expected}",
                h.gemm - f.gemm
            );
        }
        // Tables without linear-attention timings cannot time the model.
        let text = std::fs::read_to_string("hardware/operators/b200_sxm/sglang.csv").unwrap();
        let without: String = text
            .lines()
            .filter(|line| !line.contains("gdn"))
            .map(|line| format!("{line}\n"))
            .collect();
        let bare = OperatorTables::parse(&without, "test").unwrap();
        let missing = step_on(Arc::new(bare), qwen, Parallelism::tensor(4), dtypes);
        assert!(missing.unwrap_err().0.contains("k4.v16.dk128.dv128"));
    }

    #[test]
    fn sparse_attention_is_timed_whole_and_stops_following_the_context() {
        // DeepSeek-V3.2 is DeepSeek-V3 with sparse attention. On eight B200s under SGLang its
        // attention block comes whole from the module table — no latent projections timed
        // apart — and a decode step over 64 K cached tokens costs a fraction more than over
        // 4 K, where dense latent attention reads sixteen times the cache.
        let dtypes = [Dtype::Fp8, Dtype::Fp8, Dtype::Fp8];
        let step = |model: &str| {
            shipped_step(
                ("b200_sxm", "sglang"),
                model,
                Parallelism::tensor(8),
                dtypes,
            )
        };
        let (sparse, dense) = (step("deepseek-v3.2"), step("deepseek-v3"));
        let module = sparse.module.clone().expect("a module table");
        assert_eq!(
            (module.tables[1], module.variant.as_str()),
            ("dsa_generation", "fp8_block.kv_fp8.h7168")
        );
        assert!(
            dense.module.is_none(),
            "SGLang times latent attention by its kernels"
        );
        let at = |step: &OperatorStep, context: f64| step.time(&decode(32.0, context), Some(32.0));
        let module_us = module.us(1, 16.0, 32.0, 4097.0);
        let short = at(&sparse, 4096.0);
        assert!(
            (short.attention / (61.0 * module_us * 1e-6) - 1.0).abs() < 1e-9,
            "{} s vs {module_us} µs a layer",
            short.attention
        );
        // The same weights otherwise: only the latent projections leave the GEMM time.
        let projections_us = dense.projections_us(32.0);
        let dense_short = at(&dense, 4096.0);
        assert!(
            ((dense_short.gemm - short.gemm) - 61.0 * projections_us * 1e-6).abs() < 1e-9,
            "{} vs {}",
            dense_short.gemm - short.gemm,
            61.0 * projections_us * 1e-6
        );
        let growth = |step: &OperatorStep| at(step, 65536.0).attention / at(step, 4096.0).attention;
        assert!(growth(&sparse) < 1.6, "{}", growth(&sparse));
        assert!(growth(&dense) > 3.0, "{}", growth(&dense));
        // Tables without the model's shape time it as dense latent attention.
        let text = std::fs::read_to_string("hardware/operators/b200_sxm/sglang.csv").unwrap();
        let without: String = text
            .lines()
            .filter(|line| !line.contains("h7168") || !line.starts_with("dsa_"))
            .map(|line| format!("{line}\n"))
            .collect();
        let bare = OperatorTables::parse(&without, "test").unwrap();
        let model = Catalog::shipped()
            .unwrap()
            .model("deepseek-v3.2")
            .unwrap()
            .clone();
        let fallback = step_on(Arc::new(bare), &model, Parallelism::tensor(8), dtypes).unwrap();
        assert!(fallback.module.is_none() && fallback.latent_tables);
    }

    /// TensorRT-LLM's latent attention is timed whole where its module was collected:
    /// DeepSeek-V3 on eight B200s decodes its attention block from `mla_module_generation`,
    /// with the latent projections no longer timed apart; Kimi-K2.5 (64 heads, the same
    /// widths) reads the same table at its heads per card.
    #[test]
    fn latent_attention_is_timed_whole_where_its_module_was_collected() {
        let dtypes = [Dtype::Fp8, Dtype::Fp8, Dtype::Fp8];
        let step = shipped_step(
            ("b200_sxm", "trtllm"),
            "deepseek-v3",
            Parallelism::tensor(8),
            dtypes,
        );
        let module = step.module.clone().expect("a module table");
        assert_eq!(
            (module.tables[1], module.variant.as_str()),
            ("mla_module_generation", "fp8_block.kv_fp8.h7168")
        );
        let work = decode(32.0, 2048.0);
        let kernels = step.time(&work, Some(32.0));
        let per_layer = module.us(1, 16.0, 32.0, 2049.0);
        assert!(
            (kernels.attention / (61.0 * per_layer * 1e-6) - 1.0).abs() < 1e-9,
            "{} s vs {per_layer} µs a layer",
            kernels.attention
        );
        let kimi = shipped_step(
            ("b200_sxm", "trtllm"),
            "kimi-k2.5",
            Parallelism::tensor(8),
            [Dtype::Bf16, Dtype::Int4, Dtype::Fp8],
        );
        let kimi_module = kimi.module.clone().expect("a module table");
        assert_eq!(kimi_module.variant, "bf16.kv_fp8.h7168");
        assert_eq!(kimi.heads_per_card, 8.0);
    }

    /// DeepSeek-V3 over eight B200s, eight attention replicas (SGLang's DeepEP layout): a
    /// layer's all-to-all out and back is DeepEP's measured one — the low-latency kernels for
    /// a decode step, the normal ones for a prompt's — read at the tokens a card sends; over
    /// four cards the eight-card curve is scaled by what the link moves (a token reaches
    /// fewer cards), over sixteen by more. vLLM's tables measured no exchange: the link alone
    /// times it.
    #[test]
    fn the_expert_exchange_is_timed_from_the_measured_all_to_all() {
        let layout = |dp: u32| Parallelism {
            dp,
            ep: dp,
            ..Parallelism::tensor(1)
        };
        let sglang = |dp| {
            shipped_step(
                ("b200_sxm", "sglang"),
                "deepseek-v3",
                layout(dp),
                [Dtype::Fp8; 3],
            )
        };
        let eight = sglang(8);
        assert_eq!(eight.exchange.as_deref(), Some("deepep.h7168.k8.e256"));
        let tables = eight.tables().clone();
        let measured = |phase, tokens| {
            tables
                .exchange_us(phase, "deepep.h7168.k8.e256", 8, tokens)
                .unwrap()
                .1
        };
        // Sixteen sequences decoding: two a card.
        let decode = eight.expert_exchange_us(16.0, 2.0, MoePhase::Decode);
        assert!((decode - measured(MoePhase::Decode, 2.0)).abs() < 1e-9);
        // A whole step: the 58 expert layers' exchanges are its communication (one card per
        // replica: no all-reduce).
        let mut work = StepWork::default();
        work.add_decode(16.0, 16.0 * 2048.0);
        let time = eight.time(&work, Some(16.0));
        assert!(
            (time.communication - 58.0 * decode * 1e-6).abs() < 1e-9,
            "{time:?}"
        );
        // An 8 192-token prompt on one replica: that card sends all of it, the normal way.
        let prompt = eight.expert_exchange_us(8192.0, 8192.0, MoePhase::Prefill);
        assert!((prompt - measured(MoePhase::Prefill, 8192.0)).abs() < 1e-9);
        assert!(prompt > 10.0 * decode);
        // Fewer cards, fewer of them reached by each token: 3.6 of 4 against 5.3 of 8.
        assert!((eight.ranks_reached(4) - 3.6).abs() < 0.05);
        assert!((eight.ranks_reached(8) - 5.26).abs() < 0.05);
        let four = sglang(4).expert_exchange_us(32768.0, 8192.0, MoePhase::Prefill);
        assert!(
            four < 0.7 * prompt && four > 0.4 * prompt,
            "{four} {prompt}"
        );
        let sixteen = sglang(16).expert_exchange_us(131072.0, 8192.0, MoePhase::Prefill);
        assert!(sixteen > prompt, "{sixteen} {prompt}");
        // vLLM measured no exchange: bytes over the link (here the fallback link of a step
        // given no node shape, two hops of its latency), well under DeepEP's kernels.
        let vllm = shipped_step(
            ("b200_sxm", "vllm"),
            "deepseek-v3",
            layout(8),
            [Dtype::Fp8; 3],
        );
        assert_eq!(vllm.exchange, None);
        let link = vllm.expert_exchange_us(16.0, 2.0, MoePhase::Decode);
        assert!(link < decode / 1.5, "{link} {decode}");
    }

    #[test]
    fn experts_behind_an_all_to_all_compute_only_what_they_receive() {
        // DeepSeek-V3's FP8 experts over 32 GB200s with 32 attention replicas (SGLang's
        // large-EP decode workers): each card computes the tokens its experts receive, as
        // AIConfigurator's DeepEP collection measured, not every token of the group.
        let step = |parallel| {
            shipped_step(
                ("gb200", "sglang"),
                "deepseek-v3",
                parallel,
                [Dtype::Fp8; 3],
            )
        };
        let tables = step(Parallelism::tensor(8)).tables().clone();
        let wide = step(Parallelism {
            dp: 32,
            ep: 32,
            ..Parallelism::tensor(1)
        });
        let curve = wide.moe_a2a.clone().expect("an all-to-all curve");
        assert_eq!((curve.dtype.as_str(), curve.ep), ("fp8_block", 32));
        assert_eq!(wide.dispatched_experts(), Some(32));
        let shape = "h7168.i2048.k8.e256";
        let tokens = 8192.0;
        let decode = wide.experts_us(tokens, tokens / 32.0, MoePhase::Decode);
        let dispatched = tables
            .moe_a2a_us(MoePhase::Decode, "fp8_block", shape, 32, tokens)
            .unwrap();
        let gathered = tables.moe_us("fp8_block", shape, 1, 32, tokens).unwrap();
        assert!(
            decode >= dispatched && decode < gathered,
            "{decode} {dispatched} {gathered}"
        );
        // Prompt steps read their own dispatch mode's curve.
        let prefill = wide.experts_us(tokens, tokens / 32.0, MoePhase::Prefill);
        let normal = tables
            .moe_a2a_us(MoePhase::Prefill, "fp8_block", shape, 32, tokens)
            .unwrap();
        assert!((prefill - decode - (normal - dispatched)).abs() < 1e-6);
        // Eight replicas over eight cards: between the widths measured (4 and 16).
        assert!(step(Parallelism {
            dp: 8,
            ep: 8,
            ..Parallelism::tensor(1)
        })
        .moe_a2a
        .is_some());
        // Without attention replicas the tokens are replicated, not dispatched.
        let replicated = step(Parallelism {
            ep: 8,
            ..Parallelism::tensor(8)
        });
        assert_eq!(replicated.moe_a2a, None);
        assert_eq!(replicated.dispatched_experts(), None);
        assert!(replicated.moe_table.is_some());
    }
}
