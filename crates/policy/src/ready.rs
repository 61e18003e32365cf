//! [`ReadyQueue`]: a multi-level FIFO ready queue with lazy deletion and a starvation guard,
//! shared by the `pos` and `content` policies.
//!
//! Levels are served in order (level 0 first), FIFO within a level. Every operation is O(1)
//! amortized: removal and moves only mark the old position stale (a ticket check), and stale
//! positions are dropped when they reach the front or when a level holds more stale than live
//! entries (compaction).
//!
//! A level may instead be kept in order of a key ([`ReadyQueue::push_keyed`], e.g. when each
//! worker's service episode began): a keyed insert goes behind every entry with a key not
//! greater than its own, scanning from the back, so it costs O(entries it overtakes); FIFO
//! inserts (`push_back`, `move_to_back`) take the level's largest key so far and stay O(1).
//!
//! The guard (seed 001 has none; see `docs/policy.md`): a second FIFO of arrival times. On
//! [`ReadyQueue::dequeue`], if the worker that has been queued longest has waited more than the
//! bound, it is served first, whatever its level. A worker that changes level inside the queue
//! (POS demotion) keeps its arrival time.

use std::collections::VecDeque;

use crate::worker::WorkerId;
use crate::Nanos;

/// Where one queued worker is.
#[derive(Debug, Clone, Copy)]
struct Entry {
    level: usize,
    /// Ticket of its current position in `levels[level]`.
    pos: u64,
    /// Ticket of its position in `arrivals`.
    arr: u64,
    /// When it entered the queue.
    since: Nanos,
}

/// Multi-level FIFO with lazy deletion and an optional starvation guard. See the module docs.
#[derive(Debug, Clone)]
pub struct ReadyQueue {
    /// Per level: (worker, ticket of the position, order key), in serving order.
    levels: Vec<VecDeque<(WorkerId, u64, Nanos)>>,
    /// Largest key given to an entry of each level (FIFO inserts take it).
    max_key: Vec<Nanos>,
    /// Live entries per level.
    counts: Vec<usize>,
    arrivals: VecDeque<(WorkerId, u64)>,
    live: crate::idhash::IdMap<WorkerId, Entry>,
    next_ticket: u64,
    bound: Option<Nanos>,
    rescues: u64,
}

/// Compaction slack: a deque is compacted when it holds more than `2 * live + SLACK` entries.
const SLACK: usize = 16;

impl ReadyQueue {
    /// A queue with `levels` levels (at least 1) and the starvation guard `bound` (`None`: off).
    pub fn new(levels: usize, bound: Option<Nanos>) -> Self {
        let levels = levels.max(1);
        Self {
            levels: vec![VecDeque::new(); levels],
            max_key: vec![0; levels],
            counts: vec![0; levels],
            arrivals: VecDeque::new(),
            live: Default::default(),
            next_ticket: 0,
            bound,
            rescues: 0,
        }
    }

    fn ticket(&mut self) -> u64 {
        self.next_ticket += 1;
        self.next_ticket
    }

    /// Number of levels.
    pub fn levels(&self) -> usize {
        self.levels.len()
    }

    /// The starvation bound, if the guard is on.
    pub fn bound(&self) -> Option<Nanos> {
        self.bound
    }

    /// Times the guard served a worker out of level order.
    pub fn rescues(&self) -> u64 {
        self.rescues
    }

    /// Queued workers.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// Whether no worker is queued.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Whether `worker` is queued.
    pub fn contains(&self, worker: WorkerId) -> bool {
        self.live.contains_key(&worker)
    }

    /// Level of a queued worker.
    pub fn level_of(&self, worker: WorkerId) -> Option<usize> {
        self.live.get(&worker).map(|e| e.level)
    }

    /// When a queued worker entered the queue.
    pub fn since(&self, worker: WorkerId) -> Option<Nanos> {
        self.live.get(&worker).map(|e| e.since)
    }

    /// Append `worker` at the back of `level` (clamped to the last level), queued since `now`.
    /// A worker already queued is moved there instead (keeping its arrival time).
    pub fn push_back(&mut self, level: usize, worker: WorkerId, now: Nanos) {
        self.place(level, worker, None, now);
    }

    /// Move a queued worker to the back of `level` (clamped), keeping its arrival time.
    /// Returns whether it was queued.
    pub fn move_to_back(&mut self, worker: WorkerId, level: usize) -> bool {
        if !self.contains(worker) {
            return false;
        }
        self.place(level, worker, None, 0);
        true
    }

    /// Put `worker` into `level` (clamped) behind every entry whose key is not greater than
    /// `key`, queued since `now` (a worker already queued moves there, keeping its arrival
    /// time). Entries with equal keys stay in insertion order.
    pub fn push_keyed(&mut self, level: usize, worker: WorkerId, key: Nanos, now: Nanos) {
        self.place(level, worker, Some(key), now);
    }

