//! Property tests (proptest, seeded by proptest's own deterministic runner): random event
//! sequences driven through `Sched`.
//!
//! - `sched_invariants_hold`: for every registered policy (POS with both tails), and `share`
//!   with a container tree (weights only, and with caps): busy <= slots, busy == #Run,
//!   queued == #Ready, the queue holds exactly the ready workers, work conserving (except
//!   where caps hold work back on purpose).
//! - `pos_is_fifo_outside_a_bottleneck`: pos and fifo agree step by step until the first
//!   reordering, which must happen in a bottleneck (and never when nobody is marked).
//! - `pos_matches_reference_model`: the O(1) lazy-deletion queue equals a plain `Vec` model of
//!   the POS rules (fixed SLP/RW), guard off (pure POS order) and on.
//! - `slp_is_min_of_per_worker_longest_waits`: SLP prediction equals the rule computed from the
//!   log.
//! - `guard_bounds_queue_wait`: with the guard on, in a virtual-time simulation, a worker waits
//!   in the queue at most bound + (k + 1) * longest burst, k = older workers still queued when
//!   it became overdue (k = 0: bound + longest burst); and no overdue worker is overtaken.

use std::collections::{BTreeMap, BinaryHeap, HashMap};

use policy::pos::{Pos, DEFAULT_SLP};
use policy::registry::{names, RwRule};
use policy::share::{ContainerSpec, Share, ShareSpec};
use policy::{
    build, ContentClass, Ctx, Grant, Hints, Nanos, Policy, PolicyConfig, PolicyStats, PosTail,
    Sched, State, Tunable, WorkerId,
};
use proptest::prelude::*;

const WORKERS: u64 = 8;

fn hints(w: WorkerId) -> Hints {
    Hints {
        class: match w % 3 {
            0 => ContentClass::Text,
            1 => ContentClass::Media,
            _ => ContentClass::Unknown,
        },
        urgency: w.is_multiple_of(4).then_some((w % 8) as u8),
        // Containers 0-2 of `share_tree`; 3 is unknown (charged to the root).
        container: (w % 4) as u32,
    }
}

/// One random step: (kind, worker, time advance).
type Op = (u8, u64, u16);

fn ops() -> impl Strategy<Value = Vec<Op>> {
    // Time advances in steps of 10 so that waits equal to SLP or to the bound happen often.
    prop::collection::vec(
        (0u8..8, 0..WORKERS, (0u16..30).prop_map(|d| d * 10)),
        1..250,
    )
}

/// What one step returned, for lockstep comparison.
#[derive(Debug, PartialEq)]
enum Out {
    Grant(Grant),
    Started(Vec<WorkerId>),
    None,
}

/// Apply one step to `s` at time `*t` (advanced first).
fn apply<P: Policy + ?Sized>(s: &mut Sched<P>, t: &mut Nanos, (kind, w, dt): Op) -> Out {
    *t += Nanos::from(dt);
    let t = *t;
    match s.state(w) {
        None | Some(State::Wait) => match kind {
            0..=4 => Out::Grant(s.ready(w, t, &hints(w))),
            5 => {
                // A scheduling round: every member becomes ready with slots possibly free, then
                // the policy chooses (Sched::enqueue + poll, as the server's gate does).
                for x in round_members(s, w) {
                    s.enqueue(x, t, &hints(x));
                }
                Out::Started(s.poll(t))
            }
            6 => Out::Started(s.exit(w, t)),
            _ => {
                s.maybe_tick(t);
                Out::None
            }
        },
        Some(State::Run) => match kind {
            0 | 2 | 4 | 6 => Out::Started(s.wait(w, t)),
            1 | 3 => Out::Started(s.preempt(w, t, &hints(w))),
            5 => Out::Started(s.exit(w, t)),
            _ => {
                s.maybe_tick(t);
                Out::None
            }
        },
        Some(State::Ready) => match kind {
            0 => Out::Started(s.wait(w, t)),
            1 => Out::Started(s.exit(w, t)),
            _ => {
                s.maybe_tick(t);
                Out::None
            }
        },
    }
}

/// The workers of a round started by `w`: `w` and the next (up to 2) idle or unknown workers.
fn round_members<P: Policy + ?Sized>(s: &Sched<P>, w: WorkerId) -> Vec<WorkerId> {
    (0..WORKERS)
        .map(|i| (w + i) % WORKERS)
        .filter(|&x| matches!(s.state(x), None | Some(State::Wait)))
        .take(3)
        .collect()
}

