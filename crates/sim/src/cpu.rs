//! CPUs with a ready queue and a time quantum: [`policy::Sched`] driven in virtual time.
//!
//! The simulator drives `Sched` exactly as the server's gate does (`ready` when a worker wants
//! the CPU, `wait` when its burst ends and it blocks, `exit` when it goes away, `maybe_tick` on
//! the policy's period) plus what only a CPU model can do: when a worker has run for a whole
//! quantum, `quantum_expiry` asks the policy whether to let it run on (delayed switch) and
//! otherwise `preempt` puts it back in the ready queue. Preemption happens only at quantum
//! expiry: a worker that becomes ready waits for a free slot (no wake-up preemption).
//!
//! A worker's *burst* is CPU time it needs before it next blocks. The model gives the burst with
//! [`Cpu::ready`]; when it is done, [`Cpu::handle`] returns the worker and the model either
//! blocks it ([`Cpu::block`]), gives it more work without blocking ([`Cpu::extend`]) or ends it
//! ([`Cpu::exit`]).
//!
//! **Interrupts** ([`Cpu::interrupt`]): kernel work done at interrupt level (a packet sent or an
//! ACK received by the network driver, a disk transfer done by programmed I/O) belongs to no
//! worker and is not ordered by the policy. On a uniprocessor it delays whatever runs: the
//! running worker's burst ends that much later; if the slot is idle or held by a background
//! worker (the hog), the CPU is busy with the interrupt until it is done and a worker dispatched
//! meanwhile starts only then. With more than one slot, an idle slot absorbs it (approximate).
//!
//! **Wake-up preemption** ([`Cpu::set_wakeup_preempt`], off by default), 4.4BSD's rule: a burst
//! that begins with a wake-up ([`Cpu::wake`]) runs its first `kernel` nanoseconds in the kernel
//! (the system call that slept completes: not preemptible), the rest in user mode. A worker
//! that wakes while another runs in user mode takes its slot at once if the policy says its
//! priority is better ([`policy::Sched::preempts`]; 4.4BSD `setrunnable` -> `need_resched`);
//! while the runner is still in the kernel, the switch happens when it returns to user mode
//! (4.4BSD's kernel is not preemptive: `need_resched` takes effect in `userret`). The preempted
//! worker goes back to the ready queue through the policy with the rest of its burst.

use policy::{Grant, Hints, Nanos, Sched, WorkerId};

use crate::engine::Engine;
use crate::DetMap;

/// CPU events (wrapped in the model's event type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuEv {
    /// The running burst of `w` ends or its quantum expires (stale if `gen` moved on).
    Slice {
        /// The worker.
        w: WorkerId,
        /// Its slice's generation when the event was scheduled.
        gen: u64,
    },
    /// The policy's periodic tick.
    Tick,
    /// `w` returns to user mode with a switch pending (wake-up preemption); stale if `w`
    /// was dispatched again since (`id`).
    UserRet {
        /// The worker.
        w: WorkerId,
        /// Its dispatch's number when the event was scheduled.
        id: u64,
    },
}

#[derive(Debug, Clone, Copy)]
struct Running {
    /// CPU still needed by the current burst (as of `since`).
    left: Nanos,
    since: Nanos,
    slice_end: Nanos,
    gen: u64,
    /// When its burst's kernel part ends (wake-up preemption): before then it is not
    /// preemptible.
    user_at: Nanos,
    /// A better worker woke while it was in the kernel: switch when it returns to user mode.
    resched: bool,
    /// Number of this dispatch (tells a stale [`CpuEv::UserRet`]).
    id: u64,
}

