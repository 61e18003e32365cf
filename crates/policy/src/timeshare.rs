//! `timeshare`: a conventional priority-based timesharing scheduler in the style of 4.4BSD
//! (McKusick et al., *The Design and Implementation of the 4.4BSD Operating System*, §4.4), the
//! baseline seed 001 compares POS against ("a conventional priority-based timesharing policy";
//! the paper's server ran BSD/OS 2.1, a 4.4BSD derivative).
//!
//! The rules, as modelled here:
//! - **Recent CPU usage**: every worker has `estcpu`, the CPU it used, counted in statclock
//!   ticks of [`TICK`] (10 ms, 100 Hz). It grows while the worker runs (folded in when the
//!   worker stops running and at every decay), capped at [`ESTCPU_MAX`].
//! - **User priority** `usrpri = PUSER + estcpu / 4` (nice 0), capped at [`MAXPRI`]; lower is
//!   better. The ready queue has one FIFO per [`PPQ`] = 4 priorities, as 4.4BSD's 32 run queues.
//! - **Decay**, once a second ([`Policy::tick`], period [`DECAY_PERIOD`]): the load average
//!   (one-minute exponential average of the number of runnable workers, sampled every second)
//!   gives `decay = 2*load / (2*load + 1)`, and every worker's `estcpu *= decay`. Sleepers decay
//!   too (4.4BSD does it on wake-up in `updatepri`, to the same effect). Queued workers whose
//!   priority bucket changed are moved to the tail of their new bucket, as `schedcpu` does.
//! - **Sleepers boosted**: a worker that becomes ready after a wait runs its next burst at the
//!   kernel sleep priority [`PSOCK`] (4.4BSD: a process woken in the kernel keeps its sleep
//!   priority until it returns to user mode), so it is queued ahead of every user-priority
//!   worker, FIFO among the woken. A preempted worker (quantum expired) is queued at its user
//!   priority, at the tail of its bucket: round robin among equals.
//!
//! - **Wake-up preemption** ([`Policy::preempts`]): a woken worker (kernel priority) is better
//!   than any worker running in user mode, and a worker at a user priority is better than one
//!   with a strictly worse user priority (4.4BSD `setrunnable`: `need_resched` when
//!   `p_priority < curpriority`). Whether to preempt is the mechanism's decision: the
//!   simulator does it with its 4.4BSD base (`--base bsd`), [`crate::Sched`] alone preempts
//!   only at quantum expiry.
//!
//! Not modelled: `nice`, the 5-second sampling of the load average.

use std::collections::BTreeSet;

use crate::idhash::IdMap;
use crate::queue::{Ctx, Hints, Policy, PolicyStats};
use crate::worker::{State, WorkerId};
use crate::{Nanos, MS, SEC};

/// Statclock tick: the unit of `estcpu` (4.4BSD: 100 Hz).
pub const TICK: Nanos = 10 * MS;
/// Best user priority.
pub const PUSER: u32 = 50;
/// Worst priority.
pub const MAXPRI: u32 = 127;
/// Kernel sleep priority of a woken worker (4.4BSD's socket sleep priority).
pub const PSOCK: u32 = 24;
/// Priorities per run queue.
pub const PPQ: u32 = 4;
/// How often `estcpu` decays (4.4BSD `schedcpu`: once a second).
pub const DECAY_PERIOD: Nanos = SEC;
/// Cap on `estcpu` in ticks: enough to reach [`MAXPRI`], no more (FreeBSD's `ESTCPULIM`).
pub const ESTCPU_MAX: u64 = 4 * (MAXPRI - PUSER) as u64 + 3;
/// Fixed-point scale of the load average (4.4BSD `FSCALE`).
const FSCALE: u64 = 2048;
/// `FSCALE * exp(-1/60)`: one-minute average sampled every second.
const CEXP: u64 = 2014;

#[derive(Debug, Clone)]
struct Info {
    state: State,
    /// Recent CPU usage in nanoseconds of CPU (ticks = est / TICK).
    est: u64,
    /// When it started running, while in [`State::Run`].
    run_since: Option<Nanos>,
    /// Its current burst runs at kernel priority (it woke from a wait).
    boosted: bool,
    /// Its key in the queue, while queued.
    key: Option<(u32, u64)>,
}

impl Info {
    fn new(state: State) -> Self {
        Self {
            state,
            est: 0,
            run_since: None,
            boosted: false,
            key: None,
        }
    }

    fn ticks(&self) -> u64 {
        self.est / TICK
    }

    fn usrpri(&self) -> u32 {
        (PUSER as u64 + self.ticks() / 4).min(MAXPRI as u64) as u32
    }

