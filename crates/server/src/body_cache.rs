//! A bounded in-memory cache of file bodies: a byte budget and one of three ways to make room
//! ([`Eviction`]):
//!
//! - `clear`: when an entry would not fit, everything goes (the server's historical cache: a
//!   small, cheap cache of hot files, the default);
//! - `lru`: the least recently used entries go first;
//! - `gds`: GreedyDual-Size (Cao and Irani, USITS 1997) with a cost of 1 per file: each entry
//!   has a value `H = L + 1 / size`, set when it enters and at every hit; the entry of least
//!   `H` goes first, and `L` becomes its `H`. Small files stay longer than under LRU, which
//!   maximises the share of requests served from memory (the hit ratio) for a byte budget.
//!
//! With `lru` and `gds` a cluster's back ends hold the part of the working set their front end
//! sends them, which is what makes locality-aware distribution (LARD) pay. The cache is
//! generic over keys and values; the store keys it by (device, inode).

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// How the cache makes room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Eviction {
    /// Empty the whole cache when an entry would not fit.
    #[default]
    Clear,
    /// Least recently used first.
    Lru,
    /// GreedyDual-Size, cost 1.
    Gds,
}

impl std::str::FromStr for Eviction {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "clear" => Ok(Eviction::Clear),
            "lru" => Ok(Eviction::Lru),
            "gds" => Ok(Eviction::Gds),
            _ => Err(format!(
                "unknown cache policy `{s}` (known: clear, lru, gds)"
            )),
        }
    }
}

/// What the cache has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups that found their entry.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Entries put in.
    pub inserts: u64,
    /// Entries taken out to make room (every entry of a `clear` counts).
    pub evictions: u64,
    /// Bytes held now.
    pub bytes: u64,
    /// Entries held now.
    pub entries: u64,
}

struct Slot<V> {
    value: V,
    size: u64,
    /// Position in `order`.
    rank: (u64, u64),
}

/// A bounded cache of values with sizes. See the module docs.
pub struct BodyCache<K, V> {
    eviction: Eviction,
    budget: u64,
    /// The entries, by key (foldhash: see the crate's Cargo.toml on why not SipHash).
    map: HashMap<K, Slot<V>, foldhash::fast::RandomState>,
    /// Eviction order, least valuable first: (priority, sequence number). LRU's priority is
    /// the sequence number itself; GDS's is `H` (a non-negative `f64`, whose bit pattern
    /// orders as the number does).
    order: BTreeMap<(u64, u64), K>,
    seq: u64,
    /// GDS's inflation value `L`.
    inflation: f64,
    stats: CacheStats,
}