/// A multi-slot CPU ordered by a policy. See the module docs.
pub struct Cpu {
    sched: Sched,
    quantum: Nanos,
    run: DetMap<WorkerId, Running>,
    /// Burst left of workers that are ready (queued) or preempted.
    pending: DetMap<WorkerId, Nanos>,
    hints: DetMap<WorkerId, Hints>,
    gen: u64,
    busy_ns: u64,
    /// CPU time per worker.
    used: DetMap<WorkerId, u64>,
    preemptions: u64,
    extensions: u64,
    switches: u64,
    last: Option<WorkerId>,
    /// Workers that never run while another worker is ready (see [`Cpu::set_background`]).
    background: Vec<WorkerId>,
    /// The CPU is busy with interrupt work until then (idle slot or background worker).
    irq_until: Nanos,
    /// Interrupt work so far.
    irq_ns: u64,
    /// Interrupt work done while no worker held the slot (counted in [`Cpu::busy_ns`]).
    irq_idle_ns: u64,
    /// Of the interrupt work still pending (`irq_until`), what was counted in `irq_idle_ns`.
    irq_idle_pending: Nanos,
    /// Model 4.4BSD's wake-up preemption (see the module docs).
    wakeup_preempt: bool,
    /// Kernel part of the burst of a woken worker not yet dispatched ([`Cpu::wake`]).
    kernel: DetMap<WorkerId, Nanos>,
    /// Dispatches so far (numbers [`Running::id`]).
    dispatches: u64,
    /// Switches made by wake-up preemption.
    wakeup_preemptions: u64,
}

impl Cpu {
    /// `sched`'s slots are the CPUs; `quantum` is the time slice (at least 1 ns).
    pub fn new(sched: Sched, quantum: Nanos) -> Self {
        Self {
            sched,
            quantum: quantum.max(1),
            run: DetMap::default(),
            pending: DetMap::default(),
            hints: DetMap::default(),
            gen: 0,
            busy_ns: 0,
            used: DetMap::default(),
            preemptions: 0,
            extensions: 0,
            switches: 0,
            last: None,
            background: Vec::new(),
            irq_until: 0,
            irq_ns: 0,
            irq_idle_ns: 0,
            irq_idle_pending: 0,
            wakeup_preempt: false,
            kernel: DetMap::default(),
            dispatches: 0,
            wakeup_preemptions: 0,
        }
    }

    /// Model 4.4BSD's wake-up preemption (see the module docs); off by default.
    pub fn set_wakeup_preempt(&mut self, on: bool) {
        self.wakeup_preempt = on;
    }

    /// Switches made by wake-up preemption so far.
    pub fn wakeup_preemptions(&self) -> u64 {
        self.wakeup_preemptions
    }

    /// The `Sched` the policy under test runs in.
    pub fn sched(&self) -> &Sched {
        &self.sched
    }

    /// CPU time consumed so far (all slots), interrupts included.
    pub fn busy_ns(&self) -> u64 {
        self.busy_ns + self.irq_idle_ns
    }

    /// Interrupt work so far ([`Cpu::interrupt`]).
    pub fn irq_ns(&self) -> u64 {
        self.irq_ns
    }

    /// Whether the CPU is doing work other than a background worker's at `now`: a
    /// non-background worker holds a slot, or interrupt work is in progress.
    pub fn busy_foreground(&self, now: Nanos) -> bool {
        self.irq_until > now || self.run.keys().any(|w| !self.background.contains(w))
    }

    /// Background workers sitting in the ready queue.
    pub fn background_queued(&self) -> usize {
        self.background
            .iter()
            .filter(|w| self.sched.state(**w) == Some(policy::State::Ready))
            .count()
    }