    fn bucket(&self) -> u32 {
        if self.boosted {
            PSOCK / PPQ
        } else {
            self.usrpri() / PPQ
        }
    }

    /// Fold the running time up to `now` into `est`.
    fn account(&mut self, now: Nanos) {
        if let Some(since) = self.run_since {
            self.est = (self.est + now.saturating_sub(since)).min(ESTCPU_MAX * TICK);
            self.run_since = Some(now);
        }
    }
}

/// The 4.4BSD-like timesharing policy. See the module docs.
#[derive(Debug, Clone, Default)]
pub struct Timeshare {
    w: IdMap<WorkerId, Info>,
    /// (bucket, sequence, worker): served in this order.
    q: BTreeSet<(u32, u64, WorkerId)>,
    seq: u64,
    /// Load average, fixed point ([`FSCALE`]).
    loadav: u64,
    /// Workers ready or running.
    runnable: usize,
    /// Workers served from the woken (kernel priority) bucket.
    boosts: u64,
}

impl Timeshare {
    /// No worker, load average 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// `estcpu` of a worker, in ticks.
    pub fn estcpu(&self, worker: WorkerId) -> Option<u64> {
        self.w.get(&worker).map(Info::ticks)
    }

    /// Current user priority of a worker (lower is better).
    pub fn usrpri(&self, worker: WorkerId) -> Option<u32> {
        self.w.get(&worker).map(Info::usrpri)
    }

    /// Load average (runnable workers, one-minute exponential average).
    pub fn loadavg(&self) -> f64 {
        self.loadav as f64 / FSCALE as f64
    }

    /// The worker at the head of the queue, if any (the next [`Policy::dequeue`]).
    pub fn front(&self) -> Option<WorkerId> {
        self.q.first().map(|&(_, _, w)| w)
    }

    /// The worker's priority as the queue sees it: the kernel sleep priority [`PSOCK`] for a
    /// woken worker's burst, its user priority otherwise.
    fn priority(&self, worker: WorkerId) -> Option<u32> {
        self.w
            .get(&worker)
            .map(|i| if i.boosted { PSOCK } else { i.usrpri() })
    }

    /// The decay factor the next [`Policy::tick`] will apply, as `(numerator, denominator)`.
    fn decay(&self) -> (u64, u64) {
        (2 * self.loadav, 2 * self.loadav + FSCALE)
    }

    fn push(&mut self, worker: WorkerId) {
        let Some(info) = self.w.get_mut(&worker) else {
            return;
        };
        if let Some((b, s)) = info.key.take() {
            self.q.remove(&(b, s, worker));
        }
        self.seq += 1;
        let key = (info.bucket(), self.seq);
        info.key = Some(key);
        self.q.insert((key.0, key.1, worker));
    }
}

impl Policy for Timeshare {
    fn name(&self) -> &str {
        "timeshare"
    }

    fn on_transition(&mut self, worker: WorkerId, from: Option<State>, to: State, ctx: &Ctx) {
        let now = ctx.now;
        let info = self.w.entry(worker).or_insert_with(|| Info::new(to));
        let prev = from.unwrap_or(info.state);
        let was_runnable = from.is_some() && prev != State::Wait;
        let is_runnable = to != State::Wait;
        if prev == State::Run && to != State::Run {
            info.account(now);
            info.run_since = None;
            // The kernel-priority boost lasts one burst.
            info.boosted = false;
        }
        match (prev, to) {
            (State::Wait, State::Ready) => info.boosted = true,
            (_, State::Run) => info.run_since = Some(now),
            _ => {}
        }
        info.state = to;
        match (was_runnable, is_runnable) {
            (false, true) => self.runnable += 1,
            (true, false) => self.runnable = self.runnable.saturating_sub(1),
            _ => {}
        }
    }

    fn on_exit(&mut self, worker: WorkerId, _ctx: &Ctx) {
        if let Some(info) = self.w.remove(&worker) {
            if let Some((b, s)) = info.key {
                self.q.remove(&(b, s, worker));
            }
            if info.state != State::Wait {
                self.runnable = self.runnable.saturating_sub(1);
            }
        }
    }

    fn enqueue(&mut self, worker: WorkerId, _hints: &Hints, _ctx: &Ctx) {
        if let std::collections::hash_map::Entry::Vacant(e) = self.w.entry(worker) {
            // Never seen a transition for it: treat as a fresh, woken worker.
            let mut info = Info::new(State::Ready);
            info.boosted = true;
            e.insert(info);
            self.runnable += 1;
        }
        self.push(worker);
    }

