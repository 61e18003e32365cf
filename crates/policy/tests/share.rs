//! Tests of the `share` policy, driven through `Sched` in virtual time.
//!
//! - `shares_follow_weights_*`: with every container backlogged, CPU splits in proportion to
//!   the weights (flat and nested trees; property test over random weights, bursts, slots).
//! - `caps_*`: a capped container (or a capped parent of several) gets its cap, also alone
//!   (caps are not work conserving), also with bursts longer than the window (debt carry).
//! - `weights_only_is_work_conserving`: property: no slot idle while a worker is ready.
//! - `inner_order_is_kept`: property: within a container, workers start in the order of the
//!   inner policy (fifo: arrival order).
//! - `idle_container_banks_no_credit`, `flat_share_is_fifo`, `spec_errors_*`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use policy::share::{ContainerSpec, Field, Limits, Share, ShareSpec, Tree};
use policy::{build, Grant, Hints, Nanos, Policy, PolicyConfig, Sched, WorkerId, MS, SEC};
use proptest::prelude::*;

/// Tiny seeded generator (splitmix64), so plain tests are deterministic without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// A worker of the simulation: its container and burst/wait lengths.
#[derive(Clone, Copy)]
struct W {
    container: u32,
    burst: (Nanos, Nanos),
    wait: (Nanos, Nanos),
    /// Appears at this time.
    from: Nanos,
}

/// Result of a run: CPU per container (from the driver's own accounting) and total busy time.
struct Run {
    cpu: HashMap<u32, Nanos>,
    busy: Nanos,
    elapsed: Nanos,
    /// Whether a slot was ever idle while a worker was ready.
    idle_while_ready: bool,
}

/// Simulate `workers` on `slots` slots under `policy` for `until` ns; CPU measured in
/// `[from, until)`.
fn simulate(
    policy: Box<dyn Policy>,
    slots: usize,
    workers: &[W],
    seed: u64,
    from: Nanos,
    until: Nanos,
) -> Run {
    let mut rng = Rng(seed);
    let mut s = Sched::new(slots, policy);
    let period = s.policy().period();
    // (time, seq, worker, is_end_of_burst)
    let mut ev: BinaryHeap<Reverse<(Nanos, u64, WorkerId, bool)>> = BinaryHeap::new();
    let mut seq = 0;
    let mut started_at: HashMap<WorkerId, Nanos> = HashMap::new();
    let mut out = Run {
        cpu: HashMap::new(),
        busy: 0,
        elapsed: until - from,
        idle_while_ready: false,
    };
    for (i, w) in workers.iter().enumerate() {
        ev.push(Reverse((w.from, seq, i as WorkerId, false)));
        seq += 1;
    }
    let hint = |w: WorkerId| Hints {
        container: workers[w as usize].container,
        ..Hints::default()
    };
    let mut now = 0;
    let start = |w: WorkerId,
                 now: Nanos,
                 ev: &mut BinaryHeap<_>,
                 seq: &mut u64,
                 rng: &mut Rng,
                 started_at: &mut HashMap<WorkerId, Nanos>| {
        let (lo, hi) = workers[w as usize].burst;
        started_at.insert(w, now);
        ev.push(Reverse((now + rng.range(lo, hi), *seq, w, true)));
        *seq += 1;
    };
    loop {
        let next_ev = ev.peek().map_or(Nanos::MAX, |&Reverse((t, _, _, _))| t);
        // Held-back work resumes at the next period boundary (the mechanism's timer).
        let t = match period {
            Some(p) if s.queued() > 0 && s.busy() < s.slots() => next_ev.min((now / p + 1) * p),
            _ => next_ev,
        };
        if t >= until {
            break;
        }
        now = t;
        let mut started = s.poll(now);
        while let Some(&Reverse((t2, _, w, end))) = ev.peek() {
            if t2 != now {
                break;
            }
            ev.pop();
            if end {
                let st = started_at.remove(&w).unwrap();
                let (a, b) = (st.max(from), now.max(from));
                *out.cpu.entry(workers[w as usize].container).or_default() += b - a;
                out.busy += b - a;
                started.extend(s.wait(w, now));
                let (lo, hi) = workers[w as usize].wait;
                ev.push(Reverse((now + rng.range(lo, hi), seq, w, false)));
                seq += 1;
            } else if s.ready(w, now, &hint(w)) == Grant::RunNow {
                started.push(w);
            }
        }
        for w in started {
            start(w, now, &mut ev, &mut seq, &mut rng, &mut started_at);
        }
        if s.queued() > 0 && s.busy() < s.slots() {
            out.idle_while_ready = true;
        }
    }
    // Running bursts count up to `until`.
    for (w, st) in started_at {
        let (a, b) = (st.max(from), until);
        *out.cpu.entry(workers[w as usize].container).or_default() += b.saturating_sub(a);
        out.busy += b.saturating_sub(a);
    }
    out
}

