//! `posbsd`: POS (seed 001 §3) over the 4.4BSD timesharing order it was built into.
//!
//! Seed 001's POS was implemented in BSD/OS 2.1's scheduler: it "puts any process that has
//! characteristic 1 at the head of ready queue and moves that process to the back of the
//! ready queue when that process loses characteristic 2" (§3.2). The paper does not say that
//! it changed anything else, so here every worker that is not at the head keeps the order of
//! the kernel it ran in, [`Timeshare`] (woken sleepers first, then user priorities from decayed
//! recent CPU usage, round robin among equals), where `pos` orders the rest FIFO.
//!
//! - **Marking** (characteristics 1 and 2, SLP and RW fixed or predicted every period) is
//!   [`Pos`]'s, fed the same transitions; its own queue is never used.
//! - **Head**: in a bottleneck (all slots busy, more than one worker ready, counting the one
//!   being inserted) a marked worker goes to the head, FIFO among the marked; otherwise it
//!   joins the timesharing order. A marked worker that loses the mark while at the head goes
//!   to the back of its priority bucket in the timesharing order.
//! - **Wake-up preemption** ([`Policy::preempts`], for a mechanism that models it): a marked
//!   worker is never preempted (POS would put it back at the head, so the switch would give
//!   it the CPU again) and a marked worker that wakes preempts a worker in user mode; the rest
//!   is [`Timeshare`]'s rule.
//! - **Periods**: POS predicts every [`PolicyConfig::period`] (seed 001: 500 ms), the
//!   timesharing decay runs once a second ([`crate::timeshare::DECAY_PERIOD`]); each on its
//!   own schedule.

use std::collections::VecDeque;

use crate::config::{PolicyConfig, PolicyError};
use crate::pos::Pos;
use crate::predict::Observations;
use crate::queue::{Ctx, Hints, Policy, PolicyStats};
use crate::timeshare::{Timeshare, DECAY_PERIOD};
use crate::worker::{State, WorkerId};
use crate::Nanos;

/// POS over 4.4BSD timesharing. See the module docs.
#[derive(Debug, Clone)]
pub struct PosBsd {
    /// Marks workers (characteristics 1 and 2) and predicts SLP and RW.
    pos: Pos,
    /// The order of every worker not at the head.
    base: Timeshare,
    /// Marked workers put at the head of the queue, in service order.
    head: VecDeque<WorkerId>,
    /// When POS's prediction period ends next (`None` before the first tick).
    next_predict: Option<Nanos>,
    /// When the timesharing decay is due next (`None` before the first tick).
    next_decay: Option<Nanos>,
    /// Workers put at the head in a bottleneck.
    promotions: u64,
}

impl PosBsd {
    /// Build from a configuration (POS's checks: RW >= 1, a period > 0).
    pub fn new(cfg: &PolicyConfig) -> Result<Self, PolicyError> {
        Ok(Self {
            pos: Pos::new(cfg)?,
            base: Timeshare::new(),
            head: VecDeque::new(),
            next_predict: None,
            next_decay: None,
            promotions: 0,
        })
    }

    /// Head workers that lost the mark go to the back of their bucket in the base order.
    fn requeue_demoted(&mut self, ctx: &Ctx) {
        if self.head.iter().all(|&w| self.pos.marked(w)) {
            return;
        }
        let (keep, demoted): (VecDeque<WorkerId>, VecDeque<WorkerId>) =
            self.head.iter().partition(|&&w| self.pos.marked(w));
        self.head = keep;
        for w in demoted {
            self.base.enqueue(w, &Hints::default(), ctx);
        }
    }

    /// Whether a period that started at `next` (or a first one) is due at `now`; moves `next`
    /// on, skipping missed periods.
    fn due(next: &mut Option<Nanos>, period: Nanos, now: Nanos) -> bool {
        match *next {
            None => {
                *next = Some(now + period);
                false
            }
            Some(t) if now >= t => {
                *next = Some(t + ((now - t) / period + 1) * period);
                true
            }
            _ => false,
        }
    }
}

impl Policy for PosBsd {
    fn name(&self) -> &str {
        "posbsd"
    }

