//! `share`: hierarchical weighted fair sharing of the server's own CPU slots between resource
//! containers (seed 003), with optional CPU caps (seed 000's reservations, seed 003's
//! "CGI-parent container restricted to 30% of the CPU").
//!
//! **The tree.** Containers form a tree under the implicit root container `0`; each has a
//! weight (1..=10000, default 100) and an optional cap, a fraction of one CPU. Every container
//! has its own ready queue, ordered by an *inner* policy built by name (`fifo`, `pos`,
//! `content`...: the registry's builder, handed to [`Share::from_spec`]), for the workers whose current request is charged to it
//! ([`Hints::container`]). A container's own workers compete with its child containers as if
//! they were one more child of weight [`OWN_WEIGHT`].
//!
//! **Selection: start-time fair queueing with virtual time.** Every container has a virtual
//! time `vt` that advances by `cpu / weight` when a burst charged to it (or to a descendant)
//! runs. To fill a slot, `dequeue` walks down from the root, at each level taking the eligible
//! backlogged child with the smallest `vt` (ties: own queue first, then lower id), and asks the
//! chosen container's inner policy for the worker, so the inner order is kept within a
//! container. A container that becomes backlogged after being idle starts at its parent's
//! current virtual time (it banks no credit while idle). Because the gate does not preempt and
//! several slots run at once, the container is charged an *estimate* (moving average of its
//! bursts) when its worker is picked, corrected with the real burst length when the worker
//! leaves [`State::Run`] (reported through [`Policy::on_transition`]).
//!
//! **Caps** work like CFS bandwidth control: a container with cap `c` may use `c * window` of
//! CPU per window ([`ShareSpec::window`], default 100 ms), counting its descendants and the
//! bursts still running. A container over its cap (or under an ancestor over its cap) is not
//! picked, even when nothing else is ready: **caps are not work conserving; weights are** (with
//! no cap in the way, a slot is never left idle while a worker is ready). As bursts are not
//! preempted, a burst may overrun the quota; the excess is carried as debt into the next
//! windows, so the long-run average stays at the cap. Mechanisms must call
//! [`crate::Sched::poll`] at least every [`Policy::period`] (a tenth of the window) so held-back
//! work resumes soon after a new window opens. [`Policy::admit`] applies the same check to a worker that would otherwise run
//! at once on a free slot, and tells `share` which container that burst is charged to.
//!
//! Transitions are passed to every inner policy (each sees the whole worker log, as if it were
//! the only policy), so POS inside a container learns from every worker. A hint naming an
//! unknown container is charged to the root and counted ([`Share::unknown_hints`]).

pub mod tree;

use std::collections::VecDeque;

pub use tree::{Field, Limits, Tree, TreeError, TreeNode};

use crate::config::BuildFn;
use crate::idhash::IdMap;

use crate::config::{PolicyConfig, PolicyError};
use crate::queue::{Ctx, Hints, Policy, PolicyStats};
use crate::worker::{State, WorkerId};
use crate::{Nanos, MS};

/// Weight of a container that does not say.
pub const DEFAULT_WEIGHT: u32 = 100;
/// Largest weight (as cgroup v2 `cpu.weight`).
pub const MAX_WEIGHT: u32 = 10_000;
/// Weight with which a container's own workers compete with its child containers.
pub const OWN_WEIGHT: u32 = 100;
/// Default cap enforcement window.
pub const DEFAULT_WINDOW: Nanos = 100 * MS;
/// Burst estimate before a container has completed any burst.
const INITIAL_EST: Nanos = MS;

/// One container of the tree (the root, id 0, may be listed to give it a cap).
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerSpec {
    /// Id used in [`Hints::container`]; 0 is the root.
    pub id: u32,
    /// Name for messages and stats.
    pub name: String,
    /// Parent container id (ignored for the root).
    pub parent: u32,
    /// Relative weight among siblings, 1..=10000.
    pub weight: u32,
    /// Cap as a fraction of one CPU (may exceed 1 with several slots), `None`: no cap.
    pub cap: Option<f64>,
    /// Inner ready-queue policy of this container; `None`: [`ShareSpec::inner`].
    pub inner: Option<String>,
}

impl ContainerSpec {
    /// A container with the default weight, no cap and the default inner policy.
    pub fn new(id: u32, name: &str, parent: u32) -> Self {
        Self {
            id,
            name: name.to_owned(),
            parent,
            weight: DEFAULT_WEIGHT,
            cap: None,
            inner: None,
        }
    }