fn spec(containers: Vec<ContainerSpec>) -> Box<dyn Policy> {
    Box::new(
        Share::new(&ShareSpec {
            containers,
            ..ShareSpec::default()
        })
        .unwrap(),
    )
}

/// `n` always-ready workers of `container` with bursts in `burst`.
fn backlogged(container: u32, n: usize, burst: (Nanos, Nanos)) -> Vec<W> {
    vec![
        W {
            container,
            burst,
            wait: (0, 0),
            from: 0,
        };
        n
    ]
}

fn frac(r: &Run, c: u32) -> f64 {
    *r.cpu.get(&c).unwrap_or(&0) as f64 / r.busy as f64
}

/// Fraction of one CPU used by container `c`.
fn cpus(r: &Run, c: u32) -> f64 {
    *r.cpu.get(&c).unwrap_or(&0) as f64 / r.elapsed as f64
}

#[test]
fn shares_follow_weights_flat() {
    let p = spec(vec![
        ContainerSpec::new(1, "a", 0).weight(100),
        ContainerSpec::new(2, "b", 0).weight(200),
        ContainerSpec::new(3, "c", 0).weight(300),
    ]);
    let mut ws = backlogged(1, 4, (MS, 5 * MS));
    ws.extend(backlogged(2, 4, (MS, 5 * MS)));
    ws.extend(backlogged(3, 4, (MS, 5 * MS)));
    let r = simulate(p, 2, &ws, 1, SEC, 11 * SEC);
    for (c, want) in [(1, 1.0 / 6.0), (2, 2.0 / 6.0), (3, 3.0 / 6.0)] {
        let got = frac(&r, c);
        assert!(
            (got - want).abs() < 0.01,
            "container {c}: {got:.4} want {want:.4}"
        );
    }
    assert!(!r.idle_while_ready);
}

#[test]
fn shares_follow_weights_nested() {
    // root -> site-a (100) -> {static (300), cgi (100)}; root -> site-b (100).
    let p = spec(vec![
        ContainerSpec::new(1, "site-a", 0),
        ContainerSpec::new(2, "static", 1).weight(300),
        ContainerSpec::new(3, "cgi", 1).weight(100),
        ContainerSpec::new(4, "site-b", 0),
    ]);
    let mut ws = backlogged(2, 3, (MS, 3 * MS));
    ws.extend(backlogged(3, 3, (2 * MS, 8 * MS)));
    ws.extend(backlogged(4, 3, (MS, 2 * MS)));
    let r = simulate(p, 2, &ws, 2, SEC, 11 * SEC);
    for (c, want) in [(2, 0.375), (3, 0.125), (4, 0.5)] {
        let got = frac(&r, c);
        assert!(
            (got - want).abs() < 0.01,
            "container {c}: {got:.4} want {want:.4}"
        );
    }
}

#[test]
fn own_workers_compete_as_a_child_of_weight_100() {
    // Site 1 has its own workers and a child `cgi` of weight 300: own 25%, cgi 75% of site 1.
    let p = spec(vec![
        ContainerSpec::new(1, "site", 0),
        ContainerSpec::new(2, "cgi", 1).weight(300),
    ]);
    let mut ws = backlogged(1, 2, (MS, 3 * MS));
    ws.extend(backlogged(2, 2, (MS, 3 * MS)));
    let r = simulate(p, 1, &ws, 3, SEC, 6 * SEC);
    assert!((frac(&r, 1) - 0.25).abs() < 0.01, "{}", frac(&r, 1));
}

