//! The P-HTTP part of `triage sim lard` (seed 004, Aron, Druschel, Zwaenepoel, USENIX 1999):
//! policies and mechanisms under persistent connections, and how many back ends one front
//! end feeds. Runs `cluster::run_with`; `lard` prints it beside the LARD
//! tables and with the paper's numbers.

use serde::Serialize;

use crate::cluster::{self, ClusterConfig, ClusterResult, ConnModel, Costs};
use crate::disk::DiskModel;
use crate::pconn::{FrontCosts, Mechanism};
use crate::pos::par_map;
use crate::stats::round;
use crate::trace::Trace;
use crate::SimError;
use policy::dispatch::DispatchConfig;

/// A policy driven through a mechanism, as `policy/mechanism` (`ext-lard/forward`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Variant {
    /// Registry name in [`policy::dispatch`].
    pub policy: String,
    /// How a connection's requests reach the back ends.
    pub mechanism: Mechanism,
}

impl Variant {
    /// Parse `policy/mechanism`; the policy must be registered.
    pub fn parse(s: &str) -> Result<Self, SimError> {
        let (p, m) = s.split_once('/').ok_or_else(|| {
            crate::param(
                "pconn-variants",
                format!("`{s}` is not policy/mechanism (e.g. ext-lard/forward)"),
            )
        })?;
        policy::dispatch::build(p, 1, &DispatchConfig::default())?;
        Ok(Self {
            policy: p.into(),
            mechanism: Mechanism::parse(m)?,
        })
    }

    /// `policy/mechanism`.
    pub fn label(&self) -> String {
        format!("{}/{}", self.policy, self.mechanism.name())
    }
}

/// The default variants: HTTP/1.0 WRR and LARD, then P-HTTP with WRR and LARD pinned (no
/// mechanism), extended LARD with back-end forwarding, with multiple handoff, and LARD behind
/// a relaying front end.
pub fn default_variants() -> Vec<Variant> {
    [
        "wrr/close",
        "lard/close",
        "wrr/pin",
        "lard/pin",
        "ext-lard/forward",
        "ext-lard/handoff",
        "lard/relay",
    ]
    .iter()
    .filter_map(|s| Variant::parse(s).ok())
    .collect()
}

/// Parameters of the P-HTTP part.
#[derive(Debug, Clone, Serialize)]
pub struct PhttpConfig {
    /// Node counts of the variant comparison (empty: not run).
    pub nodes: Vec<usize>,
    /// The variants compared.
    pub variants: Vec<Variant>,
    /// Mean requests per persistent connection.
    pub per_conn: f64,
    /// The front end's CPU costs.
    pub front: FrontCosts,
    /// File cache per node in the variant comparison (the `exceeds` workload's).
    pub cache: u64,
    /// Node counts of the front-end sweep (empty: not run).
    pub front_nodes: Vec<usize>,
    /// File cache per node in the front-end sweep (the `fits` workload's: back ends
    /// CPU-bound, so the cluster's capacity grows linearly until the front end saturates).
    pub front_cache: u64,
    /// The variant of the front-end sweep (seed 004: extended LARD with back-end forwarding).
    pub front_variant: Variant,
}

impl Default for PhttpConfig {
    fn default() -> Self {
        Self {
            nodes: vec![2, 4, 6, 8, 16],
            variants: default_variants(),
            per_conn: 6.0,
            front: FrontCosts::seed004(),
            cache: 32 << 20,
            front_nodes: vec![2, 4, 6, 8, 12, 16, 24, 32, 40, 48],
            front_cache: 1 << 30,
            front_variant: Variant {
                policy: "ext-lard".into(),
                mechanism: Mechanism::Forward,
            },
        }
    }
}