/// The invariants of `Sched`'s module docs; `conserving`: also no slot idle while a worker is
/// ready (not with caps, which hold work back on purpose).
fn check_invariants<P: Policy + ?Sized>(
    s: &Sched<P>,
    conserving: bool,
) -> Result<(), TestCaseError> {
    let mut run = 0;
    let mut ready = Vec::new();
    for w in 0..WORKERS {
        match s.state(w) {
            Some(State::Run) => run += 1,
            Some(State::Ready) => ready.push(w),
            _ => {}
        }
    }
    prop_assert!(s.busy() <= s.slots());
    prop_assert_eq!(s.busy(), run);
    prop_assert_eq!(s.queued(), ready.len());
    let mut order = s.policy().order();
    prop_assert_eq!(order.len(), s.queued());
    order.sort_unstable();
    prop_assert_eq!(order, ready);
    if conserving && s.queued() > 0 {
        prop_assert_eq!(s.busy(), s.slots(), "work conserving");
    }
    Ok(())
}

/// `share` with a container tree: `a` (weight 300, inner `pos`) under the root, `b` (weight
/// 50, inner `content`) under `a`; with `caps`, `a` may use half a CPU and `b` a fifth, over a
/// window short enough for the caps to bite within a test's time scale.
fn share_tree(cfg: &PolicyConfig, caps: bool) -> Box<dyn Policy> {
    let (mut a, mut b) = (
        ContainerSpec::new(1, "a", 0).weight(300).inner("pos"),
        ContainerSpec::new(2, "b", 1).weight(50).inner("content"),
    );
    if caps {
        a = a.cap(0.5);
        b = b.cap(0.2);
    }
    Box::new(
        Share::new(&ShareSpec {
            containers: vec![a, b],
            cfg: cfg.clone(),
            window: 1000,
            ..ShareSpec::default()
        })
        .unwrap(),
    )
}

/// Every registered policy, and `share` built from a tree without and with caps.
fn subjects() -> impl Strategy<Value = &'static str> {
    let mut all = names();
    all.extend(["share-tree", "share-capped"]);
    prop::sample::select(all)
}

fn config() -> impl Strategy<Value = PolicyConfig> {
    (
        prop_oneof![
            Just(Tunable::Auto),
            (0u64..60).prop_map(|x| Tunable::Fixed(x * 10)),
            Just(Tunable::Fixed(u64::MAX))
        ],
        prop_oneof![Just(Tunable::Auto), (1u32..6).prop_map(Tunable::Fixed)],
        prop_oneof![Just(RwRule::Paper), Just(RwRule::Split)],
        200u64..2000,
        prop_oneof![Just(None), (0u64..150).prop_map(|b| Some(b * 10))],
    )
        .prop_map(
            |(slp, rw, rw_rule, period, starvation_bound)| PolicyConfig {
                slp,
                rw,
                rw_rule,
                period,
                starvation_bound,
                ..PolicyConfig::default()
            },
        )
}

/// [`config`] with either POS tail.
fn config_any_tail() -> impl Strategy<Value = PolicyConfig> {
    (
        config(),
        prop_oneof![Just(PosTail::Fifo), Just(PosTail::Episode)],
    )
        .prop_map(|(cfg, pos_tail)| PolicyConfig { pos_tail, ..cfg })
}

proptest! {
    // Eight subjects share the cases: 128 each on average.
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn sched_invariants_hold(
        name in subjects(),
        cfg in config_any_tail(),
        slots in 1usize..4,
        ops in ops(),
    ) {
        let policy = match name {
            "share-tree" => share_tree(&cfg, false),
            "share-capped" => share_tree(&cfg, true),
            _ => build(name, &cfg).unwrap(),
        };
        let mut s = Sched::new(slots, policy);
        let mut t = 0;
        for op in ops {
            apply(&mut s, &mut t, op);
            check_invariants(&s, name != "share-capped")?;
        }
    }
}

