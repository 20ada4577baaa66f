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
    /// Total parameters, billions.
    pub params_b: f64,
    /// Parameters active per token (mixture-of-experts models), billions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_params_b: Option<f64>,
    pub layers: u32,
    pub hidden_size: u32,
    pub intermediate_size: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    pub vocab_size: u32,
    pub max_context: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts_per_token: Option<u32>,
    pub dtype: String,
    pub source: String,
}

impl Model {
    pub fn params(&self) -> f64 {
        self.params_b * 1e9
    }
}
