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
//!   per period, from the same events;
//! - **the episode's CPU budget** ([`KposConfig::budget`]): characteristic 2 counts run/wait
//!   changes, and a task that computes its whole response before it first blocks (an Apache
//!   child compressing an image) shows none until its CPU is spent. With a budget the adapter
//!   also counts the CPU a task has run since POS marked it (its marked episode, from the
//!   same events), and stops holding it raised once that passes the CPU a text episode takes:
//!   learnt ([`EpisodeBudget::Learn`]: every marked episode that ends, by POS's demotion or an
//!   exit, tells its CPU to the same [`ScriptBudget`] as triage's CGI scripts use, and the
//!   budget is the short class's longest while two separated classes show) or fixed. The
//!   check runs at every event of the task and at every [`Kpos::scan`] while it runs;
//!   [`Kpos::next_budget_check`] says when the next one is due. POS's mark itself is left to
//!   POS (characteristic 2 still ends the episode). The budget may be a percentile of the
//!   short class instead of its longest ([`EpisodeBudget::LearnPercentile`]);
//! - **graded levels** ([`KposConfig::grades`]): below the budget a raised task steps down
//!   grade by grade as its episode's CPU grows ([`Action::Grade`]; multi-level feedback);
//! - **the tail's head** ([`KposConfig::tail_head`]): POS's queue is the marked at the head and
//!   the rest in the order their episodes began ([`crate::config::PosTail::Episode`]), but
//!   the kernel shares the CPU among every unraised task, so every page's images finish late
//!   together (or, as characteristic 1 marks the first request of every idle keep-alive
//!   connection, the newest pages' first). With the tail's head the oldest-episode task that
//!   is runnable and not raised as text ([`Pos::episode_start`]) is raised too, one at a time:
//!   only while no task raised as text is runnable ([`TailHead::AfterText`], the head strictly
//!   after the text), or beside them ([`TailHead::WithText`]: where a CPU-bound competitor
//!   takes the share the followed tasks do not hold, a head that yields gives its share to the
//!   competitor rather than to the text). It is lowered when it blocks or when an older one
//!   becomes runnable (and, after the text, when a text task wakes);
//! - **companions** ([`KposConfig::companion_window`]): characteristic 1 marks every task
//!   that wakes after a long wait, and on a server whose browsers keep several connections
//!   alive that is a page's HTML and the first request for an image on each of the other
//!   connections alike. A browser asks for the HTML alone and for the page's objects
//!   together, once the HTML has arrived, on all its connections at once: marks that come
//!   within the window of one another are a page's objects. Such a marked task is not held
//!   raised as text for that episode (POS's mark stands; the tail's head and the floor order
//!   it with the other unraised ones); a mark that comes alone is. The first of a cluster is
//!   raised at its wake and lowered when the second comes.

use crate::config::{PolicyConfig, PolicyError};
use crate::idhash::IdMap;
use crate::pos::Pos;
use crate::queue::{Ctx, Policy};
use crate::script_budget::ScriptBudget;
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
    /// Raise this task (as text: to the lever's full level, also if it is held as the tail's
    /// head now).
    Raise(WorkerId),
    /// Raise this task as the tail's head (the mechanism may hold it below the text's level),
    /// or move a task held as text to that level.
    RaiseHead(WorkerId),
    /// Put this task back.
    Lower(WorkerId),
    /// Hold this task, raised as text, at grade `g` (1 to [`KposConfig::grades`] - 1) of its
    /// marked episode: it has run `g / grades` of the budget ([`KposConfig::grades`]); the
    /// mechanism holds it that far from the text's level toward its floor. A task raised
    /// again ([`Action::Raise`]) starts at grade 0, the text's level.
    Grade(WorkerId, u32),
}

/// How much CPU a raised task may run in one marked episode before it is lowered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpisodeBudget {
    /// No budget: a raised task stays raised until POS demotes it.
    Off,
    /// The text budget learnt from the marked episodes that ended ([`ScriptBudget`]): the
    /// short class's longest.
    Learn,
    /// The same, at this percentile of the short class (1-99) instead of its longest
    /// ([`ScriptBudget::budget_quantile`]): the long episodes are lowered sooner, the slowest
    /// short ones are lowered too.
    LearnPercentile(u8),
    /// A fixed budget (ns of CPU).
    Fixed(Nanos),
}

impl EpisodeBudget {
    /// Parse `off`, `learn`, `learn-p<N>` (N from 1 to 99) or a duration (`300us`, `2ms`).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Self::Off),
            "learn" => Ok(Self::Learn),
            p if p.starts_with("learn-p") => p["learn-p".len()..]
                .parse::<u8>()
                .ok()
                .filter(|n| (1..=99).contains(n))
                .map(Self::LearnPercentile)
                .ok_or_else(|| format!("budget {p:?}: learn-p<N> takes a percentile from 1 to 99")),
            d => units::parse_duration(d)
                .map(|v| Self::Fixed(v.as_nanos() as Nanos))
                .map_err(|e| format!("budget {d:?}: {e} (off, learn, learn-p<N> or a duration)")),
        }
    }
}

/// Whether and when the tail's head is raised (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailHead {
    /// Never.
    Off,
    /// Only while no task raised as text is runnable.
    AfterText,
    /// Whether or not a task raised as text is runnable.
    WithText,
}

