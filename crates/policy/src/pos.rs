//! `pos`: Program Oriented Schedule (seed 001 §3), behaviour-based ready-queue ordering.
//!
//! POS looks only at each worker's run/wait log, never at what it serves:
//! - *Characteristic 1*: a worker that becomes ready after a wait longer than SLP is a text
//!   candidate: it gets the **mark** and its run/wait change counter restarts at 0.
//! - *Characteristic 2*: every further change (entering a wait, leaving a wait) increments the
//!   counter; when it reaches RW the mark is lost (**demotion**) and a queued worker moves to
//!   the back.
//! - In a **bottleneck** (all slots busy, more than one worker ready, counting the one being
//!   inserted) a marked worker is inserted at the head of the queue, behind the marked workers
//!   already there (FIFO among marked). Otherwise the queue is plain FIFO.
//! - The rest of the queue is FIFO by ready time as in the paper ([`PosTail::Fifo`]), or, with
//!   [`PosTail::Episode`], ordered by when each worker's service episode began.
//! - SLP and RW are fixed or predicted every period ([`crate::predict`]).
//! - Optional starvation guard ([`crate::ready::ReadyQueue`]), not in the paper.
//!
//! Per-worker state exists only for live workers ([`Policy::on_exit`] forgets them). Enqueue and
//! dequeue are O(1) amortized; `tick` is O(live workers) once per period.
//! The rules and the design choices are written up in `docs/policy.md`.

use crate::config::{PolicyConfig, PolicyError};
use crate::config::{PosTail, RwRule, Tunable};
use crate::predict::{rw_paper, slp_paper, Observations, SplitRw};
use crate::queue::{Ctx, Hints, Policy, PolicyStats};
use crate::ready::ReadyQueue;
use crate::worker::{State, WorkerId};
use crate::{Nanos, SEC};

/// SLP used before the first prediction when SLP is [`Tunable::Auto`].
pub const DEFAULT_SLP: Nanos = SEC;
/// RW used before the first prediction when RW is [`Tunable::Auto`] (the paper's best fixed
/// value).
pub const DEFAULT_RW: u32 = 3;

/// Queue level of workers inserted at the head.
const HEAD: usize = 0;
/// Queue level of everyone else.
const TAIL: usize = 1;

/// What POS knows about one live worker.
#[derive(Debug, Clone)]
struct Worker {
    state: State,
    /// When it entered `state`.
    since: Nanos,
    /// Predicted to serve text (characteristic 1 and 2 hold).
    marked: bool,
    /// Run/wait changes since the last long wait.
    counter: u32,
    /// When the current service episode began (it left a wait longer than SLP), or when the
    /// worker was first seen: its key in the tail with [`PosTail::Episode`].
    episode_start: Nanos,
    /// A service episode started (the worker left a long wait) and has not been recorded.
    in_episode: bool,
    /// Longest wait completed in the current period.
    longest_wait: Option<Nanos>,
    /// Shortest episode completed in the current period.
    min_episode: Option<u32>,
}

impl Worker {
    fn new(state: State, now: Nanos) -> Self {
        Self {
            state,
            since: now,
            marked: false,
            counter: 0,
            episode_start: now,
            in_episode: false,
            longest_wait: None,
            min_episode: None,
        }
    }
}

/// The POS policy. Build it with [`Pos::new`] or `build("pos", &cfg)`.
#[derive(Debug, Clone)]
pub struct Pos {
    slp_cfg: Tunable<Nanos>,
    rw_cfg: Tunable<u32>,
    rw_rule: RwRule,
    tail: PosTail,
    period: Nanos,
    /// Smallest predicted SLP ([`PolicyConfig::slp_floor`]).
    slp_floor: Nanos,
    slp: Nanos,
    rw: u32,
    workers: crate::idhash::IdMap<WorkerId, Worker>,
    q: ReadyQueue,
    promotions: u64,
    demotions: u64,
    /// Smallest longest-wait of workers that exited during the period.
    gone_longest_wait: Option<Nanos>,
    /// Greatest shortest-episode of workers that exited during the period.
    gone_min_episode: Option<u32>,
    split: SplitRw,
    /// Episodes completed this period, as (length, count): added to `split` when the period
    /// ends, or handed over to the lane that predicts for all ([`Policy::take_observations`]).
    period_episodes: std::collections::BTreeMap<u32, u64>,
}

