//! Model architectures: what decides weight and KV-cache memory and compute per token.

use serde::{Deserialize, Serialize};

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

impl Model {
    /// A decoder LLM: has a KV cache, and capplan's engine can simulate it.
    pub fn generates_text(&self) -> bool {
        self.task == TEXT_GENERATION
    }

    pub fn params(&self) -> f64 {
        self.params_b * 1e9
    }

    /// Whether the MLP has a gate projection beside its up projection (SwiGLU).
    pub fn gated_mlp(&self) -> bool {
        self.mlp.as_deref() != Some("plain")
    }
}
