//! [`IdMap`], the one map type of the policy crate: a `HashMap` with a fast, deterministic
//! hasher for integer keys (worker ids, container ids, request targets). `Sched` and the
//! policies look a worker up several times per burst, where std's SipHash costs more than the
//! rest of the lookup; the keys are assigned by the mechanism, never chosen by a client, so a
//! DoS-resistant hash buys nothing here. No random seed: no behaviour can depend on a
//! per-process iteration order.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

const K: u64 = 0x9E37_79B9_7F4A_7C15;

/// Multiply-rotate hasher (FxHash-like) for integer keys.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(K);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// A `HashMap` with [`IdHasher`].
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_works_and_spreads_sequential_ids() {
        let mut m: IdMap<u64, u64> = IdMap::default();
        for i in 0..10_000 {
            m.insert(i, i * 2);
        }
        assert!((0..10_000).all(|i| m[&i] == i * 2));
        let tops: std::collections::HashSet<u64> = (0..128u64)
            .map(|i| {
                let mut h = IdHasher::default();
                h.write_u64(i);
                h.finish() >> 57
            })
            .collect();
        assert!(tops.len() > 64, "top bits poorly spread: {}", tops.len());
    }
}