impl Pos {
    /// Build from a configuration; rejects RW = 0 (nothing could ever be marked) and a zero
    /// period.
    pub fn new(cfg: &PolicyConfig) -> Result<Self, PolicyError> {
        let invalid = |msg: String| PolicyError::Invalid { policy: "pos", msg };
        if cfg.period == 0 {
            return Err(invalid("period must be > 0".into()));
        }
        if cfg.rw == Tunable::Fixed(0) {
            return Err(invalid(
                "rw = 0 would never mark a worker (use rw >= 1, or policy `fifo`)".into(),
            ));
        }
        Ok(Self {
            slp_cfg: cfg.slp,
            rw_cfg: cfg.rw,
            rw_rule: cfg.rw_rule,
            tail: cfg.pos_tail,
            period: cfg.period,
            slp_floor: cfg.slp_floor,
            slp: match cfg.slp {
                Tunable::Fixed(v) => v,
                Tunable::Auto => DEFAULT_SLP,
            },
            rw: match cfg.rw {
                Tunable::Fixed(v) => v,
                Tunable::Auto => DEFAULT_RW,
            },
            workers: Default::default(),
            q: ReadyQueue::new(2, cfg.starvation_bound),
            promotions: 0,
            demotions: 0,
            gone_longest_wait: None,
            gone_min_episode: None,
            split: SplitRw::new(),
            period_episodes: Default::default(),
        })
    }

    /// Current long-wait threshold.
    pub fn slp(&self) -> Nanos {
        self.slp
    }

    /// Current run/wait change threshold.
    pub fn rw(&self) -> u32 {
        self.rw
    }

    /// Run/wait change counter of a live worker.
    pub fn counter(&self, worker: WorkerId) -> Option<u32> {
        self.workers.get(&worker).map(|w| w.counter)
    }

    /// Whether `worker` has been waiting longer than SLP at `now`: if it woke now,
    /// characteristic 1 would mark it. A mechanism whose lever is slow to apply (a system
    /// call on another process) applies it to such a worker before it wakes.
    pub fn waiting_past_slp(&self, worker: WorkerId, now: Nanos) -> bool {
        self.workers
            .get(&worker)
            .is_some_and(|w| w.state == State::Wait && now.saturating_sub(w.since) > self.slp)
    }

    /// When a waiting `worker` will have waited longer than SLP (the first time at which
    /// [`Pos::waiting_past_slp`] holds), at the current SLP; `None` if it is not waiting.
    pub fn slp_passes_at(&self, worker: WorkerId) -> Option<Nanos> {
        self.workers
            .get(&worker)
            .filter(|w| w.state == State::Wait)
            .map(|w| w.since.saturating_add(self.slp).saturating_add(1))
    }

    /// When `worker`'s current service episode began (it left a wait longer than SLP), or
    /// when POS first saw it: its place in the tail with [`PosTail::Episode`].
    pub fn episode_start(&self, worker: WorkerId) -> Option<Nanos> {
        self.workers.get(&worker).map(|w| w.episode_start)
    }

    /// Number of workers POS holds state for (live workers only).
    pub fn live_workers(&self) -> usize {
        self.workers.len()
    }

    /// Positions stored by the ready queue, live and stale (memory-bound tests).
    pub fn queue_stored(&self) -> usize {
        self.q.stored()
    }

    /// The split rule's histogram of recent episode lengths (observability).
    pub fn split_state(&self) -> &SplitRw {
        &self.split
    }

    fn demote(&mut self, id: WorkerId) {
        if let Some(w) = self.workers.get_mut(&id) {
            if w.marked {
                w.marked = false;
                self.demotions += 1;
                if self.q.contains(id) {
                    // Queued already: it keeps its arrival time.
                    self.put_in_tail(id, 0);
                }
            }
        }
    }

    /// Queue `id` in the tail (or move it there, if queued), as [`PosTail`] says: at the back,
    /// or at its episode's place.
    fn put_in_tail(&mut self, id: WorkerId, now: Nanos) {
        match self.tail {
            PosTail::Fifo => self.q.push_back(TAIL, id, now),
            PosTail::Episode => {
                let key = self.workers.get(&id).map_or(now, |w| w.episode_start);
                self.q.push_keyed(TAIL, id, key, now);
            }
        }
    }

