//! [`Sched`]: N slots and a policy-ordered ready queue, the state machine every mechanism shares.
//!
//! The mechanism reports what its workers do; `Sched` keeps the slot count, the state of every
//! worker and (optionally) the log, tells the policy about every transition and asks it who
//! runs next. Invariants, checked by the tests:
//! - `busy <= slots`, and `busy` equals the number of workers in [`State::Run`];
//! - a worker is in the policy's queue exactly when it is in [`State::Ready`];
//! - a slot is never left idle while the queue is non-empty (work conserving), unless the
//!   policy holds work back on purpose (`share` caps; see [`Sched::poll`]), or the mechanism
//!   is collecting a scheduling round ([`Sched::enqueue`]) and ends it with [`Sched::poll`].

use crate::queue::{Ctx, Hints, Policy, PolicyStats};
use crate::worker::{Event, State, WorkerId};
use crate::Nanos;

/// Outcome of [`Sched::ready`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// A slot was free and the queue empty: the worker runs now.
    RunNow,
    /// The worker was queued; it runs when a later call returns its id.
    Queued,
}

/// A point-in-time view for observability (PL and LRQ sampling).
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// When it was taken.
    pub now: Nanos,
    /// Number of slots.
    pub slots: usize,
    /// PL: slots in use.
    pub busy: usize,
    /// LRQ: workers in the ready queue.
    pub queued: usize,
    /// The policy's counters and parameters.
    pub stats: PolicyStats,
}

/// Slot accounting around a [`Policy`]. See the module docs for its invariants.
///
/// Mechanisms hold a `Sched` (a `Box<dyn Policy>` from the registry); a test that needs to look
/// inside its policy holds a `Sched<ThatPolicy>` and reads it through [`Sched::policy`].
pub struct Sched<P: Policy + ?Sized = dyn Policy> {
    slots: usize,
    busy: usize,
    policy: Box<P>,
    states: crate::idhash::IdMap<WorkerId, State>,
    log: Option<Vec<Event>>,
    next_tick: Option<Nanos>,
    /// The policy's periodic work is run by the mechanism ([`Sched::tick_now`]), not on the
    /// way through other calls: one lane of several, whose learning is aggregated.
    external_tick: bool,
}

impl<P: Policy + ?Sized> std::fmt::Debug for Sched<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sched")
            .field("policy", &self.policy.name())
            .field("slots", &self.slots)
            .field("busy", &self.busy)
            .field("queued", &self.policy.len())
            .finish()
    }
}

impl<P: Policy + ?Sized> Sched<P> {
    /// `slots` CPU slots (at least 1) ordered by `policy`.
    pub fn new(slots: usize, policy: Box<P>) -> Self {
        Self {
            slots: slots.max(1),
            busy: 0,
            policy,
            states: Default::default(),
            log: None,
            next_tick: None,
            external_tick: false,
        }
    }

    /// Leave the policy's periodic work to the mechanism ([`Sched::tick_now`]): a lane of a
    /// per-core gate, whose policies learn together once per period (see
    /// [`crate::Policy::take_observations`]).
    pub fn with_external_tick(mut self) -> Self {
        self.external_tick = true;
        self
    }

    /// Run the policy's periodic work now (mechanisms that tick lanes together).
    pub fn tick_now(&mut self, now: Nanos) {
        let ctx = self.ctx(now);
        self.policy.tick(&ctx);
    }

    /// Give one free slot away (balancing between lanes, [`crate::balance`]): `false`, and
    /// nothing changes, when no slot is free.
    pub fn take_free_slot(&mut self) -> bool {
        if self.busy < self.slots {
            self.slots -= 1;
            true
        } else {
            false
        }
    }

    /// Receive a slot from another lane; returns the workers that got a slot.
    pub fn add_slot(&mut self, now: Nanos) -> Vec<WorkerId> {
        self.slots += 1;
        self.fill(now)
    }

    /// `worker` (running) ends its burst and waits, and its slot leaves this `Sched` (given to
    /// another lane) instead of going to the queue. Returns whether a slot left (it always
    /// does when `worker` was running).
    pub fn wait_and_give_slot(&mut self, worker: WorkerId, now: Nanos) -> bool {
        self.maybe_tick(now);
        match self.states.get(&worker) {
            Some(State::Run) => {
                self.transition(worker, State::Wait, now);
                self.slots -= 1;
                true
            }
            _ => false,
        }
    }

    /// Keep every transition in an in-memory log, to be taken with [`Sched::drain_log`].
    pub fn with_log(mut self) -> Self {
        self.log = Some(Vec::new());
        self
    }

    /// The policy, to read (its order, stats, or anything its own type offers).
    pub fn policy(&self) -> &P {
        &self.policy
    }