    /// Interrupt-level work of `cost` now (see the module docs).
    pub fn interrupt<E: From<CpuEv>>(&mut self, cost: Nanos, eng: &mut Engine<E>) {
        if cost == 0 {
            return;
        }
        let now = eng.now();
        self.irq_ns += cost;
        let slots = self.sched.slots();
        let victim = if self.run.len() < slots {
            None
        } else {
            // The lowest-numbered running worker (deterministic), unless it is background.
            self.run
                .keys()
                .copied()
                .min()
                .filter(|w| !self.background.contains(w))
        };
        match victim {
            Some(w) => {
                self.gen += 1;
                let gen = self.gen;
                if let Some(r) = self.run.get_mut(&w) {
                    r.left = r.left.saturating_add(cost);
                    r.slice_end = r.slice_end.saturating_add(cost);
                    if r.user_at > now {
                        r.user_at = r.user_at.saturating_add(cost);
                    }
                    r.gen = gen;
                    let at = r.since.saturating_add(r.left).min(r.slice_end).max(now);
                    eng.at(at, CpuEv::Slice { w, gen }.into());
                }
            }
            None => {
                if self.run.len() < slots {
                    self.irq_idle_ns += cost;
                    if !self.run.is_empty() {
                        // An idle slot of a multiprocessor takes it.
                        return;
                    }
                    if self.irq_until <= now {
                        self.irq_idle_pending = 0;
                    }
                    self.irq_idle_pending += cost;
                }
                // Idle, or the background worker loses the time.
                self.irq_until = self.irq_until.max(now).saturating_add(cost);
            }
        }
    }

    /// CPU time `w` consumed so far (completed slices).
    pub fn used_ns(&self, w: WorkerId) -> u64 {
        self.used.get(&w).copied().unwrap_or(0)
    }

    fn charge(&mut self, w: WorkerId, ns: u64) {
        self.busy_ns += ns;
        *self.used.entry(w).or_insert(0) += ns;
    }

    /// Quantum expiries that preempted the worker.
    pub fn preemptions(&self) -> u64 {
        self.preemptions
    }

    /// Quantum expiries the policy turned into an extension.
    pub fn extensions(&self) -> u64 {
        self.extensions
    }

    /// Context switches: a slot given to a worker other than the one that last got a slot
    /// (exact for one slot).
    pub fn switches(&self) -> u64 {
        self.switches
    }

    /// Whether `w` holds a slot.
    pub fn running(&self, w: WorkerId) -> bool {
        self.run.contains_key(&w)
    }

    /// Arm the policy's tick. Call once before the run.
    pub fn start<E: From<CpuEv>>(&mut self, eng: &mut Engine<E>) {
        self.sched.maybe_tick(eng.now());
        if let Some(p) = self.sched.policy().period() {
            eng.after(p, CpuEv::Tick.into());
        }
    }

    /// A new worker, waiting from now.
    pub fn register(&mut self, w: WorkerId, now: Nanos) {
        self.sched.register(w, now);
    }

    /// Make `w` a background worker: when it is given a slot while other workers are ready, it
    /// yields at once (back to the queue through the policy) so they run first. A mechanism
    /// decision for all policies alike: 4.4BSD never runs a CPU-bound process with a saturated
    /// priority while a woken process is ready.
    pub fn set_background(&mut self, w: WorkerId) {
        if !self.background.contains(&w) {
            self.background.push(w);
        }
    }

    /// Facts about `w`'s current request for the policy (content class...).
    pub fn set_hints(&mut self, w: WorkerId, hints: Hints) {
        self.hints.insert(w, hints);
    }

    /// `w` (waiting) wants the CPU for `burst`.
    pub fn ready<E: From<CpuEv>>(&mut self, w: WorkerId, burst: Nanos, eng: &mut Engine<E>) {
        self.wake(w, 0, burst, eng);
    }

    /// `w` wakes from a wait and wants the CPU for `burst`, of which the first `kernel` run in
    /// the kernel (the system call that slept completes). With wake-up preemption it may take
    /// the slot of a worker running in user mode (see the module docs); without, the same as
    /// [`Cpu::ready`].
    pub fn wake<E: From<CpuEv>>(
        &mut self,
        w: WorkerId,
        kernel: Nanos,
        burst: Nanos,
        eng: &mut Engine<E>,
    ) {
        self.pending.insert(w, burst);
        self.kernel.insert(w, kernel.min(burst));
        let hints = self.hints.get(&w).copied().unwrap_or_default();
        if self.sched.ready(w, eng.now(), &hints) == Grant::RunNow {
            self.dispatch(w, eng);
        } else if self.wakeup_preempt {
            self.check_wakeup_preempt(w, eng);
        }
    }