    /// With weight `w` (1..=[`MAX_WEIGHT`]).
    pub fn weight(mut self, w: u32) -> Self {
        self.weight = w;
        self
    }

    /// With a cap of `c` CPUs.
    pub fn cap(mut self, c: f64) -> Self {
        self.cap = Some(c);
        self
    }

    /// With inner policy `name`.
    pub fn inner(mut self, name: &str) -> Self {
        self.inner = Some(name.to_owned());
        self
    }
}

/// Everything [`Share`] is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct ShareSpec {
    /// The containers besides the root (listing the root is allowed, to cap it).
    pub containers: Vec<ContainerSpec>,
    /// Default inner policy (registry name; not `share`).
    pub inner: String,
    /// Configuration the inner policies are built with.
    pub cfg: PolicyConfig,
    /// Cap enforcement window.
    pub window: Nanos,
}

impl Default for ShareSpec {
    fn default() -> Self {
        Self {
            containers: Vec::new(),
            inner: "fifo".into(),
            cfg: PolicyConfig::default(),
            window: DEFAULT_WINDOW,
        }
    }
}

fn invalid(msg: String) -> PolicyError {
    PolicyError::Invalid {
        policy: "share",
        msg,
    }
}

#[derive(Debug, Clone)]
struct Node {
    id: u32,
    name: String,
    parent: Option<usize>,
    children: Vec<usize>,
    weight: f64,
    /// CPU allowed per window.
    quota: Option<Nanos>,
    /// Virtual time among siblings.
    vt: f64,
    /// Virtual time of the own queue among this node's children.
    own_vt: f64,
    /// Virtual time of the last pick below this node (where newly backlogged children start).
    vnow: f64,
    /// Workers queued in this subtree.
    backlog: usize,
    /// Workers queued in this node's own queue.
    own_len: usize,
    /// CPU used in the current window by this subtree (completed parts of bursts).
    used: Nanos,
    /// Moving average of this node's own bursts.
    est: Nanos,
    /// CPU of completed bursts of this subtree.
    total: Nanos,
    /// Times work queued in this subtree was held back by a cap (at admission, or at a
    /// dequeue that found it blocked), for `Policy::held_back_in`.
    held: u64,
}

#[derive(Debug, Clone, Copy)]
struct Running {
    node: usize,
    start: Nanos,
    /// Part of the burst not yet added to the windows' `used`, from here on.
    counted_from: Nanos,
    /// Estimate charged at the pick.
    est: Nanos,
}

/// The `share` policy. See the module docs.
pub struct Share {
    nodes: Vec<Node>,
    index: IdMap<u32, usize>,
    inner: Vec<Box<dyn Policy>>,
    inner_next_tick: Vec<Option<Nanos>>,
    /// Queued worker -> node whose own queue holds it.
    queued: IdMap<WorkerId, usize>,
    /// Worker picked (or admitted) but not yet in [`State::Run`]: node and estimate.
    picked: IdMap<WorkerId, (usize, Nanos)>,
    /// Container of the worker's current request.
    current: IdMap<WorkerId, usize>,
    running: IdMap<WorkerId, Running>,
    window: Nanos,
    win_k: u64,
    unknown_hints: u64,
    held_back: u64,
}

impl std::fmt::Debug for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Share")
            .field("containers", &self.nodes.len())
            .field("queued", &self.queued.len())
            .field("running", &self.running.len())
            .finish()
    }
}

