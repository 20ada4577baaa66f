//! Does a model fit on `tp` cards, and how many tokens of KV cache are left once it does?
//!
//! Weights are split evenly over the tensor-parallel group. Each card keeps a share of its
//! memory (`memory_utilization`, 0.9 as in vLLM) for the engine and spends a fixed reserve of
//! that on activations and runtime buffers; what is left holds KV cache. KV bytes per token are
//! 2 (K and V) × layers × KV heads × head dim × bytes; with tensor parallelism each card holds
//! its share of KV heads, or one replicated head when `tp` exceeds the KV-head count. Latent
//! attention (DeepSeek, Kimi) keeps one latent per layer on every card; sliding-window layers
//! (gpt-oss) keep at most their window ([`Model::kv_bytes_per_token`]).

use std::fmt;

use serde::Serialize;

use super::{Card, Dtype, Model, Parallelism, GIB};

/// Knobs of the memory fit; the defaults are what vLLM-like engines do out of the box.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MemoryOptions {
    /// Weight format; `None` uses the model's own dtype.
    pub dtype: Option<Dtype>,
    /// KV-cache format; `None` is 16-bit.
    pub kv_dtype: Option<Dtype>,
    /// Share of each card's memory the engine may use.
    pub memory_utilization: f64,
    /// GiB per card kept for activations, CUDA graphs and runtime buffers.
    pub reserve_gib: f64,
    /// The instance must hold at least one sequence this long; `None` is the model's context
    /// capped at 4096 tokens (what chat serving is usually configured with).
    pub context_tokens: Option<u32>,
    /// A speculative drafter's weights, held beside the model's at its dtype and split over
    /// the TP group.
    pub drafter: DraftWeights,
}

/// What a speculative drafter adds to the weights in memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub enum DraftWeights {
    #[default]
    None,
    /// The model's own MTP modules ([`Model::mtp_params_b`]).
    Mtp,
    /// A draft head of about one of the model's layers.
    Head,
    /// A draft model of this many billion parameters.
    Model(f64),
}

impl DraftWeights {
    /// The drafter's parameters beside `model`.
    pub fn params(&self, model: &Model) -> f64 {
        match self {
            DraftWeights::None => 0.0,
            DraftWeights::Mtp => model.mtp_params_b() * 1e9,
            DraftWeights::Head => model.active_layer_params(),
            DraftWeights::Model(billions) => billions * 1e9,
        }
    }
}

impl Default for MemoryOptions {
    fn default() -> Self {
        MemoryOptions {
            dtype: None,
            kv_dtype: None,
            memory_utilization: 0.9,
            reserve_gib: 1.0,
            context_tokens: None,
            drafter: DraftWeights::None,
        }
    }
}

/// The memory picture of one serving instance: `model` over `tp` cards of `card`.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryFit {
    pub model: String,
    pub card: String,
    pub tp: u32,
    /// The whole layout (`tp` is its tensor-parallel width).
    pub parallel: Parallelism,
    pub dtype: Dtype,
    /// The routed experts' format: `dtype`, or the checkpoint's own for its experts
    /// (gpt-oss's MXFP4) when no other format was asked for.
    pub expert_dtype: Dtype,
    pub kv_dtype: Dtype,
    /// All weights, in GB (10^9 bytes, as model sizes are usually quoted) and GiB.
    pub weights_gb: f64,
    pub weights_gib: f64,
    pub weights_gib_per_card: f64,
    pub card_memory_gib: f64,
    pub memory_utilization: f64,
    pub usable_gib_per_card: f64,
    pub reserve_gib: f64,
    /// What is left for KV cache on each card (negative when the weights do not fit).
    pub kv_gib_per_card: f64,
    pub kv_bytes_per_token: f64,
    pub kv_bytes_per_token_per_card: f64,
    /// Tokens of KV cache the whole instance holds (all attention replicas together).
    pub kv_tokens: u64,
    /// A hybrid model's recurrent state per sequence (its linear-attention layers), bytes on
    /// each card; 0 for a model that keeps only KV.
    pub state_bytes_per_sequence_per_card: f64,
    /// The same state in KV positions of this cache (rounded up): what each running
    /// sequence takes from the cache beside its tokens where an engine keeps both in one
    /// pool (vLLM's hybrid allocator); an engine with a pool of states apart splits the
    /// cache instead (`EngineProfile::state_memory_ratio`, SGLang).
    pub state_tokens_per_sequence: u64,
    pub context_tokens: u32,
}

