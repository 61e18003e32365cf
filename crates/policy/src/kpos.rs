//! POS for tasks the kernel schedules (`triage pos attach`, triage's own CGI children): the
//! run/wait transitions a tracer saw become the [`Pos`] policy's worker log, and POS's mark
//! becomes a *lever* decision per task, [`Action::Raise`] or [`Action::Lower`].
//!
//! No rule is copied here: characteristic 1 (marked when ready after a wait longer than SLP),
//! characteristic 2 (demoted after RW run/wait changes) and the SLP/RW predictions every
//! period are [`Pos`]'s own. What this adapter adds is what a kernel mechanism needs:
//! - **raise before the wake-up**: the lever is a system call on another task, so a task that
//!   has waited longer than SLP is raised while still asleep ([`Pos::waiting_past_slp`]): when
//!   it wakes, POS marks it and it is already raised;
//! - **only in a bottleneck**: the CPU is the bottleneck when the followed tasks queued for
//!   it, on average over the last period, at least [`KposConfig::bottleneck_lrq`] of them
//!   ready but not running (the paper's LRQ: it grows with the load) or more time ready
//!   than running (LRQ >= PL: they wait for the CPU longer than they use it), or when those that
//!   woke waited for a CPU at least [`KposConfig::bottleneck_delay`] on average (the kernel's
//!   run queue is where the paper's LRQ is); otherwise nothing is raised and everything
//!   raised is lowered. (A wake-up alone can miss the bottleneck: EEVDF runs a waking task
//!   at once ahead of a CPU hog that has used its share, while the server's other tasks
//!   queue preempted.) Only the wake-ups of tasks *not* held raised count: a
//!   raised task runs at once because of the lever, which says nothing about the CPU (counted,
//!   the verdict would switch itself off as soon as it works). A period without a queue in
//!   which the followed tasks were idle (running or ready less than 10% of it: the server
//!   between two bursts, whatever else ran) or no unraised task woke keeps the last
//!   verdict, so that the first requests of the next burst find their workers raised
//!   already if the CPU was the bottleneck when the server last worked;
//! - PL (mean tasks running) and LRQ (mean tasks ready, not running) of the followed tasks,
//!   per period, from the same events.

use crate::config::{PolicyConfig, PolicyError};
use crate::idhash::IdMap;
use crate::pos::Pos;
use crate::queue::{Ctx, Policy};
use crate::worker::{State, WorkerId};
use crate::{Nanos, MS};

/// What the tracer saw a task do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// It was created (or is followed from now on, state unknown: taken as waiting).
    Start,
    /// It woke up: runnable, waiting for a CPU.
    Wake,
    /// It got a CPU.
    Run,
    /// It blocked or slept.
    Sleep,
    /// It lost the CPU while still runnable.
    Preempt,
    /// It exited.
    Exit,
}

/// A decision for the lever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Raise this task.
    Raise(WorkerId),
    /// Put this task back.
    Lower(WorkerId),
}

/// Configuration of [`Kpos`].
#[derive(Debug, Clone, PartialEq)]
pub struct KposConfig {
    /// POS's parameters (SLP, RW, their rules, the period).
    pub policy: PolicyConfig,
    /// CPUs the followed tasks share (POS's slots; bounds PL).
    pub cpus: usize,
    /// Mean wake-up-to-run delay of the last period from which the CPU counts as the
    /// bottleneck (a task that wakes on an idle CPU runs within tens of microseconds).
    pub bottleneck_delay: Nanos,
    /// Mean number of followed tasks ready but not running (LRQ) over the last period from
    /// which the CPU counts as the bottleneck (also LRQ >= PL; `f64::INFINITY`: the delay
    /// alone decides).
    pub bottleneck_lrq: f64,
    /// Pull the lever whether or not the CPU is the bottleneck (labs, tests).
    pub always: bool,
}

impl Default for KposConfig {
    fn default() -> Self {
        Self {
            policy: PolicyConfig::default(),
            cpus: 1,
            bottleneck_delay: MS / 4,
            bottleneck_lrq: 1.0,
            always: false,
        }
    }
}

/// PL + LRQ of a period below which the followed tasks count as idle (they ran or queued
/// less than 10% of it: a server between two bursts, a few stray wake-ups): such a period
/// says nothing about the CPU.
const IDLE_LOAD: f64 = 0.1;

