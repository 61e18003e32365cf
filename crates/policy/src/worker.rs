//! The worker log and the PFS (Program Flow Sequence) of seed 001 §3.1.
//!
//! A *worker* is whatever the mechanism schedules as a unit: a request handler in the server
//! (as an Apache child is a process), a process in the simulator. The log is a sequence of
//! (worker, state, time) entries; the PFS of a worker is the sequence of (state, duration)
//! runs derived from it.

use serde::{Deserialize, Serialize};

use crate::Nanos;

/// Identifies a worker within one mechanism. Ids may be reused after [`crate::Sched::exit`].
pub type WorkerId = u64;

/// The three states of seed 001: running on a CPU slot, waiting (idle, or blocked on socket,
/// disk or pipe), or ready (wants a slot, sits in the ready queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Run,
    Wait,
    Ready,
}

/// One log entry: `worker` entered `state` at time `t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub worker: WorkerId,
    pub state: State,
    pub t: Nanos,
}

/// One run of a PFS: the worker stayed in `state` for `dur` nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    pub state: State,
    pub dur: Nanos,
}

/// Per-worker PFS: (state, duration) runs, built incrementally from log events.
///
/// Consecutive entries in the same state are merged, so a PFS never holds two adjacent spans
/// of one state.
#[derive(Debug, Clone, Default)]
pub struct Pfs {
    spans: std::collections::HashMap<WorkerId, Vec<Span>>,
    open: std::collections::HashMap<WorkerId, (State, Nanos)>,
}

impl Pfs {
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

    /// Workers that have at least one closed span.
    pub fn workers(&self) -> impl Iterator<Item = WorkerId> + '_ {
        self.spans.keys().copied()
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
}
