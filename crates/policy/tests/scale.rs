//! Scale: memory stays bounded by the live workers over a long run, and (ignored benchmark)
//! the cost per scheduling call of `pos` and `content` against `fifo` in the same run.
//!
//! Benchmark: `cargo test --release -p policy --test scale -- --ignored --nocapture`.

use std::time::Instant;

use policy::pos::Pos;
use policy::{build, ContentClass, Hints, Nanos, Policy, PolicyConfig, Sched, State, WorkerId, MS};

/// xorshift64*: a seeded, dependency-free generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A server-like run: connections (fresh worker ids) arrive, alternate ready / run / wait a
/// few times and exit; at most `live` at once. Calls `each` after every step.
fn churn<P: Policy + ?Sized>(
    s: &mut Sched<P>,
    seed: u64,
    steps: usize,
    live: usize,
    mut each: impl FnMut(&Sched<P>),
) {
    let mut rng = Rng(seed | 1);
    let mut next_id: WorkerId = 0;
    let mut conns: Vec<(WorkerId, u32)> = Vec::new();
    let mut t: Nanos = 0;
    for _ in 0..steps {
        t += rng.below(MS / 4);
        if conns.len() < live && rng.below(4) == 0 {
            conns.push((next_id, 1 + rng.below(12) as u32));
            s.register(next_id, t.saturating_sub(rng.below(2000 * MS)).min(t));
            next_id += 1;
            continue;
        }
        if conns.is_empty() {
            continue;
        }
        let i = rng.below(conns.len() as u64) as usize;
        let (w, left) = conns[i];
        let h = Hints {
            class: if left > 3 {
                ContentClass::Media
            } else {
                ContentClass::Text
            },
            urgency: None,
            container: 0,
        };
        match s.state(w) {
            Some(State::Wait) if left == 0 => {
                s.exit(w, t);
                conns.swap_remove(i);
            }
            Some(State::Wait) => {
                s.ready(w, t, &h);
            }
            Some(State::Run) => {
                s.wait(w, t);
                conns[i].1 = left.saturating_sub(1);
            }
            Some(State::Ready) if rng.below(50) == 0 => {
                s.exit(w, t); // client went away while queued
                conns.swap_remove(i);
            }
            _ => {}
        }
        each(s);
    }
}

#[test]
fn memory_is_bounded_by_live_workers() {
    let pos = Pos::new(&PolicyConfig {
        rw: policy::Tunable::Auto,
        rw_rule: policy::RwRule::Split,
        ..PolicyConfig::default()
    })
    .unwrap();
    let mut s = Sched::new(2, Box::new(pos));
    const LIVE: usize = 64;
    let mut max_stored = 0;
    churn(&mut s, 7, 300_000, LIVE, |s| {
        let queued = s.queued();
        let p = s.policy();
        assert!(p.live_workers() <= LIVE, "{}", p.live_workers());
        // Two levels and the arrival FIFO, each at most 2 * queued + 17 positions.
        assert!(
            p.queue_stored() <= 3 * (2 * queued + 17),
            "{}",
            p.queue_stored()
        );
        max_stored = max_stored.max(p.queue_stored());
    });
    let p = s.policy();
    let st = p.stats();
    assert!(
        st.promotions > 0 && st.demotions > 0,
        "the run exercised POS: {st:?}"
    );
    assert!(p.split_state().distinct() <= policy::predict::MAX_EPISODE as usize);
    eprintln!("max stored positions {max_stored}, stats {st:?}");
}

#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn bench_cost_per_call_against_fifo() {
    const STEPS: usize = 2_000_000;
    let mut results = Vec::new();
    for name in ["fifo", "pos", "content"] {
        let mut best = f64::MAX;
        for _rep in 0..3 {
            let mut s = Sched::new(2, build(name, &PolicyConfig::default()).unwrap());
            let start = Instant::now();
            churn(&mut s, 42, STEPS, 256, |_| {});
            best = best.min(start.elapsed().as_nanos() as f64 / STEPS as f64);
        }
        results.push((name, best));
    }
    let fifo = results[0].1;
    for (name, ns) in &results {
        println!("{name:8} {ns:7.1} ns/step  ratio to fifo {:.2}", ns / fifo);
    }
}
