//! A cluster of back ends behind a front end, driven by a trace (seed 004's LARD simulator).
//!
//! **Back end**: a CPU (FIFO), a disk ([`Disk`] with the LARD paper's [`DiskModel`]) and an
//! LRU file cache ([`Lru`]) of `cache` bytes. A request costs CPU for connection setup, then,
//! on a cache miss, a disk read of the whole file (the file is then cached), then CPU for
//! transmission (per 512 bytes) and teardown. The numbers ([`Costs`]) are the LARD paper's
//! (§4.1: measured on a 300 MHz Pentium II running FreeBSD 2.2.5 and a fast experimental
//! server): 145 µs setup, 145 µs teardown, 40 µs per 512 bytes; 8 KB from the cache at about
//! 1075 requests/s.
//!
//! **Front end**: a [`policy::dispatch`] policy picks the node of each request given the
//! nodes' loads (active connections). As in the paper's simulations, the cluster is driven
//! at saturation by a closed loop: at most `(n-1) * T_high + T_low - 1` requests are in the
//! cluster ([`DispatchConfig::admission_limit`]); each completion admits the next request of
//! the trace. The network is not a bottleneck.
//!
//! **Measured** after a warm-up share of the trace: throughput (requests per second of
//! virtual time), cache hit ratio, and the imbalance `max / mean` of the requests each node
//! served.

use std::collections::VecDeque;

use policy::dispatch::{self, DispatchConfig, Route};
use policy::Nanos;
use serde::Serialize;

use crate::cache::Lru;
use crate::disk::{Disk, DiskModel};
use crate::engine::Engine;
use crate::pconn::{connection_lengths, FrontCosts, Mechanism};
use crate::trace::Trace;
use crate::SimError;

/// CPU cost of serving a request on a back end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Costs {
    /// Per connection, before the first byte (LARD paper: 145 µs at 300 MHz).
    pub setup: Nanos,
    /// Per connection, at the end (LARD paper: 145 µs).
    pub teardown: Nanos,
    /// Per 512 bytes transmitted.
    pub per_512: Nanos,
    /// Per further request on a persistent connection, or per request arriving on a pooled
    /// connection (from a relaying front end, or forwarded by another back end): reading and
    /// parsing it and opening the file, without the connection's setup. **Estimate**: 50 µs,
    /// about a third of the LARD paper's 145 µs setup (which includes the handshake and
    /// `accept`).
    pub per_request: Nanos,
    /// Back-end forwarding, on the node that handles the connection: issuing the lateral
    /// request to the node that serves the target (over a pooled connection) and reading its
    /// response header. **Estimate**: 50 µs, as [`Costs::per_request`].
    pub forward_request: Nanos,
    /// Back-end forwarding, on the handling node: per 512 bytes of response received from the
    /// serving node (then sent to the client at [`Costs::per_512`]). **Estimate**: 40 µs, the
    /// LARD paper's send cost taken for the receive path too.
    pub forward_per_512: Nanos,
}

impl Default for Costs {
    fn default() -> Self {
        Self {
            setup: 145_000,
            teardown: 145_000,
            per_512: 40_000,
            per_request: 50_000,
            forward_request: 50_000,
            forward_per_512: 40_000,
        }
    }
}

impl Costs {
    /// Every cost times `k`: a back end whose CPU is `1 / k` times as fast as the LARD paper's
    /// 300 MHz Pentium II (the cluster lab's check measures `k` for its back ends).
    pub fn scaled(&self, k: f64) -> Costs {
        let s = |t: Nanos| (t as f64 * k).round() as Nanos;
        Costs {
            setup: s(self.setup),
            teardown: s(self.teardown),
            per_512: s(self.per_512),
            per_request: s(self.per_request),
            forward_request: s(self.forward_request),
            forward_per_512: s(self.forward_per_512),
        }
    }

    /// CPU to serve one request of `size` bytes from the cache on a pooled connection (what a
    /// relaying front end sends a back end): [`Costs::per_request`] plus the bytes.
    pub fn pooled_request(&self, size: u64) -> Nanos {
        self.per_request + self.bytes(size)
    }

    /// CPU to transmit a file of `size` bytes and tear the connection down.
    pub fn transmit(&self, size: u64) -> Nanos {
        self.bytes(size) + self.teardown
    }

