//! The gate's unit tests: queueing, cancellation, the worker log, scheduling rounds, the pool,
//! the kernel boost, and the ignored fast-path measurement.

use super::*;
use policy::{PolicyConfig, State};
use std::sync::Arc;

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
    let g = Arc::new(Gate::new(Sched::new(1, p), true, None).with_rounds(rounds));
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

#[tokio::test(start_paused = true)]
async fn boost_holds_while_a_marked_worker_waits_behind_an_unmarked_burst() {
    let cfg = PolicyConfig {
        slp: policy::Tunable::Fixed(50_000_000),
        rw: policy::Tunable::Fixed(1),
        starvation_bound: None,
        ..PolicyConfig::default()
    };
    let p = policy::build("pos", &cfg).unwrap();
    let g = Gate::new(Sched::new(1, p), true, Some(Raise::Nice(-5))).with_rounds(false);
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
            let w = g.checkout();
            let n = 1_000_000;
            let t0 = std::time::Instant::now();
            for _ in 0..n {
                let mut st = AcquireState::default();
                // With rounds the first poll opens one and the second ends it.
                let permit = loop {
                    if let Poll::Ready(p) = g.poll_acquire(&mut st, w, &Hints::default(), &mut cx) {
                        break p;
                    }
                    assert!(rounds, "uncontended acquire queued");
                };
                drop(permit);
                if log && g.lock().sched.queued() == 0 {
                    // Keep the log from growing without bound, as the server's drain does.
                    let _ = g.drain_log();
                }
            }
            let ns = t0.elapsed().as_nanos() as f64 / n as f64;
            eprintln!(
                "gate fast path: policy {name:<8} log {log:<5} rounds {rounds:<5}: {ns:.0} ns per burst"
            );
        }
    }
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
