//! Scale: memory stays bounded by the live workers over a long run, and (ignored benchmark)
//! the cost per scheduling call of `pos` and `content` against `fifo` in the same run.
//!
//! Benchmark: `cargo test --release -p policy --test scale -- --ignored --nocapture`.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use policy::pos::Pos;
use policy::{
    build, ContentClass, Ctx, Hints, Nanos, Policy, PolicyConfig, PolicyStats, Sched, State,
    WorkerId, MS,
};

/// Lets the test look inside the `Pos` that a `Sched` drives.
struct Shared(Arc<Mutex<Pos>>);

impl Policy for Shared {
    fn name(&self) -> &str {
        "pos"
    }
    fn on_transition(&mut self, w: WorkerId, from: Option<State>, to: State, ctx: &Ctx) {
        self.0.lock().unwrap().on_transition(w, from, to, ctx)
    }
    fn on_exit(&mut self, w: WorkerId, ctx: &Ctx) {
        self.0.lock().unwrap().on_exit(w, ctx)
    }
    fn enqueue(&mut self, w: WorkerId, h: &Hints, ctx: &Ctx) {
        self.0.lock().unwrap().enqueue(w, h, ctx)
    }
    fn dequeue(&mut self, ctx: &Ctx) -> Option<WorkerId> {
        self.0.lock().unwrap().dequeue(ctx)
    }
    fn remove(&mut self, w: WorkerId) -> bool {
        self.0.lock().unwrap().remove(w)
    }
    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    fn order(&self) -> Vec<WorkerId> {
        self.0.lock().unwrap().order()
    }
    fn tick(&mut self, ctx: &Ctx) {
        self.0.lock().unwrap().tick(ctx)
    }
    fn period(&self) -> Option<Nanos> {
        self.0.lock().unwrap().period()
    }
    fn marked(&self, w: WorkerId) -> bool {
        self.0.lock().unwrap().marked(w)
    }
    fn stats(&self) -> PolicyStats {
        self.0.lock().unwrap().stats()
    }
}

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
fn churn(s: &mut Sched, seed: u64, steps: usize, live: usize, mut each: impl FnMut(&Sched)) {
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
    let pos = Arc::new(Mutex::new(
        Pos::new(&PolicyConfig {
            rw: policy::Tunable::Auto,
            rw_rule: policy::registry::RwRule::Split,
            ..PolicyConfig::default()
        })
        .unwrap(),
    ));
    let mut s = Sched::new(2, Box::new(Shared(pos.clone())));
    const LIVE: usize = 64;
    let mut max_stored = 0;
    churn(&mut s, 7, 300_000, LIVE, |s| {
        let queued = s.queued(); // before locking: it locks too
        let p = pos.lock().unwrap();
        assert!(p.live_workers() <= LIVE, "{}", p.live_workers());
        // Two levels and the arrival FIFO, each at most 2 * queued + 17 positions.
        assert!(
            p.queue_stored() <= 3 * (2 * queued + 17),
            "{}",
            p.queue_stored()
        );
        max_stored = max_stored.max(p.queue_stored());
    });
    let p = pos.lock().unwrap();
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