impl Share {
    /// Build the tree of `spec`, each container's inner policy made by `build` (the registry's
    /// `build` through `Share::new`). Errors: a tree [`Tree::new`] refuses
    /// (naming the container, field and value), an inner policy `build` refuses, a zero window.
    pub fn from_spec(spec: &ShareSpec, build: BuildFn) -> Result<Self, PolicyError> {
        if spec.window == 0 {
            return Err(invalid("window must be positive".into()));
        }
        let tree =
            Tree::new(&spec.containers, &Limits::default()).map_err(|e| invalid(e.to_string()))?;
        let mut nodes: Vec<Node> = Vec::new();
        let mut index = IdMap::default();
        let mut inner = Vec::new();
        for t in tree.nodes() {
            let c = &t.spec;
            let name = c.inner.as_deref().unwrap_or(&spec.inner);
            if name == "share" {
                return Err(invalid(format!(
                    "container `{}`: inner policy `share` cannot be nested in itself",
                    c.name
                )));
            }
            let p = build(name, &spec.cfg)
                .map_err(|e| invalid(format!("container `{}`: {e}", c.name)))?;
            let i = nodes.len();
            index.insert(c.id, i);
            if let Some(p) = t.parent {
                nodes[p].children.push(i);
            }
            nodes.push(Node {
                id: c.id,
                name: c.name.clone(),
                parent: t.parent,
                children: Vec::new(),
                weight: c.weight as f64,
                quota: c
                    .cap
                    .map(|f| (f * spec.window as f64).round().max(1.0) as Nanos),
                vt: 0.0,
                own_vt: 0.0,
                vnow: 0.0,
                backlog: 0,
                own_len: 0,
                used: 0,
                est: INITIAL_EST,
                total: 0,
                held: 0,
            });
            inner.push(p);
        }
        let len = inner.len();
        Ok(Self {
            nodes,
            index,
            inner,
            inner_next_tick: vec![None; len],
            queued: IdMap::default(),
            picked: IdMap::default(),
            current: IdMap::default(),
            running: IdMap::default(),
            window: spec.window,
            win_k: 0,
            unknown_hints: 0,
            held_back: 0,
        })
    }

    /// CPU (slot time) of the completed bursts charged to container `id` and its descendants.
    pub fn cpu_used(&self, id: u32) -> Option<Nanos> {
        self.index.get(&id).map(|&i| self.nodes[i].total)
    }

    /// Container ids and names, parents before children.
    pub fn containers(&self) -> Vec<(u32, &str)> {
        self.nodes.iter().map(|n| (n.id, n.name.as_str())).collect()
    }

    /// Workers queued in container `id`'s own queue.
    pub fn queued_in(&self, id: u32) -> usize {
        self.index.get(&id).map_or(0, |&i| self.nodes[i].own_len)
    }

    /// Hints that named an unknown container (charged to the root).
    pub fn unknown_hints(&self) -> u64 {
        self.unknown_hints
    }

    /// Times a dequeue or admission held work back because of a cap.
    pub fn held_back(&self) -> u64 {
        self.held_back
    }

    fn node_of(&mut self, hints: &Hints) -> usize {
        match self.index.get(&hints.container) {
            Some(&i) => i,
            None => {
                self.unknown_hints += 1;
                0
            }
        }
    }

