//! Model architectures: what decides weight and KV-cache memory and compute per token.

use serde::{Deserialize, Serialize};

/// The linear-attention layers of a hybrid model (Gated DeltaNet, as Qwen3.5 and Qwen3-Next
/// run it, from the `linear_*` fields of `config.json`). Such a layer keeps no KV cache: each
/// sequence holds a fixed recurrent state instead, one `key_head_dim × value_head_dim` matrix
/// per value head (in `state_bytes` per value: the checkpoints ask for FP32,
/// `mamba_ssm_dtype`), plus the last `conv_kernel − 1` inputs of its short convolution. So a
/// sequence's memory is a fixed part, whatever its length, plus the full-attention layers'
/// KV per token; and a prompt's cost in these layers grows linearly with its length.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinearAttention {
    /// How many of the model's layers are linear attention.
    pub layers: u32,
    pub key_heads: u32,
    pub value_heads: u32,
    pub key_head_dim: u32,
    pub value_head_dim: u32,
    pub conv_kernel: u32,
    /// Bytes per value of the recurrent state (4: FP32).
    pub state_bytes: f64,
}

impl LinearAttention {
    /// The projection widths out of the hidden state: queries and keys (key heads), values
    /// and the output gate (value heads), and the two per-value-head gates (`b`, `a`).
    pub fn in_width(&self) -> f64 {
        let (kh, vh) = (f64::from(self.key_heads), f64::from(self.value_heads));
        let (kd, vd) = (f64::from(self.key_head_dim), f64::from(self.value_head_dim));
        2.0 * kh * kd + 2.0 * vh * vd + 2.0 * vh
    }

    /// The width the output projection reads: every value head.
    pub fn out_width(&self) -> f64 {
        f64::from(self.value_heads) * f64::from(self.value_head_dim)
    }

    /// Channels of the short convolution (queries, keys and values).
    fn conv_channels(&self) -> f64 {
        2.0 * f64::from(self.key_heads) * f64::from(self.key_head_dim)
            + f64::from(self.value_heads) * f64::from(self.value_head_dim)
    }

    /// Key and value heads one of `tp` cards holds (at least one of each).
    pub fn heads_per_card(&self, tp: u32) -> (u32, u32) {
        let tp = tp.max(1);
        ((self.key_heads / tp).max(1), (self.value_heads / tp).max(1))
    }

    /// One sequence's recurrent state over all linear layers, bytes: the whole model's and
    /// what one of `tp` cards holds (the heads are split over the cards). The convolution
    /// keeps its inputs in 16 bits, the activations' format.
    pub fn state_bytes_per_sequence(&self, tp: u32) -> (f64, f64) {
        let activation_bytes = 2.0;
        let layers = f64::from(self.layers);
        let (kd, vd) = (f64::from(self.key_head_dim), f64::from(self.value_head_dim));
        let window = f64::from(self.conv_kernel.saturating_sub(1));
        let of = |kh: f64, vh: f64| {
            let recurrent = vh * kd * vd * self.state_bytes;
            let conv = window * (2.0 * kh * kd + vh * vd) * activation_bytes;
            layers * (recurrent + conv)
        };
        let (kh, vh) = self.heads_per_card(tp);
        (
            of(f64::from(self.key_heads), f64::from(self.value_heads)),
            of(f64::from(kh), f64::from(vh)),
        )
    }

    /// One layer's weights (projections and convolution; norms and the per-head decay
    /// constants left out), for a model of `hidden` width.
    fn layer_params(&self, hidden: f64) -> f64 {
        hidden * self.in_width()
            + self.out_width() * hidden
            + self.conv_channels() * f64::from(self.conv_kernel)
    }
}

/// DeepSeek sparse attention (DeepSeek-V3.2, GLM-5: the `index_*` fields of `config.json`):
/// latent attention whose queries each attend only the `topk` cached positions a small
/// "lightning indexer" scores highest. The indexer has heads of its own that score every
/// cached position from a key cache of its own (one `head_dim`-wide FP8 key per token and
/// layer, with an FP32 scale per 128 values, beside the latent cache: SGLang's and vLLM's
/// layout). So past `topk` tokens the attention's cost stops growing with the context; the
/// indexer's still grows, far more slowly.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SparseAttention {
    /// `index_n_heads`, `index_head_dim`, `index_topk`.
    pub index_heads: u32,
    pub index_head_dim: u32,
    pub topk: u32,
}

