//! Request distribution for a cluster front end: which back end serves a request, decided
//! purely (no I/O, no clock: the time is passed in), so the simulator (`triage sim lard`) and a
//! real front end can drive the same objects.
//!
//! A [`Dispatch`] policy is asked, for every new request (connection), which node gets it,
//! given the request's *target* (the URL, as a [`Target`] id, see [`target_id`]) and every
//! node's current load (its active connections, kept by the mechanism). One file per policy,
//! listed in [`REGISTRY`]:
//! - [`wrr`]: weighted round robin (load-based only, the LARD paper's baseline);
//! - [`lard`]: locality-aware request distribution, T_low / T_high (seed 004);
//! - [`lard_r`]: LARD with replication (a target's server set grows under load, shrinks after
//!   K seconds without change);
//! - [`ext_lard`]: extended LARD (Aron, Druschel, Zwaenepoel, USENIX 1999; seed 004): LARD/R
//!   for a connection's first request, then, for each further request on the persistent
//!   connection, serve it where the connection is or forward it to a node that caches it
//!   ([`Dispatch::route`]);
//! - [`chbl`]: consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam, SODA
//!   2018): no node above `ceil(c * mean load)`.
//!
//! A real front end also tells a policy which nodes are up ([`Dispatch::set_up`], kept in
//! [`members::Members`]): a node that is down is never chosen while another is up, and the
//! targets a LARD table assigned to it are forgotten, so they are reassigned at their next
//! request. The simulator never marks a node down.

pub mod members;

pub mod chbl;
pub mod ext_lard;
pub mod lard;
pub mod lard_r;
pub mod wrr;

use crate::config::PolicyError;
use crate::{Nanos, SEC};

/// Index of a back-end node, `0..nodes`.
pub type NodeId = usize;

/// A request target (URL) as a 64-bit id. Mechanisms that know URLs use [`target_id`]; the
/// simulator uses file numbers.
pub type Target = u64;

/// FNV-1a 64 of a URL path: a stable [`Target`] id (the same in every process and run).
pub fn target_id(url: &str) -> Target {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in url.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// SplitMix64's finalizer: a cheap, well-mixed, deterministic 64-bit hash.
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The node with the smallest load; ties go to the lowest index. `None` when `loads` is empty.
pub fn least_loaded(loads: &[u32]) -> Option<NodeId> {
    loads
        .iter()
        .enumerate()
        .min_by_key(|&(i, &l)| (l, i))
        .map(|(i, _)| i)
}

/// Load of node `n`, 0 if the mechanism passed fewer loads than nodes.
pub fn load(loads: &[u32], n: NodeId) -> u32 {
    loads.get(n).copied().unwrap_or(0)
}

/// Counters a distribution policy exposes.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DispatchStats {
    /// Targets the policy holds state for.
    pub targets: usize,
    /// Targets moved to another node (LARD) or given an extra node (LARD/R).
    pub reassignments: u64,
    /// Nodes removed from a target's server set (LARD/R).
    pub shrinks: u64,
    /// Assignments dropped because their node went down (LARD, LARD/R, extended LARD): those
    /// targets are reassigned at their next request.
    pub forgotten: u64,
}

/// Where a request on a persistent connection goes when the connection is pinned to one node
/// (back-end forwarding, [`Dispatch::route`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The node handling the connection serves it itself (from its cache or its disk).
    Serve(NodeId),
    /// The handling node fetches the response from `server` (which caches the target) and
    /// relays it.
    Forward {
        /// The node the connection is pinned to.
        handler: NodeId,
        /// The node that serves the target.
        server: NodeId,
    },
}

impl Route {
    /// The node whose cache or disk serves the request.
    pub fn server(&self) -> NodeId {
        match *self {
            Route::Serve(n) => n,
            Route::Forward { server, .. } => server,
        }
    }
}

/// A request-distribution policy. Implementations must be deterministic functions of the calls
/// they receive.
pub trait Dispatch: Send {
    /// Registry name.
    fn name(&self) -> &str;

    /// Number of back ends.
    fn nodes(&self) -> usize;

    /// The node that serves a new request for `target`. `loads[i]` is node `i`'s load (active
    /// connections) *before* this request; the mechanism adds it to the chosen node.
    fn assign(&mut self, target: Target, loads: &[u32], now: Nanos) -> NodeId;

    /// A request for `target` on a persistent connection pinned to node `handler` (back-end
    /// forwarding): serve it there, or have `handler` fetch it from another node. `disk[i]` is
    /// node `i`'s disk queue (reads waiting or in service; missing = 0). Default: the node
    /// [`Dispatch::assign`] picks, reached through `handler` when it is another.
    fn route(
        &mut self,
        target: Target,
        handler: NodeId,
        loads: &[u32],
        disk: &[u32],
        now: Nanos,
    ) -> Route {
        let _ = disk;
        match self.assign(target, loads, now) {
            n if n == handler => Route::Serve(handler),
            server => Route::Forward { handler, server },
        }
    }

    /// Node `node` went down (`false`: failed, or left the configuration) or came back up
    /// (`true`). A node that is down is not chosen while another is up; what the policy
    /// assigned to it is forgotten. Every node starts up.
    fn set_up(&mut self, node: NodeId, up: bool);

    /// Counters (default: none).
    fn stats(&self) -> DispatchStats {
        DispatchStats::default()
    }
}