/// Why a layout cannot run, with the numbers that show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayoutRejected {
    pub reason: String,
}

impl fmt::Display for LayoutRejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for LayoutRejected {}

/// Why `tp` cannot split `model` evenly, if it cannot.
pub fn tp_problem(model: &Model, tp: u32) -> Option<String> {
    if tp == 0 {
        return Some("tp must be at least 1".into());
    }
    if !model.heads.is_multiple_of(tp) {
        return Some(format!(
            "tp {tp} does not divide {}'s {} attention heads",
            model.name, model.heads
        ));
    }
    if !model.latent_attention()
        && !model.kv_heads.is_multiple_of(tp)
        && !tp.is_multiple_of(model.kv_heads)
    {
        return Some(format!(
            "tp {tp} neither divides nor is a multiple of {}'s {} KV heads",
            model.name, model.kv_heads
        ));
    }
    None
}

/// Why `model` cannot be laid out as `parallel` at all (a TP width its heads do not divide, an
/// axis that does not divide the model), whatever the card; `None` when it can.
pub fn layout_problem(model: &Model, parallel: &Parallelism) -> Option<String> {
    tp_problem(model, parallel.tp).or_else(|| parallel.problem(model))
}

/// Fits `model` on `tp` cards of `card` (tensor parallelism alone), or says why it does not fit.
pub fn memory_fit(
    model: &Model,
    card: &Card,
    tp: u32,
    options: &MemoryOptions,
) -> Result<MemoryFit, LayoutRejected> {
    memory_fit_layout(model, card, &Parallelism::tensor(tp), options)
}