impl SparseAttention {
    /// One token's indexer key in one layer, bytes: FP8 values and an FP32 scale per 128.
    pub fn key_bytes_per_token_layer(&self) -> f64 {
        let dim = f64::from(self.index_head_dim);
        dim + (dim / 128.0).ceil() * 4.0
    }

    /// One layer's indexer weights: its query projection from the query rank (`q_rank`), its
    /// key projection and per-head weights from the hidden state.
    fn layer_params(&self, hidden: f64, q_rank: f64) -> f64 {
        let (heads, dim) = (f64::from(self.index_heads), f64::from(self.index_head_dim));
        q_rank * heads * dim + hidden * dim + hidden * heads
    }
}

/// One model's architecture, from its published `config.json` (named in `source`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    pub name: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    pub family: String,
    /// What the model does: `text-generation` (default: a decoder LLM, with the shape fields
    /// below and a KV cache) or another task such as `image-classification`, whose shape
    /// fields are left out: it is planned from measurements only (weights must fit; no KV
    /// cache; no simulation).
    #[serde(
        default = "text_generation",
        skip_serializing_if = "is_text_generation"
    )]
    pub task: String,
    /// Total parameters, billions.
    pub params_b: f64,
    /// Parameters active per token (mixture-of-experts models), billions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_params_b: Option<f64>,
    #[serde(default)]
    pub layers: u32,
    #[serde(default)]
    pub hidden_size: u32,
    #[serde(default)]
    pub intermediate_size: u32,
    /// `gated` (SwiGLU: gate and up projections, then down; Llama, Qwen, Mistral — the
    /// default) or `plain` (one up projection, an activation, down; GPT-J, Falcon).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlp: Option<String>,
    /// Attention and MLP side by side on the same normed input, their outputs summed (Falcon's
    /// `parallel_attn`): engines split over several cards then all-reduce once per layer, on
    /// the sum, not once after each (TensorRT-LLM's and vLLM's Falcon layers skip the
    /// all-reduce inside both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_attention: Option<bool>,
    /// QK-norm over each token's whole query and whole key, all heads together (MiniMax-M2's
    /// `qk_norm_type: per_layer`), not head by head: with the heads split over the
    /// attention's tensor-parallel cards, no card holds a whole vector, so the cards
    /// all-reduce their partial sums of squares before normalising — one more all-reduce a
    /// layer, of the query's and the key's FP32 variance per token (vLLM's
    /// `MiniMaxText01RMSNormTP.forward_qk`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qk_norm_across_heads: Option<bool>,
    #[serde(default)]
    pub heads: u32,
    #[serde(default)]
    pub kv_heads: u32,
    #[serde(default)]
    pub head_dim: u32,
    #[serde(default)]
    pub vocab_size: u32,
    #[serde(default)]
    pub max_context: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts_per_token: Option<u32>,
    /// Experts every token goes through beside the routed ones (DeepSeek `n_shared_experts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_experts: Option<u32>,
    /// One expert's FFN width (`moe_intermediate_size`); `intermediate_size` is then the dense
    /// layers' FFN width.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_intermediate_size: Option<u32>,
    /// Layers with a dense FFN instead of experts (DeepSeek's `first_k_dense_replace`, Llama 4
    /// Maverick's every other layer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense_layers: Option<u32>,
    /// Multi-head latent attention (DeepSeek V3, Kimi K2): the KV cache holds one compressed
    /// latent of this rank per token and layer, plus the rotary part of the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_lora_rank: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q_lora_rank: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qk_rope_head_dim: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qk_nope_head_dim: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v_head_dim: Option<u32>,
    /// Sliding-window attention: `sliding_layers` of the layers attend to (and keep KV for)
    /// only the last `sliding_window` tokens (gpt-oss: every other layer, 128 tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_layers: Option<u32>,
    /// Linear-attention layers of a hybrid model (Qwen3.5's and Qwen3-Next's Gated DeltaNet:
    /// three of every four layers); the other layers are full attention. See
    /// [`LinearAttention`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linear_attention: Option<LinearAttention>,
    /// DeepSeek sparse attention over the latent cache (DeepSeek-V3.2, GLM-5). See
    /// [`SparseAttention`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse_attention: Option<SparseAttention>,
    /// Full-attention layers gate their output by a projection as wide as the queries
    /// (Qwen3.5's and Qwen3-Next's `attn_output_gate`): the query projection is twice as wide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_output_gate: Option<bool>,
    /// The experts' own weight format when the checkpoint quantises only them (gpt-oss: MXFP4
    /// experts, BF16 attention and embeddings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_dtype: Option<String>,
    /// Multi-token-prediction modules the checkpoint ships (DeepSeek-V3's
    /// `num_nextn_predict_layers`, MiniMax-M2.5's `num_mtp_modules`): what `--speculative mtp`
    /// drafts with. They are not loaded without speculation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtp_modules: Option<u32>,
    /// Their parameters, billions, where the publisher states them (DeepSeek-V3: 14 B); else
    /// one decoder layer's per module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtp_params_b: Option<f64>,
    pub dtype: String,
    pub source: String,
}

