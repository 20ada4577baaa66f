//! A simulated instance's prefix cache: which KV blocks of earlier prompts it still holds
//! (`capplan serve`'s, and a virtual run's when its client repeats prompts).
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

/// The chained hashes of `units`' whole blocks of `block` units.
pub fn block_hashes<T: Hash>(units: &[T], block: usize) -> Vec<u64> {
    let block = block.max(1);
    let mut hashes = Vec::with_capacity(units.len() / block);
    let mut previous = 0u64;
    for chunk in units.chunks_exact(block) {
        let mut hasher = DefaultHasher::new();
        previous.hash(&mut hasher);
        chunk.hash(&mut hasher);
        previous = hasher.finish();
        hashes.push(previous);
    }
    hashes
}

/// The blocks held, by hash; the caller hashes prompts ([`block_hashes`]) outside its lock.
pub struct PrefixCache {
    capacity: usize,
    /// Block hash → when it was last used.
    used: HashMap<u64, u64>,
    /// When → block hash: the least recently used first.
    order: BTreeMap<u64, u64>,
    clock: u64,
}

impl PrefixCache {
    /// A cache of `capacity_blocks` blocks.
    pub fn new(capacity_blocks: u64) -> PrefixCache {
        PrefixCache {
            capacity: (capacity_blocks as usize).max(1),
            used: HashMap::new(),
            order: BTreeMap::new(),
            clock: 0,
        }
    }

    /// How many of a prompt's leading blocks (these hashes) are cached; remembers all of
    /// its blocks as just used.
    pub fn reuse(&mut self, hashes: &[u64]) -> usize {
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
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_matches_only_behind_the_same_prefix() {
        let mut cache = PrefixCache::new(250);
        let shared: Vec<u32> = (0..8).collect();
        let first: Vec<u32> = shared.iter().copied().chain([100, 101, 102, 103]).collect();
        let second: Vec<u32> = shared.iter().copied().chain([200, 201, 202, 203]).collect();
        assert_eq!(cache.reuse(&block_hashes(&first, 4)), 0, "a cold cache");
        assert_eq!(
            cache.reuse(&block_hashes(&second, 4)),
            2,
            "two shared blocks"
        );
        assert_eq!(cache.reuse(&block_hashes(&first, 4)), 3, "all of a repeat");
        // The same third block behind a different first block does not match.
        let moved: Vec<u32> = [9, 9, 9, 9, 4, 5, 6, 7].to_vec();
        assert_eq!(cache.reuse(&block_hashes(&moved, 4)), 0);
        // A partial last block is never cached.
        assert_eq!(block_hashes(&[1u32, 2, 3, 4, 5], 4).len(), 1);
    }

    #[test]
    fn the_least_recently_used_blocks_go_first() {
        // Room for two blocks of 2.
        let mut cache = PrefixCache::new(2);
        let a = block_hashes(&[1u32, 1], 2);
        let b = block_hashes(&[2u32, 2], 2);
        let c = block_hashes(&[3u32, 3], 2);
        cache.reuse(&a);
        cache.reuse(&b);
        assert_eq!(cache.reuse(&a), 1, "a is used again, b is now the oldest");
        cache.reuse(&c);
        assert_eq!(cache.reuse(&a), 1);
        assert_eq!(cache.reuse(&b), 0, "b was evicted");
    }
}
