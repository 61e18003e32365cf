//! Balancing CPU slots between *lanes*: several [`crate::Sched`]s, one per runtime thread of a
//! mechanism (the server's per-core gate), each with its own slots and policy-ordered ready
//! queue, the way the kernel keeps a run queue per CPU.
//!
//! A worker belongs to one lane ([`place`] chooses which when it is created). Slots are what
//! moves between lanes, never workers (a worker's policy state stays where it is): the total
//! stays the machine's, and a slot follows the queued work.
//! - A lane is **spare** when it has a free slot and an empty queue, **starved** when it has
//!   queued work and no free slot ([`LaneLoad`]).
//! - When a worker of a starved lane is queued, the lane takes a slot from a spare lane
//!   ([`lender`]).
//! - When a burst ends, the lane gives the freed slot to a starved lane instead of keeping it
//!   ([`receiver`]): when its own queue is empty, or when it holds more than its nominal share
//!   and the starved lane less (so a lane that lent its slots gets them back while the
//!   borrower is still busy: no lane starves).
//!
//! So no slot stays idle while work is queued anywhere except between a decision and the move
//! it makes (a mechanism never holds two lanes at once), and every lane's order is its policy's.
//! These are pure functions of the lanes' loads; the gate and the property tests
//! (`tests/balance.rs`) drive them the same way.

/// One lane's load as the balancing rules see it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaneLoad {
    /// Slots the lane holds now (its share, plus what it took, minus what it gave).
    pub slots: usize,
    /// Its share when the mechanism started (slots / lanes): what it gets back when starved.
    pub nominal: usize,
    /// Slots in use.
    pub busy: usize,
    /// Workers in its ready queue.
    pub queued: usize,
    /// Live workers that belong to it (for [`place`]).
    pub workers: usize,
}

impl LaneLoad {
    /// A free slot and nothing queued: a slot it could give.
    pub fn spare(&self) -> bool {
        self.busy < self.slots && self.queued == 0
    }

    /// Queued work and no free slot: a lane that needs one.
    pub fn starved(&self) -> bool {
        self.queued > 0 && self.busy >= self.slots
    }
}

/// The nominal shares of `slots` slots among `lanes` lanes (the first ones get the remainder);
/// every lane gets at least one when `lanes <= slots`.
pub fn shares(slots: usize, lanes: usize) -> Vec<usize> {
    let lanes = lanes.max(1);
    (0..lanes)
        .map(|i| slots / lanes + usize::from(i < slots % lanes))
        .collect()
}

/// How many more live workers than the least loaded lane the current thread's lane may have
/// before a new worker goes elsewhere.
pub const PLACE_SLACK: usize = 4;

/// The lane of a new worker created by a thread of lane `here`: `here` (the worker's task runs
/// there: its lane's state stays in that thread's cache) unless `here` has more than
/// [`PLACE_SLACK`] live workers over the least loaded lane, then the least loaded (the lowest
/// index among equals).
pub fn place(loads: &[LaneLoad], here: usize) -> usize {
    let Some((least, min)) = loads
        .iter()
        .enumerate()
        .map(|(i, l)| (i, l.workers))
        .min_by_key(|&(i, w)| (w, i))
    else {
        return 0;
    };
    match loads.get(here) {
        Some(h) if h.workers <= min + PLACE_SLACK => here,
        _ => least,
    }
}

/// `me` is starved: the spare lane to take a slot from (the one with the most free slots, the
/// lowest index among equals), if any.
pub fn lender(loads: &[LaneLoad], me: usize) -> Option<usize> {
    if !loads.get(me)?.starved() {
        return None;
    }
    loads
        .iter()
        .enumerate()
        .filter(|&(i, l)| i != me && l.spare())
        .max_by_key(|&(i, l)| (l.slots - l.busy, std::cmp::Reverse(i)))
        .map(|(i, _)| i)
}

/// A burst of `me` ended: `loads[me]` counts the slot it freed as free (its worker no longer
/// busy) and its queue not yet served. The starved lane that gets the slot instead of `me`'s
/// own queue, if any:
/// - when `me`'s queue is empty, the starved lane with the longest queue;
/// - when `me` holds more than its nominal share, the starved lane furthest below its own
///   share (then the longest queue), so that lent slots come back.
///
/// Ties go to the lowest index.
pub fn receiver(loads: &[LaneLoad], me: usize) -> Option<usize> {
    let m = loads.get(me)?;
    if m.busy >= m.slots {
        return None;
    }
    let starved = loads
        .iter()
        .enumerate()
        .filter(|&(i, l)| i != me && l.starved());
    if m.queued == 0 {
        return starved
            .max_by_key(|&(i, l)| (l.queued, std::cmp::Reverse(i)))
            .map(|(i, _)| i);
    }
    if m.slots > m.nominal {
        return starved
            .filter(|(_, l)| l.slots < l.nominal)
            .max_by_key(|&(i, l)| (l.nominal - l.slots, l.queued, std::cmp::Reverse(i)))
            .map(|(i, _)| i);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(slots: usize, busy: usize, queued: usize) -> LaneLoad {
        LaneLoad {
            slots,
            nominal: 1,
            busy,
            queued,
            workers: 0,
        }
    }

    #[test]
    fn shares_add_up() {
        assert_eq!(shares(8, 3), vec![3, 3, 2]);
        assert_eq!(shares(4, 4), vec![1, 1, 1, 1]);
        assert_eq!(shares(1, 1), vec![1]);
        assert_eq!(shares(5, 0), vec![5]);
    }

    #[test]
    fn new_workers_stay_on_their_thread_unless_it_is_crowded() {
        let w = |n| LaneLoad {
            workers: n,
            ..Default::default()
        };
        assert_eq!(place(&[w(3), w(0)], 0), 0);
        assert_eq!(place(&[w(5), w(0)], 0), 1);
        assert_eq!(place(&[w(5), w(2), w(2)], 0), 0);
        assert_eq!(place(&[w(7), w(2), w(2)], 0), 1);
        assert_eq!(
            place(&[w(1)], 9),
            0,
            "an unknown lane places on the least loaded"
        );
        assert_eq!(place(&[], 0), 0);
    }

    #[test]
    fn a_starved_lane_borrows_from_a_spare_one() {
        assert_eq!(lender(&[l(1, 1, 2), l(1, 0, 0), l(2, 0, 0)], 0), Some(2));
        assert_eq!(lender(&[l(1, 1, 2), l(1, 1, 0)], 0), None, "no spare lane");
        assert_eq!(
            lender(&[l(1, 0, 1), l(1, 0, 0)], 0),
            None,
            "not starved (a round)"
        );
        assert_eq!(lender(&[l(0, 0, 1), l(2, 1, 0)], 0), Some(1));
    }

    #[test]
    fn a_freed_slot_goes_where_work_waits() {
        // Empty own queue: the longest starved queue gets it.
        assert_eq!(receiver(&[l(1, 0, 0), l(1, 1, 1), l(1, 1, 3)], 0), Some(2));
        // Own queue not empty, own share only: kept.
        assert_eq!(receiver(&[l(1, 0, 2), l(1, 1, 3)], 0), None);
        // Holding a borrowed slot while the lender starves: returned.
        let mut lender = l(0, 0, 1);
        lender.nominal = 1;
        assert_eq!(receiver(&[l(2, 1, 4), lender], 0), Some(1));
        // Nobody starved: kept.
        assert_eq!(receiver(&[l(1, 0, 0), l(1, 0, 0)], 0), None);
        // No free slot: nothing to give.
        assert_eq!(receiver(&[l(1, 1, 0), l(1, 1, 1)], 0), None);
    }
}