proptest! {

    #[test]
    fn pos_is_fifo_outside_a_bottleneck(cfg in config(), slots in 1usize..4, ops in ops()) {
        let mut pos = Sched::new(slots, build("pos", &cfg).unwrap());
        let mut fifo = Sched::new(slots, build("fifo", &cfg).unwrap());
        let (mut tp, mut tf) = (0, 0);
        for op in ops {
            let (busy, queued, before) = (pos.busy(), pos.queued(), pos.policy().stats());
            // Workers a round op would add at once (slots may be free while they join).
            let joining = match (op.0, pos.state(op.1)) {
                (5, None | Some(State::Wait)) => round_members(&pos, op.1).len(),
                _ => 1,
            };
            let (a, b) = (apply(&mut pos, &mut tp, op), apply(&mut fifo, &mut tf, op));
            if a == b && pos.policy().order() == fifo.policy().order() {
                continue;
            }
            // The first reordering: only in a bottleneck, and only by a promotion or by a
            // demotion inside the queue.
            prop_assert!(cfg.slp != Tunable::Fixed(u64::MAX), "nobody marked, yet not FIFO");
            prop_assert!(
                busy + queued + joining > slots && queued + joining > 1,
                "reordered outside a bottleneck"
            );
            let after = pos.policy().stats();
            prop_assert!(after.promotions > before.promotions || after.demotions > before.demotions);
            return Ok(());
        }
    }

    #[test]
    fn pos_matches_reference_model(
        slp in (0u64..60).prop_map(|x| x * 10),
        rw in 1u32..6,
        bound in prop_oneof![Just(None), (0u64..150).prop_map(|b| Some(b * 10))],
        slots in 1usize..4,
        ops in ops(),
    ) {
        let cfg = PolicyConfig {
            slp: Tunable::Fixed(slp),
            rw: Tunable::Fixed(rw),
            rw_rule: RwRule::Paper,
            pos_tail: Default::default(),
            period: 500,
            starvation_bound: bound,
            slp_floor: 0,
        };
        let mut real = Sched::new(slots, build("pos", &cfg).unwrap());
        let mut model = Sched::new(slots, Box::new(RefPos::new(slp, rw, bound)));
        let (mut t1, mut t2) = (0, 0);
        for op in ops {
            let a = apply(&mut real, &mut t1, op);
            let b = apply(&mut model, &mut t2, op);
            prop_assert_eq!(a, b, "op {:?}", op);
            prop_assert_eq!(real.policy().order(), model.policy().order(), "op {:?}", op);
            for w in 0..WORKERS {
                prop_assert_eq!(real.marked(w), model.marked(w), "worker {}", w);
            }
            let (x, y) = (real.policy().stats(), model.policy().stats());
            prop_assert_eq!(
                (x.promotions, x.demotions, x.starvation_rescues),
                (y.promotions, y.demotions, y.starvation_rescues)
            );
        }
    }

    #[test]
    fn slp_is_min_of_per_worker_longest_waits(
        lives in prop::collection::vec(
            (prop::collection::vec((1u64..3000, 1u64..50), 0..12), any::<bool>()),
            1..7,
        ),
        period in 500u64..3000,
    ) {
        // Build the log: every worker starts waiting at 0 and alternates wait / run; some exit
        // after their last run.
        let mut evs: Vec<(Nanos, WorkerId, Option<State>)> = Vec::new();
        for (w, (cycles, exits)) in lives.iter().enumerate() {
            let w = w as WorkerId;
            evs.push((0, w, Some(State::Wait)));
            let mut t = 0;
            for &(wait, run) in cycles {
                t += wait;
                evs.push((t, w, Some(State::Ready)));
                evs.push((t, w, Some(State::Run)));
                t += run;
                evs.push((t, w, Some(State::Wait)));
            }
            if *exits {
                evs.push((t + 1, w, None));
            }
        }
        evs.sort_by_key(|e| e.0); // stable: per-worker order kept
        let mut p = Pos::new(&PolicyConfig {
            slp: Tunable::Auto,
            rw: Tunable::Fixed(3),
            rw_rule: RwRule::Paper,
            pos_tail: Default::default(),
            period,
            starvation_bound: None,
            slp_floor: 0,
        }).unwrap();
        let ctx = |now| Ctx { now, busy: 0, slots: 1 };
        let mut expected = DEFAULT_SLP;
        let mut longest: BTreeMap<WorkerId, Nanos> = BTreeMap::new();
        let mut state: HashMap<WorkerId, (State, Nanos)> = HashMap::new();
        let mut next_tick = period;
        for (t, w, to) in evs {
            while t >= next_tick {
                p.tick(&ctx(next_tick));
                if let Some(&m) = longest.values().min() {
                    expected = m;
                }
                longest.clear();
                prop_assert_eq!(p.slp(), expected, "tick at {}", next_tick);
                next_tick += period;
            }
            match to {
                Some(to) => {
                    let prev = state.insert(w, (to, t));
                    if let Some((State::Wait, since)) = prev {
                        let e = longest.entry(w).or_insert(0);
                        *e = (*e).max(t - since);
                    }
                    p.on_transition(w, prev.map(|x| x.0), to, &ctx(t));
                }
                None => {
                    state.remove(&w);
                    p.on_exit(w, &ctx(t));
                }
            }
        }
        prop_assert_eq!(p.live_workers(), state.len());
    }

    #[test]
    fn guard_bounds_queue_wait(
        name in prop_oneof![Just("pos"), Just("content")],
        slots in 1usize..3,
        bound in 0u64..400,
        lives in prop::collection::vec(
            prop::collection::vec((0u64..400, 1u64..=MAX_BURST), 1..15),
            2..9,
        ),
    ) {
        let cfg = PolicyConfig {
            slp: Tunable::Auto,
            rw: Tunable::Auto,
            rw_rule: RwRule::Split,
            pos_tail: Default::default(),
            period: 300,
            slp_floor: 0,
            starvation_bound: Some(bound),
        };
        let stays = simulate(Sched::new(slots, build(name, &cfg).unwrap()), &lives);
        check_guard(&stays, bound)?;
    }
}