#[test]
fn caps_hold_against_an_uncapped_neighbour() {
    let p = spec(vec![
        ContainerSpec::new(1, "cgi", 0).weight(1000).cap(0.3),
        ContainerSpec::new(2, "static", 0),
    ]);
    let mut ws = backlogged(1, 4, (MS, 4 * MS));
    ws.extend(backlogged(2, 4, (MS, 4 * MS)));
    let r = simulate(p, 1, &ws, 4, SEC, 11 * SEC);
    let cgi = cpus(&r, 1);
    assert!(
        (cgi - 0.3).abs() < 0.01,
        "cgi used {cgi:.4} of a CPU, cap 0.3"
    );
    // Weights are work conserving: static takes the rest.
    assert!((cpus(&r, 2) - 0.7).abs() < 0.01, "{}", cpus(&r, 2));
}

#[test]
fn caps_changed_at_run_time_hold() {
    // One budget (policy::budget): the mechanism lowers a container's cap while it runs.
    let mut p = spec(vec![ContainerSpec::new(1, "site", 0).cap(0.3)]);
    assert!(p.set_cap(1, Some(0.1)));
    assert!(!p.set_cap(9, Some(0.1)), "no container 9");
    let ws = backlogged(1, 4, (MS, 4 * MS));
    let r = simulate(p, 1, &ws, 6, SEC, 11 * SEC);
    let used = cpus(&r, 1);
    assert!((used - 0.1).abs() < 0.01, "{used:.4}");
    let mut f = build("fifo", &PolicyConfig::default()).unwrap();
    assert!(!f.set_cap(1, Some(0.1)), "fifo has no containers");
}

#[test]
fn caps_are_not_work_conserving() {
    // The capped container alone on 2 slots: it gets its cap and the slots stay idle.
    let p = spec(vec![ContainerSpec::new(1, "cgi", 0).cap(0.3)]);
    let ws = backlogged(1, 4, (MS, 4 * MS));
    let r = simulate(p, 2, &ws, 5, SEC, 11 * SEC);
    let used = cpus(&r, 1);
    assert!((used - 0.3).abs() < 0.01, "{used:.4}");
    assert!(r.idle_while_ready);
}

#[test]
fn a_capped_parent_covers_its_children() {
    // seed 003: a CGI-parent container capped at 10%, one child per request.
    let p = spec(vec![
        ContainerSpec::new(1, "cgi-parent", 0).cap(0.1),
        ContainerSpec::new(10, "req-1", 1),
        ContainerSpec::new(11, "req-2", 1).weight(300),
        ContainerSpec::new(2, "static", 0),
    ]);
    let mut ws = backlogged(10, 2, (MS, 2 * MS));
    ws.extend(backlogged(11, 2, (MS, 2 * MS)));
    ws.extend(backlogged(2, 2, (MS, 2 * MS)));
    let r = simulate(p, 2, &ws, 6, SEC, 11 * SEC);
    let cgi = cpus(&r, 10) + cpus(&r, 11);
    assert!((cgi - 0.1).abs() < 0.01, "{cgi:.4}");
    // Inside the cap, weights still split 1:3.
    let share11 = cpus(&r, 11) / cgi;
    assert!((share11 - 0.75).abs() < 0.05, "{share11:.3}");
}

#[test]
fn caps_hold_with_bursts_longer_than_the_window() {
    // 40-60 ms bursts against a 30 ms quota per 100 ms window: overruns are paid back.
    let p = spec(vec![
        ContainerSpec::new(1, "cgi", 0).cap(0.3),
        ContainerSpec::new(2, "static", 0),
    ]);
    let mut ws = backlogged(1, 2, (40 * MS, 60 * MS));
    ws.extend(backlogged(2, 2, (MS, 3 * MS)));
    let r = simulate(p, 1, &ws, 7, SEC, 21 * SEC);
    let cgi = cpus(&r, 1);
    assert!((cgi - 0.3).abs() < 0.02, "{cgi:.4}");
}

#[test]
fn idle_container_banks_no_credit() {
    // A runs alone for 5 s; B arrives and must get its half at once, not all of the CPU.
    let p = spec(vec![
        ContainerSpec::new(1, "a", 0),
        ContainerSpec::new(2, "b", 0),
    ]);
    let mut ws = backlogged(1, 3, (MS, 3 * MS));
    ws.extend(
        backlogged(2, 3, (MS, 3 * MS))
            .into_iter()
            .map(|w| W { from: 5 * SEC, ..w }),
    );
    let r = simulate(p, 1, &ws, 8, 5 * SEC, 5 * SEC + 200 * MS);
    let b = frac(&r, 2);
    assert!(
        (b - 0.5).abs() < 0.05,
        "newcomer got {b:.3} in its first 200 ms"
    );
}

