//! The kernel boost: passing "this worker first" on to the kernel, where the server's threads
//! compete with other processes.
//!
//! While any worker the policy marked when it became ready (`Sched::marked`: POS's predicted
//! text workers) waits for a slot or runs its burst, it *holds* the boost. The first holder
//! raises every runtime thread that has run a burst ([`Raise`]); when the last holder's burst
//! ends, each thread goes back to how it was. `Boost` keeps that count and the threads; the
//! gate calls it under its lock, so raising and restoring never cross.

use os::prio::{PrioError, Tid};

/// How a runtime thread is raised while a marked worker holds the boost (`--boost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Raise {
    /// This nice value (a larger weight: more CPU while raised; the kernel rescales the
    /// thread's lag when the weight changes back).
    Nice(i32),
    /// This fair-scheduler slice (an earlier virtual deadline: picked first and able to
    /// preempt on wakeup, with the CPU share unchanged).
    Slice(std::time::Duration),
}

impl Raise {
    fn apply(self, t: Tid) -> Result<(), PrioError> {
        match self {
            Raise::Nice(n) => os::prio::set_thread_nice(t, n),
            Raise::Slice(d) => os::prio::set_thread_slice(t, Some(d)),
        }
    }

    /// Back to how the thread was (`base`: its nice value when first seen).
    fn restore(self, t: Tid, base: i32) -> Result<(), PrioError> {
        match self {
            Raise::Nice(_) => os::prio::set_thread_nice(t, base),
            Raise::Slice(_) => os::prio::set_thread_slice(t, None),
        }
    }
}

thread_local! {
    static TID: std::cell::Cell<Tid> = const { std::cell::Cell::new(0) };
}

/// The calling thread's id, cached (one `gettid` per thread).
fn current_tid() -> Tid {
    TID.with(|t| {
        if t.get() == 0 {
            t.set(os::prio::current_tid());
        }
        t.get()
    })
}

/// Holders of the boost and the threads it raises. Every method returns how many priority
/// changes failed (no permission...), for the gate's error counter.
#[derive(Debug)]
pub(crate) struct Boost {
    raise: Raise,
    holders: usize,
    /// Threads that ran bursts, with the nice value each had when first seen.
    threads: Vec<(Tid, i32)>,
}

impl Boost {
    pub(crate) fn new(raise: Raise) -> Self {
        Self {
            raise,
            holders: 0,
            threads: Vec::new(),
        }
    }

    /// The calling thread runs bursts: remember how it is now, and raise it at once if the
    /// boost is held.
    pub(crate) fn see_current_thread(&mut self) -> u64 {
        let me = current_tid();
        if self.threads.iter().any(|&(t, _)| t == me) {
            return 0;
        }
        let mut failed = 0;
        match os::prio::thread_nice(me) {
            Ok(base) => self.threads.push((me, base)),
            Err(_) => failed += 1,
        }
        if self.holders > 0 && self.raise.apply(me).is_err() {
            failed += 1;
        }
        failed
    }

    /// One more holder; the first raises every thread.
    pub(crate) fn hold(&mut self) -> u64 {
        self.holders += 1;
        if self.holders > 1 {
            return 0;
        }
        let raise = self.raise;
        self.threads
            .iter()
            .filter(|&&(t, _)| raise.apply(t).is_err())
            .count() as u64
    }

    /// One holder less; the last restores every thread.
    pub(crate) fn release(&mut self) -> u64 {
        self.holders -= 1;
        if self.holders > 0 {
            return 0;
        }
        let raise = self.raise;
        self.threads
            .iter()
            .filter(|&&(t, base)| raise.restore(t, base).is_err())
            .count() as u64
    }
}