    fn dequeue(&mut self, _ctx: &Ctx) -> Option<WorkerId> {
        let (b, _, w) = self.q.pop_first()?;
        if b == PSOCK / PPQ {
            self.boosts += 1;
        }
        if let Some(info) = self.w.get_mut(&w) {
            info.key = None;
        }
        Some(w)
    }

    fn remove(&mut self, worker: WorkerId) -> bool {
        match self.w.get_mut(&worker).and_then(|i| i.key.take()) {
            Some((b, s)) => self.q.remove(&(b, s, worker)),
            None => false,
        }
    }

    fn len(&self) -> usize {
        self.q.len()
    }

    fn order(&self) -> Vec<WorkerId> {
        self.q.iter().map(|&(_, _, w)| w).collect()
    }

    /// 4.4BSD `setrunnable`: the woken worker's priority (its sleep priority, or its user
    /// priority) against the running worker's user priority (`curpriority` in user mode).
    fn preempts(&self, woken: WorkerId, running: WorkerId) -> bool {
        match (self.priority(woken), self.w.get(&running)) {
            (Some(p), Some(r)) => p < r.usrpri(),
            _ => false,
        }
    }

    /// 4.4BSD `schedcpu`: update the load average, decay every worker's `estcpu`, re-queue the
    /// queued workers whose priority bucket changed.
    fn tick(&mut self, ctx: &Ctx) {
        self.loadav =
            (CEXP * self.loadav + self.runnable as u64 * FSCALE * (FSCALE - CEXP)) / FSCALE;
        let (num, den) = self.decay();
        for info in self.w.values_mut() {
            info.account(ctx.now);
            info.est = (u128::from(info.est) * u128::from(num) / u128::from(den)) as u64;
        }
        // Re-queue in queue order so the relative order of moved workers is kept.
        let moved: Vec<WorkerId> = self
            .q
            .iter()
            .filter(|&&(b, _, w)| self.w.get(&w).is_some_and(|i| i.bucket() != b))
            .map(|&(_, _, w)| w)
            .collect();
        for w in moved {
            self.push(w);
        }
    }

    fn period(&self) -> Option<Nanos> {
        Some(DECAY_PERIOD)
    }

    fn stats(&self) -> PolicyStats {
        PolicyStats {
            promotions: self.boosts,
            ..PolicyStats::default()
        }
    }
}