    /// `w` just woke and was queued: the first running (foreground) worker whose priority it
    /// beats is switched out now if it is in user mode, or when it returns to user mode.
    fn check_wakeup_preempt<E: From<CpuEv>>(&mut self, w: WorkerId, eng: &mut Engine<E>) {
        let now = eng.now();
        let mut running: Vec<WorkerId> = self
            .run
            .keys()
            .copied()
            .filter(|r| !self.background.contains(r))
            .collect();
        running.sort_unstable();
        let Some(victim) = running.into_iter().find(|&r| self.sched.preempts(w, r)) else {
            return;
        };
        let Some(r) = self.run.get_mut(&victim) else {
            return;
        };
        if r.user_at <= now {
            self.wakeup_preemptions += 1;
            self.preempt_now(victim, eng);
        } else if !r.resched {
            r.resched = true;
            let (at, id) = (r.user_at, r.id);
            eng.at(at, CpuEv::UserRet { w: victim, id }.into());
        }
    }

    fn dispatch<E: From<CpuEv>>(&mut self, w: WorkerId, eng: &mut Engine<E>) {
        let now = eng.now();
        let mut left = self.pending.remove(&w).unwrap_or(0);
        // Interrupt work in progress runs first: the worker holds the slot but starts after it.
        let delay = if self.background.contains(&w) {
            0
        } else {
            self.irq_until.saturating_sub(now)
        };
        if delay > 0 {
            left = left.saturating_add(delay);
            self.irq_until = now;
            // Charged as this worker's run time from now on: do not count it twice.
            self.irq_idle_ns -= delay.min(self.irq_idle_pending);
            self.irq_idle_pending = 0;
        }
        if self.last.is_some_and(|l| l != w) {
            self.switches += 1;
        }
        self.last = Some(w);
        self.gen += 1;
        self.dispatches += 1;
        let kernel = self.kernel.remove(&w).unwrap_or(0);
        let r = Running {
            left,
            since: now,
            slice_end: now.saturating_add(delay).saturating_add(self.quantum),
            gen: self.gen,
            user_at: now.saturating_add(delay).saturating_add(kernel),
            resched: false,
            id: self.dispatches,
        };
        self.run.insert(w, r);
        eng.at(
            now.saturating_add(left).min(r.slice_end),
            CpuEv::Slice { w, gen: r.gen }.into(),
        );
    }

    fn dispatch_all<E: From<CpuEv>>(&mut self, started: Vec<WorkerId>, eng: &mut Engine<E>) {
        for s in started {
            if self.background.contains(&s) && self.sched.queued() > 0 {
                // Yield once; if the policy hands it the slot again, it runs.
                let hints = self.hints.get(&s).copied().unwrap_or_default();
                let again = self.sched.preempt(s, eng.now(), &hints);
                for a in again {
                    self.dispatch(a, eng);
                }
            } else {
                self.dispatch(s, eng);
            }
        }
    }