    /// CPU to transmit `size` bytes.
    pub fn bytes(&self, size: u64) -> Nanos {
        size.div_ceil(512) * self.per_512
    }

    /// CPU the handling node spends relaying a forwarded response of `size` bytes: the lateral
    /// request, receiving the response, sending it to the client.
    pub fn forwarding(&self, size: u64) -> Nanos {
        self.forward_request + size.div_ceil(512) * (self.forward_per_512 + self.per_512)
    }
}

/// One cluster run.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterConfig {
    /// Back ends.
    pub nodes: usize,
    /// Registry name in [`policy::dispatch`].
    pub policy: String,
    /// Parameters of the distribution policy.
    pub dispatch: DispatchConfig,
    /// File cache per node, bytes.
    pub cache: u64,
    /// CPU costs per request.
    pub costs: Costs,
    /// Disk of every back end.
    pub disk: DiskModel,
    /// Share of the trace served before measuring (cache warm-up).
    pub warmup: f64,
    /// Start every cache full of the most popular files (file `i` has popularity rank
    /// `i + 1`): about the steady state of an LRU cache under independent Zipf requests, so a
    /// finite trace measures steady state rather than cold start.
    pub prewarm: bool,
}

/// Client connections and the front end ([`run_with`]); the default is the LARD paper's model
/// that [`run`] runs: HTTP/1.0, front end not modelled.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ConnModel {
    /// How a connection's requests reach the back ends.
    pub mechanism: Mechanism,
    /// Mean requests per connection (geometric; ignored by [`Mechanism::Close`]).
    pub per_conn: f64,
    /// Seed of the connection grouping (`pconn::connection_lengths`).
    pub seed: u64,
    /// The front end's CPU costs ([`FrontCosts::none`]: not modelled).
    pub front: FrontCosts,
}

impl Default for ConnModel {
    fn default() -> Self {
        Self {
            mechanism: Mechanism::Close,
            per_conn: 1.0,
            seed: 1,
            front: FrontCosts::none(),
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterResult {
    /// Back ends.
    pub nodes: usize,
    /// Registry name of the distribution policy.
    pub policy: String,
    /// Requests per second.
    pub throughput: f64,
    /// Requests served from a file cache, over the measured ones.
    pub hit_ratio: f64,
    /// Max over mean of the requests served per node.
    pub max_over_mean_load: f64,
    /// Mean CPU utilisation over the nodes.
    pub cpu_util: f64,
    /// Mean disk utilisation over the nodes.
    pub disk_util: f64,
    /// Requests measured (after the warm-up).
    pub measured: u64,
    /// Events the engine processed.
    pub events: u64,
    /// Reassignments and replications the policy made.
    pub reassignments: u64,
    /// Utilisation of the front end's CPU (0 when it is not modelled).
    pub front_util: f64,
    /// Front-end CPU per measured request, µs (0 when it is not modelled).
    pub front_us_per_req: f64,
    /// Measured requests fetched by a connection's node from another node (back-end
    /// forwarding), over the measured requests.
    pub forwarded_ratio: f64,
    /// Measured requests whose connection moved to another node (multiple handoff), over the
    /// measured requests.
    pub migrated_ratio: f64,
    /// Client connections in the run.
    pub connections: usize,
}

#[derive(Debug, Clone, Copy)]
/// An event: the CPU, disk or front end finished its current work.
enum Ev {
    Cpu { node: usize },
    Disk { node: usize },
    Front,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// CPU: setup or per-request work (then look the file up).
    Setup,
    /// CPU: transmit (+ teardown on a connection's last request).
    Send,
    /// CPU on the connection's node: relay a response forwarded from another node.
    Relay,
}

/// Work on the front end's CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrontJob {
    /// Read a request and decide where it goes.
    Dispatch(usize),
    /// Hand the connection of a request over to another node (multiple handoff).
    Migrate(usize, usize),
    /// Relay a request's response to the client (relaying front end).
    Respond(usize),
}

struct Node {
    cpu: VecDeque<(usize, Nanos, Stage)>,
    cpu_busy: bool,
    cpu_ns: u64,
    disk: Disk,
    disk_reqs: VecDeque<usize>,
    cache: Lru,
    served: u64,
    cpu_ns_from: u64,
    disk_ns_from: u64,
}

/// A request in flight.
#[derive(Debug, Clone, Copy, Default)]
struct Req {
    file: u32,
    conn: u32,
    /// The node whose cache or disk serves it.
    server: u32,
    /// Fetched by the connection's node from `server`.
    forwarded: bool,
    /// The connection's last request.
    last: bool,
}

/// A client connection: consecutive requests of the trace.
#[derive(Debug, Clone, Copy, Default)]
struct Conn {
    /// Next request (trace index).
    next: usize,
    /// One past its last request.
    end: usize,
    /// Its node (pinned mechanisms), once its first request is assigned.
    handler: Option<usize>,
}

/// The cluster in motion.
struct Sim<'a> {
    cfg: &'a ClusterConfig,
    model: ConnModel,
    trace: &'a Trace,
    policy: Box<dyn dispatch::Dispatch>,
    nodes: Vec<Node>,
    /// The policy's view: active connections per node (requests in flight for per-request
    /// mechanisms), plus forwarded requests in service.
    loads: Vec<u32>,
    /// Disk reads waiting or in service per node (for [`Dispatch::route`]).
    disk_q: Vec<u32>,
    eng: Engine<Ev>,
    reqs: Vec<Req>,
    conns: Vec<Conn>,
    next_conn: usize,
    front: VecDeque<(FrontJob, Nanos)>,
    front_busy: bool,
    front_ns: u64,
    front_ns_from: u64,
    warm: usize,
    completed: usize,
    t_warm: Nanos,
    hits: u64,
    lookups: u64,
    forwarded: u64,
    migrated: u64,
}

impl Sim<'_> {
    fn push_cpu(&mut self, nid: usize, req: usize, cost: Nanos, st: Stage) {
        let node = &mut self.nodes[nid];
        node.cpu.push_back((req, cost, st));
        if !node.cpu_busy {
            node.cpu_busy = true;
            node.cpu_ns += cost;
            self.eng.after(cost, Ev::Cpu { node: nid });
        }
    }

