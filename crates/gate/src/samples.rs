//! PL/LRQ sampling (seed 001 §4.3): the gate's busy slots (PL) and ready-queue length (LRQ),
//! sampled every 10 ms by the server, summed for the averages and kept for the last minute.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// How many samples the ring keeps (60 s at 10 ms).
pub const RING: usize = 6000;

/// One sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Nanoseconds since the gate was made.
    pub t_ns: u64,
    /// Busy slots (PL).
    pub busy: u32,
    /// Workers in the ready queue (LRQ).
    pub queued: u32,
}

/// The sums over every sample and the recent ones. Written by [`crate::Gate::sample`], read
/// through its methods.
#[derive(Debug, Default)]
pub struct Samples {
    count: AtomicU64,
    sum_busy: AtomicU64,
    sum_queued: AtomicU64,
    bottleneck: AtomicU64,
    recent: Mutex<VecDeque<Sample>>,
}

impl Samples {
    /// Add one sample; `bottleneck` says whether the CPU was the bottleneck then
    /// (`policy::Ctx::bottleneck`).
    pub(crate) fn record(&self, s: Sample, bottleneck: bool) {
        self.count.fetch_add(1, Relaxed);
        self.sum_busy.fetch_add(s.busy as u64, Relaxed);
        self.sum_queued.fetch_add(s.queued as u64, Relaxed);
        if bottleneck {
            self.bottleneck.fetch_add(1, Relaxed);
        }
        let mut r = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if r.len() >= RING {
            r.pop_front();
        }
        r.push_back(s);
    }

    /// Samples taken.
    pub fn count(&self) -> u64 {
        self.count.load(Relaxed)
    }

    /// Sum of busy slots over all samples (mean PL = this / [`Samples::count`]).
    pub fn sum_busy(&self) -> u64 {
        self.sum_busy.load(Relaxed)
    }

    /// Sum of ready-queue lengths over all samples (mean LRQ = this / [`Samples::count`]).
    pub fn sum_queued(&self) -> u64 {
        self.sum_queued.load(Relaxed)
    }

    /// Samples taken while the CPU was the bottleneck: more workers wanted a slot than there
    /// are slots, and more than one was ready (`policy::Ctx::bottleneck`).
    pub fn bottleneck(&self) -> u64 {
        self.bottleneck.load(Relaxed)
    }

    /// The last [`RING`] samples, oldest first.
    pub fn recent(&self) -> Vec<Sample> {
        let r = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        r.iter().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_count_every_sample_and_the_ring_keeps_the_last() {
        let s = Samples::default();
        for i in 0..RING as u64 + 2 {
            s.record(
                Sample {
                    t_ns: i,
                    busy: 1,
                    queued: 2,
                },
                i % 2 == 0,
            );
        }
        assert_eq!(s.count(), RING as u64 + 2);
        assert_eq!(s.sum_busy(), RING as u64 + 2);
        assert_eq!(s.sum_queued(), 2 * (RING as u64 + 2));
        assert_eq!(s.bottleneck(), RING as u64 / 2 + 1);
        let r = s.recent();
        assert_eq!(r.len(), RING);
        assert_eq!(r[0].t_ns, 2, "the two oldest were dropped");
    }
}