    /// One run/wait change of `id`.
    fn change(&mut self, id: WorkerId) {
        let rw = self.rw;
        if let Some(w) = self.workers.get_mut(&id) {
            w.counter = w.counter.saturating_add(1);
            if w.marked && w.counter >= rw {
                self.demote(id);
            }
        }
    }

    /// Record the episode `w` was in (if any) as completed.
    fn end_episode(w: &mut Worker, episodes: &mut std::collections::BTreeMap<u32, u64>) {
        if w.in_episode && w.counter > 0 {
            w.min_episode = Some(w.min_episode.map_or(w.counter, |m| m.min(w.counter)));
            *episodes.entry(w.counter).or_default() += 1;
        }
        w.in_episode = false;
    }

    /// A new RW; lowering it demotes the marked workers whose counter reached it.
    fn set_rw(&mut self, rw: u32) {
        let lowered = rw < self.rw;
        self.rw = rw;
        if lowered {
            // Queued workers first, in queue order, so their relative order is kept.
            for id in self.q.order() {
                if self
                    .workers
                    .get(&id)
                    .is_some_and(|w| w.marked && w.counter >= rw)
                {
                    self.demote(id);
                }
            }
            for w in self.workers.values_mut() {
                if w.marked && w.counter >= rw {
                    w.marked = false;
                    self.demotions += 1;
                }
            }
        }
    }

    /// Forget the period's per-worker observations (a new period starts).
    fn reset_period(&mut self) {
        for w in self.workers.values_mut() {
            w.longest_wait = None;
            w.min_episode = None;
        }
        self.gone_longest_wait = None;
        self.gone_min_episode = None;
    }

    /// Move the marked workers at the front of the FIFO part into the head part (they are at
    /// the head already), so a new head insertion lands behind them.
    fn absorb_marked_prefix(&mut self) {
        while let Some(w) = self.q.front(TAIL) {
            if !self.marked(w) {
                break;
            }
            self.q.move_to_back(w, HEAD);
        }
    }
}

impl Policy for Pos {
    fn name(&self) -> &str {
        "pos"
    }

    fn on_transition(&mut self, id: WorkerId, from: Option<State>, to: State, ctx: &Ctx) {
        let now = ctx.now;
        let slp = self.slp;
        let Some(w) = self.workers.get_mut(&id) else {
            // New worker (or one POS has not seen): start tracking from here.
            self.workers.insert(id, Worker::new(to, now));
            return;
        };
        let prev = from.unwrap_or(w.state);
        if prev == to {
            return;
        }
        let since = std::mem::replace(&mut w.since, now);
        w.state = to;
        match (prev, to) {
            (State::Wait, _) => {
                // Leaving a wait: a completed wait for SLP prediction.
                let dur = now.saturating_sub(since);
                w.longest_wait = Some(w.longest_wait.map_or(dur, |m| m.max(dur)));
                if dur > slp {
                    // Characteristic 1. The previous episode (if any) ends here.
                    Self::end_episode(w, &mut self.period_episodes);
                    w.in_episode = true;
                    w.counter = 0;
                    w.marked = true;
                    w.episode_start = now;
                } else {
                    self.change(id);
                }
            }
            (_, State::Wait) => self.change(id),
            // Ready -> Run, Run -> Ready (preemption): not a run/wait change.
            _ => {}
        }
    }

    fn on_exit(&mut self, id: WorkerId, _ctx: &Ctx) {
        self.q.remove(id);
        if let Some(mut w) = self.workers.remove(&id) {
            // Leaving for good ends the current service episode.
            Self::end_episode(&mut w, &mut self.period_episodes);
            if let Some(l) = w.longest_wait {
                self.gone_longest_wait = Some(self.gone_longest_wait.map_or(l, |m| m.min(l)));
            }
            if let Some(e) = w.min_episode {
                self.gone_min_episode = Some(self.gone_min_episode.map_or(e, |m| m.max(e)));
            }
        }
    }

