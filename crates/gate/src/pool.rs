//! Worker identity as in a prefork server: a pool of worker ids, the one idle longest handed
//! out first.
//!
//! An accepted connection takes the worker that has been idle longest (FIFO, as Linux wakes
//! processes blocked in `accept`) and returns it when the connection closes. So a worker's wait
//! starts when its previous burst ended, possibly on a previous connection, and a worker that
//! waited long becomes ready after a long wait (seed 001 characteristic 1).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use policy::WorkerId;

/// Idle worker ids (oldest first) and the next id to create. Ids start at 1.
#[derive(Debug)]
pub(crate) struct Pool {
    idle: Mutex<VecDeque<WorkerId>>,
    next: AtomicU64,
}

impl Pool {
    pub(crate) fn new() -> Self {
        Self {
            idle: Mutex::new(VecDeque::new()),
            next: AtomicU64::new(1),
        }
    }

    /// A new worker id, never handed out before.
    pub(crate) fn fresh(&self) -> WorkerId {
        self.next.fetch_add(1, Relaxed)
    }

    /// The worker idle longest, if any.
    pub(crate) fn take_idle(&self) -> Option<WorkerId> {
        self.idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()
    }

    /// `workers` become idle (newest last).
    pub(crate) fn put(&self, workers: impl IntoIterator<Item = WorkerId>) {
        self.idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(workers);
    }

    /// Worker ids in existence (checked out or idle): created, less those forgotten.
    pub(crate) fn created(&self) -> u64 {
        self.next.load(Relaxed) - 1
    }

    /// Forget the idle workers at the top of the numbering: while the newest worker (number
    /// `n`, id `id_of(n - 1)`) is idle, drop it, so that its number is created again next.
    /// Returns the ids forgotten, for the caller to drop their per-worker state (tables indexed
    /// by number then shrink to the workers left). A crowd of connections leaves thousands of
    /// idle workers behind; the ones still in use keep their ids. A worker `may_forget` refuses
    /// stops the descent; nothing is forgotten if a worker is created meanwhile.
    pub(crate) fn forget_top(
        &self,
        id_of: impl Fn(u64) -> WorkerId,
        may_forget: impl Fn(WorkerId) -> bool,
    ) -> Vec<WorkerId> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let next = self.next.load(Relaxed);
        let idle_set: std::collections::HashSet<WorkerId> = idle.iter().copied().collect();
        let mut n = next - 1;
        while n > 0 && idle_set.contains(&id_of(n - 1)) && may_forget(id_of(n - 1)) {
            n -= 1;
        }
        if n == next - 1
            || self
                .next
                .compare_exchange(next, n + 1, Relaxed, Relaxed)
                .is_err()
        {
            return Vec::new();
        }
        let gone: Vec<WorkerId> = (n..next - 1).map(&id_of).collect();
        let gone_set: std::collections::HashSet<WorkerId> = gone.iter().copied().collect();
        idle.retain(|w| !gone_set.contains(w));
        idle.shrink_to_fit();
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_workers_come_back_oldest_first() {
        let p = Pool::new();
        let (a, b) = (p.fresh(), p.fresh());
        assert_eq!((a, b), (1, 2));
        p.put([b]);
        p.put([a]);
        assert_eq!(p.take_idle(), Some(b));
        assert_eq!(p.take_idle(), Some(a));
        assert_eq!(p.take_idle(), None);
        assert_eq!(p.created(), 2);
    }

    #[test]
    fn the_idle_top_of_the_numbering_is_forgotten_and_created_again() {
        let p = Pool::new();
        let ids: Vec<WorkerId> = (0..6).map(|_| p.fresh()).collect();
        assert_eq!(ids, vec![1, 2, 3, 4, 5, 6]);
        // 2 and 4 are still in use; 1, 3, 5, 6 idle.
        p.put([6, 1, 5, 3]);
        let id_of = |i: u64| i + 1;
        assert_eq!(p.forget_top(id_of, |w| w != 5), vec![6], "5 refused");
        assert_eq!(p.created(), 5);
        assert_eq!(
            p.forget_top(id_of, |_| true),
            vec![5],
            "down to the newest in use"
        );
        assert_eq!(p.created(), 4);
        assert_eq!(p.take_idle(), Some(1));
        assert_eq!(p.take_idle(), Some(3));
        assert_eq!(p.take_idle(), None, "5 and 6 are no longer idle");
        assert!(
            p.forget_top(id_of, |_| true).is_empty(),
            "the top (4) is in use"
        );
        assert_eq!(p.fresh(), 5, "the forgotten numbers come back");
    }
}
