//! [`Gate`]: N CPU slots and ready queues ordered by a policy. A worker acquires a slot
//! ([`Gate::acquire`], [`Gate::poll_acquire`]) for every burst of CPU work and holds it as a
//! [`Permit`] until the burst ends.
//!
//! **Lanes** ([`Gate::with_lanes`]). The slots and the ready queue are split into lanes, one per
//! runtime thread, each a `policy::Sched` behind its own lock ([`crate::lane`]), the way the
//! kernel keeps a run queue per CPU: a worker belongs to the lane of the thread that created it
//! (`policy::balance::place`), and its bursts touch only that lane's lock, which no other
//! thread wants most of the time. Slots move between lanes to follow queued work
//! (`policy::balance::lender` when a lane's worker is queued with no free slot,
//! `policy::balance::receiver` when a burst ends), unless [`Gate::with_balance`] turned that off
//! (one serving thread per lane); workers never move. POS's learning stays
//! global: every period each lane hands over its observations, lane 0 predicts SLP and RW from
//! all of them and the other lanes take its predictions ([`Gate::tick`]). The bottleneck test
//! is per lane. One lane (`Gate::new`) is the shared gate as it was.
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
//! returned by `Sched::wait` only allocates when it starts another worker). With lanes, a
//! burst also publishes its lane's load (three relaxed stores) and, while slots move between
//! lanes, reads one shared counter ([`Gate::with_balance`] turns the moves off).
//!
//! **A panicking burst** drops its [`Permit`] while unwinding, which releases the slot; a lock
//! poisoned by a panic is taken over. So a worker whose burst panics takes neither its slot nor
//! its lane with it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, MutexGuard, OnceLock};
use std::task::{Context, Poll, Waker};

use policy::balance::{self, LaneLoad};
use policy::{Event, Grant, Hints, PolicyStats, Sched, Snapshot, State, WorkerId};

use crate::account::{BurstTimer, CpuAccount};
use os::prio::Tid;

use crate::boost::{Boost, Raise};
use crate::lane::{index_in_lane, lane_of, worker_id, Counts, Inner, Lane};
use crate::samples::{Sample, Samples};
use crate::shard::Counter;

/// The gate's clock: tokio's, so that tests can pause and advance it (outside a paused runtime
/// it is the monotonic clock).
type Clock = tokio::time::Instant;

/// Streaks: a worker that asks for a slot again right after its burst ended, without really
/// waiting in between (its response's next chunk, the socket write having returned at once),
/// continues without opening a scheduling round, for a while. A round makes every runtime task
/// take its turn; between chunks of one response that turn-taking interleaves many streams'
/// state burst by burst (a gzip stream's deflate state is ~300 KB: with 50 streams taking turns
/// every burst starts with a cold cache, and triage-pos cost up to 1.6x fifo's CPU per
/// request). A kernel does not switch a process that did not block either, until its time
/// slice ends. The worker still goes through its lane's queue (and waits if others are queued);
/// only the round is skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streak {
    /// Longest gap between the end of a burst and the next acquisition that still counts as
    /// not having waited (ns).
    pub gap_ns: u64,
    /// Longest streak, from its first burst (ns of wall time, as a time slice; under a CPU
    /// quota that throttles the server, a streak ends sooner in CPU terms).
    pub slice_ns: u64,
}

impl Default for Streak {
    fn default() -> Self {
        Streak {
            gap_ns: 50_000,
            slice_ns: 1_000_000,
        }
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
    /// Slots moved from one lane to another (`policy::balance`).
    pub slot_moves: u64,
    /// Acquisitions that continued a streak instead of opening a round ([`Streak`]).
    pub streak_bursts: u64,
}

/// See the module docs.
pub struct Gate {
    enabled: bool,
    rounds: bool,
    /// Queue a worker when its task is woken while its lane is busy ([`Gate::with_wake_queue`]).
    wake_queue: bool,
    /// The policy orders by the request's hints (`policy::Policy::reads_hints`): a wake-up,
    /// which comes before the request is read, cannot queue for it.
    reads_hints: bool,
    /// `None`: every acquisition that finds the lane idle opens a round.
    streak: Option<Streak>,
    epoch: Clock,
    slots: usize,
    lanes: Box<[Lane]>,
    /// Whether slots move between lanes ([`Gate::with_balance`]): off when every lane has a
    /// serving thread of its own, where a lent slot only idles the lender's thread.
    balance: bool,
    /// How many lanes are spare and starved (see [`crate::lane::Published`]); kept (and read)
    /// only while balancing, so that without it no burst writes this line shared by all lanes.
    counts: Counts,
    /// The counters bumped per burst are per thread ([`crate::shard`]): one atomic that every
    /// core writes per burst would bounce its cache line between them.
    bursts: Counter,
    queued_bursts: Counter,
    rounds_opened: Counter,
    boost_errors: AtomicU64,
    slot_moves: AtomicU64,
    streak_bursts: Counter,
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
            .field("lanes", &self.lanes.len())
            .finish()
    }
}