fn text_generation() -> String {
    TEXT_GENERATION.to_string()
}

fn is_text_generation(task: &String) -> bool {
    task == TEXT_GENERATION
}

pub const TEXT_GENERATION: &str = "text-generation";

/// Multi-head latent attention's shapes (DeepSeek V2/V3, Kimi K2): queries through an optional
/// low rank, keys and values through one shared latent, plus a rotary key part.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatentAttention {
    pub kv_rank: f64,
    pub q_rank: Option<f64>,
    pub rope: f64,
    pub nope: f64,
    pub value: f64,
}

impl LatentAttention {
    /// Output width of the down-projections from the hidden state: the query's low rank
    /// (when it has one), the KV latent and the rotary key — the same on every card.
    pub fn down_width(&self) -> f64 {
        self.q_rank.unwrap_or(0.0) + self.kv_rank + self.rope
    }

    /// One head's query width (and key width): the position-free and the rotary parts.
    pub fn query_head(&self) -> f64 {
        self.nope + self.rope
    }

    /// One head's width out of the KV up-projection: its key's position-free part and value.
    pub fn kv_head(&self) -> f64 {
        self.nope + self.value
    }
}

impl Model {
    /// All-reduces per layer when the layer is split over several cards: one after attention
    /// and one after the MLP, or one after both when they run side by side.
    pub fn all_reduces_per_layer(&self) -> f64 {
        if self.parallel_attention == Some(true) {
            1.0
        } else {
            2.0
        }
    }

    /// Bytes per token of the all-reduce a full-attention layer adds when its heads are split
    /// over cards (`qk_norm_across_heads`: two FP32 variances); 0 for a head-wise QK-norm or
    /// none.
    pub fn qk_norm_all_reduce_bytes(&self) -> f64 {
        if self.qk_norm_across_heads == Some(true) {
            2.0 * 4.0
        } else {
            0.0
        }
    }

    /// A decoder LLM: has a KV cache, and capplan's engine can simulate it.
    pub fn generates_text(&self) -> bool {
        self.task == TEXT_GENERATION
    }

    pub fn params(&self) -> f64 {
        self.params_b * 1e9
    }

    /// Parameters each token goes through (all of a dense model's).
    pub fn active_params(&self) -> f64 {
        self.active_params_b.map_or(self.params(), |b| b * 1e9)
    }

    /// The input embedding and the LM head, untied.
    fn embedding_params(&self) -> f64 {
        2.0 * f64::from(self.vocab_size) * f64::from(self.hidden_size)
    }

    /// One decoder layer's parameters a token goes through (the embedding and LM head left
    /// out): what one draft head's or one MTP pass's work is counted in.
    pub fn active_layer_params(&self) -> f64 {
        ((self.active_params() - self.embedding_params()) / f64::from(self.layers.max(1))).max(0.0)
    }

    /// The MTP modules' parameters, billions: as published, else one whole decoder layer (all
    /// its experts) per module.
    pub fn mtp_params_b(&self) -> f64 {
        self.mtp_params_b.unwrap_or_else(|| {
            let layer = (self.params() - self.embedding_params()) / f64::from(self.layers.max(1));
            f64::from(self.mtp_modules.unwrap_or(0)) * layer / 1e9
        })
    }

    /// Whether the MLP has a gate projection beside its up projection (SwiGLU).
    pub fn gated_mlp(&self) -> bool {
        self.mlp.as_deref() != Some("plain")
    }

    /// The context one sequence is sized for when nobody says: the model's own, at most 4096
    /// tokens (what chat serving is usually configured with).
    pub fn default_context(&self) -> u32 {
        self.max_context.min(4096)
    }

    /// Whether attention is multi-head latent attention (a compressed KV cache).
    pub fn latent_attention(&self) -> bool {
        self.kv_lora_rank.is_some()
    }