/// Registry entry.
pub const ENTRY: crate::config::Entry = crate::config::Entry {
    name: "timeshare",
    about: "4.4BSD-like timesharing: priority from decayed recent CPU usage, woken sleepers first \
            (the conventional baseline of seed 001)",
    build: |_| Ok(Box::new(Timeshare::new())),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Grant, Sched};

    fn h() -> Hints {
        Hints::default()
    }

    fn ctx(now: Nanos) -> Ctx {
        Ctx {
            now,
            busy: 1,
            slots: 1,
        }
    }

    /// `w` wakes at `from`, runs until `to`, and waits again.
    fn burst(t: &mut Timeshare, w: WorkerId, from: Nanos, to: Nanos) {
        t.on_transition(w, Some(State::Wait), State::Ready, &ctx(from));
        t.on_transition(w, Some(State::Ready), State::Run, &ctx(from));
        t.on_transition(w, Some(State::Run), State::Wait, &ctx(to));
    }

    #[test]
    fn cpu_usage_worsens_priority_up_to_the_cap() {
        let mut t = Timeshare::new();
        t.on_transition(1, None, State::Wait, &ctx(0));
        t.on_transition(2, None, State::Wait, &ctx(0));
        burst(&mut t, 1, 0, 2 * SEC);
        assert_eq!(t.estcpu(1), Some(200));
        assert_eq!(t.usrpri(1), Some(PUSER + 50));
        assert_eq!(t.estcpu(2), Some(0));
        assert_eq!(t.usrpri(2), Some(PUSER));
        burst(&mut t, 1, 2 * SEC, 20 * SEC);
        assert_eq!(t.estcpu(1), Some(ESTCPU_MAX));
        assert_eq!(t.usrpri(1), Some(MAXPRI));
    }

    #[test]
    fn woken_sleeper_is_queued_ahead_of_a_cpu_hog() {
        let mut t = Timeshare::new();
        // Hog 1 ran a long time and was preempted; 3 is another preempted hog.
        for w in [1, 3] {
            t.on_transition(w, None, State::Wait, &ctx(0));
            t.on_transition(w, Some(State::Wait), State::Ready, &ctx(0));
            t.on_transition(w, Some(State::Ready), State::Run, &ctx(0));
            t.on_transition(w, Some(State::Run), State::Ready, &ctx(SEC));
            t.enqueue(w, &h(), &ctx(SEC));
        }
        // Worker 2 wakes after a wait: kernel priority, ahead of both.
        t.on_transition(2, None, State::Wait, &ctx(0));
        t.on_transition(2, Some(State::Wait), State::Ready, &ctx(SEC));
        t.enqueue(2, &h(), &ctx(SEC));
        assert_eq!(t.order(), vec![2, 1, 3]);
        assert!(t.usrpri(1).unwrap() > PUSER);
        assert_eq!(t.usrpri(2), Some(PUSER));
        // Once it has run and been preempted itself, the boost is gone.
        assert_eq!(t.dequeue(&ctx(SEC)), Some(2));
        t.on_transition(2, Some(State::Ready), State::Run, &ctx(SEC));
        t.on_transition(2, Some(State::Run), State::Ready, &ctx(SEC + 10 * MS));
        t.enqueue(2, &h(), &ctx(SEC + 10 * MS));
        // 10 ms of CPU: still a better user priority than the hogs'.
        assert_eq!(t.order(), vec![2, 1, 3]);
    }

    #[test]
    fn equal_hogs_round_robin_at_quantum_expiry() {
        let mut s = Sched::new(1, Box::new(Timeshare::new()));
        assert_eq!(s.ready(1, 0, &h()), Grant::RunNow);
        assert_eq!(s.ready(2, 0, &h()), Grant::Queued);
        assert_eq!(s.ready(3, 0, &h()), Grant::Queued);
        let mut order = vec![1];
        let mut running = 1;
        for k in 1..=6u64 {
            let next = s.preempt(running, k * 100 * MS, &h());
            assert_eq!(next.len(), 1);
            running = next[0];
            order.push(running);
        }
        assert_eq!(order, vec![1, 2, 3, 1, 2, 3, 1]);
    }

    #[test]
    fn decay_needs_load_and_requeues_by_new_priority() {
        let mut t = Timeshare::new();
        t.on_transition(1, None, State::Wait, &ctx(0));
        t.on_transition(1, Some(State::Wait), State::Ready, &ctx(0));
        t.on_transition(1, Some(State::Ready), State::Run, &ctx(0));
        t.on_transition(1, Some(State::Run), State::Ready, &ctx(3 * SEC));
        t.enqueue(1, &h(), &ctx(3 * SEC));
        assert_eq!(t.estcpu(1), Some(300));
        let before = t.usrpri(1).unwrap();
        // Load builds up over a minute of ticks; estcpu decays every second.
        for k in 4..70 {
            t.tick(&ctx(k * SEC));
        }
        assert!(t.loadavg() > 0.5, "{}", t.loadavg());
        assert_eq!(t.estcpu(1), Some(0));
        assert!(t.usrpri(1).unwrap() < before);
        assert_eq!(t.order(), vec![1]);
        assert_eq!(t.q.first().unwrap().0, PUSER / PPQ);
    }

    #[test]
    fn a_woken_worker_preempts_user_mode_and_a_preempted_one_does_not() {
        let mut t = Timeshare::new();
        for w in [1, 2, 3] {
            t.on_transition(w, None, State::Wait, &ctx(0));
        }
        // 1 runs (woken, then in user mode as far as the mechanism is concerned).
        t.on_transition(1, Some(State::Wait), State::Ready, &ctx(0));
        t.on_transition(1, Some(State::Ready), State::Run, &ctx(0));
        // 2 wakes: kernel priority, better than 1's user priority.
        t.on_transition(2, Some(State::Wait), State::Ready, &ctx(MS));
        assert!(t.preempts(2, 1));
        // 3 ran a second and was preempted: user priority worse than 1's, no preemption.
        t.on_transition(3, Some(State::Wait), State::Ready, &ctx(0));
        t.on_transition(3, Some(State::Ready), State::Run, &ctx(0));
        t.on_transition(3, Some(State::Run), State::Ready, &ctx(SEC));
        assert!(!t.preempts(3, 1));
        assert!(t.usrpri(3) > t.usrpri(1));
        // Unknown workers never preempt.
        assert!(!t.preempts(9, 1) && !t.preempts(2, 9));
    }

    #[test]
    fn exit_forgets_the_worker() {
        let mut s = Sched::new(1, Box::new(Timeshare::new()));
        s.ready(1, 0, &h());
        s.ready(2, 0, &h());
        assert_eq!(s.exit(2, 5), Vec::<WorkerId>::new());
        assert_eq!(s.queued(), 0);
        assert_eq!(s.exit(1, 6), Vec::<WorkerId>::new());
        assert_eq!(s.busy(), 0);
    }
}