    fn enqueue(&mut self, worker: WorkerId, _hints: &Hints, ctx: &Ctx) {
        let bottleneck = ctx.bottleneck(self.q.len() + 1);
        // Outside a bottleneck a marked worker is alone in the queue, so the paper's back is its
        // front; with the episode tail it is still kept at the head level, so that workers of
        // older episodes arriving later do not overtake it, as they could not in FIFO.
        if self.marked(worker) && (bottleneck || self.tail == PosTail::Episode) {
            self.absorb_marked_prefix();
            self.q.push_back(HEAD, worker, ctx.now);
            if bottleneck {
                self.promotions += 1;
            }
        } else {
            self.put_in_tail(worker, ctx.now);
        }
    }

    fn dequeue(&mut self, ctx: &Ctx) -> Option<WorkerId> {
        self.q.dequeue(ctx.now)
    }

    fn remove(&mut self, worker: WorkerId) -> bool {
        self.q.remove(worker)
    }

    fn len(&self) -> usize {
        self.q.len()
    }

    fn order(&self) -> Vec<WorkerId> {
        self.q.order()
    }

    fn tick(&mut self, _ctx: &Ctx) {
        for (len, n) in std::mem::take(&mut self.period_episodes) {
            self.split.add_many(len, n);
        }
        if self.slp_cfg == Tunable::Auto {
            let waits = self
                .workers
                .values()
                .filter_map(|w| w.longest_wait)
                .chain(self.gone_longest_wait);
            if let Some(slp) = slp_paper(waits) {
                self.slp = slp.max(self.slp_floor);
            }
        }
        if self.rw_cfg == Tunable::Auto {
            let next = match self.rw_rule {
                RwRule::Paper => rw_paper(
                    self.workers
                        .values()
                        .filter_map(|w| w.min_episode)
                        .chain(self.gone_min_episode),
                ),
                RwRule::Split => self.split.predict(self.rw),
            };
            if let Some(rw) = next {
                self.set_rw(rw);
            }
        }
        self.reset_period();
        self.split.decay();
    }

    fn take_observations(&mut self) -> Option<Observations> {
        let min_longest_wait = self
            .workers
            .values()
            .filter_map(|w| w.longest_wait)
            .chain(self.gone_longest_wait)
            .min();
        let max_min_episode = self
            .workers
            .values()
            .filter_map(|w| w.min_episode)
            .chain(self.gone_min_episode)
            .max();
        let episodes = std::mem::take(&mut self.period_episodes);
        self.reset_period();
        Some(Observations {
            min_longest_wait,
            max_min_episode,
            episodes,
        })
    }

    fn add_observations(&mut self, other: Observations) {
        let Observations {
            min_longest_wait,
            max_min_episode,
            episodes,
        } = other;
        if let Some(l) = min_longest_wait {
            self.gone_longest_wait = Some(self.gone_longest_wait.map_or(l, |m| m.min(l)));
        }
        if let Some(e) = max_min_episode {
            self.gone_min_episode = Some(self.gone_min_episode.map_or(e, |m| m.max(e)));
        }
        for (len, n) in episodes {
            *self.period_episodes.entry(len).or_default() += n;
        }
    }

    fn apply_predictions(&mut self, slp: Option<Nanos>, rw: Option<u32>, _ctx: &Ctx) {
        if self.slp_cfg == Tunable::Auto {
            if let Some(slp) = slp {
                self.slp = slp.max(self.slp_floor);
            }
        }
        if self.rw_cfg == Tunable::Auto {
            if let Some(rw) = rw {
                self.set_rw(rw);
            }
        }
    }

    fn period(&self) -> Option<Nanos> {
        Some(self.period)
    }

    fn marked(&self, worker: WorkerId) -> bool {
        self.workers.get(&worker).is_some_and(|w| w.marked)
    }

    fn stats(&self) -> PolicyStats {
        PolicyStats {
            promotions: self.promotions,
            demotions: self.demotions,
            starvation_rescues: self.q.rescues(),
            slp: Some(self.slp),
            rw: Some(self.rw),
        }
    }
}

/// Registry entry.
pub const ENTRY: crate::config::Entry = crate::config::Entry {
    name: "pos",
    about: "Program Oriented Schedule: workers that look like text (ready after a long wait, \
            few run/wait changes) go to the head of the queue in a bottleneck",
    build: |cfg| Ok(Box::new(Pos::new(cfg)?)),
};