    /// Handle a CPU event. Returns the worker whose burst just ended: the caller must then call
    /// [`Cpu::block`], [`Cpu::extend`] or [`Cpu::exit`] for it.
    pub fn handle<E: From<CpuEv>>(&mut self, ev: CpuEv, eng: &mut Engine<E>) -> Option<WorkerId> {
        let now = eng.now();
        match ev {
            CpuEv::Tick => {
                // `poll`: the policy's periodic work, then fill slots it may have held back.
                let started = self.sched.poll(now);
                self.dispatch_all(started, eng);
                if let Some(p) = self.sched.policy().period() {
                    eng.after(p, CpuEv::Tick.into());
                }
                None
            }
            CpuEv::UserRet { w, id } => {
                let r = self.run.get(&w).filter(|r| r.id == id && r.resched)?;
                if r.user_at > now {
                    // Interrupts pushed its return to user mode back.
                    eng.at(r.user_at, CpuEv::UserRet { w, id }.into());
                    return None;
                }
                self.wakeup_preemptions += 1;
                // What it ran so far is charged by `preempt_now`.
                self.preempt_now(w, eng);
                None
            }
            CpuEv::Slice { w, gen } => {
                let r = self.run.get_mut(&w).filter(|r| r.gen == gen)?;
                let ran = now - r.since;
                r.left -= ran.min(r.left);
                r.since = now;
                let done = r.left == 0;
                self.charge(w, ran);
                if done {
                    return Some(w);
                }
                let r = self.run.get_mut(&w)?;
                match self.sched.quantum_expiry(w, now) {
                    Some(extra) if extra > 0 => {
                        self.extensions += 1;
                        self.gen += 1;
                        r.gen = self.gen;
                        r.slice_end = now.saturating_add(extra);
                        let at = now.saturating_add(r.left).min(r.slice_end);
                        eng.at(at, CpuEv::Slice { w, gen: r.gen }.into());
                    }
                    _ => {
                        self.preemptions += 1;
                        let left = r.left;
                        self.run.remove(&w);
                        self.pending.insert(w, left);
                        let hints = self.hints.get(&w).copied().unwrap_or_default();
                        let started = self.sched.preempt(w, now, &hints);
                        self.dispatch_all(started, eng);
                    }
                }
                None
            }
        }
    }

    /// Preempt `w` now if it holds a slot (the mechanism's decision, e.g. a kernel that
    /// preempts a CPU-bound process when a sleeper wakes): it goes back to the ready queue with
    /// what is left of its burst, and the policy picks who runs. Returns whether it was running.
    pub fn preempt_now<E: From<CpuEv>>(&mut self, w: WorkerId, eng: &mut Engine<E>) -> bool {
        let now = eng.now();
        let Some(r) = self.run.remove(&w) else {
            return false;
        };
        let ran = now - r.since;
        self.charge(w, ran);
        self.preemptions += 1;
        self.pending.insert(w, r.left - ran.min(r.left));
        let hints = self.hints.get(&w).copied().unwrap_or_default();
        let started = self.sched.preempt(w, now, &hints);
        self.dispatch_all(started, eng);
        true
    }

    /// `w`, whose burst just ended, goes on running for `more` without blocking (same quantum),
    /// in user mode (preemptible by a wake-up, see the module docs).
    pub fn extend<E: From<CpuEv>>(&mut self, w: WorkerId, more: Nanos, eng: &mut Engine<E>) {
        self.extend_in_kernel(w, 0, more, eng);
    }

    /// As [`Cpu::extend`], the first `kernel` of `more` inside a system call (not preemptible).
    pub fn extend_in_kernel<E: From<CpuEv>>(
        &mut self,
        w: WorkerId,
        kernel: Nanos,
        more: Nanos,
        eng: &mut Engine<E>,
    ) {
        let now = eng.now();
        self.gen += 1;
        let gen = self.gen;
        if let Some(r) = self.run.get_mut(&w) {
            r.left = more;
            r.since = now;
            r.gen = gen;
            eng.at(
                now.saturating_add(more).min(r.slice_end.max(now)),
                CpuEv::Slice { w, gen }.into(),
            );
            r.user_at = now.saturating_add(kernel.min(more));
            if r.resched {
                // A switch is pending: it happens at the next return to user mode.
                let (at, id) = (r.user_at, r.id);
                eng.at(at, CpuEv::UserRet { w, id }.into());
            }
        }
    }

    /// `w`, whose burst just ended, blocks (waits).
    pub fn block<E: From<CpuEv>>(&mut self, w: WorkerId, eng: &mut Engine<E>) {
        self.run.remove(&w);
        let started = self.sched.wait(w, eng.now());
        self.dispatch_all(started, eng);
    }