    /// The ranks and head widths of latent attention, when the model has it.
    pub fn latent(&self) -> Option<LatentAttention> {
        Some(LatentAttention {
            kv_rank: f64::from(self.kv_lora_rank?),
            q_rank: self.q_lora_rank.map(f64::from),
            rope: f64::from(self.qk_rope_head_dim.unwrap_or(0)),
            nope: f64::from(self.qk_nope_head_dim.unwrap_or(0)),
            value: f64::from(self.v_head_dim.unwrap_or(self.head_dim)),
        })
    }

    /// KV-cache positions' bytes per token for a sequence of `context` tokens at `kv_bytes`
    /// per value: all layers together, and what one of `tp` cards holds. Grouped-query
    /// attention keeps K and V per KV head, split over the cards (a card keeps at least one
    /// head); latent attention keeps one latent plus the rotary key per layer, on every card
    /// (it is not split by heads). Sliding-window layers keep at most the window, so their
    /// share per token falls as the sequence outgrows it.
    pub fn kv_bytes_per_token(&self, kv_bytes: f64, tp: u32, context: u32) -> (f64, f64) {
        let layers = f64::from(self.full_attention_layers());
        let window_share = match (self.sliding_window, self.sliding_layers) {
            (Some(window), Some(sliding)) if context > window && sliding > 0 => {
                let sliding = f64::from(sliding.min(self.full_attention_layers()));
                (layers - sliding + sliding * f64::from(window) / f64::from(context)) / layers
            }
            _ => 1.0,
        };
        if let Some(rank) = self.kv_lora_rank {
            // A sparse-attention model's indexer keeps its own keys beside the latent, in FP8
            // whatever the latent's format, on every card as the latent is.
            let per_layer = f64::from(rank + self.qk_rope_head_dim.unwrap_or(0)) * kv_bytes
                + self
                    .sparse_attention
                    .map_or(0.0, |sparse| sparse.key_bytes_per_token_layer());
            let all = layers * per_layer * window_share;
            return (all, all);
        }
        let per_head = 2.0 * f64::from(self.head_dim) * kv_bytes;
        let heads_per_card = (self.kv_heads / tp.max(1)).max(1);
        (
            layers * f64::from(self.kv_heads) * per_head * window_share,
            layers * f64::from(heads_per_card) * per_head * window_share,
        )
    }

    /// Layers that attend over a KV cache: all but a hybrid model's linear-attention layers.
    pub fn full_attention_layers(&self) -> u32 {
        self.layers
            .saturating_sub(self.linear_attention.map_or(0, |linear| linear.layers))
    }

    /// The linear-attention kernels' per-card head layouts at the tensor-parallel widths a
    /// deployment uses (1 to 16 cards): what the operator tables keep for this model.
    pub fn linear_attention_variants(&self) -> Vec<String> {
        let Some(linear) = self.linear_attention else {
            return Vec::new();
        };
        [1, 2, 4, 8, 16]
            .into_iter()
            .map(|tp| {
                let (kh, vh) = linear.heads_per_card(tp);
                crate::catalog::operators::linear_attention::variant(
                    kh,
                    vh,
                    linear.key_head_dim,
                    linear.value_head_dim,
                )
            })
            .collect()
    }

    /// Whether full-attention layers gate their output (a query projection twice as wide).
    pub fn gated_attention_output(&self) -> bool {
        self.attention_output_gate == Some(true)
    }

    /// The shape a fused MoE layer is measured by (`h7168.i2048.k8.e256`: hidden size,
    /// expert width, experts per token, experts); `None` for a dense model.
    pub fn moe_shape(&self) -> Option<String> {
        match (self.experts, self.experts_per_token) {
            (Some(experts), Some(k)) if experts > 1 => Some(format!(
                "h{}.i{}.k{k}.e{experts}",
                self.hidden_size,
                self.expert_intermediate_size
                    .unwrap_or(self.intermediate_size)
            )),
            _ => None,
        }
    }

    /// Layers whose FFN is a mixture of experts.
    pub fn moe_layers(&self) -> u32 {
        match self.experts {
            Some(_) => self.layers.saturating_sub(self.dense_layers.unwrap_or(0)),
            None => 0,
        }
    }

    /// Parameters of all routed experts together, from the shapes (0 for a dense model). A
    /// mixture without its own expert width (Mixtral) has experts as wide as
    /// `intermediate_size`.
    pub fn routed_expert_params(&self) -> f64 {
        match self.experts {
            Some(experts) if experts > 1 => {
                let width = self
                    .expert_intermediate_size
                    .unwrap_or(self.intermediate_size);
                f64::from(self.moe_layers()) * f64::from(experts) * self.ffn_params(width)
            }
            _ => 0.0,
        }
    }

