//! The front end's CPU time: the threads of its runtime each record their own CPU clock
//! whenever they go idle (tokio's park hook) and when they stop, so the sum is the CPU the
//! front end has used, up to the last time each thread parked, wherever else the process
//! spends CPU (back ends started in the same process, tests). Reading another thread's clock
//! would need its clock id; each thread reading its own needs nothing.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

thread_local! {
    static SLOT: RefCell<Option<Arc<AtomicU64>>> = const { RefCell::new(None) };
}

/// The CPU clocks of one runtime's threads.
#[derive(Debug, Default, Clone)]
pub struct RuntimeCpu(Arc<Mutex<Vec<Arc<AtomicU64>>>>);

impl RuntimeCpu {
    /// No thread yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Call on a runtime thread when it starts: it gets a slot of its own.
    pub fn thread_started(&self) {
        let slot = Arc::new(AtomicU64::new(0));
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(slot.clone());
        SLOT.with(|s| *s.borrow_mut() = Some(slot));
    }

    /// Call on a runtime thread when it parks or stops: record its CPU time.
    pub fn record() {
        SLOT.with(|s| {
            if let Some(slot) = s.borrow().as_ref() {
                slot.store(os::thread_cpu_time().as_nanos() as u64, Relaxed);
            }
        });
    }

    /// CPU time of the runtime's threads so far (as of their last park).
    pub fn total(&self) -> Duration {
        let ns: u64 = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|s| s.load(Relaxed))
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
            .on_thread_park(RuntimeCpu::record)
            .on_thread_stop(move || {
                let _ = &b;
                RuntimeCpu::record()
            })
            .build()
            .unwrap();
        rt.block_on(async {
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
        });
        drop(rt);
        assert!(
            cpu.total() >= Duration::from_millis(20),
            "{:?}",
            cpu.total()
        );
    }
}
