//! `triage sim lard`: seed 004's comparison of request distribution policies on a simulated
//! cluster ([`crate::cluster`]), over node counts and two workloads: a working set much larger
//! than one node's cache (where locality matters) and one that fits (where it should not).
//!
//! Policies: WRR, LARD (T_low 25, T_high 65), LARD/R (K = 20 s), and consistent hashing with
//! bounded loads at c = 1.25 and c = 1.5; all from [`policy::dispatch`]. Then the P-HTTP part
//! (`phttp`: persistent connections, extended LARD, mechanisms, the front end's CPU)
//! and the paper's numbers beside ours ([`PaperRow`]).

use policy::dispatch::DispatchConfig;
use serde::Serialize;

use crate::cluster::{self, ClusterConfig, ClusterResult, Costs};
use crate::disk::DiskModel;
use crate::paper::PaperRow;
use crate::phttp::{self, Common, PhttpConfig, PhttpResult};
use crate::pos::par_map;
use crate::stats::round;
use crate::trace::{Trace, TraceConfig};
use crate::SimError;

/// A policy as run in the scenario (a label, a registry name, its parameters).
#[derive(Debug, Clone, Serialize)]
pub struct PolicySpec {
    /// Name in tables and `--policies` (`chbl-1.25`).
    pub label: String,
    /// Registry name in [`policy::dispatch`].
    pub name: String,
    /// Its parameters.
    pub cfg: DispatchConfig,
}

/// The default policy set.
pub fn default_policies() -> Vec<PolicySpec> {
    let d = DispatchConfig::default();
    let mut v: Vec<PolicySpec> = ["wrr", "lard", "lard-r"]
        .iter()
        .map(|n| PolicySpec {
            label: (*n).into(),
            name: (*n).into(),
            cfg: d.clone(),
        })
        .collect();
    for c in [1250, 1500] {
        v.push(PolicySpec {
            label: format!("chbl-{}", c as f64 / 1000.0),
            name: "chbl".into(),
            cfg: DispatchConfig {
                bound_permille: c,
                ..d.clone()
            },
        });
    }
    v
}

/// A workload: the trace's working set against one node's file cache.
#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    /// `exceeds` or `fits`.
    pub name: String,
    /// File cache per node, bytes.
    pub cache: u64,
}

/// Parameters of `triage sim lard`.
#[derive(Debug, Clone, Serialize)]
pub struct LardConfig {
    /// Node counts to run.
    pub nodes: Vec<usize>,
    /// Seed of the trace.
    pub seed: u64,
    /// Requests in the trace (the first `warmup` share warms the caches).
    pub requests: usize,
    /// Total size of the trace's files.
    pub working_set: u64,
    /// Largest file.
    pub max_file: u64,
    /// The workloads (cache sizes) to run.
    pub workloads: Vec<Workload>,
    /// The policies to compare.
    pub policies: Vec<PolicySpec>,
    /// Zipf exponent of file popularity.
    pub zipf: f64,
    /// Share of the trace served before measuring.
    pub warmup: f64,
    /// Start caches warm (see [`ClusterConfig::prewarm`]).
    pub prewarm: bool,
    /// CPU costs per request.
    pub costs: Costs,
    /// Disk of every back end.
    pub disk: DiskModel,
    /// Worker threads (results do not depend on it).
    pub threads: usize,
    /// The P-HTTP part (`None`: not run).
    pub phttp: Option<PhttpConfig>,
}

impl Default for LardConfig {
    fn default() -> Self {
        Self {
            nodes: vec![1, 2, 4, 8, 16, 32, 64],
            seed: 1,
            requests: 200_000,
            working_set: 512 << 20,
            max_file: 1 << 20,
            workloads: vec![
                Workload {
                    name: "exceeds".into(),
                    cache: 32 << 20,
                },
                Workload {
                    name: "fits".into(),
                    cache: 1 << 30,
                },
            ],
            policies: default_policies(),
            zipf: 0.8,
            warmup: 0.25,
            prewarm: true,
            costs: Costs::default(),
            disk: DiskModel::default(),
            threads: 2,
            phttp: Some(PhttpConfig::default()),
        }
    }
}

/// One node count.
#[derive(Debug, Clone, Serialize)]
pub struct NodeRow {
    /// Back ends.
    pub nodes: usize,
    /// One row per policy, in the configured order.
    pub policies: Vec<PolicyRow>,
}