impl TailHead {
    /// Parse `off`, `after-text` or `with-text`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Self::Off),
            "after-text" => Ok(Self::AfterText),
            "with-text" => Ok(Self::WithText),
            _ => Err(format!("tail head {s:?}: off, after-text or with-text")),
        }
    }

    /// The name [`TailHead::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::AfterText => "after-text",
            Self::WithText => "with-text",
        }
    }
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
    /// The marked episode's CPU budget (see the module docs).
    pub budget: EpisodeBudget,
    /// Raise the tail's head (see the module docs).
    pub tail_head: TailHead,
    /// Grades of a marked episode below the budget (1: one level, the text's, until the
    /// budget). With `n` > 1 grades and a budget `b`, a raised task that has run `c` of CPU
    /// in its episode is at grade `min(c * n / b, n - 1)` ([`Action::Grade`]): the CPU it has
    /// attained lowers it step by step (multi-level feedback), so that a new episode (a
    /// page's HTML) runs ahead of episodes that already ran part of the budget (images not
    /// yet told apart), not only beside them. Without a budget in force every raised task
    /// is at grade 0.
    pub grades: u32,
    /// Companions (0: off): a task that POS marks at a wake-up after a long wait within this
    /// long of another such mark is not held raised as text for that episode, nor is the
    /// other. A browser asks for a page's objects together, on all its connections at once,
    /// and for the page's HTML alone: the marks that come in a cluster are a page's images,
    /// a lone mark is a page's HTML (see the module docs).
    pub companion_window: Nanos,
}

impl Default for KposConfig {
    fn default() -> Self {
        Self {
            policy: PolicyConfig::default(),
            cpus: 1,
            bottleneck_delay: MS / 4,
            bottleneck_lrq: 1.0,
            always: false,
            budget: EpisodeBudget::Off,
            tail_head: TailHead::Off,
            grades: 1,
            companion_window: 0,
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
    /// When it last got a CPU, while it runs.
    run_since: Option<Nanos>,
    /// CPU it ran in its current marked episode, up to `run_since`.
    episode_cpu: Nanos,
    /// A marked episode is under way (from POS's mark until the mark is lost).
    in_episode: bool,
}

impl Task {
    /// CPU of the current marked episode at `now` (0 outside one).
    fn episode_cpu(&self, now: Nanos) -> Nanos {
        if !self.in_episode {
            return 0;
        }
        self.episode_cpu + self.run_since.map_or(0, |t| now.saturating_sub(t))
    }
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
    /// The marked episode's CPU budget in force (ns; `None`: off, or not learnt yet).
    pub budget: Option<Nanos>,
    /// Raised tasks lowered because their marked episode ran past the budget.
    pub budget_lowers: u64,
    /// Times a task was raised as the tail's head.
    pub tail_head_raises: u64,
    /// Scans that did the work; the others returned at once, nothing being due
    /// ([`Kpos::next_due`]).
    pub full_scans: u64,
    /// Marked episodes found to be companions ([`KposConfig::companion_window`]) and not
    /// held raised as text.
    pub companions: u64,
}

/// See the module docs.
pub struct Kpos {
    cfg: KposConfig,
    pos: Pos,
    tasks: IdMap<WorkerId, Task>,
    /// The tasks raised as text, with their grade ([`KposConfig::grades`]).
    raised: IdMap<WorkerId, u32>,
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
    /// The learnt text budget ([`EpisodeBudget::Learn`]).
    learnt: ScriptBudget,
    budget_lowers: u64,
    /// The tail's head, raised ([`KposConfig::tail_head`]); never in `raised`.
    head: Option<WorkerId>,
    tail_head_raises: u64,
    /// The earliest time at which [`Kpos::scan`] can decide anything without an event: the
    /// period's end, the first SLP crossing of a waiting task, the first budget crossing of a
    /// running raised one. Before it a scan does nothing (see [`Kpos::next_due`]).
    due: Nanos,
    /// Scans that did the work (not skipped as not due).
    full_scans: u64,
    /// The marks at a wake-up after a long wait of the last
    /// [`KposConfig::companion_window`], oldest first.
    recent_marks: std::collections::VecDeque<(Nanos, WorkerId)>,
    /// Tasks whose marked episode is a companion's (see [`KposConfig::companion_window`]).
    companions: IdMap<WorkerId, ()>,
    companion_episodes: u64,
}

impl Kpos {
    /// A classifier starting at `now`.
    pub fn new(cfg: KposConfig, now: Nanos) -> Result<Self, PolicyError> {
        let pos = Pos::new(&cfg.policy)?;
        let learnt = ScriptBudget::new(cfg.policy.period);
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
            learnt,
            budget_lowers: 0,
            head: None,
            tail_head_raises: 0,
            due: now,
            full_scans: 0,
            recent_marks: std::collections::VecDeque::new(),
            companions: IdMap::default(),
            companion_episodes: 0,
        })
    }

    /// When the next [`Kpos::scan`] can decide something that no event brings: the period's
    /// end, the moment a waiting task passes SLP (while the lever is in use), the moment a
    /// running raised task can pass the budget. A mechanism that only wakes for events
    /// wakes up for this; a scan before it returns at once (an event in between may bring
    /// it forward).
    pub fn next_due(&self) -> Nanos {
        self.due
    }

    /// Recompute [`Kpos::next_due`] from every task (after a scan that did the work).
    fn recompute_due(&mut self, now: Nanos) {
        let mut due = self.period_start + self.cfg.policy.period;
        if self.cfg.always || self.load.bottleneck {
            for (w, t) in self.tasks.iter() {
                if t.state == State::Wait && !self.raised.contains_key(w) {
                    if let Some(at) = self.pos.slp_passes_at(*w) {
                        due = due.min(at);
                    }
                }
            }
        }
        if let Some(at) = self.next_budget_check(now) {
            due = due.min(at);
        }
        self.due = due.max(now);
    }