/// One followed task, as the adapter tracks it.
#[derive(Debug, Clone, Copy)]
struct Task {
    state: State,
    /// When it became ready after a wake-up (for the wake-to-run delay).
    woke: Option<Nanos>,
}

/// Load of the followed tasks over one period.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Load {
    /// Mean number of followed tasks running (PL).
    pub pl: f64,
    /// Mean number of followed tasks ready but not running (LRQ).
    pub lrq: f64,
    /// Mean delay from wake-up to running (ns).
    pub wake_delay: Nanos,
    /// Wake-ups counted.
    pub wakes: u64,
    /// Whether the CPU was the bottleneck (see the module docs).
    pub bottleneck: bool,
}

/// Counters and current parameters, for metrics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KposStats {
    /// Current SLP (ns).
    pub slp: Nanos,
    /// Current RW.
    pub rw: u32,
    /// Times a task got POS's mark.
    pub marks: u64,
    /// Times a marked task lost it (characteristic 2, or a lowered RW).
    pub demotions: u64,
    /// Raise decisions.
    pub raises: u64,
    /// Lower decisions.
    pub lowers: u64,
    /// Tasks followed now.
    pub live: usize,
    /// Tasks raised now.
    pub raised: usize,
    /// The last closed period's load.
    pub load: Load,
}

/// See the module docs.
pub struct Kpos {
    cfg: KposConfig,
    pos: Pos,
    tasks: IdMap<WorkerId, Task>,
    raised: IdMap<WorkerId, ()>,
    running: usize,
    ready: usize,
    /// Start of the current period.
    period_start: Nanos,
    /// Time of the last state change (for the PL/LRQ integrals).
    last_change: Nanos,
    run_area: u128,
    ready_area: u128,
    wakes: u64,
    wake_delay_sum: u128,
    load: Load,
    marks: u64,
    raises: u64,
    lowers: u64,
}

impl Kpos {
    /// A classifier starting at `now`.
    pub fn new(cfg: KposConfig, now: Nanos) -> Result<Self, PolicyError> {
        let pos = Pos::new(&cfg.policy)?;
        Ok(Self {
            cfg,
            pos,
            tasks: IdMap::default(),
            raised: IdMap::default(),
            running: 0,
            ready: 0,
            period_start: now,
            last_change: now,
            run_area: 0,
            ready_area: 0,
            wakes: 0,
            wake_delay_sum: 0,
            load: Load::default(),
            marks: 0,
            raises: 0,
            lowers: 0,
        })
    }

    fn ctx(&self, now: Nanos) -> Ctx {
        Ctx {
            now,
            busy: self.running.min(self.cfg.cpus),
            slots: self.cfg.cpus,
        }
    }

    /// Account the PL/LRQ integrals up to `now`.
    fn integrate(&mut self, now: Nanos) {
        let dt = now.saturating_sub(self.last_change) as u128;
        self.run_area += dt * self.running as u128;
        self.ready_area += dt * self.ready as u128;
        self.last_change = self.last_change.max(now);
    }

    fn count(&mut self, s: State, delta: isize) {
        let c = match s {
            State::Run => &mut self.running,
            State::Ready => &mut self.ready,
            State::Wait => return,
        };
        *c = c.saturating_add_signed(delta);
    }

    /// Whether the lever should hold `w` raised now.
    fn wants(&self, w: WorkerId, now: Nanos) -> bool {
        (self.cfg.always || self.load.bottleneck)
            && (self.pos.marked(w) || self.pos.waiting_past_slp(w, now))
    }

    fn decide(&mut self, w: WorkerId, now: Nanos, out: &mut Vec<Action>) {
        let want = self.tasks.contains_key(&w) && self.wants(w, now);
        let is = self.raised.contains_key(&w);
        if want && !is {
            self.raised.insert(w, ());
            self.raises += 1;
            out.push(Action::Raise(w));
        } else if !want && is {
            self.raised.remove(&w);
            self.lowers += 1;
            out.push(Action::Lower(w));
        }
    }

