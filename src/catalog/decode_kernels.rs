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
    /// Share of the card's memory bandwidth one decode thread block streams a KV head at,
    /// when the kernels run without multi-block mode (an engine-build option of TensorRT-LLM
    /// 0.x, off by default): then XQA launches one block per KV head per sequence, and masked
    /// MHA one per query head, and each block streams its sequence's whole history alone. A few sequences
    /// leave most of the GPU idle and a step's attention takes at least one block's stream of
    /// the history, however little the batch reads in all. 0 (the default): the kernels split
    /// long histories over several blocks, as flash-decoding does, and no such floor exists.
    #[serde(default)]
    pub block_stream_share: f64,
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
        let query_heads = f64::from(model.heads) / f64::from(tp.max(1));
        let ratio = query_heads / kv_heads_per_card(model, tp);
        if ratio <= 1.0 || self.covers(model.head_dim, ratio) {
            1.0
        } else {
            let group = ratio - 1.0;
            1.0 + group * self.reread_share(group)
        }
    }

    /// One block's stream of a decode history, where the kernels run one block per KV head
    /// per sequence (`block_stream_share` above 0): the KV heads each card holds of `model` on
    /// `tp` cards, and the bytes per second one block reads on a card of `hbm_gbs`. `None` for
    /// kernels that split histories, and for latent attention (kernels of its own).
    pub fn block_stream(&self, model: &Model, tp: u32, hbm_gbs: f64) -> Option<BlockStream> {
        if self.block_stream_share <= 0.0 || model.latent().is_some() {
            return None;
        }
        Some(BlockStream {
            kv_heads_per_card: kv_heads_per_card(model, tp),
            bytes_per_s: self.block_stream_share * hbm_gbs * 1e9,
        })
    }

    /// In words, for a prediction's heading: which shapes have the grouped kernel, what the
    /// others re-read, and the single-block floor where there is one.
    pub fn describe(&self) -> String {
        let list = |values: &[u32]| {
            values
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" or ")
        };
        let mut text = format!(
            "a grouped-query kernel for {}-wide heads at {} query heads per KV head only; \
             other shapes use masked multi-head attention, which reads each KV head once per \
             query head (half of a KV head's re-reads miss the L2 cache once there are {:.2})",
            list(&self.head_dims),
            list(&self.query_heads_per_kv),
            self.reread_half_group,
        );
        if self.block_stream_share > 0.0 {
            text.push_str(&format!(
                "; one thread block per KV head per sequence (no multi-block mode), so a decode \
                 step lasts at least one block's stream of the history, at {:.1} % of the card's \
                 memory bandwidth",
                100.0 * self.block_stream_share
            ));
        }
        text
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

/// The KV heads one of `tp` cards holds of `model`: fewer KV heads than cards leave each card a
/// copy of one.
fn kv_heads_per_card(model: &Model, tp: u32) -> f64 {
    (f64::from(model.kv_heads) / f64::from(tp.max(1))).max(1.0)
}

/// How a decode kernel that runs one thread block per KV head per sequence reads: a step's
/// attention lasts at least one block's stream of the history (see
/// [`GroupedDecodeKernels::block_stream_share`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BlockStream {
    /// KV heads on one card: a block streams this share of a position's cached bytes.
    pub kv_heads_per_card: f64,
    /// Bytes per second one block reads.
    pub bytes_per_s: f64,
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
            block_stream_share: 0.0,
            source: "test".into(),
        }
    }

    /// The stream is per KV head on a card (at least one: a card of a TP wider than the KV
    /// heads keeps a copy of one), at the share of the card's bandwidth; kernels that split
    /// histories, and latent attention, have none.
    #[test]
    fn a_block_streams_one_kv_head_at_its_share_of_the_bandwidth() {
        let catalog = Catalog::shipped().unwrap();
        let model = |name: &str| catalog.model(name).unwrap();
        assert_eq!(
            xqa_0x(3.0).block_stream(model("llama-2-70b"), 8, 2039.0),
            None
        );
        let kernels = GroupedDecodeKernels {
            block_stream_share: 0.015,
            ..xqa_0x(3.0)
        };
        let stream = kernels
            .block_stream(model("llama-2-70b"), 4, 2039.0)
            .unwrap();
        assert_eq!(stream.kv_heads_per_card, 2.0);
        assert!((stream.bytes_per_s - 0.015 * 2039e9).abs() < 1.0);
        let stream = kernels
            .block_stream(model("llama-2-70b"), 16, 2039.0)
            .unwrap();
        assert_eq!(stream.kv_heads_per_card, 1.0);
        assert_eq!(kernels.block_stream(model("deepseek-v3"), 8, 4800.0), None);
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
