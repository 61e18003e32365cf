//! A multi-CPU host of lanes (one `Sched` per runtime thread, as the server's per-core gate
//! keeps them) driven by random bursts through `policy::balance`, the way the gate drives it:
//! a queued worker of a starved lane borrows a spare lane's slot (`lender`); a burst's end gives
//! its slot to a starved lane (`receiver`), or, when its lane is left spare, lends the free slot.
//! Properties: slots are conserved, no lane is spare while another is starved (the host is
//! work conserving), and every ready worker runs in bounded time (no lane starves, even one
//! that lent all its slots). The same with POS in every lane, whose global learning is checked
//! against one instance seeing everything.

use policy::balance::{lender, receiver, shares, LaneLoad};
use policy::{Grant, Hints, PolicyConfig, Sched, State, WorkerId};
use proptest::prelude::*;

/// The host: lanes, and which lane each worker belongs to (`id % lanes`).
struct Host {
    lanes: Vec<Sched>,
    nominal: Vec<usize>,
    now: u64,
}

impl Host {
    fn new(policy: &str, slots: usize, lanes: usize) -> Host {
        let nominal = shares(slots, lanes);
        let lanes = nominal
            .iter()
            .map(|&n| {
                Sched::new(n, policy::build(policy, &PolicyConfig::default()).unwrap())
                    .with_external_tick()
            })
            .collect();
        Host {
            lanes,
            nominal,
            now: 0,
        }
    }

    fn lane_of(&self, w: WorkerId) -> usize {
        (w % self.lanes.len() as u64) as usize
    }

    fn loads(&self) -> Vec<LaneLoad> {
        self.lanes
            .iter()
            .zip(&self.nominal)
            .map(|(s, &nominal)| LaneLoad {
                slots: s.slots(),
                nominal,
                busy: s.busy(),
                queued: s.queued(),
                workers: 0,
            })
            .collect()
    }

    fn starved(&self) -> bool {
        self.loads().iter().any(LaneLoad::starved)
    }

    /// Move one slot from `from` (it must have a free one) to `to`.
    fn move_slot(&mut self, from: usize, to: usize) {
        assert!(self.lanes[from].take_free_slot());
        let now = self.now;
        self.lanes[to].add_slot(now);
    }

    /// `w` (waiting) becomes ready, as `Gate::poll_acquire` without rounds.
    fn ready(&mut self, w: WorkerId) {
        self.now += 1;
        let li = self.lane_of(w);
        let now = self.now;
        if self.lanes[li].ready(w, now, &Hints::default()) == Grant::Queued {
            if let Some(from) = lender(&self.loads(), li) {
                self.move_slot(from, li);
            }
        }
    }

    /// `w` (running) ends its burst, as `Gate::end_burst`.
    fn end_burst(&mut self, w: WorkerId) {
        self.now += 1;
        let li = self.lane_of(w);
        let now = self.now;
        if self.starved() {
            let mut loads = self.loads();
            loads[li].busy -= 1;
            if let Some(to) = receiver(&loads, li) {
                assert!(self.lanes[li].wait_and_give_slot(w, now));
                self.lanes[to].add_slot(now);
                return;
            }
        }
        self.lanes[li].wait(w, now);
        let spare = self.loads()[li].spare();
        if spare && self.starved() {
            if let Some(to) = receiver(&self.loads(), li) {
                self.move_slot(li, to);
            }
        }
    }

    fn running(&self, workers: u64) -> Vec<WorkerId> {
        (0..workers)
            .filter(|&w| self.lanes[self.lane_of(w)].state(w) == Some(State::Run))
            .collect()
    }

    fn check(&self, slots: usize) {
        let loads = self.loads();
        assert_eq!(loads.iter().map(|l| l.slots).sum::<usize>(), slots);
        assert!(loads.iter().all(|l| l.busy <= l.slots));
        let spare = loads.iter().any(LaneLoad::spare);
        let starved = loads.iter().any(LaneLoad::starved);
        assert!(
            !(spare && starved),
            "a slot idles while work waits: {loads:?}"
        );
    }
}

/// One random step: a worker becomes ready or a running one ends its burst.
#[derive(Debug, Clone)]
enum Step {
    Ready(u64),
    End(u64),
}

fn steps(workers: u64) -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![
            (0..workers).prop_map(Step::Ready),
            (0..workers).prop_map(Step::End),
        ],
        1..300,
    )
}