    /// `w` goes away, whatever its state.
    pub fn exit<E: From<CpuEv>>(&mut self, w: WorkerId, eng: &mut Engine<E>) {
        if let Some(r) = self.run.remove(&w) {
            self.charge(w, eng.now() - r.since);
        }
        self.used.remove(&w);
        self.pending.remove(&w);
        self.kernel.remove(&w);
        self.hints.remove(&w);
        let started = self.sched.exit(w, eng.now());
        self.dispatch_all(started, eng);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::{PolicyConfig, MS, SEC};

    fn cpu(policy: &str, quantum: Nanos) -> Cpu {
        let p = policy::build(policy, &PolicyConfig::default()).unwrap();
        Cpu::new(Sched::new(1, p), quantum)
    }

    /// Run to completion, blocking each worker when its burst ends; returns (worker, end time).
    fn finish(cpu: &mut Cpu, eng: &mut Engine<CpuEv>) -> Vec<(WorkerId, Nanos)> {
        let mut done = Vec::new();
        while let Some((t, ev)) = eng.pop() {
            if ev == CpuEv::Tick && cpu.run.is_empty() && cpu.pending.is_empty() {
                break;
            }
            if let Some(w) = cpu.handle(ev, eng) {
                done.push((w, t));
                cpu.block(w, eng);
            }
        }
        done
    }

    #[test]
    fn fifo_round_robin_with_quantum() {
        let mut c = cpu("fifo", 10 * MS);
        let mut e = Engine::new();
        c.ready(1, 25 * MS, &mut e);
        c.ready(2, 5 * MS, &mut e);
        let done = finish(&mut c, &mut e);
        // 1 runs 0-10, 2 runs 10-15 (done), 1 runs 15-25, 25-30 (done).
        assert_eq!(done, vec![(2, 15 * MS), (1, 30 * MS)]);
        assert_eq!(c.busy_ns(), 30 * MS);
        assert_eq!(c.preemptions(), 2);
    }

    #[test]
    fn background_worker_yields_to_ready_workers() {
        // Without: 1 runs 0-5 ms, 9 a whole quantum 5-105, 2 at 105-110.
        for (background, expect) in [(true, 10 * MS), (false, 110 * MS)] {
            let mut c = cpu("fifo", 100 * MS);
            let mut e = Engine::new();
            if background {
                c.set_background(9);
            }
            c.ready(1, 5 * MS, &mut e);
            c.ready(9, 10 * SEC, &mut e); // FIFO: 9 is ahead of 2
            c.ready(2, 5 * MS, &mut e);
            let mut done2 = None;
            while let Some((t, ev)) = e.pop() {
                if let Some(w) = c.handle(ev, &mut e) {
                    if w == 2 {
                        done2 = Some(t);
                        break;
                    }
                    c.block(w, &mut e);
                }
            }
            assert_eq!(done2, Some(expect), "background {background}");
        }
    }

    #[test]
    fn interrupts_delay_the_running_worker_or_the_next_dispatch() {
        // Running worker: its burst ends that much later.
        let mut c = cpu("fifo", 100 * MS);
        let mut e = Engine::new();
        c.ready(1, 10 * MS, &mut e);
        c.interrupt(3 * MS, &mut e);
        assert_eq!(finish(&mut c, &mut e), vec![(1, 13 * MS)]);
        assert_eq!((c.busy_ns(), c.irq_ns()), (13 * MS, 3 * MS));
        // Idle CPU: a worker woken during the interrupt starts when it is done.
        let mut c = cpu("fifo", 100 * MS);
        let mut e: Engine<CpuEv> = Engine::new();
        c.interrupt(3 * MS, &mut e);
        assert!(c.busy_foreground(0) && !c.busy_foreground(3 * MS));
        c.ready(1, 10 * MS, &mut e);
        assert_eq!(finish(&mut c, &mut e), vec![(1, 13 * MS)]);
        assert_eq!(c.busy_ns(), 13 * MS, "the interrupt is not counted twice");
        // A background worker holding the CPU absorbs it, but a worker preempting it waits.
        let mut c = cpu("fifo", 100 * MS);
        let mut e: Engine<CpuEv> = Engine::new();
        c.set_background(9);
        c.ready(9, 10 * SEC, &mut e);
        c.interrupt(3 * MS, &mut e);
        c.ready(1, 10 * MS, &mut e);
        assert!(c.preempt_now(9, &mut e));
        let mut done1 = None;
        while let Some((t, ev)) = e.pop() {
            if let Some(w) = c.handle(ev, &mut e) {
                if w == 1 {
                    done1 = Some(t);
                    break;
                }
                c.block(w, &mut e);
            }
        }
        assert_eq!(done1, Some(13 * MS));
        // Zero cost: nothing happens.
        let mut c = cpu("fifo", 100 * MS);
        let mut e: Engine<CpuEv> = Engine::new();
        c.interrupt(0, &mut e);
        assert!(!c.busy_foreground(0));
    }

    /// Run events due until `until`, blocking each worker whose burst ends; record ends.
    fn run_until(
        c: &mut Cpu,
        e: &mut Engine<CpuEv>,
        until: Nanos,
        done: &mut Vec<(WorkerId, Nanos)>,
    ) {
        while let Some((t, ev)) = e.pop_until(until) {
            if let Some(w) = c.handle(ev, e) {
                done.push((w, t));
                c.block(w, e);
            }
        }
    }

    #[test]
    fn wakeup_preemption_switches_at_the_return_to_user_mode() {
        // Worker 1 wakes at 0 with 10 ms of CPU, its first 2 ms in the kernel; worker 2 wakes
        // at `at` with 1 ms (all kernel). Timesharing: 2 (kernel priority) beats 1 in user mode.
        let case = |policy: &str, on: bool, at: Nanos| {
            let mut c = cpu(policy, 100 * MS);
            c.set_wakeup_preempt(on);
            let mut e = Engine::new();
            let mut done = Vec::new();
            c.wake(1, 2 * MS, 10 * MS, &mut e);
            run_until(&mut c, &mut e, at, &mut done);
            c.wake(2, MS, MS, &mut e);
            run_until(&mut c, &mut e, SEC / 2, &mut done);
            (done, c.wakeup_preemptions())
        };
        // Off (the default): 2 waits for 1's burst to end.
        assert_eq!(
            case("timeshare", false, 5 * MS),
            (vec![(1, 10 * MS), (2, 11 * MS)], 0)
        );
        // On, 1 in user mode: 2 runs at once.
        assert_eq!(
            case("timeshare", true, 5 * MS),
            (vec![(2, 6 * MS), (1, 11 * MS)], 1)
        );
        // On, 1 still in the kernel: the switch waits for its return to user mode (2 ms).
        assert_eq!(
            case("timeshare", true, MS),
            (vec![(2, 3 * MS), (1, 11 * MS)], 1)
        );
        // A policy without priorities never preempts.
        assert_eq!(
            case("fifo", true, 5 * MS),
            (vec![(1, 10 * MS), (2, 11 * MS)], 0)
        );
    }

    #[test]
    fn extend_keeps_the_slot_and_the_quantum() {
        let mut c = cpu("fifo", 10 * MS);
        let mut e = Engine::new();
        c.ready(1, 4 * MS, &mut e);
        c.ready(2, MS, &mut e);
        let (_, ev) = e.pop().unwrap();
        assert_eq!(c.handle(ev, &mut e), Some(1));
        // 1 keeps going 8 ms more: preempted at its quantum end (10 ms), not at 12 ms.
        c.extend(1, 8 * MS, &mut e);
        let done = finish(&mut c, &mut e);
        assert_eq!(done, vec![(2, 11 * MS), (1, 13 * MS)]);
    }
}
