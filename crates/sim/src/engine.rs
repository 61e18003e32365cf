//! The discrete-event engine: a queue of events in virtual time (integer nanoseconds).
//!
//! Events are served in time order; events at the same time are served in the order they were
//! scheduled (a sequence number breaks ties), so a run is a deterministic function of its inputs.
//! Nothing here reads a clock or draws a random number. Cancelling is left to the models (they
//! tag events with a generation and ignore stale ones), which keeps the queue a plain heap.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use policy::Nanos;

struct Entry<E> {
    at: Nanos,
    seq: u64,
    ev: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl<E> Eq for Entry<E> {}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Entry<E> {
    /// Reversed: the heap's greatest is the earliest (time, then sequence).
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// The event queue and the virtual clock.
pub struct Engine<E> {
    now: Nanos,
    seq: u64,
    heap: BinaryHeap<Entry<E>>,
    processed: u64,
}

impl<E> Default for Engine<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> Engine<E> {
    /// No event, time 0.
    pub fn new() -> Self {
        Self {
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            processed: 0,
        }
    }

    /// Current virtual time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Events served so far.
    pub fn processed(&self) -> u64 {
        self.processed
    }

    /// Events waiting.
    pub fn pending(&self) -> usize {
        self.heap.len()
    }

    /// Schedule `ev` at time `at`; a time in the past is served now (never before the clock).
    pub fn at(&mut self, at: Nanos, ev: E) {
        self.seq += 1;
        self.heap.push(Entry {
            at: at.max(self.now),
            seq: self.seq,
            ev,
        });
    }

    /// Schedule `ev` after `delay`.
    pub fn after(&mut self, delay: Nanos, ev: E) {
        self.at(self.now.saturating_add(delay), ev);
    }

    /// Time of the next event.
    pub fn peek_time(&self) -> Option<Nanos> {
        self.heap.peek().map(|e| e.at)
    }

    /// Take the next event and advance the clock to it.
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        let e = self.heap.pop()?;
        self.now = e.at;
        self.processed += 1;
        Some((e.at, e.ev))
    }

    /// Take the next event if it is due no later than `end`; otherwise advance the clock to
    /// `end` and return `None`.
    pub fn pop_until(&mut self, end: Nanos) -> Option<(Nanos, E)> {
        match self.peek_time() {
            Some(t) if t <= end => self.pop(),
            _ => {
                self.now = self.now.max(end);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_in_time_order_and_ties_in_scheduling_order() {
        let mut e = Engine::new();
        e.at(30, "c");
        e.at(10, "a1");
        e.at(20, "b");
        e.at(10, "a2");
        e.at(10, "a3");
        let mut got = Vec::new();
        while let Some((t, ev)) = e.pop() {
            got.push((t, ev));
            if ev == "b" {
                // Scheduled during the run, at the current time: after what is already due.
                e.after(0, "b-next");
                e.at(5, "late");
            }
        }
        assert_eq!(
            got,
            vec![
                (10, "a1"),
                (10, "a2"),
                (10, "a3"),
                (20, "b"),
                (20, "b-next"),
                (20, "late"),
                (30, "c")
            ]
        );
        assert_eq!(e.processed(), 7);
        assert_eq!(e.now(), 30);
    }

    #[test]
    fn pop_until_stops_at_the_horizon() {
        let mut e = Engine::new();
        e.at(5, 1);
        e.at(15, 2);
        assert_eq!(e.pop_until(10), Some((5, 1)));
        assert_eq!(e.pop_until(10), None);
        assert_eq!(e.now(), 10);
        assert_eq!(e.pending(), 1);
    }

    #[test]
    fn many_ties_keep_insertion_order() {
        let mut e = Engine::new();
        for i in 0..1000u32 {
            e.at(u64::from(i % 7), i);
        }
        let mut last = (0u64, 0u32);
        let mut first = true;
        while let Some((t, i)) = e.pop() {
            if !first {
                assert!(
                    t > last.0 || (t == last.0 && i > last.1),
                    "{t} {i} after {last:?}"
                );
            }
            first = false;
            last = (t, i);
        }
    }
}
