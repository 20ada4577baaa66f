//! Maps keyed by request id, hashed cheaply.
//!
//! The engine and the virtual-time driver look requests up by id several times per request,
//! and a prediction simulates hundreds of thousands of requests. The ids are sequential
//! numbers the simulation hands out itself, so the standard map's SipHash (a defence against
//! keys chosen to collide) buys nothing here, and it cost about a tenth of a prediction's
//! time. A map's iteration order is never part of a simulated result.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map from request id to `V`, hashed by [`IdHasher`].
pub type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// An empty [`IdMap`] with room for `capacity` requests.
pub fn id_map<V>(capacity: usize) -> IdMap<V> {
    HashMap::with_capacity_and_hasher(capacity, BuildHasherDefault::default())
}

/// One multiplication by an odd constant (Fibonacci hashing): sequential ids spread over
/// every bit the map's buckets and control bytes read.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

const MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(MULTIPLIER);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = (self.0.rotate_left(8) ^ id).wrapping_mul(MULTIPLIER);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_are_kept_apart() {
        let mut map: IdMap<u64> = id_map(0);
        for id in 0..10_000 {
            map.insert(id, id * 2);
        }
        assert_eq!(map.len(), 10_000);
        assert!((0..10_000).all(|id| map.get(&id) == Some(&(id * 2))));
        assert_eq!(map.remove(&4_321), Some(8_642));
        assert!(!map.contains_key(&4_321));
    }
}