    fn ancestors(&self, mut n: usize) -> impl Iterator<Item = usize> + '_ {
        let mut first = true;
        std::iter::from_fn(move || {
            if first {
                first = false;
                return Some(n);
            }
            let p = self.nodes[n].parent?;
            n = p;
            Some(p)
        })
    }

    /// Open a new window if `now` is past the current one.
    fn roll(&mut self, now: Nanos) {
        let k = now / self.window;
        if k <= self.win_k {
            return;
        }
        let elapsed = k - self.win_k;
        let ws = k * self.window;
        let runs: Vec<(usize, Nanos)> = self
            .running
            .values_mut()
            .filter(|r| r.counted_from < ws)
            .map(|r| {
                let d = ws - r.counted_from;
                r.counted_from = ws;
                (r.node, d)
            })
            .collect();
        for (node, d) in runs {
            self.add_used(node, d);
        }
        for n in &mut self.nodes {
            n.used = match n.quota {
                Some(q) => n.used.saturating_sub(q.saturating_mul(elapsed)),
                None => 0,
            };
        }
        self.win_k = k;
    }

    fn add_used(&mut self, node: usize, d: Nanos) {
        let path: Vec<usize> = self.ancestors(node).collect();
        for a in path {
            self.nodes[a].used += d;
        }
    }

    /// Which nodes are over their cap (or under an ancestor that is), at `now`.
    fn blocked(&self, now: Nanos) -> Vec<bool> {
        let mut use_now: Vec<Nanos> = self.nodes.iter().map(|n| n.used).collect();
        for r in self.running.values() {
            let d = now.saturating_sub(r.counted_from);
            for a in self.ancestors(r.node) {
                use_now[a] += d;
            }
        }
        let mut blocked = vec![false; self.nodes.len()];
        // Parents come before children in `nodes`.
        for i in 0..self.nodes.len() {
            let n = &self.nodes[i];
            let over = n.quota.is_some_and(|q| use_now[i] >= q);
            blocked[i] = over || n.parent.is_some_and(|p| blocked[p]);
        }
        blocked
    }

    /// Move the virtual clocks along the path to `leaf` as a pick there happens.
    fn advance_vnow(nodes: &mut [Node], leaf: usize) {
        let own = nodes[leaf].own_vt;
        nodes[leaf].vnow = nodes[leaf].vnow.max(own);
        let mut n = leaf;
        while let Some(p) = nodes[n].parent {
            let vt = nodes[n].vt;
            nodes[p].vnow = nodes[p].vnow.max(vt);
            n = p;
        }
    }

    /// Charge `amount` nanoseconds (may be negative: a correction) to `leaf`'s own queue and
    /// every container above it.
    fn charge(nodes: &mut [Node], leaf: usize, amount: f64) {
        nodes[leaf].own_vt += amount / OWN_WEIGHT as f64;
        let mut n = leaf;
        while let Some(p) = nodes[n].parent {
            nodes[n].vt += amount / nodes[n].weight;
            n = p;
        }
    }

    /// Bookkeeping when a worker joins `leaf`'s own queue.
    fn push_count(&mut self, leaf: usize) {
        if self.nodes[leaf].own_len == 0 {
            self.nodes[leaf].own_vt = self.nodes[leaf].own_vt.max(self.nodes[leaf].vnow);
        }
        self.nodes[leaf].own_len += 1;
        let path: Vec<usize> = self.ancestors(leaf).collect();
        for n in path {
            if self.nodes[n].backlog == 0 {
                if let Some(p) = self.nodes[n].parent {
                    let v = self.nodes[p].vnow;
                    self.nodes[n].vt = self.nodes[n].vt.max(v);
                }
            }
            self.nodes[n].backlog += 1;
        }
    }

    fn pop_count(&mut self, leaf: usize) {
        self.nodes[leaf].own_len = self.nodes[leaf].own_len.saturating_sub(1);
        let path: Vec<usize> = self.ancestors(leaf).collect();
        for n in path {
            self.nodes[n].backlog = self.nodes[n].backlog.saturating_sub(1);
        }
    }

    /// Record that `worker` from `leaf` was picked: charge the estimate.
    fn mark_picked(&mut self, worker: WorkerId, leaf: usize) {
        Self::advance_vnow(&mut self.nodes, leaf);
        let est = self.nodes[leaf].est;
        Self::charge(&mut self.nodes, leaf, est as f64);
        self.picked.insert(worker, (leaf, est));
    }

    fn end_burst(&mut self, worker: WorkerId, now: Nanos) {
        let Some(r) = self.running.remove(&worker) else {
            return;
        };
        let len = now.saturating_sub(r.start);
        Self::charge(&mut self.nodes, r.node, len as f64 - r.est as f64);
        self.add_used(r.node, now.saturating_sub(r.counted_from));
        let path: Vec<usize> = self.ancestors(r.node).collect();
        for a in path {
            self.nodes[a].total += len;
        }
        let n = &mut self.nodes[r.node];
        n.est = (3 * n.est + len) / 4;
    }
}

impl Policy for Share {
    fn reads_hints(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        "share"
    }

    fn slot_time_in(&self, container: u32) -> Option<Nanos> {
        self.index.get(&container).map(|&i| self.nodes[i].total)
    }

    fn held_back_in(&self, container: u32) -> Option<u64> {
        self.index.get(&container).map(|&i| self.nodes[i].held)
    }

    fn set_cap(&mut self, container: u32, cap: Option<f64>) -> bool {
        let Some(&i) = self.index.get(&container) else {
            return false;
        };
        // The debt already carried (`used`) stays: a smaller cap takes longer to pay it.
        self.nodes[i].quota = cap
            .filter(|f| f.is_finite() && *f > 0.0)
            .map(|f| (f * self.window as f64).round().max(1.0) as Nanos);
        true
    }

