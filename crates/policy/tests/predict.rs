//! SLP and RW prediction on hand-written logs: the paper's rules and triage's split rule.

use policy::pos::Pos;
use policy::registry::RwRule;
use policy::{Ctx, Event, Policy, PolicyConfig, State, Tunable, WorkerId};

fn ctx(now: u64) -> Ctx {
    Ctx {
        now,
        busy: 0,
        slots: 1,
    }
}

fn pos(slp: Tunable<u64>, rw: Tunable<u32>, rule: RwRule) -> Pos {
    Pos::new(&PolicyConfig {
        slp,
        rw,
        rw_rule: rule,
        pos_tail: Default::default(),
        period: 1_000_000,
        starvation_bound: None,
        slp_floor: 0,
    })
    .unwrap()
}

/// Feed a log to a policy as `Sched` would (transitions only; queue placement is not needed
/// for prediction). `None` state = the worker exits.
fn replay(p: &mut Pos, log: &[(WorkerId, Option<State>, u64)]) {
    let mut state = std::collections::HashMap::new();
    for &(w, to, t) in log {
        match to {
            Some(to) => {
                let from = state.insert(w, to);
                p.on_transition(w, from, to, &ctx(t));
            }
            None => {
                state.remove(&w);
                p.on_exit(w, &ctx(t));
            }
        }
    }
}

/// One service episode of `bursts` bursts for worker `w`: it leaves a wait at `t0`, runs 1 ns
/// per burst and waits `gap` between bursts. Returns the log and the time of its final wait.
/// Its length is 2 * bursts - 1 run/wait changes (the final run -> wait included).
fn episode(
    w: WorkerId,
    t0: u64,
    bursts: u32,
    gap: u64,
) -> (Vec<(WorkerId, Option<State>, u64)>, u64) {
    let mut log = Vec::new();
    let mut t = t0;
    for b in 0..bursts {
        if b > 0 {
            t += gap;
        }
        log.push((w, Some(State::Ready), t));
        log.push((w, Some(State::Run), t));
        t += 1;
        log.push((w, Some(State::Wait), t));
    }
    (log, t)
}

#[test]
fn slp_is_the_smallest_longest_wait_of_the_period() {
    let mut p = pos(Tunable::Auto, Tunable::Fixed(3), RwRule::Paper);
    let w = |w, s, t| (w, Some(s), t);
    replay(
        &mut p,
        &[
            w(1, State::Wait, 0),
            w(2, State::Wait, 0),
            w(3, State::Wait, 0),
            w(4, State::Wait, 0),
            // 1: waits 300 then 800 -> longest 800
            w(1, State::Ready, 300),
            w(1, State::Run, 300),
            w(1, State::Wait, 310),
            w(1, State::Ready, 1110),
            // 2: waits 500 then 200 -> longest 500
            w(2, State::Ready, 500),
            w(2, State::Run, 510),
            w(2, State::Wait, 520),
            w(2, State::Ready, 720),
            // 3: never leaves its wait: does not count
            // 4: waits 400, then exits: still counts
            w(4, State::Ready, 400),
            w(4, State::Run, 400),
            w(4, State::Wait, 410),
            (4, None, 420),
        ],
    );
    p.tick(&ctx(2000));
    assert_eq!(p.slp(), 400);
    // A period without completed waits keeps SLP.
    p.tick(&ctx(4000));
    assert_eq!(p.slp(), 400);
    // A wait that began in an earlier period counts whole in the period it ends.
    replay(&mut p, &[(3, Some(State::Ready), 5000)]);
    p.tick(&ctx(6000));
    assert_eq!(p.slp(), 5000);
}

#[test]
fn rw_paper_rule_on_a_hand_computed_log() {
    // SLP fixed at 100; gaps inside episodes are 10 (short), between episodes 1000 (long).
    let mut p = pos(Tunable::Fixed(100), Tunable::Auto, RwRule::Paper);
    let mut log = vec![
        (1, Some(State::Wait), 0),
        (2, Some(State::Wait), 0),
        (3, Some(State::Wait), 0),
    ];
    // Worker 1: episodes of 2 bursts (3 changes) then 3 bursts (5 changes); its third episode
    // starts, which completes the second. Minimum 3.
    let (e, t) = episode(1, 1000, 2, 10);
    log.extend(e);
    let (e, t) = episode(1, t + 1000, 3, 10);
    log.extend(e);
    log.push((1, Some(State::Ready), t + 1000));
    // Worker 2: one episode of 4 bursts (7 changes), completed by its exit. Minimum 7.
    let (e, _) = episode(2, 1000, 4, 10);
    log.extend(e);
    log.push((2, None, 9000));
    // Worker 3: an episode still open at the tick: no data.
    let (e, _) = episode(3, 1000, 1, 10);
    log.extend(e);
    log.sort_by_key(|&(_, _, t)| t);
    replay(&mut p, &log);
    p.tick(&ctx(10_000));
    assert_eq!(p.rw(), 7, "max(min(3, 5), 7)");
    // No episode in the next period: RW is kept.
    p.tick(&ctx(20_000));
    assert_eq!(p.rw(), 7);
}