    fn push_front(&mut self, job: FrontJob, cost: Nanos) {
        self.front.push_back((job, cost));
        if !self.front_busy {
            self.front_busy = true;
            self.front_ns += cost;
            self.eng.after(cost, Ev::Front);
        }
    }

    /// Admit the next connection and issue its first request.
    fn admit(&mut self) {
        let c = self.next_conn;
        self.next_conn += 1;
        self.issue(c);
    }

    /// Issue connection `c`'s next request: through the front end's CPU if it is modelled.
    fn issue(&mut self, c: usize) {
        let i = self.conns[c].next;
        self.conns[c].next += 1;
        self.reqs[i] = Req {
            file: self.trace.requests[i],
            conn: c as u32,
            last: self.conns[c].next == self.conns[c].end,
            ..Req::default()
        };
        if self.model.front.modelled() {
            let cost = if i == self.conn_start(c) {
                self.model.front.conn
            } else {
                self.model.front.request
            };
            self.push_front(FrontJob::Dispatch(i), cost);
        } else {
            self.dispatch(i);
        }
    }

    fn conn_start(&self, c: usize) -> usize {
        // Connections are consecutive: c starts where c - 1 ended.
        if c == 0 {
            0
        } else {
            self.conns[c - 1].end
        }
    }

    /// Decide where request `i` goes and start it there.
    fn dispatch(&mut self, i: usize) {
        let n = self.cfg.nodes;
        let now = self.eng.now();
        let r = self.reqs[i];
        let c = r.conn as usize;
        let target = u64::from(r.file);
        let costs = self.cfg.costs;
        match (self.model.mechanism, self.conns[c].handler) {
            (Mechanism::Close, _) => {
                let node = self.policy.assign(target, &self.loads, now).min(n - 1);
                self.loads[node] += 1;
                self.start(i, node, costs.setup);
            }
            (Mechanism::Relay, _) => {
                let node = self.policy.assign(target, &self.loads, now).min(n - 1);
                self.loads[node] += 1;
                self.start(i, node, costs.per_request);
            }
            (_, None) => {
                let node = self.policy.assign(target, &self.loads, now).min(n - 1);
                self.loads[node] += 1;
                self.conns[c].handler = Some(node);
                self.start(i, node, costs.setup);
            }
            (Mechanism::Pin, Some(h)) => self.start(i, h, costs.per_request),
            (Mechanism::Forward, Some(h)) => {
                match self.policy.route(target, h, &self.loads, &self.disk_q, now) {
                    Route::Forward { server, .. } if server != h && server < n => {
                        self.loads[server] += 1;
                        self.reqs[i].forwarded = true;
                        if i >= self.warm {
                            self.forwarded += 1;
                        }
                        self.start(i, server, costs.per_request);
                    }
                    _ => self.start(i, h, costs.per_request),
                }
            }
            (Mechanism::Handoff, Some(h)) => {
                let node = self.policy.assign(target, &self.loads, now).min(n - 1);
                if node == h {
                    self.start(i, h, costs.per_request);
                } else if self.model.front.modelled() {
                    self.push_front(FrontJob::Migrate(i, node), self.model.front.conn);
                } else {
                    self.migrate(i, node);
                }
            }
        }
    }

