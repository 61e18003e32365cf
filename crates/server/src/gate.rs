//! The gate: N CPU slots and a ready queue ordered by a policy (`policy::Sched` behind a
//! mutex). Every burst of CPU work a worker does (handling a request's head, producing a chunk
//! of a body, relaying CGI output) runs while holding a slot ([`Permit`]); every await on the
//! socket, the disk or a pipe happens without one, and is what the log calls a wait.
//!
//! Worker identity models a prefork server: a pool of worker ids ([`Gate::checkout`] /
//! [`Gate::checkin`]). An accepted connection takes the worker that has been idle longest
//! (FIFO, as Linux wakes processes blocked in `accept`) and returns it when the connection
//! closes, so a worker's wait starts when its previous burst ended, possibly on a previous
//! connection, and a worker that waited long becomes ready after a long wait (seed 001
//! characteristic 1).
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

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// The gate's clock: tokio's, so that tests can pause and advance it (outside a paused runtime
/// it is the monotonic clock).
type Clock = tokio::time::Instant;

use policy::{Event, Grant, Hints, Sched, Snapshot, WorkerId};

/// How many PL/LRQ samples the ring keeps (60 s at 10 ms).
pub const RING: usize = 6000;

/// PL/LRQ sampling counters (every 10 ms, seed 001 §4.3).
#[derive(Debug, Default)]
pub struct Samples {
    pub count: AtomicU64,
    /// Sum of busy slots over all samples (PL).
    pub sum_busy: AtomicU64,
    /// Sum of ready-queue lengths over all samples (LRQ).
    pub sum_queued: AtomicU64,
    /// Samples with every slot busy and more than one worker ready (the bottleneck).
    pub bottleneck: AtomicU64,
    /// Recent samples: (t_ns, busy, queued).
    pub recent: Mutex<VecDeque<(u64, u32, u32)>>,
}

#[derive(Default)]
struct Wake {
    granted: bool,
    /// Marked when it became ready and its burst has not ended: it holds the kernel boost.
    boosting: bool,
    waker: Option<Waker>,
}

struct Inner {
    sched: Sched,
    wake: Vec<Wake>,
    /// Workers holding the kernel boost (see [`Gate::new`]).
    boosting: usize,
    /// Threads that ran bursts, with the nice value each had when first seen.
    threads: Vec<(os::prio::Tid, i32)>,
}

/// How a marked worker's runtime thread is raised in the kernel (`--boost`).
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
    fn apply(self, t: os::prio::Tid) -> Result<(), os::prio::PrioError> {
        match self {
            Raise::Nice(n) => os::prio::set_thread_nice(t, n),
            Raise::Slice(d) => os::prio::set_thread_slice(t, Some(d)),
        }
    }
    /// Back to how the thread was (`base`: its nice value when first seen).
    fn restore(self, t: os::prio::Tid, base: i32) -> Result<(), os::prio::PrioError> {
        match self {
            Raise::Nice(_) => os::prio::set_thread_nice(t, base),
            Raise::Slice(_) => os::prio::set_thread_slice(t, None),
        }
    }
}

thread_local! {
    static TID: std::cell::Cell<os::prio::Tid> = const { std::cell::Cell::new(0) };
}

/// The calling thread's id, cached (one `gettid` per thread).
fn tid() -> os::prio::Tid {
    TID.with(|t| {
        if t.get() == 0 {
            t.set(os::prio::current_tid());
        }
        t.get()
    })
}