/// What the cluster runs share with the LARD tables.
#[derive(Debug, Clone, Copy)]
pub struct Common<'a> {
    /// The trace.
    pub trace: &'a Trace,
    /// Seed (connection grouping).
    pub seed: u64,
    /// LARD's thresholds and the other policies' parameters.
    pub dispatch: &'a DispatchConfig,
    /// Back-end CPU costs.
    pub costs: Costs,
    /// Back-end disk.
    pub disk: DiskModel,
    /// Share of the trace not measured.
    pub warmup: f64,
    /// Caches start warm.
    pub prewarm: bool,
    /// Worker threads.
    pub threads: usize,
}

/// One variant at one node count.
#[derive(Debug, Clone, Serialize)]
pub struct VariantRow {
    /// `policy/mechanism`.
    pub variant: String,
    /// Requests per second.
    pub throughput: f64,
    /// Requests served from a file cache, over the measured ones.
    pub hit_ratio: f64,
    /// Max over mean of the requests served per node.
    pub max_over_mean_load: f64,
    /// Mean CPU utilisation of the back ends.
    pub cpu_util: f64,
    /// Mean disk utilisation of the back ends.
    pub disk_util: f64,
    /// Utilisation of the front end's CPU.
    pub front_util: f64,
    /// Front-end CPU per request, µs.
    pub front_us_per_req: f64,
    /// Requests fetched through another back end (forwarding), over all measured.
    pub forwarded_ratio: f64,
    /// Requests whose connection migrated (multiple handoff), over all measured.
    pub migrated_ratio: f64,
}

/// One node count of the variant comparison.
#[derive(Debug, Clone, Serialize)]
pub struct PhttpRow {
    /// Back ends.
    pub nodes: usize,
    /// One row per variant, in the configured order.
    pub variants: Vec<VariantRow>,
}

/// One node count of the front-end sweep.
#[derive(Debug, Clone, Serialize)]
pub struct FrontRow {
    /// Back ends.
    pub nodes: usize,
    /// Requests per second.
    pub throughput: f64,
    /// Utilisation of the front end's CPU.
    pub front_util: f64,
    /// Mean CPU utilisation of the back ends.
    pub backend_cpu_util: f64,
}

/// The front-end sweep and what it says about capacity.
#[derive(Debug, Clone, Serialize)]
pub struct FrontResult {
    /// `policy/mechanism` swept.
    pub variant: String,
    /// File cache per node, MiB.
    pub cache_mb: f64,
    /// One row per node count.
    pub rows: Vec<FrontRow>,
    /// Front-end utilisation at 6 back ends (seed 004: about 0.6), if 6 was run.
    pub util_at_6: Option<f64>,
    /// Back ends one front end feeds, extrapolated linearly from the utilisation at 6 as seed
    /// 004 does (6 / util).
    pub predicted_nodes: Option<f64>,
    /// The smallest node count run whose front end is saturated (utilisation >= 0.95).
    pub saturated_at: Option<usize>,
    /// The largest node count run whose throughput was still within 5 % of linear scaling
    /// from the smallest node count.
    pub linear_until: Option<usize>,
}

/// The P-HTTP part's results.
#[derive(Debug, Clone, Serialize)]
pub struct PhttpResult {
    /// Mean requests per connection.
    pub per_conn: f64,
    /// File cache per node, MiB.
    pub cache_mb: f64,
    /// The front end's costs.
    pub front_costs: FrontCosts,
    /// The variant comparison.
    pub rows: Vec<PhttpRow>,
    /// The front-end sweep (absent when not run).
    pub front: Option<FrontResult>,
}

fn vrow(label: String, r: &ClusterResult) -> VariantRow {
    VariantRow {
        variant: label,
        throughput: round(r.throughput, 1),
        hit_ratio: round(r.hit_ratio, 4),
        max_over_mean_load: round(r.max_over_mean_load, 3),
        cpu_util: round(r.cpu_util, 3),
        disk_util: round(r.disk_util, 3),
        front_util: round(r.front_util, 3),
        front_us_per_req: round(r.front_us_per_req, 1),
        forwarded_ratio: round(r.forwarded_ratio, 4),
        migrated_ratio: round(r.migrated_ratio, 4),
    }
}