    /// One transition of task `w` at `now` (times of one task in order); lever decisions
    /// are appended to `out`.
    pub fn event(&mut self, w: WorkerId, input: Input, now: Nanos, out: &mut Vec<Action>) {
        self.scan(now, out);
        self.integrate(now);
        if input == Input::Exit {
            if let Some(t) = self.tasks.remove(&w) {
                self.count(t.state, -1);
                let ctx = self.ctx(now);
                self.pos.on_exit(w, &ctx);
            }
            if self.raised.remove(&w).is_some() {
                // Nothing to put back on a task that is gone: the mechanism forgets it.
                self.lowers += 1;
            }
            return;
        }
        let to = match input {
            Input::Start | Input::Sleep => State::Wait,
            Input::Wake | Input::Preempt => State::Ready,
            Input::Run => State::Run,
            Input::Exit => unreachable!(),
        };
        let prev = self.tasks.get(&w).map(|t| t.state);
        if prev == Some(to) {
            return;
        }
        if let Some(p) = prev {
            self.count(p, -1);
        }
        self.count(to, 1);
        let mut woke = None;
        if let Some(t) = self.tasks.get(&w) {
            woke = t.woke;
        }
        match (input, to) {
            (Input::Wake, _) => woke = Some(now),
            (_, State::Run) => {
                // A raised task's delay is the lever's doing (see the module docs).
                if let Some(t0) = woke.take().filter(|_| !self.raised.contains_key(&w)) {
                    self.wakes += 1;
                    self.wake_delay_sum += now.saturating_sub(t0) as u128;
                }
            }
            _ => woke = None,
        }
        self.tasks.insert(w, Task { state: to, woke });
        let was_marked = self.pos.marked(w);
        let ctx = self.ctx(now);
        self.pos.on_transition(w, prev, to, &ctx);
        if !was_marked && self.pos.marked(w) {
            self.marks += 1;
        }
        self.decide(w, now, out);
    }

    /// Time passes: close the period when due (POS predicts SLP and RW, the load is judged)
    /// and raise the tasks asleep past SLP (call it often: every poll of the tracer).
    pub fn scan(&mut self, now: Nanos, out: &mut Vec<Action>) {
        if now.saturating_sub(self.period_start) >= self.cfg.policy.period {
            self.close_period(now);
            let ids: Vec<WorkerId> = self.all_ids();
            for w in ids {
                self.decide(w, now, out);
            }
            return;
        }
        if !(self.cfg.always || self.load.bottleneck) {
            return;
        }
        let mut ids: Vec<WorkerId> = self
            .tasks
            .iter()
            .filter(|(w, t)| t.state == State::Wait && !self.raised.contains_key(w))
            .map(|(&w, _)| w)
            .collect();
        ids.sort_unstable();
        for w in ids {
            self.decide(w, now, out);
        }
    }