    /// The policy, to change its own settings (e.g. [`crate::delayed::Delayed::predict`]).
    /// Its ready queue must be left alone: `Sched` keeps the queue and the worker states in
    /// step, and only its own calls keep them so.
    pub fn policy_mut(&mut self) -> &mut P {
        &mut self.policy
    }

    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Slots in use (workers in [`State::Run`]).
    pub fn busy(&self) -> usize {
        self.busy
    }

    /// Workers in the ready queue.
    pub fn queued(&self) -> usize {
        self.policy.len()
    }

    /// Whether the policy marks `worker` to be served first (see [`Policy::marked`]).
    pub fn marked(&self, worker: WorkerId) -> bool {
        self.policy.marked(worker)
    }

    /// State of `worker`, if registered.
    pub fn state(&self, worker: WorkerId) -> Option<State> {
        self.states.get(&worker).copied()
    }

    fn ctx(&self, now: Nanos) -> Ctx {
        Ctx {
            now,
            busy: self.busy,
            slots: self.slots,
        }
    }

    fn transition(&mut self, worker: WorkerId, to: State, now: Nanos) {
        let from = self.states.insert(worker, to);
        if let Some(log) = &mut self.log {
            log.push(Event {
                worker,
                state: to,
                t: now,
            });
        }
        match (from, to) {
            (Some(State::Run), State::Run) => {}
            (Some(State::Run), _) => self.busy -= 1,
            (_, State::Run) => self.busy += 1,
            _ => {}
        }
        debug_assert!(self.busy <= self.slots);
        let ctx = self.ctx(now);
        self.policy.on_transition(worker, from, to, &ctx);
    }

    /// A new worker, idle (in [`State::Wait`]) from `now`. Registering an existing id is a
    /// no-op.
    pub fn register(&mut self, worker: WorkerId, now: Nanos) {
        if !self.states.contains_key(&worker) {
            self.transition(worker, State::Wait, now);
        }
    }

    /// `worker` (waiting) wants a slot. Unknown workers are registered first.
    pub fn ready(&mut self, worker: WorkerId, now: Nanos, hints: &Hints) -> Grant {
        self.maybe_tick(now);
        self.register(worker, now);
        match self.states[&worker] {
            State::Run => return Grant::RunNow,
            State::Ready => return Grant::Queued,
            State::Wait => {}
        }
        self.transition(worker, State::Ready, now);
        let ctx = self.ctx(now);
        if self.busy < self.slots
            && self.policy.is_empty()
            && self.policy.admit(worker, hints, &ctx)
        {
            self.transition(worker, State::Run, now);
            Grant::RunNow
        } else {
            self.policy.enqueue(worker, hints, &ctx);
            Grant::Queued
        }
    }

    /// `worker` (waiting) becomes ready and joins the queue even if a slot is free: the
    /// mechanism is collecting a scheduling round, so that the policy chooses among every worker
    /// that became ready in it rather than granting the first to ask. The mechanism ends the
    /// round with [`Sched::poll`]. Returns [`Grant::RunNow`] only if the worker already runs.
    pub fn enqueue(&mut self, worker: WorkerId, now: Nanos, hints: &Hints) -> Grant {
        self.maybe_tick(now);
        self.register(worker, now);
        match self.states[&worker] {
            State::Run => return Grant::RunNow,
            State::Ready => return Grant::Queued,
            State::Wait => {}
        }
        self.transition(worker, State::Ready, now);
        let ctx = self.ctx(now);
        self.policy.enqueue(worker, hints, &ctx);
        Grant::Queued
    }

    /// Fill free slots from the queue; returns the workers that now run.
    fn fill(&mut self, now: Nanos) -> Vec<WorkerId> {
        let mut started = Vec::new();
        while self.busy < self.slots {
            let ctx = self.ctx(now);
            match self.policy.dequeue(&ctx) {
                Some(w) => {
                    self.transition(w, State::Run, now);
                    started.push(w);
                }
                None => break,
            }
        }
        started
    }

    /// `worker` (running) ends its burst and waits. Returns the workers that got a slot.
    pub fn wait(&mut self, worker: WorkerId, now: Nanos) -> Vec<WorkerId> {
        self.maybe_tick(now);
        if self.states.get(&worker) == Some(&State::Ready) {
            self.policy.remove(worker);
        }
        self.transition(worker, State::Wait, now);
        self.fill(now)
    }

    /// `worker` (running) is preempted and goes back to the ready queue (simulator). Returns the
    /// workers that got a slot (possibly `worker` itself).
    pub fn preempt(&mut self, worker: WorkerId, now: Nanos, hints: &Hints) -> Vec<WorkerId> {
        self.maybe_tick(now);
        if self.states.get(&worker) != Some(&State::Run) {
            return self.fill(now);
        }
        self.transition(worker, State::Ready, now);
        let ctx = self.ctx(now);
        self.policy.enqueue(worker, hints, &ctx);
        self.fill(now)
    }

