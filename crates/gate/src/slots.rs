//! [`Gate`]: N CPU slots and a ready queue ordered by a policy (`policy::Sched` behind a
//! mutex). A worker acquires a slot ([`Gate::acquire`], [`Gate::poll_acquire`]) for every burst
//! of CPU work and holds it as a [`Permit`] until the burst ends.
//!
//! **Scheduling rounds** (on by default, [`Gate::with_rounds`]). A runtime thread runs one task
//! at a time, so if a free slot went to the first worker to ask, the gate would never see two
//! workers ready at once: with one thread per slot every burst would end before the next worker
//! asks, and the real ready queue would be the runtime's (FIFO). Instead, a worker that finds the
//! gate idle opens a round: it joins the queue ([`Sched::enqueue`]) and yields once, so that
//! every task the runtime has ready runs and joins the queue too; when the opener is polled
//! again it ends the round ([`Sched::poll`]) and the policy chooses who runs among all of them.
//! Under contention the queue then stays non-empty and each released slot goes to the policy's
//! choice at once. The cost is one extra poll of the opener per idle-to-busy transition.
//!
//! Fast path without rounds: when a slot is free and the queue empty, acquiring is one
//! uncontended lock and two `Sched` transitions; nothing is allocated per burst (the `Vec`
//! returned by `Sched::wait` only allocates when it starts another worker).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll, Waker};

use policy::{Event, Grant, Hints, Sched, Snapshot, WorkerId};

use crate::account::{BurstTimer, CpuAccount};
use crate::boost::{Boost, Raise};
use crate::pool::Pool;
use crate::samples::{Sample, Samples};

/// The gate's clock: tokio's, so that tests can pause and advance it (outside a paused runtime
/// it is the monotonic clock).
type Clock = tokio::time::Instant;

/// A worker's wake-up state (index = worker id).
#[derive(Default)]
struct Wake {
    granted: bool,
    /// Marked when it became ready and its burst has not ended: it holds the kernel boost.
    boosting: bool,
    waker: Option<Waker>,
}

/// What the lock guards.
struct Inner {
    sched: Sched,
    wake: Vec<Wake>,
    /// `None` without `--boost`.
    boost: Option<Boost>,
}

impl Inner {
    fn wake_mut(&mut self, worker: WorkerId) -> &mut Wake {
        let i = worker as usize;
        if self.wake.len() <= i {
            let n = (i + 1).max(self.wake.len() * 2);
            self.wake.resize_with(n, Wake::default);
        }
        &mut self.wake[i]
    }
}

/// The gate's counters since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Bursts run (permits granted).
    pub bursts: u64,
    /// Bursts that had to wait in the ready queue (round openers not counted).
    pub queued_bursts: u64,
    /// Scheduling rounds opened (see the module docs).
    pub rounds: u64,
    /// Kernel priority changes of the boost that failed (no permission...).
    pub boost_errors: u64,
}

/// See the module docs.
pub struct Gate {
    enabled: bool,
    rounds: bool,
    epoch: Clock,
    slots: usize,
    inner: Mutex<Inner>,
    pool: Pool,
    bursts: AtomicU64,
    queued_bursts: AtomicU64,
    rounds_opened: AtomicU64,
    boost_errors: AtomicU64,
    samples: Samples,
    /// Per-container server CPU (resource containers): set once, then every burst's thread CPU
    /// time is charged to the container of its hints.
    account: OnceLock<Arc<CpuAccount>>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("enabled", &self.enabled)
            .field("rounds", &self.rounds)
            .field("slots", &self.slots)
            .finish()
    }
}

impl Gate {
    /// A gate of `sched.slots()` slots. `enabled = false` bypasses everything (baseline).
    /// `boost`: while any worker the policy marked when it became ready (POS's predicted text
    /// workers) waits for a slot or runs its burst, the runtime threads are raised that way;
    /// when the last such burst ends they return to how they were (see [`crate::boost`]).
    pub fn new(sched: Sched, enabled: bool, boost: Option<Raise>) -> Self {
        Self {
            enabled,
            rounds: true,
            epoch: Clock::now(),
            slots: sched.slots(),
            inner: Mutex::new(Inner {
                sched,
                wake: Vec::new(),
                boost: boost.map(Boost::new),
            }),
            pool: Pool::new(),
            bursts: AtomicU64::new(0),
            queued_bursts: AtomicU64::new(0),
            rounds_opened: AtomicU64::new(0),
            boost_errors: AtomicU64::new(0),
            samples: Samples::default(),
            account: OnceLock::new(),
        }
    }