#[test]
fn admission_respects_caps_and_poll_resumes() {
    let mut s = Sched::new(
        1,
        Box::new(
            Share::new(&ShareSpec {
                containers: vec![ContainerSpec::new(1, "c", 0).cap(0.1)],
                ..ShareSpec::default()
            })
            .unwrap(),
        ),
    );
    let h = Hints {
        container: 1,
        ..Hints::default()
    };
    // Uses its whole 10 ms quota of the first 100 ms window in one burst.
    assert_eq!(s.ready(1, 0, &h), Grant::RunNow);
    s.wait(1, 10 * MS);
    assert_eq!(s.policy().held_back_in(1), Some(0));
    // Its slot time so far: the one 10 ms burst (the budget loop converts CPU parts into it).
    assert_eq!(s.policy().slot_time_in(1), Some(10 * MS));
    assert_eq!(s.policy().slot_time_in(9), None);
    // Free slot, empty queue, but over the cap: queued, not run.
    assert_eq!(s.ready(2, 20 * MS, &h), Grant::Queued);
    assert_eq!(s.busy(), 0);
    assert!(s.poll(50 * MS).is_empty());
    // Held back at admission and at the poll, counted on the container and the root above it
    // (the budget loop reads it to know the server's part is too small).
    let held = s.policy().held_back_in(1).unwrap();
    assert!(held >= 2, "{held}");
    assert_eq!(s.policy().held_back_in(0), Some(held));
    assert_eq!(s.policy().held_back_in(9), None, "no container 9");
    // The next window opens.
    assert_eq!(s.poll(100 * MS), vec![2]);
    assert_eq!(
        s.policy().held_back_in(1),
        Some(held),
        "nothing held back any more"
    );
}

#[test]
fn flat_share_is_fifo() {
    let mut a = Sched::new(2, build("share", &PolicyConfig::default()).unwrap());
    let mut b = Sched::new(2, build("fifo", &PolicyConfig::default()).unwrap());
    let mut rng = Rng(9);
    let mut t = 0;
    for _ in 0..2000 {
        t += rng.range(0, 3) * MS;
        let w = rng.range(0, 9);
        let h = Hints::default();
        let (x, y) = match a.state(w) {
            Some(policy::State::Run) => (a.wait(w, t), b.wait(w, t)),
            Some(policy::State::Ready) if rng.range(0, 5) == 0 => (a.exit(w, t), b.exit(w, t)),
            _ => {
                let (ga, gb) = (a.ready(w, t, &h), b.ready(w, t, &h));
                assert_eq!(ga, gb);
                (vec![], vec![])
            }
        };
        assert_eq!(x, y);
        assert_eq!(a.policy().order(), b.policy().order());
    }
}

