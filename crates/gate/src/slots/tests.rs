//! The gate's unit tests: queueing, cancellation, the worker log, scheduling rounds, the pool,
//! the kernel boost, and the ignored fast-path measurement.

use super::*;
use policy::{PolicyConfig, State};
use std::sync::{Arc, Mutex};

fn gate(slots: usize) -> Arc<Gate> {
    let p = policy::build("fifo", &PolicyConfig::default()).unwrap();
    Arc::new(Gate::new(Sched::new(slots, p).with_log(), true, None))
}

#[tokio::test]
async fn second_worker_waits_for_the_slot() {
    let g = gate(1);
    let (a, b) = (g.checkout(), g.checkout());
    let pa = g.acquire(a, Hints::default()).await;
    let g2 = g.clone();
    let t = tokio::spawn(async move {
        let p = g2.acquire(b, Hints::default()).await;
        p.worker()
    });
    tokio::task::yield_now().await;
    assert_eq!(g.snapshot().queued, 1);
    assert!(!t.is_finished());
    drop(pa);
    assert_eq!(t.await.unwrap(), b);
    let s = g.snapshot();
    assert_eq!((s.busy, s.queued), (0, 0));
}

#[tokio::test]
async fn dropping_a_queued_acquire_leaves_no_trace() {
    let g = gate(1);
    let (a, b, c) = (g.checkout(), g.checkout(), g.checkout());
    let pa = g.acquire(a, Hints::default()).await;
    {
        let mut fb = Box::pin(g.acquire(b, Hints::default()));
        assert!(futures_util::poll!(fb.as_mut()).is_pending());
        assert_eq!(g.snapshot().queued, 1);
    }
    assert_eq!(g.snapshot().queued, 0);
    // A granted-but-unpolled acquisition releases its slot when dropped.
    let mut fc = Box::pin(g.acquire(c, Hints::default()));
    assert!(futures_util::poll!(fc.as_mut()).is_pending());
    drop(pa);
    assert_eq!(g.snapshot().busy, 1);
    drop(fc);
    assert_eq!(g.snapshot().busy, 0);
}

#[tokio::test]
async fn log_has_run_and_wait_per_burst() {
    let g = gate(2);
    let w = g.checkout();
    for _ in 0..3 {
        drop(g.acquire(w, Hints::default()).await);
    }
    let log = g.drain_log();
    let runs = log.iter().filter(|e| e.state == State::Run).count();
    let waits = log.iter().filter(|e| e.state == State::Wait).count();
    assert_eq!(runs, 3);
    assert_eq!(waits, 4); // registration + one per burst
}

