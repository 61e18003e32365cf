//! `ext-lard`: extended LARD (Aron, Druschel, Zwaenepoel, "Efficient Support for P-HTTP in
//! Cluster-Based Web Servers", USENIX 1999; seed 004), for persistent connections with
//! back-end forwarding: a connection is handed to one node for good, and a later request on it
//! for a target that node does not cache is either read from that node's disk or forwarded to
//! a node that caches it.
//!
//! ```text
//! first request of a connection:    LARD/R picks the node (the connection's handler h)
//! each further request for target t:
//!   if h is in server_set(t):          serve at h (a cache hit there)
//!   else if set is empty
//!        or disk(h) < disk_busy:       serve at h from its disk; add h to server_set(t)
//!   else m = least loaded node of the set:
//!        if m is not overloaded:       forward to m (h fetches it from m and relays it)
//!        else:                         serve at h from its disk, not added to the set
//! ```
//! The paper's reasoning: while the handler's disk is idle, reading there costs no forwarding;
//! when it is busy, the handler's cache is taken to be thrashing, so the target is not cached
//! there and a node that caches it serves it. "Overloaded" is LARD's rule (load > T_high while
//! some node is below T_low, or load >= 2 T_high). Asked for a connection's first request, or
//! per request by a mechanism that relays every request ([`Dispatch::assign`]), it is LARD/R.

use super::lard_r::LardR;
use super::{load, Dispatch, DispatchConfig, DispatchStats, Entry, NodeId, Route, Target};
use crate::config::PolicyError;
use crate::Nanos;

/// How extended LARD routed the requests it was asked about with [`Dispatch::route`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RouteStats {
    /// Served where the connection is, which caches the target.
    pub local_hits: u64,
    /// Served where the connection is, read from its idle disk (and cached there).
    pub local_reads: u64,
    /// Forwarded to a node that caches the target.
    pub forwards: u64,
    /// Served where the connection is from a busy disk, every caching node being overloaded.
    pub overflow_reads: u64,
}

/// Extended LARD. See the module docs.
#[derive(Debug, Clone)]
pub struct ExtLard {
    lard_r: LardR,
    disk_busy: u32,
    routes: RouteStats,
}

impl ExtLard {
    /// For `nodes` back ends, with `cfg`'s LARD thresholds, LARD/R's shrink time and
    /// `disk_busy`.
    pub fn new(nodes: usize, cfg: &DispatchConfig) -> Result<Self, PolicyError> {
        if cfg.disk_busy == 0 {
            return Err(PolicyError::Invalid {
                policy: "ext-lard",
                msg: "disk_busy must be at least 1 (a disk with no read is idle)".into(),
            });
        }
        Ok(Self {
            lard_r: LardR::new(nodes, cfg).map_err(|e| match e {
                PolicyError::Invalid { msg, .. } => PolicyError::Invalid {
                    policy: "ext-lard",
                    msg,
                },
                other => other,
            })?,
            disk_busy: cfg.disk_busy,
            routes: RouteStats::default(),
        })
    }

    /// The nodes believed to cache `target`.
    pub fn server_set(&self, target: Target) -> Vec<NodeId> {
        self.lard_r.server_set(target)
    }

    /// How the requests asked about with [`Dispatch::route`] were routed.
    pub fn route_stats(&self) -> &RouteStats {
        &self.routes
    }
}

impl Dispatch for ExtLard {
    fn name(&self) -> &str {
        "ext-lard"
    }

    fn nodes(&self) -> usize {
        self.lard_r.nodes()
    }

    fn assign(&mut self, target: Target, loads: &[u32], now: Nanos) -> NodeId {
        self.lard_r.assign(target, loads, now)
    }

    fn route(
        &mut self,
        target: Target,
        handler: NodeId,
        loads: &[u32],
        disk: &[u32],
        now: Nanos,
    ) -> Route {
        if self.lard_r.in_set(target, handler) {
            self.routes.local_hits += 1;
            return Route::Serve(handler);
        }
        let least = self.lard_r.least_in_set(target, loads);
        if least.is_none() || load(disk, handler) < self.disk_busy {
            self.lard_r.add_to_set(target, handler, now);
            self.routes.local_reads += 1;
            return Route::Serve(handler);
        }
        match least {
            Some((server, false)) => {
                self.routes.forwards += 1;
                Route::Forward { handler, server }
            }
            _ => {
                self.routes.overflow_reads += 1;
                Route::Serve(handler)
            }
        }
    }

    fn set_up(&mut self, node: NodeId, up: bool) {
        self.lard_r.set_up(node, up);
    }

