//! `fifo`: the conventional baseline. First ready, first served.

use std::collections::VecDeque;

use crate::queue::{Ctx, Hints, Policy};
use crate::worker::WorkerId;

/// First come, first served.
#[derive(Debug, Default)]
pub struct Fifo {
    q: VecDeque<WorkerId>,
}

impl Fifo {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Policy for Fifo {
    fn name(&self) -> &str {
        "fifo"
    }

    fn reorders(&self) -> bool {
        false
    }

    fn enqueue(&mut self, worker: WorkerId, _hints: &Hints, _ctx: &Ctx) {
        self.q.push_back(worker);
    }

    fn dequeue(&mut self, _ctx: &Ctx) -> Option<WorkerId> {
        self.q.pop_front()
    }

    fn remove(&mut self, worker: WorkerId) -> bool {
        match self.q.iter().position(|&w| w == worker) {
            Some(i) => {
                self.q.remove(i);
                true
            }
            None => false,
        }
    }

    fn len(&self) -> usize {
        self.q.len()
    }

    fn shrink(&mut self) {
        self.q.shrink_to_fit();
    }

    fn order(&self) -> Vec<WorkerId> {
        self.q.iter().copied().collect()
    }
}

/// Registry entry.
pub const ENTRY: crate::config::Entry = crate::config::Entry {
    name: "fifo",
    about: "conventional first-come first-served ready queue",
    build: |_| Ok(Box::new(Fifo::new())),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_in_arrival_order() {
        let ctx = Ctx {
            now: 0,
            busy: 1,
            slots: 1,
        };
        let mut f = Fifo::new();
        for w in [3, 1, 2] {
            f.enqueue(w, &Hints::default(), &ctx);
        }
        assert!(f.remove(1));
        assert!(!f.remove(9));
        assert_eq!(f.order(), vec![3, 2]);
        assert_eq!(f.dequeue(&ctx), Some(3));
        assert_eq!(f.dequeue(&ctx), Some(2));
        assert_eq!(f.dequeue(&ctx), None);
    }
}