    /// Ask the policy whether `woken`, just queued, should take the slot of `running`, which
    /// runs in user mode ([`Policy::preempts`]; the simulator's wake-up preemption).
    pub fn preempts(&self, woken: WorkerId, running: WorkerId) -> bool {
        self.policy.preempts(woken, running)
    }

    /// Ask the policy whether a worker whose quantum expired may keep its slot a little longer.
    pub fn quantum_expiry(&mut self, worker: WorkerId, now: Nanos) -> Option<Nanos> {
        let ctx = self.ctx(now);
        self.policy.on_quantum_expiry(worker, &ctx)
    }

    /// `worker` is gone (connection closed, process exited), whatever its state. Returns the
    /// workers that got a slot.
    pub fn exit(&mut self, worker: WorkerId, now: Nanos) -> Vec<WorkerId> {
        match self.states.get(&worker) {
            None => return Vec::new(),
            Some(State::Ready) => {
                self.policy.remove(worker);
            }
            _ => {}
        }
        if self.states[&worker] != State::Wait {
            self.transition(worker, State::Wait, now);
        }
        self.states.remove(&worker);
        let ctx = self.ctx(now);
        self.policy.on_exit(worker, &ctx);
        self.fill(now)
    }

    /// Forget `worker` if it is waiting (no slot, not queued): it leaves the books as by
    /// [`Sched::exit`], but no slot is freed, so no other worker is started. Returns whether
    /// it was forgotten; a worker in any other state is left as it is.
    pub fn forget(&mut self, worker: WorkerId, now: Nanos) -> bool {
        if self.states.get(&worker) != Some(&State::Wait) {
            return false;
        }
        self.states.remove(&worker);
        let ctx = self.ctx(now);
        self.policy.on_exit(worker, &ctx);
        true
    }

    /// Give back the memory held for workers that are gone (see [`Policy::shrink`]): after a
    /// crowd has left, the books and the policy's tables shrink to the workers left.
    pub fn shrink(&mut self) {
        self.states.shrink_to_fit();
        self.policy.shrink();
    }

    /// Run the policy's periodic work if due and fill free slots from the queue; returns the
    /// workers that got a slot. A policy may hold ready work back (`share` caps); mechanisms
    /// call this at least every [`Policy::period`] so that work resumes.
    pub fn poll(&mut self, now: Nanos) -> Vec<WorkerId> {
        self.maybe_tick(now);
        self.fill(now)
    }

    /// Run the policy's periodic work if due. Mechanisms may also call this from a timer.
    pub fn maybe_tick(&mut self, now: Nanos) {
        if self.external_tick {
            return;
        }
        let Some(period) = self.policy.period() else {
            return;
        };
        match self.next_tick {
            None => self.next_tick = Some(now + period),
            Some(t) if now >= t => {
                let ctx = self.ctx(now);
                self.policy.tick(&ctx);
                // Skip missed periods rather than replaying them.
                let missed = (now - t) / period;
                self.next_tick = Some(t + (missed + 1) * period);
            }
            _ => {}
        }
    }

