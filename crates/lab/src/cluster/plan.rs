//! The plan of `triage lab cluster`: its parameters resolved from the options ([`resolve`]),
//! the variants (front ends and their policies, [`Variant`]) and the points in measuring order
//! ([`sessions`]).
//!
//! Every point starts its own back ends (cold caches) and front end, so a session is one
//! point. What each point is for ([`Role`]):
//! - `headline`: every variant at the largest back-end count, the working set well above one
//!   back end's cache, clients with keep-alive; repeated (`reps`), repetitions interleaved;
//! - `scale`: WRR and LARD at the smaller back-end counts;
//! - `fits`: WRR and LARD when the working set fits one back end's cache;
//! - `close`: WRR and LARD with one request per client connection (no keep-alive);
//! - `failover`: LARD with one back end killed in the middle of the window.

use serde::Serialize;

use super::opts::ClusterOpts;
use crate::error::{LabError, Result};
use crate::harness::Session;

/// The front end of a variant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "engine", rename_all = "lowercase")]
pub enum Engine {
    /// `triage front`.
    Triage {
        /// `policy::dispatch` name.
        policy: String,
        /// `relay`, `pin` or `forward`.
        mechanism: String,
    },
    /// HAProxy, one thread.
    Haproxy {
        /// Its `balance` algorithm: `roundrobin`, `leastconn` or `uri` (+ consistent hashing
        /// with a balance factor of 125).
        balance: String,
    },
    /// nginx, one process.
    Nginx {
        /// `hash` (`hash $request_uri consistent`) or `random2` (`random two least_conn`).
        mode: String,
    },
}

/// A front end and its policy, as named in reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Variant {
    /// Name in reports and `--only`.
    pub name: String,
    /// What runs.
    pub engine: Engine,
}

impl Variant {
    fn triage(name: &str, policy: &str, mechanism: &str) -> Variant {
        Variant {
            name: name.into(),
            engine: Engine::Triage {
                policy: policy.into(),
                mechanism: mechanism.into(),
            },
        }
    }

    /// Whether it is HAProxy or nginx.
    pub fn is_peer(&self) -> bool {
        !matches!(self.engine, Engine::Triage { .. })
    }

    /// Whether it is one of triage's LARD family (LARD, LARD/R, extended LARD).
    pub fn is_lard_family(&self) -> bool {
        matches!(&self.engine, Engine::Triage { policy, .. } if policy.contains("lard"))
    }
}

/// Every variant, in report order.
pub fn all_variants() -> Vec<Variant> {
    let mut v = vec![
        Variant::triage("wrr", "wrr", "relay"),
        Variant::triage("lard", "lard", "relay"),
        Variant::triage("lard-r", "lard-r", "relay"),
        Variant::triage("ext-lard", "ext-lard", "relay"),
        Variant::triage("chbl", "chbl", "relay"),
        // Persistent connections: LARD with no mechanism to distribute a connection's later
        // requests (single handoff: the connection stays where its first request went), and
        // extended LARD with back-end forwarding.
        Variant::triage("lard-pin", "lard", "pin"),
        Variant::triage("ext-lard-forward", "ext-lard", "forward"),
    ];
    for b in ["roundrobin", "leastconn", "uri"] {
        v.push(Variant {
            name: format!("haproxy-{b}"),
            engine: Engine::Haproxy { balance: b.into() },
        });
    }
    for m in ["hash", "random2"] {
        v.push(Variant {
            name: format!("nginx-{m}"),
            engine: Engine::Nginx { mode: m.into() },
        });
    }
    v
}

/// What a point is for (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Every variant at the largest back-end count, working set above a cache.
    Headline,
    /// WRR and LARD at a smaller back-end count.
    Scale,
    /// The working set fits one back end's cache.
    Fits,
    /// One request per client connection.
    Close,
    /// A back end killed mid-window.
    Failover,
}

impl Role {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Role::Headline => "headline",
            Role::Scale => "scale",
            Role::Fits => "fits",
            Role::Close => "close",
            Role::Failover => "failover",
        }
    }
}

