//! `delayed`: the delayed-switch POS of seed 001's reference \[19\] (Taniguchi, "POS: Program
//! oriented schedule", 1996), illustrated by seed 001 §2, Fig. 1.
//!
//! When a worker's time quantum expires, a conventional scheduler preempts it "no matter how
//! little more processor time the process needs". This policy predicts, from the worker's
//! previous behaviour, how much CPU its current burst needs in all; if what is left is small, it
//! delays the switch by exactly that much ([`Policy::on_quantum_expiry`] returns the extension)
//! so the worker finishes without waiting a whole round for its next quantum.
//!
//! The rules:
//! - **Prediction**: the CPU length of a worker's burst (the run spans of its PFS between two
//!   waits, preemptions included) is learnt from its last completed burst, or given with
//!   [`Delayed::predict`] (a given prediction wins over a learnt one).
//! - **Extension**: at quantum expiry, with `used` the CPU of the current burst so far and
//!   `slice` the time since the worker last got the CPU, the switch is delayed by
//!   `need = predicted - used` when `0 < need <= slice * max_fraction` ([`DEFAULT_FRACTION`]
//!   = 1/4 of the quantum: "a little bit more processor time"). Otherwise it is preempted. A
//!   wrong prediction costs at most one extension per burst: once `used >= predicted` the worker
//!   is preempted as usual.
//! - **Queue order**: everything else is [`Timeshare`], the conventional scheduler POS was
//!   added to.

use crate::idhash::IdMap;
use crate::queue::{Ctx, Hints, Policy, PolicyStats};
use crate::timeshare::Timeshare;
use crate::worker::{State, WorkerId};
use crate::Nanos;

/// Largest extension, as a fraction (numerator, denominator) of the slice that just expired.
pub const DEFAULT_FRACTION: (u64, u64) = (1, 4);

#[derive(Debug, Clone, Default)]
struct Burst {
    /// CPU used by the current burst before the worker last got the CPU.
    used: Nanos,
    /// When it last got the CPU, while running.
    run_since: Option<Nanos>,
    /// CPU length of its last completed burst.
    learnt: Option<Nanos>,
    /// Prediction given from outside (wins over `learnt`).
    given: Option<Nanos>,
}

/// The delayed-switch policy. See the module docs.
#[derive(Debug, Clone)]
pub struct Delayed {
    inner: Timeshare,
    bursts: IdMap<WorkerId, Burst>,
    fraction: (u64, u64),
    extensions: u64,
}

impl Default for Delayed {
    fn default() -> Self {
        Self::new()
    }
}

impl Delayed {
    /// With the default largest extension ([`DEFAULT_FRACTION`] of a quantum).
    pub fn new() -> Self {
        Self::with_fraction(DEFAULT_FRACTION)
    }

    /// Largest extension `num/den` of the expired slice (a zero denominator means 1).
    pub fn with_fraction((num, den): (u64, u64)) -> Self {
        Self {
            inner: Timeshare::new(),
            bursts: IdMap::default(),
            fraction: (num, den.max(1)),
            extensions: 0,
        }
    }

    /// Give the CPU length of `worker`'s bursts instead of learning it.
    pub fn predict(&mut self, worker: WorkerId, burst: Nanos) {
        self.bursts.entry(worker).or_default().given = Some(burst);
    }

    /// The prediction in force for `worker`'s burst length.
    pub fn prediction(&self, worker: WorkerId) -> Option<Nanos> {
        self.bursts.get(&worker).and_then(|b| b.given.or(b.learnt))
    }

    /// Extensions granted so far.
    pub fn extensions(&self) -> u64 {
        self.extensions
    }
}

impl Policy for Delayed {
    fn reads_hints(&self) -> bool {
        self.inner.reads_hints()
    }

    fn name(&self) -> &str {
        "delayed"
    }

    fn on_transition(&mut self, worker: WorkerId, from: Option<State>, to: State, ctx: &Ctx) {
        self.inner.on_transition(worker, from, to, ctx);
        let b = self.bursts.entry(worker).or_default();
        if let Some(since) = b.run_since.take() {
            b.used += ctx.now.saturating_sub(since);
        }
        match to {
            State::Run => b.run_since = Some(ctx.now),
            State::Wait => {
                if b.used > 0 {
                    b.learnt = Some(b.used);
                }
                b.used = 0;
            }
            State::Ready => {}
        }
    }

    fn on_exit(&mut self, worker: WorkerId, ctx: &Ctx) {
        self.inner.on_exit(worker, ctx);
        self.bursts.remove(&worker);
    }

    fn enqueue(&mut self, worker: WorkerId, hints: &Hints, ctx: &Ctx) {
        self.inner.enqueue(worker, hints, ctx);
    }

    fn dequeue(&mut self, ctx: &Ctx) -> Option<WorkerId> {
        self.inner.dequeue(ctx)
    }

    fn remove(&mut self, worker: WorkerId) -> bool {
        self.inner.remove(worker)
    }

    fn len(&self) -> usize {
        self.inner.len()
    }

    fn order(&self) -> Vec<WorkerId> {
        self.inner.order()
    }

    fn tick(&mut self, ctx: &Ctx) {
        self.inner.tick(ctx);
    }

