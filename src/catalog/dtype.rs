//! Numeric formats of weights and KV cache, and their size.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::InputError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    Fp32,
    Fp16,
    Bf16,
    Fp8,
    Int8,
    Int4,
}

impl Dtype {
    pub fn bytes(self) -> f64 {
        match self {
            Dtype::Fp32 => 4.0,
            Dtype::Fp16 | Dtype::Bf16 => 2.0,
            Dtype::Fp8 | Dtype::Int8 => 1.0,
            Dtype::Int4 => 0.5,
        }
    }
}

impl FromStr for Dtype {
    type Err = InputError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "fp32" | "float32" => Ok(Dtype::Fp32),
            "fp16" | "float16" | "half" => Ok(Dtype::Fp16),
            "bf16" | "bfloat16" => Ok(Dtype::Bf16),
            "fp8" | "float8" => Ok(Dtype::Fp8),
            "int8" | "w8" => Ok(Dtype::Int8),
            "int4" | "w4" | "awq" | "gptq" => Ok(Dtype::Int4),
            _ => Err(InputError::value(format!(
                "unknown dtype '{text}': use fp32, fp16, bf16, fp8, int8 or int4"
            ))),
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Dtype::Fp32 => "fp32",
            Dtype::Fp16 => "fp16",
            Dtype::Bf16 => "bf16",
            Dtype::Fp8 => "fp8",
            Dtype::Int8 => "int8",
            Dtype::Int4 => "int4",
        };
        f.write_str(name)
    }
}