    /// The marked episode's CPU budget in force.
    pub fn budget(&self) -> Option<Nanos> {
        match self.cfg.budget {
            EpisodeBudget::Off => None,
            EpisodeBudget::Learn => self.learnt.budget(),
            EpisodeBudget::LearnPercentile(p) => self.learnt.budget_quantile(f64::from(p) / 100.0),
            EpisodeBudget::Fixed(b) => Some(b),
        }
    }

    /// Whether `w` is in a marked episode that has run past the budget at `now`.
    fn over_budget(&self, w: WorkerId, now: Nanos) -> bool {
        match (self.budget(), self.tasks.get(&w)) {
            (Some(b), Some(t)) => t.episode_cpu(now) > b,
            _ => false,
        }
    }

    /// When the next budget check is due: the earliest time a running raised task can pass
    /// the budget or its next grade's threshold (`None`: no such task). A mechanism that only wakes for events calls
    /// [`Kpos::scan`] then.
    pub fn next_budget_check(&self, now: Nanos) -> Option<Nanos> {
        let b = self.budget()?;
        self.raised
            .keys()
            .filter_map(|w| self.tasks.get(w))
            .filter(|t| t.in_episode && t.run_since.is_some())
            .map(|t| now + self.to_next_step(b, t.episode_cpu(now)))
            .min()
    }

    /// CPU from `cpu` to the next step of an episode under budget `b`: the next grade's
    /// threshold, or the budget itself.
    fn to_next_step(&self, b: Nanos, cpu: Nanos) -> Nanos {
        let n = Nanos::from(self.cfg.grades.max(1));
        if cpu >= b {
            return 0;
        }
        let next = (1..=n).map(|g| b * g / n).find(|&th| th > cpu).unwrap_or(b);
        next - cpu
    }

