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

use super::{Card, Dtype, Model, GIB};

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
}

impl Default for MemoryOptions {
    fn default() -> Self {
        MemoryOptions {
            dtype: None,
            kv_dtype: None,
            memory_utilization: 0.9,
            reserve_gib: 1.0,
            context_tokens: None,
        }
    }
}

/// The memory picture of one serving instance: `model` over `tp` cards of `card`.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryFit {
    pub model: String,
    pub card: String,
    pub tp: u32,
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
    /// Tokens of KV cache the whole instance holds.
    pub kv_tokens: u64,
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

/// Fits `model` on `tp` cards of `card`, or says why it does not fit.
pub fn memory_fit(
    model: &Model,
    card: &Card,
    tp: u32,
    options: &MemoryOptions,
) -> Result<MemoryFit, LayoutRejected> {
    if let Some(reason) = tp_problem(model, tp) {
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
    let weights = (model.params() - experts) * dtype.bytes() + experts * expert_dtype.bytes();
    let format = if expert_dtype == dtype || experts == 0.0 {
        dtype.to_string()
    } else {
        format!("{dtype}, experts {expert_dtype}")
    };
    let weights_per_card = weights / f64::from(tp);
    let usable = card.memory_bytes() * options.memory_utilization;
    let reserve = options.reserve_gib * GIB;
    let kv_budget = usable - weights_per_card - reserve;

    let context_tokens = options
        .context_tokens
        .unwrap_or_else(|| model.default_context());
    let (kv_per_token, kv_per_token_per_card) =
        model.kv_bytes_per_token(kv_dtype.bytes(), tp, context_tokens);
    // A model without a KV cache (an image classifier) needs room for its weights only.
    let kv_tokens = if kv_per_token_per_card == 0.0 {
        0
    } else if kv_budget > 0.0 {
        (kv_budget / kv_per_token_per_card).floor() as u64
    } else {
        0
    };

    let fit = MemoryFit {
        model: model.name.clone(),
        card: card.name.clone(),
        tp,
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
        context_tokens,
    };

    if kv_budget <= 0.0 {
        return Err(LayoutRejected {
            reason: format!(
                "{} ({format}) needs {:.1} GB of weights, {:.1} GiB per card at tp {tp}, plus {:.1} GiB reserve; \
                 {tp} × {} have {:.0} GiB, {:.1} GiB usable per card at memory utilisation {:.2}",
                model.name,
                fit.weights_gb,
                fit.weights_gib_per_card,
                fit.reserve_gib,
                card.name,
                card.memory_gib * f64::from(tp),
                fit.usable_gib_per_card,
                fit.memory_utilization,
            ),
        });
    }
    if model.generates_text() && kv_tokens < u64::from(context_tokens) {
        return Err(LayoutRejected {
            reason: format!(
                "{} ({format}) on {tp} × {} leaves {:.2} GiB per card for KV cache: {kv_tokens} tokens, \
                 less than one {context_tokens}-token sequence",
                model.name, card.name, fit.kv_gib_per_card,
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
    /// 16 GB; Qwen3-235B-A22B in BF16 needs eight H100s.
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
            ("kimi-k2", ("H200", 8), ("H100-SXM", 8)),
            ("qwen3-235b-a22b", ("H100-SXM", 8), ("H100-SXM", 4)),
            ("qwen3-30b-a3b", ("H100-SXM", 1), ("L40S", 1)),
            ("qwen3-8b", ("L4", 1), ("T4", 1)),
            ("gpt-oss-120b", ("H100-SXM", 1), ("L40S", 1)),
            ("gpt-oss-20b", ("L4", 1), ("T4", 1)),
            ("llama-4-scout", ("H100-SXM", 4), ("H100-SXM", 2)),
            ("llama-4-maverick", ("H200", 8), ("H100-SXM", 8)),
            ("glm-4.7", ("H200", 8), ("H100-SXM", 8)),
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
        // gpt-oss-120b: BF16 except its MXFP4 experts — about 65 GB on disk (counted here at
        // NVFP4's 4.5 bits, a few GB over); half its layers keep a 128-token window.
        let oss = fit("gpt-oss-120b", "H100-SXM", 1).unwrap();
        assert!((60.0..72.0).contains(&oss.weights_gb), "{}", oss.weights_gb);
        let full = 36.0 * 2.0 * 8.0 * 64.0 * 2.0;
        let expected = full / 2.0 + full / 2.0 * 128.0 / 4096.0;
        assert!((oss.kv_bytes_per_token - expected).abs() < 1e-6);
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
}
