//! One lane of the gate: a `policy::Sched` (its slots and policy-ordered ready queue) behind
//! its own lock, the wake-up state of its workers, its idle-worker pool, and its load published
//! for the other lanes to read without taking its lock ([`Published`]).
//!
//! Worker ids encode their lane: with `n` lanes, lane `k` creates ids `k + 1`, `k + 1 + n`,
//! `k + 1 + 2n`..., so any thread finds a worker's lane (`(id - 1) % n`) and its index in the
//! lane's tables (`(id - 1) / n`) without a shared map. With one lane the ids are 1, 2, 3...

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Mutex, MutexGuard};
use std::task::Waker;

use policy::balance::LaneLoad;
use policy::{Hints, Sched, WorkerId};

use crate::boost::Boost;
use crate::pool::Pool;

/// A worker's wake-up state.
#[derive(Default)]
pub(crate) struct Wake {
    /// It was given a slot and has not been polled since.
    pub(crate) granted: bool,
    /// Marked when it became ready and its burst has not ended: it holds the kernel boost.
    pub(crate) boosting: bool,
    /// Who to wake when it is granted a slot.
    pub(crate) waker: Option<Waker>,
    /// When its last burst ended (gate clock; 0: never ran).
    pub(crate) last_end: u64,
    /// When its current streak began: the first burst since it last really waited (see
    /// `slots::Streak`).
    pub(crate) streak_start: u64,
    /// Granted a slot after a wake-up queued it, and its task is being polled: it runs without
    /// having acquired. Its next acquisition takes that slot; if the poll ends without one, the
    /// slot is given back.
    pub(crate) woke_running: bool,
    /// The hints of its last acquisition: what a wake-up queues it with (a wake-up comes before
    /// the request is read, so its own hints are not known yet).
    pub(crate) hints: Hints,
}

/// What a lane's lock guards.
pub(crate) struct Inner {
    /// Slots, worker states and the ready queue of this lane.
    pub(crate) sched: Sched,
    /// Per worker of the lane, by its index in the lane.
    pub(crate) wake: Vec<Wake>,
    /// `None` without `--boost` (the boost needs one lane: it raises every runtime thread).
    pub(crate) boost: Option<Boost>,
}

impl Inner {
    /// The wake-up state at index `i`, created on first use.
    pub(crate) fn wake_mut(&mut self, i: usize) -> &mut Wake {
        if self.wake.len() <= i {
            let n = (i + 1).max(self.wake.len() * 2);
            self.wake.resize_with(n, Wake::default);
        }
        &mut self.wake[i]
    }
}

/// A lane's load for the balancing rules, written under the lane's lock after every change and
/// read by other lanes without it. The counts of spare and starved lanes are the gate's
/// ([`Counts`]): a lane that becomes starved then looks for a spare one, and one that becomes
/// spare looks for a starved one, each after publishing (sequentially consistent), so that of
/// two lanes changing at once at least one sees the other.
#[derive(Debug, Default)]
pub(crate) struct Published {
    slots: AtomicUsize,
    busy: AtomicUsize,
    queued: AtomicUsize,
    /// Live (checked-out) workers of the lane.
    pub(crate) workers: AtomicUsize,
    spare: AtomicBool,
    starved: AtomicBool,
}

/// How many lanes are spare and starved now.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    pub(crate) spare: AtomicUsize,
    pub(crate) starved: AtomicUsize,
}

/// One lane. See the module docs. Aligned so that no two lanes share a cache line (each is
/// written by its own thread: its lock, its published load).
#[repr(align(128))]
pub(crate) struct Lane {
    inner: Mutex<Inner>,
    /// Idle workers of this lane, longest idle first.
    pub(crate) pool: Pool,
    /// Its slot share when the gate was made.
    pub(crate) nominal: usize,
    pub(crate) load: Published,
}

impl Lane {
    pub(crate) fn new(sched: Sched, boost: Option<Boost>) -> Self {
        let nominal = sched.slots();
        let lane = Self {
            inner: Mutex::new(Inner {
                sched,
                wake: Vec::new(),
                boost,
            }),
            pool: Pool::new(),
            nominal,
            load: Published::default(),
        };
        lane.load.slots.store(nominal, Relaxed);
        lane
    }

    /// The lane's lock. A panic while holding it cannot leave `Sched` half-updated in a way
    /// that matters more than stopping the server would (and bursts run without it): keep
    /// serving.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forget whether the lane was spare or starved (the gate's counts start again at zero).
    pub(crate) fn forget_flags(&self) {
        self.load.spare.store(false, Relaxed);
        self.load.starved.store(false, Relaxed);
    }

    /// Publish the lane's load after a change (call with its lock held); keeps `counts` in
    /// step, if given (only a balancing gate keeps them). Returns whether the lane is spare and
    /// starved now.
    pub(crate) fn publish(&self, g: &Inner, counts: Option<&Counts>) -> (bool, bool) {
        let (slots, busy, queued) = (g.sched.slots(), g.sched.busy(), g.sched.queued());
        self.load.slots.store(slots, Relaxed);
        self.load.busy.store(busy, Relaxed);
        self.load.queued.store(queued, Relaxed);
        let l = LaneLoad {
            slots,
            busy,
            queued,
            ..LaneLoad::default()
        };
        let (spare, starved) = (l.spare(), l.starved());
        let Some(counts) = counts else {
            return (spare, starved);
        };
        if self.load.spare.load(Relaxed) != spare {
            self.load.spare.store(spare, Relaxed);
            if spare {
                counts.spare.fetch_add(1, SeqCst);
            } else {
                counts.spare.fetch_sub(1, SeqCst);
            }
        }
        if self.load.starved.load(Relaxed) != starved {
            self.load.starved.store(starved, Relaxed);
            if starved {
                counts.starved.fetch_add(1, SeqCst);
            } else {
                counts.starved.fetch_sub(1, SeqCst);
            }
        }
        (spare, starved)
    }

    /// The load as last published.
    pub(crate) fn load(&self) -> LaneLoad {
        LaneLoad {
            slots: self.load.slots.load(Relaxed),
            nominal: self.nominal,
            busy: self.load.busy.load(Relaxed),
            queued: self.load.queued.load(Relaxed),
            workers: self.load.workers.load(Relaxed),
        }
    }
}

/// The lane of worker `id` among `lanes` lanes.
pub(crate) fn lane_of(id: WorkerId, lanes: usize) -> usize {
    (id.saturating_sub(1) % lanes as u64) as usize
}

/// The index of worker `id` in its lane's tables.
pub(crate) fn index_in_lane(id: WorkerId, lanes: usize) -> usize {
    (id.saturating_sub(1) / lanes as u64) as usize
}

/// The id of the worker at index `i` of lane `lane` among `lanes`.
pub(crate) fn worker_id(lane: usize, i: u64, lanes: usize) -> WorkerId {
    i * lanes as u64 + lane as u64 + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_encode_their_lane() {
        for lanes in [1, 2, 3, 8] {
            for lane in 0..lanes {
                for i in 0..20 {
                    let id = worker_id(lane, i, lanes);
                    assert_eq!(lane_of(id, lanes), lane);
                    assert_eq!(index_in_lane(id, lanes), i as usize);
                }
            }
        }
        assert_eq!(worker_id(0, 0, 1), 1, "one lane: ids 1, 2, 3...");
        assert_eq!(worker_id(0, 2, 1), 3);
    }
}