/// One policy at one node count (the `--json` fields).
#[derive(Debug, Clone, Serialize)]
pub struct PolicyRow {
    /// Label of the policy.
    pub policy: String,
    /// Requests per second.
    pub throughput: f64,
    /// Requests served from a file cache, over the measured ones.
    pub hit_ratio: f64,
    /// Max over mean of the requests served per node.
    pub max_over_mean_load: f64,
    /// Mean CPU utilisation of the nodes.
    pub cpu_util: f64,
    /// Mean disk utilisation of the nodes.
    pub disk_util: f64,
}

/// One workload's results.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadResult {
    /// `exceeds` or `fits`.
    pub name: String,
    /// Total size of the trace's files, MiB.
    pub working_set_mb: f64,
    /// File cache per node, MiB.
    pub cache_mb: f64,
    /// Files in the trace.
    pub files: usize,
    /// Mean size of a request, KiB.
    pub mean_request_kb: f64,
    /// One row per node count.
    pub rows: Vec<NodeRow>,
}

/// Everything `triage sim lard` reports.
#[derive(Debug, Clone, Serialize)]
pub struct LardResult {
    /// Seed of the trace.
    pub seed: u64,
    /// Requests in the trace.
    pub requests: usize,
    /// One result per workload.
    pub workloads: Vec<WorkloadResult>,
    /// What to keep in mind reading the figures.
    pub notes: Vec<String>,
    /// Persistent connections, mechanisms and the front end (absent when not run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pconn: Option<PhttpResult>,
    /// Seed 004's numbers beside ours.
    pub paper: Vec<PaperRow>,
}

fn row(label: &str, r: &ClusterResult) -> PolicyRow {
    PolicyRow {
        policy: label.into(),
        throughput: round(r.throughput, 1),
        hit_ratio: round(r.hit_ratio, 4),
        max_over_mean_load: round(r.max_over_mean_load, 3),
        cpu_util: round(r.cpu_util, 3),
        disk_util: round(r.disk_util, 3),
    }
}

/// Run the scenario. `progress` receives one line per finished node count.
pub fn run(cfg: &LardConfig, progress: &(dyn Fn(&str) + Sync)) -> Result<LardResult, SimError> {
    use crate::param;
    if cfg.nodes.is_empty() || cfg.nodes.contains(&0) || cfg.nodes.iter().any(|&n| n > 4096) {
        return Err(param("nodes", "node counts must be in 1..=4096"));
    }
    if cfg.policies.is_empty() {
        return Err(param("policies", "at least one policy"));
    }
    if cfg.workloads.iter().any(|w| w.cache == 0) {
        return Err(param("cache", "must be > 0"));
    }
    if cfg.working_set == 0 || cfg.working_set > 1 << 40 {
        return Err(param("working-set", "must be in 1 B..1 TB"));
    }
    for p in &cfg.policies {
        policy::dispatch::build(&p.name, 1, &p.cfg)?;
    }
    let trace = Trace::generate(&TraceConfig {
        working_set: cfg.working_set,
        requests: cfg.requests,
        zipf: cfg.zipf,
        max_size: cfg.max_file,
        seed: cfg.seed,
        ..TraceConfig::default()
    })?;
    let mut workloads = Vec::new();
    for w in &cfg.workloads {
        let jobs: Vec<(usize, usize)> = cfg
            .nodes
            .iter()
            .flat_map(|&n| (0..cfg.policies.len()).map(move |p| (n, p)))
            .collect();
        let results = par_map(&jobs, cfg.threads, |&(n, p)| {
            let spec = &cfg.policies[p];
            let r = cluster::run(
                &ClusterConfig {
                    nodes: n,
                    policy: spec.name.clone(),
                    dispatch: spec.cfg.clone(),
                    cache: w.cache,
                    costs: cfg.costs,
                    disk: cfg.disk,
                    warmup: cfg.warmup,
                    prewarm: cfg.prewarm,
                },
                &trace,
            );
            if p + 1 == cfg.policies.len() {
                progress(&format!("lard {}: {n} nodes done", w.name));
            }
            r
        });
        let mut rows: Vec<NodeRow> = cfg
            .nodes
            .iter()
            .map(|&n| NodeRow {
                nodes: n,
                policies: Vec::new(),
            })
            .collect();
        for (&(n, p), r) in jobs.iter().zip(results) {
            let r = r?;
            let i = cfg.nodes.iter().position(|&x| x == n).unwrap_or(0);
            rows[i].policies.push(row(&cfg.policies[p].label, &r));
        }
        workloads.push(WorkloadResult {
            name: w.name.clone(),
            working_set_mb: round(trace.working_set() as f64 / (1 << 20) as f64, 1),
            cache_mb: round(w.cache as f64 / (1 << 20) as f64, 1),
            files: trace.sizes.len(),
            mean_request_kb: round(trace.mean_request_size() / 1024.0, 2),
            rows,
        });
    }
    let pconn = match &cfg.phttp {
        Some(p) => Some(phttp::run(
            &Common {
                trace: &trace,
                seed: cfg.seed,
                dispatch: &cfg
                    .policies
                    .iter()
                    .find(|p| p.name == "lard")
                    .map_or_else(DispatchConfig::default, |p| p.cfg.clone()),
                costs: cfg.costs,
                disk: cfg.disk,
                warmup: cfg.warmup,
                prewarm: cfg.prewarm,
                threads: cfg.threads,
            },
            p,
            progress,
        )?),
        None => None,
    };
    let mut res = LardResult {
        seed: cfg.seed,
        requests: cfg.requests,
        workloads,
        notes: Vec::new(),
        pconn,
        paper: Vec::new(),
    };
    res.notes = notes(&res);
    res.paper = crate::paper::rows(
        res.workloads
            .iter()
            .find(|w| w.name == "exceeds")
            .map(lard_over_wrr)
            .as_deref(),
        res.pconn.as_ref(),
    );
    Ok(res)
}