    fn on_transition(&mut self, worker: WorkerId, from: Option<State>, to: State, ctx: &Ctx) {
        self.roll(ctx.now);
        if from == Some(State::Run) && to != State::Run {
            self.end_burst(worker, ctx.now);
        }
        if to == State::Run && from != Some(State::Run) {
            let (node, est) = self
                .picked
                .remove(&worker)
                .unwrap_or_else(|| (self.current.get(&worker).copied().unwrap_or(0), 0));
            self.running.insert(
                worker,
                Running {
                    node,
                    start: ctx.now,
                    counted_from: ctx.now,
                    est,
                },
            );
        }
        for p in &mut self.inner {
            p.on_transition(worker, from, to, ctx);
        }
    }

    fn on_exit(&mut self, worker: WorkerId, ctx: &Ctx) {
        if let Some(leaf) = self.queued.remove(&worker) {
            self.inner[leaf].remove(worker);
            self.pop_count(leaf);
        }
        self.end_burst(worker, ctx.now);
        self.picked.remove(&worker);
        self.current.remove(&worker);
        for p in &mut self.inner {
            p.on_exit(worker, ctx);
        }
    }

    fn admit(&mut self, worker: WorkerId, hints: &Hints, ctx: &Ctx) -> bool {
        self.roll(ctx.now);
        let leaf = self.node_of(hints);
        self.current.insert(worker, leaf);
        if self.blocked(ctx.now)[leaf] {
            self.held_back += 1;
            let path: Vec<usize> = self.ancestors(leaf).collect();
            for a in path {
                self.nodes[a].held += 1;
            }
            return false;
        }
        self.mark_picked(worker, leaf);
        true
    }

    fn enqueue(&mut self, worker: WorkerId, hints: &Hints, ctx: &Ctx) {
        self.roll(ctx.now);
        let leaf = self.node_of(hints);
        self.current.insert(worker, leaf);
        if let Some(old) = self.queued.remove(&worker) {
            // Enqueued twice without a dequeue: keep one entry.
            self.inner[old].remove(worker);
            self.pop_count(old);
        }
        self.inner[leaf].enqueue(worker, hints, ctx);
        self.queued.insert(worker, leaf);
        self.push_count(leaf);
    }

    fn dequeue(&mut self, ctx: &Ctx) -> Option<WorkerId> {
        self.roll(ctx.now);
        loop {
            if self.nodes[0].backlog == 0 {
                return None;
            }
            let blocked = self.blocked(ctx.now);
            let own_len: Vec<usize> = self.nodes.iter().map(|n| n.own_len).collect();
            let backlog: Vec<usize> = self.nodes.iter().map(|n| n.backlog).collect();
            for leaf in 0..self.nodes.len() {
                if blocked[leaf] && own_len[leaf] > 0 {
                    let path: Vec<usize> = self.ancestors(leaf).collect();
                    for a in path {
                        self.nodes[a].held += 1;
                    }
                }
            }
            let Some(leaf) = pick_in(&self.nodes, 0, &blocked, &own_len, &backlog) else {
                self.held_back += 1;
                return None;
            };
            match self.inner[leaf].dequeue(ctx) {
                Some(w) => {
                    self.queued.remove(&w);
                    self.pop_count(leaf);
                    self.mark_picked(w, leaf);
                    return Some(w);
                }
                None => {
                    // The inner policy has nothing although we counted some: resynchronise.
                    let stale: Vec<WorkerId> = self
                        .queued
                        .iter()
                        .filter(|(_, &l)| l == leaf)
                        .map(|(&w, _)| w)
                        .collect();
                    for w in stale {
                        self.queued.remove(&w);
                        self.pop_count(leaf);
                    }
                }
            }
        }
    }

    fn remove(&mut self, worker: WorkerId) -> bool {
        match self.queued.remove(&worker) {
            Some(leaf) => {
                self.inner[leaf].remove(worker);
                self.pop_count(leaf);
                true
            }
            None => false,
        }
    }

    fn len(&self) -> usize {
        self.queued.len()
    }