    fn stats(&self) -> DispatchStats {
        self.lard_r.stats()
    }
}

/// Registry entry.
pub const ENTRY: Entry = Entry {
    name: "ext-lard",
    about: "extended LARD (P-HTTP): LARD/R per connection; a later request on it is served \
            where the connection is when cached there or its disk is idle, else forwarded to a \
            node that caches it",
    build: |n, cfg| Ok(Box::new(ExtLard::new(n, cfg)?)),
};

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(n: usize) -> ExtLard {
        ExtLard::new(n, &DispatchConfig::default()).unwrap()
    }

    #[test]
    fn first_requests_are_lard_r() {
        let mut e = ext(3);
        let mut r = LardR::new(3, &DispatchConfig::default()).unwrap();
        for (t, loads) in [(1u64, [3, 0, 9]), (1, [10, 66, 30]), (2, [0, 0, 1])] {
            assert_eq!(e.assign(t, &loads, 0), r.assign(t, &loads, 0));
        }
    }

    #[test]
    fn cached_at_the_handler_is_served_there() {
        let mut e = ext(3);
        assert_eq!(e.assign(7, &[0, 5, 5], 0), 0);
        // Handler 0 caches 7: served locally even with a busy disk.
        assert_eq!(e.route(7, 0, &[9, 0, 0], &[4, 0, 0], 0), Route::Serve(0));
        assert_eq!(e.route_stats().local_hits, 1);
    }

    #[test]
    fn idle_disk_reads_locally_and_caches_there() {
        let mut e = ext(3);
        e.assign(7, &[0, 5, 5], 0); // set {0}
        assert_eq!(e.route(7, 1, &[1, 1, 1], &[0, 0, 0], 0), Route::Serve(1));
        assert_eq!(e.server_set(7), vec![0, 1]);
        // A target nobody caches is read by the handler whatever its disk.
        assert_eq!(e.route(8, 2, &[1, 1, 1], &[0, 0, 3], 0), Route::Serve(2));
        assert_eq!(e.server_set(8), vec![2]);
        assert_eq!(e.route_stats().local_reads, 2);
    }

    #[test]
    fn busy_disk_forwards_to_the_least_loaded_caching_node() {
        let mut e = ext(4);
        e.assign(7, &[0, 5, 5, 5], 0); // {0}
        e.route(7, 1, &[0, 0, 0, 0], &[0, 0, 0, 0], 0); // {0, 1}
        let r = e.route(7, 2, &[10, 3, 0, 0], &[0, 0, 2, 0], 0);
        assert_eq!(
            r,
            Route::Forward {
                handler: 2,
                server: 1
            }
        );
        assert_eq!(r.server(), 1);
        // Not cached at the handler afterwards.
        assert_eq!(e.server_set(7), vec![0, 1]);
        assert_eq!(e.route_stats().forwards, 1);
    }

    #[test]
    fn overloaded_caching_nodes_leave_it_to_the_handlers_disk() {
        let mut e = ext(3);
        // Set {0}; node 0 above 2 T_high: overloaded whatever the others.
        e.assign(7, &[0, 5, 5], 0);
        let r = e.route(7, 1, &[130, 0, 0], &[0, 5, 0], 0);
        assert_eq!(r, Route::Serve(1));
        assert_eq!(e.server_set(7), vec![0]);
        assert_eq!(e.route_stats().overflow_reads, 1);
    }

    #[test]
    fn a_down_node_leaves_the_sets() {
        let mut e = ext(3);
        e.assign(7, &[0, 5, 5], 0);
        e.set_up(0, false);
        assert!(e.server_set(7).is_empty());
        assert_eq!(e.stats().forgotten, 1);
        assert_eq!(e.assign(7, &[0, 5, 4], 0), 2);
    }

    #[test]
    fn the_default_route_of_other_policies_follows_assign() {
        let mut l = super::super::build("lard", 2, &DispatchConfig::default()).unwrap();
        assert_eq!(l.assign(3, &[0, 1], 0), 0);
        assert_eq!(l.route(3, 0, &[0, 1], &[], 0), Route::Serve(0));
        assert_eq!(
            l.route(3, 1, &[0, 1], &[], 0),
            Route::Forward {
                handler: 1,
                server: 0
            }
        );
    }

    #[test]
    fn rejects_a_zero_disk_threshold() {
        let cfg = DispatchConfig {
            disk_busy: 0,
            ..DispatchConfig::default()
        };
        assert!(ExtLard::new(2, &cfg).is_err());
    }
}