/// Parameters of the distribution policies; each uses the fields it needs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DispatchConfig {
    /// LARD: a node below this load is underloaded (paper: 25 connections).
    pub t_low: u32,
    /// LARD: a node above this load is overloaded (paper: 65 connections).
    pub t_high: u32,
    /// LARD/R: a server set unchanged for this long loses its most loaded node (paper: 20 s).
    pub replica_ttl: Nanos,
    /// Bounded-load hashing: the factor `c`, in thousandths (1250 = 1.25).
    pub bound_permille: u32,
    /// Bounded-load hashing: points per node on the ring.
    pub vnodes: u32,
    /// WRR: one weight per node (empty: all 1).
    pub weights: Vec<u32>,
    /// Extended LARD: a connection's node whose disk has this many reads queued or in service
    /// is busy, so a target it does not cache is forwarded to a node that does rather than
    /// read from its disk (1: read locally only when the disk is idle).
    #[serde(default = "default_disk_busy")]
    pub disk_busy: u32,
}

fn default_disk_busy() -> u32 {
    1
}

impl Default for DispatchConfig {
    fn default() -> Self {
        Self {
            t_low: 25,
            t_high: 65,
            replica_ttl: 20 * SEC,
            bound_permille: 1250,
            vnodes: 100,
            weights: Vec::new(),
            disk_busy: default_disk_busy(),
        }
    }
}

impl DispatchConfig {
    /// LARD's admission limit: the front end keeps at most `(n-1) * T_high + T_low - 1`
    /// connections in the cluster, so that no node can be driven past `2 * T_high` while
    /// another is idle (seed 004's LARD paper, §2.3).
    pub fn admission_limit(&self, nodes: usize) -> usize {
        ((nodes.max(1) - 1) * self.t_high as usize + self.t_low as usize)
            .saturating_sub(1)
            .max(1)
    }
}

/// Builds a policy for a number of nodes.
pub type BuildFn = fn(usize, &DispatchConfig) -> Result<Box<dyn Dispatch>, PolicyError>;

/// One registered distribution policy.
pub struct Entry {
    /// Registry name (`wrr`, `lard`, ...).
    pub name: &'static str,
    /// One line for `--help` and docs.
    pub about: &'static str,
    /// Builds the policy.
    pub build: BuildFn,
}

/// Every distribution policy.
pub const REGISTRY: &[Entry] = &[
    wrr::ENTRY,
    lard::ENTRY,
    lard_r::ENTRY,
    ext_lard::ENTRY,
    chbl::ENTRY,
];

/// Names of all distribution policies.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|e| e.name).collect()
}

/// Build the distribution policy `name` for `nodes` back ends.
pub fn build(
    name: &str,
    nodes: usize,
    cfg: &DispatchConfig,
) -> Result<Box<dyn Dispatch>, PolicyError> {
    let e = REGISTRY
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| PolicyError::Unknown {
            name: name.to_owned(),
            known: names().join(", "),
        })?;
    if nodes == 0 {
        return Err(PolicyError::Invalid {
            policy: e.name,
            msg: "needs at least one node".into(),
        });
    }
    (e.build)(nodes, cfg)
}

/// Shared validation of the LARD thresholds.
pub(crate) fn check_thresholds(
    policy: &'static str,
    cfg: &DispatchConfig,
) -> Result<(), PolicyError> {
    if cfg.t_low == 0 || cfg.t_low >= cfg.t_high {
        return Err(PolicyError::Invalid {
            policy,
            msg: format!(
                "need 0 < t_low < t_high (got t_low = {}, t_high = {})",
                cfg.t_low, cfg.t_high
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever goes down and comes back, no policy chooses (or routes to) a node that is
        /// down while another is up.
        #[test]
        fn no_policy_chooses_a_down_node(
            ops in prop::collection::vec((0u64..40, 0usize..5, 0u32..140, any::<bool>()), 1..300),
        ) {
            for name in names() {
                let mut p = build(name, 5, &DispatchConfig::default()).unwrap();
                let mut up = [true; 5];
                let mut loads = [0u32; 5];
                for &(target, who, l, flip) in &ops {
                    if flip {
                        up[who] = !up[who];
                        p.set_up(who, up[who]);
                        continue;
                    }
                    loads[who] = l;
                    let n = p.assign(target, &loads, 0);
                    if up.iter().any(|&u| u) {
                        prop_assert!(up[n], "{name} chose down node {n}, up {up:?}");
                        // A mechanism routes only requests of connections on nodes that are up.
                        if up[who] {
                            let r = p.route(target, who, &loads, &loads, 0);
                            prop_assert!(up[r.server()], "{name} routed to {r:?}, up {up:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn registry_builds_every_policy_with_defaults() {
        for name in names() {
            let d = build(name, 4, &DispatchConfig::default()).expect(name);
            assert_eq!(d.name(), name);
            assert_eq!(d.nodes(), 4);
        }
        assert!(build("random", 4, &DispatchConfig::default()).is_err());
        assert!(build("lard", 0, &DispatchConfig::default()).is_err());
    }

    #[test]
    fn least_loaded_breaks_ties_by_index() {
        assert_eq!(least_loaded(&[3, 1, 1, 2]), Some(1));
        assert_eq!(least_loaded(&[]), None);
    }

    #[test]
    fn admission_limit_is_the_papers() {
        let c = DispatchConfig::default();
        assert_eq!(c.admission_limit(1), 24);
        assert_eq!(c.admission_limit(8), 7 * 65 + 24);
    }

    #[test]
    fn target_id_is_stable() {
        assert_eq!(target_id(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(target_id("/a.html"), target_id("/a.html"));
        assert_ne!(target_id("/a.html"), target_id("/b.html"));
    }
}