    /// Every followed task in id order (deterministic decisions).
    fn all_ids(&self) -> Vec<WorkerId> {
        let mut ids: Vec<WorkerId> = self.tasks.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    fn close_period(&mut self, now: Nanos) {
        self.integrate(now);
        let len = now.saturating_sub(self.period_start).max(1) as f64;
        let wake_delay = if self.wakes > 0 {
            (self.wake_delay_sum / self.wakes as u128) as Nanos
        } else {
            0
        };
        let lrq = self.ready_area as f64 / len;
        let pl = self.run_area as f64 / len;
        // A queue of followed tasks, or tasks that spent more of the period waiting for the
        // CPU than using it (between bursts a lone ready task the hog keeps from running).
        let queued = lrq >= self.cfg.bottleneck_lrq
            || (self.cfg.bottleneck_lrq.is_finite() && lrq > 0.0 && lrq >= pl);
        self.load = Load {
            pl,
            lrq,
            wake_delay,
            wakes: self.wakes,
            // An idle server, or no unraised wake-up: no evidence, the last verdict stands
            // (see the module docs).
            bottleneck: if queued {
                true
            } else if pl + lrq < IDLE_LOAD || self.wakes == 0 {
                self.load.bottleneck
            } else {
                wake_delay >= self.cfg.bottleneck_delay
            },
        };
        let ctx = self.ctx(now);
        self.pos.tick(&ctx);
        self.period_start = now;
        self.run_area = 0;
        self.ready_area = 0;
        self.wakes = 0;
        self.wake_delay_sum = 0;
    }

    /// Whether POS marks `w` now.
    pub fn marked(&self, w: WorkerId) -> bool {
        self.pos.marked(w)
    }

    /// Whether the adapter holds `w` raised.
    pub fn raised(&self, w: WorkerId) -> bool {
        self.raised.contains_key(&w)
    }

    /// Counters and parameters.
    pub fn stats(&self) -> KposStats {
        let p = self.pos.stats();
        KposStats {
            slp: self.pos.slp(),
            rw: self.pos.rw(),
            marks: self.marks,
            demotions: p.demotions,
            raises: self.raises,
            lowers: self.lowers,
            live: self.tasks.len(),
            raised: self.raised.len(),
            load: self.load,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Tunable;

    fn cfg(always: bool) -> KposConfig {
        KposConfig {
            policy: PolicyConfig {
                slp: Tunable::Fixed(10 * MS),
                rw: Tunable::Fixed(3),
                ..PolicyConfig::default()
            },
            cpus: 1,
            bottleneck_delay: MS / 4,
            bottleneck_lrq: 1.0,
            always,
        }
    }

    /// A worker that serves one request: wakes after `idle`, runs in `bursts` bursts
    /// separated by short waits, then waits again. Returns the time it ends.
    fn serve(k: &mut Kpos, w: WorkerId, t: Nanos, bursts: u32, out: &mut Vec<Action>) -> Nanos {
        let mut t = t;
        for b in 0..bursts {
            k.event(w, Input::Wake, t, out);
            k.event(w, Input::Run, t + MS, out); // waited 1 ms for the CPU
            k.event(w, Input::Sleep, t + 2 * MS, out);
            t += 2 * MS + if b + 1 < bursts { MS / 2 } else { 0 };
        }
        t
    }

    #[test]
    fn text_worker_is_raised_before_it_wakes_and_image_worker_is_demoted() {
        let mut k = Kpos::new(cfg(true), 0).unwrap();
        let mut out = Vec::new();
        k.event(1, Input::Start, 0, &mut out);
        k.event(2, Input::Start, 0, &mut out);
        assert!(out.is_empty(), "nothing raised before SLP has passed");
        // Both asleep past SLP: both raised while asleep.
        k.scan(20 * MS, &mut out);
        assert_eq!(out, vec![Action::Raise(1), Action::Raise(2)]);
        out.clear();
        // Worker 1 serves a page (one burst: 2 changes < RW): stays raised throughout.
        let t = serve(&mut k, 1, 21 * MS, 1, &mut out);
        assert!(out.is_empty(), "{out:?}");
        assert!(k.marked(1));
        // Worker 2 serves an image (many bursts): demoted at the RW-th change, lowered.
        serve(&mut k, 2, t, 4, &mut out);
        assert_eq!(out, vec![Action::Lower(2)]);
        assert!(!k.marked(2));
        let s = k.stats();
        assert_eq!((s.marks, s.demotions, s.raised), (2, 1, 1));
        // Worker 1 exits while raised: forgotten, no action (nothing to restore).
        out.clear();
        k.event(1, Input::Exit, t + 50 * MS, &mut out);
        assert!(out.iter().all(|a| *a != Action::Lower(1)));
        assert_eq!(k.stats().live, 1);
    }

    #[test]
    fn nothing_is_raised_until_the_cpu_is_the_bottleneck() {
        let mut k = Kpos::new(cfg(false), 0).unwrap();
        let mut out = Vec::new();
        k.event(1, Input::Start, 0, &mut out);
        // Wake-ups that run at once: no bottleneck.
        let mut t = 20 * MS;
        for _ in 0..10 {
            k.event(1, Input::Wake, t, &mut out);
            k.event(1, Input::Run, t + 10_000, &mut out);
            k.event(1, Input::Sleep, t + 10 * MS, &mut out);
            t += 30 * MS;
        }
        k.scan(600 * MS, &mut out);
        assert!(out.is_empty(), "{out:?}");
        assert!(!k.stats().load.bottleneck);
        // Now every wake-up waits 1 ms for the CPU: the next period is a bottleneck, and the
        // worker asleep past SLP is raised at the period's end.
        let mut t = 601 * MS;
        for _ in 0..10 {
            k.event(1, Input::Wake, t, &mut out);
            k.event(1, Input::Run, t + MS, &mut out);
            k.event(1, Input::Sleep, t + 11 * MS, &mut out);
            t += 30 * MS;
        }
        k.scan(1200 * MS, &mut out);
        let load = k.stats().load;
        assert!(load.bottleneck, "{load:?}");
        assert_eq!(load.wake_delay, MS);
        assert!(load.pl > 0.0 && load.lrq > 0.0);
        assert_eq!(out, vec![Action::Raise(1)]);
        // The server goes idle (no wake-up for two periods): the verdict stands, the sleeper
        // stays raised for the next burst.
        out.clear();
        k.scan(1800 * MS, &mut out);
        k.scan(2400 * MS, &mut out);
        assert!(k.stats().load.bottleneck);
        assert!(out.is_empty(), "{out:?}");
        assert!(k.raised(1));
        // The raised worker runs at once when it wakes: the lever's doing, no evidence.
        k.event(1, Input::Wake, 2401 * MS, &mut out);
        k.event(1, Input::Run, 2401 * MS + 10_000, &mut out);
        k.event(1, Input::Sleep, 2402 * MS, &mut out);
        k.scan(3000 * MS, &mut out);
        assert!(k.stats().load.bottleneck);
        assert!(k.raised(1) && out.is_empty(), "{out:?}");
        // An unraised worker (2: runs 20 ms, waits 2 ms, never past SLP once demoted) runs at once
        // when it wakes: the CPU is free, the verdict ends and worker 1 is lowered.
        k.event(2, Input::Start, 3000 * MS, &mut out);
        let mut t = 3001 * MS;
        for _ in 0..10 {
            k.event(2, Input::Wake, t, &mut out);
            k.event(2, Input::Run, t + 10_000, &mut out);
            k.event(2, Input::Sleep, t + 20 * MS, &mut out);
            t += 22 * MS;
        }
        assert!(!k.raised(2));
        out.clear();
        k.scan(3600 * MS, &mut out);
        assert!(!k.stats().load.bottleneck);
        assert_eq!(out, vec![Action::Lower(1)]);
    }

    #[test]
    fn a_queue_of_followed_tasks_is_a_bottleneck_even_if_wake_ups_run_at_once() {
        let mut k = Kpos::new(cfg(false), 0).unwrap();
        let mut out = Vec::new();
        for w in 1..=3 {
            k.event(w, Input::Start, 0, &mut out);
        }
        // Each wakes and runs at once, then two of them sit preempted (ready) for most of the
        // period: LRQ about 2, wake delay 10 us.
        for w in 1..=3 {
            k.event(w, Input::Wake, MS, &mut out);
            k.event(w, Input::Run, MS + 10_000, &mut out);
        }
        k.event(2, Input::Preempt, 2 * MS, &mut out);
        k.event(3, Input::Preempt, 2 * MS, &mut out);
        k.scan(600 * MS, &mut out);
        let load = k.stats().load;
        assert!(load.lrq > 1.5 && load.wake_delay < MS / 4, "{load:?}");
        assert!(load.bottleneck, "{load:?}");
        // With the queue criterion off, the same period is no bottleneck.
        let mut c = cfg(false);
        c.bottleneck_lrq = f64::INFINITY;
        let mut k = Kpos::new(c, 0).unwrap();
        for w in 1..=3 {
            k.event(w, Input::Start, 0, &mut out);
            k.event(w, Input::Wake, MS, &mut out);
            k.event(w, Input::Run, MS + 10_000, &mut out);
        }
        k.event(2, Input::Preempt, 2 * MS, &mut out);
        k.event(3, Input::Preempt, 2 * MS, &mut out);
        k.scan(600 * MS, &mut out);
        assert!(!k.stats().load.bottleneck);
        // One task that runs 30 ms and then sits ready 120 ms (the hog holds the CPU):
        // LRQ 0.2 >= PL 0.05, a bottleneck though no queue of 1 formed.
        let mut k = Kpos::new(cfg(false), 0).unwrap();
        k.event(1, Input::Start, 0, &mut out);
        k.event(1, Input::Wake, MS, &mut out);
        k.event(1, Input::Run, MS + 10_000, &mut out);
        k.event(1, Input::Preempt, 31 * MS, &mut out);
        k.event(1, Input::Run, 151 * MS, &mut out);
        k.event(1, Input::Sleep, 152 * MS, &mut out);
        k.scan(600 * MS, &mut out);
        let load = k.stats().load;
        assert!(load.lrq < 1.0 && load.lrq >= load.pl, "{load:?}");
        assert!(load.bottleneck, "{load:?}");
    }
}
