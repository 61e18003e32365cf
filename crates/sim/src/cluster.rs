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

use policy::dispatch::{self, DispatchConfig};
use policy::Nanos;
use serde::Serialize;

use crate::cache::Lru;
use crate::disk::{Disk, DiskModel};
use crate::engine::Engine;
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
}

impl Default for Costs {
    fn default() -> Self {
        Self {
            setup: 145_000,
            teardown: 145_000,
            per_512: 40_000,
        }
    }
}

impl Costs {
    /// CPU to transmit a file of `size` bytes and tear the connection down.
    pub fn transmit(&self, size: u64) -> Nanos {
        size.div_ceil(512) * self.per_512 + self.teardown
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
}

#[derive(Debug, Clone, Copy)]
enum Ev {
    CpuDone { node: usize },
    DiskDone { node: usize },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// CPU: setup (then look the file up).
    Setup,
    /// CPU: transmit + teardown (then done).
    Send,
}

struct Node {
    cpu: VecDeque<(usize, Nanos, Stage)>,
    cpu_busy: bool,
    cpu_ns: u64,
    disk: Disk,
    disk_reqs: VecDeque<usize>,
    cache: Lru,
    active: u32,
    served: u64,
    cpu_ns_from: u64,
    disk_ns_from: u64,
}

/// Run the trace through the cluster.
pub fn run(cfg: &ClusterConfig, trace: &Trace) -> Result<ClusterResult, SimError> {
    use crate::param;
    if cfg.nodes == 0 {
        return Err(param("nodes", "must be >= 1"));
    }
    if !(0.0..1.0).contains(&cfg.warmup) {
        return Err(param("warmup", "must be in [0, 1)"));
    }
    let mut policy = dispatch::build(&cfg.policy, cfg.nodes, &cfg.dispatch)?;
    let n = cfg.nodes;
    let mut nodes: Vec<Node> = (0..n)
        .map(|_| Node {
            cpu: VecDeque::new(),
            cpu_busy: false,
            cpu_ns: 0,
            disk: Disk::new(),
            disk_reqs: VecDeque::new(),
            cache: Lru::new(cfg.cache),
            active: 0,
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
    let mut loads = vec![0u32; n];
    let mut eng: Engine<Ev> = Engine::new();
    let total = trace.requests.len();
    let warm = ((total as f64) * cfg.warmup) as usize;
    let limit = cfg.dispatch.admission_limit(n);
    // Per request: (file, node).
    let mut reqs: Vec<(u32, usize)> = Vec::with_capacity(total);
    let mut next = 0usize;
    let mut completed = 0usize;
    let mut t_warm: Nanos = 0;
    let mut hits = 0u64;
    let mut lookups = 0u64;

    fn push_cpu(
        node: &mut Node,
        nid: usize,
        req: usize,
        cost: Nanos,
        st: Stage,
        eng: &mut Engine<Ev>,
    ) {
        node.cpu.push_back((req, cost, st));
        if !node.cpu_busy {
            node.cpu_busy = true;
            node.cpu_ns += cost;
            eng.after(cost, Ev::CpuDone { node: nid });
        }
    }

    let admit = |next: &mut usize,
                 reqs: &mut Vec<(u32, usize)>,
                 nodes: &mut Vec<Node>,
                 loads: &mut Vec<u32>,
                 eng: &mut Engine<Ev>,
                 policy: &mut Box<dyn dispatch::Dispatch>| {
        let i = *next;
        *next += 1;
        let file = trace.requests[i];
        let node = policy.assign(u64::from(file), loads, eng.now()).min(n - 1);
        loads[node] += 1;
        nodes[node].active += 1;
        reqs.push((file, node));
        push_cpu(
            &mut nodes[node],
            node,
            i,
            cfg.costs.setup,
            Stage::Setup,
            eng,
        );
    };

    while next < total && next < limit {
        admit(
            &mut next,
            &mut reqs,
            &mut nodes,
            &mut loads,
            &mut eng,
            &mut policy,
        );
    }
    while completed < total {
        let Some((now, ev)) = eng.pop() else {
            return Err(SimError::Stuck(format!(
                "{completed} of {total} requests served"
            )));
        };
        match ev {
            Ev::CpuDone { node } => {
                let nd = &mut nodes[node];
                let Some((req, _, stage)) = nd.cpu.pop_front() else {
                    continue;
                };
                nd.cpu_busy = false;
                if let Some(&(_, cost, _)) = nd.cpu.front() {
                    nd.cpu_busy = true;
                    nd.cpu_ns += cost;
                    eng.after(cost, Ev::CpuDone { node });
                }
                let (file, _) = reqs[req];
                let size = trace.sizes[file as usize];
                match stage {
                    Stage::Setup => {
                        let hit = nd.cache.get(u64::from(file));
                        if req >= warm {
                            lookups += 1;
                            hits += u64::from(hit);
                        }
                        if hit {
                            push_cpu(
                                nd,
                                node,
                                req,
                                cfg.costs.transmit(size),
                                Stage::Send,
                                &mut eng,
                            );
                        } else {
                            nd.disk_reqs.push_back(req);
                            if let Some(t) =
                                nd.disk.submit(req as u64, cfg.disk.file_time(size), now)
                            {
                                eng.at(t, Ev::DiskDone { node });
                            }
                        }
                    }
                    Stage::Send => {
                        nd.active -= 1;
                        loads[node] -= 1;
                        completed += 1;
                        if req >= warm {
                            nd.served += 1;
                        }
                        if completed == warm {
                            t_warm = now;
                            for x in nodes.iter_mut() {
                                x.cpu_ns_from = x.cpu_ns;
                                x.disk_ns_from = x.disk.busy_ns();
                            }
                        }
                        if next < total {
                            admit(
                                &mut next,
                                &mut reqs,
                                &mut nodes,
                                &mut loads,
                                &mut eng,
                                &mut policy,
                            );
                        }
                    }
                }
            }
            Ev::DiskDone { node } => {
                let nd = &mut nodes[node];
                if let Some((_, Some(t))) = nd.disk.complete(now) {
                    eng.at(t, Ev::DiskDone { node });
                }
                if let Some(req) = nd.disk_reqs.pop_front() {
                    let (file, _) = reqs[req];
                    let size = trace.sizes[file as usize];
                    nd.cache.insert(u64::from(file), size);
                    push_cpu(
                        nd,
                        node,
                        req,
                        cfg.costs.transmit(size),
                        Stage::Send,
                        &mut eng,
                    );
                }
            }
        }
    }
    let end = eng.now();
    let span = end.saturating_sub(t_warm).max(1);
    let measured = (total - warm) as u64;
    let served: Vec<f64> = nodes.iter().map(|x| x.served as f64).collect();
    let mean = served.iter().sum::<f64>() / n as f64;
    let max = served.iter().copied().fold(0.0, f64::max);
    let util = |f: &dyn Fn(&Node) -> u64| {
        nodes.iter().map(|x| f(x) as f64 / span as f64).sum::<f64>() / n as f64
    };
    Ok(ClusterResult {
        nodes: n,
        policy: cfg.policy.clone(),
        throughput: measured as f64 / (span as f64 / 1e9),
        hit_ratio: if lookups == 0 {
            0.0
        } else {
            hits as f64 / lookups as f64
        },
        max_over_mean_load: if mean > 0.0 { max / mean } else { 0.0 },
        cpu_util: util(&|x| x.cpu_ns - x.cpu_ns_from),
        disk_util: util(&|x| x.disk.busy_ns() - x.disk_ns_from),
        measured,
        events: eng.processed(),
        reassignments: policy.stats().reassignments,
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
