//! POS rules, one scenario each, driven through `Sched` as a mechanism would.

use policy::pos::{Pos, DEFAULT_RW};
use policy::registry::{PosTail, RwRule};
use policy::{build, Grant, Hints, Policy, PolicyConfig, Sched, State, Tunable, WorkerId};

const H: Hints = Hints {
    class: policy::ContentClass::Unknown,
    urgency: None,
    container: 0,
};

fn cfg(slp: Tunable<u64>, rw: Tunable<u32>) -> PolicyConfig {
    PolicyConfig {
        slp,
        rw,
        rw_rule: RwRule::Paper,
        pos_tail: PosTail::Fifo,
        period: 10_000,
        starvation_bound: None,
        slp_floor: 0,
    }
}

fn pos_sched(slots: usize, cfg: &PolicyConfig) -> Sched {
    Sched::new(slots, build("pos", cfg).unwrap())
}

fn register(s: &mut Sched, ws: &[WorkerId], t: u64) {
    for &w in ws {
        s.register(w, t);
    }
}

#[test]
fn marked_worker_goes_to_head_only_in_a_bottleneck_fifo_among_marked() {
    let mut s = pos_sched(1, &cfg(Tunable::Fixed(100), Tunable::Fixed(3)));
    register(&mut s, &[1, 2, 4], 0);
    register(&mut s, &[3], 950);
    assert_eq!(s.ready(1, 1000, &H), Grant::RunNow);
    assert!(s.marked(1));
    // Queue empty: inserting 2 makes one ready worker, no bottleneck -> back (FIFO).
    assert_eq!(s.ready(2, 1000, &H), Grant::Queued);
    assert!(s.marked(2));
    assert_eq!(s.policy().stats().promotions, 0);
    // 3 waited 50 <= SLP: not marked, back.
    s.ready(3, 1000, &H);
    assert!(!s.marked(3));
    assert_eq!(s.policy().order(), vec![2, 3]);
    // 4 is marked and the CPU is a bottleneck: head, behind the marked 2 already at the head.
    s.ready(4, 1000, &H);
    assert_eq!(s.policy().order(), vec![2, 4, 3]);
    assert_eq!(s.policy().stats().promotions, 1);
    // Service follows the order.
    assert_eq!(s.wait(1, 1010), vec![2]);
    assert_eq!(s.wait(2, 1020), vec![4]);
    assert_eq!(s.wait(4, 1030), vec![3]);
}

/// Three workers leave long waits at 1000, 1001 and 1007 (three pages begin) and then stream
/// with short waits. With the paper's tail they take turns by ready time; with the episode
/// tail the one whose episode began first is served first.
fn tail_order(tail: PosTail) -> Vec<WorkerId> {
    let mut c = cfg(Tunable::Fixed(100), Tunable::Fixed(1));
    c.pos_tail = tail;
    let mut s = pos_sched(1, &c);
    register(&mut s, &[1, 2, 3], 0);
    assert_eq!(s.ready(1, 1000, &H), Grant::RunNow);
    assert_eq!(s.ready(2, 1001, &H), Grant::Queued);
    assert_eq!(s.wait(1, 1005), vec![2]); // 1 demoted (RW 1), 2 runs
    s.ready(1, 1006, &H); // short wait: unmarked, tail
    s.ready(3, 1007, &H); // long wait in a bottleneck: head
    assert_eq!(s.policy().order(), vec![3, 1]);
    assert_eq!(s.wait(2, 1008), vec![3]);
    s.ready(2, 1009, &H);
    assert_eq!(s.wait(3, 1010), vec![1]);
    s.ready(3, 1011, &H);
    assert_eq!(s.wait(1, 1012), vec![2]);
    s.ready(1, 1013, &H);
    assert!(!s.marked(1) && !s.marked(2) && !s.marked(3));
    s.policy().order()
}

#[test]
fn the_tail_is_ready_time_fifo_or_episode_order() {
    assert_eq!(tail_order(PosTail::Fifo), vec![3, 1]);
    assert_eq!(tail_order(PosTail::Episode), vec![1, 3]);
}

#[test]
fn a_wait_of_exactly_slp_is_not_long() {
    let mut s = pos_sched(1, &cfg(Tunable::Fixed(100), Tunable::Fixed(3)));
    register(&mut s, &[1, 2], 0);
    s.ready(1, 100, &H);
    assert!(!s.marked(1));
    s.ready(2, 101, &H);
    assert!(s.marked(2));
}

#[test]
fn counter_counts_wait_entries_and_exits_and_restarts_on_a_long_wait() {
    let mut s = pos_sched(1, &cfg(Tunable::Fixed(100), Tunable::Fixed(3)));
    let pos = |s: &Sched| s.policy().stats();
    register(&mut s, &[1], 0);
    s.ready(1, 1000, &H); // long wait: marked, counter 0 (this transition is not counted)
    assert!(s.marked(1));
    s.wait(1, 1010); // run -> wait: 1
    s.ready(1, 1020, &H); // short wait ended: 2
    assert!(s.marked(1));
    s.wait(1, 1030); // 3 = RW: demoted
    assert!(!s.marked(1));
    assert_eq!(pos(&s).demotions, 1);
    s.ready(1, 1040, &H); // 4, still unmarked
    s.wait(1, 1050); // 5
    s.ready(1, 2000, &H); // long wait again: marked, counter restarts
    assert!(s.marked(1));
    assert_eq!(pos(&s).demotions, 1);
}

