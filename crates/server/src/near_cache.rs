//! A small cache per serving thread in front of a store's shared body cache, so that serving a
//! hot small file writes no memory another serving thread writes too.
//!
//! Every serving thread serves the same hot files. Through the shared cache alone, each hit
//! takes the cache's lock and clones the same `Arc` (and, when the body is sent, the same
//! `Bytes`): atomic writes on cache lines every core takes from the last one, which made
//! triage's CPU per request grow with its threads. Here each thread's *home*
//! ([`gate::shard::home`]) has a shard of its own (on its own cache line, its lock uncontended)
//! holding its own copy of each small entry, made from the shared entry on the thread's first
//! hit; later hits touch only that copy.
//!
//! The copies are bounded: only files up to [`NEAR_MAX_FILE`] bytes, at most [`NEAR_BUDGET`]
//! bytes per shard (a shard that would overflow is emptied, the `clear` rule), so at most
//! `gate::shard::CELLS * NEAR_BUDGET` bytes in all. Freshness is the caller's test, as for the
//! shared cache (the store compares the file's mtime and size on every request).

use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};

use gate::shard::{home, Padded, CELLS};

use crate::body_cache::{BodyCache, Eviction};

/// Largest file copied per thread: small hot files are what one shared line per request
/// dominates; a large one costs more to copy than its sends share.
pub const NEAR_MAX_FILE: u64 = 16 * 1024;

/// Bytes one thread's shard holds at most.
pub const NEAR_BUDGET: u64 = 1024 * 1024;

/// One home's cache, on a cache line of its own.
type Shard<K, V> = Padded<Mutex<BodyCache<K, V>>>;

/// One cache per home. See the module docs.
pub struct NearCache<K, V> {
    /// Indexed by the calling thread's home modulo [`CELLS`].
    shards: Box<[Shard<K, V>]>,
}

impl<K, V> std::fmt::Debug for NearCache<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NearCache")
            .field("shards", &self.shards.len())
            .finish()
    }
}

impl<K: Hash + Eq + Clone, V> Default for NearCache<K, V> {
    fn default() -> Self {
        Self {
            shards: (0..CELLS)
                .map(|_| Padded(Mutex::new(BodyCache::new(Eviction::Clear, NEAR_BUDGET))))
                .collect(),
        }
    }
}

impl<K: Hash + Eq + Clone, V> NearCache<K, V> {
    /// The calling thread's shard (a panic while holding it leaves a consistent cache).
    fn shard(&self) -> MutexGuard<'_, BodyCache<K, V>> {
        self.shards[home() % CELLS]
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The calling thread's entry for `key`, if it holds one that `valid` accepts (a stale
    /// one is dropped); `f` maps it while the shard is held.
    pub fn get<Q, R>(
        &self,
        key: &Q,
        valid: impl FnOnce(&V) -> bool,
        f: impl FnOnce(&V) -> R,
    ) -> Option<R>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.shard().get(key, valid).map(f)
    }

    /// Hold `value` (`size` bytes) for the calling thread, if the file is small enough.
    pub fn insert(&self, key: K, value: V, size: u64) {
        if size <= NEAR_MAX_FILE {
            self.shard().insert(key, value, size);
        }
    }

    /// Hits served from the shards so far, all threads together.
    pub fn hits(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.0.lock().unwrap_or_else(|p| p.into_inner()).stats().hits)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn each_home_holds_its_own_entries() {
        let c: Arc<NearCache<u32, u32>> = Arc::new(NearCache::default());
        gate::shard::set_home(0);
        c.insert(1, 10, 4);
        assert_eq!(c.get(&1, |_| true, |v| *v), Some(10));
        let c2 = c.clone();
        let other = std::thread::spawn(move || {
            gate::shard::set_home(1);
            let before = c2.get(&1, |_| true, |v| *v);
            c2.insert(1, 11, 4);
            (before, c2.get(&1, |_| true, |v| *v))
        })
        .join()
        .unwrap();
        assert_eq!(other, (None, Some(11)), "another home starts empty");
        assert_eq!(
            c.get(&1, |_| true, |v| *v),
            Some(10),
            "this home keeps its own"
        );
        assert_eq!(c.hits(), 3);
    }

    #[test]
    fn large_or_stale_entries_are_not_served() {
        let c: NearCache<u32, u32> = NearCache::default();
        c.insert(1, 10, NEAR_MAX_FILE + 1);
        assert_eq!(c.get(&1, |_| true, |v| *v), None);
        c.insert(2, 20, 4);
        assert_eq!(c.get(&2, |&v| v == 21, |v| *v), None);
        assert_eq!(
            c.get(&2, |_| true, |v| *v),
            None,
            "the stale entry was dropped"
        );
    }
}
