//! The worker log and the PFS (Program Flow Sequence) of seed 001 §3.1.
//!
//! A *worker* is whatever the mechanism schedules as a unit: a request handler in the server
//! (as an Apache child is a process), a process in the simulator. The log is a sequence of
//! (worker, state, time) entries; the PFS of a worker is the sequence of (state, duration)
//! runs derived from it.

use serde::{Deserialize, Serialize};

use crate::idhash::IdMap;
use crate::Nanos;

/// Identifies a worker within one mechanism. Ids may be reused after [`crate::Sched::exit`].
pub type WorkerId = u64;

/// The three states of seed 001: running on a CPU slot, waiting (idle, or blocked on socket,
/// disk or pipe), or ready (wants a slot, sits in the ready queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Running on a slot.
    Run,
    /// Idle, or blocked on a socket, a disk or a pipe.
    Wait,
    /// Wants a slot: in the ready queue.
    Ready,
}

/// One log entry: `worker` entered `state` at time `t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// The worker.
    pub worker: WorkerId,
    /// The state it entered.
    pub state: State,
    /// When.
    pub t: Nanos,
}

/// One run of a PFS: the worker stayed in `state` for `dur` nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// The state.
    pub state: State,
    /// How long it lasted.
    pub dur: Nanos,
}

/// Per-worker PFS: (state, duration) runs, built incrementally from log events.
///
/// Consecutive entries in the same state are merged, so a PFS never holds two adjacent spans
/// of one state.
#[derive(Debug, Clone, Default)]
pub struct Pfs {
    spans: IdMap<WorkerId, Vec<Span>>,
    open: IdMap<WorkerId, (State, Nanos)>,
}

impl Pfs {
    /// An empty PFS.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed one log event. Events of one worker must come in time order.
    pub fn push(&mut self, ev: Event) {
        if let Some((state, since)) = self.open.insert(ev.worker, (ev.state, ev.t)) {
            if state == ev.state {
                // Same state again: keep the earlier start.
                self.open.insert(ev.worker, (state, since));
                return;
            }
            let dur = ev.t.saturating_sub(since);
            let spans = self.spans.entry(ev.worker).or_default();
            match spans.last_mut() {
                Some(last) if last.state == state => last.dur += dur,
                _ => spans.push(Span { state, dur }),
            }
        }
    }

    /// Build the PFS of a whole log.
    pub fn from_log(log: impl IntoIterator<Item = Event>) -> Self {
        let mut p = Self::new();
        for ev in log {
            p.push(ev);
        }
        p
    }

    /// The closed spans of `worker`, oldest first.
    pub fn spans(&self, worker: WorkerId) -> &[Span] {
        self.spans.get(&worker).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Workers that have at least one closed span, in increasing id order.
    pub fn workers(&self) -> impl Iterator<Item = WorkerId> {
        let mut ids: Vec<WorkerId> = self.spans.keys().copied().collect();
        ids.sort_unstable();
        ids.into_iter()
    }

    /// Drop everything about `worker` (it exited): keeps a long-running PFS bounded by the live
    /// workers.
    pub fn forget(&mut self, worker: WorkerId) {
        self.spans.remove(&worker);
        self.open.remove(&worker);
    }

    /// Lengths of `worker`'s completed service episodes, counted as the `pos` policy counts
    /// them: an episode starts when the worker leaves a wait longer than `slp` and ends when
    /// it next does; its length is the number of run/wait changes in between (each entry into
    /// a wait and each exit from a short wait). The episode before the first long wait is not
    /// one (its start is unknown), and the current one is open until the next long wait ends.
    pub fn episodes(&self, worker: WorkerId, slp: Nanos) -> Vec<u32> {
        let spans = self.spans(worker);
        let mut out = Vec::new();
        let mut counter: Option<u32> = None;
        let mut prev: Option<State> = None;
        for s in spans {
            if s.state == State::Wait {
                if prev.is_some() {
                    counter = counter.map(|c| c + 1); // entering a wait
                }
                // Every closed wait span is a completed wait (a same-state event never closes
                // a span).
                if s.dur > slp {
                    if let Some(c) = counter.filter(|&c| c > 0) {
                        out.push(c);
                    }
                    counter = Some(0);
                } else {
                    counter = counter.map(|c| c + 1); // leaving a short wait
                }
            }
            prev = Some(s.state);
        }
        out
    }

    /// Number of run<->wait changes in `worker`'s PFS (ready spans are transparent).
    pub fn run_wait_changes(&self, worker: WorkerId) -> usize {
        let mut last = None;
        let mut n = 0;
        for s in self.spans(worker) {
            if s.state == State::Ready {
                continue;
            }
            if last.is_some() && last != Some(s.state) {
                n += 1;
            }
            last = Some(s.state);
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(worker: WorkerId, state: State, t: Nanos) -> Event {
        Event { worker, state, t }
    }

    #[test]
    fn pfs_turns_log_into_runs() {
        let p = Pfs::from_log([
            ev(1, State::Wait, 0),
            ev(1, State::Ready, 100),
            ev(1, State::Run, 110),
            ev(1, State::Wait, 150),
            ev(1, State::Wait, 160), // duplicate state is merged
            ev(1, State::Ready, 400),
        ]);
        assert_eq!(
            p.spans(1),
            &[
                Span {
                    state: State::Wait,
                    dur: 100
                },
                Span {
                    state: State::Ready,
                    dur: 10
                },
                Span {
                    state: State::Run,
                    dur: 40
                },
                Span {
                    state: State::Wait,
                    dur: 250
                },
            ]
        );
        assert_eq!(p.run_wait_changes(1), 2);
        assert!(p.spans(2).is_empty());
    }

    #[test]
    fn episodes_between_long_waits() {
        let w = |s, t| ev(1, s, t);
        let mut log = vec![w(State::Wait, 0)];
        // Long wait (1000), then 2 bursts: 3 changes; long wait, 1 burst: 1 change; long wait,
        // 1 burst then an open wait.
        let mut t = 1000;
        for (bursts, gap_after) in [(2, 1000), (1, 1000), (1, 0)] {
            for b in 0..bursts {
                if b > 0 {
                    t += 10;
                }
                log.extend([
                    w(State::Ready, t),
                    w(State::Run, t + 1),
                    w(State::Wait, t + 2),
                ]);
                t += 2;
            }
            t += gap_after;
        }
        let p = Pfs::from_log(log);
        assert_eq!(p.episodes(1, 100), vec![3, 1]);
        // With SLP above every wait there is no episode boundary at all.
        assert!(p.episodes(1, 5000).is_empty());
        let mut p = p;
        p.forget(1);
        assert!(p.spans(1).is_empty());
        assert_eq!(p.workers().count(), 0);
    }
}