    /// Collect scheduling rounds (`true`, the default) or grant a free slot to the first worker
    /// to ask (`false`). See the module docs.
    pub fn with_rounds(mut self, rounds: bool) -> Self {
        self.rounds = rounds;
        self
    }

    /// Whether the gate collects scheduling rounds.
    pub fn rounds(&self) -> bool {
        self.rounds
    }

    /// Charge every burst's thread CPU time to its container in `account` (resource
    /// containers). Only the first call has an effect.
    pub fn set_account(&self, account: Arc<CpuAccount>) {
        let _ = self.account.set(account);
    }

    /// Whether the gate orders bursts at all (`false`: every acquisition succeeds at once).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// CPU slots.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Monotonic nanoseconds since the gate was made (server start).
    pub fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave Sched half-updated in a way that matters
        // more than stopping the server would; keep serving.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Create `n` idle workers (the prefork pool at start).
    pub fn prefork(&self, n: usize) {
        let ids: Vec<_> = (0..n).map(|_| self.new_worker()).collect();
        self.pool.put(ids);
    }

    fn new_worker(&self) -> WorkerId {
        let id = self.pool.fresh();
        if self.enabled {
            let now = self.now();
            let mut g = self.lock();
            g.wake_mut(id);
            g.sched.register(id, now);
        }
        id
    }

    /// Take the worker idle longest for a new connection (a new one if none is idle).
    pub fn checkout(&self) -> WorkerId {
        self.pool.take_idle().unwrap_or_else(|| self.new_worker())
    }

    /// Return a worker whose connection closed to the idle pool.
    pub fn checkin(&self, worker: WorkerId) {
        self.pool.put([worker]);
    }

    /// Workers created so far.
    pub fn workers(&self) -> u64 {
        self.pool.created()
    }

