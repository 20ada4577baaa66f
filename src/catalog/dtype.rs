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
    /// 4-bit floating point with block scales (NVFP4, MXFP4): Blackwell tensor cores.
    Fp4,
    Int8,
    /// 4-bit integer weights (AWQ, GPTQ): weight-only, dequantised to 16 bits for the matmul.
    Int4,
}

impl Dtype {
    pub fn bytes(self) -> f64 {
        match self {
            Dtype::Fp32 => 4.0,
            Dtype::Fp16 | Dtype::Bf16 => 2.0,
            Dtype::Fp8 | Dtype::Int8 => 1.0,
            // NVFP4: 4 bits plus one FP8 scale per 16 values.
            Dtype::Fp4 => 0.5625,
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
            "fp8" | "float8" | "fp8_block" | "fp8-block" => Ok(Dtype::Fp8),
            "fp4" | "nvfp4" | "mxfp4" => Ok(Dtype::Fp4),
            "int8" | "w8" => Ok(Dtype::Int8),
            "int4" | "w4" | "awq" | "gptq" => Ok(Dtype::Int4),
            _ => Err(InputError::value(format!(
                "unknown dtype '{text}': use fp32, fp16, bf16, fp8, fp4, int8 or int4 (awq, gptq)"
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
            Dtype::Fp4 => "fp4",
            Dtype::Int8 => "int8",
            Dtype::Int4 => "int4",
        };
        f.write_str(name)
    }
}

impl Dtype {
    /// Whether `card` computes in this format natively, or why not. 16- and 32-bit formats
    /// run everywhere (engines cast bf16 to fp16 on cards without bf16); int4 is weight-only
    /// (dequantised to 16 bits for the matmul) and runs wherever 16-bit does.
    pub fn runs_on(self, card: &super::Card) -> Result<(), String> {
        let missing = |what: &str, needs: &str| {
            Err(format!(
                "{} has no {what} tensor cores, so it cannot run {self} weights and activations \
                 natively ({needs}); use --dtype fp16, or int4 for weight-only quantisation",
                card.name
            ))
        };
        match self {
            Dtype::Fp32 | Dtype::Fp16 | Dtype::Bf16 | Dtype::Int4 => Ok(()),
            Dtype::Fp8 if card.fp8_tflops.is_some() => Ok(()),
            Dtype::Fp8 => missing("FP8", "FP8 needs Hopper, Ada, Blackwell or CDNA3"),
            Dtype::Fp4 if card.fp4_tflops.is_some() => Ok(()),
            Dtype::Fp4 => missing("FP4", "FP4 needs Blackwell"),
            Dtype::Int8 if card.int8_tops.is_some() => Ok(()),
            Dtype::Int8 => missing("INT8", "W8A8 needs INT8 tensor cores"),
        }
    }
}
