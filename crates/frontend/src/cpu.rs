//! The front end's CPU time: each thread of its runtime registers its CPU-time clock when it
//! starts ([`os::ThreadClock`], readable from any thread), and a reader sums the clocks when
//! asked, so the sum is the CPU the front end has used, wherever else the process spends CPU
//! (back ends started in the same process, tests). A thread that stops records its final
//! time (its clock goes with it). Nothing is done per request or per wake-up: reading its own
//! clock at every park, as this did before, cost a system call per wake-up, about 1.5 per
//! request relayed.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One runtime thread's clock.
#[derive(Debug)]
struct Slot {
    /// Its CPU-time clock, read by [`RuntimeCpu::total`] while it runs.
    clock: Option<os::ThreadClock>,
    /// Set once it stopped; `final_ns` then holds its CPU time.
    stopped: AtomicBool,
    /// Its CPU time when it stopped, ns.
    final_ns: AtomicU64,
}

thread_local! {
    static SLOT: RefCell<Option<Arc<Slot>>> = const { RefCell::new(None) };
}

/// The CPU clocks of one runtime's threads.
#[derive(Debug, Default, Clone)]
pub struct RuntimeCpu(Arc<Mutex<Vec<Arc<Slot>>>>);

impl RuntimeCpu {
    /// No thread yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Call on a runtime thread when it starts: its clock is registered.
    pub fn thread_started(&self) {
        let slot = Arc::new(Slot {
            clock: os::ThreadClock::current(),
            stopped: AtomicBool::new(false),
            final_ns: AtomicU64::new(0),
        });
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(slot.clone());
        SLOT.with(|s| *s.borrow_mut() = Some(slot));
    }

    /// Call on a runtime thread when it stops: its final CPU time is kept.
    pub fn thread_stopped() {
        SLOT.with(|s| {
            if let Some(slot) = s.borrow_mut().take() {
                slot.final_ns
                    .store(os::thread_cpu_time().as_nanos() as u64, Relaxed);
                slot.stopped.store(true, Relaxed);
            }
        });
    }

    /// CPU time of the runtime's threads so far.
    pub fn total(&self) -> Duration {
        let ns: u64 = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|s| {
                if s.stopped.load(Relaxed) {
                    return s.final_ns.load(Relaxed);
                }
                s.clock
                    .and_then(|c| c.read())
                    .map_or(s.final_ns.load(Relaxed), |d| d.as_nanos() as u64)
            })
            .sum();
        Duration::from_nanos(ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_s_threads_report_their_cpu() {
        let cpu = RuntimeCpu::new();
        let (a, b) = (cpu.clone(), cpu.clone());
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .on_thread_start(move || a.thread_started())
            .on_thread_stop(move || {
                let _ = &b;
                RuntimeCpu::thread_stopped()
            })
            .build()
            .unwrap();
        let busy = rt.block_on(async {
            tokio::spawn(async {
                let t0 = os::thread_cpu_time();
                let mut x = 0u64;
                while os::thread_cpu_time() - t0 < Duration::from_millis(20) {
                    x = x.wrapping_add(std::hint::black_box(1));
                }
                x
            })
            .await
            .unwrap();
            // Read while the threads run, from outside them.
            cpu.total()
        });
        assert!(busy >= Duration::from_millis(20), "{busy:?}");
        drop(rt);
        assert!(
            cpu.total() >= Duration::from_millis(20),
            "{:?}",
            cpu.total()
        );
    }
}