    /// One FFN's parameters at `width`: gate, up and down projections (two without a gate).
    fn ffn_params(&self, width: u32) -> f64 {
        let projections = if self.gated_mlp() { 3.0 } else { 2.0 };
        projections * f64::from(self.hidden_size) * f64::from(width)
    }

    /// Total and per-token active parameters counted from the shapes (embeddings and LM head
    /// untied, norms and biases left out): what `params_b` and `active_params_b` are checked
    /// against. `None` for a model without shapes.
    pub fn params_from_shapes(&self) -> Option<(f64, f64)> {
        if self.layers == 0 || self.hidden_size == 0 {
            return None;
        }
        let hidden = f64::from(self.hidden_size);
        let heads = f64::from(self.heads);
        let attention = match self.latent() {
            Some(latent) => {
                let query_in = latent.q_rank.unwrap_or(hidden);
                hidden * latent.down_width()
                    + query_in * heads * latent.query_head()
                    + latent.kv_rank * heads * latent.kv_head()
                    + heads * latent.value * hidden
            }
            None => {
                let head_dim = f64::from(self.head_dim);
                let query = if self.gated_attention_output() {
                    2.0
                } else {
                    1.0
                };
                (query + 1.0) * hidden * heads * head_dim
                    + 2.0 * hidden * f64::from(self.kv_heads) * head_dim
            }
        };
        let indexer = match (self.sparse_attention, self.latent()) {
            (Some(sparse), Some(latent)) => {
                sparse.layer_params(hidden, latent.q_rank.unwrap_or(hidden))
            }
            _ => 0.0,
        };
        let attention = attention + indexer;
        let full_layers = f64::from(self.full_attention_layers());
        let linear = self.linear_attention.map_or(0.0, |linear| {
            f64::from(linear.layers) * linear.layer_params(hidden)
        });
        let moe_layers = f64::from(self.moe_layers());
        let dense_layers = f64::from(self.layers) - moe_layers;
        let dense = dense_layers * self.ffn_params(self.intermediate_size);
        let routed_total = self.routed_expert_params();
        let (routed_active, shared, router) = match (self.experts, self.expert_intermediate_size) {
            (Some(experts), Some(width)) => {
                let one = self.ffn_params(width);
                (
                    moe_layers * f64::from(self.experts_per_token.unwrap_or(1)) * one,
                    moe_layers * f64::from(self.shared_experts.unwrap_or(0)) * one,
                    moe_layers * hidden * f64::from(experts),
                )
            }
            _ => (0.0, 0.0, 0.0),
        };
        let common = full_layers * attention
            + linear
            + dense
            + shared
            + router
            + 2.0 * f64::from(self.vocab_size) * hidden;
        Some((common + routed_total, common + routed_active))
    }
}

#[cfg(test)]
mod tests {
    /// The parameter counts of the catalog's mixture-of-experts and latent-attention models,
    /// counted from their config shapes, agree with the model cards: totals within 2 %, and
    /// the active count between the shapes' count without the input embedding and LM head and
    /// with them (cards differ: gpt-oss counts 5.1 B active, 5.7 B with the embedding;
    /// MiniMax-M2.5's 10 B is 9.8 B without the embedding and LM head, 11.0 B with them).
    #[test]
    fn shape_counts_match_the_published_parameter_counts() {
        let catalog = crate::catalog::Catalog::shipped().unwrap();
        let mut checked = 0;
        for model in catalog
            .models
            .iter()
            .filter(|m| m.expert_intermediate_size.is_some() || m.latent_attention())
        {
            let (total, active) = model.params_from_shapes().unwrap();
            let error = total / model.params() - 1.0;
            assert!(
                error.abs() < 0.02,
                "{}: {:.1} B from shapes vs {}",
                model.name,
                total / 1e9,
                model.params_b
            );
            // The input embedding and the (untied) LM head are each vocabulary × hidden.
            let embedding = f64::from(model.vocab_size) * f64::from(model.hidden_size);
            let published = model.active_params_b.unwrap() * 1e9;
            assert!(
                published >= 0.97 * (active - 2.0 * embedding) && published <= 1.03 * active,
                "{}: active {:.2} B from shapes vs {}",
                model.name,
                active / 1e9,
                published / 1e9
            );
            checked += 1;
        }
        assert!(checked >= 12, "{checked}");
        // A dense model counts the same either way.
        let qwen = catalog.model("qwen3-8b").unwrap();
        let (total, active) = qwen.params_from_shapes().unwrap();
        assert_eq!(total, active);
        assert!((total / qwen.params() - 1.0).abs() < 0.01);
    }
}
