//! Server CPU per resource container (seed 003): the thread CPU time of every gate burst
//! (`CLOCK_THREAD_CPUTIME_ID`), charged to the container named in the burst's hints.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// CPU time charged per container id, lock-free.
#[derive(Debug)]
pub struct CpuAccount {
    ns: Vec<AtomicU64>,
}

impl CpuAccount {
    /// Room for containers `0..=max_id`; larger ids are charged to the root (0).
    pub fn new(max_id: u32) -> Self {
        Self {
            ns: (0..=max_id).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Add `d` to `container` (the root if the id is unknown).
    pub fn charge(&self, container: u32, d: Duration) {
        let i = if (container as usize) < self.ns.len() {
            container as usize
        } else {
            0
        };
        self.ns[i].fetch_add(d.as_nanos() as u64, Relaxed);
    }

    /// CPU time charged to `container` so far.
    pub fn get(&self, container: u32) -> Duration {
        self.ns
            .get(container as usize)
            .map_or(Duration::ZERO, |a| Duration::from_nanos(a.load(Relaxed)))
    }
}

/// Measures one burst's thread CPU time; [`BurstTimer::stop`] charges it.
#[derive(Debug, Clone, Copy)]
pub struct BurstTimer {
    start: Duration,
}

impl BurstTimer {
    /// Start measuring the calling thread.
    pub fn start() -> Self {
        Self {
            start: os::thread_cpu_time(),
        }
    }

    /// Charge the CPU this thread used since [`BurstTimer::start`] to `container`. Call on the
    /// same thread (a burst never awaits).
    pub fn stop(self, account: &CpuAccount, container: u32) {
        account.charge(container, os::thread_cpu_time().saturating_sub(self.start));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_and_timer() {
        let acc = CpuAccount::new(2);
        acc.charge(1, Duration::from_millis(5));
        acc.charge(9, Duration::from_millis(1)); // unknown: root
        assert_eq!(acc.get(1), Duration::from_millis(5));
        assert_eq!(acc.get(0), Duration::from_millis(1));
        let t = BurstTimer::start();
        let t0 = os::thread_cpu_time();
        while os::thread_cpu_time() - t0 < Duration::from_millis(5) {
            std::hint::black_box(0);
        }
        t.stop(&acc, 2);
        assert!(acc.get(2) >= Duration::from_millis(5), "{:?}", acc.get(2));
    }
}