/// A period of a synthetic server: `workers` workers, each serving `pages` requests; worker `i`
/// serves only images when `i >= text_workers`, else alternately an HTML file (1 or 2 bursts:
/// 1 or 3 changes, about 2) and an image (7 or 8 bursts: 13 or 15 changes, about 14).
fn synthetic_period(
    workers: u64,
    text_workers: u64,
    pages: u32,
) -> Vec<(WorkerId, Option<State>, u64)> {
    let mut log: Vec<_> = (0..workers).map(|w| (w, Some(State::Wait), 0)).collect();
    for w in 0..workers {
        let mut t = 1000 + w;
        for k in 0..pages {
            let bursts = if w < text_workers && k % 2 == 0 {
                1 + (k / 2 + w as u32) % 2
            } else {
                7 + (k + w as u32) % 2
            };
            let (e, end) = episode(w, t, bursts, 10);
            log.extend(e);
            t = end + 1000;
        }
        log.push((w, Some(State::Ready), t)); // completes the last episode
    }
    log.sort_by_key(|&(_, _, t)| t);
    log
}

#[test]
fn split_rule_finds_text_where_the_paper_rule_follows_image_only_workers() {
    let log = synthetic_period(8, 6, 6);
    let mut paper = pos(Tunable::Fixed(100), Tunable::Auto, RwRule::Paper);
    let mut split = pos(Tunable::Fixed(100), Tunable::Auto, RwRule::Split);
    replay(&mut paper, &log);
    replay(&mut split, &log);
    paper.tick(&ctx(1_000_000));
    split.tick(&ctx(1_000_000));
    // Two workers served only images: their minimum is an image episode (13), and the paper's
    // max-of-minimums takes it: every image episode is treated as text for 13 changes.
    assert_eq!(paper.rw(), 13);
    // The split puts RW at the end of the HTML class.
    assert_eq!(split.rw(), 3);

    // Consequence on the next image episode (7 bursts): how many of its bursts are enqueued
    // with the mark (i.e. would jump the queue in a bottleneck)?
    let marked_bursts = |p: &mut Pos| {
        let w = 100;
        let mut t = 2_000_000;
        p.on_transition(w, None, State::Wait, &ctx(t));
        let mut n = 0;
        for b in 0..7 {
            t += if b == 0 { 1000 } else { 10 };
            p.on_transition(w, Some(State::Wait), State::Ready, &ctx(t));
            n += u32::from(p.marked(w));
            p.on_transition(w, Some(State::Ready), State::Run, &ctx(t));
            t += 1;
            p.on_transition(w, Some(State::Run), State::Wait, &ctx(t));
        }
        n
    };
    assert_eq!(
        marked_bursts(&mut paper),
        7,
        "paper rule: the whole image is served as text"
    );
    assert_eq!(
        marked_bursts(&mut split),
        2,
        "split rule: marked like an HTML of <= 2 bursts"
    );
}

#[test]
fn split_rule_keeps_rw_while_it_separates_and_without_two_classes() {
    let mut p = pos(Tunable::Fixed(100), Tunable::Auto, RwRule::Split);
    // Only image episodes (13 / 15 changes): no second class, RW stays at its start value.
    replay(&mut p, &synthetic_period(4, 0, 4));
    p.tick(&ctx(1_000_000));
    assert_eq!(p.rw(), policy::pos::DEFAULT_RW);
    // HTML of 3 bursts (5 changes) and images of 7 bursts (13 changes): RW 3 no longer covers
    // the HTML, so the split moves it to 5.
    let mut log: Vec<_> = (0..4).map(|w| (w, Some(State::Wait), 0)).collect();
    for w in 0..4u64 {
        let (e, t) = episode(w, 1000, if w < 2 { 3 } else { 7 }, 10);
        log.extend(e);
        log.push((w, Some(State::Ready), t + 1000));
    }
    log.sort_by_key(|&(_, _, t)| t);
    replay(&mut p, &log);
    p.tick(&ctx(2_000_000));
    assert_eq!(p.rw(), 5);
    // Next period, the HTML episodes have 2 bursts (3 changes). With last period's lengths at
    // half weight the classes are {3, 5} | {13}: RW = 5 still separates them, so it stays
    // (hysteresis) instead of dropping to 3 and demoting the 5-change HTML still in the mix.
    let mut log = Vec::new();
    for w in 0..4u64 {
        let (e, t) = episode(w, 3_000_000, if w < 2 { 2 } else { 7 }, 10);
        log.extend(e);
        log.push((w, Some(State::Ready), t + 1000));
    }
    log.sort_by_key(|&(_, _, t)| t);
    replay(&mut p, &log);
    p.tick(&ctx(4_000_000));
    assert_eq!(p.rw(), 5);

    // A fixed RW is never predicted.
    let mut p = pos(Tunable::Fixed(100), Tunable::Fixed(5), RwRule::Split);
    replay(&mut p, &synthetic_period(4, 4, 4));
    p.tick(&ctx(1_000_000));
    assert_eq!(p.rw(), 5);
}