/// See the module docs.
pub struct Gate {
    enabled: bool,
    rounds: bool,
    epoch: Clock,
    slots: usize,
    inner: Mutex<Inner>,
    boost: Option<Raise>,
    pool: Mutex<VecDeque<WorkerId>>,
    next_worker: AtomicU64,
    /// Bursts run (permits granted).
    pub bursts: AtomicU64,
    /// Bursts that had to wait in the ready queue (round openers not counted).
    pub queued_bursts: AtomicU64,
    /// Scheduling rounds opened (see the module docs).
    pub rounds_opened: AtomicU64,
    /// Boost calls that failed (no permission...).
    pub boost_errors: AtomicU64,
    pub samples: Samples,
    /// Per-container server CPU (resource containers): set once, then every burst's thread CPU
    /// time is charged to the container of its hints.
    account: std::sync::OnceLock<std::sync::Arc<crate::containers::CpuAccount>>,
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
    /// A gate of `sched.slots()` slots. `enabled = false` bypasses everything (baseline);
    /// `boost_nice`: while any worker the policy marked when it became ready (POS's predicted
    /// text workers) waits for a slot or runs its burst, the runtime threads run at that nice
    /// value; when the last such burst ends they return to the value they had. This passes
    /// "text first" on to the kernel, where the server's threads compete with other processes
    /// (seed 001 moved text processes ahead of everything in the ready queue).
    pub fn new(sched: Sched, enabled: bool, boost: Option<Raise>) -> Self {
        Self {
            enabled,
            rounds: true,
            epoch: Clock::now(),
            slots: sched.slots(),
            inner: Mutex::new(Inner {
                sched,
                wake: Vec::new(),
                boosting: 0,
                threads: Vec::new(),
            }),
            boost,
            pool: Mutex::new(VecDeque::new()),
            next_worker: AtomicU64::new(1),
            bursts: AtomicU64::new(0),
            queued_bursts: AtomicU64::new(0),
            rounds_opened: AtomicU64::new(0),
            boost_errors: AtomicU64::new(0),
            samples: Samples::default(),
            account: std::sync::OnceLock::new(),
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
    pub fn set_account(&self, account: std::sync::Arc<crate::containers::CpuAccount>) {
        let _ = self.account.set(account);
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

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
        self.pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(ids);
    }

    fn new_worker(&self) -> WorkerId {
        let id = self.next_worker.fetch_add(1, Relaxed);
        if self.enabled {
            let now = self.now();
            let mut g = self.lock();
            if g.wake.len() <= id as usize {
                let n = (id as usize + 1).max(g.wake.len() * 2);
                g.wake.resize_with(n, Wake::default);
            }
            g.sched.register(id, now);
        }
        id
    }

    /// Take the worker idle longest for a new connection (a new one if none is idle).
    pub fn checkout(&self) -> WorkerId {
        let idle = self
            .pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front();
        idle.unwrap_or_else(|| self.new_worker())
    }

    /// Return a worker whose connection closed to the idle pool.
    pub fn checkin(&self, worker: WorkerId) {
        self.pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(worker);
    }

    /// Workers created so far.
    pub fn workers(&self) -> u64 {
        self.next_worker.load(Relaxed) - 1
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
            marked = granted && g.wake[worker as usize].boosting;
            drop(g);
            others.into_iter().for_each(Waker::wake);
            if !granted {
                return Poll::Pending;
            }
            return self.granted(worker, hints, marked);
        } else {
            if g.wake.len() <= worker as usize {
                let n = (worker as usize + 1).max(g.wake.len() * 2);
                g.wake.resize_with(n, Wake::default);
            }
            let open_round = self.rounds && g.sched.busy() < self.slots && g.sched.queued() == 0;
            let grant = if open_round {
                g.sched.enqueue(worker, now, hints)
            } else {
                g.sched.ready(worker, now, hints)
            };
            if self.boost.is_some() && g.sched.marked(worker) {
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
        }
        drop(g);
        self.granted(worker, hints, marked)
    }

    /// `worker`, marked, became ready: it holds the boost until its burst ends. The first holder
    /// raises every runtime thread (under the lock, so raising and restoring never cross).
    fn boost_on(&self, g: &mut Inner, worker: WorkerId) {
        let Some(raise) = self.boost else { return };
        let me = tid();
        if !g.threads.iter().any(|&(t, _)| t == me) {
            match os::prio::thread_nice(me) {
                Ok(base) => g.threads.push((me, base)),
                Err(_) => {
                    self.boost_errors.fetch_add(1, Relaxed);
                }
            }
            if g.boosting > 0 && raise.apply(me).is_err() {
                self.boost_errors.fetch_add(1, Relaxed);
            }
        }
        let w = &mut g.wake[worker as usize];
        if w.boosting {
            return;
        }
        w.boosting = true;
        g.boosting += 1;
        if g.boosting == 1 {
            for &(t, _) in &g.threads {
                if raise.apply(t).is_err() {
                    self.boost_errors.fetch_add(1, Relaxed);
                }
            }
        }
    }

    /// `worker`'s burst ended (or it gave up): the last holder restores every thread.
    fn boost_off(&self, g: &mut Inner, worker: WorkerId) {
        let Some(raise) = self.boost else { return };
        let Some(w) = g.wake.get_mut(worker as usize) else {
            return;
        };
        if !std::mem::take(&mut w.boosting) {
            return;
        }
        g.boosting -= 1;
        if g.boosting == 0 {
            for &(t, base) in &g.threads {
                if raise.restore(t, base).is_err() {
                    self.boost_errors.fetch_add(1, Relaxed);
                }
            }
        }
    }

    /// The permit of a worker that now holds a slot (the lock released).
    fn granted(&self, worker: WorkerId, hints: &Hints, boosted: bool) -> Poll<Permit<'_>> {
        self.bursts.fetch_add(1, Relaxed);
        let timer = self
            .account
            .get()
            .map(|_| (crate::containers::BurstTimer::start(), hints.container));
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
        self.wake_started(g, started);
    }

    fn release(&self, worker: WorkerId) {
        let now = self.now();
        let mut g = self.lock();
        self.boost_off(&mut g, worker);
        let started = g.sched.wait(worker, now);
        self.wake_started(g, started);
    }

    fn wake_started(&self, mut g: MutexGuard<'_, Inner>, started: Vec<WorkerId>) {
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
            self.wake_started(g, started);
        }
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

    /// Take one PL/LRQ sample (the server calls this every 10 ms).
    pub fn sample(&self) {
        let (busy, queued) = if self.enabled {
            let g = self.lock();
            (g.sched.busy(), g.sched.queued())
        } else {
            (0, 0)
        };
        let s = &self.samples;
        s.count.fetch_add(1, Relaxed);
        s.sum_busy.fetch_add(busy as u64, Relaxed);
        s.sum_queued.fetch_add(queued as u64, Relaxed);
        if busy >= self.slots && queued > 1 {
            s.bottleneck.fetch_add(1, Relaxed);
        }
        let mut r = s.recent.lock().unwrap_or_else(|p| p.into_inner());
        if r.len() >= RING {
            r.pop_front();
        }
        r.push_back((self.now(), busy as u32, queued as u32));
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
    /// The worker holds the kernel boost (see [`Gate::new`]).
    boosted: bool,
    /// Thread CPU at the start of the burst and the container it is charged to.
    timer: Option<(crate::containers::BurstTimer, u32)>,
}

impl Permit<'_> {
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
mod tests {
    use super::*;
    use policy::{PolicyConfig, State};
    use std::sync::Arc;

    fn gate(slots: usize) -> Arc<Gate> {
        let p = policy::build("fifo", &PolicyConfig::default()).unwrap();
        Arc::new(Gate::new(Sched::new(slots, p).with_log(), true, None))
    }

    #[tokio::test]
    async fn second_worker_waits_for_the_slot() {
        let g = gate(1);
        let (a, b) = (g.checkout(), g.checkout());
        let pa = g.acquire(a, Hints::default()).await;
        let g2 = g.clone();
        let t = tokio::spawn(async move {
            let p = g2.acquire(b, Hints::default()).await;
            p.worker()
        });
        tokio::task::yield_now().await;
        assert_eq!(g.snapshot().queued, 1);
        assert!(!t.is_finished());
        drop(pa);
        assert_eq!(t.await.unwrap(), b);
        let s = g.snapshot();
        assert_eq!((s.busy, s.queued), (0, 0));
    }

    #[tokio::test]
    async fn dropping_a_queued_acquire_leaves_no_trace() {
        let g = gate(1);
        let (a, b, c) = (g.checkout(), g.checkout(), g.checkout());
        let pa = g.acquire(a, Hints::default()).await;
        {
            let mut fb = Box::pin(g.acquire(b, Hints::default()));
            assert!(futures_util::poll!(fb.as_mut()).is_pending());
            assert_eq!(g.snapshot().queued, 1);
        }
        assert_eq!(g.snapshot().queued, 0);
        // A granted-but-unpolled acquisition releases its slot when dropped.
        let mut fc = Box::pin(g.acquire(c, Hints::default()));
        assert!(futures_util::poll!(fc.as_mut()).is_pending());
        drop(pa);
        assert_eq!(g.snapshot().busy, 1);
        drop(fc);
        assert_eq!(g.snapshot().busy, 0);
    }

    #[tokio::test]
    async fn log_has_run_and_wait_per_burst() {
        let g = gate(2);
        let w = g.checkout();
        for _ in 0..3 {
            drop(g.acquire(w, Hints::default()).await);
        }
        let log = g.drain_log();
        let runs = log.iter().filter(|e| e.state == State::Run).count();
        let waits = log.iter().filter(|e| e.state == State::Wait).count();
        assert_eq!(runs, 3);
        assert_eq!(waits, 4); // registration + one per burst
    }

    /// Three workers ask for the slot in one runtime tick: S1 and S2 had just run a burst (a
    /// short wait: POS demotes them with RW = 1), L had waited longer than SLP. Each holds its
    /// permit only synchronously, as the server's bursts do. Returns the order they ran in.
    async fn round_order(rounds: bool) -> Vec<WorkerId> {
        let cfg = PolicyConfig {
            slp: policy::Tunable::Fixed(50_000_000),
            rw: policy::Tunable::Fixed(1),
            starvation_bound: None,
            ..PolicyConfig::default()
        };
        let p = policy::build("pos", &cfg).unwrap();
        let g = Arc::new(Gate::new(Sched::new(1, p), true, None).with_rounds(rounds));
        let (s1, s2, l) = (g.checkout(), g.checkout(), g.checkout());
        tokio::time::advance(std::time::Duration::from_millis(100)).await;
        for s in [s1, s2] {
            drop(g.acquire(s, Hints::default()).await);
        }
        let ran = Arc::new(Mutex::new(Vec::new()));
        let tasks: Vec<_> = [s1, s2, l]
            .into_iter()
            .map(|w| {
                let (g, ran) = (g.clone(), ran.clone());
                tokio::spawn(async move {
                    let p = g.acquire(w, Hints::default()).await;
                    ran.lock().unwrap().push(p.worker());
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let s = g.snapshot();
        assert_eq!((s.busy, s.queued), (0, 0), "the gate ends idle");
        let order = ran.lock().unwrap().clone();
        order
    }

    #[tokio::test(start_paused = true)]
    async fn a_round_lets_pos_serve_the_long_waiter_first() {
        // Without rounds the first to ask runs at once and the gate never has a queue.
        assert_eq!(round_order(false).await, vec![1, 2, 3]);
        // With rounds the policy sees all three and serves L (marked) first, then FIFO.
        assert_eq!(round_order(true).await, vec![3, 1, 2]);
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_a_round_opener_hands_the_slot_on() {
        let g = gate(1);
        let (a, b) = (g.checkout(), g.checkout());
        let mut fa = Box::pin(g.acquire(a, Hints::default()));
        assert!(
            futures_util::poll!(fa.as_mut()).is_pending(),
            "a opens a round"
        );
        assert_eq!(g.rounds_opened.load(Relaxed), 1);
        let mut fb = Box::pin(g.acquire(b, Hints::default()));
        assert!(futures_util::poll!(fb.as_mut()).is_pending(), "b joins it");
        assert_eq!((g.snapshot().busy, g.snapshot().queued), (0, 2));
        drop(fa);
        let s = g.snapshot();
        assert_eq!((s.busy, s.queued), (1, 0), "b got the slot");
        let p = fb.await;
        assert_eq!(p.worker(), b);
        drop(p);
        assert_eq!(g.snapshot().busy, 0);
    }

    #[test]
    fn pool_is_fifo() {
        let g = gate(1);
        g.prefork(3);
        let a = g.checkout();
        assert_eq!(a, 1);
        g.checkin(a);
        assert_eq!(g.checkout(), 2);
        assert_eq!(g.checkout(), 3);
        assert_eq!(g.checkout(), 1);
        assert_eq!(g.checkout(), 4);
    }

    #[test]
    fn boost_raises_a_marked_burst_and_restores_after() {
        let cfg = PolicyConfig {
            slp: policy::Tunable::Fixed(0),
            ..PolicyConfig::default()
        };
        let p = policy::build("pos", &cfg).unwrap();
        let g = Gate::new(Sched::new(1, p), true, Some(Raise::Nice(-5))).with_rounds(false);
        let w = g.checkout();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let tid = os::prio::current_tid();
        let before = os::prio::thread_nice(tid).unwrap();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut st = AcquireState::default();
        let Poll::Ready(permit) = g.poll_acquire(&mut st, w, &Hints::default(), &mut cx) else {
            panic!("uncontended acquire queued");
        };
        if g.boost_errors.load(Relaxed) > 0 {
            eprintln!("SKIP boost_raises_a_marked_burst_and_restores_after: needs CAP_SYS_NICE");
            return;
        }
        assert!(
            permit.boosted(),
            "a worker ready after a wait > SLP is marked"
        );
        assert_eq!(os::prio::thread_nice(tid).unwrap(), -5);
        drop(permit);
        assert_eq!(os::prio::thread_nice(tid).unwrap(), before);
    }

    #[test]
    fn slice_boost_shortens_a_marked_bursts_slice_and_restores_it() {
        // In a thread of its own: the boost changes the calling thread's scheduling.
        std::thread::spawn(|| {
            let cfg = PolicyConfig {
                slp: policy::Tunable::Fixed(0),
                ..PolicyConfig::default()
            };
            let p = policy::build("pos", &cfg).unwrap();
            let slice = std::time::Duration::from_micros(300);
            let g = Gate::new(Sched::new(1, p), true, Some(Raise::Slice(slice))).with_rounds(false);
            let w = g.checkout();
            std::thread::sleep(std::time::Duration::from_millis(2));
            let tid = os::prio::current_tid();
            let (nice, before) = (
                os::prio::thread_nice(tid).unwrap(),
                os::prio::thread_slice_ns(tid).unwrap(),
            );
            let mut cx = Context::from_waker(std::task::Waker::noop());
            let mut st = AcquireState::default();
            let Poll::Ready(permit) = g.poll_acquire(&mut st, w, &Hints::default(), &mut cx) else {
                panic!("uncontended acquire queued");
            };
            if g.boost_errors.load(Relaxed) > 0 || before == 0 {
                eprintln!(
                    "SKIP slice_boost_shortens_a_marked_bursts_slice_and_restores_it: no custom \
                     slices on this kernel"
                );
                return;
            }
            assert!(
                permit.boosted(),
                "a worker ready after a wait > SLP is marked"
            );
            assert_eq!(os::prio::thread_slice_ns(tid).unwrap(), 300_000);
            assert_eq!(
                os::prio::thread_nice(tid).unwrap(),
                nice,
                "the weight is unchanged"
            );
            drop(permit);
            assert_eq!(os::prio::thread_slice_ns(tid).unwrap(), before);
        })
        .join()
        .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn boost_holds_while_a_marked_worker_waits_behind_an_unmarked_burst() {
        let cfg = PolicyConfig {
            slp: policy::Tunable::Fixed(50_000_000),
            rw: policy::Tunable::Fixed(1),
            starvation_bound: None,
            ..PolicyConfig::default()
        };
        let p = policy::build("pos", &cfg).unwrap();
        let g = Gate::new(Sched::new(1, p), true, Some(Raise::Nice(-5))).with_rounds(false);
        let (a, l) = (g.checkout(), g.checkout());
        tokio::time::advance(std::time::Duration::from_millis(100)).await;
        let tid = os::prio::current_tid();
        let before = os::prio::thread_nice(tid).unwrap();
        // A ran a burst just now (marked after its long first wait, then demoted: RW = 1).
        drop(g.acquire(a, Hints::default()).await);
        if g.boost_errors.load(Relaxed) > 0 {
            eprintln!("SKIP boost_holds_while_a_marked_worker_waits_behind_an_unmarked_burst: needs CAP_SYS_NICE");
            return;
        }
        assert_eq!(os::prio::thread_nice(tid).unwrap(), before, "restored");
        let pa = g.acquire(a, Hints::default()).await;
        assert!(!pa.boosted(), "a short waiter is not marked");
        assert_eq!(os::prio::thread_nice(tid).unwrap(), before);
        let mut fl = Box::pin(g.acquire(l, Hints::default()));
        assert!(
            futures_util::poll!(fl.as_mut()).is_pending(),
            "the slot is A's"
        );
        assert_eq!(
            os::prio::thread_nice(tid).unwrap(),
            -5,
            "a marked worker waiting raises the thread while A's burst still runs"
        );
        drop(pa);
        let pl = fl.await;
        assert!(pl.boosted());
        assert_eq!(os::prio::thread_nice(tid).unwrap(), -5);
        drop(pl);
        assert_eq!(
            os::prio::thread_nice(tid).unwrap(),
            before,
            "the last holder restores"
        );
    }

    /// Measurement, not a test of speed: uncontended acquire + release, per policy.
    #[test]
    #[ignore = "measurement: cargo test -p server --release --lib -- --ignored --nocapture fast_path"]
    fn fast_path_cost() {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        for (name, log, rounds) in [
            ("fifo", false, false),
            ("fifo", false, true),
            ("pos", false, false),
            ("pos", false, true),
            ("pos", true, true),
            ("content", false, true),
        ] {
            {
                let p = policy::build(name, &PolicyConfig::default()).unwrap();
                let mut sched = Sched::new(1, p);
                if log {
                    sched = sched.with_log();
                }
                let g = Gate::new(sched, true, None).with_rounds(rounds);
                let w = g.checkout();
                let n = 1_000_000;
                let t0 = std::time::Instant::now();
                for _ in 0..n {
                    let mut st = AcquireState::default();
                    // With rounds the first poll opens one and the second ends it.
                    let permit = loop {
                        if let Poll::Ready(p) =
                            g.poll_acquire(&mut st, w, &Hints::default(), &mut cx)
                        {
                            break p;
                        }
                        assert!(rounds, "uncontended acquire queued");
                    };
                    drop(permit);
                    if log && g.lock().sched.queued() == 0 {
                        // Keep the log from growing without bound, as the server's drain does.
                        let _ = g.drain_log();
                    }
                }
                let ns = t0.elapsed().as_nanos() as f64 / n as f64;
                eprintln!(
                    "gate fast path: policy {name:<8} log {log:<5} rounds {rounds:<5}: {ns:.0} ns per burst"
                );
            }
        }
    }

    #[tokio::test]
    async fn disabled_gate_touches_nothing() {
        let p = policy::build("fifo", &PolicyConfig::default()).unwrap();
        let g = Gate::new(Sched::new(1, p).with_log(), false, None);
        let w = g.checkout();
        let p1 = g.acquire(w, Hints::default()).await;
        let p2 = g.acquire(w + 1, Hints::default()).await;
        drop((p1, p2));
        assert!(g.drain_log().is_empty());
    }
}