impl Gate {
    /// A gate of one lane of `sched.slots()` slots. `enabled = false` bypasses everything
    /// (baseline). `boost`: while any worker the policy marked when it became ready (POS's
    /// predicted text workers) waits for a slot or runs its burst, the runtime threads are
    /// raised that way; when the last such burst ends they return to how they were (see
    /// [`crate::boost`]).
    pub fn new(sched: Sched, enabled: bool, boost: Option<Raise>) -> Self {
        Self::build(vec![Lane::new(sched, boost.map(Boost::new))], enabled)
    }

    /// A gate of one lane per `Sched` (one per runtime thread, each with its share of the
    /// slots: `policy::balance::shares`, and its own instance of the policy). With more than
    /// one, each lane's periodic work is run by [`Gate::tick`], which the mechanism must call
    /// every policy period. See the module docs.
    pub fn with_lanes(scheds: Vec<Sched>, enabled: bool) -> Self {
        assert!(!scheds.is_empty(), "a gate needs at least one lane");
        let many = scheds.len() > 1;
        let lanes = scheds
            .into_iter()
            .map(|s| Lane::new(if many { s.with_external_tick() } else { s }, None))
            .collect();
        Self::build(lanes, enabled)
    }

    fn build(lanes: Vec<Lane>, enabled: bool) -> Self {
        let reads_hints = lanes.iter().any(|l| l.lock().sched.policy().reads_hints());
        let g = Self {
            enabled,
            rounds: true,
            wake_queue: false,
            reads_hints,
            streak: Some(Streak::default()),
            epoch: Clock::now(),
            slots: lanes.iter().map(|l| l.nominal).sum(),
            lanes: lanes.into_boxed_slice(),
            balance: true,
            counts: Counts::default(),
            bursts: Counter::default(),
            queued_bursts: Counter::default(),
            rounds_opened: Counter::default(),
            boost_errors: AtomicU64::new(0),
            slot_moves: AtomicU64::new(0),
            streak_bursts: Counter::default(),
            samples: Samples::default(),
            account: OnceLock::new(),
        };
        for l in g.lanes.iter() {
            let inner = l.lock();
            l.publish(&inner, g.counts());
        }
        g
    }

    /// Move slots between lanes to follow queued work (`true`, the default) or keep every
    /// lane's share where it is (`false`). With one serving thread per lane (each thread runs
    /// only its own lane's workers) a slot lent to another lane cannot make that lane's
    /// thread run two bursts at once: it only leaves the lender short when its own work
    /// arrives, and every move and every starved/spare change writes memory all lanes share.
    pub fn with_balance(mut self, balance: bool) -> Self {
        self.balance = balance;
        self.counts = Counts::default();
        for l in self.lanes.iter() {
            let inner = l.lock();
            l.forget_flags();
            l.publish(&inner, self.counts());
        }
        self
    }

    /// Whether slots move between lanes ([`Gate::with_balance`]; never with one lane).
    pub fn balances(&self) -> bool {
        self.balance && self.lanes.len() > 1
    }