    fn order(&self) -> Vec<WorkerId> {
        // Simulate the picks on copies, charging each pick its container's estimate, with the
        // caps as they are now (held-back containers come last).
        let mut nodes = self.nodes.clone();
        let mut queues: Vec<VecDeque<WorkerId>> =
            self.inner.iter().map(|p| p.order().into()).collect();
        let mut own_len: Vec<usize> = queues.iter().map(VecDeque::len).collect();
        let mut backlog = vec![0; nodes.len()];
        for (i, q) in queues.iter().enumerate() {
            for a in self.ancestors(i) {
                backlog[a] += q.len();
            }
        }
        let blocked = self.blocked(self.win_k * self.window);
        let mut out = Vec::with_capacity(self.queued.len());
        while let Some(leaf) = pick_in(&nodes, 0, &blocked, &own_len, &backlog) {
            let Some(w) = queues[leaf].pop_front() else {
                break;
            };
            out.push(w);
            own_len[leaf] -= 1;
            for a in self.ancestors(leaf) {
                backlog[a] -= 1;
            }
            Self::advance_vnow(&mut nodes, leaf);
            let est = nodes[leaf].est as f64;
            Self::charge(&mut nodes, leaf, est);
        }
        for q in queues {
            out.extend(q);
        }
        out
    }

    fn tick(&mut self, ctx: &Ctx) {
        self.roll(ctx.now);
        for (p, next) in self.inner.iter_mut().zip(&mut self.inner_next_tick) {
            let Some(period) = p.period() else {
                continue;
            };
            match *next {
                None => *next = Some(ctx.now + period),
                Some(t) if ctx.now >= t => {
                    p.tick(ctx);
                    let missed = (ctx.now - t) / period;
                    *next = Some(t + (missed + 1) * period);
                }
                _ => {}
            }
        }
    }

    /// A tenth of the cap window (at least 1 ms), so held-back work resumes soon after a new
    /// window opens; inner policies are still ticked at their own periods.
    fn period(&self) -> Option<Nanos> {
        let own = (self.window / 10).max(MS).min(self.window);
        let inner = self.inner.iter().filter_map(|p| p.period()).min();
        Some(inner.map_or(own, |p| p.min(own)))
    }

    fn on_quantum_expiry(&mut self, worker: WorkerId, ctx: &Ctx) -> Option<Nanos> {
        let leaf = self.running.get(&worker).map_or(0, |r| r.node);
        self.inner[leaf].on_quantum_expiry(worker, ctx)
    }

    fn marked(&self, worker: WorkerId) -> bool {
        let leaf = self.current.get(&worker).copied().unwrap_or(0);
        self.inner[leaf].marked(worker)
    }

    fn stats(&self) -> PolicyStats {
        let mut s = PolicyStats::default();
        for p in &self.inner {
            let x = p.stats();
            s.promotions += x.promotions;
            s.demotions += x.demotions;
            s.starvation_rescues += x.starvation_rescues;
            s.slp = s.slp.or(x.slp);
            s.rw = s.rw.or(x.rw);
        }
        s
    }
}

/// The node whose own queue is served next, by virtual time, skipping blocked subtrees.
fn pick_in(
    nodes: &[Node],
    n: usize,
    blocked: &[bool],
    own_len: &[usize],
    backlog: &[usize],
) -> Option<usize> {
    if blocked[n] {
        return None;
    }
    let node = &nodes[n];
    let mut cands: Vec<(f64, bool, u32, usize)> = Vec::new();
    if own_len[n] > 0 {
        cands.push((node.own_vt, false, node.id, n));
    }
    for &c in &node.children {
        if backlog[c] > 0 && !blocked[c] {
            cands.push((nodes[c].vt, true, nodes[c].id, c));
        }
    }
    cands.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    for (_, is_child, _, i) in cands {
        if !is_child {
            return Some(n);
        }
        if let Some(x) = pick_in(nodes, i, blocked, own_len, backlog) {
            return Some(x);
        }
    }
    None
}

/// Registry entry: a flat `share` (root container only, inner `fifo`). The server builds the
/// tree from its configuration with `Share::new`.
pub const ENTRY: crate::config::Entry = crate::config::Entry {
    name: "share",
    about: "hierarchical weighted fair sharing between resource containers, with CPU caps \
            (flat and fifo-ordered unless built from a container tree)",
    build: |cfg| {
        let spec = ShareSpec {
            cfg: cfg.clone(),
            ..ShareSpec::default()
        };
        Ok(Box::new(Share::from_spec(&spec, fifo_only)?))
    },
};

/// The inner policies of the registered flat `share`: `fifo` only.
fn fifo_only(name: &str, cfg: &PolicyConfig) -> Result<Box<dyn Policy>, PolicyError> {
    match name {
        "fifo" => (crate::fifo::ENTRY.build)(cfg),
        _ => Err(PolicyError::Unknown {
            name: name.to_owned(),
            known: "fifo".into(),
        }),
    }
}