const MAX_BURST: Nanos = 50;

/// One stay in the ready queue: (worker, enqueue time, dequeue time, enqueue sequence number).
type Stay = (WorkerId, Nanos, Nanos, usize);

/// Virtual-time run: worker `w` repeats (wait, burst) from `lives[w]`, then stops. Returns its
/// stays in the ready queue.
fn simulate(mut s: Sched, lives: &[Vec<(Nanos, Nanos)>]) -> Vec<Stay> {
    // Events: (Reverse(time), Reverse(seq), worker, is_burst_end).
    let mut heap = BinaryHeap::new();
    let mut seq = 0usize;
    let mut push = |heap: &mut BinaryHeap<_>, t: Nanos, w: WorkerId, end: bool| {
        seq += 1;
        heap.push((std::cmp::Reverse(t), std::cmp::Reverse(seq), w, end));
    };
    let mut step = vec![0usize; lives.len()];
    for (w, life) in lives.iter().enumerate() {
        s.register(w as WorkerId, 0);
        push(&mut heap, life[0].0, w as WorkerId, false);
    }
    let mut open: HashMap<WorkerId, (Nanos, usize)> = HashMap::new();
    let mut stays = Vec::new();
    let mut enq = 0usize;
    while let Some((std::cmp::Reverse(t), _, w, end)) = heap.pop() {
        let wi = w as usize;
        let started = if end {
            step[wi] += 1;
            if let Some(&(wait, _)) = lives[wi].get(step[wi]) {
                push(&mut heap, t + wait, w, false);
            }
            s.wait(w, t)
        } else {
            match s.ready(w, t, &hints(w)) {
                Grant::RunNow => vec![w],
                Grant::Queued => {
                    enq += 1;
                    open.insert(w, (t, enq));
                    Vec::new()
                }
            }
        };
        for r in started {
            if let Some((since, n)) = open.remove(&r) {
                stays.push((r, since, t, n));
            }
            push(
                &mut heap,
                t + lives[r as usize][step[r as usize]].1,
                r,
                true,
            );
        }
    }
    assert!(open.is_empty(), "every queued worker was served");
    stays
}

fn check_guard(stays: &[Stay], bound: Nanos) -> Result<(), TestCaseError> {
    for &(w, enq, deq, n) in stays {
        let wait = deq - enq;
        if wait <= bound {
            continue;
        }
        let deadline = enq + bound;
        // Older workers still queued when `w` became overdue.
        let k = stays
            .iter()
            .filter(|&&(_, e, d, m)| m < n && e <= enq && d > deadline)
            .count() as u64;
        prop_assert!(
            wait <= bound + (k + 1) * MAX_BURST,
            "worker {} waited {} > bound {} + ({} + 1) * {}",
            w,
            wait,
            bound,
            k,
            MAX_BURST
        );
        // Nobody younger was served strictly after the deadline while `w` waited.
        for &(v, e, d, m) in stays {
            prop_assert!(
                !(m > n && d > deadline && d < deq),
                "worker {} (queued at {}) overtook overdue worker {} at {}",
                v,
                e,
                w,
                d
            );
        }
    }
    Ok(())
}

#[test]
fn without_the_guard_a_stream_of_text_starves_an_image() {
    // One slot, SLP 0. Worker 0 (an image: it never waits, so it is never marked) runs 5, then
    // is ready again at once, behind text worker 1. Marked text workers keep arriving every
    // 20 with bursts of 30 (overload): each lands at the head, ahead of worker 0.
    let run = |bound: Option<Nanos>| {
        let cfg = PolicyConfig {
            slp: Tunable::Fixed(0),
            rw: Tunable::Fixed(3),
            rw_rule: RwRule::Paper,
            pos_tail: Default::default(),
            period: 1_000_000,
            starvation_bound: bound,
            slp_floor: 0,
        };
        let mut lives: Vec<Vec<(Nanos, Nanos)>> = vec![vec![(0, 5), (0, 30)]];
        for i in 1..40u64 {
            lives.push(vec![(20 * i - 19, 30)]);
        }
        let stays = simulate(Sched::new(1, build("pos", &cfg).unwrap()), &lives);
        let wait = stays.iter().find(|s| s.0 == 0).map(|s| s.2 - s.1).unwrap();
        check_guard(&stays, bound.unwrap_or(Nanos::MAX / 4)).unwrap();
        wait
    };
    let starved = run(None);
    assert!(
        starved > 1000,
        "guard off: the image waits for the whole stream ({starved})"
    );
    let guarded = run(Some(200));
    assert!(
        guarded <= 200 + 30,
        "guard on: bound + one burst ({guarded})"
    );
    assert!(
        guarded > 200,
        "the stream did overtake it up to the bound ({guarded})"
    );
}