#[test]
fn counter_values_are_visible() {
    let mut p = Pos::new(&cfg(Tunable::Fixed(100), Tunable::Fixed(30))).unwrap();
    let ctx = |now| policy::Ctx {
        now,
        busy: 0,
        slots: 1,
    };
    p.on_transition(7, None, State::Wait, &ctx(0));
    p.on_transition(7, Some(State::Wait), State::Ready, &ctx(500));
    assert_eq!(p.counter(7), Some(0));
    p.on_transition(7, Some(State::Ready), State::Run, &ctx(500));
    assert_eq!(p.counter(7), Some(0), "ready -> run is not a change");
    p.on_transition(7, Some(State::Run), State::Ready, &ctx(510));
    assert_eq!(p.counter(7), Some(0), "preemption is not a change");
    p.on_transition(7, Some(State::Ready), State::Run, &ctx(520));
    p.on_transition(7, Some(State::Run), State::Wait, &ctx(530));
    assert_eq!(p.counter(7), Some(1));
    p.on_transition(7, Some(State::Wait), State::Ready, &ctx(540));
    assert_eq!(p.counter(7), Some(2));
    p.on_transition(7, Some(State::Ready), State::Wait, &ctx(550));
    assert_eq!(
        p.counter(7),
        Some(3),
        "leaving the queue for a wait is a change"
    );
    p.on_transition(7, Some(State::Wait), State::Ready, &ctx(5000));
    assert_eq!(p.counter(7), Some(0));
}

#[test]
fn reaching_rw_on_leaving_a_wait_sends_the_worker_to_the_back() {
    let mut s = pos_sched(1, &cfg(Tunable::Fixed(100), Tunable::Fixed(2)));
    register(&mut s, &[1, 2, 3], 0);
    s.ready(2, 1000, &H); // runs
    s.ready(1, 1000, &H); // queued (marked, no bottleneck yet)
    assert_eq!(s.wait(2, 1001), vec![1]);
    s.ready(2, 1002, &H); // short wait: 2 ready, queued
    s.wait(1, 1010); // 1: counter 1, 2 runs
    s.ready(3, 1011, &H); // marked, queue empty -> back
    s.ready(1, 1020, &H); // 1: counter 2 = RW -> demoted, back despite the bottleneck
    assert!(!s.marked(1));
    assert_eq!(s.policy().order(), vec![3, 1]);
}

#[test]
fn rw_lowered_at_a_tick_moves_a_marked_worker_out_of_the_head_to_the_back() {
    let c = cfg(Tunable::Fixed(100), Tunable::Auto);
    let mut s = pos_sched(1, &c);
    register(&mut s, &[1, 2, 9], 0);
    assert_eq!(s.policy().stats().rw, Some(DEFAULT_RW));
    // Worker 9 serves one-burst episodes: episode length 1.
    s.ready(9, 1000, &H); // first call: the next tick is due at 11_000
    s.wait(9, 1010);
    s.ready(9, 2000, &H); // long wait ends the episode (1 change)
    s.ready(1, 2000, &H); // queued, marked
    s.ready(2, 2000, &H); // queued, marked
    s.wait(9, 2010); // 1 runs
    s.wait(1, 2020); // 1: counter 1; 2 runs
    s.register(3, 2025);
    s.ready(3, 2029, &H); // short wait: unmarked -> back
    s.ready(1, 2030, &H); // counter 2 < 3: still marked, bottleneck -> head
    assert!(s.marked(1));
    assert_eq!(s.policy().order(), vec![1, 3]);
    let before = s.policy().stats().demotions;
    s.maybe_tick(11_000);
    let st = s.policy().stats();
    assert_eq!(
        st.rw,
        Some(1),
        "greatest of per-worker minimum episode (only 9 has one)"
    );
    assert!(!s.marked(1));
    assert_eq!(s.policy().order(), vec![3, 1]);
    // 9 (waiting, counter 1) loses its mark too; 2 (running, counter 0) keeps it.
    assert!(!s.marked(9));
    assert!(s.marked(2));
    assert_eq!(st.demotions, before + 2);
}

#[test]
fn exit_forgets_the_worker() {
    let mut p = Pos::new(&cfg(Tunable::Auto, Tunable::Auto)).unwrap();
    let ctx = policy::Ctx {
        now: 0,
        busy: 0,
        slots: 1,
    };
    for w in 0..1000 {
        p.on_transition(w, None, State::Wait, &ctx);
    }
    assert_eq!(p.live_workers(), 1000);
    for w in 0..1000 {
        p.on_exit(w, &ctx);
    }
    assert_eq!(p.live_workers(), 0);

    let mut s = Sched::new(1, build("pos", &PolicyConfig::default()).unwrap());
    for round in 0..100u64 {
        let t = round * 10;
        s.ready(round, t, &H);
        s.ready(round + 1_000_000, t, &H);
        s.exit(round, t + 1);
        s.exit(round + 1_000_000, t + 2);
    }
    assert_eq!((s.busy(), s.queued()), (0, 0));
}

#[test]
fn bad_configs_are_rejected_with_the_key() {
    let err = build("pos", &cfg(Tunable::Auto, Tunable::Fixed(0)))
        .err()
        .unwrap();
    assert!(err.to_string().contains("rw"), "{err}");
    let c = PolicyConfig {
        period: 0,
        ..PolicyConfig::default()
    };
    let err = build("pos", &c).err().unwrap();
    assert!(err.to_string().contains("period"), "{err}");
}

#[test]
fn stats_report_parameters() {
    let p = build("pos", &cfg(Tunable::Fixed(123), Tunable::Fixed(4))).unwrap();
    let st = p.stats();
    assert_eq!((st.slp, st.rw), (Some(123), Some(4)));
    assert_eq!(p.period(), Some(10_000));
    let p = build("pos", &PolicyConfig::default()).unwrap();
    assert_eq!(p.stats().slp, Some(policy::pos::DEFAULT_SLP));
    assert_eq!(p.period(), Some(500 * policy::MS));
}