    /// Wait for a slot (the worker becomes ready, then runs).
    pub fn acquire(&self, worker: WorkerId, hints: Hints) -> Acquire<'_> {
        Acquire {
            gate: self,
            worker,
            hints,
            state: AcquireState::default(),
        }
    }

    /// Poll form of [`Gate::acquire`] for hand-written futures and bodies: keep `state` across
    /// polls and call [`Gate::cancel`] if giving up before `Ready`.
    pub fn poll_acquire(
        &self,
        state: &mut AcquireState,
        worker: WorkerId,
        hints: &Hints,
        cx: &mut Context<'_>,
    ) -> Poll<Permit<'_>> {
        if !self.enabled {
            return Poll::Ready(Permit {
                gate: self,
                worker,
                boosted: false,
                timer: None,
            });
        }
        let now = self.now();
        let mut g = self.lock();
        let marked;
        if state.queued {
            let mut others = Vec::new();
            if std::mem::take(&mut state.round) {
                // End the round this worker opened: the policy chooses among all who joined.
                for s in g.sched.poll(now) {
                    let Some(w) = g.wake.get_mut(s as usize) else {
                        continue;
                    };
                    w.granted = true;
                    if s != worker {
                        others.extend(w.waker.take());
                    }
                }
            }
            let w = &mut g.wake[worker as usize];
            let granted = std::mem::take(&mut w.granted);
            if granted {
                w.waker = None;
                state.queued = false;
            } else {
                match &mut w.waker {
                    Some(old) if old.will_wake(cx.waker()) => {}
                    slot => *slot = Some(cx.waker().clone()),
                }
            }
            marked = granted && w.boosting;
            drop(g);
            others.into_iter().for_each(Waker::wake);
            if !granted {
                return Poll::Pending;
            }
            return self.granted(worker, hints, marked);
        }
        g.wake_mut(worker);
        let open_round = self.rounds && g.sched.busy() < self.slots && g.sched.queued() == 0;
        let grant = if open_round {
            g.sched.enqueue(worker, now, hints)
        } else {
            g.sched.ready(worker, now, hints)
        };
        if g.boost.is_some() && g.sched.marked(worker) {
            self.boost_on(&mut g, worker);
        }
        match grant {
            Grant::RunNow => {
                marked = g.wake[worker as usize].boosting;
            }
            Grant::Queued => {
                let w = &mut g.wake[worker as usize];
                w.granted = false;
                w.waker = Some(cx.waker().clone());
                state.queued = true;
                drop(g);
                if open_round {
                    state.round = true;
                    self.rounds_opened.fetch_add(1, Relaxed);
                    // Yield: back of the runtime's queue, behind every task ready now.
                    cx.waker().wake_by_ref();
                } else {
                    self.queued_bursts.fetch_add(1, Relaxed);
                }
                return Poll::Pending;
            }
        }
        drop(g);
        self.granted(worker, hints, marked)
    }

    /// `worker`, marked, became ready: it holds the boost until its burst ends.
    fn boost_on(&self, g: &mut Inner, worker: WorkerId) {
        let Inner {
            wake,
            boost: Some(boost),
            ..
        } = g
        else {
            return;
        };
        let mut failed = boost.see_current_thread();
        if !std::mem::replace(&mut wake[worker as usize].boosting, true) {
            failed += boost.hold();
        }
        self.count_boost_errors(failed);
    }

    /// `worker`'s burst ended (or it gave up): it no longer holds the boost.
    fn boost_off(&self, g: &mut Inner, worker: WorkerId) {
        let Inner {
            wake,
            boost: Some(boost),
            ..
        } = g
        else {
            return;
        };
        if wake
            .get_mut(worker as usize)
            .is_some_and(|w| std::mem::take(&mut w.boosting))
        {
            self.count_boost_errors(boost.release());
        }
    }

    fn count_boost_errors(&self, n: u64) {
        if n > 0 {
            self.boost_errors.fetch_add(n, Relaxed);
        }
    }

    /// The permit of a worker that now holds a slot (the lock released).
    fn granted(&self, worker: WorkerId, hints: &Hints, boosted: bool) -> Poll<Permit<'_>> {
        self.bursts.fetch_add(1, Relaxed);
        let timer = self
            .account
            .get()
            .map(|_| (BurstTimer::start(), hints.container));
        Poll::Ready(Permit {
            gate: self,
            worker,
            boosted,
            timer,
        })
    }

    /// Give up an acquisition that has not returned `Ready` (client went away). If the slot was
    /// granted meanwhile it is released.
    pub fn cancel(&self, state: &mut AcquireState, worker: WorkerId) {
        if !self.enabled || !state.queued {
            return;
        }
        state.queued = false;
        // An unfinished round ends here: `wait` below fills the free slots from the queue.
        state.round = false;
        let now = self.now();
        let mut g = self.lock();
        let w = &mut g.wake[worker as usize];
        w.granted = false;
        w.waker = None;
        self.boost_off(&mut g, worker);
        // Ready or (granted) Run: either way `wait` takes it out and fills the slot.
        let started = g.sched.wait(worker, now);
        Self::wake_started(g, started);
    }

    fn release(&self, worker: WorkerId) {
        let now = self.now();
        let mut g = self.lock();
        self.boost_off(&mut g, worker);
        let started = g.sched.wait(worker, now);
        Self::wake_started(g, started);
    }

    fn wake_started(mut g: MutexGuard<'_, Inner>, started: Vec<WorkerId>) {
        if started.is_empty() {
            return;
        }
        let wakers: Vec<Waker> = started
            .iter()
            .filter_map(|&s| {
                let w = g.wake.get_mut(s as usize)?;
                w.granted = true;
                w.waker.take()
            })
            .collect();
        drop(g);
        for w in wakers {
            w.wake();
        }
    }

    /// Run the policy's periodic work (call every policy period) and start work a policy held
    /// back (`share` caps) if it may run now.
    pub fn tick(&self) {
        if self.enabled {
            let now = self.now();
            let mut g = self.lock();
            let started = g.sched.poll(now);
            Self::wake_started(g, started);
        }
    }

    /// Change container `container`'s cap in the policy from now on (see
    /// `policy::Policy::set_cap`): the server's share of a budget it splits with the
    /// container's processes (`policy::budget`). Returns whether the policy has the container.
    pub fn set_cap(&self, container: u32, cap: Option<f64>) -> bool {
        self.lock().sched.policy_mut().set_cap(container, cap)
    }

    /// The policy's period, if it has one.
    pub fn period(&self) -> Option<u64> {
        self.lock().sched.policy().period()
    }

    /// Current PL, LRQ and policy counters.
    pub fn snapshot(&self) -> Snapshot {
        let now = self.now();
        self.lock().sched.snapshot(now)
    }

    /// Policy name.
    pub fn policy_name(&self) -> String {
        self.lock().sched.policy().name().to_owned()
    }

    /// The gate's counters now.
    pub fn counters(&self) -> Counters {
        Counters {
            bursts: self.bursts.load(Relaxed),
            queued_bursts: self.queued_bursts.load(Relaxed),
            rounds: self.rounds_opened.load(Relaxed),
            boost_errors: self.boost_errors.load(Relaxed),
        }
    }

    /// Take one PL/LRQ sample (the server calls this every 10 ms). The CPU is the bottleneck
    /// as `policy::Ctx::bottleneck` judges it with the queue as it is.
    pub fn sample(&self) {
        let now = self.now();
        let (busy, queued) = if self.enabled {
            let g = self.lock();
            (g.sched.busy(), g.sched.queued())
        } else {
            (0, 0)
        };
        let ctx = policy::Ctx {
            now,
            busy,
            slots: self.slots,
        };
        self.samples.record(
            Sample {
                t_ns: now,
                busy: busy as u32,
                queued: queued as u32,
            },
            ctx.bottleneck(queued),
        );
    }

    /// The PL/LRQ samples taken so far.
    pub fn samples(&self) -> &Samples {
        &self.samples
    }

    /// Take the worker log kept since the last call (empty unless logging).
    pub fn drain_log(&self) -> Vec<Event> {
        self.lock().sched.drain_log()
    }
}