fn one(
    c: &Common<'_>,
    cfg: &PhttpConfig,
    v: &Variant,
    nodes: usize,
    cache: u64,
) -> Result<ClusterResult, SimError> {
    cluster::run_with(
        &ClusterConfig {
            nodes,
            policy: v.policy.clone(),
            dispatch: c.dispatch.clone(),
            cache,
            costs: c.costs,
            disk: c.disk,
            warmup: c.warmup,
            prewarm: c.prewarm,
        },
        &ConnModel {
            mechanism: v.mechanism,
            per_conn: cfg.per_conn,
            seed: c.seed,
            front: cfg.front,
        },
        c.trace,
    )
}

/// Run the P-HTTP part. `progress` receives one line per finished node count.
pub fn run(
    c: &Common<'_>,
    cfg: &PhttpConfig,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<PhttpResult, SimError> {
    let jobs: Vec<(usize, usize)> = cfg
        .nodes
        .iter()
        .flat_map(|&n| (0..cfg.variants.len()).map(move |v| (n, v)))
        .collect();
    let results = par_map(&jobs, c.threads, |&(n, v)| {
        let t = std::time::Instant::now();
        let r = one(c, cfg, &cfg.variants[v], n, cfg.cache);
        progress(&format!(
            "pconn {} at {n} nodes: {:.1} s",
            cfg.variants[v].label(),
            t.elapsed().as_secs_f64()
        ));
        r
    });
    let mut rows: Vec<PhttpRow> = cfg
        .nodes
        .iter()
        .map(|&n| PhttpRow {
            nodes: n,
            variants: Vec::new(),
        })
        .collect();
    for (&(n, v), r) in jobs.iter().zip(results) {
        let i = cfg.nodes.iter().position(|&x| x == n).unwrap_or(0);
        rows[i].variants.push(vrow(cfg.variants[v].label(), &r?));
    }
    let front = if cfg.front_nodes.is_empty() {
        None
    } else {
        Some(front_sweep(c, cfg, progress)?)
    };
    Ok(PhttpResult {
        per_conn: cfg.per_conn,
        cache_mb: round(cfg.cache as f64 / (1 << 20) as f64, 1),
        front_costs: cfg.front,
        rows,
        front,
    })
}

fn front_sweep(
    c: &Common<'_>,
    cfg: &PhttpConfig,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<FrontResult, SimError> {
    let v = &cfg.front_variant;
    let results = par_map(&cfg.front_nodes, c.threads, |&n| {
        let t = std::time::Instant::now();
        let r = one(c, cfg, v, n, cfg.front_cache);
        progress(&format!(
            "front {} at {n} nodes: {:.1} s",
            v.label(),
            t.elapsed().as_secs_f64()
        ));
        r
    });
    let mut rows = Vec::new();
    for (&n, r) in cfg.front_nodes.iter().zip(results) {
        let r = r?;
        rows.push(FrontRow {
            nodes: n,
            throughput: round(r.throughput, 1),
            front_util: round(r.front_util, 3),
            backend_cpu_util: round(r.cpu_util, 3),
        });
    }
    Ok(capacity(v.label(), cfg.front_cache, rows))
}

/// What a sweep says about the front end's capacity.
pub fn capacity(variant: String, cache: u64, rows: Vec<FrontRow>) -> FrontResult {
    let util_at_6 = rows.iter().find(|r| r.nodes == 6).map(|r| r.front_util);
    let predicted_nodes = util_at_6.filter(|&u| u > 0.0).map(|u| round(6.0 / u, 1));
    let saturated_at = rows.iter().find(|r| r.front_util >= 0.95).map(|r| r.nodes);
    let linear_until = rows.first().and_then(|base| {
        let per_node = base.throughput / base.nodes as f64;
        rows.iter()
            .take_while(|r| r.throughput >= 0.95 * per_node * r.nodes as f64)
            .last()
            .map(|r| r.nodes)
    });
    FrontResult {
        variant,
        cache_mb: round(cache as f64 / (1 << 20) as f64, 1),
        rows,
        util_at_6,
        predicted_nodes,
        saturated_at,
        linear_until,
    }
}

impl PhttpResult {
    /// Throughput of `variant` at `nodes`.
    pub fn throughput(&self, nodes: usize, variant: &str) -> Option<f64> {
        self.rows
            .iter()
            .find(|r| r.nodes == nodes)?
            .variants
            .iter()
            .find(|v| v.variant == variant)
            .map(|v| v.throughput)
    }

    /// `a / b` throughput at each node count where both ran.
    pub fn ratios(&self, a: &str, b: &str) -> Vec<(usize, f64)> {
        self.rows
            .iter()
            .filter_map(|r| {
                let (x, y) = (self.throughput(r.nodes, a)?, self.throughput(r.nodes, b)?);
                (y > 0.0).then(|| (r.nodes, round(x / y, 3)))
            })
            .collect()
    }

    /// The tables.
    pub fn table(&self) -> String {
        let mut s = format!(
            "P-HTTP: {} requests per connection on average (geometric), cache {} MB per node; \
             front end: {} us per connection, {} us per further request, {} us per 512 B \
             relayed\n",
            self.per_conn,
            self.cache_mb,
            self.front_costs.conn / 1000,
            self.front_costs.request / 1000,
            self.front_costs.relay_per_512 / 1000,
        );
        s += &format!(
            "{:>6} {:<18} {:>9} {:>6} {:>7} {:>6} {:>6} {:>7} {:>6} {:>6}\n",
            "nodes",
            "variant",
            "req/s",
            "hit%",
            "max/mn",
            "cpu%",
            "disk%",
            "front%",
            "fwd%",
            "mig%"
        );
        for r in &self.rows {
            for v in &r.variants {
                s += &format!(
                    "{:>6} {:<18} {:>9.0} {:>6.1} {:>7.2} {:>6.1} {:>6.1} {:>7.1} {:>6.1} {:>6.1}\n",
                    r.nodes,
                    v.variant,
                    v.throughput,
                    v.hit_ratio * 100.0,
                    v.max_over_mean_load,
                    v.cpu_util * 100.0,
                    v.disk_util * 100.0,
                    v.front_util * 100.0,
                    v.forwarded_ratio * 100.0,
                    v.migrated_ratio * 100.0
                );
            }
        }
        if let Some(f) = &self.front {
            s += &format!(
                "\nfront end: {} with the cache holding the working set ({} MB per node)\n",
                f.variant, f.cache_mb
            );
            s += &format!(
                "{:>6} {:>9} {:>7} {:>9}\n",
                "nodes", "req/s", "front%", "backend%"
            );
            for r in &f.rows {
                s += &format!(
                    "{:>6} {:>9.0} {:>7.1} {:>9.1}\n",
                    r.nodes,
                    r.throughput,
                    r.front_util * 100.0,
                    r.backend_cpu_util * 100.0
                );
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_parse_and_refuse() {
        let v = Variant::parse("ext-lard/forward").unwrap();
        assert_eq!(v.label(), "ext-lard/forward");
        assert!(Variant::parse("ext-lard").is_err());
        assert!(Variant::parse("nope/forward").is_err());
        assert!(Variant::parse("lard/splice").is_err());
        assert_eq!(default_variants().len(), 7);
    }

    #[test]
    fn capacity_reads_the_knee() {
        let row = |nodes, throughput, front_util| FrontRow {
            nodes,
            throughput,
            front_util,
            backend_cpu_util: 0.9,
        };
        let f = capacity(
            "x".into(),
            1 << 30,
            vec![
                row(2, 200.0, 0.2),
                row(6, 600.0, 0.6),
                row(10, 990.0, 0.99),
                row(12, 1000.0, 1.0),
            ],
        );
        assert_eq!(f.util_at_6, Some(0.6));
        assert_eq!(f.predicted_nodes, Some(10.0));
        assert_eq!(f.saturated_at, Some(10));
        assert_eq!(f.linear_until, Some(10));
    }
}