#[test]
fn log_events_feed_the_same_predictor() {
    // The `Event` log kept by `Sched::with_log` is what a lab replays; replaying it through a
    // fresh POS gives the SLP the live one predicted.
    let mut s = policy::Sched::new(
        1,
        policy::build(
            "pos",
            &PolicyConfig {
                period: 1000,
                ..PolicyConfig::default()
            },
        )
        .unwrap(),
    )
    .with_log();
    let h = policy::Hints::default();
    s.ready(1, 0, &h); // first call: next tick at 1000
    s.wait(1, 10);
    s.ready(2, 20, &h);
    s.wait(2, 30);
    s.ready(1, 310, &h); // 1 waited 300
    s.wait(1, 320);
    s.ready(2, 530, &h); // 2 waited 500
    s.wait(2, 540);
    s.maybe_tick(1000);
    assert_eq!(s.policy().stats().slp, Some(300));
    let log: Vec<Event> = s.drain_log();
    let mut p = pos(Tunable::Auto, Tunable::Fixed(3), RwRule::Paper);
    let mut st = std::collections::HashMap::new();
    for e in log {
        let from = st.insert(e.worker, e.state);
        p.on_transition(e.worker, from, e.state, &ctx(e.t));
    }
    p.tick(&ctx(1000));
    assert_eq!(p.slp(), 300);
}

#[test]
fn pfs_episodes_agree_with_the_live_policy() {
    // The offline view (PFS of the log, as a lab computes it) and the online policy count
    // episodes the same way, so they predict the same RW.
    let log = synthetic_period(8, 6, 6);
    let pfs = policy::Pfs::from_log(log.iter().map(|&(worker, state, t)| Event {
        worker,
        state: state.unwrap(),
        t,
    }));
    let per_worker: Vec<Vec<u32>> = (0..8).map(|w| pfs.episodes(w, 100)).collect();
    assert!(per_worker.iter().all(|e| e.len() == 6), "{per_worker:?}");
    let offline_paper =
        policy::predict::rw_paper(per_worker.iter().filter_map(|e| e.iter().min().copied()));
    let mut split = policy::predict::SplitRw::new();
    per_worker.iter().flatten().for_each(|&l| split.add(l));
    let offline_split = split
        .predict(policy::pos::DEFAULT_RW)
        .unwrap_or(policy::pos::DEFAULT_RW);

    let mut paper = pos(Tunable::Fixed(100), Tunable::Auto, RwRule::Paper);
    let mut online = pos(Tunable::Fixed(100), Tunable::Auto, RwRule::Split);
    replay(&mut paper, &log);
    replay(&mut online, &log);
    paper.tick(&ctx(1_000_000));
    online.tick(&ctx(1_000_000));
    assert_eq!(offline_paper, Some(paper.rw()));
    assert_eq!(offline_split, online.rw());
}

/// A worker streaming one response pauses a few microseconds between its chunks (the socket
/// write returned at once). Seed 001's SLP rule takes the smallest longest wait of the period,
/// so such a period sets SLP to microseconds, and from then on every pause is "long": it
/// restarts the run/wait counter and keeps the worker marked as text however many chunks it
/// sends. The SLP floor keeps SLP above the pauses, so the counter grows and RW demotes it.
#[test]
fn slp_floor_keeps_pauses_between_chunks_from_marking_a_stream() {
    const PAUSE: u64 = 5_000;
    let floor_10ms = 10_000_000;
    for (floor, want_slp, marked_at_end) in [(0, PAUSE, true), (floor_10ms, floor_10ms, false)] {
        let mut p = Pos::new(&PolicyConfig {
            slp: Tunable::Auto,
            rw: Tunable::Fixed(3),
            period: 1_000_000,
            slp_floor: floor,
            ..PolicyConfig::default()
        })
        .unwrap();
        let s = |w, st, t| (w, Some(st), t);
        // Period 1: the worker leaves a 2 s wait for its request.
        let t0 = 2_000_000_000;
        replay(
            &mut p,
            &[
                s(1, State::Wait, 0),
                s(1, State::Ready, t0),
                s(1, State::Run, t0),
            ],
        );
        assert!(p.marked(1), "floor {floor}: a 2 s wait marks the worker");
        p.tick(&ctx(t0));
        // Period 2: chunks separated by 5 µs pauses only.
        let mut t = t0;
        let mut stream = |p: &mut Pos, pause: u64, chunks: u32| {
            for _ in 0..chunks {
                t += 1_000;
                replay(
                    p,
                    &[
                        s(1, State::Wait, t),
                        s(1, State::Ready, t + pause),
                        s(1, State::Run, t + pause),
                    ],
                );
                t += pause;
            }
            t
        };
        let end = stream(&mut p, PAUSE, 10);
        p.tick(&ctx(end));
        assert_eq!(p.slp(), want_slp, "floor {floor}");
        // Period 3: pauses of 6 µs, longer than the 5 µs SLP of the rule as written.
        stream(&mut p, PAUSE + 1_000, 10);
        assert_eq!(p.marked(1), marked_at_end, "floor {floor}");
        if floor > 0 {
            assert!(p.counter(1).unwrap() > 3, "the counter grew past RW");
        }
    }
}
