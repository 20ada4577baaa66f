//! Which grouped-query shapes an engine's decode attention has a kernel for, and what the
//! others cost.
//!
//! A grouped-query decode kernel (TensorRT-LLM's XQA, FlashInfer's, FlashAttention's) loads
//! each KV head once for all the query heads that share it. TensorRT-LLM before 1.0 shipped
//! XQA precompiled for a few shapes only; every other shape decodes with masked multi-head
//! attention, which runs one thread block per query head, each streaming its group's KV head
//! on its own. How many of those repeated streams the L2 cache catches depends on how the
//! blocks of a group line up in time. A small group's blocks are launched side by side and
//! find their KV head still in L2; a large group's spread over several waves of the GPU, and
//! the later ones find it evicted. So the share of the re-reads that reaches memory grows with
//! the group: g / (g + h) for g re-reads per KV head, with h the group at which half of them
//! miss. No datasheet gives h: it is fitted, with the engine's overheads, on the rows each
//! source fits on. (One share for every shape was tried first: TensorRT-LLM 0.9's static
//! batches want about 0.6 for Falcon-180B's 29 query heads per KV head and about 0.2 for the
//! 4 of Mistral and Mixtral, which g / (g + h) gives with one h.)

use serde::{Deserialize, Serialize};

use super::Model;

/// The shapes an engine's grouped-query decode kernel was built for (an engine profile's
/// `grouped_decode`; without one every shape has such a kernel).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupedDecodeKernels {
    /// Head sizes the kernel was built for.
    pub head_dims: Vec<u32>,
    /// Query heads per KV head on one card the kernel was built for.
    pub query_heads_per_kv: Vec<u32>,
    /// Of the extra KV reads a masked-MHA fallback makes (one stream per query head where one
    /// per KV head would do), how many per KV head it takes before half of them reach memory
    /// rather than the L2 cache: with g of them, g / (g + h) do. 0 reads each KV head once per
    /// query head; the larger h, the more the L2 cache catches.
    pub reread_half_group: f64,
    /// Where the kernel list comes from, and what the share was fitted on.
    pub source: String,
}

impl GroupedDecodeKernels {
    /// Whether a layout with `head_dim`-wide heads and `ratio` query heads per KV head on a
    /// card has a grouped kernel.
    pub fn covers(&self, head_dim: u32, ratio: f64) -> bool {
        self.head_dims.contains(&head_dim)
            && self
                .query_heads_per_kv
                .iter()
                .any(|&built| (f64::from(built) - ratio).abs() < 1e-6)
    }

    /// How many times a decode step reads each cached KV position of `model` on `tp` cards,
    /// in reads of every KV head once: 1 where a grouped kernel covers the layout or the model
    /// has one query head per KV head (or latent attention, which has kernels of its own),
    /// else 1 + g × [`reread_share`](Self::reread_share)(g), g = query heads per KV head − 1.
    pub fn kv_reads(&self, model: &Model, tp: u32) -> f64 {
        if model.latent().is_some() {
            return 1.0;
        }
        let tp = f64::from(tp.max(1));
        let query_heads = f64::from(model.heads) / tp;
        // Fewer KV heads than cards: each card keeps a copy of one.
        let kv_heads = (f64::from(model.kv_heads) / tp).max(1.0);
        let ratio = query_heads / kv_heads;
        if ratio <= 1.0 || self.covers(model.head_dim, ratio) {
            1.0
        } else {
            let group = ratio - 1.0;
            1.0 + group * self.reread_share(group)
        }
    }

    /// The share of `group` re-reads per KV head that reaches memory: g / (g + h).
    pub fn reread_share(&self, group: f64) -> f64 {
        let half = self.reread_half_group.max(0.0);
        if group <= 0.0 {
            0.0
        } else {
            group / (group + half)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    fn xqa_0x(half_group: f64) -> GroupedDecodeKernels {
        GroupedDecodeKernels {
            head_dims: vec![128, 256],
            query_heads_per_kv: vec![8],
            reread_half_group: half_group,
            source: "test".into(),
        }
    }

    #[test]
    fn only_the_shapes_without_a_grouped_kernel_read_their_kv_more_than_once() {
        let catalog = Catalog::shipped().unwrap();
        let model = |name: &str| catalog.model(name).unwrap();
        let kernels = xqa_0x(3.0);
        // Llama-2-70B: 64 query heads over 8 KV heads, 128 wide: 8 per KV head on any TP.
        assert_eq!(kernels.kv_reads(model("llama-2-70b"), 1), 1.0);
        assert_eq!(kernels.kv_reads(model("llama-2-70b"), 8), 1.0);
        // Llama-2-7B has a KV head per query head: nothing to share, nothing re-read.
        assert_eq!(kernels.kv_reads(model("llama-2-7b"), 1), 1.0);
        // Mistral-7B: 4 query heads per KV head, no kernel: 3 extra streams, h = 3, so half
        // of them reach memory.
        assert!((kernels.kv_reads(model("mistral-7b"), 1) - 2.5).abs() < 1e-9);
        // Falcon-180B: 232 over 8, 64 wide: 29 per KV head on every TP; 28 re-reads, of
        // which 28/31 miss the cache.
        let falcon = 1.0 + 28.0 * 28.0 / 31.0;
        assert!((kernels.kv_reads(model("falcon-180b"), 8) - falcon).abs() < 1e-9);
        assert!((kernels.kv_reads(model("falcon-180b"), 4) - falcon).abs() < 1e-9);
        // A larger group misses the cache with a larger share of its re-reads.
        assert!(kernels.reread_share(28.0) > kernels.reread_share(3.0));
        // h bounds the re-reads: at 0 every one reaches memory; the larger h, the fewer.
        assert!((xqa_0x(0.0).kv_reads(model("falcon-180b"), 8) - 29.0).abs() < 1e-9);
        assert!(xqa_0x(1e9).kv_reads(model("falcon-180b"), 8) < 1.0 + 1e-6);
    }
}