    /// Move request `i`'s connection to `node` (multiple handoff) and start it there.
    fn migrate(&mut self, i: usize, node: usize) {
        let c = self.reqs[i].conn as usize;
        if let Some(h) = self.conns[c].handler {
            self.loads[h] -= 1;
        }
        self.loads[node] += 1;
        self.conns[c].handler = Some(node);
        if i >= self.warm {
            self.migrated += 1;
        }
        self.start(i, node, self.cfg.costs.setup);
    }

    fn start(&mut self, i: usize, node: usize, cost: Nanos) {
        self.reqs[i].server = node as u32;
        self.push_cpu(node, i, cost, Stage::Setup);
    }

    /// CPU to send request `i`'s response from its server: the connection's teardown on its
    /// last request when the server holds the connection.
    fn send_cost(&self, i: usize) -> Nanos {
        let r = self.reqs[i];
        let size = self.trace.sizes[r.file as usize];
        let holds = !r.forwarded && self.model.mechanism != Mechanism::Relay;
        if r.last && holds {
            self.cfg.costs.transmit(size)
        } else {
            self.cfg.costs.bytes(size)
        }
    }

    fn on_cpu(&mut self, node: usize, now: Nanos) {
        let nd = &mut self.nodes[node];
        let Some((req, _, stage)) = nd.cpu.pop_front() else {
            return;
        };
        nd.cpu_busy = false;
        if let Some(&(_, cost, _)) = nd.cpu.front() {
            nd.cpu_busy = true;
            nd.cpu_ns += cost;
            self.eng.after(cost, Ev::Cpu { node });
        }
        let r = self.reqs[req];
        let size = self.trace.sizes[r.file as usize];
        match stage {
            Stage::Setup => {
                let hit = self.nodes[node].cache.get(u64::from(r.file));
                if req >= self.warm {
                    self.lookups += 1;
                    self.hits += u64::from(hit);
                }
                if hit {
                    let cost = self.send_cost(req);
                    self.push_cpu(node, req, cost, Stage::Send);
                } else {
                    self.nodes[node].disk_reqs.push_back(req);
                    self.disk_q[node] += 1;
                    if let Some(t) =
                        self.nodes[node]
                            .disk
                            .submit(req as u64, self.cfg.disk.file_time(size), now)
                    {
                        self.eng.at(t, Ev::Disk { node });
                    }
                }
            }
            Stage::Send if r.forwarded => {
                self.loads[node] -= 1;
                let h = self.conns[r.conn as usize].handler.unwrap_or(node);
                let mut cost = self.cfg.costs.forwarding(size);
                if r.last {
                    cost += self.cfg.costs.teardown;
                }
                self.push_cpu(h, req, cost, Stage::Relay);
            }
            Stage::Send if self.model.mechanism == Mechanism::Relay => {
                self.loads[node] -= 1;
                if self.model.front.modelled() {
                    let cost = size.div_ceil(512) * self.model.front.relay_per_512;
                    self.push_front(FrontJob::Respond(req), cost);
                } else {
                    self.complete(req, now);
                }
            }
            Stage::Send | Stage::Relay => self.complete(req, now),
        }
    }

    fn on_disk(&mut self, node: usize, now: Nanos) {
        if let Some((_, Some(t))) = self.nodes[node].disk.complete(now) {
            self.eng.at(t, Ev::Disk { node });
        }
        if let Some(req) = self.nodes[node].disk_reqs.pop_front() {
            self.disk_q[node] -= 1;
            let file = self.reqs[req].file;
            let size = self.trace.sizes[file as usize];
            self.nodes[node].cache.insert(u64::from(file), size);
            let cost = self.send_cost(req);
            self.push_cpu(node, req, cost, Stage::Send);
        }
    }

