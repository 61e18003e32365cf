//! The kernel boost: passing "this worker first" on to the kernel, where the server's threads
//! compete with other processes.
//!
//! Two ways ([`Raise`]):
//! - **held** (`Nice`, `Slice`): while any worker the policy marked when it became ready
//!   (`Sched::marked`: POS's predicted text workers) waits for a slot or runs its burst, it
//!   *holds* the boost. The first holder raises every runtime thread that has run a burst; when
//!   the last holder's burst ends, each thread goes back to how it was. The raise comes after
//!   the thread woke up and read the marked request, so it cannot shorten that wake-up's wait
//!   behind a competing process.
//! - **at rest** (`NiceAtRest`): a runtime thread is raised from its first burst on and stays
//!   raised while it sleeps, reads requests and runs marked bursts; only a burst of a worker the
//!   policy did not mark runs at the thread's own nice value, and the thread is raised again
//!   when that burst ends. So the raise is in place *before* the wake-up (seed 001's lever was
//!   the ready queue a woken process joins; issue 16's probe: setting a sleeping task's nice
//!   puts the syscall off the critical path), and the work the policy puts last competes with
//!   other processes as it would without the boost.
//!
//! `Boost` keeps the holder count and the threads; the gate calls it under its lock, so
//! raising and restoring never cross.

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
    /// This nice value at rest: the thread is lowered to its own nice value only for the
    /// bursts of workers the policy did not mark (see the module docs).
    NiceAtRest(i32),
}

impl Raise {
    fn apply(self, t: Tid) -> Result<(), PrioError> {
        match self {
            Raise::Nice(n) | Raise::NiceAtRest(n) => os::prio::set_thread_nice(t, n),
            Raise::Slice(d) => os::prio::set_thread_slice(t, Some(d)),
        }
    }

    /// Back to how the thread was (`base`: its nice value when first seen).
    fn restore(self, t: Tid, base: i32) -> Result<(), PrioError> {
        match self {
            Raise::Nice(_) | Raise::NiceAtRest(_) => os::prio::set_thread_nice(t, base),
            Raise::Slice(_) => os::prio::set_thread_slice(t, None),
        }
    }

    /// Raised at rest rather than while a marked worker holds the boost.
    pub(crate) fn at_rest(self) -> bool {
        matches!(self, Raise::NiceAtRest(_))
    }
}

thread_local! {
    static TID: std::cell::Cell<Tid> = const { std::cell::Cell::new(0) };
}

/// The calling thread's id, cached (one `gettid` per thread).
pub(crate) fn current_tid() -> Tid {
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
    /// How and when threads are raised.
    raise: Raise,
    /// Workers holding the boost (held mode only).
    holders: usize,
    /// Threads that ran bursts, with the nice value each had when first seen.
    threads: Vec<(Tid, i32)>,
    /// At rest: per thread of `threads`, the unmarked bursts it runs now (lowered while > 0).
    lowered: Vec<u32>,
}

impl Boost {
    pub(crate) fn new(raise: Raise) -> Self {
        Self {
            raise,
            holders: 0,
            threads: Vec::new(),
            lowered: Vec::new(),
        }
    }

    /// Raised at rest (see the module docs).
    pub(crate) fn at_rest(&self) -> bool {
        self.raise.at_rest()
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
            Ok(base) => {
                self.threads.push((me, base));
                self.lowered.push(0);
            }
            Err(_) => failed += 1,
        }
        if (self.holders > 0 || self.at_rest()) && self.raise.apply(me).is_err() {
            failed += 1;
        }
        failed
    }

    /// At rest: the calling thread starts a burst of a worker the policy did not mark; it runs
    /// at the thread's own nice value until [`Boost::unmarked_burst_ended`]. Returns the
    /// thread (for the end of the burst) and how many priority changes failed.
    pub(crate) fn unmarked_burst_starts(&mut self) -> (Option<Tid>, u64) {
        let me = current_tid();
        let Some(i) = self.threads.iter().position(|&(t, _)| t == me) else {
            return (None, 0);
        };
        self.lowered[i] += 1;
        let failed = if self.lowered[i] == 1 {
            u64::from(self.raise.restore(me, self.threads[i].1).is_err())
        } else {
            0
        };
        (Some(me), failed)
    }

    /// At rest: the unmarked burst that [`Boost::unmarked_burst_starts`] lowered `t` for ended;
    /// the thread is raised again when it runs no other.
    pub(crate) fn unmarked_burst_ended(&mut self, t: Tid) -> u64 {
        let Some(i) = self.threads.iter().position(|&(x, _)| x == t) else {
            return 0;
        };
        self.lowered[i] = self.lowered[i].saturating_sub(1);
        if self.lowered[i] == 0 {
            u64::from(self.raise.apply(t).is_err())
        } else {
            0
        }
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

impl Drop for Boost {
    /// Threads raised at rest go back to their own nice value with the gate (a server's
    /// threads end with it; a test's thread lives on).
    fn drop(&mut self) {
        if self.at_rest() {
            for &(t, base) in &self.threads {
                let _ = self.raise.restore(t, base);
            }
        }
    }
}