/// Fits `model` on the cards of `parallel`, or says why it does not fit. The attention, the
/// dense layers and the embeddings are split over `tp` and replicated over the attention
/// replicas; the routed experts are split over every card of a stage (`ep` by expert, the
/// rest inside each expert); pipeline stages hold `1/pp` of everything, KV cache included.
/// Each attention replica keeps its own KV cache, so the instance holds `dp` times what one
/// replica's cards hold, and every replica must hold one whole sequence.
pub fn memory_fit_layout(
    model: &Model,
    card: &Card,
    parallel: &Parallelism,
    options: &MemoryOptions,
) -> Result<MemoryFit, LayoutRejected> {
    let tp = parallel.tp;
    if let Some(reason) = layout_problem(model, parallel) {
        return Err(LayoutRejected { reason });
    }
    let dtype = match options.dtype {
        Some(dtype) => dtype,
        None => model.dtype.parse().unwrap_or(Dtype::Fp16),
    };
    let kv_dtype = options.kv_dtype.unwrap_or(Dtype::Fp16);
    // A checkpoint that quantises only its experts (gpt-oss's MXFP4) keeps them so unless
    // another format is asked for.
    let expert_dtype = match (&model.expert_dtype, options.dtype) {
        (Some(own), None) => own.parse().unwrap_or(dtype),
        _ => dtype,
    };
    let experts = model.routed_expert_params().min(model.params());
    let shared_bytes = (model.params() - experts + options.drafter.params(model)) * dtype.bytes();
    let expert_bytes = experts * expert_dtype.bytes();
    let weights = shared_bytes + expert_bytes;
    let format = if expert_dtype == dtype || experts == 0.0 {
        dtype.to_string()
    } else {
        format!("{dtype}, experts {expert_dtype}")
    };
    let pp = f64::from(parallel.pp);
    let weights_per_card =
        (shared_bytes / f64::from(tp) + expert_bytes / f64::from(parallel.stage_cards())) / pp;
    let usable = card.memory_bytes() * options.memory_utilization;
    let reserve = options.reserve_gib * GIB;
    let kv_budget = usable - weights_per_card - reserve;

    let context_tokens = options
        .context_tokens
        .unwrap_or_else(|| model.default_context());
    let (kv_per_token, kv_per_token_per_card) =
        model.kv_bytes_per_token(kv_dtype.bytes(), tp, context_tokens);
    let kv_per_token_per_card = kv_per_token_per_card / pp;
    let state_per_card = model
        .linear_attention
        .map_or(0.0, |linear| linear.state_bytes_per_sequence(tp).1 / pp);
    let state_tokens = if state_per_card > 0.0 && kv_per_token_per_card > 0.0 {
        (state_per_card / kv_per_token_per_card).ceil() as u64
    } else {
        0
    };
    // A model without a KV cache (an image classifier) needs room for its weights only.
    let replica_tokens = if kv_per_token_per_card == 0.0 {
        0
    } else if kv_budget > 0.0 {
        (kv_budget / kv_per_token_per_card).floor() as u64
    } else {
        0
    };
    let kv_tokens = replica_tokens * u64::from(parallel.dp);
    let cards = parallel.cards();

    let fit = MemoryFit {
        model: model.name.clone(),
        card: card.name.clone(),
        tp,
        parallel: *parallel,
        dtype,
        expert_dtype,
        kv_dtype,
        weights_gb: weights / 1e9,
        weights_gib: weights / GIB,
        weights_gib_per_card: weights_per_card / GIB,
        card_memory_gib: card.memory_gib,
        memory_utilization: options.memory_utilization,
        usable_gib_per_card: usable / GIB,
        reserve_gib: options.reserve_gib,
        kv_gib_per_card: kv_budget / GIB,
        kv_bytes_per_token: kv_per_token,
        kv_bytes_per_token_per_card: kv_per_token_per_card,
        kv_tokens,
        state_bytes_per_sequence_per_card: state_per_card,
        state_tokens_per_sequence: state_tokens,
        context_tokens,
    };

    // Plain tensor parallelism reads as before ("at tp 4"); other layouts name themselves.
    let at = if parallel.is_tensor_only() {
        format!("tp {tp}")
    } else {
        parallel.to_string()
    };
    if kv_budget <= 0.0 {
        return Err(LayoutRejected {
            reason: format!(
                "{} ({format}) needs {:.1} GB of weights, {:.1} GiB per card at {at}, plus {:.1} GiB reserve; \
                 {cards} × {} have {:.0} GiB, {:.1} GiB usable per card at memory utilisation {:.2}",
                model.name,
                fit.weights_gb,
                fit.weights_gib_per_card,
                fit.reserve_gib,
                card.name,
                card.memory_gib * f64::from(cards),
                fit.usable_gib_per_card,
                fit.memory_utilization,
            ),
        });
    }
    if model.generates_text() && replica_tokens < u64::from(context_tokens) + state_tokens {
        let on = if parallel.is_tensor_only() {
            format!("{tp} × {}", card.name)
        } else {
            format!("{cards} × {} ({parallel})", card.name)
        };
        let per = if parallel.dp > 1 {
            " per attention replica"
        } else {
            ""
        };
        return Err(LayoutRejected {
            reason: format!(
                "{} ({format}) on {on} leaves {:.2} GiB per card for KV cache: {replica_tokens} tokens{per}, \
                 less than one {context_tokens}-token sequence{}",
                model.name,
                fit.kv_gib_per_card,
                if state_tokens > 0 {
                    format!(" and its recurrent state ({state_tokens} positions' worth)")
                } else {
                    String::new()
                },
            ),
        });
    }
    Ok(fit)
}