#[test]
fn spec_errors_name_the_container_and_value() {
    let cases: Vec<(Vec<ContainerSpec>, &str)> = vec![
        (
            vec![ContainerSpec::new(1, "a", 7)],
            "container `a`: parent 7 is not the id of a container",
        ),
        (
            vec![ContainerSpec::new(1, "a", 2), ContainerSpec::new(2, "b", 1)],
            "container `a`: parent 2 closes a cycle: a -> b -> a",
        ),
        (
            vec![ContainerSpec::new(1, "a", 0), ContainerSpec::new(1, "b", 0)],
            "container `b`: id 1 is used by another container",
        ),
        (
            vec![ContainerSpec::new(1, "a", 0), ContainerSpec::new(2, "a", 0)],
            "container `a`: name `a` names another container",
        ),
        (
            vec![ContainerSpec::new(1, "root", 0)],
            "name `root` names another container",
        ),
        (
            vec![ContainerSpec::new(1, "a", 0).weight(0)],
            "container `a`: weight 0 is not in 1..=10000",
        ),
        (
            vec![ContainerSpec::new(1, "a", 0).weight(10_001)],
            "weight 10001",
        ),
        (vec![ContainerSpec::new(1, "a", 0).cap(0.0)], "cap 0 is not"),
        (vec![ContainerSpec::new(1, "a", 0).cap(f64::NAN)], "cap NaN"),
        (
            vec![ContainerSpec::new(1, "a", 0).inner("lottery")],
            "container `a`: unknown policy `lottery`",
        ),
        (
            vec![ContainerSpec::new(1, "a", 0).inner("share")],
            "container `a`: inner policy `share` cannot be nested in itself",
        ),
    ];
    for (cs, want) in cases {
        let err = match Share::new(&ShareSpec {
            containers: cs,
            ..ShareSpec::default()
        }) {
            Ok(_) => panic!("a tree that should fail with `{want}` was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(want), "{err} should contain {want}");
    }
}

#[test]
fn tree_errors_give_the_position_and_field() {
    let at = |cs: &[ContainerSpec], limits: &Limits| {
        let e = Tree::new(cs, limits).unwrap_err();
        (e.index, e.field, e.name)
    };
    let none = Limits::default();
    let ok = ContainerSpec::new(1, "a", 0);
    assert_eq!(
        at(&[ok.clone(), ContainerSpec::new(2, "b", 9)], &none),
        (1, Field::Parent, "b".into())
    );
    // The cycle is reported at its member that comes first in the list, even when a container
    // below it comes earlier.
    assert_eq!(
        at(
            &[
                ContainerSpec::new(4, "below", 3),
                ok.clone(),
                ContainerSpec::new(3, "x", 5),
                ContainerSpec::new(5, "y", 3),
            ],
            &none
        ),
        (2, Field::Parent, "x".into())
    );
    let big_cap = [ok.clone(), ContainerSpec::new(2, "b", 1).cap(3.0)];
    assert!(Tree::new(&big_cap, &none).is_ok(), "no limit on caps");
    let two_cpus = Limits {
        max_cap: Some(2.0),
        inner_names: Some(&["fifo", "pos", "share"]),
    };
    let e = Tree::new(&big_cap, &two_cpus).unwrap_err();
    assert_eq!((e.index, e.field), (1, Field::Cap));
    assert!(e.msg.contains("(0, 2]"), "{e}");
    let e = Tree::new(&[ok.clone().inner("content")], &two_cpus).unwrap_err();
    assert_eq!((e.index, e.field), (0, Field::Inner));
    assert!(e.msg.ends_with("(known: fifo, pos)"), "{e}");
    assert_eq!(
        at(
            &[ok.clone(), ContainerSpec::new(2, "b", 0).weight(0)],
            &none
        ),
        (1, Field::Weight, "b".into())
    );
}

#[test]
fn tree_orders_parents_first_and_names_paths() {
    let t = Tree::new(
        &[
            ContainerSpec::new(3, "cgi", 1),
            ContainerSpec::new(1, "site-a", 0),
            ContainerSpec::new(2, "site-b", 0),
            ContainerSpec::new(0, "top", 0).cap(0.5),
        ],
        &Limits::default(),
    )
    .unwrap();
    let order: Vec<(u32, Option<usize>)> = t.nodes().iter().map(|n| (n.spec.id, n.index)).collect();
    assert_eq!(
        order,
        vec![(0, Some(3)), (1, Some(1)), (2, Some(2)), (3, Some(0))]
    );
    assert_eq!(t.path(3).as_deref(), Some("site-a/cgi"));
    assert_eq!(t.path(0).as_deref(), Some(""));
    assert_eq!(t.path(9), None);
    assert_eq!(t.by_name("top").map(|n| n.spec.id), Some(0));
    assert_eq!(t.get(3).and_then(|n| n.parent), Some(1));
    // Without a listed root, the root is `root`, uncapped.
    let t = Tree::new(&[ContainerSpec::new(1, "a", 0)], &Limits::default()).unwrap();
    assert_eq!(t.nodes()[0].spec, ContainerSpec::new(0, "root", 0));
    assert_eq!(t.nodes()[0].index, None);
}

#[test]
fn unknown_container_hint_goes_to_root_and_is_counted() {
    let mut p = Share::new(&ShareSpec::default()).unwrap();
    let ctx = policy::Ctx {
        now: 0,
        busy: 1,
        slots: 1,
    };
    let h = Hints {
        container: 42,
        ..Hints::default()
    };
    p.enqueue(5, &h, &ctx);
    assert_eq!(p.unknown_hints(), 1);
    assert_eq!(p.queued_in(0), 1);
    assert_eq!(p.dequeue(&ctx), Some(5));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn shares_follow_weights_random(
        weights in prop::collection::vec(1u32..1000, 2..5),
        slots in 1usize..4,
        max_burst in 1u64..10,
        seed in any::<u64>(),
    ) {
        let cs = weights
            .iter()
            .enumerate()
            .map(|(i, &w)| ContainerSpec::new(i as u32 + 1, &format!("c{}", i + 1), 0).weight(w))
            .collect();
        let mut ws = Vec::new();
        for i in 0..weights.len() {
            // Enough workers that no container is limited by its own parallelism.
            ws.extend(backlogged(i as u32 + 1, slots + 1, (MS / 2, max_burst * MS)));
        }
        let r = simulate(spec(cs), slots, &ws, seed, SEC, 6 * SEC);
        let total: u32 = weights.iter().sum();
        for (i, &w) in weights.iter().enumerate() {
            let want = w as f64 / total as f64;
            let got = frac(&r, i as u32 + 1);
            // Multi-slot picks carry at most a few bursts of error per container.
            prop_assert!((got - want).abs() < 0.03 + want * 0.03,
                "container {} weight {w}: {got:.4} want {want:.4}", i + 1);
        }
        prop_assert!(!r.idle_while_ready);
    }

    #[test]
    fn weights_only_is_work_conserving(
        weights in prop::collection::vec(1u32..10_000, 1..5),
        nested in any::<bool>(),
        slots in 1usize..4,
        seed in any::<u64>(),
    ) {
        let cs = weights
            .iter()
            .enumerate()
            .map(|(i, &w)| {
                let parent = if nested && i > 0 { i as u32 } else { 0 };
                ContainerSpec::new(i as u32 + 1, &format!("c{}", i + 1), parent).weight(w)
            })
            .collect();
        let mut ws = Vec::new();
        for i in 0..=weights.len() {
            ws.push(W { container: i as u32, burst: (MS / 10, 3 * MS), wait: (0, 4 * MS), from: 0 });
            ws.push(W { container: i as u32, burst: (MS, 2 * MS), wait: (MS, 10 * MS), from: 3 * MS });
        }
        let r = simulate(spec(cs), slots, &ws, seed, 0, 2 * SEC);
        prop_assert!(!r.idle_while_ready);
    }

    #[test]
    fn inner_order_is_kept(ops in prop::collection::vec((0u8..3, 0u64..12, 0u64..4), 1..300)) {
        // Containers 1 and 2 (fifo inside), workers w -> container w % 3.
        let mut s = Sched::new(2, spec(vec![
            ContainerSpec::new(1, "a", 0).weight(50),
            ContainerSpec::new(2, "b", 0).weight(500),
        ]));
        let mut t = 0;
        // Per container, the workers queued in arrival order.
        let mut expect: HashMap<u32, Vec<WorkerId>> = HashMap::new();
        for (kind, w, dt) in ops {
            t += dt * MS;
            let c = (w % 3) as u32;
            let h = Hints { container: c, ..Hints::default() };
            let started = match (kind, s.state(w)) {
                (_, Some(policy::State::Run)) => s.wait(w, t),
                (0, Some(policy::State::Ready)) => {
                    expect.get_mut(&c).unwrap().retain(|&x| x != w);
                    s.exit(w, t)
                }
                (_, Some(policy::State::Ready)) => vec![],
                _ => {
                    if s.ready(w, t, &h) == Grant::Queued {
                        expect.entry(c).or_default().push(w);
                    }
                    vec![]
                }
            };
            for x in started {
                let q = expect.get_mut(&((x % 3) as u32)).unwrap();
                prop_assert_eq!(q.first().copied(), Some(x), "out of inner order");
                q.remove(0);
            }
            // order() lists each container's workers in inner order too.
            let order = s.policy().order();
            for (c, q) in &expect {
                let mine: Vec<_> = order.iter().copied().filter(|x| (x % 3) as u32 == *c).collect();
                prop_assert_eq!(&mine, q);
            }
        }
    }
}