    fn on_transition(&mut self, worker: WorkerId, from: Option<State>, to: State, ctx: &Ctx) {
        self.pos.on_transition(worker, from, to, ctx);
        self.base.on_transition(worker, from, to, ctx);
        self.requeue_demoted(ctx);
    }

    fn on_exit(&mut self, worker: WorkerId, ctx: &Ctx) {
        self.head.retain(|&w| w != worker);
        self.pos.on_exit(worker, ctx);
        self.base.on_exit(worker, ctx);
    }

    fn enqueue(&mut self, worker: WorkerId, hints: &Hints, ctx: &Ctx) {
        if self.pos.marked(worker) && ctx.bottleneck(self.len() + 1) {
            // Marked workers at the front of the base order are at the head already: the new
            // one goes behind them (FIFO among the marked, as in `pos`).
            while let Some(f) = self.base.front().filter(|&f| self.pos.marked(f)) {
                self.base.remove(f);
                self.head.push_back(f);
            }
            self.head.push_back(worker);
            self.promotions += 1;
        } else {
            self.base.enqueue(worker, hints, ctx);
        }
    }

    fn dequeue(&mut self, ctx: &Ctx) -> Option<WorkerId> {
        self.head.pop_front().or_else(|| self.base.dequeue(ctx))
    }

    fn remove(&mut self, worker: WorkerId) -> bool {
        let before = self.head.len();
        self.head.retain(|&w| w != worker);
        self.head.len() < before || self.base.remove(worker)
    }

    fn len(&self) -> usize {
        self.head.len() + self.base.len()
    }

    fn order(&self) -> Vec<WorkerId> {
        self.head.iter().copied().chain(self.base.order()).collect()
    }

    fn preempts(&self, woken: WorkerId, running: WorkerId) -> bool {
        if self.pos.marked(running) {
            return false;
        }
        self.pos.marked(woken) || self.base.preempts(woken, running)
    }

    fn tick(&mut self, ctx: &Ctx) {
        let period = self.pos.period().unwrap_or(DECAY_PERIOD);
        if Self::due(&mut self.next_predict, period, ctx.now) {
            self.pos.tick(ctx);
            self.requeue_demoted(ctx);
        }
        if Self::due(&mut self.next_decay, DECAY_PERIOD, ctx.now) {
            self.base.tick(ctx);
        }
    }

    fn period(&self) -> Option<Nanos> {
        Some(
            self.pos
                .period()
                .map_or(DECAY_PERIOD, |p| p.min(DECAY_PERIOD)),
        )
    }

    fn marked(&self, worker: WorkerId) -> bool {
        self.pos.marked(worker)
    }

    fn stats(&self) -> PolicyStats {
        PolicyStats {
            promotions: self.promotions,
            ..self.pos.stats()
        }
    }

    fn take_observations(&mut self) -> Option<Observations> {
        self.pos.take_observations()
    }

    fn add_observations(&mut self, other: Observations) {
        self.pos.add_observations(other);
    }

    fn apply_predictions(&mut self, slp: Option<Nanos>, rw: Option<u32>, ctx: &Ctx) {
        self.pos.apply_predictions(slp, rw, ctx);
        self.requeue_demoted(ctx);
    }
}