/// Three workers ask for the slot in one runtime tick: S1 and S2 had just run a burst (a
/// short wait: POS demotes them with RW = 1), L had waited longer than SLP. Each holds its
/// permit only synchronously, as the server's bursts do. Returns the order they ran in.
async fn round_order(rounds: bool) -> Vec<WorkerId> {
    let cfg = PolicyConfig {
        slp: policy::Tunable::Fixed(50_000_000),
        rw: policy::Tunable::Fixed(1),
        starvation_bound: None,
        ..PolicyConfig::default()
    };
    let p = policy::build("pos", &cfg).unwrap();
    // S1 and S2 ask again right after their bursts: without this they would continue their
    // streaks (see `a_streak_skips_the_round_until_its_slice_ends`).
    let g = Arc::new(
        Gate::new(Sched::new(1, p), true, None)
            .with_rounds(rounds)
            .with_streak(None),
    );
    let (s1, s2, l) = (g.checkout(), g.checkout(), g.checkout());
    tokio::time::advance(std::time::Duration::from_millis(100)).await;
    for s in [s1, s2] {
        drop(g.acquire(s, Hints::default()).await);
    }
    let ran = Arc::new(Mutex::new(Vec::new()));
    let tasks: Vec<_> = [s1, s2, l]
        .into_iter()
        .map(|w| {
            let (g, ran) = (g.clone(), ran.clone());
            tokio::spawn(async move {
                let p = g.acquire(w, Hints::default()).await;
                ran.lock().unwrap().push(p.worker());
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let s = g.snapshot();
    assert_eq!((s.busy, s.queued), (0, 0), "the gate ends idle");
    let order = ran.lock().unwrap().clone();
    order
}

#[tokio::test(start_paused = true)]
async fn a_round_lets_pos_serve_the_long_waiter_first() {
    // Without rounds the first to ask runs at once and the gate never has a queue.
    assert_eq!(round_order(false).await, vec![1, 2, 3]);
    // With rounds the policy sees all three and serves L (marked) first, then FIFO.
    assert_eq!(round_order(true).await, vec![3, 1, 2]);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_round_opener_hands_the_slot_on() {
    let g = gate(1);
    let (a, b) = (g.checkout(), g.checkout());
    let mut fa = Box::pin(g.acquire(a, Hints::default()));
    assert!(
        futures_util::poll!(fa.as_mut()).is_pending(),
        "a opens a round"
    );
    assert_eq!(g.counters().rounds, 1);
    let mut fb = Box::pin(g.acquire(b, Hints::default()));
    assert!(futures_util::poll!(fb.as_mut()).is_pending(), "b joins it");
    assert_eq!((g.snapshot().busy, g.snapshot().queued), (0, 2));
    drop(fa);
    let s = g.snapshot();
    assert_eq!((s.busy, s.queued), (1, 0), "b got the slot");
    let p = fb.await;
    assert_eq!(p.worker(), b);
    drop(p);
    assert_eq!(g.snapshot().busy, 0);
}

#[test]
fn pool_is_fifo() {
    let g = gate(1);
    g.prefork(3);
    let a = g.checkout();
    assert_eq!(a, 1);
    g.checkin(a);
    assert_eq!(g.checkout(), 2);
    assert_eq!(g.checkout(), 3);
    assert_eq!(g.checkout(), 1);
    assert_eq!(g.checkout(), 4);
}

#[test]
fn marked_reads_the_policys_mark_through_a_burst() {
    let cfg = PolicyConfig {
        slp: policy::Tunable::Fixed(0),
        rw: policy::Tunable::Fixed(1),
        ..PolicyConfig::default()
    };
    let mut cx = Context::from_waker(std::task::Waker::noop());
    for (name, marks) in [("pos", true), ("fifo", false)] {
        let p = policy::build(name, &cfg).unwrap();
        let g = Gate::new(Sched::new(1, p), true, None).with_rounds(false);
        let w = g.checkout();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let mut st = AcquireState::default();
        let Poll::Ready(permit) = g.poll_acquire(&mut st, w, &Hints::default(), &mut cx) else {
            panic!("uncontended acquire queued");
        };
        assert_eq!(g.marked(w), marks, "{name}: ready after a wait > SLP");
        drop(permit);
        // RW 1: the end of the burst is the first run/wait change, which demotes.
        assert!(!g.marked(w), "{name}: demoted at its first change");
    }
}

#[test]
fn boost_raises_a_marked_burst_and_restores_after() {
    let cfg = PolicyConfig {
        slp: policy::Tunable::Fixed(0),
        ..PolicyConfig::default()
    };
    let p = policy::build("pos", &cfg).unwrap();
    let g = Gate::new(Sched::new(1, p), true, Some(Raise::Nice(-5))).with_rounds(false);
    let w = g.checkout();
    std::thread::sleep(std::time::Duration::from_millis(2));
    let tid = os::prio::current_tid();
    let before = os::prio::thread_nice(tid).unwrap();
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut st = AcquireState::default();
    let Poll::Ready(permit) = g.poll_acquire(&mut st, w, &Hints::default(), &mut cx) else {
        panic!("uncontended acquire queued");
    };
    if g.counters().boost_errors > 0 {
        eprintln!("SKIP boost_raises_a_marked_burst_and_restores_after: needs CAP_SYS_NICE");
        return;
    }
    assert!(
        permit.boosted(),
        "a worker ready after a wait > SLP is marked"
    );
    assert_eq!(os::prio::thread_nice(tid).unwrap(), -5);
    drop(permit);
    assert_eq!(os::prio::thread_nice(tid).unwrap(), before);
}

#[test]
fn slice_boost_shortens_a_marked_bursts_slice_and_restores_it() {
    // In a thread of its own: the boost changes the calling thread's scheduling.
    std::thread::spawn(|| {
        let cfg = PolicyConfig {
            slp: policy::Tunable::Fixed(0),
            ..PolicyConfig::default()
        };
        let p = policy::build("pos", &cfg).unwrap();
        let slice = std::time::Duration::from_micros(300);
        let g = Gate::new(Sched::new(1, p), true, Some(Raise::Slice(slice))).with_rounds(false);
        let w = g.checkout();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let tid = os::prio::current_tid();
        let (nice, before) = (
            os::prio::thread_nice(tid).unwrap(),
            os::prio::thread_slice_ns(tid).unwrap(),
        );
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut st = AcquireState::default();
        let Poll::Ready(permit) = g.poll_acquire(&mut st, w, &Hints::default(), &mut cx) else {
            panic!("uncontended acquire queued");
        };
        if g.counters().boost_errors > 0 || before == 0 {
            eprintln!(
                "SKIP slice_boost_shortens_a_marked_bursts_slice_and_restores_it: no custom \
                 slices on this kernel"
            );
            return;
        }
        assert!(
            permit.boosted(),
            "a worker ready after a wait > SLP is marked"
        );
        assert_eq!(os::prio::thread_slice_ns(tid).unwrap(), 300_000);
        assert_eq!(
            os::prio::thread_nice(tid).unwrap(),
            nice,
            "the weight is unchanged"
        );
        drop(permit);
        assert_eq!(os::prio::thread_slice_ns(tid).unwrap(), before);
    })
    .join()
    .unwrap();
}

/// A one-slot POS gate (SLP 50 ms, RW 1, no starvation guard, no rounds) with `raise`: a
/// worker that waited 100 ms is marked, one asking again at once is not.
fn boost_gate(raise: Raise) -> Gate {
    let cfg = PolicyConfig {
        slp: policy::Tunable::Fixed(50_000_000),
        rw: policy::Tunable::Fixed(1),
        starvation_bound: None,
        ..PolicyConfig::default()
    };
    let p = policy::build("pos", &cfg).unwrap();
    Gate::new(Sched::new(1, p), true, Some(raise)).with_rounds(false)
}

#[tokio::test(start_paused = true)]
async fn boost_holds_while_a_marked_worker_waits_behind_an_unmarked_burst() {
    let g = boost_gate(Raise::Nice(-5));
    let (a, l) = (g.checkout(), g.checkout());
    tokio::time::advance(std::time::Duration::from_millis(100)).await;
    let tid = os::prio::current_tid();
    let before = os::prio::thread_nice(tid).unwrap();
    // A ran a burst just now (marked after its long first wait, then demoted: RW = 1).
    drop(g.acquire(a, Hints::default()).await);
    if g.counters().boost_errors > 0 {
        eprintln!("SKIP boost_holds_while_a_marked_worker_waits_behind_an_unmarked_burst: needs CAP_SYS_NICE");
        return;
    }
    assert_eq!(os::prio::thread_nice(tid).unwrap(), before, "restored");
    let pa = g.acquire(a, Hints::default()).await;
    assert!(!pa.boosted(), "a short waiter is not marked");
    assert_eq!(os::prio::thread_nice(tid).unwrap(), before);
    let mut fl = Box::pin(g.acquire(l, Hints::default()));
    assert!(
        futures_util::poll!(fl.as_mut()).is_pending(),
        "the slot is A's"
    );
    assert_eq!(
        os::prio::thread_nice(tid).unwrap(),
        -5,
        "a marked worker waiting raises the thread while A's burst still runs"
    );
    drop(pa);
    let pl = fl.await;
    assert!(pl.boosted());
    assert_eq!(os::prio::thread_nice(tid).unwrap(), -5);
    drop(pl);
    assert_eq!(
        os::prio::thread_nice(tid).unwrap(),
        before,
        "the last holder restores"
    );
}

#[tokio::test(start_paused = true)]
async fn boost_at_rest_lowers_only_unmarked_bursts_and_restores_with_the_gate() {
    let g = boost_gate(Raise::NiceAtRest(-5));
    let a = g.checkout();
    tokio::time::advance(std::time::Duration::from_millis(100)).await;
    let tid = os::prio::current_tid();
    let before = os::prio::thread_nice(tid).unwrap();
    // A waited longer than SLP: marked, its burst runs raised.
    let pa = g.acquire(a, Hints::default()).await;
    if g.counters().boost_errors > 0 {
        eprintln!(
            "SKIP boost_at_rest_lowers_only_unmarked_bursts_and_restores_with_the_gate: needs \
             CAP_SYS_NICE"
        );
        return;
    }
    assert!(pa.boosted(), "a long waiter is marked");
    assert_eq!(os::prio::thread_nice(tid).unwrap(), -5);
    drop(pa);
    assert_eq!(
        os::prio::thread_nice(tid).unwrap(),
        -5,
        "the thread stays raised at rest"
    );
    // Right away again: demoted at its first change (RW 1), not marked: runs lowered.
    let pa = g.acquire(a, Hints::default()).await;
    assert!(!pa.boosted(), "a short waiter is not marked");
    assert_eq!(
        os::prio::thread_nice(tid).unwrap(),
        before,
        "lowered for the burst"
    );
    drop(pa);
    assert_eq!(
        os::prio::thread_nice(tid).unwrap(),
        -5,
        "raised again after it"
    );
    drop(g);
    assert_eq!(
        os::prio::thread_nice(tid).unwrap(),
        before,
        "the gate gives the thread its own nice value back"
    );
}

/// Measurement, not a test of speed: uncontended acquire + release, per policy.
#[test]
#[ignore = "measurement: cargo test -p gate --release --lib -- --ignored --nocapture fast_path"]
fn fast_path_cost() {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    for (name, log, rounds) in [
        ("fifo", false, false),
        ("fifo", false, true),
        ("pos", false, false),
        ("pos", false, true),
        ("pos", true, true),
        ("content", false, true),
    ] {
        {
            let p = policy::build(name, &PolicyConfig::default()).unwrap();
            let mut sched = Sched::new(1, p);
            if log {
                sched = sched.with_log();
            }
            let g = Gate::new(sched, true, None).with_rounds(rounds);
            fast_path_loop(&g, name, log, rounds, &mut cx, "1 lane ");
        }
        {
            // The per-core gate: the same burst in one of two lanes (publishes its load).
            let scheds = (0..2)
                .map(|_| Sched::new(1, policy::build(name, &PolicyConfig::default()).unwrap()))
                .map(|s| if log { s.with_log() } else { s })
                .collect();
            let g = Gate::with_lanes(scheds, true).with_rounds(rounds);
            fast_path_loop(&g, name, log, rounds, &mut cx, "2 lanes");
        }
    }
}

/// `fast_path_cost`'s loop on one gate.
fn fast_path_loop(
    g: &Gate,
    name: &str,
    log: bool,
    rounds: bool,
    cx: &mut Context<'_>,
    lanes: &str,
) {
    let w = g.checkout();
    let n = 1_000_000;
    let t0 = std::time::Instant::now();
    for _ in 0..n {
        let mut st = AcquireState::default();
        // With rounds the first poll opens one and the second ends it.
        let permit = loop {
            if let Poll::Ready(p) = g.poll_acquire(&mut st, w, &Hints::default(), cx) {
                break p;
            }
            assert!(rounds, "uncontended acquire queued");
        };
        drop(permit);
        if log && g.lanes[0].lock().sched.queued() == 0 {
            // Keep the log from growing without bound, as the server's drain does.
            let _ = g.drain_log();
        }
    }
    let ns = t0.elapsed().as_nanos() as f64 / n as f64;
    eprintln!(
        "gate fast path: {lanes} policy {name:<8} log {log:<5} rounds {rounds:<5}: {ns:.0} ns per burst"
    );
}

#[tokio::test]
async fn disabled_gate_touches_nothing() {
    let p = policy::build("fifo", &PolicyConfig::default()).unwrap();
    let g = Gate::new(Sched::new(1, p).with_log(), false, None);
    let w = g.checkout();
    let p1 = g.acquire(w, Hints::default()).await;
    let p2 = g.acquire(w + 1, Hints::default()).await;
    drop((p1, p2));
    assert!(g.drain_log().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_sample_counts_the_bottleneck_as_policy_ctx_judges_it() {
    let g = gate(1);
    let (a, b, c) = (g.checkout(), g.checkout(), g.checkout());
    // A round collecting two workers: the slot is still free, but two want it.
    let mut fa = Box::pin(g.acquire(a, Hints::default()));
    let mut fb = Box::pin(g.acquire(b, Hints::default()));
    assert!(futures_util::poll!(fa.as_mut()).is_pending());
    assert!(futures_util::poll!(fb.as_mut()).is_pending());
    g.sample();
    assert_eq!(g.samples().bottleneck(), 1, "busy 0 + 2 ready > 1 slot");
    // a runs, b waits: one ready worker is no bottleneck.
    let pa = fa.await;
    g.sample();
    assert_eq!(g.samples().bottleneck(), 1);
    // a runs, b and c wait.
    let mut fc = Box::pin(g.acquire(c, Hints::default()));
    assert!(futures_util::poll!(fc.as_mut()).is_pending());
    g.sample();
    assert_eq!(g.samples().bottleneck(), 2);
    assert_eq!(g.samples().count(), 3);
    assert_eq!(g.samples().sum_busy(), 2);
    assert_eq!(g.samples().sum_queued(), 2 + 1 + 2);
    let last = *g.samples().recent().last().unwrap();
    assert_eq!((last.busy, last.queued), (1, 2));
    drop(pa);
    drop((fb, fc));
    assert_eq!(g.snapshot().busy, 0);
}

/// A gate of `lanes` lanes of one slot each, every lane its own `policy` instance.
fn lanes_gate(policy: &str, lanes: usize) -> Arc<Gate> {
    let scheds = (0..lanes)
        .map(|_| Sched::new(1, policy::build(policy, &PolicyConfig::default()).unwrap()))
        .collect();
    Arc::new(Gate::with_lanes(scheds, true).with_rounds(false))
}

/// Run `f` on a thread of its own (a runtime thread of its own lane, for `checkout`).
fn on_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(f).join().unwrap()
}

#[test]
fn workers_stay_in_their_lane_and_slots_follow_the_queue() {
    let g = lanes_gate("fifo", 2);
    assert_eq!((g.lanes(), g.slots()), (2, 2));
    // Three workers created by one thread: its lane, until it is crowded.
    let (a, b, c) = (g.checkout(), g.checkout(), g.checkout());
    let la = crate::lane::lane_of(a, 2);
    assert!([b, c].iter().all(|&w| crate::lane::lane_of(w, 2) == la));
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let (mut sa, mut sb, mut sc) = Default::default();
    let h = Hints::default();
    let Poll::Ready(pa) = g.poll_acquire(&mut sa, a, &h, &mut cx) else {
        panic!("a free slot")
    };
    // b's lane has no free slot: it borrows the other lane's.
    assert!(g.poll_acquire(&mut sb, b, &h, &mut cx).is_pending());
    let Poll::Ready(pb) = g.poll_acquire(&mut sb, b, &h, &mut cx) else {
        panic!("b runs on the borrowed slot")
    };
    assert_eq!(g.counters().slot_moves, 1);
    assert!(
        g.poll_acquire(&mut sc, c, &h, &mut cx).is_pending(),
        "no slot left"
    );
    assert_eq!((g.snapshot().busy, g.snapshot().queued), (2, 1));
    drop(pa);
    let Poll::Ready(pc) = g.poll_acquire(&mut sc, c, &h, &mut cx) else {
        panic!("c got a's slot")
    };
    drop((pb, pc));
    let s = g.snapshot();
    assert_eq!((s.slots, s.busy, s.queued), (2, 0, 0));
}

#[test]
fn without_balance_a_lane_keeps_its_slots_and_waits() {
    let scheds = (0..2)
        .map(|_| Sched::new(1, policy::build("fifo", &PolicyConfig::default()).unwrap()))
        .collect();
    let g = Gate::with_lanes(scheds, true)
        .with_rounds(false)
        .with_balance(false);
    assert!(!g.balances());
    let (a, b) = (g.checkout(), g.checkout());
    assert_eq!(crate::lane::lane_of(a, 2), crate::lane::lane_of(b, 2));
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let (mut sa, mut sb) = Default::default();
    let h = Hints::default();
    let Poll::Ready(pa) = g.poll_acquire(&mut sa, a, &h, &mut cx) else {
        panic!("a free slot")
    };
    // The other lane's slot is free, but b waits for its own lane's.
    assert!(g.poll_acquire(&mut sb, b, &h, &mut cx).is_pending());
    assert!(g.poll_acquire(&mut sb, b, &h, &mut cx).is_pending());
    assert_eq!(g.counters().slot_moves, 0);
    drop(pa);
    let Poll::Ready(pb) = g.poll_acquire(&mut sb, b, &h, &mut cx) else {
        panic!("b got a's slot")
    };
    drop(pb);
    assert_eq!(g.counters().slot_moves, 0);
    let s = g.snapshot();
    assert_eq!((s.slots, s.busy, s.queued), (2, 0, 0));
}

#[test]
fn without_balance_every_connection_stays_in_its_threads_lane() {
    let both = |balance: bool| {
        let scheds = (0..2)
            .map(|_| Sched::new(1, policy::build("fifo", &PolicyConfig::default()).unwrap()))
            .collect();
        let g = Arc::new(
            Gate::with_lanes(scheds, true)
                .with_rounds(false)
                .with_balance(balance),
        );
        // One serving thread (home 1) opens far more connections than PLACE_SLACK.
        on_thread(move || {
            crate::shard::set_home(1);
            (0..3 * policy::balance::PLACE_SLACK)
                .map(|_| crate::lane::lane_of(g.checkout(), 2))
                .collect::<Vec<_>>()
        })
    };
    assert!(
        both(false).iter().all(|&l| l == 1),
        "a crowded lane keeps its own thread's connections without balancing"
    );
    assert!(
        both(true).contains(&0),
        "with balancing a crowded lane sends new workers elsewhere"
    );
}

#[test]
fn a_new_thread_places_its_workers_in_another_lane() {
    let g = lanes_gate("fifo", 2);
    let g2 = g.clone();
    let here = g.checkout();
    let there = on_thread(move || g2.checkout());
    // Thread numbers are process-wide: two threads in a row land in different lanes.
    let (l1, l2) = (
        crate::lane::lane_of(here, 2),
        crate::lane::lane_of(there, 2),
    );
    let g3 = g.clone();
    let third = on_thread(move || g3.checkout());
    let l3 = crate::lane::lane_of(third, 2);
    assert!(
        l1 != l2 || l2 != l3,
        "three threads, two lanes: not all in one"
    );
    assert_eq!(g.workers(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_burst_takes_neither_its_slot_nor_its_lane() {
    for lanes in [1, 2] {
        let g = if lanes == 1 {
            gate(1)
        } else {
            lanes_gate("pos", 2)
        };
        let w = g.checkout();
        let g2 = g.clone();
        let r = tokio::spawn(async move {
            let _permit = g2.acquire(w, Hints::default()).await;
            panic!("a burst fails");
        })
        .await;
        assert!(r.unwrap_err().is_panic());
        let s = g.snapshot();
        assert_eq!(
            (s.busy, s.queued),
            (0, 0),
            "{lanes} lane(s): the slot came back"
        );
        // The same worker and others keep being served, in every lane.
        for _ in 0..3 {
            drop(g.acquire(w, Hints::default()).await);
            let v = g.checkout();
            drop(g.acquire(v, Hints::default()).await);
        }
        assert_eq!(g.snapshot().busy, 0);
        assert!(g.counters().bursts >= 7);
    }
}

#[test]
fn lanes_learn_together() {
    let cfg = PolicyConfig {
        slp: policy::Tunable::Auto,
        ..PolicyConfig::default()
    };
    let scheds = (0..2)
        .map(|_| Sched::new(1, policy::build("pos", &cfg).unwrap()))
        .collect();
    let g = Gate::with_lanes(scheds, true).with_rounds(false);
    let mut cx = Context::from_waker(std::task::Waker::noop());
    // One worker per lane, each waiting a different time between two bursts.
    let a = g.checkout();
    let b = on_thread({
        let ids: Vec<WorkerId> = (0..8).map(|_| g.checkout()).collect();
        move || ids
    });
    let b = *b
        .iter()
        .find(|&&w| crate::lane::lane_of(w, 2) != crate::lane::lane_of(a, 2))
        .expect("a crowded lane places workers in the other");
    for w in [a, b] {
        let mut st = AcquireState::default();
        let Poll::Ready(p) = g.poll_acquire(&mut st, w, &Hints::default(), &mut cx) else {
            panic!("uncontended")
        };
        drop(p);
    }
    std::thread::sleep(std::time::Duration::from_millis(2));
    for w in [a, b] {
        let mut st = AcquireState::default();
        let Poll::Ready(p) = g.poll_acquire(&mut st, w, &Hints::default(), &mut cx) else {
            panic!("uncontended")
        };
        drop(p);
    }
    g.tick();
    let slp = g.snapshot().stats.slp.unwrap();
    assert!(
        slp < policy::pos::DEFAULT_SLP,
        "learned from both lanes: {slp}"
    );
    let lane_slps: Vec<_> = g
        .lanes
        .iter()
        .map(|l| l.lock().sched.policy().stats().slp)
        .collect();
    assert_eq!(lane_slps[0], lane_slps[1], "published to every lane");
}

/// Measurement, not a test of speed: acquire + release from `threads` threads at once, each
/// with its own worker, on one shared lane or one lane per thread.
#[test]
#[ignore = "measurement: cargo test -p gate --release --lib -- --ignored --nocapture contended"]
fn contended_cost() {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2);
    for (name, lanes) in [("pos", 1), ("pos", threads), ("fifo", 1), ("fifo", threads)] {
        let scheds: Vec<Sched> = (0..lanes)
            .map(|_| {
                Sched::new(
                    threads / lanes,
                    policy::build(name, &PolicyConfig::default()).unwrap(),
                )
            })
            .collect();
        let g = Arc::new(Gate::with_lanes(scheds, true).with_rounds(false));
        let n = 500_000;
        let t0 = std::time::Instant::now();
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let g = g.clone();
                std::thread::spawn(move || {
                    let mut cx = Context::from_waker(std::task::Waker::noop());
                    let w = g.checkout();
                    for _ in 0..n {
                        let mut st = AcquireState::default();
                        let p = loop {
                            if let Poll::Ready(p) =
                                g.poll_acquire(&mut st, w, &Hints::default(), &mut cx)
                            {
                                break p;
                            }
                        };
                        drop(p);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let ns = t0.elapsed().as_nanos() as f64 / n as f64;
        eprintln!(
            "gate contended: policy {name:<5} {threads} threads, {lanes} lane(s): {ns:.0} ns per burst per thread"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_streak_skips_the_round_until_its_slice_ends() {
    let g = gate(1);
    let w = g.checkout();
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let h = Hints::default();
    let acquire = |g: &Gate, cx: &mut Context<'_>| {
        let mut st = AcquireState::default();
        let mut polls = 0;
        loop {
            polls += 1;
            if let Poll::Ready(p) = g.poll_acquire(&mut st, w, &h, cx) {
                drop(p);
                return polls;
            }
        }
    };
    // The first burst after a wait opens a round (two polls).
    assert_eq!(acquire(&g, &mut cx), 2);
    // The next chunk, at once: the streak continues (one poll, no round).
    assert_eq!(acquire(&g, &mut cx), 1);
    assert_eq!(g.counters().streak_bursts, 1);
    // Still within the slice, 40 us after the last burst: continues.
    tokio::time::advance(std::time::Duration::from_micros(40)).await;
    assert_eq!(acquire(&g, &mut cx), 1);
    // A real wait (1 ms) ends the streak: a round again.
    tokio::time::advance(std::time::Duration::from_millis(1)).await;
    assert_eq!(acquire(&g, &mut cx), 2);
    // Back to back past the slice (1 ms from the streak's first burst): a round.
    for _ in 0..30 {
        tokio::time::advance(std::time::Duration::from_micros(40)).await;
        acquire(&g, &mut cx);
    }
    assert_eq!(
        g.counters().rounds,
        3,
        "one more round when the slice ran out"
    );
    // Without streaks every burst after the lane went idle opens a round.
    let p = policy::build("fifo", &PolicyConfig::default()).unwrap();
    let g = Gate::new(Sched::new(1, p), true, None).with_streak(None);
    let w2 = g.checkout();
    assert_eq!(w2, w);
    for _ in 0..3 {
        assert_eq!(acquire(&g, &mut cx), 2);
    }
}

#[tokio::test]
async fn shrink_forgets_the_idle_crowd_and_keeps_the_workers_in_use() {
    let g = gate(1);
    let keep = g.checkout();
    let crowd: Vec<WorkerId> = (0..1000).map(|_| g.checkout()).collect();
    for &w in &crowd {
        drop(g.acquire(w, Hints::default()).await);
    }
    for &w in &crowd {
        g.checkin(w);
    }
    assert_eq!(g.workers(), 1001);
    assert_eq!(g.shrink(), 1000);
    assert_eq!(g.workers(), 1, "only the worker in use is left");
    assert!(
        g.lanes[0].lock().wake.capacity() < 16,
        "the wake-up table shrank"
    );
    assert_eq!(g.shrink(), 0, "nothing more to forget");
    // The one in use still runs, and a newcomer gets a fresh worker that runs too.
    drop(g.acquire(keep, Hints::default()).await);
    let next = g.checkout();
    assert_ne!(next, keep);
    let p = g.acquire(next, Hints::default()).await;
    assert_eq!(p.worker(), next);
    drop(p);
    let s = g.snapshot();
    assert_eq!((s.busy, s.queued), (0, 0));
}
