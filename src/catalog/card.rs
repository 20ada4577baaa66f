//! Accelerator cards as sold: memory, bandwidth, compute, links, power.

use serde::{Deserialize, Serialize};

/// One accelerator model. Numbers are per card, from the `source` named in the catalog.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Card {
    pub name: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    pub vendor: String,
    /// Device memory in GiB (as marketed: "80 GB" cards are counted as 80 GiB).
    pub memory_gib: f64,
    /// Memory bandwidth in GB/s (10^9 bytes per second).
    pub hbm_bandwidth_gbs: f64,
    /// Dense FP16/BF16 tensor TFLOP/s, without sparsity.
    pub fp16_tflops: f64,
    /// Dense FP8 TFLOP/s where the card has FP8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8_tflops: Option<f64>,
    /// Dense FP4 TFLOP/s (NVFP4/MXFP4) where the card has FP4 tensor cores (Blackwell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp4_tflops: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int8_tops: Option<f64>,
    /// The card-to-card link of its usual deployment: nvlink, pcie, infinity-fabric, hccs, roce
    /// (Ethernet ports on the accelerator, as on Intel Gaudi).
    pub interconnect: String,
    /// Card-to-card bandwidth per card as the vendor quotes it (both directions), GB/s.
    pub link_bandwidth_gbs: f64,
    pub pcie_gen: u32,
    pub tdp_w: f64,
    pub form_factor: String,
    pub release_year: u32,
    pub source: String,
    /// The system whose measured operator timings describe this card
    /// (`hardware/operators/<system>/`), e.g. `h100_sxm`; absent when none were measured —
    /// then predictions use the roofline and say so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operators: Option<String>,
    /// Performance-model efficiency factors for this card, where they differ from the defaults
    /// (see `capplan::sim::perf::Efficiency`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency: Option<EfficiencyOverrides>,
}

/// Efficiency factors a catalog entry may set; unset ones keep the performance model's defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EfficiencyOverrides {
    pub compute: Option<f64>,
    pub memory: Option<f64>,
    pub link: Option<f64>,
    pub link_latency_us: Option<f64>,
    pub step_overhead_ms: Option<f64>,
    pub seq_overhead_ms: Option<f64>,
}

impl Card {
    pub fn memory_bytes(&self) -> f64 {
        self.memory_gib * super::GIB
    }

    /// What one of `instances` sharing this card gets: its share of memory (each server
    /// process holds its own weights and buffers; memory is partitioned, not pooled).
    pub fn shared_by(&self, instances: u32) -> Card {
        let mut share = self.clone();
        share.memory_gib /= f64::from(instances.max(1));
        share
    }
}
