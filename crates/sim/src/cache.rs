//! An LRU cache of whole files, bounded in bytes (a back end's file cache in the LARD model).
//! Files larger than the whole cache are never cached.

use std::collections::BTreeMap;

use crate::DetMap;

/// LRU by bytes. See the module docs.
#[derive(Debug, Clone)]
pub struct Lru {
    capacity: u64,
    used: u64,
    /// file -> (size, last use)
    files: DetMap<u64, (u64, u64)>,
    /// last use -> file
    order: BTreeMap<u64, u64>,
    clock: u64,
    evictions: u64,
}

impl Lru {
    pub fn new(capacity: u64) -> Self {
        Self {
            capacity,
            used: 0,
            files: DetMap::default(),
            order: BTreeMap::new(),
            clock: 0,
            evictions: 0,
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes cached.
    pub fn used(&self) -> u64 {
        self.used
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    pub fn contains(&self, file: u64) -> bool {
        self.files.contains_key(&file)
    }

    /// Look `file` up; a hit makes it the most recently used.
    pub fn get(&mut self, file: u64) -> bool {
        self.clock += 1;
        let clock = self.clock;
        match self.files.get_mut(&file) {
            Some((_, last)) => {
                self.order.remove(last);
                *last = clock;
                self.order.insert(clock, file);
                true
            }
            None => false,
        }
    }

    /// Insert `file` of `size` bytes (most recently used), evicting the least recently used
    /// files as needed. Returns whether it is cached.
    pub fn insert(&mut self, file: u64, size: u64) -> bool {
        if self.get(file) {
            return true;
        }
        if size > self.capacity {
            return false;
        }
        while self.used + size > self.capacity {
            let Some((_, victim)) = self.order.pop_first() else {
                break;
            };
            if let Some((s, _)) = self.files.remove(&victim) {
                self.used -= s;
                self.evictions += 1;
            }
        }
        self.clock += 1;
        self.files.insert(file, (size, self.clock));
        self.order.insert(self.clock, file);
        self.used += size;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_by_bytes() {
        let mut c = Lru::new(100);
        assert!(c.insert(1, 40));
        assert!(c.insert(2, 40));
        assert!(c.get(1)); // 2 is now the least recently used
        assert!(c.insert(3, 40));
        assert!(c.contains(1) && c.contains(3) && !c.contains(2));
        assert_eq!(c.used(), 80);
        assert_eq!(c.evictions(), 1);
        assert!(!c.insert(4, 101));
        assert!(c.insert(5, 100));
        assert_eq!((c.len(), c.used()), (1, 100));
    }
}
