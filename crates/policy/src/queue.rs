//! The [`Policy`] trait: a ready-queue discipline that may learn from every transition.
//!
//! A policy owns the ready queue. The mechanism (through [`crate::Sched`]) tells it about every
//! state change of every worker, asks it to enqueue a worker that wants a slot, and asks it
//! which worker gets a slot that became free. It never sees a socket, a clock or a thread.

use serde::Serialize;

use crate::predict::Observations;
use crate::worker::{State, WorkerId};
use crate::Nanos;

/// What the mechanism knows when it calls the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ctx {
    /// Current time.
    pub now: Nanos,
    /// Slots in use (workers in [`State::Run`]).
    pub busy: usize,
    /// Total slots.
    pub slots: usize,
}

impl Ctx {
    /// Seed 001's bottleneck: more workers want the CPU than there are slots, and more than
    /// one worker is ready. `queued` is the ready-queue length to judge by (the caller decides
    /// whether it counts a worker being inserted). When the mechanism grants a free slot at once
    /// this is the paper's "every slot busy and more than one ready"; while it collects a
    /// scheduling round ([`crate::Sched::enqueue`]) slots may be free with several workers ready.
    pub fn bottleneck(&self, queued: usize) -> bool {
        self.busy + queued > self.slots && queued > 1
    }
}

/// Coarse content class, known to mechanisms that know what they serve. Only explicit policies
/// (`content`) may use it; POS must not look at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ContentClass {
    /// HTML, CSS, JavaScript, JSON: what a user needs first.
    Text,
    /// Images, media, fonts, archives.
    Media,
    /// Not known (CGI before its headers, proxied responses...).
    #[default]
    Unknown,
}

/// Optional facts about a worker's current request, supplied by the mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hints {
    /// What the request serves, if the mechanism knows.
    pub class: ContentClass,
    /// RFC 9218 urgency `u=0..7` (lower is more urgent) from a `Priority` request header.
    pub urgency: Option<u8>,
    /// Resource container the work is charged to (0 = the root container).
    pub container: u32,
}

/// Counters and current parameters a policy exposes for observability.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PolicyStats {
    /// Workers placed at the head of the queue.
    pub promotions: u64,
    /// Marked workers that lost the mark and were sent to the back.
    pub demotions: u64,
    /// Times the starvation guard served a worker out of policy order.
    pub starvation_rescues: u64,
    /// Current SLP (long-wait threshold), if the policy has one.
    pub slp: Option<Nanos>,
    /// Current RW (run/wait change threshold), if the policy has one.
    pub rw: Option<u32>,
}

/// A ready-queue discipline. Implementations must be deterministic functions of the calls they
/// receive (no clock, no randomness unless seeded through their configuration).
pub trait Policy: Send {
    /// Registry name (`fifo`, `pos`, ...).
    fn name(&self) -> &str;

    /// Every state change of every worker, in time order, before any enqueue it causes.
    /// `from` is `None` for a newly registered worker.
    fn on_transition(&mut self, worker: WorkerId, from: Option<State>, to: State, ctx: &Ctx) {
        let _ = (worker, from, to, ctx);
    }

    /// `worker` is gone for good (after its final transition, see [`crate::Sched::exit`]):
    /// forget any per-worker state so memory stays bounded by the live workers. Its id may be
    /// reused later, starting afresh.
    fn on_exit(&mut self, worker: WorkerId, ctx: &Ctx) {
        let _ = (worker, ctx);
    }

    /// A crowd of workers has exited: give back the memory held for them (the capacity of
    /// per-worker maps and queues grown to the crowd's size). Called rarely, off the request
    /// path; the default keeps everything.
    fn shrink(&mut self) {}

    /// `worker` wants a slot, one is free and the queue is empty: may it run now? Returning
    /// `false` queues it instead (through [`Policy::enqueue`]), e.g. because its container is
    /// over its CPU cap (`share`). Policies that charge work to a container learn here which
    /// container a burst that skips the queue belongs to.
    fn admit(&mut self, worker: WorkerId, hints: &Hints, ctx: &Ctx) -> bool {
        let _ = (worker, hints, ctx);
        true
    }

    /// `worker` wants a slot and none is free: put it in the ready queue.
    fn enqueue(&mut self, worker: WorkerId, hints: &Hints, ctx: &Ctx);

    /// A slot is free: take the worker that gets it out of the queue.
    fn dequeue(&mut self, ctx: &Ctx) -> Option<WorkerId>;

