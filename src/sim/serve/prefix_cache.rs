//! The simulated server's prefix cache: which KV blocks of earlier prompts it still holds.
//!
//! A prompt is cut into blocks of the engine's block size (in the server's tokens: words, or
//! token ids); each block is named by a hash chained over everything before it, as vLLM's and
//! TensorRT-LLM's block managers name theirs, so a block matches only when the whole prefix up
//! to it does. A request reuses its leading blocks that are cached; the engine then prefills
//! only the rest. The cache holds as many blocks as the KV cache does and forgets the least
//! recently used first — a simplification of the real engines, whose cached blocks live in
//! the free part of the KV pool and go when a running request needs the space.

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};

pub struct PrefixCache {
    block: usize,
    capacity: usize,
    /// Block hash → when it was last used.
    used: HashMap<u64, u64>,
    /// When → block hash: the least recently used first.
    order: BTreeMap<u64, u64>,
    clock: u64,
}

impl PrefixCache {
    /// A cache of `capacity_tokens` positions in blocks of `block_tokens`.
    pub fn new(block_tokens: u64, capacity_tokens: u64) -> PrefixCache {
        let block = block_tokens.max(1) as usize;
        PrefixCache {
            block,
            capacity: (capacity_tokens as usize / block).max(1),
            used: HashMap::new(),
            order: BTreeMap::new(),
            clock: 0,
        }
    }

    /// The chained hashes of `units`' whole blocks.
    pub fn block_hashes<T: Hash>(&self, units: &[T]) -> Vec<u64> {
        let mut hashes = Vec::with_capacity(units.len() / self.block);
        let mut previous = 0u64;
        for block in units.chunks_exact(self.block) {
            let mut hasher = DefaultHasher::new();
            previous.hash(&mut hasher);
            block.hash(&mut hasher);
            previous = hasher.finish();
            hashes.push(previous);
        }
        hashes
    }

    /// Tokens of a prompt with these block hashes already cached (its leading blocks that are
    /// held), and remembers all of its blocks as just used.
    pub fn reuse(&mut self, hashes: &[u64]) -> u64 {
        let hits = hashes
            .iter()
            .take_while(|hash| self.used.contains_key(hash))
            .count();
        for &hash in hashes {
            self.clock += 1;
            if let Some(old) = self.used.insert(hash, self.clock) {
                self.order.remove(&old);
            }
            self.order.insert(self.clock, hash);
        }
        while self.used.len() > self.capacity {
            let Some((_, hash)) = self.order.pop_first() else {
                break;
            };
            self.used.remove(&hash);
        }
        (hits * self.block) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_matches_only_behind_the_same_prefix() {
        let mut cache = PrefixCache::new(4, 1_000);
        let shared: Vec<u32> = (0..8).collect();
        let first: Vec<u32> = shared.iter().copied().chain([100, 101, 102, 103]).collect();
        let second: Vec<u32> = shared.iter().copied().chain([200, 201, 202, 203]).collect();
        assert_eq!(cache.reuse(&cache.block_hashes(&first)), 0, "a cold cache");
        assert_eq!(
            cache.reuse(&cache.block_hashes(&second)),
            8,
            "two shared blocks"
        );
        assert_eq!(
            cache.reuse(&cache.block_hashes(&first)),
            12,
            "all of a repeat"
        );
        // The same third block behind a different first block does not match.
        let moved: Vec<u32> = [9, 9, 9, 9, 4, 5, 6, 7].to_vec();
        assert_eq!(cache.reuse(&cache.block_hashes(&moved)), 0);
        // A partial last block is never cached.
        assert_eq!(cache.block_hashes(&[1u32, 2, 3, 4, 5]).len(), 1);
    }

    #[test]
    fn the_least_recently_used_blocks_go_first() {
        // Room for two blocks of 2.
        let mut cache = PrefixCache::new(2, 4);
        let a = cache.block_hashes(&[1u32, 1]);
        let b = cache.block_hashes(&[2u32, 2]);
        let c = cache.block_hashes(&[3u32, 3]);
        cache.reuse(&a);
        cache.reuse(&b);
        assert_eq!(cache.reuse(&a), 2, "a is used again, b is now the oldest");
        cache.reuse(&c);
        assert_eq!(cache.reuse(&a), 2);
        assert_eq!(cache.reuse(&b), 0, "b was evicted");
    }
}
