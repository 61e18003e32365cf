//! Counters written by every thread and read rarely, without a cache line that every core
//! writes: one cell per *home* (a serving thread's number), each on its own cache line, summed
//! on read. A counter bumped per request or per burst in one shared atomic makes every core
//! that bumps it take the line from the last one (the server's CPU per request grew with its
//! threads that way); here a thread writes only its own line.
//!
//! A thread's home is set by whoever starts it ([`set_home`]: the server numbers its serving
//! threads 0, 1, 2...); a thread that never set one gets the next number in order of first use.
//! The gate's lanes use the same number (a serving thread creates its workers in lane
//! `home() % lanes`).

use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Cells per counter: threads whose homes differ modulo this share nothing.
pub const CELLS: usize = 16;

/// First numbers handed to threads that did not set a home: above any serving thread's number
/// a server is likely to give (they share cells modulo [`CELLS`] all the same).
static NEXT: AtomicUsize = AtomicUsize::new(1 << 20);

thread_local! {
    static HOME: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Make `home` the calling thread's number (a serving thread, before it serves).
pub fn set_home(home: usize) {
    HOME.with(|h| h.set(Some(home)));
}

/// The calling thread's number: the one it set, or the next in order of first use.
pub fn home() -> usize {
    HOME.with(|h| match h.get() {
        Some(n) => n,
        None => {
            let n = NEXT.fetch_add(1, Relaxed);
            h.set(Some(n));
            n
        }
    })
}

/// A value on a cache line of its own (128 bytes: two lines, for the adjacent-line prefetcher).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Padded<T>(pub T);

/// A count that only grows, one cell per home. See the module docs.
#[derive(Debug)]
pub struct Counter {
    cells: Box<[Padded<AtomicU64>]>,
}

impl Default for Counter {
    fn default() -> Self {
        Self {
            cells: (0..CELLS).map(|_| Padded(AtomicU64::new(0))).collect(),
        }
    }
}

impl Counter {
    /// Add `n` in the calling thread's cell.
    pub fn add(&self, n: u64) {
        self.cells[home() % CELLS].0.fetch_add(n, Relaxed);
    }

    /// The sum over all cells.
    pub fn get(&self) -> u64 {
        self.cells.iter().map(|c| c.0.load(Relaxed)).sum()
    }
}

/// A level that goes up and down (things open now), one cell per home: a thread may lower it
/// in another cell than the one it was raised in; the sum is right all the same.
#[derive(Debug)]
pub struct Gauge {
    cells: Box<[Padded<AtomicI64>]>,
}

impl Default for Gauge {
    fn default() -> Self {
        Self {
            cells: (0..CELLS).map(|_| Padded(AtomicI64::new(0))).collect(),
        }
    }
}

impl Gauge {
    /// Add `n` (negative: remove) in the calling thread's cell.
    pub fn add(&self, n: i64) {
        self.cells[home() % CELLS].0.fetch_add(n, Relaxed);
    }

    /// The sum over all cells (0 if it is momentarily negative: a read between a thread's
    /// removal and another's addition that it undoes).
    pub fn get(&self) -> u64 {
        self.cells
            .iter()
            .map(|c| c.0.load(Relaxed))
            .sum::<i64>()
            .max(0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn counts_from_many_threads_sum_up() {
        let c = Arc::new(Counter::default());
        let g = Arc::new(Gauge::default());
        let threads: Vec<_> = (0..CELLS + 3)
            .map(|k| {
                let (c, g) = (c.clone(), g.clone());
                std::thread::spawn(move || {
                    set_home(k);
                    for _ in 0..1000 {
                        c.add(1);
                        g.add(2);
                        g.add(-1);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(c.get(), 1000 * (CELLS as u64 + 3));
        assert_eq!(g.get(), 1000 * (CELLS as u64 + 3));
    }

    #[test]
    fn a_gauge_lowered_on_another_thread_still_sums_right() {
        let g = Arc::new(Gauge::default());
        let g2 = g.clone();
        std::thread::spawn(move || {
            set_home(1);
            g2.add(5);
        })
        .join()
        .unwrap();
        let g3 = g.clone();
        std::thread::spawn(move || {
            set_home(2);
            g3.add(-3);
        })
        .join()
        .unwrap();
        assert_eq!(g.get(), 2);
    }

    #[test]
    fn a_thread_keeps_its_home_and_cells_are_apart() {
        std::thread::spawn(|| {
            let first = home();
            assert_eq!(home(), first, "the number is kept");
            set_home(7);
            assert_eq!(home(), 7);
        })
        .join()
        .unwrap();
        assert!(std::mem::align_of::<Padded<AtomicU64>>() >= 64);
    }
}