    /// Take `worker` out of the queue without running it (client went away, worker exits).
    /// Returns whether it was queued.
    fn remove(&mut self, worker: WorkerId) -> bool;

    /// Workers in the ready queue.
    fn len(&self) -> usize;

    /// Whether the ready queue is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The queue in service order, head first (for tests and observability; may allocate).
    fn order(&self) -> Vec<WorkerId>;

    /// Periodic call (the mechanism calls it at least every [`Policy::period`]).
    fn tick(&mut self, ctx: &Ctx) {
        let _ = ctx;
    }

    /// How often [`Policy::tick`] should be called, if the policy needs it.
    fn period(&self) -> Option<Nanos> {
        None
    }

    /// A running worker used up its time quantum (mechanisms with preemption: the simulator).
    /// Return `Some(extra)` to let it keep the CPU for `extra` more nanoseconds (delayed switch,
    /// seed 001 §2), `None` to preempt it now.
    fn on_quantum_expiry(&mut self, worker: WorkerId, ctx: &Ctx) -> Option<Nanos> {
        let _ = (worker, ctx);
        None
    }

    /// Whether `worker` currently carries the policy's "serve first" mark (POS: a predicted text
    /// worker). Mechanisms may pass the decision on to the kernel (raise the thread's priority
    /// while a marked worker holds a slot).
    fn marked(&self, worker: WorkerId) -> bool {
        let _ = worker;
        false
    }

    /// Wake-up preemption, for a mechanism that models it (the simulator's 4.4BSD base):
    /// `woken` just left a wait and was queued while `running` holds a slot in user mode.
    /// Whether `woken`'s priority is strictly better than `running`'s, so that the mechanism
    /// switches to it at once (4.4BSD `setrunnable` calls `need_resched` when `p_priority <
    /// curpriority`). The default, for policies without priorities: never.
    fn preempts(&self, woken: WorkerId, running: WorkerId) -> bool {
        let _ = (woken, running);
        false
    }

    /// Whether the policy may serve workers in another order than they became ready. A
    /// mechanism that pays to collect every ready worker before choosing (the server's
    /// scheduling rounds) skips that cost for a policy that never reorders (`fifo`).
    fn reorders(&self) -> bool {
        true
    }

    /// Whether the policy's order depends on the [`Hints`] a worker becomes ready with (the
    /// request's class, urgency or container). A mechanism that makes a worker ready before
    /// its request is read (the server's queueing at the wake-up) can only do so for a policy
    /// that does not: POS learns from run and wait times alone.
    fn reads_hints(&self) -> bool {
        false
    }

    /// Change container `container`'s CPU cap from now on (`None`: no cap), for a mechanism
    /// that shares one budget between the server's work and the container's processes
    /// ([`crate::budget`]). Returns whether the policy has that container (`share`); others
    /// have no containers and ignore it.
    fn set_cap(&mut self, container: u32, cap: Option<f64>) -> bool {
        let _ = (container, cap);
        false
    }

    /// How many times work of `container` (or below it) was held back by a cap so far
    /// (a counter: the budget loop reads its growth over a period to know that the server's
    /// part was too small, whatever CPU that part bought). `None`: the policy has no containers
    /// (`share` has them).
    fn held_back_in(&self, container: u32) -> Option<u64> {
        let _ = container;
        None
    }

    /// Slot time (ns) of the completed bursts of `container` and below it so far: what the
    /// policy's caps are counted in (the budget loop converts its CPU parts into it). `None`:
    /// the policy has no containers.
    fn slot_time_in(&self, container: u32) -> Option<Nanos> {
        let _ = container;
        None
    }

    /// Counters and current parameters.
    fn stats(&self) -> PolicyStats {
        PolicyStats::default()
    }

    /// One lane of several (a per-core gate): hand over what this instance observed during the
    /// period now ending, for one instance to predict from all of them, and forget it. `None`:
    /// the policy learns nothing (the default).
    fn take_observations(&mut self) -> Option<Observations> {
        None
    }

    /// The instance that predicts for every lane: count the other lanes' observations of this
    /// period as its own (its next [`Policy::tick`] predicts from all of them).
    fn add_observations(&mut self, other: Observations) {
        let _ = other;
    }

    /// Every other lane: take the predictions made from every lane's observations (the
    /// predicting instance's [`PolicyStats::slp`] and [`PolicyStats::rw`]).
    fn apply_predictions(&mut self, slp: Option<Nanos>, rw: Option<u32>, ctx: &Ctx) {
        let _ = (slp, rw, ctx);
    }
}
