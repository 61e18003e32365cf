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

    /// Worker ids created so far.
    pub(crate) fn created(&self) -> u64 {
        self.next.load(Relaxed) - 1
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
}