/// Registry entry.
pub const ENTRY: crate::config::Entry = crate::config::Entry {
    name: "posbsd",
    about: "POS over 4.4BSD timesharing: marked workers at the head in a bottleneck, every \
            other worker in `timeshare`'s order (seed 001's POS in BSD/OS)",
    build: |cfg| Ok(Box::new(PosBsd::new(cfg)?)),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Tunable;
    use crate::{Sched, MS, SEC};

    fn cfg() -> PolicyConfig {
        PolicyConfig {
            slp: Tunable::Fixed(SEC),
            rw: Tunable::Fixed(3),
            starvation_bound: None,
            ..PolicyConfig::default()
        }
    }

    fn h() -> Hints {
        Hints::default()
    }

    #[test]
    fn marked_worker_goes_ahead_and_the_rest_keep_the_timesharing_order() {
        let mut s = Sched::new(1, Box::new(PosBsd::new(&cfg()).unwrap()));
        for w in [1, 2, 4] {
            s.register(w, 0);
        }
        s.register(3, 2 * SEC - 10 * MS);
        // 1 runs; 2 runs a while and is preempted (user priority); 3 wakes soon (short wait:
        // kernel priority, unmarked); 4 wakes after a long wait (marked).
        s.ready(1, 10 * MS, &h());
        s.ready(2, 10 * MS, &h());
        let now = 2 * SEC;
        // 1 blocks, 2 runs for a second and is preempted by the quantum.
        assert_eq!(s.wait(1, 20 * MS), vec![2]);
        s.ready(1, 30 * MS, &h());
        assert_eq!(s.preempt(2, now, &h()), vec![1]);
        s.ready(3, now, &h());
        s.ready(4, now + MS, &h());
        // Order: marked 4 at the head, then woken 3 (kernel priority), then 2 (user priority).
        assert_eq!(s.policy().order(), vec![4, 3, 2]);
        assert!(s.policy().marked(4) && !s.policy().marked(3));
        // A marked worker is never preempted; it preempts an unmarked one in user mode.
        assert!(!s.preempts(3, 4));
        assert!(s.preempts(4, 1));
        assert!(
            s.preempts(3, 1),
            "a woken worker preempts user mode (timeshare)"
        );
        assert!(!s.preempts(2, 1), "a preempted worker does not");
    }

    #[test]
    fn losing_the_mark_at_the_head_sends_it_to_the_base_order() {
        let mut p = PosBsd::new(&PolicyConfig {
            rw: Tunable::Auto,
            ..cfg()
        })
        .unwrap();
        let c = |now| Ctx {
            now,
            busy: 1,
            slots: 1,
        };
        for w in [1, 2, 3] {
            p.on_transition(w, None, State::Wait, &c(0));
        }
        // 3 runs all along. 2 wakes after a short wait: unmarked, queued.
        p.on_transition(2, Some(State::Wait), State::Ready, &c(MS));
        p.enqueue(2, &h(), &c(MS));
        // 1 wakes after a long wait (marked), runs, waits briefly and wakes again (counter 2
        // of RW 3: still marked): in the bottleneck it goes ahead of 2.
        p.on_transition(1, Some(State::Wait), State::Ready, &c(2 * SEC));
        p.on_transition(1, Some(State::Ready), State::Run, &c(2 * SEC));
        p.on_transition(1, Some(State::Run), State::Wait, &c(2 * SEC + MS));
        p.on_transition(1, Some(State::Wait), State::Ready, &c(2 * SEC + 2 * MS));
        p.enqueue(1, &h(), &c(2 * SEC + 2 * MS));
        assert!(p.marked(1));
        assert_eq!(p.order(), vec![1, 2]);
        assert_eq!(p.stats().promotions, 1);
        // RW predicted down to 2: 1 loses the mark and goes behind 2 (both woken sleepers).
        p.apply_predictions(None, Some(2), &c(2 * SEC + 3 * MS));
        assert!(!p.marked(1));
        assert_eq!(p.order(), vec![2, 1]);
        assert_eq!(p.dequeue(&c(3 * SEC)), Some(2));
        assert!(p.remove(1));
        assert!(p.is_empty());
    }

    #[test]
    fn ticks_predict_every_period_and_decay_every_second() {
        let mut p = PosBsd::new(&PolicyConfig {
            period: 500 * MS,
            ..cfg()
        })
        .unwrap();
        assert_eq!(p.period(), Some(500 * MS));
        let c = |now| Ctx {
            now,
            busy: 0,
            slots: 1,
        };
        p.on_transition(1, None, State::Wait, &c(0));
        p.on_transition(1, Some(State::Wait), State::Ready, &c(0));
        p.on_transition(1, Some(State::Ready), State::Run, &c(0));
        p.on_transition(1, Some(State::Run), State::Wait, &c(2 * SEC));
        let est = p.base.estcpu(1).unwrap();
        assert_eq!(est, 200);
        let mut t = 0;
        let mut decays = 0;
        while t <= 70 * SEC {
            let before = p.base.estcpu(1).unwrap();
            p.tick(&c(t));
            if p.base.estcpu(1).unwrap() < before {
                decays += 1;
            }
            t += 500 * MS;
        }
        assert!(decays > 0, "estcpu decays once a second once there is load");
        assert!(p.base.estcpu(1).unwrap() < est);
    }
}