    /// The grade of raised task `w` at `now` ([`KposConfig::grades`]).
    fn grade_of(&self, w: WorkerId, now: Nanos) -> u32 {
        let n = self.cfg.grades.max(1);
        match (self.budget(), self.tasks.get(&w)) {
            (Some(b), Some(t)) if n > 1 && b > 0 => {
                let g = u128::from(t.episode_cpu(now)) * u128::from(n) / u128::from(b);
                u32::try_from(g).unwrap_or(u32::MAX).min(n - 1)
            }
            _ => 0,
        }
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

    /// Whether the lever should hold `w` raised now: marked and within the budget, or asleep
    /// past SLP (its next wake-up begins a new episode).
    fn wants(&self, w: WorkerId, now: Nanos) -> bool {
        (self.cfg.always || self.load.bottleneck)
            && ((self.pos.marked(w)
                && !self.over_budget(w, now)
                && !self.companions.contains_key(&w))
                || self.pos.waiting_past_slp(w, now))
    }

    fn decide(&mut self, w: WorkerId, now: Nanos, out: &mut Vec<Action>) {
        let want = self.tasks.contains_key(&w) && self.wants(w, now);
        let is = self.raised.contains_key(&w);
        if want && is {
            let g = self.grade_of(w, now);
            if let Some(cur) = self.raised.get_mut(&w) {
                if *cur != g {
                    *cur = g;
                    out.push(if g == 0 {
                        Action::Raise(w)
                    } else {
                        Action::Grade(w, g)
                    });
                }
            }
        } else if want && !is {
            let g = self.grade_of(w, now);
            self.raised.insert(w, g);
            if self.head == Some(w) {
                // Raised already, as the tail's head: now held as text (at the text's level).
                self.head = None;
            } else {
                self.raises += 1;
            }
            out.push(Action::Raise(w));
            if g > 0 {
                out.push(Action::Grade(w, g));
            }
        } else if !want && is {
            self.raised.remove(&w);
            self.lowers += 1;
            if self.pos.marked(w) && self.over_budget(w, now) {
                self.budget_lowers += 1;
            }
            out.push(Action::Lower(w));
        }
    }

    /// Raise the tail's head, or move it, or lower it (see the module docs).
    fn update_head(&mut self, now: Nanos, out: &mut Vec<Action>) {
        if self.cfg.tail_head == TailHead::Off {
            return;
        }
        let runnable = |t: &Task| matches!(t.state, State::Ready | State::Run);
        let text_runs = self.cfg.tail_head == TailHead::AfterText
            && self
                .raised
                .keys()
                .any(|w| self.tasks.get(w).is_some_and(runnable));
        let want = if !(self.cfg.always || self.load.bottleneck) || text_runs {
            None
        } else {
            self.tasks
                .iter()
                .filter(|(w, t)| runnable(t) && !self.raised.contains_key(w))
                .map(|(&w, _)| (self.pos.episode_start(w).unwrap_or(now), w))
                .min()
                .map(|(_, w)| w)
        };
        if want == self.head {
            return;
        }
        if let Some(old) = self.head.take() {
            if self.tasks.contains_key(&old) {
                self.lowers += 1;
                out.push(Action::Lower(old));
            }
        }
        if let Some(h) = want {
            self.head = Some(h);
            if let Some(i) = out.iter().rposition(|a| *a == Action::Lower(h)) {
                // Lowered in this same step (no longer text): it stays raised, as the head.
                out.remove(i);
                self.lowers -= 1;
            } else {
                self.raises += 1;
            }
            out.push(Action::RaiseHead(h));
            self.tail_head_raises += 1;
        }
    }

    /// `w` was marked at `now` after a long wait: with other such marks within the
    /// companion window whose episodes go on, all of them are companions (a page's objects,
    /// asked for together). Returns the others newly found companions (to be lowered).
    fn companions_of(&mut self, w: WorkerId, now: Nanos) -> Vec<WorkerId> {
        let window = self.cfg.companion_window;
        if window == 0 {
            return Vec::new();
        }
        let from = now.saturating_sub(window);
        while self.recent_marks.front().is_some_and(|(t, _)| *t < from) {
            self.recent_marks.pop_front();
        }
        let others: Vec<WorkerId> = self
            .recent_marks
            .iter()
            .map(|&(_, o)| o)
            .filter(|&o| o != w && self.pos.marked(o))
            .collect();
        self.recent_marks.push_back((now, w));
        if others.is_empty() {
            return Vec::new();
        }
        let mut newly = Vec::new();
        for o in others.into_iter().chain(std::iter::once(w)) {
            if self.companions.insert(o, ()).is_none() {
                self.companion_episodes += 1;
                if o != w {
                    newly.push(o);
                }
            }
        }
        newly
    }

    /// A marked episode of `t` ended at `now`: its CPU is one observation of the budget.
    fn end_episode(&mut self, t: &mut Task, now: Nanos) {
        if t.in_episode {
            self.learnt.observe(now, t.episode_cpu(now));
            t.in_episode = false;
            t.episode_cpu = 0;
        }
    }

    /// One transition of task `w` at `now` (times of one task in order); lever decisions
    /// are appended to `out`.
    pub fn event(&mut self, w: WorkerId, input: Input, now: Nanos, out: &mut Vec<Action>) {
        self.scan(now, out);
        self.integrate(now);
        if input == Input::Exit {
            if let Some(mut t) = self.tasks.remove(&w) {
                self.end_episode(&mut t, now);
                self.count(t.state, -1);
                let ctx = self.ctx(now);
                self.pos.on_exit(w, &ctx);
            }
            self.companions.remove(&w);
            if self.raised.remove(&w).is_some() {
                // Nothing to put back on a task that is gone: the mechanism forgets it.
                self.lowers += 1;
            }
            if self.head == Some(w) {
                self.head = None;
            }
            self.update_head(now, out);
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
        let mut t = self.tasks.get(&w).copied().unwrap_or(Task {
            state: to,
            woke: None,
            run_since: None,
            episode_cpu: 0,
            in_episode: false,
        });
        match (input, to) {
            (Input::Wake, _) => t.woke = Some(now),
            (_, State::Run) => {
                // A raised task's delay is the lever's doing (see the module docs).
                if let Some(t0) = t.woke.take().filter(|_| !self.raised.contains_key(&w)) {
                    self.wakes += 1;
                    self.wake_delay_sum += now.saturating_sub(t0) as u128;
                }
            }
            _ => t.woke = None,
        }
        // The CPU of the marked episode: add the run that ends now.
        if let Some(t0) = t.run_since.take() {
            if t.in_episode {
                t.episode_cpu += now.saturating_sub(t0);
            }
        }
        if to == State::Run {
            t.run_since = Some(now);
        }
        t.state = to;
        let was_marked = self.pos.marked(w);
        // Characteristic 1 may mark a task already marked (a long wait within an episode):
        // that too begins a new episode.
        let long_wait = input == Input::Wake && self.pos.waiting_past_slp(w, now);
        let ctx = self.ctx(now);
        self.pos.on_transition(w, prev, to, &ctx);
        let marked = self.pos.marked(w);
        if !was_marked && marked {
            self.marks += 1;
        }
        if (was_marked && !marked) || (marked && long_wait) {
            self.end_episode(&mut t, now);
            self.companions.remove(&w);
        }
        if marked && !t.in_episode {
            t.in_episode = true;
            t.episode_cpu = 0;
        }
        self.tasks.insert(w, t);
        let companions = if marked && long_wait {
            self.companions_of(w, now)
        } else {
            Vec::new()
        };
        self.decide(w, now, out);
        for c in companions {
            self.decide(c, now, out);
        }
        self.update_head(now, out);
        // What this event makes due without another event: its SLP crossing if it now
        // waits, its budget crossing if it runs raised.
        if to == State::Wait {
            if let Some(at) = self.pos.slp_passes_at(w) {
                self.due = self.due.min(at);
            }
        }
        if to == State::Run && self.raised.contains_key(&w) {
            if let (Some(b), Some(t)) = (self.budget(), self.tasks.get(&w)) {
                if t.in_episode {
                    self.due = self.due.min(now + self.to_next_step(b, t.episode_cpu(now)));
                }
            }
        }
    }

    /// Time passes: close the period when due (POS predicts SLP and RW, the load is judged)
    /// and raise the tasks asleep past SLP (call it often: every poll of the tracer).
    pub fn scan(&mut self, now: Nanos, out: &mut Vec<Action>) {
        if now < self.due {
            return;
        }
        self.full_scans += 1;
        if now.saturating_sub(self.period_start) >= self.cfg.policy.period {
            self.close_period(now);
            let ids: Vec<WorkerId> = self.all_ids();
            for w in ids {
                self.decide(w, now, out);
            }
        } else if self.cfg.always || self.load.bottleneck {
            self.scan_raises(now, out);
        }
        self.update_head(now, out);
        self.recompute_due(now);
    }

    /// Between two periods: lower the raised tasks running past the budget, raise the tasks
    /// asleep past SLP.
    fn scan_raises(&mut self, now: Nanos, out: &mut Vec<Action>) {
        // Raised tasks running past the budget, or into their next grade, since their last
        // event.
        if self.budget().is_some() {
            let mut over: Vec<WorkerId> = self
                .raised
                .iter()
                .filter(|(&w, &g)| self.over_budget(w, now) || self.grade_of(w, now) != g)
                .map(|(&w, _)| w)
                .collect();
            over.sort_unstable();
            for w in over {
                self.decide(w, now, out);
            }
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

    /// Whether the adapter holds `w` raised (as text, or as the tail's head).
    pub fn raised(&self, w: WorkerId) -> bool {
        self.raised.contains_key(&w) || self.head == Some(w)
    }

    /// The tail's head, if one is raised ([`KposConfig::tail_head`]).
    pub fn tail_head(&self) -> Option<WorkerId> {
        self.head
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
            raised: self.raised.len() + usize::from(self.head.is_some()),
            load: self.load,
            budget: self.budget(),
            budget_lowers: self.budget_lowers,
            tail_head_raises: self.tail_head_raises,
            full_scans: self.full_scans,
            companions: self.companion_episodes,
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
            budget: EpisodeBudget::Off,
            tail_head: TailHead::Off,
            grades: 1,
            companion_window: 0,
        }
    }

    /// RW 1 (an episode is one burst, as POS marks Apache's children) and a budget.
    fn budget_cfg(budget: EpisodeBudget) -> KposConfig {
        let mut c = cfg(true);
        c.policy.rw = Tunable::Fixed(1);
        c.budget = budget;
        c
    }

    /// POS with `c`: tasks 1..=`tasks` started at 0 and a scan at 20 ms (every one waiting
    /// past SLP); returns the policy and the actions so far.
    fn started(c: KposConfig, tasks: WorkerId) -> (Kpos, Vec<Action>) {
        let mut k = Kpos::new(c, 0).unwrap();
        let mut out = Vec::new();
        for w in 1..=tasks {
            k.event(w, Input::Start, 0, &mut out);
        }
        k.scan(20 * MS, &mut out);
        (k, out)
    }

    /// RW 1, no budget, the tail's head as `head`: [`started`].
    fn tail_started(head: TailHead, tasks: WorkerId) -> (Kpos, Vec<Action>) {
        let mut c = budget_cfg(EpisodeBudget::Off);
        c.tail_head = head;
        started(c, tasks)
    }

    /// One service episode of `w` after a long wait: wakes at `t`, gets the CPU 0.1 ms later,
    /// runs `cpu` (preempted halfway for 2 ms), then blocks. Returns when it blocked.
    fn episode(k: &mut Kpos, w: WorkerId, t: Nanos, cpu: Nanos, out: &mut Vec<Action>) -> Nanos {
        k.event(w, Input::Wake, t, out);
        k.event(w, Input::Run, t + MS / 10, out);
        k.event(w, Input::Preempt, t + MS / 10 + cpu / 2, out);
        k.event(w, Input::Run, t + MS / 10 + cpu / 2 + 2 * MS, out);
        let end = t + MS / 10 + cpu + 2 * MS;
        k.event(w, Input::Sleep, end, out);
        end
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

    /// A page: its HTML's task wakes alone at `t`; 30 ms later its images' tasks wake within
    /// 0.3 ms of one another. Returns the actions of the images' wake-ups.
    fn page_marks(k: &mut Kpos, html: WorkerId, images: &[WorkerId], t: Nanos) -> Vec<Action> {
        let mut out = Vec::new();
        k.event(html, Input::Wake, t, &mut out);
        k.event(html, Input::Run, t + MS / 10, &mut out);
        assert!(
            out.is_empty(),
            "raised before its wake-up, it stays raised: {out:?}"
        );
        for (i, &w) in images.iter().enumerate() {
            k.event(w, Input::Wake, t + 30 * MS + i as Nanos * MS / 10, &mut out);
        }
        out
    }

    #[test]
    fn marks_that_come_together_are_companions_and_a_lone_mark_stays_raised() {
        let mut c = budget_cfg(EpisodeBudget::Off);
        c.companion_window = 2 * MS;
        let (mut k, out) = started(c, 5);
        assert_eq!(
            out.len(),
            5,
            "all five raised while asleep past SLP: {out:?}"
        );
        let out = page_marks(&mut k, 1, &[2, 3, 4], 21 * MS);
        // Task 2 wakes first (raised, as a lone mark so far); task 3 within the window makes
        // both companions: both lowered; task 4 is one too.
        assert_eq!(
            out,
            vec![Action::Lower(3), Action::Lower(2), Action::Lower(4)],
            "{out:?}"
        );
        assert!(k.raised(1), "the page's HTML, a lone mark, stays raised");
        for w in [2, 3, 4] {
            assert!(
                k.marked(w) && !k.raised(w),
                "POS's mark stands, not raised: {w}"
            );
        }
        assert_eq!(k.stats().companions, 3);
        // The HTML's task, alone 40 ms later: raised; the window looks back, not forward.
        let mut out = Vec::new();
        k.event(5, Input::Wake, 91 * MS, &mut out);
        assert!(k.raised(5) && out.is_empty(), "{out:?}");
        // A companion's next long wait begins a new episode: raised before it wakes, and
        // kept raised when it wakes alone.
        k.event(2, Input::Sleep, 92 * MS, &mut out);
        k.scan(200 * MS, &mut out);
        assert!(k.raised(2), "asleep past SLP: raised again {out:?}");
        out.clear();
        k.event(2, Input::Wake, 300 * MS, &mut out);
        assert!(k.raised(2) && out.is_empty(), "a lone mark: {out:?}");
    }

    #[test]
    fn without_the_window_marks_that_come_together_stay_raised() {
        let (mut k, _) = started(budget_cfg(EpisodeBudget::Off), 4);
        let out = page_marks(&mut k, 1, &[2, 3, 4], 21 * MS);
        assert!(out.is_empty(), "{out:?}");
        assert!((1..=4).all(|w| k.raised(w)));
        assert_eq!(k.stats().companions, 0);
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

    #[test]
    fn a_scan_does_the_work_only_when_a_crossing_or_the_period_is_due() {
        let mut k = Kpos::new(cfg(true), 0).unwrap();
        let mut out = Vec::new();
        k.event(1, Input::Start, 0, &mut out);
        k.scan(MS, &mut out);
        let full = k.stats().full_scans;
        assert_eq!(k.next_due(), 10 * MS + 1, "task 1 passes SLP (10 ms) then");
        for t in 2..=10 {
            k.scan(t * MS, &mut out);
        }
        assert_eq!(
            k.stats().full_scans,
            full,
            "nothing due: no scan did the work"
        );
        assert!(out.is_empty());
        k.scan(10 * MS + 1, &mut out);
        assert_eq!(
            out,
            vec![Action::Raise(1)],
            "raised as soon as it passed SLP"
        );
        out.clear();
        // Task 2 starts waiting at 12 ms: an event brings the next crossing forward.
        k.event(2, Input::Start, 12 * MS, &mut out);
        assert_eq!(k.next_due(), 22 * MS + 1);
        k.scan(22 * MS, &mut out);
        assert!(out.is_empty());
        k.scan(22 * MS + 1, &mut out);
        assert_eq!(out, vec![Action::Raise(2)]);
        out.clear();
        // Nothing else waits unraised: the next due time is the period's end.
        let period = k.cfg.policy.period;
        assert_eq!(k.next_due(), period);
        let before = k.stats().full_scans;
        k.scan(period - 1, &mut out);
        assert_eq!(k.stats().full_scans, before);
        k.scan(period, &mut out);
        assert_eq!(
            k.stats().full_scans,
            before + 1,
            "the period closes on time"
        );
        // A raised task that runs with a budget makes its budget crossing due.
        let mut k = Kpos::new(budget_cfg(EpisodeBudget::Fixed(2 * MS)), 0).unwrap();
        k.event(1, Input::Start, 0, &mut out);
        k.scan(20 * MS, &mut out);
        k.event(1, Input::Wake, 30 * MS, &mut out);
        k.event(1, Input::Run, 30 * MS, &mut out);
        assert_eq!(k.next_due(), 32 * MS);
        out.clear();
        k.scan(31 * MS, &mut out);
        k.scan(32 * MS, &mut out);
        assert!(out.is_empty(), "exactly at the budget: not past it");
        k.scan(32 * MS + 1, &mut out);
        assert_eq!(
            out,
            vec![Action::Lower(1)],
            "past the budget, still running"
        );
    }

    #[test]
    fn a_raised_task_running_past_a_fixed_budget_is_lowered_while_it_runs() {
        let (mut k, mut out) = started(budget_cfg(EpisodeBudget::Fixed(2 * MS)), 2);
        assert_eq!(out, vec![Action::Raise(1), Action::Raise(2)]);
        out.clear();
        // Task 1 (text) runs 1.5 ms in its episode: never past the budget, raised throughout
        // until POS demotes it at its first wait (RW 1).
        let t = episode(&mut k, 1, 21 * MS, 3 * MS / 2, &mut out);
        assert_eq!(out, vec![Action::Lower(1)], "lowered by POS at its wait");
        assert_eq!(k.stats().budget_lowers, 0);
        out.clear();
        // Task 2 (an image) wakes and computes without blocking.
        k.event(2, Input::Wake, t, &mut out);
        k.event(2, Input::Run, t + MS / 10, &mut out);
        assert!(k.marked(2) && k.raised(2));
        // Its next check is due when it can have used the budget.
        assert_eq!(k.next_budget_check(t + MS / 10), Some(t + MS / 10 + 2 * MS));
        k.scan(t + MS / 10 + 2 * MS, &mut out);
        assert!(out.is_empty(), "not past the budget yet: {out:?}");
        // 0.1 ms later, still running: lowered, though POS still marks it.
        k.scan(t + MS / 10 + 2 * MS + MS / 10, &mut out);
        assert_eq!(out, vec![Action::Lower(2)]);
        assert!(k.marked(2) && !k.raised(2));
        assert_eq!(k.stats().budget_lowers, 1);
        assert_eq!(k.next_budget_check(t + 5 * MS), None, "nothing raised runs");
        // Preempted and running again: not raised again within the same episode.
        out.clear();
        k.event(2, Input::Preempt, t + 4 * MS, &mut out);
        k.event(2, Input::Run, t + 5 * MS, &mut out);
        assert!(out.is_empty(), "{out:?}");
        // After its wait past SLP the next episode starts raised again (before the wake-up).
        k.event(2, Input::Sleep, t + 6 * MS, &mut out);
        k.scan(t + 20 * MS, &mut out);
        assert!(out.contains(&Action::Raise(2)), "{out:?}");
    }

    #[test]
    fn a_budget_counts_the_cpu_of_the_episode_not_its_wall_time() {
        let mut k = Kpos::new(budget_cfg(EpisodeBudget::Fixed(2 * MS)), 0).unwrap();
        let mut out = Vec::new();
        k.event(1, Input::Start, 0, &mut out);
        k.scan(20 * MS, &mut out);
        out.clear();
        // 1 ms of CPU, then 50 ms ready (the CPU's quota spent), then 0.5 ms: 1.5 ms of CPU
        // over 51.5 ms of wall time.
        k.event(1, Input::Wake, 21 * MS, &mut out);
        k.event(1, Input::Run, 21 * MS, &mut out);
        k.event(1, Input::Preempt, 22 * MS, &mut out);
        k.scan(60 * MS, &mut out);
        k.event(1, Input::Run, 72 * MS, &mut out);
        k.scan(72 * MS + MS / 2, &mut out);
        assert!(out.is_empty(), "{out:?}");
        assert!(k.raised(1));
        // Preempted past the budget: lowered at that event.
        k.event(1, Input::Preempt, 73 * MS + MS / 10, &mut out);
        assert_eq!(out, vec![Action::Lower(1)]);
    }

    #[test]
    fn the_learnt_budget_lowers_long_episodes_once_two_kinds_show() {
        let mut k = Kpos::new(budget_cfg(EpisodeBudget::Learn), 0).unwrap();
        let mut out = Vec::new();
        for w in 1..=5 {
            k.event(w, Input::Start, 0, &mut out);
        }
        assert_eq!(k.stats().budget, None);
        // Text episodes of 1 ms and image episodes of 8 ms, each after a wait past SLP.
        let mut t = 20 * MS;
        for _ in 0..10 {
            for w in 1..=5 {
                let cpu = if w == 1 { MS } else { 8 * MS };
                // Before any budget is known an image episode stays raised to its wait.
                episode(&mut k, w, t, cpu, &mut out);
                t += 12 * MS;
            }
            t += 20 * MS;
            k.scan(t, &mut out);
        }
        assert_eq!(k.stats().budget, Some(MS), "the text episodes' longest");
        out.clear();
        // A text episode is never lowered by the budget; an image one is, while it runs.
        let lowers = k.stats().budget_lowers;
        let t2 = episode(&mut k, 1, t, MS, &mut out);
        assert_eq!(k.stats().budget_lowers, lowers);
        k.scan(t2 + 20 * MS, &mut out);
        out.clear();
        let t3 = t2 + 30 * MS;
        k.event(2, Input::Wake, t3, &mut out);
        k.event(2, Input::Run, t3, &mut out);
        k.scan(t3 + MS + MS / 10, &mut out);
        assert_eq!(out, vec![Action::Lower(2)]);
        assert_eq!(k.stats().budget_lowers, lowers + 1);
        // The image's whole episode (8 ms: POS's own end) is what it learns, not the budget.
        k.event(2, Input::Sleep, t3 + 8 * MS, &mut out);
        assert_eq!(k.stats().budget, Some(MS));
    }

    #[test]
    fn budgets_parse() {
        assert_eq!(EpisodeBudget::parse("off"), Ok(EpisodeBudget::Off));
        assert_eq!(EpisodeBudget::parse("learn"), Ok(EpisodeBudget::Learn));
        assert_eq!(
            EpisodeBudget::parse("300us"),
            Ok(EpisodeBudget::Fixed(300_000))
        );
        assert!(EpisodeBudget::parse("soon").is_err());
        assert_eq!(
            EpisodeBudget::parse("learn-p50"),
            Ok(EpisodeBudget::LearnPercentile(50))
        );
        for bad in ["learn-p0", "learn-p100", "learn-p", "learn-px"] {
            assert!(EpisodeBudget::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn with_grades_a_raised_task_steps_down_as_its_episode_runs_and_is_lowered_past_the_budget() {
        let mut c = budget_cfg(EpisodeBudget::Fixed(4 * MS));
        c.grades = 4;
        let (mut k, mut out) = started(c, 2);
        assert_eq!(out, vec![Action::Raise(1), Action::Raise(2)]);
        out.clear();
        // Task 1 wakes and runs without a break: each quarter of the budget is one grade,
        // due (no event needed) at the moment it is crossed.
        let t = 30 * MS;
        k.event(1, Input::Wake, t, &mut out);
        k.event(1, Input::Run, t, &mut out);
        assert!(out.is_empty(), "grade 0: the text's level");
        for g in 1..4u32 {
            let at = t + Nanos::from(g) * MS;
            assert_eq!(k.next_due(), at, "grade {g} due");
            k.scan(at - 1, &mut out);
            assert!(out.is_empty());
            k.scan(at, &mut out);
            assert_eq!(out, vec![Action::Grade(1, g)]);
            out.clear();
        }
        assert!(k.raised(1));
        // Past the budget: lowered.
        k.scan(t + 4 * MS + MS / 10, &mut out);
        assert_eq!(out, vec![Action::Lower(1)]);
        out.clear();
        // A preemption keeps the grade (CPU, not wall time): task 2 runs 1.5 ms, waits 20 ms
        // runnable, runs again: grade 1 at its second run's event, not before.
        let t = 40 * MS;
        k.event(2, Input::Wake, t, &mut out);
        k.event(2, Input::Run, t, &mut out);
        k.event(2, Input::Preempt, t + 3 * MS / 2, &mut out);
        assert_eq!(out, vec![Action::Grade(2, 1)]);
        out.clear();
        k.scan(t + 20 * MS, &mut out);
        assert!(out.is_empty(), "no CPU while runnable: still grade 1");
        // Its next wake-up after a long wait is a new episode: back to the text's level.
        k.event(2, Input::Sleep, t + 21 * MS, &mut out);
        assert_eq!(out, vec![Action::Lower(2)], "RW 1: demoted at its wait");
        out.clear();
        k.scan(t + 40 * MS, &mut out);
        assert_eq!(out, vec![Action::Raise(2)], "raised again asleep past SLP");
    }

    #[test]
    fn a_percentile_budget_lowers_an_episode_past_the_text_median_not_its_longest() {
        let mut k = Kpos::new(budget_cfg(EpisodeBudget::LearnPercentile(50)), 0).unwrap();
        let mut out = Vec::new();
        for w in 1..=6 {
            k.event(w, Input::Start, 0, &mut out);
        }
        // Text episodes of 0.5 ms (tasks 1, 2) and 1.5 ms (task 3), images of 8 ms.
        let mut t = 20 * MS;
        for _ in 0..10 {
            for w in 1..=6 {
                let cpu = match w {
                    1 | 2 => MS / 2,
                    3 => 3 * MS / 2,
                    _ => 8 * MS,
                };
                episode(&mut k, w, t, cpu, &mut out);
                t += 12 * MS;
            }
            t += 20 * MS;
            k.scan(t, &mut out);
        }
        assert_eq!(k.stats().budget, Some(MS / 2), "the text episodes' median");
        // An episode of 1 ms, within the text episodes' longest, is lowered past 0.5 ms.
        out.clear();
        let lowers = k.stats().budget_lowers;
        k.event(3, Input::Wake, t, &mut out);
        k.event(3, Input::Run, t, &mut out);
        k.scan(t + MS / 2 + MS / 10, &mut out);
        assert_eq!(out, vec![Action::Lower(3)]);
        assert_eq!(k.stats().budget_lowers, lowers + 1);
    }

    #[test]
    fn the_oldest_runnable_episode_is_raised_as_the_tails_head_after_the_text() {
        let (mut k, mut out) = tail_started(TailHead::AfterText, 3);
        out.clear();
        // Task 1's episode begins at 21 ms, task 2's at 22 ms: both marked (raised), both
        // block once (RW 1: demoted, lowered), then serve on, runnable, unraised.
        for (w, t) in [(1, 21 * MS), (2, 22 * MS)] {
            k.event(w, Input::Wake, t, &mut out);
            k.event(w, Input::Run, t, &mut out);
            k.event(w, Input::Sleep, t + MS / 2, &mut out);
        }
        out.clear();
        k.event(2, Input::Wake, 30 * MS, &mut out);
        assert_eq!(
            out,
            vec![Action::RaiseHead(2)],
            "the only runnable one: the head"
        );
        out.clear();
        k.event(1, Input::Wake, 31 * MS, &mut out);
        assert_eq!(
            out,
            vec![Action::Lower(2), Action::RaiseHead(1)],
            "an older episode takes the head"
        );
        assert_eq!(k.tail_head(), Some(1));
        out.clear();
        // Task 3 wakes after a wait past SLP: raised as text before it woke; while it runs
        // the head yields.
        k.event(3, Input::Wake, 40 * MS, &mut out);
        assert_eq!(out, vec![Action::Lower(1)]);
        assert!(k.raised(3) && k.tail_head().is_none());
        out.clear();
        k.event(3, Input::Run, 40 * MS, &mut out);
        k.event(3, Input::Sleep, 41 * MS, &mut out);
        assert_eq!(out, vec![Action::Lower(3), Action::RaiseHead(1)]);
        out.clear();
        // The head blocks: the next oldest runnable takes it.
        k.event(1, Input::Run, 42 * MS, &mut out);
        k.event(1, Input::Sleep, 43 * MS, &mut out);
        assert_eq!(out, vec![Action::Lower(1), Action::RaiseHead(2)]);
        // The head exits: forgotten, nothing runnable left.
        out.clear();
        k.event(2, Input::Exit, 44 * MS, &mut out);
        assert!(out.is_empty(), "{out:?}");
        assert!(k.tail_head().is_none());
        assert_eq!(k.stats().tail_head_raises, 4);
    }

    #[test]
    fn with_the_text_the_tails_head_stays_raised_while_a_text_task_runs() {
        let (mut k, mut out) = tail_started(TailHead::WithText, 2);
        // Task 1 serves on after its marked burst: the head.
        k.event(1, Input::Wake, 21 * MS, &mut out);
        k.event(1, Input::Run, 21 * MS, &mut out);
        k.event(1, Input::Sleep, 22 * MS, &mut out);
        out.clear();
        k.event(1, Input::Wake, 23 * MS, &mut out);
        assert_eq!(out, vec![Action::RaiseHead(1)]);
        out.clear();
        // Task 2 wakes as text (raised before): the head keeps its place beside it.
        k.event(2, Input::Wake, 30 * MS, &mut out);
        k.event(2, Input::Run, 30 * MS, &mut out);
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(k.tail_head(), Some(1));
        assert!(k.raised(2));
        assert_eq!(TailHead::parse("with-text"), Ok(TailHead::WithText));
        assert_eq!(
            TailHead::parse(TailHead::AfterText.name()),
            Ok(TailHead::AfterText)
        );
        assert!(TailHead::parse("yes").is_err());
    }
}