fn run(policy: &str, slots: usize, lanes: usize, workers: u64, steps: &[Step]) {
    let mut h = Host::new(policy, slots, lanes);
    for w in 0..workers {
        let li = h.lane_of(w);
        h.lanes[li].register(w, 0);
    }
    for s in steps {
        match *s {
            Step::Ready(w) => {
                if h.lanes[h.lane_of(w)].state(w) == Some(State::Wait) {
                    h.ready(w);
                }
            }
            Step::End(w) => {
                if h.lanes[h.lane_of(w)].state(w) == Some(State::Run) {
                    h.end_burst(w);
                }
            }
        }
        h.check(slots);
    }
    // Drain: only bursts end now; every queued worker must run, whatever lane it is in.
    let mut rounds = 0;
    loop {
        let run = h.running(workers);
        if run.is_empty() {
            break;
        }
        for w in run {
            h.end_burst(w);
            h.check(slots);
        }
        rounds += 1;
        assert!(rounds <= workers as usize + 1, "a queue never drains");
    }
    assert!(h.lanes.iter().all(|s| s.queued() == 0 && s.busy() == 0));
}

proptest! {
    #[test]
    fn lanes_conserve_slots_and_serve_everyone(
        lanes in 2usize..5,
        extra in 0usize..4,
        workers in 2u64..24,
        s in steps(24),
    ) {
        let s: Vec<Step> = s
            .into_iter()
            .filter(|x| match x { Step::Ready(w) | Step::End(w) => *w < workers })
            .collect();
        run("fifo", lanes + extra, lanes, workers, &s);
        run("pos", lanes + extra, lanes, workers, &s);
    }
}

#[test]
fn a_lane_that_lent_every_slot_gets_one_back_while_the_other_is_busy() {
    // Two lanes of one slot. Lane 1 idles; lane 0 keeps two workers busy (0 and 2) by taking
    // lane 1's slot. Then lane 1's worker wants to run while lane 0 still has queued work.
    let mut h = Host::new("fifo", 2, 2);
    for w in 0..5 {
        let li = h.lane_of(w);
        h.lanes[li].register(w, 0);
    }
    h.ready(0);
    h.ready(2);
    assert_eq!(h.lanes[0].busy(), 2, "lane 0 borrowed lane 1's slot");
    assert_eq!(h.lanes[1].slots(), 0);
    h.ready(4);
    h.ready(1);
    assert_eq!(h.lanes[1].queued(), 1, "lane 1 waits: no slot anywhere");
    // Lane 0 ends a burst while 4 is queued in it: lane 1 is below its share, it gets the slot.
    h.end_burst(0);
    assert_eq!(h.lanes[1].state(1), Some(State::Run));
    assert_eq!((h.lanes[0].slots(), h.lanes[1].slots()), (1, 1));
    h.check(2);
}

#[test]
fn global_learning_predicts_as_one_instance_would() {
    use policy::pos::Pos;
    use policy::Policy;
    let cfg = PolicyConfig {
        slp: policy::Tunable::Auto,
        rw: policy::Tunable::Auto,
        ..PolicyConfig::default()
    };
    // The same bursts seen by one POS, and split over two lanes by worker id.
    let mut one = Sched::new(2, Box::new(Pos::new(&cfg).unwrap())).with_external_tick();
    let mut lanes: Vec<Sched<Pos>> = (0..2)
        .map(|_| Sched::new(1, Box::new(Pos::new(&cfg).unwrap())).with_external_tick())
        .collect();
    let h = Hints::default();
    // Worker w waits (w + 1) * 10 ms, then runs 1 + w % 3 short bursts, twice.
    let mut t = 0;
    for rep in 0..2u64 {
        for w in 0..6u64 {
            t += (w + 1) * 10_000_000 + rep;
            let l = &mut lanes[(w % 2) as usize];
            for _ in 0..=(w % 3) {
                one.ready(w, t, &h);
                l.ready(w, t, &h);
                t += 1000;
                one.wait(w, t);
                l.wait(w, t);
                t += 1000;
            }
        }
    }
    let obs = lanes[1].policy_mut().take_observations().unwrap();
    lanes[0].policy_mut().add_observations(obs);
    lanes[0].tick_now(t);
    one.tick_now(t);
    let (a, b) = (one.policy().stats(), lanes[0].policy().stats());
    assert_eq!(
        (a.slp, a.rw),
        (b.slp, b.rw),
        "lane 0 predicts from both lanes"
    );
    let c = lanes[0].policy().stats();
    let ctx = policy::Ctx {
        now: t,
        busy: 0,
        slots: 1,
    };
    lanes[1].policy_mut().apply_predictions(c.slp, c.rw, &ctx);
    let d = lanes[1].policy().stats();
    assert_eq!((d.slp, d.rw), (a.slp, a.rw), "and every lane takes it");
    assert_ne!(
        a.slp,
        Some(policy::pos::DEFAULT_SLP),
        "something was learned"
    );
}