impl<K, V> std::fmt::Debug for BodyCache<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyCache")
            .field("eviction", &self.eviction)
            .field("budget", &self.budget)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq + Clone, V> BodyCache<K, V> {
    /// An empty cache of at most `budget` bytes.
    pub fn new(eviction: Eviction, budget: u64) -> Self {
        Self {
            eviction,
            budget,
            map: HashMap::default(),
            order: BTreeMap::new(),
            seq: 0,
            inflation: 0.0,
            stats: CacheStats::default(),
        }
    }

    /// How it makes room.
    pub fn eviction(&self) -> Eviction {
        self.eviction
    }

    /// Most bytes it holds.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    fn rank(&mut self, size: u64) -> (u64, u64) {
        self.seq += 1;
        let prio = match self.eviction {
            Eviction::Clear | Eviction::Lru => self.seq,
            Eviction::Gds => (self.inflation + 1.0 / size.max(1) as f64).to_bits(),
        };
        (prio, self.seq)
    }

    /// The entry for `key`, if held (a hit makes it more recent, or raises its value); counts
    /// a hit or a miss. `valid` decides whether a held entry is still good (a stale one is
    /// dropped and counts as a miss).
    pub fn get<Q>(&mut self, key: &Q, valid: impl FnOnce(&V) -> bool) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let good = self.map.get(key).map(|s| valid(&s.value));
        match good {
            Some(true) => {}
            Some(false) => {
                self.remove(key);
                self.stats.misses += 1;
                return None;
            }
            None => {
                self.stats.misses += 1;
                return None;
            }
        }
        self.stats.hits += 1;
        if self.eviction != Eviction::Clear {
            let (owned, size) = {
                let (k, s) = self.map.get_key_value(key).expect("held");
                (k.clone(), s.size)
            };
            let rank = self.rank(size);
            let slot = self.map.get_mut(key).expect("held");
            let old = std::mem::replace(&mut slot.rank, rank);
            self.order.remove(&old);
            self.order.insert(rank, owned);
        }
        self.map.get(key).map(|s| &s.value)
    }

    /// Hold `value` (of `size` bytes) for `key`, making room as the eviction says. An entry
    /// larger than the whole budget is not held; `false` then.
    pub fn insert(&mut self, key: K, value: V, size: u64) -> bool {
        if self.eviction == Eviction::Clear {
            // The historical rule: a newcomer that would not fit empties the cache (counting
            // an entry it replaces), then goes in if it fits the budget at all.
            if self.stats.bytes + size > self.budget {
                self.stats.evictions += self.map.len() as u64;
                self.map.clear();
                self.order.clear();
                self.stats.bytes = 0;
            }
        } else {
            self.remove(&key);
        }
        if size > self.budget {
            return false;
        }
        if let Some(old) = self.map.remove(&key) {
            self.order.remove(&old.rank);
            self.stats.bytes -= old.size;
        }
        while self.stats.bytes + size > self.budget {
            let Some((rank, victim)) = self.order.pop_first() else {
                break;
            };
            if let Some(s) = self.map.remove(&victim) {
                self.stats.bytes -= s.size;
                self.stats.evictions += 1;
                if self.eviction == Eviction::Gds {
                    self.inflation = f64::from_bits(rank.0);
                }
            }
        }
        let rank = self.rank(size);
        self.order.insert(rank, key.clone());
        self.map.insert(key, Slot { value, size, rank });
        self.stats.bytes += size;
        self.stats.inserts += 1;
        self.stats.entries = self.map.len() as u64;
        true
    }

    /// Drop `key`'s entry, if held.
    pub fn remove<Q>(&mut self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if let Some(s) = self.map.remove(key) {
            self.order.remove(&s.rank);
            self.stats.bytes -= s.size;
            self.stats.entries = self.map.len() as u64;
        }
    }

    /// Whether `key` is held (no effect on the order, no hit or miss counted).
    pub fn contains(&self, key: &K) -> bool {
        self.map.contains_key(key)
    }

    /// Counters and what is held.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            entries: self.map.len() as u64,
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(c: &mut BodyCache<u32, u32>, k: u32) -> bool {
        c.get(&k, |_| true).is_some()
    }

    #[test]
    fn clear_empties_everything_when_full() {
        let mut c = BodyCache::new(Eviction::Clear, 10);
        assert!(c.insert(1, 1, 4));
        assert!(c.insert(2, 2, 4));
        assert!(c.insert(3, 3, 4));
        assert!(!c.contains(&1) && !c.contains(&2) && c.contains(&3));
        assert_eq!(c.stats().evictions, 2);
        assert!(!c.insert(4, 4, 11));
        assert_eq!(c.stats().bytes, 0);
    }

    #[test]
    fn lru_drops_the_least_recently_used() {
        let mut c = BodyCache::new(Eviction::Lru, 10);
        c.insert(1, 1, 4);
        c.insert(2, 2, 4);
        assert!(get(&mut c, 1));
        c.insert(3, 3, 4);
        assert!(c.contains(&1) && !c.contains(&2) && c.contains(&3));
        assert_eq!(c.stats().bytes, 8);
        assert_eq!((c.stats().hits, c.stats().evictions), (1, 1));
        assert!(!get(&mut c, 2));
        assert_eq!(c.stats().misses, 1);
    }

    #[test]
    fn gds_keeps_small_files_and_ages_big_ones_out() {
        let mut c = BodyCache::new(Eviction::Gds, 100);
        c.insert(1, 1, 10); // H = 0.1
        c.insert(2, 2, 80); // H = 0.0125
        c.insert(3, 3, 10); // H = 0.1; 100 bytes held
                            // LRU would drop 1, the oldest; GDS drops 2, the least valuable, and L = 0.0125.
        c.insert(4, 4, 10);
        assert!(!c.contains(&2));
        assert!(c.contains(&1) && c.contains(&3) && c.contains(&4));
        // A hit raises 1 to L + 0.1 = 0.1125: now 3 (0.1) goes first.
        assert!(get(&mut c, 1));
        c.insert(5, 5, 75);
        assert!(c.contains(&1) && !c.contains(&3) && c.contains(&4) && c.contains(&5));
        assert_eq!(c.stats().bytes, 95);
    }

    #[test]
    fn a_stale_entry_is_dropped_and_counts_as_a_miss() {
        let mut c = BodyCache::new(Eviction::Lru, 10);
        c.insert(1, 7, 4);
        assert!(c.get(&1, |&v| v == 8).is_none());
        assert!(!c.contains(&1));
        assert_eq!(c.stats().bytes, 0);
        assert_eq!(c.stats().misses, 1);
    }

    #[test]
    fn replacing_a_key_keeps_the_byte_count() {
        for e in [Eviction::Clear, Eviction::Lru, Eviction::Gds] {
            let mut c = BodyCache::new(e, 10);
            c.insert(1, 1, 4);
            c.insert(1, 2, 5);
            assert_eq!(c.stats().bytes, 5, "{e:?}");
            assert_eq!(c.stats().entries, 1, "{e:?}");
        }
    }

    #[test]
    fn never_above_the_budget() {
        use rand::{Rng, SeedableRng};
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for e in [Eviction::Clear, Eviction::Lru, Eviction::Gds] {
            let mut c = BodyCache::new(e, 1000);
            for _ in 0..5000 {
                let k: u32 = r.gen_range(0..200);
                if !get(&mut c, k) {
                    c.insert(k, k, r.gen_range(1..400));
                }
                assert!(c.stats().bytes <= 1000, "{e:?}");
            }
            let s = c.stats();
            assert_eq!(s.hits + s.misses, 5000);
        }
    }

    #[test]
    fn policies_parse() {
        assert_eq!("gds".parse::<Eviction>(), Ok(Eviction::Gds));
        assert!("lfu".parse::<Eviction>().is_err());
    }
}