/// The POS rules written the plain way (a `Vec`, linear scans), fixed SLP and RW: the model
/// the real policy is compared with.
struct RefPos {
    slp: Nanos,
    rw: u32,
    bound: Option<Nanos>,
    /// (worker, since, seq), service order.
    q: Vec<(WorkerId, Nanos, u64)>,
    /// worker -> (state, since, marked, counter)
    w: HashMap<WorkerId, (State, Nanos, bool, u32)>,
    seq: u64,
    stats: PolicyStats,
}

impl RefPos {
    fn new(slp: Nanos, rw: u32, bound: Option<Nanos>) -> Self {
        Self {
            slp,
            rw,
            bound,
            q: Vec::new(),
            w: HashMap::new(),
            seq: 0,
            stats: PolicyStats::default(),
        }
    }

    fn change(&mut self, id: WorkerId) {
        let e = self.w.get_mut(&id).unwrap();
        e.3 += 1;
        if e.2 && e.3 >= self.rw {
            e.2 = false;
            self.stats.demotions += 1;
            if let Some(i) = self.q.iter().position(|x| x.0 == id) {
                let x = self.q.remove(i);
                self.q.push(x);
            }
        }
    }
}

impl Policy for RefPos {
    fn name(&self) -> &str {
        "refpos"
    }

    fn on_transition(&mut self, id: WorkerId, from: Option<State>, to: State, ctx: &Ctx) {
        let Some(&(prev, since, _, _)) = self.w.get(&id) else {
            self.w.insert(id, (to, ctx.now, false, 0));
            return;
        };
        let prev = from.unwrap_or(prev);
        let e = self.w.get_mut(&id).unwrap();
        e.0 = to;
        e.1 = ctx.now;
        if prev == State::Wait && to != State::Wait {
            if ctx.now - since > self.slp {
                e.2 = true;
                e.3 = 0;
            } else {
                self.change(id);
            }
        } else if prev != State::Wait && to == State::Wait {
            self.change(id);
        }
    }

    fn on_exit(&mut self, id: WorkerId, _ctx: &Ctx) {
        self.w.remove(&id);
    }

    fn enqueue(&mut self, id: WorkerId, _h: &Hints, ctx: &Ctx) {
        self.seq += 1;
        let entry = (id, ctx.now, self.seq);
        let marked = |w: &WorkerId| self.w.get(w).is_some_and(|e| e.2);
        if ctx.busy + self.q.len() + 1 > ctx.slots && !self.q.is_empty() && marked(&id) {
            let i = self.q.iter().take_while(|x| marked(&x.0)).count();
            self.q.insert(i, entry);
            self.stats.promotions += 1;
        } else {
            self.q.push(entry);
        }
    }

    fn dequeue(&mut self, ctx: &Ctx) -> Option<WorkerId> {
        if self.q.is_empty() {
            return None;
        }
        let mut i = 0;
        if let Some(b) = self.bound {
            let (j, x) = self.q.iter().enumerate().min_by_key(|(_, x)| x.2).unwrap();
            if ctx.now - x.1 > b && j != 0 {
                self.stats.starvation_rescues += 1;
                i = j;
            }
        }
        Some(self.q.remove(i).0)
    }

    fn remove(&mut self, id: WorkerId) -> bool {
        match self.q.iter().position(|x| x.0 == id) {
            Some(i) => {
                self.q.remove(i);
                true
            }
            None => false,
        }
    }

    fn len(&self) -> usize {
        self.q.len()
    }

    fn order(&self) -> Vec<WorkerId> {
        self.q.iter().map(|x| x.0).collect()
    }

    fn period(&self) -> Option<Nanos> {
        Some(500)
    }

    fn marked(&self, id: WorkerId) -> bool {
        self.w.get(&id).is_some_and(|e| e.2)
    }

    fn stats(&self) -> PolicyStats {
        self.stats.clone()
    }
}