    /// The one insertion: a new position for `worker` in `level` (clamped), behind every entry
    /// whose key is not greater than `key` (`None`: the level's largest key so far, i.e. the
    /// back, in O(1)). A queued worker keeps its arrival time and its old position goes stale;
    /// a new one is queued since `now`.
    fn place(&mut self, level: usize, worker: WorkerId, key: Option<Nanos>, now: Nanos) {
        let level = level.min(self.levels.len() - 1);
        let pos = self.ticket();
        if let Some(e) = self.live.get_mut(&worker) {
            let old = e.level;
            e.level = level;
            e.pos = pos;
            self.counts[old] -= 1;
            self.compact(old);
        } else {
            let arr = self.ticket();
            self.arrivals.push_back((worker, arr));
            self.live.insert(
                worker,
                Entry {
                    level,
                    pos,
                    arr,
                    since: now,
                },
            );
        }
        self.counts[level] += 1;
        let key = key.unwrap_or(self.max_key[level]);
        let q = &mut self.levels[level];
        let mut at = q.len();
        while at > 0 && q[at - 1].2 > key {
            at -= 1;
        }
        q.insert(at, (worker, pos, key));
        self.max_key[level] = self.max_key[level].max(key);
    }

    /// Take `worker` out of the queue. Returns whether it was queued.
    pub fn remove(&mut self, worker: WorkerId) -> bool {
        let Some(e) = self.live.remove(&worker) else {
            return false;
        };
        self.counts[e.level] -= 1;
        self.compact(e.level);
        self.compact_arrivals();
        true
    }

    fn is_live_pos(&self, level: usize, (w, t, _): (WorkerId, u64, Nanos)) -> bool {
        matches!(self.live.get(&w), Some(e) if e.level == level && e.pos == t)
    }

    fn is_live_arr(&self, (w, t): (WorkerId, u64)) -> bool {
        matches!(self.live.get(&w), Some(e) if e.arr == t)
    }

    fn compact(&mut self, level: usize) {
        if self.levels[level].len() > 2 * self.counts[level] + SLACK {
            let live = &self.live;
            self.levels[level].retain(
                |&(w, t, _)| matches!(live.get(&w), Some(e) if e.level == level && e.pos == t),
            );
        }
    }

    fn compact_arrivals(&mut self) {
        if self.arrivals.len() > 2 * self.live.len() + SLACK {
            let live = &self.live;
            self.arrivals
                .retain(|&(w, t)| matches!(live.get(&w), Some(e) if e.arr == t));
        }
    }

    /// The first live worker of `level`, dropping stale positions in front of it.
    pub fn front(&mut self, level: usize) -> Option<WorkerId> {
        while let Some(&slot) = self.levels.get(level)?.front() {
            if self.is_live_pos(level, slot) {
                return Some(slot.0);
            }
            self.levels[level].pop_front();
        }
        None
    }

    /// The worker queued longest, dropping stale arrivals in front of it.
    pub fn oldest(&mut self) -> Option<WorkerId> {
        while let Some(&slot) = self.arrivals.front() {
            if self.is_live_arr(slot) {
                return Some(slot.0);
            }
            self.arrivals.pop_front();
        }
        None
    }

    /// The worker level order would serve next (ignores the guard).
    pub fn head(&mut self) -> Option<WorkerId> {
        (0..self.levels.len()).find_map(|l| self.front(l))
    }

    /// The worker the guard would force now, if any: the oldest queued worker when it has
    /// waited more than the bound.
    pub fn overdue(&mut self, now: Nanos) -> Option<WorkerId> {
        let bound = self.bound?;
        let w = self.oldest()?;
        let since = self.live[&w].since;
        (now.saturating_sub(since) > bound).then_some(w)
    }

    /// Take the worker that gets a free slot at `now`: the overdue worker if the guard fires
    /// (counted as a rescue when level order would have chosen another), else the head.
    pub fn dequeue(&mut self, now: Nanos) -> Option<WorkerId> {
        let head = self.head()?;
        let w = match self.overdue(now) {
            Some(old) if old != head => {
                self.rescues += 1;
                old
            }
            _ => head,
        };
        self.remove(w);
        Some(w)
    }

    /// The queue in level order, head first (ignores the guard).
    pub fn order(&self) -> Vec<WorkerId> {
        let mut out = Vec::with_capacity(self.len());
        for (l, q) in self.levels.iter().enumerate() {
            out.extend(
                q.iter()
                    .filter(|&&s| self.is_live_pos(l, s))
                    .map(|&(w, _, _)| w),
            );
        }
        out
    }

    /// Live workers of one level, front first.
    pub fn level_order(&self, level: usize) -> Vec<WorkerId> {
        match self.levels.get(level) {
            Some(q) => q
                .iter()
                .filter(|&&s| self.is_live_pos(level, s))
                .map(|&(w, _, _)| w)
                .collect(),
            None => Vec::new(),
        }
    }