impl fmt::Display for MemoryFit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}) on {} × {}: weights {:.1} GB ({:.1} GiB per card), KV {:.0} KiB/token, \
             {:.1} GiB per card for KV = {} tokens",
            self.model,
            self.dtype,
            self.tp,
            self.card,
            self.weights_gb,
            self.weights_gib_per_card,
            self.kv_bytes_per_token / 1024.0,
            self.kv_gib_per_card,
            self.kv_tokens
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model with round numbers so the expected values can be worked out by hand.
    fn model(name: &str, params_b: f64, layers: u32, heads: u32, kv_heads: u32) -> Model {
        Model {
            name: name.into(),
            aliases: vec![],
            family: "test".into(),
            task: crate::catalog::model::TEXT_GENERATION.into(),
            params_b,
            active_params_b: None,
            layers,
            hidden_size: heads * 128,
            intermediate_size: 4 * heads * 128,
            mlp: None,
            parallel_attention: None,
            qk_norm_across_heads: None,
            heads,
            kv_heads,
            head_dim: 128,
            vocab_size: 32000,
            max_context: 4096,
            experts: None,
            experts_per_token: None,
            shared_experts: None,
            expert_intermediate_size: None,
            dense_layers: None,
            kv_lora_rank: None,
            q_lora_rank: None,
            qk_rope_head_dim: None,
            qk_nope_head_dim: None,
            v_head_dim: None,
            sliding_window: None,
            sliding_layers: None,
            linear_attention: None,
            sparse_attention: None,
            attention_output_gate: None,
            mtp_modules: None,
            mtp_params_b: None,
            expert_dtype: None,
            dtype: "fp16".into(),
            source: "test".into(),
        }
    }

    fn card(name: &str, memory_gib: f64) -> Card {
        Card {
            name: name.into(),
            aliases: vec![],
            vendor: "test".into(),
            memory_gib,
            hbm_bandwidth_gbs: 1000.0,
            fp16_tflops: 100.0,
            fp8_tflops: None,
            fp4_tflops: None,
            int8_tops: None,
            interconnect: "pcie".into(),
            link_bandwidth_gbs: 64.0,
            pcie_gen: 4,
            tdp_w: 300.0,
            form_factor: "pcie".into(),
            release_year: 2020,
            source: "test".into(),
            operators: None,
            efficiency: None,
        }
    }

    #[test]
    fn llama_13b_on_two_a30() {
        // 13e9 params × 2 B = 26e9 B; per card 13e9 B.
        // usable = 0.9 × 24 GiB = 23_192_823_398.4 B; minus weights and 1 GiB reserve
        // = 9_119_081_574.4 B. KV/token = 2 × 40 layers × 40 heads × 128 × 2 B = 819_200 B,
        // 409_600 B per card at tp 2 → 22_263 tokens.
        let fit = memory_fit(
            &model("llama-13b", 13.0, 40, 40, 40),
            &card("A30", 24.0),
            2,
            &MemoryOptions::default(),
        )
        .unwrap();
        assert_eq!(fit.kv_bytes_per_token, 819_200.0);
        assert_eq!(fit.kv_bytes_per_token_per_card, 409_600.0);
        assert!((fit.weights_gb - 26.0).abs() < 1e-9);
        assert!((fit.kv_gib_per_card * GIB - 9_119_081_574.4).abs() < 1.0);
        assert_eq!(fit.kv_tokens, 22_263);
    }

    #[test]
    fn llama_13b_does_not_fit_one_a30() {
        // 26e9 B of weights on one card against 23.19e9 B usable.
        let err = memory_fit(
            &model("llama-13b", 13.0, 40, 40, 40),
            &card("A30", 24.0),
            1,
            &MemoryOptions::default(),
        )
        .unwrap_err();
        assert!(err.reason.contains("26.0 GB"), "{err}");
    }

    #[test]
    fn llama_65b_does_not_fit_four_a30() {
        // 65.2e9 × 2 B = 130.4 GB of weights; 4 × 24 GiB = 96 GiB.
        let err = memory_fit(
            &model("llama-65b", 65.2, 80, 64, 64),
            &card("A30", 24.0),
            4,
            &MemoryOptions::default(),
        )
        .unwrap_err();
        assert!(err.reason.contains("130.4 GB"), "{err}");
        assert!(err.reason.contains("96 GiB"), "{err}");
    }

    #[test]
    fn llama_65b_fits_eight_a30() {
        // per card 130.4e9/8 = 16.3e9 B; 23_192_823_398.4 − 16.3e9 − 1_073_741_824
        // = 5_819_081_574.4 B; KV/token/card = 2 × 80 × 8 heads × 128 × 2 = 327_680 B
        // → 17_758 tokens.
        let fit = memory_fit(
            &model("llama-65b", 65.2, 80, 64, 64),
            &card("A30", 24.0),
            8,
            &MemoryOptions::default(),
        )
        .unwrap();
        assert_eq!(fit.kv_bytes_per_token_per_card, 327_680.0);
        assert_eq!(fit.kv_tokens, 17_758);
    }

    #[test]
    fn gqa_70b_on_four_80g_cards() {
        // 69e9 × 2 / 4 = 34.5e9 B per card; 0.9 × 80 GiB = 77_309_411_328 B;
        // left 77_309_411_328 − 34.5e9 − 1_073_741_824 = 41_735_669_504 B.
        // KV/token = 2 × 80 × 8 × 128 × 2 = 327_680 B, 2 KV heads per card → 81_920 B
        // → 509_468 tokens.
        let fit = memory_fit(
            &model("llama-2-70b", 69.0, 80, 64, 8),
            &card("A100-80G", 80.0),
            4,
            &MemoryOptions::default(),
        )
        .unwrap();
        assert_eq!(fit.kv_bytes_per_token, 327_680.0);
        assert_eq!(fit.kv_bytes_per_token_per_card, 81_920.0);
        assert_eq!(fit.kv_tokens, 509_468);
    }

    #[test]
    fn kv_heads_replicate_past_their_count() {
        // 4 KV heads over tp 8: every card keeps one head (replicated), not half a head.
        let m = model("gqa", 7.0, 28, 32, 4);
        let fit = memory_fit(&m, &card("big", 80.0), 8, &MemoryOptions::default()).unwrap();
        assert_eq!(fit.kv_bytes_per_token_per_card, 2.0 * 28.0 * 128.0 * 2.0);
    }

    #[test]
    fn fp8_weights_halve_the_weight_memory() {
        // 7e9 params at 1 B = 7 GB on a 16 GiB card: 0.9 × 16 GiB = 15_461_882_265.6 B usable,
        // minus 7e9 and 1 GiB = 7_388_140_441.6 B; KV/token 2 × 28 × 4 × 128 × 2 = 57_344 B
        // → 128_838 tokens. In fp16 (14 GB) only 388_140_441.6 B are left → 6_768 tokens.
        let m = model("gqa", 7.0, 28, 28, 4);
        let options = MemoryOptions {
            dtype: Some(Dtype::Fp8),
            ..MemoryOptions::default()
        };
        let fit = memory_fit(&m, &card("T4", 16.0), 1, &options).unwrap();
        assert_eq!(fit.kv_tokens, 128_838);
        let fp16 = memory_fit(&m, &card("T4", 16.0), 1, &MemoryOptions::default()).unwrap();
        assert_eq!(fp16.kv_tokens, 6_768);
    }

    #[test]
    fn too_little_kv_for_one_sequence_is_rejected() {
        // As above in fp16 but the instance must hold a 8192-token sequence: 6_768 < 8_192.
        let m = model("gqa", 7.0, 28, 28, 4);
        let options = MemoryOptions {
            context_tokens: Some(8192),
            ..MemoryOptions::default()
        };
        let err = memory_fit(&m, &card("T4", 16.0), 1, &options).unwrap_err();
        assert!(err.reason.contains("6768 tokens"), "{err}");
    }

    /// Qwen3.5-397B-A17B keeps KV in its 15 full-attention layers only (2 KV heads of 256,
    /// one a card past TP 2) and a fixed recurrent state per sequence in its 45 Gated DeltaNet
    /// layers: at TP 4 each card holds 16 value heads' 128 × 128 FP32 matrices and 3 past
    /// inputs of its 3 072 convolution channels, 45 × (1 048 576 + 18 432) bytes. That state
    /// takes as much room as 3 126 positions of KV, so a 4 096-token sequence costs 1.76 times
    /// its KV. Its FP8 weights (397 GB) fit on four B200s, not on two H200s.
    #[test]
    fn a_hybrid_model_keeps_kv_for_its_full_layers_and_a_state_per_sequence() {
        let catalog = crate::catalog::Catalog::shipped().unwrap();
        let qwen = catalog.model("qwen3.5-397b-a17b").unwrap();
        let options = MemoryOptions {
            dtype: Some(Dtype::Fp8),
            ..MemoryOptions::default()
        };
        let fit = memory_fit(qwen, catalog.card("B200").unwrap(), 4, &options).unwrap();
        assert_eq!(fit.kv_bytes_per_token, 15.0 * 2.0 * 256.0 * 2.0 * 2.0);
        assert_eq!(fit.kv_bytes_per_token_per_card, 15.0 * 256.0 * 2.0 * 2.0);
        let state = 45.0 * (16.0 * 128.0 * 128.0 * 4.0 + 3.0 * 3072.0 * 2.0);
        assert_eq!(fit.state_bytes_per_sequence_per_card, state);
        assert_eq!(fit.state_tokens_per_sequence, 3126);
        assert!((fit.weights_gb - 397.0).abs() < 0.5, "{}", fit.weights_gb);
        let h200 = memory_fit(qwen, catalog.card("H200").unwrap(), 2, &options);
        assert!(h200.is_err(), "{h200:?}");
        // A card's share of the state shrinks with the heads it holds.
        let tp8 = memory_fit(qwen, catalog.card("B200").unwrap(), 8, &options).unwrap();
        assert_eq!(tp8.state_bytes_per_sequence_per_card * 2.0, state);
    }

    #[test]
    fn uneven_tensor_parallel_is_rejected() {
        let m = model("qwen2-7b", 7.6, 28, 28, 4);
        let err = memory_fit(&m, &card("big", 80.0), 8, &MemoryOptions::default()).unwrap_err();
        assert!(err.reason.contains("28 attention heads"), "{err}");
    }

    /// The models of 2025 (mixtures of experts, latent attention, sliding windows, native
    /// quantisation) on a layout that fits and one that does not, with the figures their
    /// publishers give: DeepSeek-R1's FP8 weights need more than one node of eight 80 GB
    /// H100s and fit on eight H200s; gpt-oss-120b runs on one 80 GB card and gpt-oss-20b in
    /// 16 GB; Qwen3-235B-A22B in BF16 needs eight H100s; MiniMax-M2.5's FP8 weights run on four
    /// 96 GB cards (and on two B200s, as AIConfigurator collected them); Kimi-K2.5 runs on one
    /// node of eight H200s at its full context (below).
    #[test]
    fn the_2025_models_fit_where_their_publishers_say() {
        let catalog = crate::catalog::Catalog::shipped().unwrap();
        let fit = |model: &str, card: &str, tp: u32| {
            memory_fit(
                catalog.model(model).unwrap(),
                catalog.card(card).unwrap(),
                tp,
                &MemoryOptions::default(),
            )
        };
        let cases = [
            ("deepseek-r1", ("H200", 8), ("H100-SXM", 8)),
            ("deepseek-v3", ("B200", 8), ("H100-SXM", 8)),
            ("deepseek-v3.1", ("B200", 8), ("H100-SXM", 8)),
            ("deepseek-v3.2", ("H200", 8), ("H100-SXM", 8)),
            ("glm-5", ("B200", 8), ("H100-SXM", 8)),
            ("kimi-k2", ("H200", 8), ("H100-SXM", 8)),
            ("qwen3-235b-a22b", ("H100-SXM", 8), ("H100-SXM", 4)),
            ("qwen3-30b-a3b", ("H100-SXM", 1), ("L40S", 1)),
            ("qwen3-8b", ("L4", 1), ("T4", 1)),
            ("gpt-oss-120b", ("H100-SXM", 1), ("L40S", 1)),
            ("gpt-oss-20b", ("L4", 1), ("T4", 1)),
            ("llama-4-scout", ("H100-SXM", 4), ("H100-SXM", 2)),
            ("llama-4-maverick", ("H200", 8), ("H100-SXM", 8)),
            ("glm-4.7", ("H200", 8), ("H100-SXM", 8)),
            ("minimax-m2.5", ("RTX-PRO-6000", 4), ("RTX-PRO-6000", 2)),
            ("minimax-m2.5", ("B200", 2), ("B200", 1)),
        ];
        for (model, (card, tp), (small, small_tp)) in cases {
            let ok = fit(model, card, tp);
            assert!(ok.is_ok(), "{model} on {tp} × {card}: {ok:?}");
            let no = fit(model, small, small_tp);
            assert!(
                no.is_err(),
                "{model} should not fit on {small_tp} × {small}: {no:?}"
            );
        }
        // DeepSeek's latent cache: 61 layers × (512 + 64) values × 2 bytes, on every card.
        let r1 = fit("deepseek-r1", "H200", 8).unwrap();
        assert_eq!(r1.kv_bytes_per_token, 61.0 * 576.0 * 2.0);
        assert_eq!(r1.kv_bytes_per_token_per_card, r1.kv_bytes_per_token);
        assert!((r1.weights_gb - 671.0).abs() < 1.0, "{}", r1.weights_gb);
        // GLM-5's sparse attention keeps its indexer's keys beside the latent: 78 layers of
        // 576 latent values and a 128-wide FP8 key with one FP32 scale (SGLang's and vLLM's
        // layout), whatever the latent's format.
        let glm = fit("glm-5", "B200", 8).unwrap();
        assert_eq!(glm.kv_bytes_per_token, 78.0 * (576.0 * 2.0 + 132.0));
        assert!((glm.weights_gb - 744.0).abs() < 1.0, "{}", glm.weights_gb);
        // gpt-oss-120b: BF16 except its MXFP4 experts — about 65 GB on disk (counted here at
        // NVFP4's 4.5 bits, a few GB over); half its layers keep a 128-token window.
        let oss = fit("gpt-oss-120b", "H100-SXM", 1).unwrap();
        assert!((60.0..72.0).contains(&oss.weights_gb), "{}", oss.weights_gb);
        let full = 36.0 * 2.0 * 8.0 * 64.0 * 2.0;
        let expected = full / 2.0 + full / 2.0 * 128.0 / 4096.0;
        assert!((oss.kv_bytes_per_token - expected).abs() < 1e-6);
        // MiniMax-M2.5: 62 layers × 8 KV heads × 128 × K and V × 2 bytes, the guide's "240 GB
        // per 1 M tokens" (254 GB, 236.5 GiB); on four 96 GB cards its guide counts 400 K
        // tokens of KV, where the fit's 1 GiB reserve for activations leaves somewhat more.
        let minimax = fit("minimax-m2.5", "RTX-PRO-6000", 4).unwrap();
        assert_eq!(minimax.kv_bytes_per_token, 62.0 * 8.0 * 128.0 * 2.0 * 2.0);
        assert_eq!(
            minimax.kv_bytes_per_token_per_card,
            minimax.kv_bytes_per_token / 4.0
        );
        assert!(
            (minimax.weights_gb - 230.0).abs() < 0.5,
            "{}",
            minimax.weights_gb
        );
        assert!(
            (400_000..600_000).contains(&minimax.kv_tokens),
            "{}",
            minimax.kv_tokens
        );
        // Kimi-K2.5: BF16 except its INT4 experts — 1014.7 B expert weights at 4 bits and
        // 12.1 B at 16: 532 GB, under the checkpoint's ~595 GB (the experts' BF16 scale per
        // 32 weights is not counted). Its guide serves it on one H200 node at TP 8, vLLM's
        // context then the model's 256 K tokens: that sequence's latent cache (17 GiB on every
        // card) fits there beside the weights, not on half the node nor on eight 80 GB cards.
        // (At the default 4 K context the 4-bit count would let half the node through.)
        let kimi = fit("kimi-k2.5", "H200", 8).unwrap();
        assert_eq!(kimi.dtype, Dtype::Bf16);
        assert_eq!(kimi.expert_dtype, Dtype::Int4);
        assert!(
            (525.0..540.0).contains(&kimi.weights_gb),
            "{}",
            kimi.weights_gb
        );
        assert_eq!(kimi.kv_bytes_per_token, 61.0 * 576.0 * 2.0);
        let long = |card: &str, tp: u32| {
            memory_fit(
                catalog.model("kimi-k2.5").unwrap(),
                catalog.card(card).unwrap(),
                tp,
                &MemoryOptions {
                    context_tokens: Some(262_144),
                    ..MemoryOptions::default()
                },
            )
        };
        assert!(long("H200", 8).is_ok(), "{:?}", long("H200", 8));
        for (card, tp) in [("H200", 4), ("H100-SXM", 8)] {
            let no = long(card, tp);
            assert!(no.is_err(), "kimi-k2.5 at 256 K on {tp} × {card}: {no:?}");
        }
        // Asked for another format, the experts take it too.
        let bf16 = memory_fit(
            catalog.model("gpt-oss-120b").unwrap(),
            catalog.card("H200").unwrap(),
            2,
            &MemoryOptions {
                dtype: Some(Dtype::Bf16),
                ..MemoryOptions::default()
            },
        )
        .unwrap();
        assert!(
            (bf16.weights_gb - 2.0 * 116.8).abs() < 0.5,
            "{}",
            bf16.weights_gb
        );
    }

    /// Expert parallelism spreads only the experts, attention replicas each keep their own
    /// KV cache, pipeline stages hold a share of everything: DeepSeek-R1 (FP8, latent KV on
    /// every card) on eight H200s, worked through by hand.
    #[test]
    fn layouts_split_weights_and_cache_by_axis() {
        let catalog = crate::catalog::Catalog::shipped().unwrap();
        let r1 = catalog.model("deepseek-r1").unwrap();
        let h200 = catalog.card("H200").unwrap();
        let fit = |parallel: Parallelism| {
            memory_fit_layout(r1, h200, &parallel, &MemoryOptions::default()).unwrap()
        };
        let tp8 = fit(Parallelism::tensor(8));
        let ep8 = fit(Parallelism {
            ep: 8,
            ..Parallelism::tensor(8)
        });
        let dp8 = fit(Parallelism {
            tp: 1,
            pp: 1,
            dp: 8,
            ep: 8,
        });
        // TP8 and TP8 EP8 put the same bytes on each card (EP only regroups the experts).
        assert!((tp8.weights_gib_per_card - ep8.weights_gib_per_card).abs() < 1e-9);
        // Attention data parallelism replicates the non-expert weights on every card.
        let experts = r1.routed_expert_params();
        let shared_gib = (r1.params() - experts) * tp8.dtype.bytes() / GIB;
        let expected = shared_gib + experts * tp8.expert_dtype.bytes() / GIB / 8.0;
        assert!((dp8.weights_gib_per_card - expected).abs() < 1e-6);
        assert!(dp8.weights_gib_per_card > tp8.weights_gib_per_card);
        // Latent KV is one copy per card whatever the tp: eight replicas hold eight caches,
        // each a little smaller (more weight per card), so ~8 × TP8's tokens.
        let ratio = dp8.kv_tokens as f64 / tp8.kv_tokens as f64;
        let per_card = dp8.kv_gib_per_card / tp8.kv_gib_per_card;
        assert!(
            (ratio - 8.0 * per_card).abs() < 0.01,
            "{ratio} vs {per_card}"
        );
        // Two pipeline stages of TP8 over 16 H100s: half the weights and half the KV per
        // card and token.
        let h100 = catalog.card("H100-SXM").unwrap();
        let pp2 = memory_fit_layout(
            r1,
            h100,
            &Parallelism {
                pp: 2,
                ..Parallelism::tensor(8)
            },
            &MemoryOptions::default(),
        )
        .unwrap();
        let whole = pp2.weights_gib * GIB / GIB;
        assert!((pp2.weights_gib_per_card - whole / 16.0).abs() < 1e-6);
        assert!((pp2.kv_bytes_per_token_per_card - pp2.kv_bytes_per_token / 2.0).abs() < 1e-9);
        // One stage alone does not fit eight H100s.
        assert!(
            memory_fit_layout(r1, h100, &Parallelism::tensor(8), &MemoryOptions::default())
                .is_err()
        );
    }
}
