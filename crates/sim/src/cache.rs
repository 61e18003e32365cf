//! An LRU cache of whole files, bounded in bytes (a back end's file cache in the LARD model).
//! Files larger than the whole cache are never cached.

use crate::DetMap;

const NIL: usize = usize::MAX;

#[derive(Debug, Clone)]
struct Slot {
    file: u64,
    size: u64,
    prev: usize,
    next: usize,
}

/// LRU by bytes. See the module docs. A doubly linked list over a slab (head = most recently
/// used) plus an index: every operation is O(1).
#[derive(Debug, Clone)]
pub struct Lru {
    capacity: u64,
    used: u64,
    index: DetMap<u64, usize>,
    slots: Vec<Slot>,
    free: Vec<usize>,
    head: usize,
    tail: usize,
    evictions: u64,
}

impl Lru {
    /// An empty cache holding at most `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        Self {
            capacity,
            used: 0,
            index: DetMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            evictions: 0,
        }
    }

    /// Bytes it may hold.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes cached.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Files cached.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether no file is cached.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Files evicted so far.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Whether `file` is cached (does not count as a use).
    pub fn contains(&self, file: u64) -> bool {
        self.index.contains_key(&file)
    }

    fn unlink(&mut self, i: usize) {
        let (p, n) = (self.slots[i].prev, self.slots[i].next);
        if p == NIL {
            self.head = n;
        } else {
            self.slots[p].next = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.slots[n].prev = p;
        }
    }

    fn push_front(&mut self, i: usize) {
        self.slots[i].prev = NIL;
        self.slots[i].next = self.head;
        if self.head != NIL {
            self.slots[self.head].prev = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }

    /// Look `file` up; a hit makes it the most recently used.
    pub fn get(&mut self, file: u64) -> bool {
        match self.index.get(&file) {
            Some(&i) => {
                if self.head != i {
                    self.unlink(i);
                    self.push_front(i);
                }
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
        while self.used + size > self.capacity && self.tail != NIL {
            let victim = self.tail;
            self.unlink(victim);
            self.used -= self.slots[victim].size;
            self.index.remove(&self.slots[victim].file);
            self.free.push(victim);
            self.evictions += 1;
        }
        let slot = Slot {
            file,
            size,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                self.slots.len() - 1
            }
        };
        self.push_front(i);
        self.index.insert(file, i);
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

    #[test]
    fn matches_a_naive_lru() {
        // Against a Vec kept in recency order, on a pseudo-random workload.
        let mut c = Lru::new(1000);
        let mut naive: Vec<(u64, u64)> = Vec::new(); // most recent last
        let mut x = 12345u64;
        for _ in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let file = (x >> 33) % 40;
            let size = 50 + file * 7;
            if let Some(p) = naive.iter().position(|e| e.0 == file) {
                let e = naive.remove(p);
                naive.push(e);
                assert!(c.get(file));
            } else {
                assert!(!c.get(file));
                while naive.iter().map(|e| e.1).sum::<u64>() + size > 1000 {
                    naive.remove(0);
                }
                naive.push((file, size));
                assert!(c.insert(file, size));
            }
            assert_eq!(c.len(), naive.len());
            assert_eq!(c.used(), naive.iter().map(|e| e.1).sum::<u64>());
        }
    }
}