    fn period(&self) -> Option<Nanos> {
        self.inner.period()
    }

    fn on_quantum_expiry(&mut self, worker: WorkerId, ctx: &Ctx) -> Option<Nanos> {
        let b = self.bursts.get(&worker)?;
        let since = b.run_since?;
        let predicted = b.given.or(b.learnt)?;
        let slice = ctx.now.saturating_sub(since);
        let used = b.used + slice;
        let need = predicted.checked_sub(used).filter(|&n| n > 0)?;
        let (num, den) = self.fraction;
        if u128::from(need) * u128::from(den) <= u128::from(slice) * u128::from(num) {
            self.extensions += 1;
            Some(need)
        } else {
            None
        }
    }

    fn stats(&self) -> PolicyStats {
        PolicyStats {
            promotions: self.extensions,
            ..self.inner.stats()
        }
    }
}

/// Registry entry.
pub const ENTRY: crate::config::Entry = crate::config::Entry {
    name: "delayed",
    about: "delayed-switch POS (seed 001 ref. [19]): timesharing, but a worker predicted to need \
            at most 1/4 quantum more keeps the CPU that long",
    build: |_| Ok(Box::new(Delayed::new())),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Sched, MS, SEC};

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

    /// Run `w` from `from` for `len` of CPU, preempted every `q`, then wait.
    fn learn(d: &mut Delayed, w: WorkerId, from: Nanos, len: Nanos, q: Nanos) {
        d.on_transition(w, Some(State::Wait), State::Ready, &ctx(from));
        let mut t = from;
        let mut left = len;
        loop {
            d.on_transition(w, Some(State::Ready), State::Run, &ctx(t));
            let run = left.min(q);
            t += run;
            left -= run;
            if left == 0 {
                d.on_transition(w, Some(State::Run), State::Wait, &ctx(t));
                return;
            }
            d.on_transition(w, Some(State::Run), State::Ready, &ctx(t));
        }
    }

    #[test]
    fn learns_the_burst_and_extends_only_a_small_remainder() {
        let mut d = Delayed::new();
        d.on_transition(1, None, State::Wait, &ctx(0));
        learn(&mut d, 1, 0, 2100 * MS, SEC);
        assert_eq!(d.prediction(1), Some(2100 * MS));
        // Next burst: first expiry at 1 s used, 1.1 s left: too much.
        d.on_transition(1, Some(State::Wait), State::Ready, &ctx(10 * SEC));
        d.on_transition(1, Some(State::Ready), State::Run, &ctx(10 * SEC));
        assert_eq!(d.on_quantum_expiry(1, &ctx(11 * SEC)), None);
        d.on_transition(1, Some(State::Run), State::Ready, &ctx(11 * SEC));
        d.on_transition(1, Some(State::Ready), State::Run, &ctx(12 * SEC));
        // Second expiry: 2 s used, 0.1 s left <= 1/4 of the 1 s slice: extend by exactly 0.1 s.
        assert_eq!(d.on_quantum_expiry(1, &ctx(13 * SEC)), Some(100 * MS));
        // Still running at the end of the extension (prediction wrong): preempt.
        assert_eq!(d.on_quantum_expiry(1, &ctx(13 * SEC + 100 * MS)), None);
        assert_eq!(d.extensions(), 1);
    }

    #[test]
    fn remainder_above_a_quarter_quantum_is_not_extended() {
        let mut d = Delayed::new();
        d.on_transition(1, None, State::Wait, &ctx(0));
        d.predict(1, 1300 * MS);
        d.on_transition(1, Some(State::Wait), State::Ready, &ctx(0));
        d.on_transition(1, Some(State::Ready), State::Run, &ctx(0));
        // 0.3 s left > 0.25 s.
        assert_eq!(d.on_quantum_expiry(1, &ctx(SEC)), None);
        // With 0.25 s left it is (boundary included).
        let mut d = Delayed::new();
        d.predict(2, 1250 * MS);
        d.on_transition(2, None, State::Wait, &ctx(0));
        d.on_transition(2, Some(State::Wait), State::Ready, &ctx(0));
        d.on_transition(2, Some(State::Ready), State::Run, &ctx(0));
        assert_eq!(d.on_quantum_expiry(2, &ctx(SEC)), Some(250 * MS));
    }

    #[test]
    fn without_prediction_it_is_timesharing() {
        let mut s = Sched::new(1, Box::new(Delayed::new()));
        s.ready(1, 0, &h());
        s.ready(2, 0, &h());
        assert_eq!(s.quantum_expiry(1, SEC), None);
        assert_eq!(s.preempt(1, SEC, &h()), vec![2]);
    }

    #[test]
    fn given_prediction_wins_over_learnt() {
        let mut d = Delayed::new();
        d.on_transition(1, None, State::Wait, &ctx(0));
        learn(&mut d, 1, 0, 5 * SEC, SEC);
        d.predict(1, 1100 * MS);
        assert_eq!(d.prediction(1), Some(1100 * MS));
        d.on_transition(1, Some(State::Wait), State::Ready, &ctx(10 * SEC));
        d.on_transition(1, Some(State::Ready), State::Run, &ctx(10 * SEC));
        assert_eq!(d.on_quantum_expiry(1, &ctx(11 * SEC)), Some(100 * MS));
    }
}