    /// The spare/starved counts to keep, when balancing.
    fn counts(&self) -> Option<&Counts> {
        self.balances().then_some(&self.counts)
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

    /// Let a task's wake-up queue its worker while the worker's lane is busy (`true`), so
    /// that the task is polled once, when the policy grants it a slot, instead of being polled
    /// to find the slot taken and again when granted (see [`crate::wake_queue`]). It applies
    /// only to tasks wrapped in [`crate::QueueOnWake`], and only with scheduling rounds and a
    /// policy that orders without the request's hints ([`Gate::queues_on_wake`]).
    pub fn with_wake_queue(mut self, on: bool) -> Self {
        self.wake_queue = on;
        self
    }

    /// Whether wake-ups queue workers ([`Gate::with_wake_queue`]): asked for, the gate
    /// enabled, rounds on (a policy that never reorders gains nothing) and a policy that does
    /// not order by hints.
    pub fn queues_on_wake(&self) -> bool {
        self.wake_queue && self.enabled && self.rounds && !self.reads_hints
    }

    /// The streak rule in force, if any ([`Streak`]): its slice also bounds how much of a
    /// response one burst may produce ahead.
    pub fn streak(&self) -> Option<Streak> {
        self.streak
    }

    /// Let a worker that did not really wait continue without a round ([`Streak`], on by
    /// default), or not (`None`: every idle-to-busy acquisition opens one).
    pub fn with_streak(mut self, streak: Option<Streak>) -> Self {
        self.streak = streak;
        self
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

    /// CPU slots (all lanes together).
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Lanes (one per runtime thread; 1: one shared ready queue).
    pub fn lanes(&self) -> usize {
        self.lanes.len()
    }

    /// Monotonic nanoseconds since the gate was made (server start).
    pub fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn lane(&self, worker: WorkerId) -> (usize, &Lane) {
        let i = lane_of(worker, self.lanes.len());
        (i, &self.lanes[i])
    }

    fn idx(&self, worker: WorkerId) -> usize {
        index_in_lane(worker, self.lanes.len())
    }

    /// Every lane's load as last published.
    fn loads(&self) -> Vec<LaneLoad> {
        self.lanes.iter().map(Lane::load).collect()
    }

    /// Create `n` idle workers (the prefork pool at start), spread over the lanes.
    pub fn prefork(&self, n: usize) {
        for k in 0..n {
            let lane = k % self.lanes.len();
            let id = self.new_worker(lane);
            self.lanes[lane].pool.put([id]);
        }
    }

    fn new_worker(&self, lane: usize) -> WorkerId {
        let l = &self.lanes[lane];
        let id = worker_id(lane, l.pool.fresh() - 1, self.lanes.len());
        if self.enabled {
            let now = self.now();
            let mut g = l.lock();
            g.wake_mut(self.idx(id));
            g.sched.register(id, now);
        }
        id
    }

    /// Take a worker for a new connection: in the calling thread's lane unless it is crowded
    /// (`policy::balance::place`), the one idle longest there (a new one if none is idle).
    /// Without balancing (one serving thread per lane) always in the calling thread's lane: the
    /// connection never leaves its thread, so its bursts must not queue for another thread's
    /// slot (each would be a cross-thread wake-up, and two threads would share one slot).
    pub fn checkout(&self) -> WorkerId {
        let n = self.lanes.len();
        let lane = if n == 1 {
            0
        } else if !self.balance {
            crate::shard::home() % n
        } else {
            balance::place(&self.loads(), crate::shard::home() % n)
        };
        let l = &self.lanes[lane];
        l.load.workers.fetch_add(1, Relaxed);
        l.pool.take_idle().unwrap_or_else(|| self.new_worker(lane))
    }

    /// Return a worker whose connection closed to its lane's idle pool.
    pub fn checkin(&self, worker: WorkerId) {
        let (_, l) = self.lane(worker);
        let _ = l
            .load
            .workers
            .fetch_update(Relaxed, Relaxed, |w| w.checked_sub(1));
        l.pool.put([worker]);
    }

    /// Workers checked out now (connections open), per lane: which lanes the serving threads'
    /// connections live in.
    pub fn live_workers_by_lane(&self) -> Vec<usize> {
        self.lanes
            .iter()
            .map(|l| l.load.workers.load(Relaxed))
            .collect()
    }

    /// Forget the idle workers a crowd of connections left behind (in each lane the newest
    /// ids, down to the newest still in use, all waiting) and shrink the per-worker tables to
    /// the workers left: the lane's wake-up states, the scheduler's books and the policy's
    /// tables (`policy::Sched::shrink`). Without it they stay sized for the largest crowd
    /// ever served: after 5,000 connections, 0.6 MB (docs/server.md). The server calls it when
    /// a crowd has left; returns how many workers were forgotten. Their ids are created again
    /// when needed, starting afresh.
    pub fn shrink(&self) -> usize {
        let n = self.lanes.len();
        let mut forgotten = 0;
        for (k, l) in self.lanes.iter().enumerate() {
            let now = self.now();
            let mut g = l.lock();
            let gone = l.pool.forget_top(
                |i| worker_id(k, i, n),
                |w| matches!(g.sched.state(w), None | Some(State::Wait)),
            );
            for &w in &gone {
                g.sched.forget(w, now);
            }
            g.sched.shrink();
            let left = l.pool.created() as usize;
            g.wake.truncate(left);
            g.wake.shrink_to_fit();
            forgotten += gone.len();
        }
        forgotten
    }

    /// Worker ids in existence, checked out or idle (created, less those [`Gate::shrink`]
    /// forgot).
    pub fn workers(&self) -> u64 {
        self.lanes.iter().map(|l| l.pool.created()).sum()
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
                lowered: None,
                timer: None,
            });
        }
        let (li, lane) = self.lane(worker);
        let wi = self.idx(worker);
        if state.queued {
            let mut others = Vec::new();
            // A queued worker polled again reads the clock only to end a round.
            let round = std::mem::take(&mut state.round);
            let now = if round { self.now() } else { 0 };
            let mut g = lane.lock();
            if round {
                // End the round this worker opened: the policy chooses among all who joined.
                for s in g.sched.poll(now) {
                    let si = self.idx(s);
                    let Some(w) = g.wake.get_mut(si) else {
                        continue;
                    };
                    w.granted = true;
                    if s != worker {
                        others.extend(w.waker.take());
                    }
                }
                lane.publish(&g, self.counts());
            }
            let w = &mut g.wake[wi];
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
            let held = w.boosting;
            let lever = granted.then(|| self.burst_lever(&mut g, worker, held));
            drop(g);
            others.into_iter().for_each(Waker::wake);
            let Some((marked, lowered)) = lever else {
                return Poll::Pending;
            };
            return self.granted(worker, hints, marked, lowered);
        }
        let now = self.now();
        let mut g = lane.lock();
        let marked;
        let w = g.wake_mut(wi);
        if self.wake_queue {
            w.hints = *hints;
            if std::mem::take(&mut w.woke_running) {
                // Granted when its wake-up queued it: it already runs.
                w.streak_start = now;
                let held = w.boosting;
                let (marked, lowered) = self.burst_lever(&mut g, worker, held);
                drop(g);
                return self.granted(worker, hints, marked, lowered);
            }
        }
        let continues = self.rounds
            && self.streak.is_some_and(|s| {
                w.last_end > 0
                    && now.saturating_sub(w.last_end) <= s.gap_ns
                    && now.saturating_sub(w.streak_start) < s.slice_ns
            });
        if !continues {
            w.streak_start = now;
        }
        let open_round =
            self.rounds && !continues && g.sched.busy() < g.sched.slots() && g.sched.queued() == 0;
        if continues {
            self.streak_bursts.add(1);
        }
        let grant = if open_round {
            g.sched.enqueue(worker, now, hints)
        } else {
            g.sched.ready(worker, now, hints)
        };
        if g.boost.as_ref().is_some_and(|b| !b.at_rest()) && g.sched.marked(worker) {
            self.boost_on(&mut g, wi);
        }
        let lowered;
        match grant {
            Grant::RunNow => {
                let held = g.wake[wi].boosting;
                (marked, lowered) = self.burst_lever(&mut g, worker, held);
                if self.lanes.len() > 1 {
                    lane.publish(&g, self.counts());
                }
            }
            Grant::Queued => {
                let w = &mut g.wake[wi];
                w.granted = false;
                w.waker = Some(cx.waker().clone());
                state.queued = true;
                let (_, starved) = lane.publish(&g, self.counts());
                drop(g);
                if open_round {
                    state.round = true;
                    self.rounds_opened.add(1);
                    // Yield: back of the runtime's queue, behind every task ready now.
                    cx.waker().wake_by_ref();
                } else {
                    self.queued_bursts.add(1);
                    if starved && self.balances() && self.counts.spare.load(SeqCst) > 0 {
                        self.borrow_slot(li);
                    }
                }
                return Poll::Pending;
            }
        }
        drop(g);
        self.granted(worker, hints, marked, lowered)
    }

    /// Lane `to` is starved: take a slot from a spare lane, if one is still spare.
    fn borrow_slot(&self, to: usize) {
        let Some(from) = balance::lender(&self.loads(), to) else {
            return;
        };
        if self.take_spare_slot(from) {
            self.give_slot(to);
        }
    }

    /// Take a free slot out of lane `from` if it is spare (a free slot, nothing queued).
    fn take_spare_slot(&self, from: usize) -> bool {
        let l = &self.lanes[from];
        let mut g = l.lock();
        let took = g.sched.queued() == 0 && g.sched.take_free_slot();
        if took {
            l.publish(&g, self.counts());
        }
        drop(g);
        took
    }

    /// A slot in transit arrives in lane `to`, which starts whoever it lets run.
    fn give_slot(&self, to: usize) {
        self.slot_moves.fetch_add(1, Relaxed);
        let now = self.now();
        let l = &self.lanes[to];
        let mut g = l.lock();
        let started = g.sched.add_slot(now);
        l.publish(&g, self.counts());
        self.wake_started(g, started);
    }

    /// `worker` is granted a slot on the calling thread: whether its burst runs raised and, at
    /// rest, the thread lowered for an unmarked burst (`held`: whether it holds the boost).
    fn burst_lever(&self, g: &mut Inner, worker: WorkerId, held: bool) -> (bool, Option<Tid>) {
        let Inner { boost, sched, .. } = g;
        let Some(boost) = boost.as_mut().filter(|b| b.at_rest()) else {
            return (held, None);
        };
        let mut failed = boost.see_current_thread();
        let raised = sched.marked(worker);
        let lowered = if raised {
            None
        } else {
            let (t, f) = boost.unmarked_burst_starts();
            failed += f;
            t
        };
        self.count_boost_errors(failed);
        (raised, lowered)
    }

    /// `worker`, marked, became ready: it holds the boost until its burst ends.
    fn boost_on(&self, g: &mut Inner, wi: usize) {
        let Inner {
            wake,
            boost: Some(boost),
            ..
        } = g
        else {
            return;
        };
        let mut failed = boost.see_current_thread();
        if !std::mem::replace(&mut wake[wi].boosting, true) {
            failed += boost.hold();
        }
        self.count_boost_errors(failed);
    }

    /// `worker`'s burst ended (or it gave up): it no longer holds the boost.
    fn boost_off(&self, g: &mut Inner, wi: usize) {
        let Inner {
            wake,
            boost: Some(boost),
            ..
        } = g
        else {
            return;
        };
        if wake
            .get_mut(wi)
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
    fn granted(
        &self,
        worker: WorkerId,
        hints: &Hints,
        boosted: bool,
        lowered: Option<Tid>,
    ) -> Poll<Permit<'_>> {
        self.bursts.add(1);
        let timer = self
            .account
            .get()
            .map(|_| (BurstTimer::start(), hints.container));
        Poll::Ready(Permit {
            gate: self,
            worker,
            boosted,
            lowered,
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
        // An unfinished round ends here: `end_burst` fills the free slots from the queue.
        state.round = false;
        let (_, lane) = self.lane(worker);
        let wi = self.idx(worker);
        {
            let mut g = lane.lock();
            let w = &mut g.wake[wi];
            w.granted = false;
            w.waker = None;
        }
        // Ready or (granted) Run: either way it leaves the queue or its slot.
        self.end_burst(worker, None);
    }

    /// `worker`'s task was woken (see [`crate::wake_queue`]). If its lane is busy (no free
    /// slot, or workers queued) and the worker waits (neither queued nor running), it becomes
    /// ready now, with its last acquisition's hints, and `task` is woken only when the policy
    /// grants it a slot: returns `true`, and `queued` is set (under the lane's lock) until the
    /// task is polled with the slot ([`Gate::begin_woken_poll`]). Otherwise returns `false`:
    /// wake the task at once.
    pub(crate) fn queue_woken(&self, worker: WorkerId, task: &Waker, queued: &AtomicBool) -> bool {
        let (li, lane) = self.lane(worker);
        let wi = self.idx(worker);
        let mut g = lane.lock();
        if g.sched.busy() < g.sched.slots() && g.sched.queued() == 0 {
            // An idle lane: polled at once, the task opens a round if it asks for a slot.
            return false;
        }
        if g.sched.state(worker) != Some(State::Wait) {
            return false;
        }
        let now = self.now();
        let hints = g.wake_mut(wi).hints;
        let grant = g.sched.ready(worker, now, &hints);
        if g.boost.as_ref().is_some_and(|b| !b.at_rest()) && g.sched.marked(worker) {
            self.boost_on(&mut g, wi);
        }
        let w = &mut g.wake[wi];
        queued.store(true, Relaxed);
        if grant == Grant::RunNow {
            w.granted = true;
            return false;
        }
        w.granted = false;
        w.waker = Some(task.clone());
        let (_, starved) = lane.publish(&g, self.counts());
        drop(g);
        self.queued_bursts.add(1);
        if starved && self.balances() && self.counts.spare.load(SeqCst) > 0 {
            self.borrow_slot(li);
        }
        true
    }

    /// `worker`'s task is about to be polled after its wake-up queued it (`queued` set):
    /// `Ready(true)` if it was granted its slot (it runs from now on, without acquiring: call
    /// [`Gate::end_woken_poll`] when the poll ends), `Pending` if it still waits (its task is
    /// woken when granted). `Ready(false)`: `queued` was not set, poll as usual.
    pub(crate) fn begin_woken_poll(&self, worker: WorkerId, queued: &AtomicBool) -> Poll<bool> {
        if !queued.load(Relaxed) {
            return Poll::Ready(false);
        }
        let (_, lane) = self.lane(worker);
        let mut g = lane.lock();
        let w = g.wake_mut(self.idx(worker));
        if !w.granted {
            return Poll::Pending;
        }
        w.granted = false;
        w.woke_running = true;
        w.waker = None;
        queued.store(false, Relaxed);
        Poll::Ready(true)
    }

    /// The poll that [`Gate::begin_woken_poll`] let run has ended: if no acquisition took the
    /// slot it was granted (the wake-up was not for a burst: a timer, part of a request, a
    /// closed connection), the slot is given back.
    pub(crate) fn end_woken_poll(&self, worker: WorkerId) {
        let (_, lane) = self.lane(worker);
        let unused = {
            let mut g = lane.lock();
            std::mem::take(&mut g.wake_mut(self.idx(worker)).woke_running)
        };
        if unused {
            self.end_burst(worker, None);
        }
    }

    /// A task wrapped in [`crate::QueueOnWake`] is dropped: if its wake-up had queued the worker
    /// (or it was granted and not polled since), the worker leaves the queue or gives the slot
    /// back; if it was dropped in the middle of a poll run with that slot (a panic unwinding
    /// out of it), the slot is given back too.
    pub(crate) fn cancel_woken(&self, worker: WorkerId, queued: &AtomicBool) {
        let was_queued = queued.swap(false, Relaxed);
        let (_, lane) = self.lane(worker);
        let held = {
            let mut g = lane.lock();
            let w = g.wake_mut(self.idx(worker));
            let running = std::mem::take(&mut w.woke_running);
            if was_queued {
                w.granted = false;
                w.waker = None;
            }
            was_queued || running
        };
        if held {
            self.end_burst(worker, None);
        }
    }

    /// `worker` stops running (or wanting to run): its slot goes to its lane's queue, or to a
    /// starved lane (`policy::balance::receiver`).
    /// `lowered`: the thread an unmarked burst ran lowered on (boost at rest), raised again.
    fn end_burst(&self, worker: WorkerId, lowered: Option<Tid>) {
        let now = self.now();
        let (li, lane) = self.lane(worker);
        let wi = self.idx(worker);
        let mut g = lane.lock();
        self.boost_off(&mut g, wi);
        if let (Some(t), Some(b)) = (lowered, g.boost.as_mut()) {
            let failed = b.unmarked_burst_ended(t);
            self.count_boost_errors(failed);
        }
        if let Some(w) = g.wake.get_mut(wi) {
            w.last_end = now.max(1);
        }
        if self.balances() && self.counts.starved.load(SeqCst) > 0 {
            let running = g.sched.state(worker) == Some(policy::State::Run);
            let mut loads = self.loads();
            loads[li] = LaneLoad {
                slots: g.sched.slots(),
                busy: g.sched.busy() - usize::from(running),
                queued: g.sched.queued(),
                ..loads[li]
            };
            if running {
                if let Some(to) = balance::receiver(&loads, li) {
                    g.sched.wait_and_give_slot(worker, now);
                    lane.publish(&g, self.counts());
                    drop(g);
                    self.give_slot(to);
                    return;
                }
            }
        }
        let started = g.sched.wait(worker, now);
        let (spare, _) = lane.publish(&g, self.counts());
        self.wake_started(g, started);
        // Became spare while another lane starves (it published starved after we looked).
        if spare && self.balances() && self.counts.starved.load(SeqCst) > 0 {
            self.lend_spare(li);
        }
    }

    /// Lane `from` is spare: give its free slot to the starved lane with the longest queue.
    fn lend_spare(&self, from: usize) {
        let mut loads = self.loads();
        loads[from].queued = 0;
        let Some(to) = balance::receiver(&loads, from) else {
            return;
        };
        if self.take_spare_slot(from) {
            self.give_slot(to);
        }
    }

    fn wake_started(&self, mut g: MutexGuard<'_, Inner>, started: Vec<WorkerId>) {
        if let [one] = started[..] {
            // The common case under contention: one slot freed, one worker started.
            let waker = g.wake.get_mut(self.idx(one)).and_then(|w| {
                w.granted = true;
                w.waker.take()
            });
            drop(g);
            if let Some(w) = waker {
                w.wake();
            }
            return;
        }
        if started.is_empty() {
            return;
        }
        let wakers: Vec<Waker> = started
            .iter()
            .filter_map(|&s| {
                let w = g.wake.get_mut(self.idx(s))?;
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
    /// back (`share` caps) if it may run now. With several lanes, learning is global: every
    /// lane hands over what it observed in the period, lane 0 predicts from all of it, and the
    /// other lanes take its predictions.
    pub fn tick(&self) {
        if !self.enabled {
            return;
        }
        let now = self.now();
        if self.lanes.len() == 1 {
            let l = &self.lanes[0];
            let mut g = l.lock();
            let started = g.sched.poll(now);
            l.publish(&g, self.counts());
            self.wake_started(g, started);
            return;
        }
        let mut seen: Option<policy::predict::Observations> = None;
        for l in self.lanes[1..].iter() {
            if let Some(o) = l.lock().sched.policy_mut().take_observations() {
                seen.get_or_insert_with(Default::default).merge(o);
            }
        }
        let (slp, rw) = {
            let l = &self.lanes[0];
            let mut g = l.lock();
            if let Some(o) = seen {
                g.sched.policy_mut().add_observations(o);
            }
            g.sched.tick_now(now);
            let st = g.sched.policy().stats();
            let started = g.sched.poll(now);
            l.publish(&g, self.counts());
            self.wake_started(g, started);
            (st.slp, st.rw)
        };
        for l in self.lanes[1..].iter() {
            let mut g = l.lock();
            let ctx = policy::Ctx {
                now,
                busy: g.sched.busy(),
                slots: g.sched.slots(),
            };
            g.sched.policy_mut().apply_predictions(slp, rw, &ctx);
            let started = g.sched.poll(now);
            l.publish(&g, self.counts());
            self.wake_started(g, started);
        }
    }

    /// Change container `container`'s cap in the policy from now on (see
    /// `policy::Policy::set_cap`): the server's share of a budget it splits with the
    /// container's processes (`policy::budget`). Every lane's policy takes it (a server with
    /// containers runs one lane). Returns whether the policy has the container.
    pub fn set_cap(&self, container: u32, cap: Option<f64>) -> bool {
        let mut known = false;
        for l in self.lanes.iter() {
            known |= l.lock().sched.policy_mut().set_cap(container, cap);
        }
        known
    }

    /// How many times work of `container` was held back by a cap so far, all lanes together
    /// (`policy::Policy::held_back`); `None` when the policy has no such container.
    pub fn held_back_in(&self, container: u32) -> Option<u64> {
        let mut total = None;
        for l in self.lanes.iter() {
            if let Some(n) = l.lock().sched.policy().held_back_in(container) {
                *total.get_or_insert(0) += n;
            }
        }
        total
    }

    /// Slot time of the completed bursts of `container` so far, all lanes together
    /// (`policy::Policy::slot_time_in`): what the policy's caps count; `None` when the policy
    /// has no such container.
    pub fn slot_time_in(&self, container: u32) -> Option<std::time::Duration> {
        let mut total = None;
        for l in self.lanes.iter() {
            if let Some(n) = l.lock().sched.policy().slot_time_in(container) {
                *total.get_or_insert(0) += n;
            }
        }
        total.map(std::time::Duration::from_nanos)
    }

    /// The policy's period, if it has one.
    pub fn period(&self) -> Option<u64> {
        self.lanes[0].lock().sched.policy().period()
    }

    /// Current PL, LRQ and policy counters, all lanes together (SLP and RW are lane 0's, which
    /// every lane takes).
    pub fn snapshot(&self) -> Snapshot {
        let now = self.now();
        let mut total: Option<Snapshot> = None;
        for l in self.lanes.iter() {
            let s = l.lock().sched.snapshot(now);
            match &mut total {
                None => {
                    total = Some(Snapshot {
                        slots: self.slots,
                        ..s
                    })
                }
                Some(t) => {
                    t.busy += s.busy;
                    t.queued += s.queued;
                    add_stats(&mut t.stats, &s.stats);
                }
            }
        }
        total.expect("a gate has at least one lane")
    }

    /// Whether the policy marks `worker` now (POS: predicted to serve text; other policies:
    /// never). A mechanism that passes the decision on to work outside the gate (the CGI
    /// lever: a script started for the worker) reads it here; the rule stays the policy's.
    pub fn marked(&self, worker: WorkerId) -> bool {
        if !self.enabled {
            return false;
        }
        let (_, lane) = self.lane(worker);
        lane.lock().sched.marked(worker)
    }

    /// Policy name.
    pub fn policy_name(&self) -> String {
        self.lanes[0].lock().sched.policy().name().to_owned()
    }

    /// The gate's counters now.
    pub fn counters(&self) -> Counters {
        Counters {
            bursts: self.bursts.get(),
            queued_bursts: self.queued_bursts.get(),
            rounds: self.rounds_opened.get(),
            boost_errors: self.boost_errors.load(Relaxed),
            slot_moves: self.slot_moves.load(Relaxed),
            streak_bursts: self.streak_bursts.get(),
        }
    }

    /// Take one PL/LRQ sample (the server calls this every 10 ms): busy slots and queued
    /// workers of all lanes. The CPU is the bottleneck when it is in some lane, as
    /// `policy::Ctx::bottleneck` judges it with that lane's queue as it is.
    pub fn sample(&self) {
        let now = self.now();
        let (mut busy, mut queued, mut bottleneck) = (0, 0, false);
        if self.enabled {
            for l in self.lanes.iter() {
                let g = l.lock();
                let (b, q) = (g.sched.busy(), g.sched.queued());
                let ctx = policy::Ctx {
                    now,
                    busy: b,
                    slots: g.sched.slots(),
                };
                bottleneck |= ctx.bottleneck(q);
                busy += b;
                queued += q;
            }
        }
        self.samples.record(
            Sample {
                t_ns: now,
                busy: busy as u32,
                queued: queued as u32,
            },
            bottleneck,
        );
    }

    /// The PL/LRQ samples taken so far.
    pub fn samples(&self) -> &Samples {
        &self.samples
    }

    /// Take the worker log kept since the last call (empty unless logging), every lane's, in
    /// time order.
    pub fn drain_log(&self) -> Vec<Event> {
        if self.lanes.len() == 1 {
            return self.lanes[0].lock().sched.drain_log();
        }
        let mut all: Vec<Event> = self
            .lanes
            .iter()
            .flat_map(|l| l.lock().sched.drain_log())
            .collect();
        all.sort_by_key(|e| e.t);
        all
    }
}

/// Add a lane's policy counters to the total (parameters are the first lane's).
fn add_stats(total: &mut PolicyStats, lane: &PolicyStats) {
    total.promotions += lane.promotions;
    total.demotions += lane.demotions;
    total.starvation_rescues += lane.starvation_rescues;
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
    /// The burst runs with a raised kernel priority.
    boosted: bool,
    /// Boost at rest: the thread this unmarked burst runs lowered on, raised again at its end.
    lowered: Option<Tid>,
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
            self.gate.end_burst(self.worker, self.lowered);
        }
    }
}

#[cfg(test)]
mod tests;