/// One point to measure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterPoint {
    /// The front end and policy.
    pub variant: Variant,
    /// What the point is for.
    pub role: Role,
    /// Back ends.
    pub nodes: usize,
    /// Content cache of each back end, bytes.
    pub cache: u64,
    /// Mean requests per client connection (1: no keep-alive).
    pub per_conn: u32,
    /// Client connections.
    pub conns: usize,
    /// Repetition (0-based).
    pub rep: usize,
}

/// The lab's parameters, resolved.
#[derive(Debug, Clone, Serialize)]
pub struct Params {
    /// Back-end counts; the largest is the headline's.
    pub nodes: Vec<usize>,
    /// Content cache per back end when the working set exceeds it, bytes.
    pub cache_exceeds: u64,
    /// Total size of the synthetic trace's files, bytes (a replayed log: what it holds).
    pub working_set: u64,
    /// Requests in the synthetic trace (the client cycles through them).
    pub requests: usize,
    /// Warm-up per point, s.
    pub warmup_s: f64,
    /// Window per point, s.
    pub window_s: f64,
    /// Repetitions of the headline points.
    pub reps: usize,
    /// Client connections per point (`None`: LARD's admission limit for the point's back ends).
    pub conns: Option<usize>,
    /// Mean requests per kept-alive client connection (P-HTTP: a page and its objects).
    pub per_conn: u32,
    /// The emulated disk's time scale.
    pub disk_scale: f64,
    /// The variants, in report order.
    pub variants: Vec<String>,
}

/// Mean requests per kept-alive client connection: about a page and its embedded objects
/// (seed 004's P-HTTP traces averaged a handful of requests per connection).
pub const PER_CONN: u32 = 8;

/// The default content cache of one back end for a working set of `working_set` bytes when
/// the largest back-end count is `nmax`: `working_set / max(2 * nmax, 8)`.
///
/// Seed 004's gain of LARD over WRR comes from the cluster's caches together holding what one
/// back end's cannot: the LARD paper's 2-4x are for clusters whose aggregate cache approaches
/// the working set, while each back end's alone is far below it. So the share is set for the
/// cluster, not for one back end: at the largest back-end count the caches together hold half
/// the working set (the full run's 8 back ends with 1/16 each), and one cache never holds more
/// than an eighth (the quick run's 4 back ends: 1/8 each, the working set 8x one cache). A
/// fixed 1/16 with the quick run's 4 back ends left the cluster a quarter of the working set:
/// `triage sim lard` gives LARD 1.58x WRR there against 2.3x at half, which measured the
/// quick run's smaller cluster, not the policy (see docs/cluster.md).
pub fn default_cache(working_set: u64, nmax: usize) -> u64 {
    working_set / (2 * nmax as u64).max(8)
}

/// LARD's admission limit for `n` back ends with the paper's thresholds (the simulator's
/// closed-loop load): `(n-1)*65 + 25 - 1`.
pub fn admission_limit(n: usize) -> usize {
    policy::dispatch::DispatchConfig::default().admission_limit(n)
}