/// State of one acquisition across polls (see [`Gate::poll_acquire`]).
#[derive(Debug, Default)]
pub struct AcquireState {
    queued: bool,
    /// This worker opened a scheduling round and ends it when polled again.
    round: bool,
}

impl AcquireState {
    /// Whether the worker sits in the ready queue (or was granted and not yet polled).
    pub fn is_queued(&self) -> bool {
        self.queued
    }
}

/// Future returned by [`Gate::acquire`]; cancels cleanly when dropped.
pub struct Acquire<'a> {
    gate: &'a Gate,
    worker: WorkerId,
    hints: Hints,
    state: AcquireState,
}

impl<'a> Future for Acquire<'a> {
    type Output = Permit<'a>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Permit<'a>> {
        let this = self.get_mut();
        let gate = this.gate;
        gate.poll_acquire(&mut this.state, this.worker, &this.hints, cx)
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        self.gate.cancel(&mut self.state, self.worker);
    }
}

/// A held CPU slot. Do the burst's work synchronously and drop it before any await.
#[must_use = "a permit releases its slot when dropped"]
pub struct Permit<'a> {
    gate: &'a Gate,
    worker: WorkerId,
    /// The worker holds the kernel boost.
    boosted: bool,
    /// Thread CPU at the start of the burst and the container it is charged to.
    timer: Option<(BurstTimer, u32)>,
}

impl Permit<'_> {
    /// The worker holding the slot.
    pub fn worker(&self) -> WorkerId {
        self.worker
    }

    /// Whether the burst runs with a raised kernel priority.
    pub fn boosted(&self) -> bool {
        self.boosted
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if let (Some((t, c)), Some(acc)) = (self.timer.take(), self.gate.account.get()) {
            t.stop(acc, c);
        }
        if self.gate.enabled {
            self.gate.release(self.worker);
        }
    }
}

#[cfg(test)]
mod tests;