    /// Total stored positions (live + stale), for memory-bound tests.
    pub fn stored(&self) -> usize {
        self.levels.iter().map(VecDeque::len).sum::<usize>() + self.arrivals.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_then_fifo() {
        let mut q = ReadyQueue::new(3, None);
        q.push_back(2, 1, 0);
        q.push_back(0, 2, 1);
        q.push_back(1, 3, 2);
        q.push_back(0, 4, 3);
        assert_eq!(q.order(), vec![2, 4, 3, 1]);
        assert!(q.move_to_back(2, 2));
        assert_eq!(q.order(), vec![4, 3, 1, 2]);
        assert!(q.remove(3));
        assert!(!q.remove(3));
        assert_eq!(q.dequeue(100), Some(4));
        assert_eq!(q.dequeue(100), Some(1));
        assert_eq!(q.dequeue(100), Some(2));
        assert_eq!(q.dequeue(100), None);
        assert!(q.is_empty());
    }

    #[test]
    fn keyed_inserts_keep_key_order_and_fifo_among_equal_keys() {
        let mut q = ReadyQueue::new(2, None);
        q.push_keyed(1, 1, 50, 0);
        q.push_keyed(1, 2, 10, 1);
        q.push_keyed(1, 3, 50, 2);
        q.push_keyed(1, 4, 30, 3);
        q.push_back(0, 5, 4);
        assert_eq!(q.order(), vec![5, 2, 4, 1, 3]);
        // Re-keying a queued worker moves it and keeps its arrival time.
        q.push_keyed(1, 3, 0, 9);
        assert_eq!(q.order(), vec![5, 3, 2, 4, 1]);
        assert_eq!(q.since(3), Some(2));
        // A FIFO insert into a keyed level goes to the back.
        q.push_back(1, 6, 10);
        assert_eq!(q.level_order(1), vec![3, 2, 4, 1, 6]);
        assert!(q.remove(2));
        q.push_keyed(1, 7, 20, 11);
        assert_eq!(q.level_order(1), vec![3, 7, 4, 1, 6]);
        assert_eq!(q.len(), 6);
        for want in [5, 3, 7, 4, 1, 6] {
            assert_eq!(q.dequeue(20), Some(want));
        }
        assert!(q.is_empty());
    }

    #[test]
    fn guard_serves_the_oldest_once_overdue() {
        let mut q = ReadyQueue::new(2, Some(10));
        q.push_back(1, 1, 0);
        q.push_back(0, 2, 5);
        q.push_back(0, 3, 6);
        // Not overdue yet: level order.
        assert_eq!(q.dequeue(10), Some(2));
        assert_eq!(q.rescues(), 0);
        // Worker 1 waited 11 > 10: served before 3.
        assert_eq!(q.dequeue(11), Some(1));
        assert_eq!(q.rescues(), 1);
        assert_eq!(q.dequeue(100), Some(3));
        // Overdue but also the head: not a rescue.
        assert_eq!(q.rescues(), 1);
    }

    #[test]
    fn moves_keep_the_arrival_time() {
        let mut q = ReadyQueue::new(2, Some(10));
        q.push_back(0, 1, 0);
        q.push_back(0, 2, 1);
        q.move_to_back(1, 1);
        assert_eq!(q.since(1), Some(0));
        assert_eq!(q.dequeue(5), Some(2));
        q.push_back(0, 3, 6);
        assert_eq!(q.dequeue(11), Some(1));
    }

    /// Churn through 10 000 workers beside one that stays queued (worker 0, level 1): each
    /// of the 2 levels and the arrivals must hold at most 2 * live + SLACK + 1 positions.
    fn assert_stale_bounded(mut q: ReadyQueue, step: impl Fn(&mut ReadyQueue, u64)) {
        for i in 1..10_000u64 {
            step(&mut q, i);
            assert!(q.remove(i));
            assert!(
                q.stored() <= 3 * (2 * q.len() + SLACK + 1),
                "{}",
                q.stored()
            );
        }
        assert_eq!(q.order(), vec![0]);
    }

    #[test]
    fn stale_positions_stay_bounded() {
        let mut q = ReadyQueue::new(2, Some(1_000));
        q.push_back(1, 0, 0); // one long-lived entry blocks the front of level 1
        assert_stale_bounded(q, |q, i| {
            q.push_back(1, i, i);
            q.move_to_back(i, 0);
        });
    }

    #[test]
    fn stale_positions_stay_bounded_with_keyed_inserts() {
        let mut q = ReadyQueue::new(2, None);
        q.push_keyed(1, 0, 0, 0); // the oldest episode, never served
                                  // Episodes that began at decreasing times, so each insert lands in the middle.
        assert_stale_bounded(q, |q, i| {
            q.push_keyed(1, i, 10_000 - i, i);
            q.push_keyed(1, i, 20_000 - i, i);
        });
    }
}