/// The parameters and variants `o` asks for (an error names a bad option).
pub fn resolve(o: &ClusterOpts) -> Result<(Params, Vec<Variant>)> {
    let bad = |m: String| Err(LabError::Config(m));
    let nodes = o.nodes.clone().unwrap_or_else(|| {
        if o.quick {
            vec![1, 2, 4]
        } else {
            vec![1, 2, 4, 8]
        }
    });
    if nodes.is_empty() || nodes.iter().any(|&n| n == 0 || n > 16) {
        return bad("--nodes: back-end counts in 1..=16".into());
    }
    let mut nodes = nodes;
    nodes.sort_unstable();
    nodes.dedup();
    if !(0.3..=1.5).contains(&o.zipf) {
        return bad(format!(
            "--zipf {}: use 0.3..1.5 (web traces: 0.6-1.0)",
            o.zipf
        ));
    }
    if !(o.disk_scale > 0.0 && o.disk_scale <= 10.0) {
        return bad(format!("--disk-scale {}: use (0, 10]", o.disk_scale));
    }
    if !(0.0..1.0).contains(&o.hit_tolerance) || !(0.0..10.0).contains(&o.balance_tolerance) {
        return bad("--hit-tolerance in [0, 1), --balance-tolerance in [0, 10)".into());
    }
    let working_set = o
        .working_set
        .unwrap_or(if o.quick { 40 << 20 } else { 64 << 20 });
    if !(1 << 20..=4 << 30).contains(&working_set) {
        return bad("--working-set: 1MiB..4GiB".into());
    }
    let nmax = *nodes.last().expect("checked: not empty");
    let cache_exceeds = o
        .cache
        .unwrap_or(default_cache(working_set, nmax).max(1 << 20));
    if cache_exceeds == 0 {
        return bad("--cache must be > 0".into());
    }
    let secs = |d: Option<std::time::Duration>, quick: f64, full: f64| {
        d.map_or(if o.quick { quick } else { full }, |d| d.as_secs_f64())
    };
    let window_s = secs(o.window, 3.0, 6.0);
    let warmup_s = secs(o.warmup, 2.0, 4.0);
    if window_s < 1.0 {
        return bad("--window: at least 1s (wrk measures whole seconds)".into());
    }
    let reps = o.reps.unwrap_or(if o.quick { 2 } else { 3 });
    if reps == 0 || reps > 20 {
        return bad("--reps: 1..=20".into());
    }
    if o.conns == Some(0) {
        return bad("--conns must be > 0".into());
    }
    let mut variants = all_variants();
    if !o.peers {
        variants.retain(|v| !v.is_peer());
    }
    if let Some(only) = &o.only {
        for name in only {
            if !all_variants().iter().any(|v| &v.name == name) {
                return bad(format!(
                    "--only: unknown variant `{name}` (known: {})",
                    all_variants()
                        .iter()
                        .map(|v| v.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        variants.retain(|v| only.contains(&v.name));
    }
    if variants.is_empty() {
        return bad("no variant left to run".into());
    }
    let p = Params {
        nodes,
        cache_exceeds,
        working_set,
        requests: if o.quick { 100_000 } else { 200_000 },
        warmup_s,
        window_s,
        reps,
        conns: o.conns,
        per_conn: PER_CONN,
        disk_scale: o.disk_scale,
        variants: variants.iter().map(|v| v.name.clone()).collect(),
    };
    Ok((p, variants))
}

/// The sessions (one point each) in measuring order: the headline repetitions interleaved,
/// then the scaling curve, the fitting working set, the runs without keep-alive and the
/// failover. `fits_cache` is a cache that holds the whole working set.
pub fn sessions(p: &Params, variants: &[Variant], fits_cache: u64) -> Vec<Session<ClusterPoint>> {
    let nmax = *p.nodes.last().expect("resolve keeps one node count");
    let conns = |n: usize| p.conns.unwrap_or_else(|| admission_limit(n));
    let point = |v: &Variant, role, nodes, cache, per_conn, rep| ClusterPoint {
        variant: v.clone(),
        role,
        nodes,
        cache,
        per_conn,
        conns: conns(nodes),
        rep,
    };
    let mut pts = Vec::new();
    for rep in 0..p.reps {
        for v in variants {
            pts.push(point(
                v,
                Role::Headline,
                nmax,
                p.cache_exceeds,
                p.per_conn,
                rep,
            ));
        }
    }
    let base: Vec<&Variant> = variants
        .iter()
        .filter(|v| v.name == "wrr" || v.name == "lard")
        .collect();
    for &n in p.nodes.iter().filter(|&&n| n != nmax) {
        for v in &base {
            pts.push(point(v, Role::Scale, n, p.cache_exceeds, p.per_conn, 0));
        }
    }
    for v in &base {
        pts.push(point(v, Role::Fits, nmax, fits_cache, p.per_conn, 0));
    }
    for v in &base {
        pts.push(point(v, Role::Close, nmax, p.cache_exceeds, 1, 0));
    }
    if nmax >= 2 {
        if let Some(v) = variants.iter().find(|v| v.name == "lard") {
            pts.push(point(
                v,
                Role::Failover,
                nmax,
                p.cache_exceeds,
                p.per_conn,
                0,
            ));
        }
    }
    pts.into_iter()
        .enumerate()
        .map(|(i, pt)| Session {
            variant: pt.variant.name.clone(),
            dir: format!(
                "{i:03}-{}-{}-n{}",
                pt.variant.name,
                pt.role.name(),
                pt.nodes
            ),
            points: vec![pt],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn quick_plan_has_every_role_and_interleaves_repetitions() {
        let mut o = ClusterOpts::new(PathBuf::from("/bin/true"));
        o.quick = true;
        let (p, v) = resolve(&o).unwrap();
        assert_eq!(p.nodes, vec![1, 2, 4]);
        // Four back ends: each caches an eighth, together half the working set.
        assert_eq!(p.cache_exceeds, (40 << 20) / 8);
        assert_eq!((p.reps, p.window_s, p.warmup_s), (2, 3.0, 2.0));
        assert_eq!(v.len(), 12);
        let s = sessions(&p, &v, 1 << 30);
        assert!(s.iter().all(|s| s.points.len() == 1));
        let pts: Vec<&ClusterPoint> = s.iter().map(|s| &s.points[0]).collect();
        // 12 variants x 2 reps, WRR and LARD at 1 and 2 back ends, fits, close, failover.
        assert_eq!(pts.len(), 24 + 4 + 2 + 2 + 1);
        assert_eq!((pts[0].rep, pts[12].rep), (0, 1));
        assert_eq!(pts[0].variant.name, pts[12].variant.name);
        assert!(pts[..24]
            .iter()
            .all(|p| p.nodes == 4 && p.role == Role::Headline));
        assert_eq!(pts[0].conns, 3 * 65 + 24);
        let close: Vec<_> = pts.iter().filter(|p| p.role == Role::Close).collect();
        assert!(close.iter().all(|p| p.per_conn == 1));
        let fits = pts.iter().find(|p| p.role == Role::Fits).unwrap();
        assert_eq!(fits.cache, 1 << 30);
        let f = pts.last().unwrap();
        assert_eq!((f.role, f.variant.name.as_str()), (Role::Failover, "lard"));
        // Directory names are unique.
        let mut dirs: Vec<_> = s.iter().map(|s| s.dir.clone()).collect();
        dirs.sort();
        dirs.dedup();
        assert_eq!(dirs.len(), s.len());
    }

    #[test]
    fn options_are_checked() {
        let mut o = ClusterOpts::new(PathBuf::from("/bin/true"));
        o.only = Some(vec!["lard".into(), "haproxy-uri".into()]);
        o.peers = false;
        let (p, v) = resolve(&o).unwrap();
        assert_eq!(p.variants, vec!["lard"]);
        assert!(v[0].is_lard_family() && !v[0].is_peer());
        o.only = Some(vec!["nope".into()]);
        assert!(resolve(&o).unwrap_err().to_string().contains("known: wrr"));
        o.only = None;
        o.nodes = Some(vec![0]);
        assert!(resolve(&o).is_err());
        o.nodes = Some(vec![4, 2, 2]);
        assert_eq!(resolve(&o).unwrap().0.nodes, vec![2, 4]);
        o.zipf = 3.0;
        assert!(resolve(&o).is_err());
        o.zipf = 0.8;
        // The full run's 8 back ends: a sixteenth each; 16 back ends: a thirty-second.
        o.nodes = None;
        assert_eq!(resolve(&o).unwrap().0.cache_exceeds, (64 << 20) / 16);
        o.nodes = Some(vec![16]);
        assert_eq!(resolve(&o).unwrap().0.cache_exceeds, (64 << 20) / 32);
        o.cache = Some(3 << 20);
        assert_eq!(resolve(&o).unwrap().0.cache_exceeds, 3 << 20);
    }
}