    fn on_front(&mut self, now: Nanos) {
        let Some((job, _)) = self.front.pop_front() else {
            return;
        };
        self.front_busy = false;
        if let Some(&(_, cost)) = self.front.front() {
            self.front_busy = true;
            self.front_ns += cost;
            self.eng.after(cost, Ev::Front);
        }
        match job {
            FrontJob::Dispatch(i) => self.dispatch(i),
            FrontJob::Migrate(i, node) => self.migrate(i, node),
            FrontJob::Respond(i) => self.complete(i, now),
        }
    }

    /// Request `i` is done: the connection's next request, or the next connection.
    fn complete(&mut self, i: usize, now: Nanos) {
        let r = self.reqs[i];
        let c = r.conn as usize;
        let node = r.server as usize;
        if self.model.mechanism.per_request() && self.model.mechanism != Mechanism::Handoff {
            // Close: the connection's load; relay: the request's (already released above).
            if self.model.mechanism == Mechanism::Close {
                self.loads[node] -= 1;
            }
        } else if r.last {
            if let Some(h) = self.conns[c].handler {
                self.loads[h] -= 1;
            }
        }
        self.completed += 1;
        if i >= self.warm {
            self.nodes[node].served += 1;
        }
        if self.completed == self.warm {
            self.t_warm = now;
            self.front_ns_from = self.front_ns;
            for x in self.nodes.iter_mut() {
                x.cpu_ns_from = x.cpu_ns;
                x.disk_ns_from = x.disk.busy_ns();
            }
        }
        if !r.last {
            self.issue(c);
        } else if self.next_conn < self.conns.len() {
            self.admit();
        }
    }
}

/// Run the trace through the cluster: the LARD paper's model (HTTP/1.0, front end not
/// modelled).
pub fn run(cfg: &ClusterConfig, trace: &Trace) -> Result<ClusterResult, SimError> {
    run_with(cfg, &ConnModel::default(), trace)
}