    /// Take the log kept since the last call (empty unless [`Sched::with_log`]).
    pub fn drain_log(&mut self) -> Vec<Event> {
        self.log.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Slots, busy slots, queue length and the policy's stats at `now`.
    pub fn snapshot(&self, now: Nanos) -> Snapshot {
        Snapshot {
            now,
            slots: self.slots,
            busy: self.busy,
            queued: self.policy.len(),
            stats: self.policy.stats(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fifo::Fifo;

    fn sched(slots: usize) -> Sched<Fifo> {
        Sched::new(slots, Box::new(Fifo::new())).with_log()
    }

    #[test]
    fn runs_at_once_when_a_slot_is_free() {
        let mut s = sched(1);
        assert_eq!(s.ready(1, 0, &Hints::default()), Grant::RunNow);
        assert_eq!(s.ready(2, 1, &Hints::default()), Grant::Queued);
        assert_eq!(s.ready(3, 2, &Hints::default()), Grant::Queued);
        assert_eq!((s.busy(), s.queued()), (1, 2));
        assert_eq!(s.wait(1, 3), vec![2]);
        assert_eq!(s.state(1), Some(State::Wait));
        assert_eq!(s.state(2), Some(State::Run));
        assert_eq!(s.exit(3, 4), Vec::<WorkerId>::new());
        assert_eq!(s.exit(2, 5), Vec::<WorkerId>::new());
        assert_eq!((s.busy(), s.queued()), (0, 0));
    }

    #[test]
    fn exit_of_a_running_worker_frees_its_slot() {
        let mut s = sched(1);
        s.ready(1, 0, &Hints::default());
        s.ready(2, 0, &Hints::default());
        assert_eq!(s.exit(1, 1), vec![2]);
        assert_eq!(s.busy(), 1);
    }

    #[test]
    fn preempt_requeues_behind_others() {
        let mut s = sched(1);
        s.ready(1, 0, &Hints::default());
        s.ready(2, 0, &Hints::default());
        assert_eq!(s.preempt(1, 10, &Hints::default()), vec![2]);
        assert_eq!(s.policy().order(), vec![1]);
    }

    #[test]
    fn a_round_queues_then_poll_starts_the_policys_choice() {
        let mut s = Sched::new(
            1,
            crate::build(
                "pos",
                &crate::PolicyConfig {
                    slp: crate::Tunable::Fixed(100),
                    ..Default::default()
                },
            )
            .unwrap(),
        );
        // 1 waited briefly (a chunk of a long transfer), 2 waited long (a new request).
        s.register(2, 0);
        s.ready(1, 0, &Hints::default());
        s.wait(1, 990);
        assert_eq!(s.enqueue(1, 1000, &Hints::default()), Grant::Queued);
        assert_eq!(s.enqueue(2, 1000, &Hints::default()), Grant::Queued);
        assert_eq!(
            (s.busy(), s.queued()),
            (0, 2),
            "a round leaves the slot free"
        );
        assert_eq!(s.poll(1000), vec![2], "the long waiter is served first");
        assert_eq!(s.enqueue(2, 1001, &Hints::default()), Grant::RunNow);
        assert_eq!(s.wait(2, 1002), vec![1]);
    }

    #[test]
    fn slots_move_between_lanes_without_breaking_the_books() {
        let mut a = sched(1);
        let mut b = sched(1);
        assert_eq!(a.ready(1, 0, &Hints::default()), Grant::RunNow);
        assert_eq!(b.ready(2, 0, &Hints::default()), Grant::RunNow);
        assert_eq!(b.ready(3, 0, &Hints::default()), Grant::Queued);
        assert!(!a.take_free_slot(), "a's slot is busy");
        // a's burst ends and its slot goes to b, where 3 waits.
        assert!(a.wait_and_give_slot(1, 5));
        assert_eq!((a.slots(), a.busy()), (0, 0));
        assert_eq!(b.add_slot(5), vec![3]);
        assert_eq!((b.slots(), b.busy(), b.queued()), (2, 2, 0));
        // a, without a slot, queues its worker; b gives one back when a burst ends.
        assert_eq!(a.ready(1, 6, &Hints::default()), Grant::Queued);
        assert!(b.wait_and_give_slot(2, 7));
        assert_eq!(a.add_slot(7), vec![1]);
        assert!(
            !a.wait_and_give_slot(9, 8),
            "an unknown worker frees nothing"
        );
        assert_eq!(a.wait(1, 8), Vec::<WorkerId>::new());
        assert!(a.take_free_slot());
        assert_eq!(a.slots(), 0);
    }

    #[test]
    fn an_external_tick_runs_only_when_asked() {
        let cfg = crate::PolicyConfig {
            slp: crate::Tunable::Auto,
            period: 10,
            ..Default::default()
        };
        let mut s = Sched::new(1, crate::build("pos", &cfg).unwrap()).with_external_tick();
        s.register(1, 0);
        s.ready(1, 5, &Hints::default());
        s.wait(1, 6);
        s.ready(1, 100, &Hints::default());
        assert_eq!(s.snapshot(100).stats.slp, Some(crate::pos::DEFAULT_SLP));
        s.tick_now(100);
        assert_eq!(
            s.snapshot(100).stats.slp,
            Some(94),
            "the longest wait of the period"
        );
    }

    #[test]
    fn log_records_every_transition() {
        let mut s = sched(1);
        s.ready(7, 5, &Hints::default());
        s.wait(7, 9);
        let states: Vec<_> = s.drain_log().iter().map(|e| (e.state, e.t)).collect();
        assert_eq!(
            states,
            vec![
                (State::Wait, 5),
                (State::Ready, 5),
                (State::Run, 5),
                (State::Wait, 9)
            ]
        );
        assert!(s.drain_log().is_empty());
    }

    #[test]
    fn forget_drops_only_waiting_workers_and_starts_nobody() {
        let mut s = sched(1);
        s.register(1, 0);
        s.ready(2, 1, &Hints::default()); // runs
        s.ready(3, 2, &Hints::default()); // queued behind 2
        assert!(s.forget(1, 3), "waiting: forgotten");
        assert_eq!(s.state(1), None);
        assert!(
            !s.forget(2, 3) && !s.forget(3, 3),
            "running and queued stay"
        );
        assert_eq!(
            (s.state(2), s.state(3)),
            (Some(State::Run), Some(State::Ready))
        );
        assert!(!s.forget(1, 4), "already gone");
        s.shrink();
        assert_eq!(s.wait(2, 5), vec![3], "the queue survives the shrink");
    }
}