fn get<'a>(r: &'a NodeRow, label: &str) -> Option<&'a PolicyRow> {
    r.policies.iter().find(|p| p.policy == label)
}

/// LARD over WRR throughput at each node count of a workload.
pub fn lard_over_wrr(w: &WorkloadResult) -> Vec<(usize, f64)> {
    w.rows
        .iter()
        .filter_map(|r| {
            let (l, x) = (get(r, "lard")?, get(r, "wrr")?);
            (x.throughput > 0.0).then(|| (r.nodes, round(l.throughput / x.throughput, 2)))
        })
        .collect()
}

fn notes(res: &LardResult) -> Vec<String> {
    let mut n = Vec::new();
    for w in &res.workloads {
        let ratios = lard_over_wrr(w);
        if let Some(best) = ratios.iter().map(|r| r.1).reduce(f64::max) {
            n.push(format!(
                "{}: LARD/WRR throughput {} (best {best:.2}x); the LARD paper: LARD 2-4x WRR in \
                 simulation once the cluster's caches hold the working set, and 4x on its \
                 6-node Apache prototype (seed 004)",
                w.name,
                ratios
                    .iter()
                    .map(|(k, r)| format!("{k}:{r:.2}x"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ));
        }
    }
    n
}

impl LardResult {
    /// The tables.
    pub fn table(&self) -> String {
        let mut s = String::new();
        for w in &self.workloads {
            s += &format!(
                "workload `{}`: working set {} MB ({} files, mean request {} KB), cache {} MB per \
                 node; {} requests, seed {}\n",
                w.name,
                w.working_set_mb,
                w.files,
                w.mean_request_kb,
                w.cache_mb,
                self.requests,
                self.seed
            );
            let labels: Vec<String> = w
                .rows
                .first()
                .map(|r| r.policies.iter().map(|p| p.policy.clone()).collect())
                .unwrap_or_default();
            s += &format!("{:>6}", "nodes");
            for l in &labels {
                s += &format!(" | {:^24}", l);
            }
            s += " | LARD/WRR\n";
            s += &format!("{:>6}", "");
            for _ in &labels {
                s += &format!(" | {:>9} {:>6} {:>7}", "req/s", "hit%", "max/mn");
            }
            s += " |\n";
            let ratios = lard_over_wrr(w);
            for r in &w.rows {
                s += &format!("{:>6}", r.nodes);
                for p in &r.policies {
                    s += &format!(
                        " | {:>9.0} {:>6.1} {:>7.2}",
                        p.throughput,
                        p.hit_ratio * 100.0,
                        p.max_over_mean_load
                    );
                }
                let ratio = ratios
                    .iter()
                    .find(|x| x.0 == r.nodes)
                    .map_or("-".into(), |x| format!("{:.2}x", x.1));
                s += &format!(" | {ratio}\n");
            }
            s += "\n";
        }
        if let Some(p) = &self.pconn {
            s += &p.table();
            s += "\n";
        }
        s += &crate::paper::table(&self.paper);
        for note in &self.notes {
            s += &format!("note: {note}\n");
        }
        s
    }
}