/// Run the trace through the cluster with client connections grouped and distributed as
/// `model` says, and the front end's CPU if its costs are set.
pub fn run_with(
    cfg: &ClusterConfig,
    model: &ConnModel,
    trace: &Trace,
) -> Result<ClusterResult, SimError> {
    use crate::param;
    if cfg.nodes == 0 {
        return Err(param("nodes", "must be >= 1"));
    }
    if !(0.0..1.0).contains(&cfg.warmup) {
        return Err(param("warmup", "must be in [0, 1)"));
    }
    let policy = dispatch::build(&cfg.policy, cfg.nodes, &cfg.dispatch)?;
    let n = cfg.nodes;
    let mut nodes: Vec<Node> = (0..n)
        .map(|_| Node {
            cpu: VecDeque::new(),
            cpu_busy: false,
            cpu_ns: 0,
            disk: Disk::new(),
            disk_reqs: VecDeque::new(),
            cache: Lru::new(cfg.cache),
            served: 0,
            cpu_ns_from: 0,
            disk_ns_from: 0,
        })
        .collect();
    if cfg.prewarm {
        for nd in &mut nodes {
            for (f, &size) in trace.sizes.iter().enumerate() {
                if nd.cache.used() + size > cfg.cache {
                    break;
                }
                nd.cache.insert(f as u64, size);
            }
        }
    }
    let total = trace.requests.len();
    let per_conn = if model.mechanism == Mechanism::Close {
        1.0
    } else {
        model.per_conn
    };
    let mut conns = Vec::new();
    let mut at = 0usize;
    for len in connection_lengths(total, per_conn, model.seed)? {
        let end = at + len as usize;
        conns.push(Conn {
            next: at,
            end,
            handler: None,
        });
        at = end;
    }
    let mut sim = Sim {
        cfg,
        model: *model,
        trace,
        policy,
        nodes,
        loads: vec![0; n],
        disk_q: vec![0; n],
        eng: Engine::new(),
        reqs: vec![Req::default(); total],
        conns,
        next_conn: 0,
        front: VecDeque::new(),
        front_busy: false,
        front_ns: 0,
        front_ns_from: 0,
        warm: ((total as f64) * cfg.warmup) as usize,
        completed: 0,
        t_warm: 0,
        hits: 0,
        lookups: 0,
        forwarded: 0,
        migrated: 0,
    };
    let limit = cfg.dispatch.admission_limit(n);
    while sim.next_conn < sim.conns.len() && sim.next_conn < limit {
        sim.admit();
    }
    while sim.completed < total {
        let Some((now, ev)) = sim.eng.pop() else {
            return Err(SimError::Stuck(format!(
                "{} of {total} requests served",
                sim.completed
            )));
        };
        match ev {
            Ev::Cpu { node } => sim.on_cpu(node, now),
            Ev::Disk { node } => sim.on_disk(node, now),
            Ev::Front => sim.on_front(now),
        }
    }
    let end = sim.eng.now();
    let span = end.saturating_sub(sim.t_warm).max(1);
    let measured = (total - sim.warm) as u64;
    let served: Vec<f64> = sim.nodes.iter().map(|x| x.served as f64).collect();
    let mean = served.iter().sum::<f64>() / n as f64;
    let max = served.iter().copied().fold(0.0, f64::max);
    let util = |f: &dyn Fn(&Node) -> u64| {
        sim.nodes
            .iter()
            .map(|x| f(x) as f64 / span as f64)
            .sum::<f64>()
            / n as f64
    };
    let ratio = |x: u64| x as f64 / measured.max(1) as f64;
    let front_busy = sim.front_ns - sim.front_ns_from;
    Ok(ClusterResult {
        nodes: n,
        policy: cfg.policy.clone(),
        throughput: measured as f64 / (span as f64 / 1e9),
        hit_ratio: if sim.lookups == 0 {
            0.0
        } else {
            sim.hits as f64 / sim.lookups as f64
        },
        max_over_mean_load: if mean > 0.0 { max / mean } else { 0.0 },
        cpu_util: util(&|x| x.cpu_ns - x.cpu_ns_from),
        disk_util: util(&|x| x.disk.busy_ns() - x.disk_ns_from),
        measured,
        events: sim.eng.processed(),
        reassignments: sim.policy.stats().reassignments,
        front_util: front_busy as f64 / span as f64,
        front_us_per_req: front_busy as f64 / 1e3 / measured.max(1) as f64,
        forwarded_ratio: ratio(sim.forwarded),
        migrated_ratio: ratio(sim.migrated),
        connections: sim.conns.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceConfig;

    fn cfg(nodes: usize, policy: &str) -> ClusterConfig {
        ClusterConfig {
            nodes,
            policy: policy.into(),
            dispatch: DispatchConfig::default(),
            cache: 8 << 20,
            costs: Costs::default(),
            disk: DiskModel::default(),
            warmup: 0.2,
            prewarm: false,
        }
    }

    #[test]
    fn eight_kb_from_cache_at_the_papers_rate() {
        // One file of 8 KB, always cached after the first request: CPU-bound at
        // 1 / (145 + 145 + 16 * 40 µs) = 1075 requests/s.
        let trace = Trace {
            sizes: vec![8192],
            requests: vec![0; 5000],
        };
        let r = run(&cfg(1, "wrr"), &trace).unwrap();
        assert!((r.throughput - 1075.27).abs() < 1.0, "{}", r.throughput);
        assert_eq!(r.hit_ratio, 1.0);
        // A CPU ten times faster serves ten times as many (the file cached from the start:
        // the first miss's disk read would otherwise outlast the CPU's work).
        let fast = ClusterConfig {
            costs: Costs::default().scaled(0.1),
            prewarm: true,
            ..cfg(1, "wrr")
        };
        let r = run(&fast, &trace).unwrap();
        assert!((r.throughput - 10752.7).abs() < 10.0, "{}", r.throughput);
        assert_eq!(Costs::default().pooled_request(1024), 50_000 + 2 * 40_000);
    }

    #[test]
    fn lard_beats_wrr_when_the_working_set_exceeds_a_cache() {
        let trace = Trace::generate(&TraceConfig {
            working_set: 64 << 20,
            requests: 40_000,
            ..TraceConfig::default()
        })
        .unwrap();
        let wrr = run(&cfg(8, "wrr"), &trace).unwrap();
        let lard = run(&cfg(8, "lard"), &trace).unwrap();
        assert!(lard.hit_ratio > wrr.hit_ratio + 0.1, "{lard:?} {wrr:?}");
        assert!(lard.throughput > 1.5 * wrr.throughput, "{lard:?} {wrr:?}");
        // Every request is served exactly once.
        assert_eq!(wrr.measured, 32_000);
    }
}
