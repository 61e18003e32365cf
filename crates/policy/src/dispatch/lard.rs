//! `lard`: locality-aware request distribution (Pai et al., ASPLOS 1998; seed 004), the basic
//! strategy: each target is served by one node, so the cluster's caches partition the working
//! set, and a target moves only when its node is overloaded.
//!
//! ```text
//! if server[target] is unset:            server[target] = least loaded node
//! else n = server[target]; if (load(n) > T_high and some node has load < T_low)
//!                             or load(n) >= 2 * T_high:
//!                                        server[target] = least loaded node
//! send to server[target]
//! ```
//! Load = active connections (passed in). Ties in "least loaded" go to the lowest index.

use super::{check_thresholds, least_loaded, load, Dispatch, DispatchConfig, DispatchStats, Entry};
use super::{NodeId, Target};
use crate::config::PolicyError;
use crate::idhash::IdMap;
use crate::Nanos;

/// Basic LARD. See the module docs.
#[derive(Debug, Clone)]
pub struct Lard {
    nodes: usize,
    t_low: u32,
    t_high: u32,
    server: IdMap<Target, NodeId>,
    reassignments: u64,
}

impl Lard {
    /// For `nodes` back ends, with `cfg`'s thresholds (T_low < T_high).
    pub fn new(nodes: usize, cfg: &DispatchConfig) -> Result<Self, PolicyError> {
        check_thresholds("lard", cfg)?;
        Ok(Self {
            nodes: nodes.max(1),
            t_low: cfg.t_low,
            t_high: cfg.t_high,
            server: IdMap::default(),
            reassignments: 0,
        })
    }

    /// The node currently serving `target`, if any.
    pub fn server(&self, target: Target) -> Option<NodeId> {
        self.server.get(&target).copied()
    }
}

/// LARD's move condition for a node with load `l`.
pub(crate) fn overloaded(l: u32, loads: &[u32], nodes: usize, t_low: u32, t_high: u32) -> bool {
    let some_idle = (0..nodes).any(|i| load(loads, i) < t_low);
    (l > t_high && some_idle) || l >= 2 * t_high
}

/// Least loaded of `nodes` nodes.
pub(crate) fn least(loads: &[u32], nodes: usize) -> NodeId {
    if loads.len() >= nodes {
        least_loaded(&loads[..nodes]).unwrap_or(0)
    } else {
        // Missing loads count as 0: the first missing node.
        loads.len()
    }
}

impl Dispatch for Lard {
    fn name(&self) -> &str {
        "lard"
    }

    fn nodes(&self) -> usize {
        self.nodes
    }

    fn assign(&mut self, target: Target, loads: &[u32], _now: Nanos) -> NodeId {
        let chosen = match self.server.get(&target).copied() {
            None => least(loads, self.nodes),
            Some(n) if overloaded(load(loads, n), loads, self.nodes, self.t_low, self.t_high) => {
                let m = least(loads, self.nodes);
                if m != n {
                    self.reassignments += 1;
                }
                m
            }
            Some(n) => n,
        };
        self.server.insert(target, chosen);
        chosen
    }

    fn stats(&self) -> DispatchStats {
        DispatchStats {
            targets: self.server.len(),
            reassignments: self.reassignments,
            shrinks: 0,
        }
    }
}

/// Registry entry.
pub const ENTRY: Entry = Entry {
    name: "lard",
    about: "locality-aware: one node per target, moved when its load > T_high while another is \
            < T_low, or >= 2 T_high",
    build: |n, cfg| Ok(Box::new(Lard::new(n, cfg)?)),
};

#[cfg(test)]
mod tests {
    use super::*;

    fn lard(n: usize) -> Lard {
        Lard::new(n, &DispatchConfig::default()).unwrap()
    }

    #[test]
    fn first_request_goes_to_the_least_loaded_and_sticks() {
        let mut l = lard(3);
        assert_eq!(l.assign(7, &[5, 2, 9], 0), 1);
        // Sticks while its node is not overloaded, even if others are idler.
        assert_eq!(l.assign(7, &[0, 65, 0], 0), 1);
        assert_eq!(l.server(7), Some(1));
        assert_eq!(l.stats().reassignments, 0);
    }

    #[test]
    fn moves_above_t_high_only_when_a_node_is_below_t_low() {
        let mut l = lard(3);
        l.assign(7, &[0, 1, 1], 0);
        // 66 > T_high, but nobody is below T_low = 25: stays.
        assert_eq!(l.assign(7, &[66, 25, 30], 0), 0);
        // Node 2 drops to 24 < T_low: moves there.
        assert_eq!(l.assign(7, &[66, 25, 24], 0), 2);
        assert_eq!(l.server(7), Some(2));
        assert_eq!(l.stats().reassignments, 1);
    }

    #[test]
    fn moves_at_twice_t_high_regardless() {
        let mut l = lard(2);
        l.assign(1, &[0, 0], 0);
        assert_eq!(l.assign(1, &[129, 100], 0), 0);
        assert_eq!(l.assign(1, &[130, 100], 0), 1);
    }

    #[test]
    fn rejects_inverted_thresholds() {
        let cfg = DispatchConfig {
            t_low: 70,
            ..DispatchConfig::default()
        };
        assert!(Lard::new(2, &cfg).is_err());
    }
}
